"""Document and note reads that several features share: paths, current chunks with their
vectors, and the summaries an export names its sources by."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import ChunkVector, DocSummary, NoteSummary, NoteVector
from .base import Queries


class DocumentQueries(Queries):
    """Named reads over Doc, Chunk and MemoryNote, mixed into `Graph`."""

    def doc_paths(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """The path of each of these documents, by id."""
        return {
            r["id"]: r["path"]
            for r in self.query(
                "MATCH (d:Doc) WHERE d.id IN $ids RETURN d.id AS id, d.path AS path",
                {"ids": doc_ids},
            )
        }

    def current_chunks_of(self, doc_ids: Sequence[str]) -> list[ChunkVector]:
        """The current chunks of these documents: `id`, `doc`, `text`, `vec`."""
        return self.query(  # type: ignore[return-value]
            "MATCH (c:Chunk) WHERE c.doc_id IN $ids AND c.current RETURN c.id AS id,"
            " c.doc_id AS doc, c.text AS text, c.vec AS vec",
            {"ids": doc_ids},
        )

    def notes_with_vectors(self, note_ids: Sequence[str]) -> list[NoteVector]:
        """These notes: `id`, `path`, `sha`, `text`, `vec`."""
        return self.query(  # type: ignore[return-value]
            "MATCH (m:MemoryNote) WHERE m.id IN $ids RETURN m.id AS id,"
            " m.path AS path, m.sha256 AS sha, m.text AS text, m.vec AS vec",
            {"ids": note_ids},
        )

    def doc_summaries(self) -> list[DocSummary]:
        """Every document: `id`, `path`, `title`, `sha`, `created_at`."""
        return self.query(  # type: ignore[return-value]
            "MATCH (d:Doc) RETURN d.id AS id, d.path AS path, d.title AS title, d.sha256 AS sha,"
            " d.created_at AS created_at"
        )

    def note_summaries(self) -> list[NoteSummary]:
        """Every note: `id`, `path`, `sha`, `ts`."""
        return self.query(  # type: ignore[return-value]
            "MATCH (m:MemoryNote) RETURN m.id AS id, m.path AS path, m.sha256 AS sha, m.ts AS ts"
        )
