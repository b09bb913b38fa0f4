"""Answers that can be trusted as far as they say: passages that disagree are said to
disagree, both sides cited, at a lower confidence; an LLM answer that cites nothing is
marked, and `ok ask` exits 1 for it unless `--allow-uncited`. The LLM is a local server
speaking the OpenAI protocol (tests/helpers/openai_stub.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import call, serve
from helpers.openai_stub import chat_server
from helpers.run import run_ok

FIFTEEN = "Backups of the orders database run every 15 minutes on the replica."
FIVE = "Backups of the orders database run every 5 minutes on the replica."
QUESTION = "How often do backups of the orders database run?"


def _note(text: str, *more: str) -> str:
    r = run_ok("mem", "add", text, *more, "--json")
    assert r.code == 0, r.err
    return str(r.json()["id"])


def _llm_env(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("OK_LLM_BASE_URL", url)
    monkeypatch.setenv("OK_LLM_MODEL", "stub-model")
    monkeypatch.setenv("OK_LLM_RETRIES", "0")


def _ask(*args: str) -> tuple[int, dict[str, Any], str]:
    r = run_ok("ask", QUESTION, "--json", *args)
    return r.code, r.json(), r.err


def test_an_extractive_answer_says_its_sources_disagree(kf: Path) -> None:
    one = _note(FIFTEEN)
    code, alone, _ = _ask("--no-llm")
    assert code == 0 and "conflicts" not in alone, alone
    assert not alone["answer"].startswith("The sources disagree")
    other = _note(FIVE)
    # `ok mem conflicts` flags the pair, and the answer says what it says
    flagged = run_ok("mem", "conflicts", "--json").json()
    assert {flagged[0]["a"]["doc_id"], flagged[0]["b"]["doc_id"]} == {one, other}, flagged
    code, res, _ = _ask("--no-llm")
    assert code == 0, res
    assert res["answer"].startswith("The sources disagree (")
    assert "15" in res["answer"] and "5 minutes" in res["answer"]
    assert {c["doc_id"] for c in res["citations"]} == {one, other}
    assert res["conflicts"] == [
        {"kind": "number", "reason": res["conflicts"][0]["reason"], "citations": [1, 2]}
    ]
    assert res["conflicts"][0]["reason"] in ("15 against 5", "5 against 15")
    assert res["confidence"] < alone["confidence"]
    r = run_ok("cite", "verify", "-", "--json", input=json.dumps(res["citations"]))
    assert r.code == 0 and {v["status"] for v in r.json()} == {"verified"}


def test_a_negated_statement_is_a_disagreement(kf: Path) -> None:
    _note("The Kelpwatch survey uses divers to count the urchins.")
    _note("The Kelpwatch survey does not use divers to count the urchins.")
    r = run_ok("ask", "Does the Kelpwatch survey use divers to count urchins?", "--no-llm")
    assert r.code == 0, r.err
    assert r.out.startswith("The sources disagree (the same statement, once negated)"), r.out


def test_agreeing_sources_are_not_flagged(kf: Path) -> None:
    _note(FIFTEEN)
    _note("The orders database backups run every 15 minutes, as the runbook says.")
    code, res, _ = _ask("--no-llm")
    assert code == 0 and "conflicts" not in res, res


def test_an_llm_answer_citing_one_side_is_told_of_the_other(
    kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = {_note(FIFTEEN), _note(FIVE)}
    with chat_server(["They run every few minutes [1]."]) as stub:
        _llm_env(monkeypatch, stub.url)
        code, res, err = _ask()
    assert code == 0, err
    assert res["mode"] == "llm" and res["answer"].startswith("The sources disagree (")
    assert "[1] against [2]" in res["answer"], res["answer"]
    assert {c["doc_id"] for c in res["citations"]} == ids
    assert [c["n"] for c in res["citations"]] == [1, 2]
    assert res["conflicts"][0]["citations"] == [1, 2]
    # the model is asked to say so itself
    assert "contradict" in stub.requests[0]["messages"][0]["content"]


@pytest.mark.server
def test_an_uncited_llm_answer_is_marked_and_exits_1(
    kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _note(FIFTEEN)
    with chat_server(["They run every quarter of an hour."]) as stub:
        _llm_env(monkeypatch, stub.url)
        code, res, err = _ask()
        assert code == 1, err
        assert res["ungrounded"] is True and res["citations"] == []
        assert res["confidence"] == 0.0 and res["confidence_label"] == "LOW"
        assert res["warning"].startswith("the model's answer cites no passage")
        assert "warning: the model's answer cites no passage" in err
        assert "--allow-uncited" in err
        code, res, err = _ask("--allow-uncited")
        assert code == 0 and res["ungrounded"] is True, err
        # plain output: the answer is printed all the same
        r = run_ok("ask", QUESTION)
        assert r.code == 1 and r.out.startswith("They run every quarter of an hour.")

        async def go(c: Any) -> None:
            got = await call(c, "ask", question=QUESTION)
            assert got["ungrounded"] is True
            assert got["warning"].startswith("the model's answer cites no passage")

        serve([kf], go)
    # a cited answer says nothing of the kind
    with chat_server(["Every 15 minutes [1]."]) as stub:
        _llm_env(monkeypatch, stub.url)
        code, res, err = _ask()
    assert code == 0 and "ungrounded" not in res and "warning" not in res, err
