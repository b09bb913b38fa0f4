"""Hybrid search over memories and documents, returning cite objects.

Two signals: BM25 from Kùzu's FTS index (porter-stemmed; Chinese, Japanese and Korean as
character bigrams, `graph.fts_text`) and exact cosine similarity over the chunk and note
vectors. They are fused with a weighted sum of per-query normalized scores (measured best on
the SciFact train split; RRF is available), then deduplicated per document. Every hit is a
cite object that `ok cite verify` can check later.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
import re
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NotRequired

from typing_extensions import TypedDict

from ..errors import UsageError
from ..files import where as where_mod
from ..files.folder import Folder, iso, parse_span, parse_time, utcnow
from ..files.where import Where
from ..records import ChunkRow, Cite, CiteContext, NoteRow, Source, new_cite, note_title
from .protocol import GraphStore

MODES = ("hybrid", "vector", "fts")
# query vectors are made here, beside the searches' own threads
_EMBEDDING = ThreadPoolExecutor(max_workers=4, thread_name_prefix="ok-embed-query")
SCOPES = ("all", "mem", "store")
CONTEXT_CHARS = 120
# beyond this many hits a search is an export, and the candidate pool (k * 5 per signal)
# would outgrow what the engine takes as a LIMIT
MAX_K = 1000
MAX_PER_DOC = 1000


@dataclass
class Filters:
    tags: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    path: str | None = None
    since: str | None = None
    until: str | None = None
    # notes another note supersedes are left out unless this is set (expired ones always)
    include_superseded: bool = False
    # conditions on the frontmatter of the hit's file (`--where`)
    where: list[Where] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return bool(self.tags or self.topics or self.path or self.since or self.until or self.where)

    def normalized(self, since_name: str = "since", until_name: str = "until") -> Filters:
        """These filters with `since`/`until` parsed (dates, times or spans like `7d`) to
        UTC ISO strings; a bad value is a usage error naming the option."""
        since = parse_time(self.since, since_name)
        until = parse_time(self.until, until_name, end_of_day=True)
        if since and until and since > until:
            raise UsageError(
                f"{since_name} {self.since} is later than {until_name} {self.until}",
                "swap them, or drop one",
            )
        return Filters(
            tags=self.tags,
            topics=self.topics,
            path=self.path,
            since=since,
            until=until,
            include_superseded=self.include_superseded,
            where=self.where,
        )


# A long query (a pasted paragraph, a whole argument) is answered: each signal takes what it
# can use (`QueryUse`) and the caller is told what was cut. Only past this many characters
# is a query refused, as no signal would read more than a sliver of it.
MAX_QUERY = 100_000
# distinct words BM25 takes from one query: every word costs a pass over its postings, and
# past a few hundred they add cost, not ranking
MAX_TERMS = 256


def check_counts(
    k: int, per_doc: int = 1, k_name: str = "k", per_doc_name: str = "per_doc"
) -> None:
    """Refuse a result count or per-document cap outside 1..MAX, saying the range."""
    if not 1 <= k <= MAX_K:
        raise UsageError(
            f"{k_name} must be between 1 and {MAX_K}, got {k}",
            f"ask for at most {MAX_K} hits, and narrow the query for more",
        )
    if not 1 <= per_doc <= MAX_PER_DOC:
        raise UsageError(
            f"{per_doc_name} must be between 1 and {MAX_PER_DOC}, got {per_doc}",
            "1 shows the best passage of each document; more show several",
        )


@dataclass
class Fusion:
    method: str = "wsum"  # "wsum" (normalized weighted sum) or "rrf"
    vector_weight: float = 0.5
    rrf_k: int = 60

    @classmethod
    def from_folder(cls, folder: Folder) -> Fusion:
        return cls(
            method=folder.setting("search.fusion"),
            vector_weight=folder.setting("search.vector_weight"),
            rrf_k=folder.setting("search.rrf_k"),
        )


# a word, or words joined by hyphens or dots ("IL-6", "3.12"): the FTS index writes a
# compound with digits as one code (`graph.fts_text`), so the query keeps it whole
_WORD = re.compile(r"[^\W_]+(?:[-.][^\W_]+)*")


def _fts_query(q: str) -> str:
    # Kùzu's FTS parser treats some punctuation as syntax; plain words are what BM25 needs
    return " ".join(_WORD.findall(q))


def query_words(q: str) -> list[str]:
    """The distinct words of a query (case aside), in order of first appearance: what BM25
    can take from it (both engines count a word once however often it is asked)."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(q)))


@dataclass(frozen=True)
class QueryUse:
    """How much of a query each signal takes: BM25 its distinct words, up to `MAX_TERMS`
    (the longest, when there are more: long words are the rarer ones, and the short common
    ones score little); the vector the characters the embedding model reads, up to its
    window."""

    chars: int  # the query's length
    words: list[str]  # the distinct words BM25 takes, in the query's order (none: no BM25)
    all_words: int  # distinct words in the query
    vector_chars: int | None  # characters the model reads (None: no vector signal)
    window: int = 0  # the model's window, in tokens

    @classmethod
    def of(cls, query: str, mode: str, embedder: Any = None) -> QueryUse:
        words = query_words(query)
        taken = words if mode != "vector" else []
        if len(taken) > MAX_TERMS:
            order = {w: i for i, w in enumerate(words)}
            keep = set(sorted(words, key=lambda w: (-len(w), order[w]))[:MAX_TERMS])
            taken = [w for w in words if w in keep]
        reads = embedder.reads(query) if mode != "fts" and embedder is not None else None
        window = int(getattr(embedder, "max_tokens", 0) or 0) if reads is not None else 0
        return cls(len(query), taken, len(words), reads, window)

    @property
    def fts_text(self) -> str:
        """The words BM25 is asked for."""
        return " ".join(self.words)

    @property
    def fts_cut(self) -> bool:
        return bool(self.words) and len(self.words) < self.all_words

    @property
    def vector_cut(self) -> bool:
        return self.vector_chars is not None and self.vector_chars < self.chars

    @property
    def cut(self) -> bool:
        """Whether a signal left part of the query unread."""
        return self.fts_cut or self.vector_cut

    def warning(self) -> str | None:
        """One line saying what was left unread, or None when every signal read it all."""
        if not self.cut:
            return None
        parts = []
        if self.vector_cut:
            parts.append(
                f"the embedding model read its first {self.vector_chars:,} "
                f"(a window of {self.window} tokens)"
            )
        if self.fts_cut:
            parts.append(
                f"BM25 took the {len(self.words)} longest of its {self.all_words} distinct words"
            )
        elif self.words:
            parts.append(f"BM25 took all its {self.all_words} distinct words")
        return f"the query is {self.chars:,} characters long: " + "; ".join(parts)


Key = tuple[str, str]  # (table, id)


class Scored(TypedDict):
    """A candidate's place in one signal's list."""

    score: float  # the raw score (BM25 or cosine), rounded
    rank: int  # 1-based
    norm: float  # the score scaled to 0..1 within the list (what wsum adds up)


class Ranked(TypedDict):
    """A candidate after fusion, before its row is read and it becomes a cite object."""

    table: str  # Chunk | MemoryNote
    id: str  # the chunk or note id
    score: float  # the fused score (times the recency factor, when recency is on)
    signals: dict[str, Scored]  # by signal name: fts, vector
    recency: NotRequired[float]  # the factor from the item's date, when recency is on
    drift: NotRequired[tuple[float, float]]  # its document's drift and the factor from it


@dataclass(frozen=True)
class Recency:
    """Newer items first, all else equal: the fused score times 0.5 ** (age / half_life),
    never under `floor`, so an old item that matches well still shows."""

    half_life: float  # seconds
    floor: float

    def factor(self, when: str, now: dt.datetime) -> float:
        try:
            then = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            return 1.0  # undated: neither helped nor held back
        if then.tzinfo is None:
            then = then.replace(tzinfo=dt.UTC)
        age = max(0.0, (now - then).total_seconds())
        return max(self.floor, 0.5 ** (age / self.half_life))


RECENCY_FORMS = "use a half-life such as 12h, 90d or 2w, or `off`"


def recency_of(value: str | None, floor: float, option: str = "--recency") -> Recency | None:
    """The `Recency` a half-life asks for (`90d`, `12h`, `2w`); None, "", `off` or `0`: none.
    Anything else is a usage error naming `option`."""
    if value is None or str(value).strip().lower() in ("", "off", "0", "none", "false"):
        return None
    try:
        span = parse_span(str(value))
    except OverflowError:
        span = None
    if span is None or span.total_seconds() <= 0:
        raise UsageError(f"{option} {value!r} is not a half-life", RECENCY_FORMS)
    if not 0.0 <= floor <= 1.0:
        raise UsageError(f"search.recency_floor {floor} is out of range", "set it from 0 to 1")
    return Recency(span.total_seconds(), floor)


def _by_recency(g: GraphStore, hits: list[Ranked], recency: Recency) -> list[Ranked]:
    """The fused hits with each score times its recency factor, best first again."""
    chunks = g.chunks_by_id([h["id"] for h in hits if h["table"] == "Chunk"])
    notes = g.notes_by_id([h["id"] for h in hits if h["table"] == "MemoryNote"])
    now = utcnow()
    for h in hits:
        if h["table"] == "Chunk":
            crow = chunks.get(h["id"])
            when = str(crow.get("created_at") or "") if crow else ""
        else:
            nrow = notes.get(h["id"])
            when = str(nrow.get("ts") or "") if nrow else ""
        h["recency"] = round(recency.factor(when, now), 6)
        h["score"] = h["score"] * h["recency"]
    return sorted(hits, key=lambda h: (-h["score"], h["table"], h["id"]))


MAX_DRIFT_PENALTY = 10.0


def check_drift_penalty(weight: float, option: str = "--drift-penalty") -> float:
    """A drift penalty weight, from 0 (off) to MAX_DRIFT_PENALTY; anything else is a usage
    error naming `option`."""
    if not 0.0 <= weight <= MAX_DRIFT_PENALTY:  # also refuses nan
        raise UsageError(
            f"{option} {weight:g} is out of range",
            f"use a weight from 0 (off) to {MAX_DRIFT_PENALTY:g}; 0.1 takes 2% off a "
            "document whose last version drifted 0.2",
        )
    return weight


def _by_drift(folder: Folder, g: GraphStore, hits: list[Ranked], weight: float) -> list[Ranked]:
    """The hits with each document's score times `1 - weight * drift`, its drift being that
    of its latest version against the one it replaced (`1 - cosine`, as `ok refresh` records
    it; none: no penalty), best first again. Notes have no drift."""
    from ..files import mapping as mapping_mod

    entries = mapping_mod.load(folder)
    docs = {
        c["id"]: c["doc_id"]
        for c in g.chunks_by_id([h["id"] for h in hits if h["table"] == "Chunk"]).values()
    }
    for h in hits:
        doc = entries.get(docs.get(h["id"], ""))
        old = entries.get(str(doc.get("supersedes") or "")) if doc else None
        drift = old.get("drift") if old else None
        if drift is None:
            continue
        h["drift"] = (float(drift), round(max(0.0, 1.0 - weight * float(drift)), 6))
        h["score"] = h["score"] * h["drift"][1]
    return sorted(hits, key=lambda h: (-h["score"], h["table"], h["id"]))


def pool_size(k: int, filtered: bool = False) -> int:
    """How many candidates each signal contributes for `k` hits (more when filters will
    drop some)."""
    return max(50, k * 5) * (4 if filtered else 1)


def candidates(
    g: GraphStore,
    query: str,
    qvec: Any,
    mode: str,
    scope: str,
    n_cand: int,
    fts_words: str | None = None,
) -> dict[str, list[tuple[Key, float]]]:
    """Each signal's candidates, {"fts": [((table, id), score)], "vector": [...]}, best
    first (ties by key), up to `n_cand` per table. `qvec` may be a `Future` of the query
    vector, waited for once the BM25 queries are done. `fts_words`: what BM25 is asked
    (default: the query's words; see `QueryUse`)."""
    tables = [t for t, s in (("Chunk", "store"), ("MemoryNote", "mem")) if scope in ("all", s)]
    lists: dict[str, list[tuple[Key, float]]] = {"fts": [], "vector": []}
    fq = _fts_query(query) if fts_words is None else fts_words
    for table in tables:  # BM25 first: a query vector that is a `Future` is made meanwhile
        if mode in ("hybrid", "fts") and fq:
            lists["fts"] += [((table, i), s) for i, s in g.fts(table, fq, n_cand)]
    if isinstance(qvec, Future):
        qvec = qvec.result()
    for table in tables:
        if mode in ("hybrid", "vector") and qvec is not None:
            lists["vector"] += [((table, i), s) for i, s in g.vector(table, qvec, n_cand)]
    for items in lists.values():
        items.sort(key=lambda x: (-x[1], x[0]))
    return lists


def _leave_out(lists: dict[str, list[tuple[Key, float]]], note_ids: set[str]) -> None:
    """Drop these notes (expired or superseded) from every signal's candidates."""
    if note_ids:
        for name, items in lists.items():
            lists[name] = [
                x for x in items if not (x[0][0] == "MemoryNote" and x[0][1] in note_ids)
            ]


def best_cosine(lists: dict[str, list[tuple[Key, float]]]) -> float | None:
    """The best cosine similarity among the vector candidates of `candidates`, or None
    without a vector signal (fts mode, nothing embedded)."""
    return lists["vector"][0][1] if lists.get("vector") else None


def no_good_match(best: float | None, keywords: bool, min_score: float) -> bool:
    """Whether nothing in scope is about the query: none of its words occur (`keywords`:
    BM25 found something) and the best passage's cosine similarity `best` is under the
    floor `min_score` (0 disables it; without a vector signal there is nothing to judge
    by). A query whose words occur is never cut: a lone name embeds poorly (`Babbage` is
    0.12 from the page about him) but the user asked for those words."""
    return min_score > 0 and not keywords and best is not None and best < min_score


def fuse(lists: dict[str, list[tuple[Key, float]]], mode: str, fusion: Fusion) -> list[Ranked]:
    """Ranked candidates [{table, id, score, signals}] from the per-signal lists of
    `candidates`: one signal's raw score in the fts and vector modes, else `fusion`."""
    signals: dict[Key, dict[str, Scored]] = {}
    for name, items in lists.items():
        top = items[0][1] if items else 0.0
        low = items[-1][1] if items else 0.0
        for rank, (key, score) in enumerate(items, 1):
            norm = (score - low) / (top - low) if top > low else 1.0
            signals.setdefault(key, {})[name] = {
                "score": round(score, 6),
                "rank": rank,
                "norm": norm,
            }
    out: list[Ranked] = []
    for (table, cid), sig in signals.items():
        if mode == "fts":
            fused = sig["fts"]["score"]
        elif mode == "vector":
            fused = sig["vector"]["score"]
        elif fusion.method == "rrf":
            fused = sum(1.0 / (fusion.rrf_k + s["rank"]) for s in sig.values())
        else:
            w = fusion.vector_weight
            vec, fts = sig.get("vector"), sig.get("fts")
            fused = w * (vec["norm"] if vec else 0.0) + (1 - w) * (fts["norm"] if fts else 0.0)
        out.append({"table": table, "id": cid, "score": fused, "signals": sig})
    out.sort(key=lambda h: (-h["score"], h["id"]))
    return out


def cut_tail(hits: list[Ranked], mode: str, floor: float) -> list[Ranked]:
    """The hits less the tail of hybrid search: a hit none of whose query words BM25 found
    (no `fts` signal) is kept only if its cosine similarity reaches `floor`
    (search.tail_floor; 0 keeps every hit). Without it, once any query word occurs, every
    vector neighbour is listed down to a fused score of 0. A query none of whose words
    occur is left to its own floor (`no_good_match`); keyword and vector modes list what
    their one signal ranks, as asked."""
    if mode != "hybrid" or floor <= 0 or not any("fts" in h["signals"] for h in hits):
        return hits  # no query word occurs: the query's own floor (min_score) judges it
    return [h for h in hits if "fts" in h["signals"] or h["signals"]["vector"]["score"] >= floor]


def first_per_doc(hits: list[Ranked], per_doc: int, limit: int | None) -> list[Ranked]:
    """The best `per_doc` hits of each document (a chunk id starts with its doc id), in
    order, stopping at `limit` hits when given."""
    picked: list[Ranked] = []
    per: dict[str, int] = {}
    for h in hits:
        owner = h["id"].split("#", 1)[0]
        if per.get(owner, 0) >= per_doc:
            continue
        per[owner] = per.get(owner, 0) + 1
        picked.append(h)
        if limit is not None and len(picked) >= limit:
            break
    return picked


def search(
    folder: Folder,
    g: GraphStore,
    query: str,
    *,
    k: int = 10,
    mode: str = "hybrid",
    scope: str = "all",
    filters: Filters | None = None,
    per_doc: int = 1,
    explain: bool = False,
    embedder: Any = None,
    fusion: Fusion | None = None,
    diversity: float = 0.0,
    min_score: float = 0.0,
    recency: Recency | None = None,
    drift_penalty: float = 0.0,
    tail_floor: float = 0.0,
) -> list[Cite]:
    """Search the folder; returns up to `k` cite objects, best first (none when the best
    passage is under `min_score`, see `find`)."""
    return find(
        folder,
        g,
        query,
        k=k,
        mode=mode,
        scope=scope,
        filters=filters,
        per_doc=per_doc,
        explain=explain,
        embedder=embedder,
        fusion=fusion,
        diversity=diversity,
        min_score=min_score,
        recency=recency,
        drift_penalty=drift_penalty,
        tail_floor=tail_floor,
    ).hits


@dataclass
class Found:
    """A search's hits, and how close the folder came to the query."""

    hits: list[Cite]
    # the best cosine similarity between the query and a passage in the searched scope:
    # comparable across queries, unlike the fused score (None without a vector signal)
    best_score: float | None
    keywords: bool  # whether BM25 found any of the query's words in scope
    min_score: float  # the floor it was held to (0: none)
    use: QueryUse | None = None  # how much of the query each signal took

    @property
    def warning(self) -> str | None:
        """What the signals left of a long query unread, in one line (None: nothing)."""
        return self.use.warning() if self.use is not None else None

    @property
    def no_good_match(self) -> bool:
        return no_good_match(self.best_score, self.keywords, self.min_score)


def find(
    folder: Folder,
    g: GraphStore,
    query: str,
    *,
    k: int = 10,
    mode: str = "hybrid",
    scope: str = "all",
    filters: Filters | None = None,
    per_doc: int = 1,
    explain: bool = False,
    embedder: Any = None,
    fusion: Fusion | None = None,
    diversity: float = 0.0,
    min_score: float = 0.0,
    recency: Recency | None = None,
    drift_penalty: float = 0.0,
    tail_floor: float = 0.0,
) -> Found:
    """Search the folder: up to `k` cite objects, best first.

    `diversity` in (0, 1] re-ranks the top candidates by maximal marginal relevance: each
    next hit trades relevance against similarity to the hits already chosen. When none of
    the query's words occur in scope and no passage has a cosine similarity of `min_score`
    to it, there is no good match and no hits (see `no_good_match`; the floor judges the
    whole query, so it never reorders or thins the hits of a query that passes). In hybrid
    mode a hit BM25 did not find is kept only if its cosine similarity reaches `tail_floor`
    (`cut_tail`), and the fused scores are scaled so that the best is 1.0.
    """
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}", "use one of: " + ", ".join(MODES))
    if scope not in SCOPES:
        raise UsageError(f"unknown scope {scope!r}", "use one of: " + ", ".join(SCOPES))
    if not query.strip():
        raise UsageError("the query is empty", "pass some words to search for")
    check_length(query)
    check_counts(k, per_doc)
    if not 0.0 <= diversity <= 1.0:
        raise UsageError(f"diversity {diversity} is out of range", "use a value from 0 to 1")
    if not 0.0 <= min_score <= 1.0:
        raise UsageError(
            f"min-score {min_score} is out of range",
            "use a cosine similarity from 0 to 1; 0 turns the floor off",
        )
    # idempotent: values the CLI already parsed come back unchanged
    filters = (filters or Filters()).normalized()
    if filters.tags or filters.topics:
        scope = "mem" if scope in ("all", "mem") else scope
    use = QueryUse.of(query, mode, embedder)
    seen = query[: use.vector_chars] if use.vector_chars is not None else query
    # the model embeds the query while the graph answers BM25 (both let go of the GIL)
    pending = (
        _EMBEDDING.submit(embedder.embed_query, seen)
        if mode != "fts" and embedder is not None
        else None
    )
    n_cand = pool_size(k, filters.active)
    lists = candidates(g, query, pending, mode, scope, n_cand, use.fts_text)
    qvec = pending.result() if pending is not None else None
    if scope in ("all", "mem"):
        _leave_out(lists, g.hidden_notes(iso(utcnow()), not filters.include_superseded))
    best, keywords = best_cosine(lists), bool(lists["fts"])
    if mode == "vector" and no_good_match(best, keywords, min_score):
        # vector mode ran no BM25; whether the query's words occur still counts
        fq = QueryUse.of(query, "fts").fts_text
        keywords = any(c for c in candidates(g, query, None, "fts", scope, 1, fq)["fts"])
    if no_good_match(best, keywords, min_score):
        return Found([], best, keywords, min_score, use)
    hits = cut_tail(fuse(lists, mode, fusion or Fusion.from_folder(folder)), mode, tail_floor)
    if mode == "hybrid" and hits and hits[0]["score"] > 0:
        top = hits[0]["score"]  # relative to the query: the top hit scores 1.0
        for h in hits:
            h["score"] = h["score"] / top
    if recency is not None:
        hits = _by_recency(g, hits, recency)
    if drift_penalty:
        hits = _by_drift(folder, g, hits, check_drift_penalty(drift_penalty))
    # one pass of per-document capping on ids alone; rows are fetched only for what can be
    # shown, or for every survivor when filters need them
    picked = first_per_doc(hits, per_doc, None if filters.active else (k * 4 if diversity else k))
    if diversity and len(picked) > 1:
        if qvec is None and embedder is not None:
            qvec = embedder.embed_query(seen)
        picked = _mmr(g, picked, qvec, k if not filters.active else len(picked), diversity)
    chunk_rows = g.chunks_by_id([h["id"] for h in picked if h["table"] == "Chunk"])
    note_rows = g.notes_by_id([h["id"] for h in picked if h["table"] == "MemoryNote"])
    results: list[Cite] = []
    files: dict[str, str | None] = {}
    metas: dict[str, dict[str, Any]] = {}
    for h in picked:
        if h["table"] == "Chunk":
            crow = chunk_rows.get(h["id"])
            if crow is None or not _passes(crow, h["table"], filters, folder, metas):
                continue
            cite = chunk_cite(folder, crow, files)
        else:
            nrow = note_rows.get(h["id"])
            if nrow is None or not _passes(nrow, h["table"], filters, folder, metas):
                continue
            cite = note_cite(folder, nrow, files)
        cite["score"] = round(h["score"], 6)
        cite["rank"] = len(results) + 1
        if explain:
            cite["signals"] = {
                n: {"score": s["score"], "rank": s["rank"], "norm": round(s["norm"], 6)}
                for n, s in h["signals"].items()
            }
            if "recency" in h:
                cite["recency"] = h["recency"]
            if "drift" in h:
                drift, factor = h["drift"]
                cite["drift"] = {"drift": drift, "factor": factor}
        results.append(cite)
        if len(results) >= k:
            break
    return Found(results, best, keywords, min_score, use)


def check_length(query: str) -> None:
    """Refuse a query no signal would read more than a sliver of (over `MAX_QUERY`)."""
    if len(query) > MAX_QUERY:
        raise UsageError(
            f"the query is {len(query):,} characters long; at most {MAX_QUERY:,} are read",
            "search for its key passage: the embedding model reads about a thousand "
            f"characters, BM25 {MAX_TERMS} distinct words",
        )


def _mmr(g: GraphStore, cands: list[Ranked], qvec: Any, k: int, diversity: float) -> list[Ranked]:
    """Maximal marginal relevance: the best hit first, then each next one by
    `(1 - diversity) * cos(query, hit) - diversity * max cos(hit, chosen)`."""
    import numpy as np

    vecs: dict[str, Any] = {}
    for table in ("Chunk", "MemoryNote"):
        ids = [c["id"] for c in cands if c["table"] == table]
        vecs.update(g.vectors(table, ids))
    cands = [c for c in cands if c["id"] in vecs]
    if not cands:
        return cands
    mat = np.array([vecs[c["id"]] for c in cands], dtype=np.float32)
    rel = mat @ np.asarray(qvec, dtype=np.float32) if qvec is not None else np.zeros(len(cands))
    chosen: list[int] = [0]
    best_sim = mat @ mat[0]
    while len(chosen) < min(k, len(cands)):
        score = (1 - diversity) * rel - diversity * np.maximum(best_sim, 0.0)
        score[chosen] = -np.inf
        i = int(np.argmax(score))
        chosen.append(i)
        best_sim = np.maximum(best_sim, mat @ mat[i])
    return [cands[i] for i in chosen]


def _passes(
    row: Mapping[str, Any],
    table: str,
    f: Filters,
    folder: Folder,
    metas: dict[str, dict[str, Any]],
) -> bool:
    # frontmatter is read from the files, once per file, and only for a `where`
    if f.where and not where_mod.holds_all(
        f.where, where_mod.meta_of(folder.root, row["path"], metas)
    ):
        return False
    if f.path and not (
        fnmatch.fnmatch(row["path"], f.path) or fnmatch.fnmatch(row["path"], f"*{f.path}*")
    ):
        return False
    if table == "MemoryNote":
        if f.tags and not set(f.tags) <= set(row.get("tags") or []):
            return False
        if f.topics and not set(f.topics) <= set(row.get("topics") or []):
            return False
        when = row.get("ts") or ""
    else:
        when = row.get("created_at") or ""
    if f.since and when and when < f.since:
        return False
    return not (f.until and when and when > f.until)


def _file_text(folder: Folder, rel: str, cache: dict[str, str | None]) -> str | None:
    if rel not in cache:
        try:
            cache[rel] = (folder.root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            cache[rel] = None
    return cache[rel]


def _context(text: str | None, start: int, end: int, quote: str) -> CiteContext:
    if text is None or text[start:end] != quote:
        return {"pre": "", "post": ""}
    return {
        "pre": text[max(0, start - CONTEXT_CHARS) : start],
        "post": text[end : end + CONTEXT_CHARS],
    }


def chunk_cite(folder: Folder, row: ChunkRow, cache: dict[str, str | None] | None = None) -> Cite:
    """The cite object of a chunk row (from `Graph.chunks_by_id`)."""
    text = _file_text(folder, row["path"], {} if cache is None else cache)
    source: Source = json.loads(row.get("source") or "{}")
    if not source:
        source = {"path": row["path"]}
    return new_cite(
        "chunk",
        row["id"],
        row["doc_id"],
        row["path"],
        row["sha256"],
        row.get("title") or "",
        row["start"],
        row["end"],
        row["text"],
        _context(text, row["start"], row["end"], row["text"]),
        source,
        row.get("created_at") or "",
        root=folder.root,
    )


def note_cite(folder: Folder, row: NoteRow, cache: dict[str, str | None] | None = None) -> Cite:
    """The cite object of a note row (from `Graph.notes_by_id`)."""
    text = _file_text(folder, row["path"], {} if cache is None else cache)
    s, e = int(row["body_start"]), int(row["body_end"])
    return new_cite(
        "memory",
        row["id"],
        row["id"],
        row["path"],
        row["sha256"],
        note_title(row["text"]),
        s,
        e,
        row["text"],
        _context(text, s, e, row["text"]),
        {"path": row["path"]},
        row.get("ts") or "",
        tags=list(row.get("tags") or []),
        topics=list(row.get("topics") or []),
        root=folder.root,
    )


def snippet(text: str, query: str = "", width: int = 240) -> str:
    """A one-line excerpt of `text`, about `width` characters, around the densest run of
    query words (word starts match, so "program" finds "programmer")."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    terms = {w[:6] for w in re.findall(r"\w{3,}", query.lower())}
    words = [(m.start(), m.group(0).lower()) for m in re.finditer(r"\w+", flat)]
    hits = [pos for pos, w in words if terms and w[:6] in terms]
    start = 0
    if hits:
        best = -1
        for pos in hits:
            lo = max(0, pos - width // 5)
            covered = {w[:6] for p, w in words if lo <= p < lo + width and w[:6] in terms}
            if len(covered) > best:
                best, start = len(covered), lo
        start = min(start, max(0, len(flat) - width))
        if start:
            start = flat.find(" ", start) + 1 or start
    end = start + width
    if end < len(flat):
        end = flat.rfind(" ", start, end) if flat.rfind(" ", start, end) > start else end
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")
