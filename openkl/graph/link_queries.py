"""Link queries: the `LINKS_TO` edges that `[[…]]` links in notes become."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import LinkEdge, LinkEnd, NoteRefsRow, NoteTime
from .base import Queries

# what a link may point to: the edge's target table by the kind the readers use
_TABLES = {"memory": "MemoryNote", "doc": "Doc"}
_EDGE = (
    "m.id AS src, t.id AS dst, r.text AS text, r.heading AS heading, r.alias AS alias,"
    " r.line AS line"
)


def first_line(text: str | None) -> str:
    """The first non-empty line of a note, without heading marks, as its title."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip().lstrip("#").strip()[:80]
    return ""


class LinkQueries(Queries):
    """Named queries over `LINKS_TO`, mixed into `Graph`."""

    def _edges(self, where: str, ids: Sequence[str] | None) -> list[LinkEdge]:
        out: list[LinkEdge] = []
        for kind, table in _TABLES.items():
            rows = self.query(
                f"MATCH (m:MemoryNote)-[r:LINKS_TO]->(t:{table}){where} RETURN {_EDGE}"
                " ORDER BY src, line, dst",
                {"ids": list(ids)} if ids is not None else None,
            )
            out += [{**r, "kind": kind} for r in rows]  # type: ignore[typeddict-item]
        return out

    def all_links(self) -> list[LinkEdge]:
        """Every link edge."""
        return self._edges("", None)

    def links_from(self, note_ids: Sequence[str]) -> list[LinkEdge]:
        """The links in these notes."""
        return self._edges(" WHERE m.id IN $ids", note_ids)

    def links_to(self, ids: Sequence[str]) -> list[LinkEdge]:
        """The links that point to these notes or documents."""
        return self._edges(" WHERE t.id IN $ids", ids)

    def unlink_notes(self, note_ids: Sequence[str]) -> None:
        """Remove the link edges that start in these notes."""
        self.query(
            "MATCH (m:MemoryNote)-[r:LINKS_TO]->() WHERE m.id IN $ids DELETE r",
            {"ids": list(note_ids)},
        )

    def add_links(self, links: Sequence[LinkEdge]) -> None:
        """Create these link edges (their notes and documents are in the graph)."""
        import pyarrow as pa

        # a bulk load: matching both ends row by row takes seconds for thousands of links
        for kind, table in _TABLES.items():
            rows = [link for link in links if link["kind"] == kind]
            self.copy_rows(
                "LINKS_TO",
                {
                    "from": [r["src"] for r in rows],
                    "to": [r["dst"] for r in rows],
                    **{c: [r[c] for r in rows] for c in ("text", "heading", "alias")},  # type: ignore[literal-required]
                    "line": [int(r["line"]) for r in rows],
                },
                types={"line": pa.int64()},
                rel_from_to=("MemoryNote", table),
            )

    def set_note_refs(self, rows: Sequence[NoteRefsRow]) -> None:
        """Record these notes' titles and links (replacing what was recorded for them)."""
        if not rows:
            return
        self.forget_note_refs([r["id"] for r in rows])
        self.copy_rows("NoteRefs", {c: [r[c] for r in rows] for c in ("id", "titles", "links")})  # type: ignore[literal-required]

    def forget_note_refs(self, note_ids: Sequence[str]) -> None:
        """Drop what was recorded of these notes' titles and links."""
        self.query("MATCH (r:NoteRefs) WHERE r.id IN $ids DELETE r", {"ids": list(note_ids)})

    def note_refs(self) -> list[NoteRefsRow]:
        """Every note's recorded titles and links."""
        rows = self.query(
            "MATCH (r:NoteRefs) RETURN r.id AS id, r.titles AS titles, r.links AS links"
        )
        return rows  # type: ignore[return-value]

    def note_times(self) -> list[NoteTime]:
        """Every note's id and `ts`."""
        return self.query("MATCH (m:MemoryNote) RETURN m.id AS id, m.ts AS ts")  # type: ignore[return-value]

    def doc_titles(self) -> dict[str, str]:
        """The title of every current document, by id."""
        rows = self.query("MATCH (d:Doc) WHERE d.current RETURN d.id AS id, d.title AS title")
        return {r["id"]: r["title"] or "" for r in rows}

    def link_ends(self, note_ids: Sequence[str], doc_ids: Sequence[str]) -> dict[str, LinkEnd]:
        """Path and title of these notes (the first line of the text) and documents, by id."""
        out: dict[str, LinkEnd] = {}
        if note_ids:
            for r in self.query(
                "UNWIND $ids AS i MATCH (m:MemoryNote {id: i})"
                " RETURN m.id AS id, m.path AS path, m.text AS text",
                {"ids": list(note_ids)},
            ):
                out[r["id"]] = {
                    "kind": "memory",
                    "id": r["id"],
                    "path": r["path"],
                    "title": first_line(r["text"]),
                }
        if doc_ids:
            for r in self.query(
                "UNWIND $ids AS i MATCH (d:Doc {id: i}) RETURN d.id AS id, d.path AS path,"
                " d.title AS title",
                {"ids": list(doc_ids)},
            ):
                out[r["id"]] = {
                    "kind": "doc",
                    "id": r["id"],
                    "path": r["path"] or "",
                    "title": r["title"] or "",
                }
        return out
