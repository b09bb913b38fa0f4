"""Recency in ranking: `--recency HALF_LIFE` on search and ask (CLI, MCP), off by default,
and off changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import call, serve
from helpers.run import run_ok

QUERIES = ("write-ahead logging", "who was Ada Lovelace", "graph database", "crash recovery")


def _hits(*args: str, now: str = "2026-03-10T00:00:00Z") -> list[dict[str, Any]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OK_NOW", now)
        r = run_ok("search", *args, "--json")
    assert r.code == 0, r.err
    return r.json()


def _ranking(hits: list[dict[str, Any]]) -> list[tuple[str, float]]:
    return [(h["id"], h["score"]) for h in hits]


def test_recency_off_changes_no_ranking(example_kf: Path) -> None:
    for q in QUERIES:
        default = _ranking(_hits(q, "-k", "10"))
        assert default, q
        assert _ranking(_hits(q, "-k", "10", "--recency", "off")) == default, q
        # a half-life so long that every factor is 1 to six places: the same order
        longest = _hits(q, "-k", "10", "--recency", "100000w", "--explain")
        assert [h["id"] for h in longest] == [i for i, _ in default], q
        assert all(h["recency"] == 1.0 for h in longest), q
    assert run_ok("config", "set", "search.recency", "off").code == 0
    for q in QUERIES:
        assert _ranking(_hits(q, "-k", "10")) == _ranking(_hits(q, "-k", "10", "--recency", "off"))


def _two_notes() -> tuple[str, str]:
    ids = []
    for now, text in (
        ("2025-01-01T00:00:00Z", "The office wifi network is called Heron."),
        ("2026-03-01T00:00:00Z", "The office wifi network is now called Osprey."),
    ):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("OK_NOW", now)
            r = run_ok("mem", "add", text, "--allow-duplicate")  # a changed fact, on purpose
        assert r.code == 0, r.err
        ids.append(r.out.strip())
    return ids[0], ids[1]


def test_recency_ranks_newer_notes_higher_and_the_floor_keeps_old_ones(kf: Path) -> None:
    old, new = _two_notes()
    q = ("office wifi network", "--in", "mem", "--explain")
    off = _hits(*q)
    assert [h["id"] for h in off] == [old, new]  # the old note matches the words better
    assert all("recency" not in h for h in off)
    on = _hits(*q, "--recency", "30d")
    assert [h["id"] for h in on] == [new, old]
    by = {h["id"]: h for h in on}
    assert by[old]["recency"] == 0.4  # 433 days at a 30-day half-life: the floor
    assert 0.7 < by[new]["recency"] < 1  # 9 days old
    assert by[old]["score"] == pytest.approx(off[0]["score"] * 0.4, abs=1e-5)
    # the floor comes from the config; at 0 the old note is ranked by its age alone
    assert run_ok("config", "set", "search.recency_floor", "0").code == 0
    assert _hits(*q, "--recency", "30d")[1]["recency"] < 0.001
    # and so does the default half-life
    assert run_ok("config", "set", "search.recency", "30d").code == 0
    assert [h["id"] for h in _hits(*q)] == [new, old]
    assert [h["id"] for h in _hits(*q, "--recency", "off")] == [old, new]


def test_ask_takes_recency(kf: Path) -> None:
    old, new = _two_notes()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OK_NOW", "2026-03-10T00:00:00Z")
        plain = run_ok("ask", "what is the office wifi network?", "-k", "1", "--json").json()
        recent = run_ok(
            "ask", "what is the office wifi network?", "-k", "1", "--recency", "30d", "--json"
        ).json()
    assert [c["doc_id"] for c in plain["citations"]] == [old]
    assert [c["doc_id"] for c in recent["citations"]] == [new]


def test_a_bad_half_life_gets_one_clear_line(kf: Path) -> None:
    for bad in ("5y", "soon", "-3d", "0w"):
        for cmd in (("search", "x"), ("ask", "x"), ("mem", "search", "x")):
            r = run_ok(*cmd, "--recency", bad)
            assert r.code == 2, (cmd, bad, r.out)
            assert "is not a half-life" in r.err and "90d" in r.err, r.err
            assert len(r.err.strip().splitlines()) == 1, r.err


@pytest.mark.server
def test_mcp_search_takes_recency(kf: Path) -> None:
    old, new = _two_notes()

    async def go(c: Any) -> None:
        off = await call(c, "search", query="office wifi network", scope="mem")
        assert [h["id"] for h in off["results"]] == [old, new]
        on = await call(c, "mem_search", query="office wifi network", recency="30d")
        assert [h["id"] for h in on["results"]] == [new, old]

    serve([kf], go, env={"OK_NOW": "2026-03-10T00:00:00Z"})
