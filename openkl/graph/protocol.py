"""`GraphStore`: what the rest of openkl asks of the derived graph.

The methods speak of documents, chunks, notes, versions and lineage, never of Cypher, so a
second backend implements this Protocol and nothing outside the graph layer changes.
`Graph` (Kùzu) and `PgGraph` (PostgreSQL) implement it; tests check that both keep to it.
It holds what callers outside the graph layer use, and no more: the steps of Kùzu's
lineage walk are `lineage.WalkSteps`. Opening, rebuilding and swapping the database are
the classes' own and not part of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..records import (
    ChunkInput,
    ChunkNode,
    ChunkRow,
    ChunkVector,
    DocIndexed,
    DocInput,
    DocNode,
    DocSummary,
    LineageWalk,
    LinkEdge,
    LinkEnd,
    NoteIndexed,
    NoteNode,
    NoteRefsRow,
    NoteRow,
    NoteSummary,
    NoteTime,
    NoteVector,
)
from .entities import EntityStore
from .sandbox import QueryLimits


class GraphStore(EntityStore, Protocol):
    """The derived graph as the features use it (entities: `EntityStore`)."""

    trace: list[str] | None
    """When a list, every query run is appended to it (`ok search --explain`)."""

    # -- documents and chunks -------------------------------------------------------
    def add_docs(self, docs: list[DocInput], chunks: list[ChunkInput], vecs: Any) -> None:
        """Insert documents with their chunks and vectors, together."""

    def remove_doc(self, doc_id: str) -> None:
        """Remove a document and its chunks."""

    def set_doc_path(self, doc_id: str, path: str) -> None:
        """Record a document's new path (a rename)."""

    def docs(self) -> dict[str, DocIndexed]:
        """Every document's `id`, `path`, `sha256` and `current`, by id."""

    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, ChunkRow]:
        """Chunk rows with their document's fields, by chunk id."""

    def doc_paths(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """The path of each of these documents, by id."""

    def current_chunks_of(self, doc_ids: Sequence[str]) -> list[ChunkVector]:
        """The current chunks of these documents: `id`, `doc`, `text`, `vec`."""

    def doc_summaries(self) -> list[DocSummary]:
        """Every document: `id`, `path`, `title`, `sha`, `created_at`."""

    # -- memory notes ---------------------------------------------------------------
    def add_notes(self, notes: list[NoteRow], vecs: Any) -> None:
        """Insert notes with their vectors and topics, together."""

    def remove_note(self, note_id: str) -> None:
        """Remove a note and its edges."""

    def notes(self) -> dict[str, NoteIndexed]:
        """Every note's `id`, `path` and `sha256`, by id."""

    def notes_by_id(self, ids: Sequence[str]) -> dict[str, NoteRow]:
        """Note rows (text, ts, tags, topics, body span), by id."""

    def notes_with_vectors(self, note_ids: Sequence[str]) -> list[NoteVector]:
        """These notes: `id`, `path`, `sha`, `text`, `vec`."""

    def note_summaries(self) -> list[NoteSummary]:
        """Every note: `id`, `path`, `sha`, `ts`."""

    # -- retrieval ------------------------------------------------------------------
    def fts(
        self, table: str, query: str, k: int, k1: float = 0.9, b: float = 0.4
    ) -> list[tuple[str, float]]:
        """BM25 over the chunks ("Chunk") or notes ("MemoryNote"): [(id, score)] best first.
        `query` is plain words; Chinese, Japanese and Korean in it must match words written
        without spaces (Kùzu's index does it with pairs of characters and single characters)."""

    def vector(self, table: str, qvec: Sequence[float], k: int) -> list[tuple[str, float]]:
        """Cosine similarity over chunks or notes: [(id, score)] best first."""

    def vectors(self, table: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors of chunks or notes, by id."""

    # -- versions -------------------------------------------------------------------
    def version_links(self) -> list[tuple[str, str]]:
        """Every (newer, older) pair of document versions."""

    def add_old_version(
        self, doc_id: str, path: str, sha256: str, title: str, source: str, created_at: str
    ) -> None:
        """A document that is no longer current; `source` is its JSON."""

    def retire_doc(self, doc_id: str) -> None:
        """Mark a document as no longer current."""

    def link_version(self, new_id: str, old_id: str, drift: float, ts: str) -> None:
        """Record that `new_id` supersedes `old_id` (kept once)."""

    # -- lineage (the steps of Kùzu's walk: `lineage.WalkSteps`) -----------------------
    def lineage_note(self, note_id: str) -> NoteNode | None:
        """A note's `path` and `text`, or None."""

    def lineage_chunk(self, chunk_id: str) -> ChunkNode | None:
        """A chunk's `doc`, `current` and `text`, or None."""

    def lineage_doc(self, doc_id: str) -> DocNode | None:
        """A document's `path`, `title` and `current`, or None."""

    def lineage_walk(
        self,
        kind: str,
        node_id: str,
        direction: str,
        depth: int,
        refs: Callable[[str], Sequence[str]],
    ) -> LineageWalk:
        """A breadth-first lineage walk from a node (`kind` memory, chunk or doc) in
        `direction` (up, down, both) up to `depth` hops, by the rules of `graph/lineage.py`;
        `refs(note)`: the ids the note's file says it was derived from."""

    def notes_derived_from_docs(self, doc_ids: Sequence[str]) -> list[str]:
        """The notes derived from these documents or their chunks, sorted, each once."""

    def unlink_derived(self, note_ids: Sequence[str]) -> None:
        """Remove every derived-from link of these notes."""

    def has_chunk(self, chunk_id: str) -> bool:
        """Whether a chunk with this id exists."""

    def chunks_overlapping(self, doc_id: str, start: int, end: int) -> list[str]:
        """The chunks of a document whose span overlaps [start, end)."""

    def link_note_to_chunk(self, note_id: str, chunk_id: str) -> None:
        """Record that a note is derived from a chunk (kept once)."""

    def link_note_to_doc(self, note_id: str, doc_id: str) -> None:
        """Record that a note is derived from a whole document (kept once)."""

    def link_note_refs(self) -> None:
        """Make the note-to-note SUPERSEDES and DERIVED_FROM edges the notes name."""

    def hidden_notes(self, now: str, superseded: bool = True) -> set[str]:
        """Notes expired by `now`, and (with `superseded`) notes another supersedes."""

    # -- links between notes (`[[…]]`) ------------------------------------------------
    def all_links(self) -> list[LinkEdge]:
        """Every link edge."""

    def links_from(self, note_ids: Sequence[str]) -> list[LinkEdge]:
        """The links in these notes."""

    def links_to(self, ids: Sequence[str]) -> list[LinkEdge]:
        """The links that point to these notes or documents."""

    def unlink_notes(self, note_ids: Sequence[str]) -> None:
        """Remove the link edges that start in these notes."""

    def add_links(self, links: Sequence[LinkEdge]) -> None:
        """Create these link edges (their notes and documents are in the graph)."""

    def set_note_refs(self, rows: Sequence[NoteRefsRow]) -> None:
        """Record these notes' titles and links (replacing what was recorded for them)."""

    def forget_note_refs(self, note_ids: Sequence[str]) -> None:
        """Drop what was recorded of these notes' titles and links."""

    def note_refs(self) -> list[NoteRefsRow]:
        """Every note's recorded titles and links."""

    def note_times(self) -> list[NoteTime]:
        """Every note's id and `ts`."""

    def doc_titles(self) -> dict[str, str]:
        """The title of every current document, by id."""

    def link_ends(self, note_ids: Sequence[str], doc_ids: Sequence[str]) -> dict[str, LinkEnd]:
        """Path and title of these notes and documents, by id."""

    # -- health and bookkeeping -----------------------------------------------------
    def incomplete(self) -> dict[str, list[str]]:
        """Documents and notes whose derived parts are missing: {"docs": […], "notes": […]}."""

    def counts(self) -> dict[str, int]:
        """How many documents, chunks, notes, entities and topics the graph holds."""

    def meta(self) -> dict[str, str]:
        """The graph's stamps (schema version, embedder, flags); {} when there are none."""

    def set_meta(self, key: str, value: str) -> None:
        """Set one stamp."""

    # -- transactions and limits ----------------------------------------------------
    def transaction(self) -> AbstractContextManager[None]:
        """All writes inside happen together or not at all; a nested block joins the outer."""

    def commit_and_continue(self) -> None:
        """Commit what the open transaction holds so far and start the next one."""

    def set_timeout(self, seconds: float) -> None:
        """Abort any query that runs longer than `seconds`."""

    def room_needed(self, chunks: int, rewrite: bool = True) -> int:
        """Bytes of local disk that loading `chunks` more chunks (and, with `rewrite`, the
        checkpoint after each commit) may take: 0 for a graph not in a local file."""

    # -- the user's own queries -----------------------------------------------------
    def cypher(
        self,
        query: str,
        params: dict[str, Any] | None = None,
        limits: QueryLimits | None = None,
    ) -> list[dict[str, Any]]:
        """Run a user's Cypher (CLI or MCP), refused unless it stays inside the graph; a read
        held to `limits` (time, memory, output)."""
