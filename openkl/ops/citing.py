"""Citations: keep cite objects under citations/, or remember them for `ok cite open`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..files.folder import Folder
from ..knowledge import citations as cit
from ..records import Cite, CiteGcReport
from .memory import _via


def where(folder: Folder, items: Sequence[Mapping[str, Any]]) -> list[str]:
    """How a person is shown where each hit or citation is: `path:L` or `path:L1-L2`, lines
    of its file as it is now (the JSON keeps characters in `loc`)."""
    return cit.where(folder, items)


def keep_citations(
    folder: Folder,
    cites: list[Cite],
    tags: list[str] | None = None,
    retention_class: str | None = None,
    via: str | None = None,
) -> list[Cite]:
    """Persist cite objects under citations/ and log it; returns them as kept."""
    kept = [cit.persist(folder, c, tags or [], retention_class) for c in cites]
    folder.log_op("cite.make", ids=[c["id"] for c in kept], **_via(via))
    return kept


def make_citations(
    folder: Folder,
    items: list[str | Cite],
    *,
    lines: str | None = None,
    chars: str | None = None,
    cwd: Path | None = None,
    persist: bool = False,
    tags: list[str] | None = None,
    retention_class: str | None = None,
    via: str | None = None,
) -> list[Cite]:
    """Cite objects for ids and paths (`lines`/`chars`: a span of the one item; paths are
    taken from `cwd`, default the working directory), as the files are now. Cite objects
    given are kept as they are, except search hits, which are cited anew. With `persist`
    they are kept under citations/ (the caller holds the writer lock), else remembered
    for `ok cite open`."""
    files = cit.Files(folder)
    # a cite object from elsewhere (HTTP, MCP) is checked as one read from a file is: its
    # path inside the folder, its id one that can name a file
    checked = [
        cit.check(folder, it, f"item {n}") if isinstance(it, dict) else it
        for n, it in enumerate(items, 1)
    ]
    cites: list[Cite] = []
    for it in checked:
        if isinstance(it, dict) and not cit.CITE_ID.match(it["id"]) and cit.is_ref(it["id"]):
            it = it["id"]  # a search hit: cite what it points at, as it is now
        cites.append(
            it
            if isinstance(it, dict)
            else cit.make(folder, it, lines=lines, chars=chars, files=files, cwd=cwd)
        )
    if persist:
        return keep_citations(folder, cites, tags, retention_class, via=via)
    remember_citations(folder, cites)
    return cites


def gc_citations(folder: Folder, dry_run: bool = False) -> CiteGcReport:
    """Remove transient citations, orphaned ones (their document is gone) and failed
    ephemeral ones, and log it; `dry_run` only reports. The caller holds the writer lock."""
    rep = cit.gc(folder, dry_run=dry_run)
    gone = rep["transient"] + rep["orphaned"] + rep["expired"]
    if gone and not dry_run:
        folder.log_op(
            "cite.gc", transient=rep["transient"], orphaned=rep["orphaned"], expired=rep["expired"]
        )
    return rep


def remember_citations(folder: Folder, cites: list[Cite]) -> None:
    """Keep transient cite objects where `ok cite open ID` finds them."""
    for c in cites:
        cit.remember(folder, c)
