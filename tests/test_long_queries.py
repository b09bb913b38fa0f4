"""Long queries (a pasted paragraph, a whole argument) are answered: each signal takes what
it can use, and what was cut is said on stderr (CLI) or in a `warning` field (MCP, HTTP)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import call, serve
from helpers.run import run_ok
from helpers.serve import Server

from openkl.graph.search import MAX_QUERY, MAX_TERMS, QueryUse
from openkl.text.embeddings import Embedder

# past the embedding model's window (256 tokens): nothing in it names a document
FILLER = "Please weigh the following point with care before you reply to it. " * 30
# what the argument is about comes only after the window, where only BM25 reads
POINT = (
    "Appending every change to a write-ahead log before the pages are touched is what "
    "lets committed transactions survive a crash: recovery replays the log."
)
LONG = FILLER + POINT
# an argument pasted whole: its point first, then more than the model reads
ARGUMENT = POINT + " " + FILLER


def _is_wal(hit: dict[str, Any]) -> bool:
    return "write-ahead" in hit["path"]


def test_what_each_signal_takes() -> None:
    emb = Embedder()
    use = QueryUse.of(LONG, "hybrid", emb)
    assert use.vector_chars is not None and use.vector_chars < len(FILLER)
    assert "recovery" in use.words and "write-ahead" in use.words  # past the model's window
    warning = use.warning()
    assert warning is not None
    assert f"the query is {len(LONG):,} characters long" in warning
    assert f"the embedding model read its first {use.vector_chars:,}" in warning
    assert "BM25 took all its" in warning
    # a short query is read whole: nothing to say
    assert QueryUse.of("write-ahead logging", "hybrid", emb).warning() is None
    # fts mode has no model window to speak of
    fts = QueryUse.of(LONG, "fts", emb)
    assert fts.vector_chars is None and fts.warning() is None
    # past MAX_TERMS distinct words BM25 takes the longest, in the query's order
    many = " ".join(f"w{i:04d}" for i in range(MAX_TERMS + 40)) + " electroencephalography"
    use = QueryUse.of(many, "fts")
    assert len(use.words) == MAX_TERMS and "electroencephalography" in use.words
    assert f"BM25 took the {MAX_TERMS} longest of its {MAX_TERMS + 41} distinct words" in (
        use.warning() or ""
    )


def test_a_long_query_is_answered_on_the_command_line(example_kf: Path) -> None:
    # BM25 reads the words past the model's window
    r = run_ok("search", LONG, "--mode", "fts", "-k", "3", "--json")
    assert r.code == 0 and _is_wal(r.json()[0]), r.err
    r = run_ok("search", ARGUMENT, "-k", "3", "--json")
    assert r.code == 0 and _is_wal(r.json()[0]), r.err
    # the model did not read it all, and that is said in one warning line
    assert r.err.count("warning: the query is") == 1, r.err
    assert "the embedding model read its first" in r.err
    r = run_ok("ask", ARGUMENT, "--no-llm", "--json")
    assert r.code == 0, r.err
    assert "warning: the query is" in r.err and r.json()["warning"].startswith("the query is")
    assert any(_is_wal(c) for c in r.json()["citations"])
    r = run_ok("context", ARGUMENT, "--json")
    assert r.code == 0, r.err
    assert "warning: the query is" in r.err
    assert any(w.startswith("the query is") for w in r.json()["warnings"])
    # the same through stdin, and a short query says nothing
    r = run_ok("search", "-", "-k", "1", "--json", input=LONG)
    assert r.code == 0 and _is_wal(r.json()[0]) and "warning: the query is" in r.err
    r = run_ok("search", "write-ahead log", "-k", "1")
    assert r.code == 0 and "warning" not in r.err


def test_a_query_past_the_ceiling_is_one_clear_line(example_kf: Path) -> None:
    over = ("gene editing " * MAX_QUERY)[:MAX_QUERY] + "x"
    r = run_ok("search", "-", "-k", "1", input=over)
    assert r.code == 2 and f"the query is {MAX_QUERY + 1:,} characters long" in r.err
    assert len(r.err.strip().splitlines()) == 1
    r = run_ok("ask", "-", input=over)
    assert r.code == 2 and "characters long" in r.err


@pytest.mark.server
def test_a_long_query_over_mcp(example_kf: Path) -> None:
    async def go(c: Any) -> None:
        got = await call(c, "search", query=ARGUMENT, k=3)
        assert _is_wal(got["results"][0]) and got["warning"].startswith("the query is")
        got = await call(c, "ask", question=ARGUMENT)
        assert got["warning"].startswith("the query is") and got["citations"]
        got = await call(c, "context", query=ARGUMENT)
        assert any(w.startswith("the query is") for w in got["warnings"])
        got = await call(c, "search", query="write-ahead log", k=1)
        assert "warning" not in got

    serve([example_kf], go)


@pytest.mark.server
def test_a_long_query_over_http(example_kf: Path) -> None:
    s = Server(example_kf)
    try:
        v1 = f"/v1/{s.stack}"
        r = s.http.get(f"{v1}/search", params={"q": ARGUMENT, "k": 3})
        assert r.status_code == 200, r.text
        assert _is_wal(r.json()["hits"][0]) and r.json()["warning"].startswith("the query is")
        r = s.http.post(f"{v1}/ask", json={"question": ARGUMENT, "llm": False})
        assert r.status_code == 200, r.text
        assert r.json()["warning"].startswith("the query is")
        r = s.http.post("/aks/v1/context", json={"domain": s.stack, "query": ARGUMENT})
        assert r.status_code == 200, r.text
        assert any(w.startswith("the query is") for w in r.json()["warnings"])
        r = s.http.get(f"{v1}/search", params={"q": "write-ahead log", "k": 1})
        assert r.status_code == 200 and "warning" not in r.json()
    finally:
        s.stop()
