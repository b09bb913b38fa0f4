"""Citations as they stand now: verify them, open a cited passage, list the persisted ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..files.folder import Folder
from ..knowledge import citations as cit
from ..records import Cite, CitePassage, CiteStatus, FileProblem


@dataclass(frozen=True)
class Verification:
    """Each citation's verification result, in the order asked."""

    results: list[CiteStatus]

    @property
    def failed(self) -> list[CiteStatus]:
        """The results that are neither verified nor moved."""
        return [r for r in self.results if r["status"] not in cit.PASSING]

    @property
    def ok(self) -> bool:
        """True when every citation is verified or moved."""
        return not self.failed


def verify_citations(
    folder: Folder,
    items: Sequence[str | Mapping[str, Any]],
    *,
    all_persisted: bool = False,
    update: bool = False,
    min_similarity: float | None = None,
) -> Verification:
    """Check citations (ids or cite objects, and with `all_persisted` every persisted one)
    against the files. `update` rewrites persisted citations that moved and logs it (the
    caller holds the writer lock); `min_similarity` defaults to cite.min_similarity."""
    items = list(items)
    if all_persisted:
        items += cit.all_ids(folder)
    if not update:
        return Verification(cit.verify_many(folder, items, min_similarity=min_similarity))
    results = cit.verify_many(folder, items, update=True, min_similarity=min_similarity)
    moved = [r["id"] for r in results if r["updated"]]
    if moved:
        folder.log_op("cite.update", ids=moved)
    return Verification(results)


def open_citation(
    folder: Folder, item: str | Mapping[str, Any], context_lines: int = 2
) -> CitePassage:
    """Where a citation's quote is now, with `context_lines` lines around it."""
    return cit.passage(folder, item, context_lines)


@dataclass(frozen=True)
class CitationList:
    """Persisted citations, and the files under citations/ that could not be read."""

    # cite objects; filtered by `status`, each also carries its status
    citations: list[Cite]
    problems: list[FileProblem]


def list_citations(
    folder: Folder,
    *,
    tags: list[str] | None = None,
    doc: str | None = None,
    status: str | None = None,
) -> CitationList:
    """Persisted citations with these tags, of this doc or note (id or path), and with
    `status` only those whose verification gives it (each then carries its status)."""
    if status and status not in cit.STATUSES:
        raise UsageError(f"unknown status {status!r}", "use one of: " + ", ".join(cit.STATUSES))
    cites, problems = cit.list_citations(folder)
    rows = cit.select(folder, cites, tags=tags or [], doc=doc)
    if not status:
        return CitationList(citations=rows, problems=problems)
    v = cit.Verifier(folder)
    kept: list[Cite] = []
    for c in rows:
        st = v.verify(c)["status"]
        if st == status:
            kept.append({**c, "status": st})
    return CitationList(citations=kept, problems=problems)
