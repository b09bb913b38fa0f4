"""Search that knows when nothing matches: the cosine floor, `--min-score`, and what
`ok search`, `ok mem search`, `ok ask`, `ok context` and MCP search do under it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import call, serve
from helpers.openai_stub import chat_server
from helpers.run import run_ok

GIBBERISH = "asdkjh qwpoeiru"


def test_gibberish_is_no_good_match(example_kf: Path) -> None:
    r = run_ok("search", GIBBERISH)
    assert r.code == 1
    assert r.out == ""
    assert r.err.startswith(f"no good match for '{GIBBERISH}'")
    assert "--min-score 0" in r.err and len(r.err.strip().splitlines()) == 1
    r = run_ok("search", GIBBERISH, "--json")
    assert r.code == 1 and r.json() == []
    r = run_ok("mem", "search", GIBBERISH, "--json")
    assert r.code == 1 and r.json() == []


def test_min_score_zero_shows_the_nearest_anyway(example_ro: Path) -> None:
    r = run_ok("search", GIBBERISH, "--min-score", "0", "--json", "--explain")
    assert r.code == 0, r.err
    hits = r.json()
    assert hits and hits[0]["rank"] == 1
    # the fused score is relative to the query; the vector signal's score is the cosine
    # similarity, comparable across queries, and here it is under the default floor
    best = max(h["signals"]["vector"]["score"] for h in hits if "vector" in h["signals"])
    assert 0 < best < 0.3
    assert hits[0]["signals"]["vector"]["norm"] <= 1.0


def _best_cosine(query: str) -> float:
    hits = run_ok("search", query, "--json", "--explain", "--min-score", "0", "-k", "50").json()
    return max(h["signals"]["vector"]["score"] for h in hits if "vector" in h["signals"])


def test_min_score_is_the_cosine_of_the_best_passage(example_ro: Path) -> None:
    # none of the gibberish's words occur: the floor is --min-score itself
    best = _best_cosine(GIBBERISH)
    near = run_ok("search", GIBBERISH, "--json", "--explain", "--min-score", "0")
    kept = run_ok("search", GIBBERISH, "--json", "--explain", "--min-score", f"{best - 0.001:.4f}")
    assert kept.code == 0 and kept.json() == near.json()  # the floor never reorders or thins
    over = run_ok("search", GIBBERISH, "--min-score", f"{best + 0.001:.4f}")
    assert over.code == 1 and over.out == "" and f"similarity is {best:.2f}" in over.err
    assert "none of its words occur" in over.err


def test_a_query_whose_words_occur_is_never_cut(example_ro: Path) -> None:
    # a lone name embeds poorly, far from the page about him, but BM25 finds it
    assert _best_cosine("Babbage") < 0.3
    r = run_ok("search", "Babbage", "--json", "--min-score", "1")
    assert r.code == 0 and "ada-lovelace" in r.json()[0]["path"]
    r = run_ok("search", "Babbage", "--json", "--min-score", "1", "--mode", "vector")
    assert r.code == 0 and r.json()


def test_the_floor_is_a_setting(example_kf: Path) -> None:
    assert run_ok("config", "set", "search.min_score", "0").code == 0
    r = run_ok("search", GIBBERISH, "--json")
    assert r.code == 0 and r.json()
    assert run_ok("config", "unset", "search.min_score").code == 0
    assert run_ok("search", GIBBERISH).code == 1
    assert run_ok("config", "set", "search.min_score", "0.1").code == 0
    assert run_ok("search", GIBBERISH, "--json").code == 0
    assert run_ok("config", "set", "search.min_score", "1").code == 0
    r = run_ok("search", "can two processes write the graph at once", "--json")
    assert r.code == 0 and r.json()  # its words occur
    r = run_ok("search", GIBBERISH)
    assert r.code == 1 and "under --min-score 1" in r.err


def test_min_score_out_of_range(example_ro: Path) -> None:
    for bad in ("1.5", "-0.1"):
        r = run_ok("search", "Lovelace", "--min-score", bad)
        assert r.code == 2 and "min-score" in r.err and "0 turns the floor off" in r.err


def test_keyword_mode_has_no_floor(example_ro: Path) -> None:
    # BM25 alone has no calibrated score; a keyword hit is its own evidence
    r = run_ok("search", "Babbage", "--mode", "fts", "--min-score", "0.99", "--json")
    assert r.code == 0 and "ada-lovelace" in r.json()[0]["path"]


def test_ask_and_context_do_not_answer_from_nothing(example_kf: Path) -> None:
    r = run_ok("ask", GIBBERISH, "--json", "--no-llm")
    assert r.code == 1, r.err  # nothing found, as a search that finds nothing
    res = r.json()
    assert res["insufficient"] is True and res["citations"] == [] and res["retrieved"] == 0
    assert "no good match" in res["answer"]
    r = run_ok("context", GIBBERISH, "--json")
    assert r.code == 1, r.err
    ctx = r.json()
    assert ctx["sources"] == [] and ctx["entities"] == []
    assert ctx["reasoning"].startswith("No good match")


def test_ask_does_not_send_the_model_passages_nothing_is_near(
    example_kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with chat_server(["The folder says [1]."]) as stub:
        monkeypatch.setenv("OK_LLM_BASE_URL", stub.url)
        monkeypatch.setenv("OK_LLM_MODEL", "stub-model")
        monkeypatch.setenv("OK_LLM_RETRIES", "0")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-logged")
        r = run_ok("ask", GIBBERISH, "--json")
        assert r.code == 1, r.err
        res = r.json()
        assert res["insufficient"] is True and "no good match" in res["answer"]
        assert res["mode"] == "llm" and res["citations"] == []
        assert stub.requests == []


@pytest.mark.server
def test_mcp_search_says_no_good_match(example_kf: Path) -> None:
    async def go(c: Any) -> None:
        res = await call(c, "search", query=GIBBERISH)
        assert res["results"] == [] and "no good match" in res["message"]
        near = await call(c, "search", query=GIBBERISH, min_score=0)
        assert near["results"] and "message" not in near
        good = await call(c, "search", query="who wrote the first computer program")
        assert "ada-lovelace" in good["results"][0]["path"] and "message" not in good

    serve([example_kf], go)
