"""Questions put to a graph: how an implementation drifts from the `GraphStore` Protocol,
the same reads on either backend, and the whole entity graph of a folder."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from helpers.run import run_ok

from openkl.entities import queries
from openkl.graph.protocol import GraphStore


def members(proto: type) -> dict[str, Any]:
    """The members a Protocol declares, its bases' included: name → function (or None for
    an attribute declared by annotation)."""
    out: dict[str, Any] = {}
    for cls in reversed(proto.__mro__):
        if cls in (object, Protocol) or not getattr(cls, "_is_protocol", False):
            continue
        out.update(dict.fromkeys(getattr(cls, "__annotations__", {})))
        out.update(
            {
                name: value
                for name, value in vars(cls).items()
                if not name.startswith("_") and callable(value)
            }
        )
    return out


def _params(fn: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def drift(proto: type, impl: type, instance: Any) -> list[str]:
    """How `impl` differs from `proto`: members missing, methods with other parameters."""
    out = []
    for name, fn in sorted(members(proto).items()):
        if not hasattr(impl, name) and not hasattr(instance, name):
            out.append(f"{name}: missing")
        elif fn is not None:
            want, have = _params(fn), _params(getattr(impl, name))
            if want != have:
                out.append(f"{name}: {want} in the Protocol, {have} on {impl.__name__}")
    return out


def _sorted(rows: list[Any]) -> list[Any]:
    return sorted(rows, key=lambda r: r["id"])


ALL_CHUNKS: Callable[[GraphStore], list[str]] = lambda g: sorted(  # noqa: E731
    c["id"] for c in g.current_chunks_of(sorted(g.docs()))
)


QUESTIONS: dict[str, Callable[[GraphStore], Any]] = {
    "docs": lambda g: g.docs(),
    "notes": lambda g: g.notes(),
    "doc_summaries": lambda g: _sorted(g.doc_summaries()),
    "note_summaries": lambda g: _sorted(g.note_summaries()),
    "notes_by_id": lambda g: g.notes_by_id(sorted(g.notes())),
    "chunks_by_id": lambda g: g.chunks_by_id(ALL_CHUNKS(g)),
    "current_chunks_of": lambda g: _sorted(g.current_chunks_of(sorted(g.docs()))),
    "notes_with_vectors": lambda g: _sorted(g.notes_with_vectors(sorted(g.notes()))),
    "vectors": lambda g: g.vectors("MemoryNote", sorted(g.notes())),
    "doc_paths": lambda g: g.doc_paths(sorted(g.docs())),
    "doc_titles": lambda g: g.doc_titles(),
    "note_times": lambda g: _sorted(g.note_times()),
    "note_refs": lambda g: _sorted(g.note_refs()),
    "all_links": lambda g: g.all_links(),
    "links_to": lambda g: g.links_to([e["dst"] for e in g.all_links()]),
    "link_ends": lambda g: g.link_ends(sorted(g.notes()), sorted(g.docs())),
    "lineage": lambda g: {n: g.note_source_docs(n) for n in sorted(g.notes())},
    "derived": lambda g: g.notes_derived_from_docs(sorted(g.docs())),
    "lineage_chunk": lambda g: [g.lineage_chunk(c) for c in ALL_CHUNKS(g)],
    "overlapping": lambda g: {d: sorted(g.chunks_overlapping(d, 0, 400)) for d in g.docs()},
    "counts": lambda g: {k: v for k, v in g.counts().items() if k != "Entity"},
    "hidden_notes": lambda g: g.hidden_notes("2026-02-01T00:00:00Z"),
    "superseding": lambda g: {n: (g.older_notes(n), g.newer_notes(n)) for n in g.notes()},
    "note_sources": lambda g: {
        n: (g.note_source_notes(n), g.notes_derived_from_note(n)) for n in g.notes()
    },
}


def held_rels(g: GraphStore) -> dict[Any, Any]:
    rels = g.held_entities(sorted(g.entity_ids()))[2]
    return {k: {c: v for c, v in (r or {}).items() if c != "rid"} for k, r in rels.items()}


def top_entities(g: GraphStore, n: int = 6) -> list[str]:
    """The most mentioned entities (ties by id)."""
    rows = g.entities(min_confidence=0.0)
    return [r["id"] for r in sorted(rows, key=lambda r: (-r["mentions"], r["id"]))[:n]]


ENTITY_QUESTIONS: dict[str, Callable[[GraphStore], Any]] = {
    "entities": lambda g: g.entities(min_confidence=0.0),
    "entities_confident": lambda g: g.entities(min_confidence=0.6),
    "entities_of_a_type": lambda g: g.entities(min_confidence=0.0, type="person"),
    "entities_of_a_doc": lambda g: {
        d: g.entities(min_confidence=0.0, doc=d) for d in sorted(g.docs())
    },
    "export_filtered": lambda g: g.export_entities(min_confidence=0.5, type="Concept"),
    "export_verified": lambda g: g.export_entities(verified_only=True),
    "entity_aliases": lambda g: g.entity_aliases(),
    "all_entity_aliases": lambda g: sorted(g.all_entity_aliases()),
    "names_near": lambda g: {p: g.entity_names_near(p) for p in ("sql", "gene", "log", "a")},
    "entity_either": lambda g: [g.entity_either(e, e.upper()) for e in top_entities(g)],
    "chunk_mentions": lambda g: {e: g.chunk_mentions(e, 3) for e in top_entities(g)},
    "note_mentions": lambda g: {e: g.note_mentions(e, 3) for e in top_entities(g)},
    "mentions_of_many": lambda g: [
        g.mentions_of_many(t, top_entities(g), 2) for t in ("Chunk", "MemoryNote")
    ],
    "relationships_of": lambda g: {e: g.relationships_of(e, 0.3) for e in top_entities(g)},
    "relationships_of_many": lambda g: g.relationships_of_many(top_entities(g), 0.0),
    "relationships_touching": lambda g: g.relationships_touching(top_entities(g, 3), 0.3),
    "relationships_among": lambda g: g.relationships_among(top_entities(g, 12), 0.0),
    "mentions_in": lambda g: g.mentions_in(
        sorted(g.notes()) + sorted(c["id"] for c in g.current_chunks_of(sorted(g.docs()))), 0.4
    ),
    "entities_named_by": lambda g: {
        t: sorted(g.entities_named_by(t, 0.0)) for t in ("sqlite", "wal", "crispr", "lovelace")
    },
    "entities_by_id": lambda g: g.entities_by_id(top_entities(g)),
    "source_docs": lambda g: g.source_docs(sorted(g.docs())),
    "source_notes": lambda g: g.source_notes(sorted(g.notes())),
    "source_versions": lambda g: g.source_versions(sorted(g.docs())),
    "chunks_to_extract": lambda g: g.chunks_to_extract(sorted(g.docs())),
    "notes_to_extract": lambda g: g.notes_to_extract(sorted(g.notes())),
    "extraction_data": lambda g: g.extraction_data(sorted(r["id"] for r in g.extraction_index())),
    "neighbourhood": lambda g: [
        queries.neighbourhood(g, top_entities(g, 2), depth=d, min_confidence=0.3, types=t, limit=n)
        for d, t, n in ((1, (), 300), (2, (), 300), (2, ("Concept",), 300), (3, (), 15))
    ],
    "walk": lambda g: {
        (e, d): g.relationships_walk(e, d, 0.3) for e in top_entities(g, 3) for d in (1, 2, 3)
    },
}


def entity_state(g: GraphStore) -> dict[str, Any]:
    """Every entity question, every row consolidation wrote, and its stamps."""
    return (
        {n: q(g) for n, q in ENTITY_QUESTIONS.items()}
        | {"held": held_rels(g), "export": g.export_entities()}
        | {"relationships": g.export_relationships(), "counts": g.counts()}
        | {"extractions": sorted(g.extraction_index(), key=lambda r: r["id"])}
        | {"stamps": {k: g.meta().get(k) for k in ("entities.extractor", "entities.canonical")}}
    )


def entity_graph(root: Path) -> dict[str, list]:
    """Every entity, mention and relationship with all their properties."""
    out = {}
    for name, cypher in {
        "entities": "MATCH (e:Entity) RETURN e.id, e.name, e.type, e.description,"
        " round(e.confidence, 9), e.aliases, e.docs, e.verified, e.source_kind, e.canonical,"
        " e.ext_id, e.extra ORDER BY e.id",
        "mentions": "MATCH (x)-[m:MENTIONS]->(e:Entity) RETURN x.id AS src, e.id AS dst,"
        " round(m.confidence, 9) AS c ORDER BY src, dst",
        "related": "MATCH (a:Entity)-[r:RELATED]->(b:Entity) RETURN a.id AS src, b.id AS dst,"
        " r.type AS t, round(r.confidence, 9), r.evidence, r.docs, r.verified, r.source_kind,"
        " r.description, r.ext_id, r.extra ORDER BY src, dst, t",
    }.items():
        r = run_ok("--root", str(root), "graph", "cypher", cypher, "--json")
        assert r.code == 0, r.err
        out[name] = r.json()
    return out
