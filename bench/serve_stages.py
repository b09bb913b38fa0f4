"""Where the time of one warm search goes in `ok serve`: each stage timed on its own, in
this process, with the graph kept open and the model loaded as the server keeps them.

    uv run python bench/serve_stages.py --root bench/.work/scifact [--calls 100]

Stages (p50/p95 in ms over `--calls` SciFact test claims, k=10, hybrid): opening a
connection on the resident graph (with its schema check), embedding the query, BM25 and
the vector scan per table, the hidden-notes query, fusion, reading the hits' rows, making
the cite objects, and the whole `ops.search` call as a route makes it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from mcp_latency import queries, stats  # noqa: E402

from openkl import ops  # noqa: E402
from openkl.files.folder import iso, open_folder, utcnow  # noqa: E402
from openkl.graph import Graph  # noqa: E402
from openkl.graph import search as s  # noqa: E402
from openkl.graph.indexing import embedder, open_graph  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--calls", type=int, default=100)
    args = ap.parse_args()
    folder = open_folder(args.root)
    qs = queries(args.calls)
    times: dict[str, list[float]] = {}
    clock = [0.0]

    def lap(name: str) -> None:
        now = time.perf_counter()
        times.setdefault(name, []).append((now - clock[0]) * 1000)
        clock[0] = now

    def one(q: str) -> None:
        clock[0] = time.perf_counter()
        with open_graph(folder) as g:
            lap("open")
            qvec = emb.embed_query(q)
            lap("embed")
            fq = s._fts_query(q)
            lists: dict[str, list[Any]] = {"fts": [], "vector": []}
            for table in ("Chunk", "MemoryNote"):
                lists["fts"] += [((table, i), sc) for i, sc in g.fts(table, fq, 50)]
                lap(f"fts.{table}")
                lists["vector"] += [((table, i), sc) for i, sc in g.vector(table, qvec, 50)]
                lap(f"vector.{table}")
            g.hidden_notes(iso(utcnow()), True)
            lap("hidden_notes")
            hits = s.fuse(lists, "hybrid", fusion)
            lap("fuse")
            picked = s.first_per_doc(hits, 1, 10)
            rows = g.chunks_by_id([h["id"] for h in picked if h["table"] == "Chunk"])
            lap("chunks_by_id")
            [s.chunk_cite(folder, r, {}) for r in rows.values()]
            lap("cites")
        lap("close")
        ops.search(ops.local(folder), ops.SearchRequest(q, k=10))
        lap("ops.search")

    with Graph.resident(folder.kuzu_dir, buffer_pool_mb=folder.setting("graph.buffer_pool_mb")):
        emb = embedder(folder)
        emb.embed_query("warm up")
        for q in qs[:5]:
            ops.search(ops.local(folder), ops.SearchRequest(q, k=10))
        fusion = s.Fusion.from_folder(folder)
        for q in qs:
            one(q)
    print(json.dumps({k: stats(v) for k, v in times.items()}, indent=1))


if __name__ == "__main__":
    main()
