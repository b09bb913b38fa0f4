"""The operations the adapters share: one function per user-level operation that takes
more than one step, so the CLI, the MCP server and the HTTP server do the same thing.

Each operation takes resolved arguments and returns a result the adapter renders; the
caller holds the writer lock for operations that write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import aks, backfeed, indexer
from . import citations as cit
from . import notes as notes_mod
from . import search as search_mod
from .entities import consolidation
from .folder import Folder
from .graph import Graph
from .indexing import open_graph


@dataclass(frozen=True)
class SearchOptions:
    """How many hits, ranked how: what a search request leaves out comes from the folder."""

    k: int
    mode: str
    per_doc: int
    diversity: float


def search_options(
    folder: Folder,
    k: int | None = None,
    mode: str | None = None,
    per_doc: int | None = None,
    diverse: bool = False,
    names: tuple[str, str] = ("k", "per_doc"),
) -> SearchOptions:
    """Fill in the folder's defaults and check the counts (`names` are the adapter's names
    for k and per_doc, for the error message)."""
    k = k if k is not None else folder.setting("search.k")
    per_doc = per_doc if per_doc is not None else folder.setting("search.per_doc")
    search_mod.check_counts(k, per_doc, *names)
    return SearchOptions(
        k=k,
        mode=mode or folder.setting("search.mode"),
        per_doc=per_doc,
        diversity=folder.setting("search.diversity") if diverse else 0.0,
    )


def search(
    folder: Folder,
    g: Graph,
    query: str,
    opts: SearchOptions,
    *,
    scope: str = "all",
    filters: search_mod.Filters | None = None,
    explain: bool = False,
    embedder: Any = None,
) -> list[dict[str, Any]]:
    """Hybrid search; hits are cite objects, best first."""
    return search_mod.search(
        folder,
        g,
        query,
        k=opts.k,
        mode=opts.mode,
        scope=scope,
        filters=filters,
        per_doc=opts.per_doc,
        explain=explain,
        embedder=embedder,
        diversity=opts.diversity,
    )


def import_bundle(folder: Folder, text: str, where: str = "bundle") -> dict[str, Any]:
    """Keep an AKS bundle under aks/imports/ and consolidate the entities it touches."""
    kept, keys = aks.keep_bundle(folder, text, where)
    with open_graph(folder, write=True) as g:
        consolidation.consolidate(folder, g, keys)
    return kept


def decide_backfeed(
    folder: Folder, iid: str, approve: bool, reason: str | None = None
) -> dict[str, Any]:
    """Approve (and absorb into the entity graph) or reject a pending backfeed item."""
    item = backfeed.decide(folder, iid, approve, reason)
    if approve:
        with open_graph(folder, write=True) as g:
            consolidation.consolidate(folder, g, backfeed.touched_keys(item))
    return item


def add_note(
    folder: Folder,
    text: str,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    via: str | None = None,
) -> notes_mod.Note:
    """Write a memory note, index it and log it (`via` names the adapter in the log)."""
    note = notes_mod.add(folder, text, tags or [], topics or [])
    indexer.index_note(folder, note)
    assert note.path is not None
    folder.log_op("mem.add", ids=[note.id], path=folder.rel(note.path), **_via(via))
    return note


def update_note(
    folder: Folder,
    note_id: str,
    *,
    text: str | None = None,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    add_tags: list[str] | None = None,
    via: str | None = None,
) -> notes_mod.Note:
    """Change a note's text, tags or topics (its id stays), index it again and log it."""
    note = notes_mod.update(
        folder, note_id, text=text, tags=tags, topics=topics, add_tags=add_tags or []
    )
    indexer.index_note(folder, note, replace=True)
    folder.log_op("mem.update", ids=[note.id], **_via(via))
    return note


def delete_note(folder: Folder, note_id: str, via: str | None = None) -> notes_mod.Note:
    """Delete a note's file, take it out of the graph and log it."""
    note = notes_mod.delete(folder, note_id)
    with open_graph(folder, write=True) as g:
        indexer.remove_from_graph(folder, g, [], [note.id])
    folder.log_op("mem.delete", ids=[note.id], **_via(via))
    return note


def keep_citations(
    folder: Folder,
    cites: list[dict[str, Any]],
    tags: list[str] | None = None,
    retention_class: str | None = None,
    via: str | None = None,
) -> list[dict[str, Any]]:
    """Persist cite objects under citations/ and log it; returns them as kept."""
    kept = [cit.persist(folder, c, tags or [], retention_class) for c in cites]
    folder.log_op("cite.make", ids=[c["id"] for c in kept], **_via(via))
    return kept


def remember_citations(folder: Folder, cites: list[dict[str, Any]]) -> None:
    """Keep transient cite objects where `ok cite open ID` finds them."""
    for c in cites:
        cit.remember(folder, c)


def _via(via: str | None) -> dict[str, str]:
    return {"via": via} if via else {}
