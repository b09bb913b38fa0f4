"""A database `ok serve` keeps open: its readers reuse connections and prepared statements,
and keep what they learned of it (its Meta, which tables are empty) until a writer changes
it; every answer equals a fresh connection's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openkl.graph import Graph
from openkl.records import ChunkInput, DocInput, NoteRow

DIM = 16
IDENT = "test:16"


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _docs(ids: list[str]) -> tuple[list[DocInput], list[ChunkInput]]:
    docs = [
        DocInput(
            id=i,
            path=f"store/{i}.md",
            sha256="0" * 64,
            title=i,
            source="{}",
            created_at="",
            chars=10,
            current=True,
        )
        for i in ids
    ]
    chunks = [
        ChunkInput(
            id=f"{i}#char0-20",
            doc_id=i,
            text=f"passage {i} about {j % 7} things",
            start=0,
            end=20,
            ord=0,
        )
        for j, i in enumerate(ids)
    ]
    return docs, chunks


def _note(nid: str) -> NoteRow:
    return NoteRow(
        id=nid,
        path=f"memories/{nid}.md",
        sha256="1" * 64,
        text="a passage kept as a note",
        ts="2026-01-01T00:00:00Z",
        tags=[],
        topics=[],
        body_start=0,
        body_end=24,
    )


@pytest.fixture
def kuzu_dir(tmp_path: Path) -> Path:
    where = tmp_path / "kuzu"
    ids = [f"d{i:03d}" for i in range(300)]
    with Graph.open(where, write=True, dim=DIM, embedder_identity=IDENT) as w:
        w.add_docs(*_docs(ids), _unit(np.random.default_rng(3), len(ids)))
    return where


def _answers(g: Graph, qs: np.ndarray) -> list[Any]:
    out: list[Any] = []
    for i, q in enumerate(qs):
        out.append(g.vector("Chunk", q, 20))
        out.append(g.fts("Chunk", f"passage things {i % 7}", 20))
        out.append(g.chunks_by_id([h for h, _ in out[-2][:5]]))
    return out


def test_readers_reuse_connections_and_statements_and_answer_as_a_fresh_one(
    kuzu_dir: Path,
) -> None:
    qs = _unit(np.random.default_rng(5), 8)
    with Graph.open(kuzu_dir, write=False, embedder_identity=IDENT) as fresh:
        want = _answers(fresh, qs)
    with Graph.resident(kuzu_dir):
        with Graph.open(kuzu_dir, write=False, embedder_identity=IDENT) as g:
            first = g.conn
            assert _answers(g, qs) == want
            assert g._statements  # the queries with parameters were prepared once, kept
        for _ in range(3):
            with Graph.open(kuzu_dir, write=False, embedder_identity=IDENT) as g:
                assert g.conn is first
                assert _answers(g, qs) == want
        # a reader that failed leaves its connection behind
        with (
            pytest.raises(RuntimeError),
            Graph.open(kuzu_dir, write=False, embedder_identity=IDENT) as g,
        ):
            raise RuntimeError("the request failed")
        with Graph.open(kuzu_dir, write=False, embedder_identity=IDENT) as g:
            assert g.conn is not first
            assert _answers(g, qs) == want


def test_what_readers_keep_is_renewed_after_each_write(kuzu_dir: Path) -> None:
    q = _unit(np.random.default_rng(9), 1)[0]
    with Graph.resident(kuzu_dir):
        for _ in range(2):
            with Graph.open(kuzu_dir, write=False, embedder_identity=IDENT) as g:
                g.trace = []
                assert g.fts("MemoryNote", "passage", 10) == []
                assert g.vector("MemoryNote", q, 10) == []
                assert g.hidden_notes("2026-06-01T00:00:00Z") == set()
                asked = list(g.trace)
        assert asked == []  # the second reader knew there are no notes
        with Graph.open(kuzu_dir, write=True, dim=DIM, embedder_identity=IDENT) as w:
            w.add_notes([_note("m-kept")], q[None, :])
        with Graph.open(kuzu_dir, write=False, embedder_identity=IDENT) as g:
            assert [i for i, _ in g.fts("MemoryNote", "passage", 10)] == ["m-kept"]
            assert [i for i, _ in g.vector("MemoryNote", q, 10)] == ["m-kept"]
        with Graph.open(kuzu_dir, write=True, dim=DIM, embedder_identity=IDENT) as w:
            w.remove_note("m-kept")
        with Graph.open(kuzu_dir, write=False, embedder_identity=IDENT) as g:
            assert g.fts("MemoryNote", "passage", 10) == []
            assert g.vector("MemoryNote", q, 10) == []


@pytest.mark.parametrize("n", [1, 3, 32, 33, 70, 300])
def test_rows_by_key_are_those_of_a_scan(kuzu_dir: Path, n: int) -> None:
    ids = [f"d{i:03d}#char0-20" for i in range(0, 300, max(1, 300 // n))][:n]
    asked = [*ids, ids[0], "nowhere#char0-1"]  # a repeat and an id that is not there
    ret = "n.id AS id, n.text AS text, n.span_end AS `end`"
    with Graph.open(kuzu_dir, write=False, embedder_identity=IDENT) as g:
        scan = g.query(f"MATCH (n:Chunk) WHERE n.id IN $ids RETURN {ret}", {"ids": asked})
        got = g.by_key("Chunk", asked, ret)
        rows = g.chunks_by_id(asked)
    assert sorted(got, key=lambda r: r["id"]) == sorted(scan, key=lambda r: r["id"])
    assert len(got) == len(ids) and sorted(rows) == sorted(ids)
    assert all(rows[i]["path"] == f"store/{i.split('#')[0]}.md" for i in ids)


def test_a_kept_database_gets_a_pool_sized_to_the_machine(kuzu_dir: Path) -> None:
    """A server's database gets a quarter of the memory (1 to 16 GiB), not a command's
    512 MiB: a large write beside many readers filled that and failed."""
    import os

    from openkl.graph import _residents, resident_pool_mb

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    assert resident_pool_mb() == max(1024, min(16384, total // 4))
    with Graph.resident(kuzu_dir):
        assert _residents[kuzu_dir.resolve()].buffer_pool_mb == resident_pool_mb()
        with Graph.open(kuzu_dir, write=False) as g:
            assert g.vector("Chunk", _unit(np.random.default_rng(1), 1)[0], 3)
    with Graph.resident(kuzu_dir, buffer_pool_mb=768):
        assert _residents[kuzu_dir.resolve()].buffer_pool_mb == 768


def test_a_full_pool_says_which_setting_gives_it_more() -> None:
    from openkl.graph import _commit_failed

    full = RuntimeError(
        "Buffer manager exception: Unable to allocate memory! The buffer pool is full and no memory could be freed!"
    )
    assert "serve.buffer_pool_mb" in (_commit_failed(full, True).hint or "")
    assert "graph.buffer_pool_mb" in (_commit_failed(full, False).hint or "")
    other = _commit_failed(RuntimeError("Copy exception: duplicate key"), False)
    assert (
        other.message.startswith("commit failed: Copy exception") and other.hint == "run `ok sync`"
    )
