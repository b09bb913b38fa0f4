"""A database `ok serve` keeps open: its readers' kept connections, and the vectors it keeps
in memory to narrow the vector scan, give exactly what a fresh connection's scan gives,
before and after writes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from openkl.graph import Graph
from openkl.records import ChunkInput, DocInput

DIM = 16


def _rows(ids: list[str], vecs: np.ndarray) -> tuple[list[DocInput], list[ChunkInput], Any]:
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
        ChunkInput(id=f"{i}#char0-10", doc_id=i, text=f"passage {i}", start=0, end=10, ord=0)
        for i in ids
    ]
    return docs, chunks, vecs


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _scan(g: Graph, q: np.ndarray, k: int) -> list[tuple[str, float]]:
    """The exact scan, whatever the connection keeps."""
    kept, g._res = g._res, None
    try:
        return g.vector("Chunk", q, k)
    finally:
        g._res = kept


def _narrowed(kuzu_dir: Path, q: np.ndarray, k: int) -> tuple[list[tuple[str, float]], bool]:
    """What a reader's `vector` answers, and whether it narrowed the scan to do it."""
    with Graph.open(kuzu_dir, write=False, check=False) as g:
        g.trace = []
        got = g.vector("Chunk", q, k)
        narrowed = any(t.startswith("UNWIND $ids") for t in g.trace)
        assert got == _scan(g, q, k)
        return got, narrowed


def _until_narrowed(kuzu_dir: Path, q: np.ndarray, k: int) -> list[tuple[str, float]]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got, narrowed = _narrowed(kuzu_dir, q, k)
        if narrowed:
            return got
        time.sleep(0.05)
    raise AssertionError("the kept vectors were never used")


def test_narrowed_vector_search_equals_the_scan_before_and_after_writes(tmp_path: Path) -> None:
    kuzu_dir = tmp_path / "kuzu"
    rng = np.random.default_rng(7)
    ids = [f"d{i:04d}" for i in range(600)]
    with Graph.open(kuzu_dir, write=True, dim=DIM, embedder_identity="test:16") as w:
        w.add_docs(*_rows(ids, _unit(rng, len(ids))))
    with Graph.resident(kuzu_dir):
        q = _unit(rng, 1)[0]
        _until_narrowed(kuzu_dir, q, 50)
        for q in _unit(rng, 30):  # asserts each equals the scan
            _narrowed(kuzu_dir, q, 50)
        # a new passage that is the query itself: found first at once, though the kept
        # vectors are stale until they are read again
        with Graph.open(kuzu_dir, write=True, dim=DIM, embedder_identity="test:16") as w:
            w.add_docs(*_rows(["new"], q[None, :]))
        got, _ = _narrowed(kuzu_dir, q, 50)
        assert got[0][0] == "new#char0-10"
        assert _until_narrowed(kuzu_dir, q, 50)[0][0] == "new#char0-10"
        with Graph.open(kuzu_dir, write=True, dim=DIM, embedder_identity="test:16") as w:
            w.remove_doc("new")
        got, _ = _narrowed(kuzu_dir, q, 50)
        assert "new#char0-10" not in {i for i, _ in got}
        assert "new#char0-10" not in {i for i, _ in _until_narrowed(kuzu_dir, q, 50)}


def test_ties_at_the_cut_fall_back_to_the_scan(tmp_path: Path) -> None:
    # every vector the same: the candidates cannot be told apart, so the scan decides
    # (ties by id), and the answer is still the scan's
    kuzu_dir = tmp_path / "kuzu"
    ids = [f"d{i:04d}" for i in range(400)]
    same = np.tile(_unit(np.random.default_rng(1), 1), (len(ids), 1))
    with Graph.open(kuzu_dir, write=True, dim=DIM, embedder_identity="test:16") as w:
        w.add_docs(*_rows(ids[::-1], same))
    with Graph.resident(kuzu_dir):
        q = same[0]
        _narrowed(kuzu_dir, q, 10)
        deadline = time.monotonic() + 60
        while Graph._resident_of(kuzu_dir).vectors("Chunk") is None:  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        got, _ = _narrowed(kuzu_dir, q, 10)
        assert [i for i, _ in got] == [f"{i}#char0-10" for i in ids[:10]]
