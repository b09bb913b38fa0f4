"""Search: the folder's defaults filled in, then hybrid search."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import search as search_mod
from ..folder import Folder
from ..graph import Graph
from ..records import Cite


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
) -> list[Cite]:
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
