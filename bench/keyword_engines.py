"""Keyword engines side by side, on the FTS text the product indexes.

    uv run --group dev python bench/keyword_engines.py [--sizes 10k,100k,1m]
        [--engines kuzu-product,kuzu,tantivy,bm25s,sqlite] [--save]
    uv run --group dev python bench/keyword_engines.py --hybrid [--save]

(with OK_BENCH_DATA pointing at the SciFact data when ../shared is not beside the repo)

Engines:

- `kuzu-product`: `Graph.fts` on `bench/scifact.py`'s folder, as `ok search` runs it (10k);
- `kuzu`: a Kùzu FTS index (0.11, `CREATE_FTS_INDEX` with the porter stemmer, queried with
  K=0.9, B=0.4, top = 2k, like `Graph.fts`) over the same texts in a database of its own;
- `kuzu-pruned`: the same index, asked without the query's words that are in more than 5 %
  of the chunks (query-side pruning; the rarest word always stays);
- `tantivy`: Tantivy (PyPI `tantivy`), a top-k collector without counting, so that a
  disjunction of terms runs block-max WAND; BM25 with Tantivy's fixed k1=1.2, b=0.75;
  term frequencies without positions; the chunk's row number as a fast field;
- `keyword-index`: the product's keyword index (`openkl.graph.keyword`): Tantivy with
  the terms Kùzu's FTS makes, the best 2k by Tantivy's BM25 (early stopping) scored again
  with the product's BM25 (k1 0.9, b 0.4) from the stored terms; built with
  `keyword.rebuild`, asked with `keyword.search` (the analysis of the query included);
- `bm25s`: `bm25s` (eager sparse BM25, scores precomputed per term and document; a query
  sums its terms' rows and takes the top k of all documents), Lucene's BM25 with
  k1=0.9, b=0.4: the product's scoring;
- `sqlite`: SQLite FTS5 (the standard library's), `bm25()` with its fixed k1=1.2, b=0.75.

Every engine but Kùzu gets its terms from `analyze`, which splits and stems as Kùzu's FTS
does (its ignore pattern, lower case, its stop words, which are asked of Kùzu itself, then
the Snowball porter stemmer), so all see the same terms; each engine indexes them with a
whitespace tokenizer.

Texts: at 10k, the folder's current chunks (their `fts` column, `graph.fts_text` of the
chunk). At 100k and 1M, synthetic chunks: each the first half of the words of one SciFact
chunk followed by the second half of another's, both drawn at random (seed 0), with ids of
their own; the vocabulary and its Zipfian shape are SciFact's, the postings lists grow with
the count. Queries: the 300 SciFact test claims through `QueryUse` and `fts_query`, as
`ok search` asks them (the first 100 at 1M).

Quality at 10k: each engine's 500 candidates go through `search.fuse` and
`search.first_per_doc` to 100 documents, as `ok search --mode fts -k 100` does, scored
with ../shared/bench/eval_run.py; `--hybrid` fuses those candidates with the folder's
vector list (`bench/ranking.py`'s exact cosine) as `ok search --mode hybrid -k 100` does and
scores that. CJK: the same on bench/data/cjk (`graph.fts_text` of
each document, its queries through `fts_query`), against Kùzu's own numbers.

Each build and each query run is a child process of its own, so that its RSS is its own:
`build` reports seconds, bytes on disk and peak RSS; `query` opens the index from disk,
runs the queries once to warm up and once timed (one thread, k = 50, the pool of a 10-hit
search, and k = 500, of a 100-hit one), and reports p50/p95 and the RSS the open index
adds. Indexes are kept under bench/.work/keyword_engines/ and reused.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import provenance  # noqa: E402
import scifact  # noqa: E402

from openkl import graph as graph_mod  # noqa: E402
from openkl.graph.search import Fusion, QueryUse, first_per_doc, fuse  # noqa: E402

WORK = scifact.WORK / "keyword_engines"
SIZES = {"10k": 0, "100k": 100_000, "1m": 1_000_000}
KS = (50, 500)
# `kuzu-pruned` leaves out of a query the words in more than this share of the chunks
PRUNE = 0.05
# runs left out, and why (the report says so)
SKIP = {
    ("sqlite", "100k"): "slowest at 10k by far (every match scored through a SQL function)",
    ("sqlite", "1m"): "slowest at 10k by far (every match scored through a SQL function)",
    ("kuzu", "1m"): "its build alone outgrows the bound of the 1M run; the product's own 1M"
    " numbers are in docs/scaling.md (1M chunks, Kùzu)",
}
CJK = HERE / "data" / "cjk"
# Kùzu's FTS: what its tokenizer replaces by a space before it splits on whitespace
IGNORE = re.compile(r"[0-9!@#$%^&*()_+={}\[\]:;<>,.?~\/\|'\"`-]+")


# -- the terms ---------------------------------------------------------------------------
def kuzu_stopwords(words: set[str]) -> set[str]:
    """Which of `words` (split and lower-cased as Kùzu does) Kùzu's FTS drops: each word is
    a document of its own in a throwaway index, asked for in batches."""
    import kuzu

    where = WORK / "stopwords-probe"
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    conn = kuzu.Connection(kuzu.Database(str(where / "db")))
    conn.execute("CREATE NODE TABLE W(id STRING PRIMARY KEY, fts STRING)")
    ws = sorted(words)
    for i in range(0, len(ws), 5000):
        conn.execute("UNWIND $w AS w CREATE (:W {id: w, fts: w})", {"w": ws[i : i + 5000]})
    conn.execute("CALL CREATE_FTS_INDEX('W', 'ix', ['fts'], stemmer := 'porter')")
    kept: set[str] = set()
    for i in range(0, len(ws), 500):
        batch = ws[i : i + 500]
        res = conn.execute(
            "CALL QUERY_FTS_INDEX('W', 'ix', $q, top := 100000) RETURN node.id",
            {"q": " ".join(batch)},
        )
        while res.has_next():
            kept.add(res.get_next()[0])
    shutil.rmtree(where, ignore_errors=True)
    return words - kept


class Analyzer:
    """Kùzu's FTS terms of a text: the ignore pattern, lower case, its stop words, porter."""

    def __init__(self, stop: set[str]) -> None:
        import Stemmer

        self.stop = frozenset(stop)
        self.stemmer = Stemmer.Stemmer("porter")
        self.memo: dict[str, list[str]] = {}

    def word(self, w: str) -> list[str]:
        """The terms of one whitespace-separated word (memoized: texts repeat words)."""
        got = self.memo.get(w)
        if got is None:
            parts = [p for p in IGNORE.sub(" ", w).lower().split() if p not in self.stop]
            got = self.memo[w] = self.stemmer.stemWords(parts) if parts else []
        return got

    def __call__(self, text: str) -> list[str]:
        out: list[str] = []
        for w in text.split():
            out.extend(self.word(w))
        return out


def analyzer() -> Analyzer:
    path = WORK / "stopwords.json"
    if not path.exists():
        words: set[str] = set()
        for text in chunks()["fts"] + [q for _, q in queries()] + cjk_texts():
            words.update(IGNORE.sub(" ", text).lower().split())
        path.write_text(json.dumps(sorted(kuzu_stopwords(words))))
    return Analyzer(set(json.loads(path.read_text())))


# -- the texts ---------------------------------------------------------------------------
def chunks() -> dict[str, Any]:
    """The folder's current chunks: id, FTS text, and each document's file name."""
    path = WORK / "chunks.json"
    if path.exists():
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    from openkl.files.folder import Folder
    from openkl.sync import indexer

    WORK.mkdir(parents=True, exist_ok=True)
    with indexer.open_graph(Folder(scifact.WORK / "scifact")) as g:
        rows = g.query(
            "MATCH (c:Chunk) WHERE c.current RETURN c.id AS id, c.fts AS fts ORDER BY c.id"
        )
        docs = g.query("MATCH (d:Doc) WHERE d.current RETURN d.id AS id, d.path AS path")
    data = {
        "ids": [r["id"] for r in rows],
        "fts": [r["fts"] for r in rows],
        "name": {d["id"]: Path(d["path"]).name.removesuffix(".ok.md") for d in docs},
    }
    path.write_text(json.dumps(data))
    return data


def queries() -> list[tuple[str, str]]:
    """The test claims as `ok search` hands them to `Graph.fts`, which applies `fts_query`
    (each engine here does that too, inside its timed search)."""
    return [(qid, QueryUse.of(text, "fts").fts_text) for qid, text in scifact.load_queries("test")]


def cjk_texts() -> list[str]:
    with open(CJK / "corpus.jsonl", encoding="utf-8") as f:
        return [
            graph_mod.fts_text(f"{d['title'].strip()}\n\n{d['text'].strip()}")
            for d in map(json.loads, f)
        ]


def texts(size: str) -> Iterator[tuple[str, str]]:
    """(id, FTS text) of a set: the folder's chunks, the synthetic ones, or the CJK set."""
    if size == "cjk":
        with open(CJK / "corpus.jsonl", encoding="utf-8") as f:
            ids = [json.loads(line)["_id"] for line in f]
        yield from zip(ids, cjk_texts(), strict=True)
        return
    data = chunks()
    if not SIZES[size]:
        yield from zip(data["ids"], data["fts"], strict=True)
        return
    words = [t.split() for t in data["fts"]]
    rng = random.Random(0)
    for i in range(SIZES[size]):
        a, b = words[rng.randrange(len(words))], words[rng.randrange(len(words))]
        yield f"s{i:07d}#0", " ".join(a[: len(a) // 2] + b[len(b) // 2 :])


def set_queries(size: str) -> list[tuple[str, str]]:
    if size == "cjk":
        with open(CJK / "queries.jsonl", encoding="utf-8") as f:
            return [(q["_id"], QueryUse.of(q["text"], "fts").fts_text) for q in map(json.loads, f)]
    return queries()[:100] if size == "1m" else queries()


# -- the engines -------------------------------------------------------------------------
def du(path: Path) -> int:
    """Bytes on disk under `path` (a file or a directory; a Kùzu database is a file and
    its write-ahead log beside it)."""
    if path.is_file():
        wal = path.with_name(path.name + ".wal")
        return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Kuzu:
    def build(self, where: Path, size: str) -> dict[str, Any]:
        import kuzu
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = list(texts(size))
        table = pa.table({"id": [r[0] for r in rows], "fts": [r[1] for r in rows]})
        pq.write_table(table, where / "texts.parquet")
        del rows, table
        t = time.perf_counter()
        db = kuzu.Database(str(where / "db"))
        conn = kuzu.Connection(db)
        conn.execute("CREATE NODE TABLE C(id STRING PRIMARY KEY, fts STRING)")
        conn.execute(f"COPY C FROM '{where / 'texts.parquet'}'")
        conn.execute("CHECKPOINT")
        loaded = time.perf_counter() - t
        before = du(where / "db")
        t = time.perf_counter()
        conn.execute("CALL CREATE_FTS_INDEX('C', 'ix', ['fts'], stemmer := 'porter')")
        conn.execute("CHECKPOINT")
        secs = time.perf_counter() - t
        (where / "texts.parquet").unlink()
        return {
            "build_s": round(secs, 1),
            "load_s": round(loaded, 1),
            "index_bytes": du(where / "db") - before,
            "note": "index_bytes: the database after CREATE_FTS_INDEX less before it",
        }

    def open(self, where: Path) -> None:
        import kuzu

        self.db = kuzu.Database(str(where / "db"), read_only=True)
        self.conn = kuzu.Connection(self.db)
        self.conn.execute("LOAD EXTENSION fts")

    def search(self, q: str, k: int) -> list[tuple[str, float]]:
        return self.search_terms(graph_mod.fts_query(q), k)

    def search_terms(self, q: str, k: int) -> list[tuple[str, float]]:
        if not q.strip():
            return []
        res = self.conn.execute(
            "CALL QUERY_FTS_INDEX('C', 'ix', $q, K := 0.9, B := 0.4, top := $top)"
            " RETURN node.id AS id, score ORDER BY score DESC, id LIMIT $lim",
            {"q": q, "top": k * 2, "lim": k},
        )
        out = []
        while res.has_next():
            i, s = res.get_next()
            out.append((i, float(s)))
        return out


class KuzuPruned(Kuzu):
    """Kùzu's FTS index of the same size, asked without the query's common words: a word
    any of whose terms is in more than `PRUNE` of the chunks is left out of the query (the
    rarest word stays), so the postings read are the short ones."""

    def build(self, where: Path, size: str) -> dict[str, Any]:
        return {"note": f"the index of kuzu-{size}"}

    def open(self, where: Path) -> None:
        size = where.name.rsplit("-", 1)[1]
        super().open(where.with_name(f"kuzu-{size}"))
        self.an = analyzer()
        path = WORK / f"df-{size}.json"
        if not path.exists():
            df: dict[str, int] = {}
            n = 0
            for _, text in texts(size):
                n += 1
                for t in set(self.an(text)):
                    df[t] = df.get(t, 0) + 1
            path.write_text(json.dumps({"n": n, "df": df}))
        got = json.loads(path.read_text())
        self.limit = PRUNE * got["n"]
        self.df = got["df"]

    def search(self, q: str, k: int) -> list[tuple[str, float]]:
        words = graph_mod.fts_query(q).split()
        common = [max((self.df.get(t, 0) for t in self.an.word(w)), default=0) for w in words]
        kept = [w for w, c in zip(words, common, strict=True) if c <= self.limit]
        if not kept and words:
            kept = [min(zip(common, words, strict=True))[1]]
        return super().search_terms(" ".join(kept), k)


class KuzuProduct:
    """`Graph.fts` on the folder itself: what `ok search` runs."""

    def build(self, where: Path, size: str) -> dict[str, Any]:
        return {"note": "the folder's own index (bench/scifact.py)"}

    def open(self, where: Path) -> None:
        from openkl.files.folder import Folder
        from openkl.sync import indexer

        self.ctx = indexer.open_graph(Folder(scifact.WORK / "scifact"))
        self.g = self.ctx.__enter__()

    def search(self, q: str, k: int) -> list[tuple[str, float]]:
        return self.g.fts("Chunk", q, k)


class Tantivy:
    def _schema(self) -> Any:
        import tantivy

        sb = tantivy.SchemaBuilder()
        sb.add_integer_field("n", fast=True)
        sb.add_text_field("body", tokenizer_name="ws", index_option="freq")
        return sb.build()

    def _register(self, index: Any) -> None:
        import tantivy

        index.register_tokenizer(
            "ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
        )

    def build(self, where: Path, size: str) -> dict[str, Any]:
        import tantivy

        an = analyzer()
        ids = []
        t = time.perf_counter()
        index = tantivy.Index(self._schema(), path=str(where))
        self._register(index)
        writer = index.writer(heap_size=256_000_000, num_threads=1)
        for n, (cid, text) in enumerate(texts(size)):
            ids.append(cid)
            writer.add_document(tantivy.Document(n=n, body=" ".join(an(text))))
        writer.commit()
        writer.wait_merging_threads()
        secs = time.perf_counter() - t
        (where / "ids.json").write_text(json.dumps(ids))
        return {"build_s": round(secs, 1), "index_bytes": du(where)}

    def open(self, where: Path) -> None:
        import tantivy

        self.an = analyzer()
        self.ids = json.loads((where / "ids.json").read_text())
        self.schema = self._schema()
        index = tantivy.Index.open(str(where))
        self._register(index)
        self.searcher = index.searcher()
        self.tq = tantivy.Query.term_query
        self.should = tantivy.Occur.Should
        self.boolean = tantivy.Query.boolean_query

    def search(self, q: str, k: int) -> list[tuple[str, float]]:
        terms = dict.fromkeys(self.an(graph_mod.fts_query(q)))
        if not terms:
            return []
        query = self.boolean(
            [(self.should, self.tq(self.schema, "body", t, index_option="freq")) for t in terms]
        )
        hits = self.searcher.search(query, limit=k, count=False).hits
        ns = self.searcher.fast_field_values("n", [a for _, a in hits])
        return [(self.ids[n], float(s)) for n, (s, _) in zip(ns, hits, strict=True)]


class KeywordIndex:
    """The product's keyword index, built and asked through its own module."""

    def build(self, where: Path, size: str) -> dict[str, Any]:
        from openkl.graph import keyword

        t = time.perf_counter()
        keyword.rebuild(where, "bench", (("Chunk", cid, "", text) for cid, text in texts(size)))
        return {"build_s": round(time.perf_counter() - t, 1), "index_bytes": du(where)}

    def open(self, where: Path) -> None:
        from openkl.graph import keyword

        self.where, self.keyword = where, keyword

    def search(self, q: str, k: int) -> list[tuple[str, float]]:
        return self.keyword.search(self.where, "bench", "Chunk", graph_mod.fts_query(q), k)


class Bm25s:
    def build(self, where: Path, size: str) -> dict[str, Any]:
        import bm25s

        an = analyzer()
        ids, toks = [], []
        t = time.perf_counter()
        for cid, text in texts(size):
            ids.append(cid)
            toks.append(an(text))
        analyzed = time.perf_counter() - t
        t = time.perf_counter()
        r = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
        r.index(toks, show_progress=False)
        secs = time.perf_counter() - t
        del toks
        r.save(str(where / "ix"))
        (where / "ids.json").write_text(json.dumps(ids))
        return {
            "build_s": round(secs + analyzed, 1),
            "index_bytes": du(where / "ix"),
            "note": "build_s includes the Python analysis",
        }

    def open(self, where: Path) -> None:
        import bm25s
        import numpy as np

        self.np = np
        self.an = analyzer()
        self.ids = json.loads((where / "ids.json").read_text())
        self.r = bm25s.BM25.load(str(where / "ix"))
        self.vocab = self.r.vocab_dict

    def search(self, q: str, k: int) -> list[tuple[str, float]]:
        an = self.an(graph_mod.fts_query(q))
        terms = [self.vocab[t] for t in dict.fromkeys(an) if t in self.vocab]
        if not terms:
            return []
        scores = self.r.get_scores(terms)
        np = self.np
        k = min(k, int((scores > 0).sum()))
        if not k:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.ids[i], float(scores[i])) for i in top]


class Sqlite:
    def build(self, where: Path, size: str) -> dict[str, Any]:
        an = analyzer()
        t = time.perf_counter()
        db = sqlite3.connect(where / "fts.db")
        db.execute(
            "CREATE VIRTUAL TABLE f USING fts5(body, tokenize = 'unicode61 remove_diacritics 0',"
            " detail = column)"
        )
        db.execute("CREATE TABLE ids(n INTEGER PRIMARY KEY, id TEXT)")
        batch: list[tuple[int, str, str]] = []
        for n, (cid, text) in enumerate(texts(size)):
            batch.append((n, cid, " ".join(an(text))))
            if len(batch) == 5000:
                self._flush(db, batch)
        self._flush(db, batch)
        db.execute("INSERT INTO f(f) VALUES ('optimize')")
        db.commit()
        db.close()
        return {"build_s": round(time.perf_counter() - t, 1), "index_bytes": du(where)}

    def _flush(self, db: sqlite3.Connection, batch: list[tuple[int, str, str]]) -> None:
        db.executemany("INSERT INTO f(rowid, body) VALUES (?, ?)", [(n, b) for n, _, b in batch])
        db.executemany("INSERT INTO ids VALUES (?, ?)", [(n, i) for n, i, _ in batch])
        batch.clear()

    def open(self, where: Path) -> None:
        self.an = analyzer()
        self.db = sqlite3.connect(where / "fts.db")
        self.ids = dict(self.db.execute("SELECT n, id FROM ids"))

    def search(self, q: str, k: int) -> list[tuple[str, float]]:
        terms = dict.fromkeys(self.an(graph_mod.fts_query(q)))
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        rows = self.db.execute(
            "SELECT rowid, bm25(f) FROM f WHERE f MATCH ? ORDER BY rank LIMIT ?", (match, k)
        ).fetchall()
        return [(self.ids[n], -s) for n, s in rows]


ENGINES: dict[str, Any] = {
    "kuzu-product": KuzuProduct,
    "kuzu": Kuzu,
    "kuzu-pruned": KuzuPruned,
    "tantivy": Tantivy,
    "keyword-index": KeywordIndex,
    "bm25s": Bm25s,
    "sqlite": Sqlite,
}


# -- the children ------------------------------------------------------------------------
def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_build(engine: str, size: str) -> dict[str, Any]:
    where = WORK / f"{engine}-{size}"
    stats = where / "build.json"
    if stats.exists():
        return {**json.loads(stats.read_text()), "cached": True}
    part = where.with_name(where.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    out = ENGINES[engine]().build(part, size)
    out["peak_rss_mb"] = round(peak_mb())
    if part.exists():
        part.rename(where)
    stats.write_text(json.dumps(out))
    return out


def child_query(engine: str, size: str) -> dict[str, Any]:
    base = rss_mb()
    eng = ENGINES[engine]()
    eng.open(WORK / f"{engine}-{size}")
    qs = set_queries(size)
    out: dict[str, Any] = {}
    runs = {qid: eng.search(q, 500) for qid, q in qs}  # the warm-up, kept for the scores
    for k in KS:
        times = []
        for _, q in qs:
            t = time.perf_counter()
            eng.search(q, k)
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        out[f"k{k}"] = {
            "p50_ms": round(statistics.median(times), 2),
            "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
            "queries": len(times),
        }
    out["rss_added_mb"] = round(rss_mb() - base)
    if size in ("10k", "cjk"):
        (WORK / f"runs-{engine}-{size}.json").write_text(json.dumps(runs))
    return out


# -- the scores --------------------------------------------------------------------------
def _eval() -> Any:
    spec = importlib.util.spec_from_file_location("eval_run", scifact.DATA.parent / "eval_run.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def quality(engine: str, size: str) -> dict[str, Any]:
    """nDCG@10 and recall@100 of the engine's candidates, through `fuse` and
    `first_per_doc` as `ok search --mode fts -k 100`."""
    ev = _eval()
    runs = json.loads((WORK / f"runs-{engine}-{size}.json").read_text())
    if size == "cjk":
        qrels = ev.load_qrels(str(CJK / "qrels.tsv"))
        name = {i: i for i, _ in texts("cjk")}
    else:
        qrels = ev.load_qrels(str(scifact.qrels_path("test")))
        name = chunks()["name"]
    picked = {}
    for qid, hits in runs.items():
        fused = fuse({"fts": [(("Chunk", i), s) for i, s in hits]}, "fts", Fusion())
        picked[qid] = [name[h["id"].split("#", 1)[0]] for h in first_per_doc(fused, 1, 100)]
    nd = [ev.ndcg_at(picked.get(q, []), rels) for q, rels in qrels.items()]
    rc = [len(set(picked.get(q, [])[:100]) & set(rels)) / len(rels) for q, rels in qrels.items()]
    return {"ndcg@10": round(sum(nd) / len(nd), 4), "recall@100": round(sum(rc) / len(rc), 4)}


def hybrid(engines: list[str]) -> list[dict[str, Any]]:
    """nDCG@10 and recall@100 of each engine's 10k candidates fused with the folder's
    exact-cosine vector list (`bench/ranking.py`'s), as `ok search --mode hybrid -k 100`."""
    import ranking

    from openkl.files.folder import Folder

    folder = Folder(scifact.WORK / "scifact")
    data = ranking.load_folder_data(folder)
    claims = scifact.load_queries("test")
    qvecs = ranking.query_vectors(folder, "test", claims)
    vec = {
        qid: [(("Chunk", i), s) for i, s in ranking.vector_top(data["vecs"], qv, data["ids"], 500)]
        for (qid, _), qv in zip(claims, qvecs, strict=True)
    }
    ev = _eval()
    qrels = ev.load_qrels(str(scifact.qrels_path("test")))
    out = []
    for engine in engines:
        runs = json.loads((WORK / f"runs-{engine}-10k.json").read_text())
        picked = {}
        for qid, hits in runs.items():
            lists = {"fts": [(("Chunk", i), s) for i, s in hits], "vector": vec[qid]}
            fused = fuse(lists, "hybrid", Fusion())
            picked[qid] = [
                data["name"][h["id"].split("#", 1)[0]] for h in first_per_doc(fused, 1, 100)
            ]
        nd = [ev.ndcg_at(picked.get(q, []), rels) for q, rels in qrels.items()]
        rc = [len(set(picked.get(q, [])) & set(rels)) / len(rels) for q, rels in qrels.items()]
        out.append(
            {
                "engine": engine,
                "mode": "hybrid",
                "ndcg@10": round(sum(nd) / len(nd), 4),
                "recall@100": round(sum(rc) / len(rc), 4),
            }
        )
    return out


def overlap(engine: str, ref: str, size: str) -> float:
    """The mean share of the reference's first 10 candidates the engine also has first."""
    a = json.loads((WORK / f"runs-{engine}-{size}.json").read_text())
    b = json.loads((WORK / f"runs-{ref}-{size}.json").read_text())
    shares = [
        len({i for i, _ in a[q][:10]} & {i for i, _ in b[q][:10]}) / max(1, len(b[q][:10]))
        for q in b
        if b[q]
    ]
    return round(sum(shares) / len(shares), 3)


def spawn(phase: str, engine: str, size: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", phase, engine, size]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        return {"error": res.stderr.strip().splitlines()[-1] if res.stderr.strip() else "failed"}
    return json.loads(res.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="cjk,10k,100k,1m")
    ap.add_argument("--engines", default="kuzu-product,kuzu,tantivy,bm25s,sqlite")
    ap.add_argument("--save", action="store_true", help="write bench/results/<script>-<commit>")
    ap.add_argument("--hybrid", action="store_true", help="score the 10k runs in hybrid mode")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hybrid:
        report = provenance.stamp()
        report["rows"] = hybrid(args.engines.split(","))
        for row in report["rows"]:
            print(json.dumps(row), flush=True)
        if args.save:
            provenance.save(report, "hybrid")
        return
    if args.child:
        phase, engine, size = args.child
        fn = child_build if phase == "build" else child_query
        print(json.dumps(fn(engine, size)))
        return
    analyzer()  # the stop words, once, before the children need them
    report = provenance.stamp()
    report["rows"] = []
    report["skipped"] = []
    for size in args.sizes.split(","):
        for engine in args.engines.split(","):
            if engine == "kuzu-product" and size != "10k":
                continue
            if (engine, size) in SKIP:
                report["skipped"].append(
                    {"engine": engine, "size": size, "why": SKIP[engine, size]}
                )
                continue
            row: dict[str, Any] = {"engine": engine, "size": size, "load_1min": 0.0}
            row["build"] = spawn("build", engine, size)
            row["load_1min"] = round(os.getloadavg()[0], 2)
            if "error" not in row["build"]:
                row["query"] = spawn("query", engine, size)
                if size in ("10k", "cjk") and "error" not in row["query"]:
                    row["quality"] = quality(engine, size)
            report["rows"].append(row)
            print(json.dumps(row), flush=True)
            if args.save:  # a row at a time: the 1M rows come last and take long
                provenance.save(report)
    for row in report["rows"]:
        if "quality" in row and (WORK / f"runs-kuzu-{row['size']}.json").exists():
            row["top10_overlap_with_kuzu"] = overlap(row["engine"], "kuzu", row["size"])
    if args.save:
        provenance.save(report)


if __name__ == "__main__":
    main()
