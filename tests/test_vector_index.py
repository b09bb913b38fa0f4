"""Vector search through Kùzu's HNSW index from `search.hnsw_min_chunks` chunks: the index
is built by the write that reaches the threshold, kept below it, dropped when the setting
is 0 and built again after, follows edits (no superseded chunk is ever returned) and
answers like the exact scan on a small folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.run import run_ok

from openkl.files.folder import Folder
from openkl.graph import indexing

QUERIES = ("one writer at a time", "hybrid search with citations", "refresh a stale source")


def vector_ids(query: str) -> list[str]:
    r = run_ok("search", query, "--mode", "vector", "--in", "store", "-k", "5", "--json")
    assert r.code == 0, r.err
    return [h["id"] for h in json.loads(r.out)]


def has_index(root: Path) -> bool:
    with indexing.open_graph(Folder(root)) as g:
        return bool(g._vector_index())


def test_the_index_is_built_at_the_threshold_and_answers_like_the_exact_scan(
    example_kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = {q: vector_ids(q) for q in QUERIES}
    assert not has_index(example_kf)
    monkeypatch.setenv("OK_SEARCH_HNSW_MIN_CHUNKS", "1")
    assert run_ok("mem", "add", "A note whose write builds the vector index.").code == 0
    assert has_index(example_kf)
    folder = Folder(example_kf)
    emb = indexing.embedder(folder)
    with indexing.open_graph(folder) as g:
        for q in QUERIES:
            v = emb.embed_query(q)
            assert [i for i, _ in g.vector("Chunk", v, 5)] == [
                i for i, _ in g.vector_scan("Chunk", v, 5)
            ]
            for (_, a), (_, b) in zip(
                g.vector("Chunk", v, 5), g.vector_scan("Chunk", v, 5), strict=True
            ):
                assert a == pytest.approx(b, abs=1e-5)
    assert {q: vector_ids(q) for q in QUERIES} == exact
    # fewer chunks than the threshold: the index stays (it answers as well at any size)
    monkeypatch.setenv("OK_SEARCH_HNSW_MIN_CHUNKS", "100000")
    assert run_ok("mem", "add", "Bananas ripen faster beside apples in a paper bag.").code == 0
    assert has_index(example_kf)
    # 0 turns it off: the next write drops it
    monkeypatch.setenv("OK_SEARCH_HNSW_MIN_CHUNKS", "0")
    assert run_ok("mem", "add", "Pears ripen from the inside out.").code == 0
    assert not has_index(example_kf)
    # and turned on again, the next write builds it again (Kùzu keeps a dropped index's
    # name, so the new one has a name of its own), and search goes through it
    monkeypatch.setenv("OK_SEARCH_HNSW_MIN_CHUNKS", "1")
    assert run_ok("mem", "add", "Plums keep longer in the cold.").code == 0
    assert has_index(example_kf)
    assert {q: vector_ids(q) for q in QUERIES} == exact


def test_an_edited_document_is_found_by_its_new_text_and_never_by_its_old(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OK_SEARCH_HNSW_MIN_CHUNKS", "1")
    src = tmp_path / "in"
    src.mkdir()
    for i, topic in enumerate(("glaciers melt in warm summers", "volcanoes erupt lava")):
        (src / f"d{i}.md").write_text(f"# Note {i}\n\nA page about how {topic}.\n")
    assert run_ok("store", "ingest", str(src)).code == 0
    assert has_index(kf)
    page = next((kf / "store" / "normalized").rglob("d0*.ok.md"))
    page.write_text(page.read_text().replace("glaciers melt in warm summers", "bees make honey"))
    r = run_ok("sync")
    assert r.code == 0, r.err
    folder = Folder(kf)
    emb = indexing.embedder(folder)
    with indexing.open_graph(folder) as g:
        current = {r["id"] for r in g.query("MATCH (c:Chunk) WHERE c.current RETURN c.id AS id")}
        for q in ("bees make honey", "glaciers melt in warm summers"):
            hits = g.vector("Chunk", emb.embed_query(q), 5)
            assert hits and {i for i, _ in hits} <= current
        texts = g.chunks_by_id([i for i, _ in g.vector("Chunk", emb.embed_query("honey"), 1)])
        assert "bees make honey" in next(iter(texts.values()))["text"]


@pytest.mark.parametrize("resident", [False, True], ids=["command", "server"])
def test_an_index_dropped_and_made_again_in_one_open_waits_for_the_next(
    tmp_path: Path, resident: bool
) -> None:
    """Kùzu cannot make a vector index after a drop until the database is opened anew: the
    write goes on with the exact scan, and the next open builds the index. A server keeps
    one database for all its writers, so there it waits for the server's next start."""
    import contextlib

    import numpy as np

    from openkl.graph import Graph

    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(30, 4)).astype("float32")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    docs = [
        {
            "id": "d",
            "path": "store/normalized/d.ok.md",
            "sha256": "s",
            "title": "d",
            "source": "{}",
            "created_at": "2026-12-01T00:00:00Z",
            "chars": 300,
            "current": True,
        }
    ]
    chunks = [
        {"id": f"d#char{i}-{i + 1}", "doc_id": "d", "text": f"w{i}", "start": i, "end": i + 1}
        | {"ord": i}
        for i in range(30)
    ]
    with Graph.resident(tmp_path) if resident else contextlib.nullcontext():
        with Graph.open(tmp_path, write=True, dim=4, embedder_identity="t") as g:
            g.add_docs(docs, chunks, vecs)  # type: ignore[arg-type]
            assert g.fit_vector_index(1) and g._vector_index()
            assert not g.fit_vector_index(0) and not g._vector_index()
            assert not g.fit_vector_index(1) and not g._vector_index()
        with Graph.open(tmp_path, write=True, dim=4, embedder_identity="t") as g:
            # a second writer: a new database for a command, the same one in a server
            assert g.fit_vector_index(1) != resident
            assert bool(g._vector_index()) != resident
            exact = g.vector_scan("Chunk", vecs[0].tolist(), 5)
    with Graph.open(tmp_path, write=True, dim=4, embedder_identity="t") as g:
        assert g.fit_vector_index(1)
        assert g._vector_index().startswith("chunk_vec_")
        assert [i for i, _ in g.vector("Chunk", vecs[0].tolist(), 5)] == [i for i, _ in exact]
