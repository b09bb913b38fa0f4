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
    min_score: float = 0.0


def search_options(
    folder: Folder,
    k: int | None = None,
    mode: str | None = None,
    per_doc: int | None = None,
    diverse: bool = False,
    names: tuple[str, str] = ("k", "per_doc"),
    min_score: float | None = None,
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
        min_score=folder.setting("search.min_score") if min_score is None else min_score,
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
    # the best passage's cosine similarity to the query (None without a vector signal)
    best_score: float | None = None
    # whether BM25 found any of the query's words
    keywords: bool = False

    @property
    def no_good_match(self) -> bool:
        """Nothing in scope came near the query: the hits were withheld (see
        `search.no_good_match`)."""
        return search_mod.no_good_match(self.best_score, self.keywords, self.options.min_score)


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
    min_score: float | None = None,
    trace: bool = False,
    check_stale: bool = False,
    names: tuple[str, str, str, str] = ("k", "per_doc", "since", "until"),
    graph: Opener | None = None,
) -> SearchResult:
    """Hybrid search with the folder's defaults for what is not given (`max_k` clamps k:
    an adapter's cap); `names` are the adapter's names for k, per_doc, since and until,
    for error messages. `min_score` (default search.min_score) is the cosine similarity
    the best passage must reach when none of the query's words occur, else there is no
    good match and no hits; 0 turns it off."""
    if k is None:
        k = folder.setting("search.k")
    if max_k is not None:
        k = min(k, max_k)
    opts = search_options(
        folder, k, mode, per_doc, diverse, names=(names[0], names[1]), min_score=min_score
    )
    flt = search_mod.Filters(
        tags=tags or [], topics=topics or [], path=path, since=since, until=until
    ).normalized(names[2], names[3])
    emb = folder_embedder(folder)
    with reading(folder, graph) as g:
        if trace:
            g.trace = []
        found = search_mod.find(
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
            min_score=opts.min_score,
        )
        queries = list(g.trace or []) if trace else []
    stale = check_stale and files_newer_than_index(folder)
    return SearchResult(
        query=query,
        options=opts,
        hits=found.hits,
        queries=queries,
        stale=stale,
        best_score=found.best_score,
        keywords=found.keywords,
    )
