"""End-to-end basics: init, add a note, ingest the examples, search."""

from __future__ import annotations

from pathlib import Path

from helpers.run import run_ok


def test_example_folder_searches(example_kf: Path) -> None:
    r = run_ok("search", "who wrote the first computer program", "--json", "-k", "3")
    assert r.code == 0, r.err
    hits = r.json()
    assert hits and "ada-lovelace" in hits[0]["path"]
    top = hits[0]
    assert set(top) >= {
        "type",
        "id",
        "path",
        "sha256",
        "loc",
        "quote",
        "context",
        "source",
        "created_at",
    }
    text = (example_kf / top["path"]).read_text()
    assert text[top["loc"]["start"] : top["loc"]["end"]] == top["quote"]


def test_note_roundtrip(kf: Path) -> None:
    r = run_ok("mem", "add", "Prefer flock over pid files for writer locks", "--tags", "locking")
    assert r.code == 0, r.err
    nid = r.out.strip()
    assert nid.startswith("m-")
    r = run_ok("search", "pid files", "--in", "mem", "--json")
    assert [h["id"] for h in r.json()] == [nid]
