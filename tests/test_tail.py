"""The tail of hybrid search: a hit none of whose query words BM25 found is listed only when
its cosine similarity reaches search.tail_floor; the best hit scores 1.0."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.run import REPO, run_ok

NOTES = json.loads((REPO / "bench" / "data" / "tail_notes.json").read_text())["notes"]
RETRY = {"retry-backoff", "retry-idempotency", "retry-queue"}


def _folder() -> dict[str, str]:
    """The notes of bench/data/tail_notes.json, by id."""
    ids = {}
    for key, text in NOTES.items():
        r = run_ok("mem", "add", text, "--allow-duplicate", "--json")
        assert r.code == 0, r.err
        ids[r.json()["id"]] = key
    return ids


def test_unrelated_neighbours_are_left_out(kf: Path) -> None:
    ids = _folder()
    r = run_ok("search", "retries", "--in", "mem", "--json", "--explain")
    assert r.code == 0, r.err
    hits = r.json()
    assert {ids[h["id"]] for h in hits} == RETRY  # not the ten nearest notes
    assert hits[0]["score"] == 1.0 and all(0 < h["score"] <= 1.0 for h in hits)
    # a hit BM25 did not find stays when it is near enough
    r = run_ok("search", "how long is the coffee roasted", "--in", "mem", "--json", "--explain")
    assert r.code == 0, r.err
    for h in r.json():
        assert "fts" in h["signals"] or h["signals"]["vector"]["score"] >= 0.37, h
    # 0 lists every neighbour, down to the last
    assert run_ok("config", "set", "search.tail_floor", "0").code == 0
    everything = run_ok("search", "retries", "--in", "mem", "--json").json()
    assert len(everything) == 10 and {ids[h["id"]] for h in everything} >= RETRY
    # and a query none of whose words occur is judged by --min-score alone
    assert run_ok("config", "set", "search.tail_floor", "0.37").code == 0
    r = run_ok("search", "asdkjh qwpoeiru", "--in", "mem", "--min-score", "0", "--json")
    assert r.code == 0 and len(r.json()) == 10


def test_keyword_and_vector_modes_keep_their_lists(kf: Path) -> None:
    _folder()
    vector = run_ok("search", "retries", "--in", "mem", "--mode", "vector", "--json").json()
    assert len(vector) == 10
    fts = run_ok("search", "retries", "--in", "mem", "--mode", "fts", "--json").json()
    assert len(fts) == 3
