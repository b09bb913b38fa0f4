"""Search: the folder's defaults filled in, then hybrid search."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import search as search_mod
from ..folder import Folder
from ..indexing import embedder as folder_embedder
from ..indexing import files_newer_than_index
from ..records import Cite
from .read import Opener, reading


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


@dataclass(frozen=True)
class SearchResult:
    """The hits of one search (cite objects, best first), with what produced them."""

    query: str
    options: SearchOptions
    hits: list[Cite]
    # the Cypher run, when asked for with `trace`
    queries: list[str] = field(default_factory=list)
    # files changed since the index was last updated (only looked at with `check_stale`)
    stale: bool = False


def search(
    folder: Folder,
    query: str,
    *,
    k: int | None = None,
    mode: str | None = None,
    per_doc: int | None = None,
    diverse: bool = False,
    max_k: int | None = None,
    scope: str = "all",
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    path: str | None = None,
    since: str | None = None,
    until: str | None = None,
    explain: bool = False,
    trace: bool = False,
    check_stale: bool = False,
    names: tuple[str, str, str, str] = ("k", "per_doc", "since", "until"),
    graph: Opener | None = None,
) -> SearchResult:
    """Hybrid search with the folder's defaults for what is not given (`max_k` clamps k:
    an adapter's cap); `names` are the adapter's names for k, per_doc, since and until,
    for error messages."""
    if k is None:
        k = folder.setting("search.k")
    if max_k is not None:
        k = min(k, max_k)
    opts = search_options(folder, k, mode, per_doc, diverse, names=(names[0], names[1]))
    flt = search_mod.Filters(
        tags=tags or [], topics=topics or [], path=path, since=since, until=until
    ).normalized(names[2], names[3])
    emb = folder_embedder(folder)
    with reading(folder, graph) as g:
        if trace:
            g.trace = []
        hits = search_mod.search(
            folder,
            g,
            query,
            k=opts.k,
            mode=opts.mode,
            scope=scope,
            filters=flt,
            per_doc=opts.per_doc,
            explain=explain,
            embedder=emb,
            diversity=opts.diversity,
        )
        queries = list(g.trace or []) if trace else []
    stale = check_stale and files_newer_than_index(folder)
    return SearchResult(query=query, options=opts, hits=hits, queries=queries, stale=stale)
