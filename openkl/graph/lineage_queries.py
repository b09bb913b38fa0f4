"""Lineage queries: where a note, chunk or document came from, and what came of it
(`DERIVED_FROM`, `HAS_CHUNK`, `SUPERSEDES`), and the walk over them (`lineage_walk`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, cast

from ..records import (
    ChunkNode,
    DocNode,
    LineageWalk,
    LinkEdge,
    NoteNode,
    WalkedNode,
    supersession,
)
from .base import Queries

# the walk's rules, shared by both backends (postgres.py writes them in SQL):
# - from a note, a chunk or a document `up` (provenance) and `down` (descendants), or both;
# - provenance keeps going up and descendants keep going down: no zig-zag from a note to
#   its chunk to every other note derived from that chunk;
# - from an old version reached going up, only on to newer versions (`newer`);
# - `[[links]]` are shown, not walked on from.
UP = ("DERIVED_FROM", "PART_OF", "SUPERSEDES")
LINKS = ("LINKS_TO", "LINKED_FROM")
DIRECTIONS = ("up", "down", "both")


class NodeRows(Protocol):
    """What a graph shows of a node of a lineage walk (`lineage_row`); in `GraphStore`."""

    def lineage_note(self, note_id: str) -> NoteNode | None: ...
    def lineage_chunk(self, chunk_id: str) -> ChunkNode | None: ...
    def lineage_doc(self, doc_id: str) -> DocNode | None: ...


class WalkSteps(NodeRows, Protocol):
    """What `walk` asks of a graph: one lookup per node and relationship kind. Kùzu's
    `Graph` walks this way; PostgreSQL walks in one query (`PgGraph.lineage_walk`), so
    the steps are not part of `GraphStore`, which holds what callers use."""

    def links_from(self, note_ids: Sequence[str]) -> list[LinkEdge]: ...
    def links_to(self, ids: Sequence[str]) -> list[LinkEdge]: ...
    def newer_versions(self, doc_id: str) -> list[str]: ...
    def newer_versions_if_retired(self, doc_id: str) -> list[str]: ...
    def older_versions(self, doc_id: str) -> list[str]: ...
    def note_source_chunks(self, note_id: str) -> list[str]: ...
    def note_source_docs(self, note_id: str) -> list[str]: ...
    def docs_of_chunk(self, chunk_id: str) -> list[str]: ...
    def notes_derived_from_chunk(self, chunk_id: str) -> list[str]: ...
    def notes_derived_from_doc(self, doc_id: str) -> list[str]: ...
    def notes_derived_from_doc_chunks(self, doc_id: str) -> list[str]: ...
    def older_notes(self, note_id: str) -> list[str]: ...
    def newer_notes(self, note_id: str) -> list[str]: ...
    def note_source_notes(self, note_id: str) -> list[str]: ...
    def notes_derived_from_note(self, note_id: str) -> list[str]: ...


def next_way(rel: str, way: str) -> str:
    """The direction a walk goes on in from a node it reached by `rel` going `way`."""
    if rel == "SUPERSEDED_BY" and way in ("up", "newer"):
        return "newer"  # from an old version only on to newer ones
    return "up" if rel in UP else "down"


def walk(
    g: WalkSteps,
    kind: str,
    node_id: str,
    direction: str,
    depth: int,
    refs: Callable[[str], Sequence[str]],
) -> LineageWalk:
    """`lineage_walk` by one lookup per node and relationship kind, through the graph's
    named queries."""
    nodes: list[WalkedNode] = []
    edges = []
    seen = {(kind, node_id)}
    frontier = [(kind, node_id, direction)]
    for level in range(1, depth + 1):
        nxt = []
        for k, i, way in frontier:
            for rel, k2, i2 in _neighbours(g, k, i, way, refs):
                edges.append({"from": i, "rel": rel, "to": i2})
                if (k2, i2) in seen:
                    continue
                seen.add((k2, i2))
                row = lineage_row(g, k2, i2)
                nodes.append(
                    {"kind": k2, "id": i2, "depth": level, "via": i, "rel": rel, "row": row}
                )
                if rel not in LINKS:
                    nxt.append((k2, i2, next_way(rel, way)))
        frontier = nxt
        if not frontier:
            break
    return {"nodes": nodes, "edges": edges}  # type: ignore[typeddict-item]


def lineage_row(g: NodeRows, kind: str, node_id: str) -> NoteNode | ChunkNode | DocNode | None:
    """What the graph holds of a node of a lineage walk (a kind but memory and chunk: a
    document)."""
    if kind == "memory":
        return g.lineage_note(node_id)
    if kind == "chunk":
        return g.lineage_chunk(node_id)
    return g.lineage_doc(node_id)


def _neighbours(
    g: WalkSteps, kind: str, nid: str, way: str, refs: Callable[[str], Sequence[str]]
) -> list[tuple[str, str, str]]:
    """(relationship, kind, id) of the next nodes, sorted."""
    out: list[tuple[str, str, str]] = []
    up, down = way in ("up", "both"), way in ("down", "both")
    if kind == "doc" and way == "newer":
        return sorted({("SUPERSEDED_BY", "doc", i) for i in g.newer_versions(nid)})
    if kind == "memory":
        out += [("LINKS_TO", e["kind"], e["dst"]) for e in g.links_from([nid])]
    if kind in ("memory", "doc"):
        out += [("LINKED_FROM", "memory", e["src"]) for e in g.links_to([nid])]
    if kind == "memory" and up:
        out += [("DERIVED_FROM", "chunk", i) for i in g.note_source_chunks(nid)]
        out += [("DERIVED_FROM", "doc", i) for i in g.note_source_docs(nid)]
        out += _note_sources(g, refs(nid))
        out += [("SUPERSEDES", "memory", i) for i in g.older_notes(nid)]
        out += [("DERIVED_FROM", "memory", i) for i in g.note_source_notes(nid)]
    if kind == "memory" and down:
        out += [("SUPERSEDED_BY", "memory", i) for i in g.newer_notes(nid)]
        out += [("DERIVED_BY", "memory", i) for i in g.notes_derived_from_note(nid)]
    if kind == "chunk":
        if up:
            out += [("PART_OF", "doc", i) for i in g.docs_of_chunk(nid)]
        if down:
            out += [("DERIVED_BY", "memory", i) for i in g.notes_derived_from_chunk(nid)]
    if kind == "doc":
        if up:
            out += [("SUPERSEDES", "doc", i) for i in g.older_versions(nid)]
        if up and not down:
            # provenance that reached an old version also names what replaced it
            out += [("SUPERSEDED_BY", "doc", i) for i in g.newer_versions_if_retired(nid)]
        if down:
            out += [("SUPERSEDED_BY", "doc", i) for i in g.newer_versions(nid)]
            out += [("DERIVED_BY", "memory", i) for i in g.notes_derived_from_doc(nid)]
            out += [("DERIVED_BY", "memory", i) for i in g.notes_derived_from_doc_chunks(nid)]
    return sorted(set(out))


def _note_sources(g: WalkSteps, refs: Sequence[str]) -> list[tuple[str, str, str]]:
    """The edges of what a note's file says it was derived from: a chunk the graph holds,
    else the document of the id (a chunk of a version since replaced: that version)."""
    out = []
    for ref in refs:
        if "#" in ref and g.lineage_chunk(ref):
            out.append(("DERIVED_FROM", "chunk", ref))
        elif g.lineage_doc(ref.split("#", 1)[0]):
            out.append(("DERIVED_FROM", "doc", ref.split("#", 1)[0]))
    return out


class LineageQueries(Queries):
    """Named queries over the provenance edges, mixed into `Graph`."""

    def lineage_walk(
        self,
        kind: str,
        node_id: str,
        direction: str,
        depth: int,
        refs: Callable[[str], Sequence[str]],
    ) -> LineageWalk:
        """A breadth-first walk from a node (`kind` memory, chunk or doc) in `direction`
        (up, down, both) up to `depth` hops, by the rules above; `refs(note)` gives the ids a
        note's file says it was derived from (its `derived_from`, which is canonical)."""
        # `Graph` mixes this in with the link queries the walk also asks (`LinkQueries`)
        return walk(cast(WalkSteps, self), kind, node_id, direction, depth, refs)

    # -- what a lineage walk shows of each node ---------------------------------------
    def lineage_note(self, note_id: str) -> NoteNode | None:
        """A note's `path` and `text`, or None when the graph does not hold it."""
        rows = self.query(
            "MATCH (m:MemoryNote {id: $id}) RETURN m.path AS path, m.text AS text", {"id": note_id}
        )
        return rows[0] if rows else None  # type: ignore[return-value]

    def lineage_chunk(self, chunk_id: str) -> ChunkNode | None:
        """A chunk's `doc`, `current` and `text`, or None when the graph does not hold it."""
        rows = self.query(
            "MATCH (c:Chunk {id: $id}) RETURN c.doc_id AS doc, c.current AS current,"
            " c.text AS text",
            {"id": chunk_id},
        )
        return rows[0] if rows else None  # type: ignore[return-value]

    def lineage_doc(self, doc_id: str) -> DocNode | None:
        """A document's `path`, `title` and `current`, or None when the graph does not hold it."""
        rows = self.query(
            "MATCH (d:Doc {id: $id}) RETURN d.path AS path, d.title AS title, d.current AS current",
            {"id": doc_id},
        )
        return rows[0] if rows else None  # type: ignore[return-value]

    # -- one step of the walk --------------------------------------------------------
    def newer_versions(self, doc_id: str) -> list[str]:
        """The documents that supersede this one."""
        return [
            r["id"]
            for r in self.query(
                "MATCH (n:Doc)-[:SUPERSEDES]->(:Doc {id: $id}) RETURN n.id AS id", {"id": doc_id}
            )
        ]

    def newer_versions_if_retired(self, doc_id: str) -> list[str]:
        """The documents that supersede this one, when it is no longer current."""
        return [
            r["id"]
            for r in self.query(
                "MATCH (n:Doc)-[:SUPERSEDES]->(d:Doc {id: $id}) WHERE NOT d.current"
                " RETURN n.id AS id",
                {"id": doc_id},
            )
        ]

    def older_versions(self, doc_id: str) -> list[str]:
        """The documents this one supersedes."""
        return [
            r["id"]
            for r in self.query(
                "MATCH (:Doc {id: $id})-[:SUPERSEDES]->(o:Doc) RETURN o.id AS id", {"id": doc_id}
            )
        ]

    def note_source_chunks(self, note_id: str) -> list[str]:
        """The chunks a note is derived from."""
        return [
            r["id"]
            for r in self.query(
                "MATCH (:MemoryNote {id: $id})-[:DERIVED_FROM]->(c:Chunk) RETURN c.id AS id",
                {"id": note_id},
            )
        ]

    def note_source_docs(self, note_id: str) -> list[str]:
        """The documents a note is derived from as a whole."""
        return [
            r["id"]
            for r in self.query(
                "MATCH (:MemoryNote {id: $id})-[:DERIVED_FROM]->(d:Doc) RETURN d.id AS id",
                {"id": note_id},
            )
        ]

    def docs_of_chunk(self, chunk_id: str) -> list[str]:
        """The document a chunk is part of (none when the chunk is gone)."""
        return [
            r["id"]
            for r in self.query(
                "MATCH (d:Doc)-[:HAS_CHUNK]->(:Chunk {id: $id}) RETURN d.id AS id", {"id": chunk_id}
            )
        ]

    def notes_derived_from_chunk(self, chunk_id: str) -> list[str]:
        """The notes derived from this chunk."""
        return [
            r["id"]
            for r in self.query(
                "MATCH (m:MemoryNote)-[:DERIVED_FROM]->(:Chunk {id: $id}) RETURN m.id AS id",
                {"id": chunk_id},
            )
        ]

    def notes_derived_from_doc(self, doc_id: str) -> list[str]:
        """The notes derived from this document as a whole."""
        return [
            r["id"]
            for r in self.query(
                "MATCH (m:MemoryNote)-[:DERIVED_FROM]->(:Doc {id: $id}) RETURN m.id AS id",
                {"id": doc_id},
            )
        ]

    def notes_derived_from_doc_chunks(self, doc_id: str) -> list[str]:
        """The notes derived from any chunk of this document, each once."""
        return [
            r["id"]
            for r in self.query(
                "MATCH (m:MemoryNote)-[:DERIVED_FROM]->(c:Chunk) WHERE c.doc_id = $id"
                " RETURN DISTINCT m.id AS id",
                {"id": doc_id},
            )
        ]

    # -- keeping DERIVED_FROM in step with new versions --------------------------------
    def notes_derived_from_docs(self, doc_ids: Sequence[str]) -> list[str]:
        """The notes derived from these documents or their chunks, sorted, each once."""
        rows = self.query(
            "MATCH (m:MemoryNote)-[:DERIVED_FROM]->(c:Chunk) WHERE c.doc_id IN $ids"
            " RETURN DISTINCT m.id AS id",
            {"ids": list(doc_ids)},
        )
        rows += self.query(
            "MATCH (m:MemoryNote)-[:DERIVED_FROM]->(d:Doc) WHERE d.id IN $ids"
            " RETURN DISTINCT m.id AS id",
            {"ids": list(doc_ids)},
        )
        return sorted({r["id"] for r in rows})

    def unlink_derived(self, note_ids: Sequence[str]) -> None:
        """Remove every `DERIVED_FROM` edge of these notes."""
        self.query(
            "MATCH (m:MemoryNote)-[r:DERIVED_FROM]->() WHERE m.id IN $ids DELETE r",
            {"ids": list(note_ids)},
        )

    def has_chunk(self, chunk_id: str) -> bool:
        """Whether the graph holds a chunk with this id."""
        return bool(self.query("MATCH (c:Chunk {id: $c}) RETURN c.id AS id", {"c": chunk_id}))

    def chunks_overlapping(self, doc_id: str, start: int, end: int) -> list[str]:
        """The chunks of a document whose span overlaps [start, end)."""
        return [
            r["id"]
            for r in self.query(
                "MATCH (c:Chunk) WHERE c.doc_id = $d AND c.span_start < $e "
                "AND c.span_end > $s RETURN c.id AS id",
                {"d": doc_id, "s": start, "e": end},
            )
        ]

    def link_note_to_chunk(self, note_id: str, chunk_id: str) -> None:
        """A `DERIVED_FROM` edge from a note to a chunk (kept once)."""
        self.query(
            "MATCH (m:MemoryNote {id: $m}), (c:Chunk {id: $c}) MERGE (m)-[:DERIVED_FROM]->(c)",
            {"m": note_id, "c": chunk_id},
        )

    def link_note_to_doc(self, note_id: str, doc_id: str) -> None:
        """A `DERIVED_FROM` edge from a note to a whole document (kept once)."""
        self.query(
            "MATCH (m:MemoryNote {id: $m}), (d:Doc {id: $d}) MERGE (m)-[:DERIVED_FROM]->(d)",
            {"m": note_id, "d": doc_id},
        )

    # -- note to note: SUPERSEDES and DERIVED_FROM from the lists on MemoryNote ----------
    def link_note_refs(self) -> None:
        """Make the missing note-to-note edges that notes' `supersedes` and `derived_notes`
        lists name (kept once; a named note not in the graph gets none until it is)."""
        self.query(
            "MATCH (n:MemoryNote) WHERE size(n.supersedes) > 0 UNWIND n.supersedes AS oid"
            " MATCH (o:MemoryNote {id: oid}) WHERE o.id <> n.id"
            " AND NOT (n)-[:SUPERSEDES]->(o) CREATE (n)-[:SUPERSEDES {drift: 0.0, ts: n.ts}]->(o)"
        )
        self.query(
            "MATCH (n:MemoryNote) WHERE size(n.derived_notes) > 0 UNWIND n.derived_notes AS oid"
            " MATCH (o:MemoryNote {id: oid}) WHERE o.id <> n.id"
            " AND NOT (n)-[:DERIVED_FROM]->(o) CREATE (n)-[:DERIVED_FROM]->(o)"
        )

    def _note_ends(self, pattern: str, note_id: str) -> list[str]:
        return sorted(r["id"] for r in self.query(pattern, {"id": note_id}))

    def older_notes(self, note_id: str) -> list[str]:
        """The notes this note supersedes."""
        return self._note_ends(
            "MATCH (:MemoryNote {id: $id})-[:SUPERSEDES]->(o:MemoryNote) RETURN o.id AS id",
            note_id,
        )

    def newer_notes(self, note_id: str) -> list[str]:
        """The notes that supersede this note."""
        return self._note_ends(
            "MATCH (n:MemoryNote)-[:SUPERSEDES]->(:MemoryNote {id: $id}) RETURN n.id AS id",
            note_id,
        )

    def note_source_notes(self, note_id: str) -> list[str]:
        """The notes this note was derived from."""
        return self._note_ends(
            "MATCH (:MemoryNote {id: $id})-[:DERIVED_FROM]->(o:MemoryNote) RETURN o.id AS id",
            note_id,
        )

    def notes_derived_from_note(self, note_id: str) -> list[str]:
        """The notes derived from this note."""
        return self._note_ends(
            "MATCH (n:MemoryNote)-[:DERIVED_FROM]->(:MemoryNote {id: $id}) RETURN n.id AS id",
            note_id,
        )

    def hidden_notes(self, now: str, superseded: bool = True) -> set[str]:
        """Notes that leave search and ask: expired by `now` (ISO), and, with `superseded`,
        those a note supersedes (in a cycle, all but the newest: `records.supersession`)."""
        ids = {
            r["id"]
            for r in self.query(
                "MATCH (m:MemoryNote) WHERE m.expires <> '' AND m.expires <= $now"
                " RETURN m.id AS id",
                {"now": now},
            )
        }
        if superseded:
            rows = self.query(
                "MATCH (n:MemoryNote)-[:SUPERSEDES]->(m:MemoryNote)"
                " RETURN n.id AS n, n.ts AS nts, m.id AS m, m.ts AS mts"
            )
            ts = {r["n"]: r["nts"] or "" for r in rows} | {r["m"]: r["mts"] or "" for r in rows}
            ids |= supersession(((r["n"], r["m"]) for r in rows), ts).hidden
        return ids
