"""`ok ask`: extractive answers without an LLM, grounded answers with a local chat server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.openai_stub import chat_server
from helpers.run import run_ok

from openkl.knowledge.ask import keep_markers, markers, sentences

MARK = re.compile(r"\[(\d+)\]")


def _check_markers(res: dict) -> None:
    """Every [N] in the answer names a citation carrying that `n`, and each quote is the
    text at its span."""
    ns = {c["n"] for c in res["citations"]}
    used = {int(n) for n in MARK.findall(res["answer"])}
    assert used and used <= ns


def _quote_at_span(root: Path, cite: dict) -> None:
    text = (root / cite["path"]).read_text(encoding="utf-8")
    assert text[cite["loc"]["start"] : cite["loc"]["end"]] == cite["quote"]


def test_extractive_answer_cites_sentences(example_kf: Path) -> None:
    r = run_ok("ask", "who wrote the first computer program", "--json")
    assert r.code == 0, r.err
    res = r.json()
    assert res["mode"] == "extractive" and res["model"] is None
    assert not res["insufficient"]
    assert res["confidence_label"] in ("HIGH", "MEDIUM")
    first = res["citations"][0]
    assert first["n"] == 1 and "ada-lovelace" in first["path"]
    assert "first computer program" in first["quote"]
    _check_markers(res)
    for c in res["citations"]:
        _quote_at_span(example_kf, c)
        assert set(c) >= {"type", "id", "path", "sha256", "loc", "quote", "context", "source"}
    _verify(res)
    # transient citations can be opened right away
    r = run_ok("cite", "open", first["id"])
    assert r.code == 0 and ">>> It is often called the first computer program" in r.out


def test_markers_inside_a_distilled_note_do_not_leak_into_answers(example_kf: Path) -> None:
    from openkl.knowledge.ask import passages_prompt

    hit = run_ok("search", "write-ahead logging", "--in", "store", "-k", "1", "--json").json()[0]
    r = run_ok(
        "distill", "create", "WAL flushes the log before the data files [1].", hit["id"], "--json"
    )
    assert r.code == 0, r.err
    res = run_ok(
        "ask", "what does WAL flush before the data files?", "--in", "mem", "--json"
    ).json()
    [cite] = res["citations"]
    assert cite["quote"] == "WAL flushes the log before the data files [1]."  # exact, as cited
    # one marker per quoted sentence: the note's own [1] is not the answer's [1]
    assert res["answer"] == "WAL flushes the log before the data files. [1]"
    _check_markers(res)
    _verify(res)
    # a model is shown the passage without the note's markers, too
    assert "[1]" not in passages_prompt([cite]).split("\n", 1)[1]


def _verify(res: dict) -> None:
    """`ok cite verify` accepts every citation of the answer."""
    r = run_ok("cite", "verify", "-", "--json", input=json.dumps(res["citations"]))
    assert r.code == 0, r.err
    assert {v["status"] for v in r.json()} == {"verified"}
    assert len(r.json()) == len(res["citations"])


def test_extractive_answer_from_a_note(example_kf: Path) -> None:
    r = run_ok("ask", "why does the MCP server open the graph per call?", "--json")
    res = r.json()
    assert res["citations"][0]["type"] == "memory"
    _quote_at_span(example_kf, res["citations"][0])
    _verify(res)


def test_says_when_the_folder_does_not_know(example_kf: Path) -> None:
    r = run_ok("ask", "what is the population of Lima in 1950?", "--json")
    assert r.code == 1, r.err  # an answer the folder cannot give exits 1, as a search does
    res = r.json()
    assert res["insufficient"] is True
    assert res["answer"].startswith("The knowledge folder does not hold enough")
    assert res["confidence_label"] == "LOW"


def test_plain_output_lists_sources(example_kf: Path) -> None:
    r = run_ok("ask", "how are two ranked lists fused?")
    assert r.code == 0, r.err
    assert "reciprocal rank" in r.out
    assert "\n[1] store/normalized/docs/retrieval-augmented-generation.ok.md:" in r.out
    assert "extractive (no LLM)" in r.out


def test_empty_question_is_a_usage_error(example_kf: Path) -> None:
    r = run_ok("ask", "  ")
    assert r.code == 2 and "question is empty" in r.err


def test_sentences_keep_offsets() -> None:
    text = (
        "# Title\n\nFirst sentence is here, wrapped\nover two lines. Second one follows "
        "right after it!\n\n- A list item that is long enough\n| a | b |\n"
    )
    got = sentences(text, base=100)
    assert [s for _, _, s in got] == [
        "First sentence is here, wrapped\nover two lines.",
        "Second one follows right after it!",
        "A list item that is long enough",
    ]
    for s, e, sent in got:
        assert text[s - 100 : e - 100] == sent


def test_markers_parse_and_drop_unknown_numbers() -> None:
    assert markers("a [2] b [1, 3] c [2][4]") == [2, 1, 3, 4]
    assert keep_markers("A [1]. B [9]. C [2, 9].", {1, 2}) == "A [1]. B. C [2]."


# -- with an LLM ---------------------------------------------------------------------------
def _llm_env(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("OK_LLM_BASE_URL", url)
    monkeypatch.setenv("OK_LLM_MODEL", "stub-model")
    monkeypatch.setenv("OK_LLM_RETRIES", "0")


def test_llm_answer_is_grounded_and_cited(
    example_kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reply = "Ada Lovelace wrote it, in her Note G [1]. She worked with Babbage [1][7]."
    with chat_server([reply]) as stub:
        _llm_env(monkeypatch, stub.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-logged")
        r = run_ok("ask", "who wrote the first computer program", "--json", "-k", "3")
    assert r.code == 0, r.err
    res = r.json()
    assert res["mode"] == "llm" and res["model"].startswith("stub-model @ http://127.0.0.1:")
    assert "[7]" not in res["answer"] and res["answer"].count("[1]") == 2
    assert [c["n"] for c in res["citations"]] == [1]
    assert "ada-lovelace" in res["citations"][0]["path"]
    _check_markers(res)
    _verify(res)
    # the model saw numbered passages and the question, under the grounding rules
    req = stub.requests[0]
    assert req["model"] == "stub-model" and not req.get("stream")
    system, user = req["messages"][0]["content"], req["messages"][1]["content"]
    assert "only the numbered passages" in system and "INSUFFICIENT" in system
    assert user.startswith("Passages:\n\n[1] (") and user.rstrip().endswith(
        "Question: who wrote the first computer program"
    )
    assert stub.headers[0]["Authorization"] == "Bearer sk-test-not-logged"
    assert "sk-test" not in (example_kf / ".ok" / "ops.log").read_text()


def test_llm_streams_tokens(example_kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from openkl.files.folder import Folder
    from openkl.knowledge.ask import ask
    from openkl.sync.indexer import open_graph
    from openkl.text.llm import config_from

    reply = "Write-ahead logging writes changes to a log before the data files [1]."
    with chat_server([reply], chunk=5) as stub:
        _llm_env(monkeypatch, stub.url)
        f = Folder(example_kf)
        tokens: list[str] = []
        with open_graph(f) as g:
            res = ask(
                f,
                g,
                "what is write-ahead logging?",
                k=3,
                llm=config_from(f),
                on_token=tokens.append,
            )
    assert stub.requests[0]["stream"] is True
    assert len(tokens) > 5 and "".join(tokens) == reply
    assert res["answer"] == reply and res["citations"][0]["n"] == 1
    assert "write-ahead-logging" in res["citations"][0]["path"]


def test_cli_streams_the_answer_to_a_terminal(example_kf: Path) -> None:
    import os
    import pty
    import subprocess

    from helpers.run import OK_BIN

    reply = "Write-ahead logging appends each change to a log first [1]."
    with chat_server([reply], chunk=4) as stub:
        env = {
            **os.environ,
            "OK_LLM_BASE_URL": stub.url,
            "OK_LLM_MODEL": "stub-model",
            "OK_LLM_RETRIES": "0",
        }
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [OK_BIN, "ask", "what is write-ahead logging?", "-k", "3"],
            stdout=slave,
            stderr=subprocess.PIPE,
            env=env,
        )
        os.close(slave)
        out = b""
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the terminal closed
                break
            if not data:
                break
            out += data
        os.close(master)
        assert proc.wait(timeout=120) == 0, proc.stderr.read().decode() if proc.stderr else ""
    text = out.decode().replace("\r\n", "\n")
    assert stub.requests[0]["stream"] is True
    assert text.startswith(reply + "\n")
    assert "\n[1] store/normalized/docs/write-ahead-logging.ok.md:" in text
    assert "· stub-model @ http://127.0.0.1:" in text


def test_graph_is_closed_while_the_llm_answers(example_kf: Path) -> None:
    """A slow model must not keep writers out: `ok mem add` runs while `ok ask` waits."""
    import os
    import threading

    from helpers.run import run_cli, until

    answer = threading.Event()  # the model thinks until the note is written
    with chat_server(["Lovelace wrote it [1]."], hold=answer) as stub:
        env = {
            "OK_LLM_BASE_URL": stub.url,
            "OK_LLM_MODEL": "stub-model",
            "OK_LLM_RETRIES": "0",
            "OK_LLM_TIMEOUT": "300",  # the model answers once the note is written
            "OK_ROOT": os.environ["OK_ROOT"],
        }
        asked: dict = {}
        t = threading.Thread(
            target=lambda: asked.update(
                r=run_cli("ask", "who wrote the first computer program", "--json", env=env)
            )
        )
        t.start()
        try:
            until(lambda: stub.requests or not t.is_alive())
            assert stub.requests, f"ok ask never reached the model: {asked}"
            added = run_cli(
                "mem",
                "add",
                "Written while the model was thinking.",
                env={**env, "OK_LOCK_TIMEOUT": "2"},
            )
        finally:
            answer.set()
            t.join(180)
    assert not t.is_alive()
    assert added.code == 0, added.err
    assert asked["r"].code == 0, asked["r"].err
    assert asked["r"].json()["citations"][0]["n"] == 1


def test_llm_insufficient(example_kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # nothing in the folder is near Lima, so the search floor would answer before the
    # model; without it the model gets the nearest passages and says they do not tell
    monkeypatch.setenv("OK_SEARCH_MIN_SCORE", "0")
    with chat_server(["INSUFFICIENT: the passages do not mention Lima."]) as stub:
        _llm_env(monkeypatch, stub.url)
        r = run_ok("ask", "what is the population of Lima?", "--json")
    res = r.json()
    assert res["insufficient"] is True and res["citations"] == []
    assert res["answer"].endswith("the passages do not mention Lima.")


def test_llm_settings_checked_before_any_work(
    example_kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OK_LLM_BASE_URL", "https://llm.example.invalid/v1")
    monkeypatch.setenv("OK_LLM_MODEL", "m")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    r = run_ok("ask", "anything")
    assert r.code == 2
    assert "OPENAI_API_KEY is not set" in r.err and r.out == ""
    # --no-llm answers anyway
    assert run_ok("ask", "anything at all about Lovelace", "--no-llm").code == 0


def test_llm_unreachable_is_one_line_error(
    example_kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with chat_server(["x"]) as stub:
        url = stub.url
    _llm_env(monkeypatch, url)  # the server is gone now
    r = run_ok("ask", "who wrote the first computer program")
    assert r.code == 2 and r.err.startswith("Error: cannot reach the LLM endpoint")


@pytest.mark.parametrize(
    "cmd",
    [
        ("ask",),
        ("mcp",),
        ("cite", "make"),
        ("cite", "verify"),
        ("cite", "open"),
        ("cite", "list"),
        ("cite", "gc"),
        ("distill", "prompts"),
        ("distill", "get-prompt"),
        ("distill", "create"),
        ("distill", "run"),
    ],
)
def test_help_teaches_with_examples(cmd: tuple[str, ...]) -> None:
    r = run_ok(*cmd, "--help")
    assert r.code == 0
    examples = r.out.split("Examples", 1)[1].splitlines()
    assert any(line.strip().startswith("ok " + cmd[0]) for line in examples), r.out
    assert "_CLASS" not in r.out and "_SIMILARITY" not in r.out  # metavars say what to write


def test_ask_k_comes_from_the_setting(example_kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-k` wins; without it `ask.k` decides how many passages are retrieved (CLI and MCP
    resolve it the same way)."""
    q = "what does a write-ahead log do?"
    monkeypatch.setenv("OK_NOW", "2026-01-02T03:04:05Z")  # cite objects carry created_at
    eight = run_ok("ask", q, "--no-llm", "-k", "8", "--json").json()
    assert run_ok("ask", q, "--no-llm", "--json").json() == eight
    monkeypatch.setenv("OK_ASK_K", "2")
    assert run_ok("ask", q, "--no-llm", "--json").json()["retrieved"] == 2
    assert run_ok("ask", q, "--no-llm", "-k", "3", "--json").json()["retrieved"] == 3


@pytest.mark.parametrize(
    ("question", "gold"),
    [
        ("who did Ada Lovelace work with?", "Charles Babbage"),
        ("when was Ada Lovelace born?", "1815"),
        ("who adapted CRISPR for editing the genomes of human cells?", "Feng Zhang"),
    ],
)
def test_the_extractive_answer_finds_the_sentence_that_answers(
    example_kf: Path, question: str, gold: str
) -> None:
    res = run_ok("ask", question, "--json").json()
    assert gold in res["citations"][0]["quote"], res["answer"]
    assert len(res["citations"]) <= 2  # two sentences at most by default


def test_a_question_is_answered_by_two_short_sentences_when_both_answer(
    example_kf: Path,
) -> None:
    from openkl.knowledge.ask import Q_MAX_WORDS

    note = (
        "Brisk kettles boil in 90 seconds on the Orlo stove. "
        "Slow kettles take four minutes there, the Orlo manual says."
    )
    assert run_ok("mem", "add", note).code == 0
    res = run_ok("ask", "how long do kettles take to boil on the Orlo stove?", "--json").json()
    quotes = sorted(c["quote"] for c in res["citations"])
    assert quotes == sorted(note.replace("stove. ", "stove.\n").splitlines()), res["answer"]
    assert len(MARK.sub("", res["answer"]).split()) <= Q_MAX_WORDS
    _verify(res)


def test_a_short_fragment_joins_the_sentence_it_belongs_to() -> None:
    from openkl.knowledge.ask import _units

    text = (
        "RESULTS The following types of login are supported.\n\n* Digest\n* Basic\n"
        "* WSSE\n\n### Caching\n\nSTR\n\nSpot the reference. Used in one newsgroup only.\n"
    )
    units = _units(text, 10, True)
    for start, end, unit in units:
        assert text[start - 10 : end - 10] == unit
    assert [" ".join(u.split()) for _, _, u in units] == [
        "The following types of login are supported. * Digest * Basic * WSSE",
        "STR Spot the reference. Used in one newsgroup only.",
    ]
    # a claim's evidence is split as before
    assert "STR" not in " ".join(u for _, _, u in _units(text, 0, False))


def test_a_list_item_answers_from_its_lead_sentence(example_kf: Path) -> None:
    note = "The Orlo gateway supports three kinds of login:\n\n* Digest\n* Basic\n* WSSE\n"
    assert run_ok("mem", "add", note).code == 0
    res = run_ok("ask", "which kinds of login does the Orlo gateway support?", "--json").json()
    assert "WSSE" in res["citations"][0]["quote"], res["answer"]
    _verify(res)


def test_who_wrote_a_text_is_answered_by_its_signature(example_kf: Path) -> None:
    note = (
        "These notes on the Orlo modem setup follow what Peter Brandt wrote on modems.\n\n"
        "The Orlo modem answers after the first ring and hangs up when the line drops.\n\n"
        "Marta Quillfeather <marta@orlo.example>, 3 May 2001\n"
    )
    assert run_ok("mem", "add", note).code == 0
    res = run_ok("ask", "who wrote the notes on the Orlo modem setup?", "--json").json()
    assert "Marta Quillfeather" in res["citations"][0]["quote"], res["answer"]


def test_what_a_question_asks_for() -> None:
    from openkl.knowledge.ask import answer_type, holds_type

    assert answer_type("who did Ada Lovelace work with?") == "person"
    assert answer_type("In which year did it ship?") == "date"
    assert answer_type("how many openers are allowed?") == "number"
    assert answer_type("where does Cas9 cut?") == "place"
    assert answer_type("what is RRF?") is None
    assert answer_type("Cas9 cuts DNA.") is None  # a claim, not a question
    q = "who did Ada Lovelace work with?"
    assert holds_type("Lovelace worked with Charles Babbage on it.", "person", q) == 1.0
    assert holds_type("Ada Lovelace was a mathematician.", "person", q) == 0.0
    assert holds_type("It shipped in 1843.", "date", "when did it ship?") == 1.0


def test_what_a_question_asks_for_by_its_noun_and_wording() -> None:
    from openkl.knowledge.ask import answer_type, holds_type

    assert answer_type("For how long were the mice kept on the diet?") == "number"
    assert answer_type("Which version of the fonts does the README describe?") == "number"
    assert answer_type("Which GCC option protects every function?") == "code"
    assert answer_type("Which company made the first one?") == "person"
    assert answer_type("What does US-SOMO stand for?") == "expansion"
    assert answer_type("Which cancer became more common?") is None
    q = "How many cases occurred in Santiago in 1997?"
    assert holds_type("There were 205 DHF/DSS cases in all.", "number", q) == 1.0
    assert holds_type("Dengue virus type 2 caused 12 deaths in 1997.", "number", q) == 0.5
    assert holds_type("An outbreak of DEN-2 began in January 1997.", "number", q) == 0.0
    q = "For how long were the mice kept on the diet?"
    assert holds_type("After 13 weeks on the diet, they had 10-fold more.", "number", q) == 1.0
    q = "Which GCC option protects every function?"
    assert holds_type("Use -fstack-protector-all for that.", "code", q) == 1.0
    assert holds_type("GCC protects functions on request.", "code", q) == 0.0
    q = "What does US-SOMO stand for?"
    assert holds_type("The UltraScan solution modeler (US-SOMO) module.", "expansion", q) == 1.0
    assert holds_type("The module fits SAXS data (US-SOMO).", "expansion", q) == 0.0


def test_a_long_sentence_is_cut_to_the_clauses_that_answer() -> None:
    from openkl.knowledge.ask import TRIM_WORDS, Candidate, _trim

    filler = ", ".join(f"with step {w} done" for w in "abcdefghijkl")
    text = f"The trial ran for 13 weeks on the diet, {filler}."
    c = Candidate(0, 100, 100 + len(text), text, 0.5, 1.0, question=True)
    _trim([c], "For how long did the trial run?")
    assert len(text.split()) > TRIM_WORDS >= len(c.text.split())
    assert "13 weeks" in c.text and text[c.start - 100 : c.end - 100] == c.text


def test_sentences_do_not_end_at_a_name_initial_and_quotes_keep_their_spaces() -> None:
    from openkl.knowledge.ask import unmarked
    from openkl.text.statements import sentences

    text = (
        "It was made by J.R. Bell in 1973. Robert D. Hilliard wrote it down. "
        "The mice needed more vitamin D. The rest of them did well."
    )
    assert [s for _, _, s in sentences(text)] == [
        "It was made by J.R. Bell in 1973.",
        "Robert D. Hilliard wrote it down.",
        "The mice needed more vitamin D.",
        "The rest of them did well.",
    ]
    assert unmarked("run the ./.bootstrap script [2].") == "run the ./.bootstrap script."
