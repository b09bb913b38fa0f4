"""Tune hybrid fusion on the SciFact *train* split (never on test).

    uv run python bench/fusion_tune.py [--split train|test] [--queries N] [--save]

Collects each query's BM25 and vector candidate lists once with `search.candidates`, the
function `ok search` gets them from (same candidate pool as a 10-hit search), then ranks
them for each fusion setting `ok search` accepts (`search.fusion`: weighted sum of min-max
normalized scores with `search.vector_weight`, or RRF with `search.rrf_k`) with
`search.fuse` and `search.first_per_doc`, the functions `ok search` ranks with. Before
scoring, the default setting's ranking is checked against `search()` itself on the first
queries. Prints nDCG@10 per setting, best first. Needs the folder built by bench/scifact.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import provenance  # noqa: E402

from openkl.files.folder import Folder  # noqa: E402
from openkl.graph.search import Fusion, candidates, first_per_doc, fuse, pool_size, search  # noqa: E402
from openkl.sync import indexer  # noqa: E402

DATA = Path(os.environ.get("OK_BENCH_DATA", HERE.parent.parent / "shared" / "bench" / "scifact"))
WORK = Path(os.environ.get("OK_BENCH_WORK", HERE / ".work"))
K = 10
CHECKED = 20  # queries whose ranking is compared with search() itself
SETTINGS = [Fusion("wsum", vector_weight=w) for w in (0.3, 0.4, 0.5, 0.6, 0.7)] + [
    Fusion("rrf", rrf_k=k) for k in (10, 30, 60)
]


def _eval_module() -> Any:
    spec = importlib.util.spec_from_file_location("eval_run", DATA.parent / "eval_run.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def ranked(lists: dict, fusion: Fusion, names: dict[str, str]) -> list[str]:
    """The SciFact ids of the top K documents, as `search(k=K, per_doc=1)` ranks them."""
    hits = first_per_doc(fuse(lists, "hybrid", fusion), 1, K)
    return [names[h["id"].split("#", 1)[0]] for h in hits]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="train", choices=["train", "test"])
    ap.add_argument("--queries", type=int, default=0, help="only the first N (0: all)")
    ap.add_argument("--save", action="store_true", help="write bench/results/<script>-<commit>")
    args = ap.parse_args()
    report: dict[str, Any] = provenance.stamp()
    ev = _eval_module()
    qrels = ev.load_qrels(DATA / ("qrels_train.tsv" if args.split == "train" else "qrels.tsv"))
    name = "queries_train.jsonl" if args.split == "train" else "queries.jsonl"
    queries = [json.loads(x) for x in (DATA / name).read_text().splitlines()]
    queries = [(str(q["_id"]), q["text"]) for q in queries if str(q["_id"]) in qrels]
    if args.queries:
        queries = queries[: args.queries]
    folder = Folder(WORK / "scifact")
    emb = indexer.embedder(folder)
    n_cand = pool_size(K)
    t0 = time.perf_counter()
    with indexer.open_graph(folder) as g:
        names = {
            r["id"]: Path(r["path"]).name.removesuffix(".ok.md")
            for r in g.query("MATCH (d:Doc) RETURN d.id AS id, d.path AS path")
        }
        cands = []
        for qid, text in queries:
            lists = candidates(g, text, emb.embed_query(text), "hybrid", "store", n_cand)
            cands.append((qid, lists))
        for (qid, text), (_, lists) in zip(queries[:CHECKED], cands, strict=False):
            for fusion in (Fusion(), Fusion("rrf", rrf_k=60)):
                hits = search(folder, g, text, k=K, scope="store", embedder=emb, fusion=fusion)
                want = [Path(h["path"]).name.removesuffix(".ok.md") for h in hits]
                got = ranked(lists, fusion, names)
                if got != want:
                    sys.exit(f"query {qid}: fused ranking {got} differs from search() {want}")
    collect_s = time.perf_counter() - t0
    results = []
    for fusion in SETTINGS:
        nd = [ev.ndcg_at(ranked(lists, fusion, names), qrels[qid]) for qid, lists in cands]
        results.append(
            {
                "fusion": fusion.method,
                "vector_weight": fusion.vector_weight if fusion.method == "wsum" else None,
                "rrf_k": fusion.rrf_k if fusion.method == "rrf" else None,
                "ndcg@10": round(sum(nd) / len(nd), 4),
            }
        )
    results.sort(key=lambda r: -r["ndcg@10"])
    report.update(
        {
            "split": args.split,
            "queries": len(cands),
            "candidates_per_signal": n_cand,
            "checked_against_search": min(CHECKED, len(cands)),
            "collect_seconds": round(collect_s, 1),
            "settings": results,
        }
    )
    print(json.dumps(report, indent=2))
    if args.save:
        provenance.save(report)


if __name__ == "__main__":
    main()
