"""Version queries: old versions of documents, and the `SUPERSEDES` edges to them."""

from __future__ import annotations

from .base import Queries


class VersionQueries(Queries):
    """Named queries over document versions, mixed into `Graph`."""

    def version_links(self) -> list[tuple[str, str]]:
        """Every (newer, older) pair of documents joined by `SUPERSEDES`."""
        return [
            (r["a"], r["b"])
            for r in self.query("MATCH (a:Doc)-[:SUPERSEDES]->(b:Doc) RETURN a.id AS a, b.id AS b")
        ]

    def add_old_version(
        self, doc_id: str, path: str, sha256: str, title: str, source: str, created_at: str
    ) -> None:
        """A document that is no longer current (no text, no chunks); `source` is its JSON."""
        self.query(
            "CREATE (:Doc {id: $id, path: $p, sha256: $s, title: $t, source: $src,"
            " created_at: $c, chars: 0, current: false})",
            {"id": doc_id, "p": path, "s": sha256, "t": title, "src": source, "c": created_at},
        )

    def retire_doc(self, doc_id: str) -> None:
        """Mark a document as no longer current."""
        self.query("MATCH (d:Doc {id: $id}) SET d.current = false", {"id": doc_id})

    def link_version(self, new_id: str, old_id: str, drift: float, ts: str) -> None:
        """A `SUPERSEDES` edge from the newer document to the older (kept once)."""
        self.query(
            "MATCH (n:Doc {id: $new}), (o:Doc {id: $old}) WHERE NOT (n)-[:SUPERSEDES]->(o)"
            " CREATE (n)-[:SUPERSEDES {drift: $drift, ts: $ts}]->(o)",
            {"new": new_id, "old": old_id, "drift": drift, "ts": ts},
        )
