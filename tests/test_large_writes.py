"""Loads into a folder that already holds documents: what they write stays proportional to
what they add, the graph file stays near the size of one load of the same files, and the
entity graph equals a rebuild's however the writes were cut into commits."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.graph import entity_graph
from helpers.notes import write_notes
from helpers.run import run_ok


def _graph_bytes(root: Path) -> int:
    return (root / ".ok" / "kuzu" / "graph.kz").stat().st_size


def _relationships(root: Path) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    rows = run_ok(
        "--root", str(root), "graph", "cypher",
        "MATCH (a:Entity)-[r:RELATED]->(b:Entity) RETURN a.id AS a, b.id AS b, r.type AS t,"
        " r.docs AS d, r.confidence AS c, r.evidence AS e",
        "--json",
    ).json()  # fmt: skip
    return {(r["a"], r["b"], r["t"]): (r["d"], r["c"], r["e"]) for r in rows}


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement the graph engine is given while the test runs (the engine runs them
    as before: this only writes them down)."""
    import kuzu

    seen: list[str] = []
    run = kuzu.Connection.execute

    def execute(self: Any, query: Any, parameters: Any = None) -> Any:
        seen.append(" ".join(query.split()) if isinstance(query, str) else "<prepared>")
        return run(self, query, parameters) if parameters is not None else run(self, query)

    monkeypatch.setattr(kuzu.Connection, "execute", execute)
    yield seen


def test_a_load_writes_the_relationships_it_changes_in_bulk(
    kf: Path, tmp_path: Path, statements: list[str]
) -> None:
    """Documents added to a folder name pairs it holds already: hundreds of relationships
    change, and they are written by a few statements, not one each (a statement per
    relationship took milliseconds each and made Kùzu keep a copy of every vector it
    touched until the commit: a large load ran for hours and filled the buffer pool)."""
    src = tmp_path / "src"
    assert run_ok("store", "ingest", str(write_notes(src / "a", range(40)))).code == 0
    before = _relationships(kf)
    statements.clear()
    r = run_ok("store", "ingest", str(write_notes(src / "b", range(40, 80))))
    assert r.code == 0, r.err
    writes = [
        s
        for s in statements
        if re.search(r"\bRELATED\b", s) and re.search(r"\b(SET|DELETE|CREATE|MERGE|COPY)\b", s)
    ]
    after = _relationships(kf)
    changed = [k for k, v in before.items() if k in after and after[k] != v]
    assert len(changed) >= 200, len(changed)  # the load does change many of them
    assert 1 <= len(writes) <= 4, writes[:10]


def test_two_loads_leave_a_graph_near_the_size_of_one(kf: Path, tmp_path: Path) -> None:
    """The same files ingested in two steps, or in one: the graph files are of about the same
    size (Kùzu writes a table it appends to anew at each checkpoint and reuses the freed
    pages later, so some room stays free inside the file)."""
    src = tmp_path / "src"
    assert run_ok("store", "ingest", str(write_notes(src / "a", range(40)))).code == 0
    assert run_ok("store", "ingest", str(write_notes(src / "b", range(40, 80)))).code == 0
    one = tmp_path / "one"
    assert run_ok("init", str(one)).code == 0
    both = tmp_path / "both"
    both.mkdir()
    for p in sorted(src.rglob("*.md")):
        shutil.copy(p, both / p.name)
    assert run_ok("--root", str(one), "store", "ingest", str(both)).code == 0
    assert entity_graph(one) == entity_graph(kf)
    assert _graph_bytes(kf) <= 1.5 * _graph_bytes(one), (_graph_bytes(kf), _graph_bytes(one))


def test_a_load_committed_in_many_steps_equals_a_rebuild(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, statements: list[str]
) -> None:
    """A load of several commits into a folder that holds documents consolidates its
    entities in commits of their own (entities, mentions, relationships, each cut into
    pieces): whatever the cuts, the entity graph is the one a rebuild makes."""
    from openkl.entities import consolidation

    monkeypatch.setenv("OK_GRAPH_COMMIT_CHUNKS", "15")
    monkeypatch.setattr(consolidation, "ROWS_PER_STEP_HELD", 60)
    src = tmp_path / "src"
    assert run_ok("store", "ingest", str(write_notes(src / "a", range(30)))).code == 0
    statements.clear()
    r = run_ok("store", "ingest", str(write_notes(src / "b", range(30, 60))))
    assert r.code == 0, r.err
    commits = statements.count("COMMIT")
    assert commits >= 8, commits  # the consolidation was cut into several commits
    status = run_ok("status", "--json").json()
    assert status["in_sync"], status
    incremental = entity_graph(kf)
    copy = tmp_path / "rebuilt"
    shutil.copytree(kf, copy, symlinks=True)
    assert run_ok("--root", str(copy), "index", "--rebuild").code == 0
    assert entity_graph(copy) == incremental


def test_room_needed_counts_the_rows_and_the_rewrite(kf: Path, tmp_path: Path) -> None:
    """What a load asks of the disk before it writes: its rows, and (for a load of several
    commits) the tables its checkpoints write anew, less the room free inside the file."""
    from openkl.files.folder import Folder
    from openkl.graph import BYTES_PER_COMMIT, BYTES_PER_NEW_CHUNK
    from openkl.graph.indexing import open_graph

    assert run_ok("store", "ingest", str(write_notes(tmp_path / "src", range(20)))).code == 0
    folder = Folder(kf)
    with open_graph(folder, write=True) as g:
        rows = g.query("CALL fsm_info() RETURN sum(num_pages) AS n")
        inside = int(rows[0]["n"] or 0) * 4096
        live = _graph_bytes(kf) - inside
        assert g.room_needed(100, rewrite=False) == max(0, 100 * BYTES_PER_NEW_CHUNK - inside)
        assert g.room_needed(100) == max(
            0, 100 * BYTES_PER_NEW_CHUNK + live + BYTES_PER_COMMIT - inside
        )
        assert g.room_needed(100) > g.room_needed(10) >= live - inside
