"""The graph is derived: rebuilding or syncing from the files gives the same answers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers.run import run_ok

QUERIES = [
    "who wrote the first computer program",
    "single writer lock",
    "BM25 and embeddings",
    "gene editing therapy approval",
    "atomic rename fsync",
    "one writer at a time",
]


def _answers(modes: tuple[str, ...] = ("hybrid", "fts", "vector")) -> list:
    out = []
    for q in QUERIES:
        for m in modes:
            # without the no-good-match floor: every query's ranking is compared, also of
            # queries the edits leave nothing near
            r = run_ok(
                "search", q, "--mode", m, "--json", "-k", "5", "--explain", "--min-score", "0"
            )
            assert r.code == (0 if r.json() else 1), r.err  # nothing found exits 1
            hits = r.json()
            root = os.environ["OK_ROOT"]
            for h in hits:  # names the folder, which differs between a copy and its original
                assert h.pop("abs_path") == str(Path(root).resolve() / h["path"])
            out.append(hits)
    return out


def test_deleting_the_graph_and_indexing_gives_identical_results(example_kf: Path) -> None:
    before = _answers()
    shutil.rmtree(example_kf / ".ok/kuzu")
    r = run_ok("index", "--json")
    assert r.code == 0, r.err
    assert len(r.json()["docs_added"]) == 5 and len(r.json()["notes_added"]) == 1
    assert _answers() == before
    r = run_ok("index", "--rebuild", "--json")
    assert r.json()["rebuilt"] is True
    assert _answers() == before


def test_sync_after_outside_edits_equals_a_fresh_index(example_kf: Path, tmp_path: Path) -> None:
    norm = example_kf / "store/normalized/docs"
    # rename, edit, delete, add — as an editor or `git pull` would
    (norm / "kuzu-embedded-graphs.ok.md").rename(norm / "kuzu.ok.md")
    wal = norm / "write-ahead-logging.ok.md"
    wal.write_text(wal.read_text().replace("SQLite uses a WAL mode", "SQLite offers a WAL mode"))
    (norm / "crispr-gene-editing.ok.md").unlink()
    (norm / "new-note.ok.md").write_text("# Tide tables\n\nSpring tides follow the new moon.\n")
    note = next(example_kf.glob("memories/by_date/*/*/*.md"))
    note.write_text(note.read_text().replace("one writer at a time", "a single writer"))
    r = run_ok("status", "--json")
    assert r.json()["in_sync"] is False
    r = run_ok("sync", "--json")
    assert r.code == 0, r.err
    rep = r.json()
    assert len(rep["docs_added"]) == 2 and len(rep["docs_removed"]) == 2
    assert [m["to"] for m in rep["docs_moved"]] == ["store/normalized/docs/kuzu.ok.md"]
    assert len(rep["notes_updated"]) == 1
    assert run_ok("status", "--json").json()["in_sync"] is True
    synced = _answers()
    assert run_ok("sync", "--json").json()["changed"] is False

    fresh = tmp_path / "fresh"
    shutil.copytree(example_kf, fresh, symlinks=True)
    shutil.rmtree(fresh / ".ok/kuzu")
    assert run_ok("--root", str(fresh), "index").code == 0
    import os

    os.environ["OK_ROOT"] = str(fresh)
    try:
        assert _answers() == synced
    finally:
        os.environ["OK_ROOT"] = str(example_kf)
    hits = run_ok("search", "spring tides new moon", "--json", "-k", "1").json()
    assert hits[0]["path"] == "store/normalized/docs/new-note.ok.md"
    mapping = (example_kf / ".ok/mapping.jsonl").read_text()
    assert "docs/kuzu.ok.md" in mapping and "crispr" not in mapping


def test_embedder_mismatch_asks_for_rebuild(example_kf: Path) -> None:
    r = run_ok(
        "graph", "cypher", "MATCH (m:Meta {key: 'embedder'}) SET m.value = 'other:128'", "--write"
    )
    assert r.code == 0, r.err
    r = run_ok("search", "anything")
    assert r.code == 2
    assert "built with embedder other:128" in r.err and "ok index --rebuild" in r.err
    assert run_ok("index", "--rebuild").code == 0
    # "anything" is near nothing here: without the floor the nearest passages come back
    r = run_ok("search", "anything", "--json", "--min-score", "0")
    assert r.code == 0 and r.json()


def test_schema_mismatch_asks_for_rebuild(example_kf: Path) -> None:
    run_ok("graph", "cypher", "MATCH (m:Meta {key: 'schema_version'}) SET m.value = '0'", "--write")
    r = run_ok("status", "--json")
    assert "schema version 0" in r.json()["error"]
    r = run_ok("sync")
    assert r.code == 2 and "ok index --rebuild" in r.err


@pytest.mark.parametrize(
    "query", ["CREATE (:Topic {id: 'x', name: 'x'})", "MATCH (d:Doc) DETACH DELETE d"]
)
def test_cypher_is_read_only_without_write(example_kf: Path, query: str) -> None:
    before = run_ok("graph", "cypher", "MATCH (n) RETURN count(n) AS n", "--json").json()
    r = run_ok("graph", "cypher", query)
    assert r.code == 2
    assert "read-only" in r.err and "--write" in r.err
    assert run_ok("graph", "cypher", "MATCH (n) RETURN count(n) AS n", "--json").json() == before


def test_cypher_reads_and_params(example_ro: Path) -> None:
    r = run_ok(
        "graph",
        "cypher",
        "MATCH (d:Doc) WHERE d.title CONTAINS $t RETURN d.title AS t",
        "-p",
        "t=Ada",
        "--json",
    )
    assert r.json() == [{"t": "Ada Lovelace and the Analytical Engine"}]
    r = run_ok("graph", "cypher", "MATCH (d:Doc RETURN d")
    assert r.code == 2 and "query failed" in r.err
