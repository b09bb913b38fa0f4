"""`ok distill`: prompts, memories that cite their sources, and the LLM loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers.openai_stub import chat_server
from helpers.run import run_ok

NAMES = [
    "extract-facts",
    "identify-patterns",
    "summarize-insights",
    "extract-relationships",
    "extract-entities",
    "memory-synthesis",
]


def _hit(query: str, scope: str = "store") -> dict:
    r = run_ok("search", query, "--in", scope, "-k", "1", "--json")
    assert r.code == 0, r.err
    return r.json()[0]


def _frontmatter(root: Path, rel: str) -> dict:
    text = (root / rel).read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---\n")[1])


def _derived(note_id: str) -> list[str]:
    r = run_ok(
        "graph",
        "cypher",
        "MATCH (m:MemoryNote {id: $id})-[:DERIVED_FROM]->(x) RETURN x.id AS id ORDER BY id",
        "-p",
        f"id={note_id}",
        "--json",
    )
    assert r.code == 0, r.err
    return [row["id"] for row in r.json()]


def test_prompts_and_get_prompt(kf: Path) -> None:
    r = run_ok("distill", "prompts", "--json")
    assert [p["name"] for p in r.json()] == NAMES
    assert all(p["description"] for p in r.json())
    r = run_ok("distill", "get-prompt", "extract-facts")
    assert r.code == 0 and r.out.startswith("Extract the facts")
    assert "Use only what the material says" in r.out and "- <fact> [N]" in r.out
    r = run_ok(
        "distill",
        "get-prompt",
        "memory-synthesis",
        "--text",
        "-",
        "--json",
        input="Kùzu is an embedded graph database.\n",
    )
    assert r.json()["prompt"].rstrip().endswith("Kùzu is an embedded graph database.")
    r = run_ok("distill", "get-prompt", "nope")
    assert r.code == 2 and "no distillation prompt named 'nope'" in r.err
    assert "extract-facts" in r.err


def test_create_cites_chunks_and_survives_rebuild(example_kf: Path) -> None:
    a = _hit("who wrote the first computer program")
    b = _hit("what is write-ahead logging")
    r = run_ok(
        "distill",
        "create",
        "Lovelace wrote the first program [1]; databases log changes before applying them [2].",
        a["id"],
        b["id"],
        "--tags",
        "history",
        "--json",
    )
    assert r.code == 0, r.err
    note = r.json()
    assert note["kind"] == "distilled" and note["tags"] == ["history"]
    assert [c["n"] for c in note["citations"]] == [1, 2]
    assert note["citations"][0]["quote"] == a["quote"]
    fm = _frontmatter(example_kf, note["path"])
    assert fm["citations"] == [c["id"] for c in note["citations"]]
    assert fm["derived_from"] == [a["id"], b["id"]]
    # the citations are persisted and verify
    for c in note["citations"]:
        assert (example_kf / "citations" / f"{c['id']}.json").is_file()
    r = run_ok("cite", "verify", *fm["citations"])
    assert r.code == 0, r.err
    assert _derived(note["id"]) == sorted([a["id"], b["id"]])
    # files are canonical: a rebuilt graph has the same edges
    assert run_ok("index", "--rebuild").code == 0
    assert _derived(note["id"]) == sorted([a["id"], b["id"]])
    # and the note is a memory like any other
    hits = run_ok("search", "Lovelace wrote the first program", "--in", "mem", "--json").json()
    assert hits[0]["id"] == note["id"]
    log = (example_kf / ".ok" / "ops.log").read_text()
    assert '"op": "distill.create"' in log


def test_create_mentions_entities(example_kf: Path) -> None:
    a = _hit("Charles Babbage Analytical Engine")
    r = run_ok(
        "distill", "create", "Ada Lovelace worked with Charles Babbage [1].", a["id"], "--json"
    )
    nid = r.json()["id"]
    r = run_ok(
        "graph",
        "cypher",
        "MATCH (m:MemoryNote {id: $id})-[:MENTIONS]->(e:Entity) RETURN e.name AS name",
        "-p",
        f"id={nid}",
        "--json",
    )
    names = {row["name"] for row in r.json()}
    assert {"Ada Lovelace", "Charles Babbage"} <= names


def test_a_cited_sentence_links_to_the_chunk_that_holds_it(example_kf: Path) -> None:
    ans = run_ok(
        "ask", "what happens to committed transactions when the process crashes?", "--json"
    ).json()
    [cite] = ans["citations"]  # one sentence: a span inside a chunk, not a chunk of its own
    s, e = cite["loc"]["start"], cite["loc"]["end"]
    chunks = run_ok(
        "graph",
        "cypher",
        "MATCH (c:Chunk) WHERE c.doc_id = $d AND "
        "c.span_start <= $s AND c.span_end >= $e RETURN c.id AS id",
        "-p",
        f"d={cite['doc_id']}",
        "-p",
        f"s={s}",
        "-p",
        f"e={e}",
        "--json",
    ).json()
    assert chunks and cite["ref"] not in {c["id"] for c in chunks}
    r = run_ok("distill", "create", "Recovery replays the log [1].", cite["id"], "--json")
    assert r.code == 0, r.err
    note = r.json()
    assert note["derived_from"] == [cite["ref"]]
    assert set(_derived(note["id"])) >= {c["id"] for c in chunks}
    assert cite["doc_id"] not in _derived(note["id"])  # the chunk, not the whole document
    assert run_ok("index", "--rebuild").code == 0
    assert set(_derived(note["id"])) >= {c["id"] for c in chunks}


def test_create_accepts_persisted_citations_notes_and_docs(example_kf: Path) -> None:
    hit = _hit("CRISPR Cas9")
    cid = run_ok("cite", "make", hit["id"], "--persist", "--json").json()[0]["id"]
    note_hit = _hit("graph per call", "mem")
    doc = next(d for d in run_ok("store", "list", "--json").json() if "kuzu" in d["path"])
    r = run_ok(
        "distill", "create", "Mixed sources [1][2][3].", cid, note_hit["id"], doc["id"], "--json"
    )
    assert r.code == 0, r.err
    note = r.json()
    assert [c["type"] for c in note["citations"]] == ["chunk", "memory", "doc"]
    assert note["citations"][0]["id"] == cid
    fm = _frontmatter(example_kf, note["path"])
    assert fm["derived_from"] == [hit["id"], note_hit["id"], doc["id"]]
    # a distilled note is DERIVED_FROM the chunk, the document and the other note alike
    assert _derived(note["id"]) == sorted([hit["id"], doc["id"], note_hit["id"]])


def test_one_claim_without_a_marker_rests_on_every_citation(example_kf: Path) -> None:
    # as the RFC writes it: a one-line summary and the citations it rests on
    a, b = _hit("CRISPR Cas9"), _hit("graph per call", "mem")
    r = run_ok("distill", "create", "Distilled patterns and principles", a["id"], b["id"], "--json")
    assert r.code == 0, r.err
    note = r.json()
    assert [c["ref"] if "ref" in c else c["id"] for c in note["citations"]] == [a["id"], b["id"]]
    body = (example_kf / note["path"]).read_text(encoding="utf-8").split("---\n", 2)[2]
    assert body.strip() == "Distilled patterns and principles [1][2]"
    # a sentence keeps its full stop after the markers' place
    r = run_ok("distill", "create", "CRISPR cuts DNA.", a["id"], "--json")
    assert r.code == 0, r.err
    body = (example_kf / r.json()["path"]).read_text(encoding="utf-8").split("---\n", 2)[2]
    assert body.strip() == "CRISPR cuts DNA [1]."


@pytest.mark.parametrize(
    "args,msg",
    [
        (["A claim [1]."], "Missing argument"),
        (["A claim [1].", "0123456789abcdef#char0-10"], "no document with id 0123456789abcdef"),
        (["A claim [2].", "@HIT"], "the text cites [2] but 1 citation(s) were given"),
        (["  ", "@HIT"], "the memory's text is empty"),
        (["One claim. Another, citing nothing.", "@HIT"], "no claim carries an [N] marker"),
    ],
)
def test_create_refuses_bad_input(example_kf: Path, args: list[str], msg: str) -> None:
    hit = _hit("CRISPR")
    args = [hit["id"] if a == "@HIT" else a for a in args]
    before = sorted((example_kf / "memories").rglob("*.md"))
    r = run_ok("distill", "create", *args)
    assert r.code != 0 and msg in r.err, r.err
    assert sorted((example_kf / "memories").rglob("*.md")) == before
    assert not list((example_kf / "citations").glob("*.json"))


def test_create_verifies_every_citation_before_writing(example_kf: Path) -> None:
    """A kept citation whose quote left the files is refused, and nothing is written; one
    whose quote moved is cited where it is now."""
    nid = run_ok("mem", "add", "Tide gauges record the sea level every six minutes.", "--json")
    nid = nid.json()["id"]
    kept = run_ok("cite", "make", nid, "--persist", "--json").json()[0]
    hit = _hit("what is write-ahead logging")
    # text put in front of the quote: it moved, and is cited at its new place
    assert run_ok("mem", "update", nid, "--text", "Harbours. " + kept["quote"]).code == 0
    r = run_ok("distill", "create", "Gauges sample every 6 minutes [1].", kept["id"], "--json")
    assert r.code == 0, r.err
    cited = r.json()["citations"][0]
    assert cited["id"] == kept["id"] and cited["quote"] == kept["quote"]
    text = (example_kf / cited["path"]).read_text(encoding="utf-8")
    assert cited["loc"]["start"] > kept["loc"]["start"]
    assert text[cited["loc"]["start"] : cited["loc"]["end"]] == kept["quote"]
    assert (
        json.loads((example_kf / "citations" / f"{kept['id']}.json").read_text())["loc"]
        == (cited["loc"])
    )
    # the quote rewritten away: refused, and no note, no citation is written
    assert run_ok("mem", "update", nid, "--text", "Harbours have pilots.").code == 0
    notes = sorted((example_kf / "memories").rglob("*.md"))
    r = run_ok("distill", "create", "WAL [1]; gauges [2].", hit["id"], kept["id"])
    assert r.code == 2, r.err
    assert f"citation [2] ({kept['id']}) does not verify: it is " in r.err
    assert "cite the passage as the files hold it now" in r.err
    assert sorted((example_kf / "memories").rglob("*.md")) == notes
    assert not (example_kf / "citations" / f"{_cid(hit)}.json").exists()


def _cid(hit: dict) -> str:
    from openkl.knowledge.citations import cite_id

    return cite_id(hit["doc_id"], hit["loc"]["start"], hit["loc"]["end"])


def test_run_with_llm(example_kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reply = (
        "- Lovelace's Note G describes an algorithm for the Analytical Engine [3].\n"
        "- She worked with Charles Babbage [3][9]."
    )
    with chat_server([reply]) as stub:
        monkeypatch.setenv("OK_LLM_BASE_URL", stub.url)
        monkeypatch.setenv("OK_LLM_MODEL", "stub-model")
        r = run_ok(
            "distill",
            "run",
            "extract-facts",
            "--query",
            "Ada Lovelace Analytical Engine",
            "-k",
            "4",
            "--tags",
            "facts",
            "--json",
        )
    assert r.code == 0, r.err
    res = r.json()
    assert res["prompt"] == "extract-facts" and res["model"].startswith("stub-model @ ")
    note = res["note"]
    # passage [3] became the note's only citation, renumbered [1]; the unknown [9] is gone
    assert note["text"] == (
        "- Lovelace's Note G describes an algorithm for the Analytical "
        "Engine [1].\n- She worked with Charles Babbage [1]."
    )
    assert len(res["citations"]) == 1 and res["citations"][0]["n"] == 1
    sent = stub.requests[0]["messages"]
    assert sent[0]["content"].startswith("Extract the facts")
    user = sent[1]["content"]
    assert user.startswith("Subject: Ada Lovelace Analytical Engine\n\nMaterial:\n\n[1] (")
    third = user.split("\n\n[3] (")[1]
    assert res["citations"][0]["path"] in third.splitlines()[0]
    fm = _frontmatter(example_kf, note["path"])
    assert fm["prompt"] == "extract-facts" and fm["query"] == "Ada Lovelace Analytical Engine"
    assert fm["tags"] == ["facts"] and fm["citations"] == [res["citations"][0]["id"]]
    assert _derived(note["id"]) == fm["derived_from"]


def test_run_nothing_to_distill(example_kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with chat_server(["NOTHING"]) as stub:
        monkeypatch.setenv("OK_LLM_BASE_URL", stub.url)
        monkeypatch.setenv("OK_LLM_MODEL", "stub-model")
        before = sorted((example_kf / "memories").rglob("*.md"))
        r = run_ok("distill", "run", "extract-entities", "--query", "volcanoes", "--json")
    assert r.code == 0, r.err
    assert r.json()["note"] is None and "nothing distilled" in r.err
    assert sorted((example_kf / "memories").rglob("*.md")) == before


def test_run_writes_no_note_whose_claims_cite_nothing(
    example_kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with chat_server(["- Lovelace wrote the first program.\n- Babbage built engines."]) as stub:
        monkeypatch.setenv("OK_LLM_BASE_URL", stub.url)
        monkeypatch.setenv("OK_LLM_MODEL", "stub-model")
        before = sorted((example_kf / "memories").rglob("*.md"))
        r = run_ok("distill", "run", "extract-facts", "--query", "Ada Lovelace", "--json")
    assert r.code == 0, r.err
    assert r.json()["note"] is None and r.json()["reason"] == "the model cited none of the passages"
    assert "nothing distilled: the model cited none of the passages" in r.err
    assert sorted((example_kf / "memories").rglob("*.md")) == before


def test_run_needs_an_llm(example_kf: Path) -> None:
    r = run_ok("distill", "run", "extract-facts", "--query", "anything")
    assert r.code == 2 and "no LLM is configured" in r.err and "llm.base_url" in r.err
    r = run_ok("distill", "run", "no-such-prompt", "--query", "anything")
    assert r.code == 2 and "no distillation prompt" in r.err


def test_distilled_note_json_shape(example_kf: Path) -> None:
    hit = _hit("reciprocal rank fusion")
    note = run_ok("distill", "create", "RRF sums 1/(k + rank) [1].", hit["id"], "--json").json()
    assert set(note) >= {
        "id",
        "ts",
        "tags",
        "topics",
        "text",
        "path",
        "kind",
        "citations",
        "derived_from",
    }
    json.dumps(note)
