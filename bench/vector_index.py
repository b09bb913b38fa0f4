"""Exact cosine scan vs Kùzu's HNSW index on the same chunks: build time, latency, recall@10.

    uv run python bench/vector_index.py [FOLDER] [--queries 100] [--warmup 10] [--save]

(default FOLDER: the SciFact folder of bench/scifact.py). Works on a copy of the folder's
graph, so the folder itself is untouched. The exact side is `Graph.vector_scan`, the scan
`ok search` runs below `search.hnsw_min_chunks`; the HNSW side is `Graph.vector` once
`fit_vector_index` has built the index, what `ok search` runs from that size (current
chunks only, an exact scan when superseded ones crowd them out). The index is built first (the exact scan does not use it); then both get
the same warm-up (the first `--warmup` queries, untimed) and answer the same queries, each
query timed on both sides back to back, in alternating order, so that load from elsewhere
on the machine falls on both alike. Both report p50, p95 and mean per query.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import provenance  # noqa: E402

from openkl.graph import DB_FILE, Graph  # noqa: E402
from openkl.text.embeddings import Embedder  # noqa: E402

K = 10


def latency(ms: list[float]) -> dict[str, float]:
    """p50, p95 and mean of per-query milliseconds (p95 by the nearest-rank method)."""
    s = sorted(ms)
    return {
        "p50": round(statistics.median(s), 2),
        "p95": round(s[max(0, -(-95 * len(s) // 100) - 1)], 2),
        "mean": round(statistics.mean(s), 2),
    }


Search = Callable[[list[float]], list[str]]


def timed(sides: dict[str, Search], qv: list[list[float]], warmup: int) -> dict[str, Any]:
    """{side: (results, ms per query)}: the warm-up on every side, then each query on every
    side in turn, the order of the sides reversed on every other query."""
    for v in qv[:warmup]:
        for run in sides.values():
            run(v)
    out: dict[str, tuple[list[list[str]], list[float]]] = {n: ([], []) for n in sides}
    for j, v in enumerate(qv):
        for name in list(sides)[:: 1 if j % 2 == 0 else -1]:
            t = time.perf_counter()
            got = sides[name](v)
            out[name][1].append((time.perf_counter() - t) * 1000)
            out[name][0].append(got)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", type=Path, default=HERE / ".work" / "scifact")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--save", action="store_true", help="write bench/results/<script>-<commit>")
    args = ap.parse_args()
    report: dict[str, Any] = provenance.stamp()
    tmp = Path(tempfile.mkdtemp(prefix="ok-vec-"))
    try:
        shutil.copy(args.folder / ".ok/kuzu" / DB_FILE, tmp / DB_FILE)
        qfile = HERE.parent.parent / "shared/bench/scifact/queries.jsonl"
        lines = qfile.read_text().splitlines()[: args.queries]
        emb = Embedder()
        qv = [emb.embed_query(json.loads(x)["text"]).tolist() for x in lines]
        with Graph.open(tmp, write=True, check=False, probe=False) as g:
            # a folder past search.hnsw_min_chunks has one: dropped, to build it anew once
            # the database is opened again (Kùzu cannot make one after a drop before that)
            g.fit_vector_index(0)
        with Graph.open(tmp, write=True, check=False, probe=False) as g:
            n = g.query("MATCH (c:Chunk) RETURN count(c) AS n")[0]["n"]
            current = g.query("MATCH (c:Chunk) WHERE c.current RETURN count(c) AS n")[0]["n"]

            def exact(v: list[float]) -> list[str]:
                return [i for i, _ in g.vector_scan("Chunk", v, K)]

            def hnsw(v: list[float]) -> list[str]:
                return [i for i, _ in g.vector("Chunk", v, K)]

            t = time.perf_counter()
            if not g.fit_vector_index(1):
                sys.exit("the folder has no chunks to index")
            build_s = time.perf_counter() - t
            res = timed({"exact": exact, "hnsw": hnsw}, qv, args.warmup)
            (truth, exact_ms), (got, hnsw_ms) = res["exact"], res["hnsw"]
        recall = [len(set(a) & set(b)) / K for a, b in zip(got, truth, strict=True)]
    finally:
        shutil.rmtree(tmp)
    report.update(
        {
            "chunks": n,
            "current_chunks": current,
            "queries": len(qv),
            "warmup_queries": min(args.warmup, len(qv)),
            "k": K,
            "exact_scan_ms": latency(exact_ms),
            "hnsw_query_ms": latency(hnsw_ms),
            "hnsw_build_s": round(build_s, 1),
            "hnsw_recall@10_vs_exact": round(statistics.mean(recall), 3),
        }
    )
    print(json.dumps(report, indent=2))
    if args.save:
        provenance.save(report)


if __name__ == "__main__":
    main()
