"""Search: the folder's defaults filled in, then hybrid search; and going to a hit."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadInput, NotFound, UsageError
from ..files import where as where_mod
from ..files.folder import Folder, atomic_write
from ..graph import search as search_mod
from ..graph.indexing import embedder as folder_embedder
from ..graph.indexing import files_newer_than_index
from ..knowledge import citations as cit
from ..records import Cite, Spot
from ..text.rerank import Reranker, reranker_from, within_budget
from .call import Call
from .read import reading


@dataclass(frozen=True)
class SearchOptions:
    """How many hits, ranked how: what a search request leaves out comes from the folder."""

    k: int
    mode: str
    per_doc: int
    diversity: float
    min_score: float = 0.0
    recency: search_mod.Recency | None = None
    drift_penalty: float = 0.0
    tail_floor: float = 0.0


def search_options(
    folder: Folder,
    k: int | None = None,
    mode: str | None = None,
    per_doc: int | None = None,
    diverse: bool = False,
    names: tuple[str, str] = ("k", "per_doc"),
    min_score: float | None = None,
    recency: str | None = None,
    drift_penalty: float | None = None,
    drift_name: str = "drift_penalty",
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
        recency=recency_of(folder, recency),
        drift_penalty=search_mod.check_drift_penalty(
            float(
                folder.setting("search.drift_penalty") if drift_penalty is None else drift_penalty
            ),
            "search.drift_penalty" if drift_penalty is None else drift_name,
        ),
        tail_floor=folder.setting("search.tail_floor"),
    )


def recency_of(folder: Folder, value: str | None = None) -> search_mod.Recency | None:
    """The recency a request asks for (`value`, e.g. `90d` or `off`), else search.recency."""
    if value is None:
        return search_mod.recency_of(
            folder.setting("search.recency"),
            folder.setting("search.recency_floor"),
            "search.recency",
        )
    return search_mod.recency_of(value, folder.setting("search.recency_floor"))


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
    # what the signals left of a long query unread, in one line (None: they read it all)
    warning: str | None = None

    @property
    def no_good_match(self) -> bool:
        """Nothing in scope came near the query: the hits were withheld (see
        `search.no_good_match`)."""
        return search_mod.no_good_match(self.best_score, self.keywords, self.options.min_score)


@dataclass(frozen=True)
class Names:
    """An adapter's names for a search's options, as its error messages say them."""

    k: str = "k"
    per_doc: str = "per_doc"
    since: str = "since"
    until: str = "until"
    where: str = "where"
    drift_penalty: str = "drift_penalty"


# the command line's names for them (the MCP tools and the HTTP API use the plain ones)
FLAGS = Names("-k", "--per-doc", "--since", "--until", "--where", "--drift-penalty")


@dataclass(frozen=True)
class SearchRequest:
    """One search as an adapter was asked for it; what it leaves out (None) comes from the
    folder's settings (`search_options`).

    `max_k` clamps k (an adapter's cap); `names` are the adapter's names for the options,
    for error messages. `min_score` (default search.min_score) is the cosine similarity
    the best passage must reach when none of the query's words occur, else there is no
    good match and no hits; 0 turns it off. `recency` is a half-life (`90d`) or `off`
    (default search.recency). `where` are conditions on the frontmatter of each hit's file
    (`owner=alice`, `reviewed>=2026-01-01`; see `openkl.files.where`). `drift_penalty` (default
    search.drift_penalty, 0: off) holds back documents whose latest version drifted: each
    score times `1 - weight * drift`. Expired notes are left out, and so are superseded
    ones unless `include_superseded`. With a rerank endpoint (search.rerank) and `rerank`,
    its order replaces the fused one over the top search.rerank_top candidates
    (`rerank_hits`). `trace` keeps the Cypher run, `check_stale` looks for files changed
    since the index was updated, and with `remember` the hits' ids are kept so that
    `locate` takes a rank for the last search."""

    query: str
    k: int | None = None
    mode: str | None = None
    per_doc: int | None = None
    diverse: bool = False
    max_k: int | None = None
    scope: str = "all"
    tags: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    path: str | None = None
    since: str | None = None
    until: str | None = None
    where: tuple[str, ...] = ()
    include_superseded: bool = False
    recency: str | None = None
    drift_penalty: float | None = None
    min_score: float | None = None
    explain: bool = False
    trace: bool = False
    rerank: bool = True
    check_stale: bool = False
    remember: bool = False
    names: Names = Names()

    def filters(self) -> search_mod.Filters:
        """The request's filters, checked and normalized."""
        return search_mod.Filters(
            tags=list(self.tags),
            topics=list(self.topics),
            path=self.path,
            since=self.since,
            until=self.until,
            include_superseded=self.include_superseded,
            where=where_mod.parse_all(self.where, self.names.where),
        ).normalized(self.names.since, self.names.until)


def request_options(folder: Folder, req: SearchRequest) -> SearchOptions:
    """The options of `req`, the folder's defaults filled in and checked."""
    k = req.k if req.k is not None else folder.setting("search.k")
    if req.max_k is not None:
        k = min(k, req.max_k)
    return search_options(
        folder,
        k,
        req.mode,
        req.per_doc,
        req.diverse,
        names=(req.names.k, req.names.per_doc),
        min_score=req.min_score,
        recency=req.recency,
        drift_penalty=req.drift_penalty,
        drift_name=req.names.drift_penalty,
    )


def search(call: Call, req: SearchRequest) -> SearchResult:
    """Hybrid search of `call`'s folder, read by its reader, as `req` asks."""
    folder = call.folder
    opts = request_options(folder, req)
    flt = req.filters()
    emb = folder_embedder(folder)
    reranker = reranker_from(folder) if req.rerank else None
    with reading(folder, call.reader) as g:
        if req.trace:
            g.trace = []
        found = search_mod.find(
            folder,
            g,
            req.query,
            k=max(opts.k, reranker.top) if reranker is not None else opts.k,
            mode=opts.mode,
            scope=req.scope,
            filters=flt,
            per_doc=opts.per_doc,
            explain=req.explain,
            embedder=emb,
            diversity=opts.diversity,
            min_score=opts.min_score,
            recency=opts.recency,
            drift_penalty=opts.drift_penalty,
            tail_floor=opts.tail_floor,
        )
        queries = list(g.trace or []) if req.trace else []
    hits, warning = found.hits, found.warning
    if reranker is not None:
        hits, why = rerank_hits(reranker, req.query, hits, opts.k, req.explain)
        warning = "; ".join(w for w in (warning, why) if w) or None
    stale = req.check_stale and files_newer_than_index(folder)
    if req.remember:
        _remember(folder, req.query, hits)
    return SearchResult(
        query=req.query,
        options=opts,
        hits=hits,
        queries=queries,
        stale=stale,
        best_score=found.best_score,
        keywords=found.keywords,
        warning=warning,
    )


def rerank_hits(
    r: Reranker, query: str, hits: list[Cite], k: int, explain: bool = False
) -> tuple[list[Cite], str | None]:
    """The first `k` of `hits` once the rerank endpoint has reordered the top `r.top` by
    its relevance scores (with `explain`, each reranked hit's `signals` has `rerank`: its
    score, rank and min-max norm), and a warning when it failed or ran out of time (then
    the fused order is kept). `score` stays the fused score."""
    head, tail = hits[: r.top], hits[r.top :]
    if len(head) < 2:
        return _renumbered(hits[:k]), None
    got, why = within_budget(r, query, [h["quote"] for h in head])
    if got is None:
        return _renumbered(hits[:k]), why
    order = sorted(range(len(head)), key=lambda i: (i not in got, -got.get(i, 0.0), i))
    if explain:
        vals = list(got.values())
        lo, hi = min(vals), max(vals)
        for rank, i in enumerate((i for i in order if i in got), 1):
            norm = (got[i] - lo) / (hi - lo) if hi > lo else 1.0
            head[i].setdefault("signals", {})["rerank"] = {
                "score": round(got[i], 6),
                "rank": rank,
                "norm": round(norm, 6),
            }
    return _renumbered([head[i] for i in order] + tail)[:k], None


def _renumbered(hits: list[Cite]) -> list[Cite]:
    for i, h in enumerate(hits, 1):
        h["rank"] = i
    return hits


def _last_search(folder: Folder) -> Path:
    return folder.cache_dir / "last-search.json"


def _remember(folder: Folder, query: str, hits: list[Cite]) -> None:
    ranked = [{"rank": h.get("rank", i), "id": h["id"]} for i, h in enumerate(hits, 1)]
    try:  # a convenience: a read-only folder still searches
        folder.cache_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(_last_search(folder), json.dumps({"query": query, "hits": ranked}) + "\n")
    except OSError:
        pass


RANK = re.compile(r"^\d{1,4}$")  # doc ids are 16 hex digits, so no rank is one
PATH_LINE = re.compile(r"^(?P<path>.+):(?P<line>\d+)(?:-(?P<end>\d+))?$")


def locate(folder: Folder, ref: str, cwd: Path | None = None) -> Spot:
    """Where `ref` points: a rank of the last remembered search, an id (citation, chunk,
    note or document) followed to where its text is now, or `path:line` / a path (relative
    to `cwd`, or to the root)."""
    ref = ref.strip()
    if not ref:
        raise UsageError("nothing to open", "pass a hit's rank, an id or path:line")
    query = ""
    if RANK.match(ref):
        ref, query = _ranked(folder, int(ref))
    if not cit.is_ref(ref):
        m = PATH_LINE.match(ref)
        if m is None:
            return _file_spot(folder, ref, 1, 1, cwd)
        line = int(m["line"])
        return _file_spot(folder, m["path"], line, int(m["end"] or line), cwd)
    p = cit.passage(folder, ref, 0)
    if p["lines"] is None:
        raise NotFound(
            f"the text {ref} cites is no longer in the files",
            f"see what it recorded with `ok cite open {ref}`",
        )
    spot: Spot = {
        "id": ref,
        "status": p["status"],
        "path": p["path"],
        "abs_path": str(folder.root / p["path"]),
        "line": p["lines"]["start"],
        "end_line": p["lines"]["end"],
        "text": p["text"],
    }
    h = p["highlight"]
    best = best_sentence(p["text"][h["start"] : h["end"]], query)
    if best is not None:
        spot["best_line"] = p["lines"]["start"] + p["text"].count("\n", 0, h["start"] + best)
    return spot


# words a query shares with a sentence say little when they are these
_STOP = set(
    [
        "the",
        "and",
        "for",
        "are",
        "was",
        "were",
        "who",
        "what",
        "when",
        "how",
        "why",
        "which",
        "with",
        "that",
        "this",
        "from",
        "does",
        "did",
        "has",
        "have",
        "had",
        "its",
        "into",
        "can",
        "not",
        "but",
        "all",
        "any",
        "there",
    ]
)


def _keys(text: str) -> set[str]:
    """A text's words of three letters or more, cut to five so that forms of a word meet
    (receive, received), less the commonest: as the web explorer picks a sentence."""
    return {w[:5] for w in re.findall(r"\w{3,}", text.lower()) if w not in _STOP}


def best_sentence(passage: str, query: str) -> int | None:
    """Where the sentence of `passage` holding the most of `query`'s words starts (the
    first of equals); None when none holds any."""
    from ..text.statements import sentences

    want = _keys(query)
    best, most = None, 0
    for start, _, text in sentences(passage, min_chars=1) if want else []:
        n = len(want & _keys(text))
        if n > most:
            best, most = start, n
    return best


def _ranked(folder: Folder, rank: int) -> tuple[str, str]:
    """The id of hit `rank` of the last search, and that search's query."""
    try:
        last = json.loads(_last_search(folder).read_text(encoding="utf-8"))
        ranked = {int(h["rank"]): str(h["id"]) for h in last["hits"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise NotFound(
            f"no search to take hit {rank} from", "run `ok search QUERY` first, or pass an id"
        ) from e
    if rank not in ranked:
        raise NotFound(
            f"the last search ({last.get('query')!r}) has no hit {rank}",
            f"it has {len(ranked)}; run `ok search` again, or pass an id",
        )
    return ranked[rank], str(last.get("query") or "")


def _file_spot(folder: Folder, path: str, line: int, end: int, cwd: Path | None) -> Spot:
    """Lines `line`…`end` of a file (as `path:L` or `path:L1-L2` name them)."""
    given = Path(path).expanduser()
    tries = [given] if given.is_absolute() else [(cwd or Path.cwd()) / given, folder.root / given]
    full = next((t.resolve() for t in tries if t.is_file()), None)
    if full is None:
        raise NotFound(
            f"no file {path}", "pass a hit's rank, an id, or a path relative to here or the root"
        )
    try:
        text = full.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{path} cannot be read as UTF-8 text", "open it another way") from e
    lines = text.splitlines()
    if end < line:
        raise UsageError(
            f"the range {line}-{end} ends before it starts", f"pass {path}:{end}-{line}"
        )
    if not 1 <= line <= max(1, len(lines)) or end > max(1, len(lines)):
        raise UsageError(
            f"{path} has {len(lines)} lines, not {end if line <= len(lines) else line}",
            "pass lines in it",
        )
    return {
        "id": f"{path}:{line}" + (f"-{end}" if end != line else ""),
        "status": "file",
        "path": folder.rel(full) if folder.holds(full) else str(full),
        "abs_path": str(full),
        "line": line,
        "end_line": end,
        "text": "\n".join(lines[line - 1 : end]) if lines else "",
    }
