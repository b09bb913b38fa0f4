"""The keyword index: BM25 over the current chunks and memory notes in Tantivy, a directory
beside the graph's (`.ok/keyword/` next to `.ok/kuzu/`). The only module that imports tantivy.

It holds nothing the graph does not. One document per current chunk and per note: `key`
("<table>:<id>", raw and stored: what a hit maps back to and what a delete names), `doc` (a
chunk's document id, raw: a document's chunks go out together) and the terms of the row's
`fts` column in a field of its table (`chunk` or `note`, so that each table has BM25
statistics of its own and a query of one table is a plain disjunction of terms, which
Tantivy's top-k collector runs as block-max WAND: it stops scoring postings that cannot
reach the k best). The terms are those Kùzu's full-text index makes of the same text: its
ignore pattern, lower case, its stop words (`openkl/data/stopwords.txt`), the porter
stemmer; term frequencies without positions. The terms are also stored, with their count
as a fast field (`chunk_len`, `note_len`).

A search takes Tantivy's best 2k rows by its BM25 (k1 1.2, b 0.75, stopping early), then
scores those again with the product's BM25 (k1 0.9, b 0.4, as Kùzu's FTS scored: the ranking
and the score's shape that fusion was tuned on) from their stored terms, the terms' document
frequencies and the table's mean length, and keeps the best k.

The graph writer keeps it in step (`Graph`): the rows a transaction adds and removes are
applied here after the graph's commit, under a lock of the index's own. A stamp written after
each commit (`STAMP`) names the graph (its id and keyword generation, both in its `Meta`
table) and the analyzer's version; whoever finds it differing from the graph's (a crash
between the two commits, a deleted directory, an older build, a changed analyzer) rebuilds
the index from the graph before it answers. Readers take no lock: a searcher sees the last
commit, and a rebuild swaps a finished directory in.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

# bump when the terms made of a text change: every index made before is rebuilt
ANALYZER_VERSION = "3"
FIELDS = {"Chunk": "chunk", "MemoryNote": "note"}
STAMP = "STAMP"
# Kùzu's FTS: what its tokenizer replaces by a space before it splits on whitespace
IGNORE = re.compile(r"[0-9!@#$%^&*()_+={}\[\]:;<>,.?~\/\|'\"`-]+")
STOP_WORDS = frozenset(
    (Path(__file__).parent.parent / "data" / "stopwords.txt").read_text().split()
)
# below this many documents, a commit that deletes rebuilds the index instead: Tantivy counts
# deleted documents in its BM25 statistics until it merges their segment, so an index that
# deleted differs in its scores from one made afresh (rebuilding this many takes well under
# a second); above it, deletes stay until they reach `DELETED_SHARE` of the documents
EXACT_BELOW = 3000
DELETED_SHARE = 0.05
_MEMO_MAX = 500_000
# the product's BM25 (Kùzu's FTS was asked with these), and how many of Tantivy's best are
# scored with it per row asked for (Kùzu's FTS was asked for twice as many, too: a smaller
# pool leaves the same nDCG on SciFact but moves the end of some hybrid rankings, whose
# fusion normalizes by the last candidate's score)
K1, B = 0.9, 0.4
POOL = 2

# one change of a transaction: ("add", table, id, doc_id, fts), ("del", table, id) or
# ("doc", doc_id): a document's chunks
Op = tuple[str, ...]
# a row of the graph as the index holds it: (table, id, doc_id, fts)
Row = tuple[str, str, str, str]


class Analyzer:
    """The terms of an `fts` text, as Kùzu's FTS makes them (memoized per word). A text
    loses its stop words before they are stemmed; a query keeps them (as Kùzu does: "changes"
    is a stop word in a text, but asked for it finds "changed", both "chang")."""

    def __init__(self, stop: frozenset[str]) -> None:
        import Stemmer

        self._stem = Stemmer.Stemmer("porter").stemWords
        self._stop = stop
        self._memo: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def word(self, w: str) -> list[str]:
        got = self._memo.get(w)
        if got is None:
            parts = [p for p in IGNORE.sub(" ", w).lower().split() if p not in self._stop]
            with self._lock:
                got = self._stem(parts) if parts else []
                if len(self._memo) >= _MEMO_MAX:
                    self._memo.clear()
                self._memo[w] = got
        return got

    def __call__(self, text: str) -> list[str]:
        out: list[str] = []
        for w in text.split():
            out.extend(self.word(w))
        return out


_analyzers: dict[bool, Analyzer] = {}


def analyze(text: str, query: bool = False) -> list[str]:
    """The terms of a row's `fts` text, or with `query` of a query's (`fts_query`)."""
    a = _analyzers.get(query)
    if a is None:
        a = _analyzers[query] = Analyzer(frozenset() if query else STOP_WORDS)
    return a(text)


def keyword_dir(kuzu_dir: Path) -> Path:
    """Where the keyword index of the graph at `kuzu_dir` lives: `.ok/keyword` for
    `.ok/kuzu` (and `.ok/keyword.rebuild` for a rebuild's `.ok/kuzu.rebuild`)."""
    kuzu_dir = kuzu_dir.absolute()  # `.` has no name to put beside
    name = kuzu_dir.name
    if name.startswith("kuzu"):
        return kuzu_dir.with_name("keyword" + name[len("kuzu") :])
    return kuzu_dir.with_name(name + ".keyword")


def stamp_of(graph_id: str, generation: int) -> str:
    return f"{graph_id}:{generation}:{ANALYZER_VERSION}"


def read_stamp(path: Path) -> dict[str, Any]:
    try:
        got = json.loads((path / STAMP).read_text())
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def _write_stamp(path: Path, stamp: dict[str, Any]) -> None:
    tmp = path / (STAMP + ".tmp")
    tmp.write_text(json.dumps(stamp))
    os.replace(tmp, path / STAMP)


def _schema() -> Any:
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("key", stored=True, tokenizer_name="raw")
    sb.add_text_field("doc", tokenizer_name="raw")
    for field in FIELDS.values():
        sb.add_text_field(field, stored=True, tokenizer_name="ws", index_option="freq")
        sb.add_integer_field(field + "_len", fast=True)
    return sb.build()


def _opened(index: Any) -> Any:
    import tantivy

    index.register_tokenizer(
        "ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
    )
    return index


def _document(row: Row) -> Any:
    import tantivy

    table, rid, doc_id, fts = row
    terms, field = analyze(fts), FIELDS[table]
    return tantivy.Document(
        key=f"{table}:{rid}", doc=doc_id, **{field: " ".join(terms), field + "_len": len(terms)}
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """The index's writer lock (a file beside its directory): one writer or rebuild at once."""
    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def rebuild(path: Path, stamp: str, rows: Iterable[Row]) -> None:
    """Make the index anew from `rows` beside `path` and swap it in; the caller holds the
    lock. Readers that have the old one open keep it until they look again."""
    import tantivy

    new = path.with_name(path.name + ".new")
    shutil.rmtree(new, ignore_errors=True)
    new.mkdir(parents=True)
    index = _opened(tantivy.Index(_schema(), path=str(new)))
    writer = index.writer(heap_size=128_000_000, num_threads=1)
    n = 0
    for row in rows:
        writer.add_document(_document(row))
        n += 1
    writer.commit()
    writer.wait_merging_threads()
    _write_stamp(new, {"stamp": stamp, "docs": n, "deleted": 0})
    old = path.with_name(path.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        path.rename(old)
    new.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def _apply(path: Path, stamp: str, ops: list[Op], have: dict[str, Any]) -> int:
    """Apply a transaction's changes to the index at `path` and commit; the documents it
    holds now."""
    import tantivy

    index = _opened(tantivy.Index.open(str(path)))
    writer = index.writer(heap_size=32_000_000, num_threads=1)
    added = 0
    for op in ops:
        if op[0] == "doc":
            writer.delete_documents_by_term("doc", op[1])
        else:
            writer.delete_documents_by_term("key", f"{op[1]}:{op[2]}")
        if op[0] == "add":
            writer.add_document(_document((op[1], op[2], op[3], op[4])))
            added += 1
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    docs = int(index.searcher().num_docs)
    deleted = int(have.get("deleted", 0)) + max(0, int(have.get("docs", 0)) + added - docs)
    _write_stamp(path, {"stamp": stamp, "docs": docs, "deleted": deleted})
    return docs


def update(
    path: Path, before: str, after: str, ops: list[Op], rows: Callable[[], Iterable[Row]]
) -> None:
    """Bring the index at `path` from the graph's state `before` to `after` with `ops` (the
    changes of the transaction that made `after`); rebuild it from `rows()` (the graph as
    it is now) if it was not at `before`, or when deletes would leave its scores off."""
    from ..files import crash

    with _locked(path):
        have = read_stamp(path)
        if have.get("stamp") == after:
            return  # a reader rebuilt it from the graph as this commit left it
        docs = int(have.get("docs", 0))
        deletes = any(op[0] != "add" for op in ops)
        if have.get("stamp") != before or (deletes and docs < EXACT_BELOW):
            rebuild(path, after, rows())
            return
        docs = _apply(path, after, ops, have)
        crash.point("keyword.committed")
        if read_stamp(path).get("deleted", 0) > DELETED_SHARE * max(docs, 1):
            rebuild(path, after, rows())


def ensure(path: Path, stamp: str, rows: Callable[[], Iterable[Row]]) -> None:
    """Make sure the index at `path` is the graph's at `stamp`, rebuilding it if not."""
    if read_stamp(path).get("stamp") == stamp:
        return
    with _locked(path):
        if read_stamp(path).get("stamp") != stamp:
            rebuild(path, stamp, rows())


class _Searcher:
    def __init__(self, path: Path, stamp: str) -> None:
        import tantivy

        self.stamp = stamp
        self.index = _opened(tantivy.Index.open(str(path)))
        self.searcher = self.index.searcher()
        self.schema = self.index.schema
        self.term = tantivy.Query.term_query
        self.boolean = tantivy.Query.boolean_query
        self.should = tantivy.Occur.Should
        self._sizes: dict[str, tuple[int, float]] = {}
        self._all = tantivy.Query.all_query()

    def size(self, field: str) -> tuple[int, float]:
        """The rows of a table and their mean length in terms."""
        got = self._sizes.get(field)
        if got is None:
            col = field + "_len"
            agg = self.searcher.aggregate(
                self._all, {"n": {"value_count": {"field": col}}, "s": {"sum": {"field": col}}}
            )
            n = int(agg["n"]["value"] or 0)
            got = self._sizes[field] = (n, float(agg["s"]["value"] or 0) / max(n, 1))
        return got


_searchers: dict[Path, _Searcher] = {}
_searchers_lock = threading.Lock()


def search(path: Path, stamp: str, table: str, text: str, k: int) -> list[tuple[str, float]]:
    """The `k` best rows of `table` for the query text `text` (made by `fts_query`):
    [(id, score)], best first. The index must be at `stamp` (`ensure`)."""
    terms = list(dict.fromkeys(analyze(text, query=True)))
    if not terms or k <= 0:
        return []
    with _searchers_lock:
        s = _searchers.get(path)
        if s is None or s.stamp != stamp:
            s = _searchers[path] = _Searcher(path, stamp)
    field = FIELDS[table]
    query = s.boolean([(s.should, s.term(s.schema, field, t, index_option="freq")) for t in terms])
    hits = s.searcher.search(query, limit=k * POOL, count=False).hits
    if not hits:
        return []
    n, avg = s.size(field)
    idf = []
    for t in terms:
        df = s.searcher.doc_freq(field, t)
        idf.append((f" {t} ", math.log(1 + (n - df + 0.5) / (df + 0.5))))
    prefix = len(table) + 1
    out = []
    for _, a in hits:
        d = s.searcher.doc(a)
        stored = d[field][0]
        norm = K1 * (1 - B + B * (stored.count(" ") + 1) / avg)
        # each term between two spaces of its own, so that counting " t " counts every one
        text = " " + stored.replace(" ", "  ") + " "
        score = 0.0
        for word, w in idf:
            f = text.count(word)
            if f:
                score += w * f * (K1 + 1) / (f + norm)
        out.append((d["key"][0][prefix:], score))
    out.sort(key=lambda h: (-h[1], h[0]))  # ties in id order, whatever the segments hold
    return out[:k]


def forget(path: Path) -> None:
    """Drop this process's open searcher of `path` (its directory is going away)."""
    with _searchers_lock:
        _searchers.pop(path, None)


def destroy(path: Path) -> None:
    forget(path)
    for p in (path, path.with_name(path.name + ".new"), path.with_name(path.name + ".old")):
        shutil.rmtree(p, ignore_errors=True)
