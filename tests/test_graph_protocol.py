"""`Graph` keeps to `GraphStore`, the interface the rest of openkl uses: every member of the
Protocol exists on `Graph`, methods with the same parameters (names, kinds, defaults)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from helpers.graph import drift, members

from openkl.graph import Graph
from openkl.graph.entities import EntityStore
from openkl.graph.lineage_queries import WalkSteps
from openkl.graph.protocol import GraphStore


def test_graph_keeps_to_the_graph_store_protocol() -> None:
    g = Graph(None, None, Path("graph.kz"), False)  # no database: only its attributes
    found = drift(GraphStore, Graph, g)
    assert not found, "Graph and GraphStore differ:\n" + "\n".join(found)


def test_the_protocol_lists_what_the_features_use() -> None:
    have = set(members(GraphStore))
    assert {"docs", "notes", "chunks_by_id", "fts", "vector", "meta", "transaction"} <= have
    assert {"counts", "incomplete", "cypher", "lineage_walk", "link_note_to_chunk"} <= have
    assert "query" not in have  # Cypher of its own stays inside the graph layer
    # the steps of Kùzu's lineage walk, and what only tests ask, are not the callers'
    steps = set(members(WalkSteps)) - {"lineage_note", "lineage_chunk", "lineage_doc"}
    assert {"newer_versions", "note_source_notes", "links_from"} <= steps
    assert not (steps - {"links_from", "links_to"}) & have
    assert not {"chunk_mentions", "note_mentions"} & set(members(EntityStore))


def test_graph_walks_lineage_by_the_steps_of_the_walk() -> None:
    g = Graph(None, None, Path("graph.kz"), False)
    found = drift(WalkSteps, Graph, g)
    assert not found, "Graph and WalkSteps differ:\n" + "\n".join(found)


def test_drift_is_found() -> None:
    class Store(Protocol):
        flag: bool

        def read(self, doc_id: str, k: int = 5) -> list[str]: ...

        def gone(self) -> None: ...

    class Impl:
        def read(self, doc_id: str, k: int = 10) -> list[str]:
            return []

    found = drift(Store, Impl, Impl())
    assert [d.split(":")[0] for d in found] == ["flag", "gone", "read"]
    assert found[:2] == ["flag: missing", "gone: missing"]
    assert "5)] in the Protocol" in found[2] and "10)] on Impl" in found[2]
