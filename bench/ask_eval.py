"""Extractive `ok ask` on SciFact claims: is the first citation from a relevant abstract?

    .venv/bin/python bench/ask_eval.py [--n 100] [--split test|train] [--weights SIM,LEX,RANK]

Uses the ~10k-chunk SciFact folder of bench/mcp_latency.py (built on first use). For the
first `--n` claims of the split it runs the same code as `ok ask --no-llm` and scores:

- first_cite_relevant: share of answers whose first citation [1] comes from a document the
  qrels mark relevant (the number we report);
- any_cite_relevant: share with at least one relevant citation;
- top_hit_relevant: share whose top search hit is relevant (the retrieval baseline: P@1);
- insufficient: share of answers that said the folder does not hold enough.

`--weights` overrides the sentence-score weights (similarity, word overlap, passage rank);
tune them on `--split train`, report on test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from mcp_latency import DATA, build_folder  # noqa: E402

from openkl.knowledge import ask as ask_mod  # noqa: E402
from openkl.sync import indexer  # noqa: E402


def corpus_id(path: str) -> str:
    name = Path(path).name.removesuffix(".ok.md")
    return name.removesuffix(".txt")


def load(split: str, n: int) -> tuple[list[tuple[str, str]], dict[str, set[str]]]:
    qfile = "queries.jsonl" if split == "test" else "queries_train.jsonl"
    rfile = "qrels.tsv" if split == "test" else "qrels_train.tsv"
    rel: dict[str, set[str]] = defaultdict(set)
    with open(DATA / rfile) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[0] != "query-id" and int(parts[-1]) > 0:
                rel[parts[0]].add(parts[1])
    qs = []
    with open(DATA / qfile) as f:
        for line in f:
            q = json.loads(line)
            if str(q["_id"]) in rel:
                qs.append((str(q["_id"]), q["text"]))
    return qs[:n], rel


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--split", default="test", choices=["test", "train"])
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--weights", default=None, help="SIM,LEX,RANK")
    ap.add_argument(
        "--tune",
        action="store_true",
        help="grid-search weights and passages used (run with --split train)",
    )
    args = ap.parse_args()
    if args.tune:
        tune(args)
        return
    if args.weights:
        ask_mod.W_SIM, ask_mod.W_LEX, ask_mod.W_RANK = (float(x) for x in args.weights.split(","))
    folder = build_folder()
    emb = indexer.embedder(folder)
    emb.embed_query("warm up")
    qs, rel = load(args.split, args.n)
    first = anyrel = top = insuff = 0
    times = []
    with indexer.open_graph(folder) as g:
        for qid, text in qs:
            t = time.perf_counter()
            res = ask_mod.ask(folder, g, text, k=args.k, scope="store", embedder=emb)
            times.append((time.perf_counter() - t) * 1000)
            docs = [corpus_id(c["path"]) for c in res["citations"]]
            good = rel[qid]
            first += bool(docs) and docs[0] in good
            anyrel += any(d in good for d in docs)
            insuff += res["insufficient"]
            hits = ask_mod.search(folder, g, text, k=1, scope="store", embedder=emb)
            top += bool(hits) and corpus_id(hits[0]["path"]) in good
    n = len(qs)
    print(
        json.dumps(
            {
                "split": args.split,
                "claims": n,
                "k": args.k,
                "weights": [ask_mod.W_SIM, ask_mod.W_LEX, ask_mod.W_RANK],
                "first_cite_relevant": round(first / n, 3),
                "any_cite_relevant": round(anyrel / n, 3),
                "top_hit_relevant": round(top / n, 3),
                "insufficient": round(insuff / n, 3),
                "ask_ms_p50": round(statistics.median(times), 1),
            }
        )
    )


def tune(args: argparse.Namespace) -> None:
    """Score every sentence of every retrieved passage once, then try the settings offline."""
    import itertools

    folder = build_folder()
    emb = indexer.embedder(folder)
    qs, rel = load(args.split, args.n)
    per_q = []
    with indexer.open_graph(folder) as g:
        for qid, text in qs:
            hits = ask_mod.search(folder, g, text, k=args.k, scope="store", embedder=emb)
            if not hits:
                continue
            cands = ask_mod.candidates(
                text, hits, emb.embed_query(text), emb, max_hits=args.k, max_cands=10**6
            )
            per_q.append([(c, corpus_id(hits[c.hit]["path"]) in rel[qid]) for c in cands])
    grid = [x / 10 for x in range(0, 11)]
    rows = []
    for ws, wl, wr in itertools.product(grid, grid, grid):
        if abs(ws + wl + wr - 1.0) > 1e-9:
            continue
        for max_hits in (1, 3, 5, 8):
            good = 0
            for cands in per_q:
                pool = [(c, r) for c, r in cands if c.hit < max_hits]
                best = max(pool, key=lambda cr: ws * cr[0].sim + wl * cr[0].lex + wr * cr[0].prior)
                good += best[1]
            rows.append((good / len(per_q), ws, wl, wr, max_hits))
    rows.sort(reverse=True)
    now = (ask_mod.W_SIM, ask_mod.W_LEX, ask_mod.W_RANK, ask_mod.SENTENCE_HITS)
    for r in rows:
        if r[1:] == now or r[4] == 1 and r[1:4] == (1.0, 0.0, 0.0):
            label = "current" if r[1:] == now else "top passage only (retrieval P@1)"
            print(json.dumps({label: round(r[0], 3), "weights": r[1:4], "max_hits": r[4]}))
    for r in rows[:10]:
        print(
            json.dumps({"first_cite_relevant": round(r[0], 3), "weights": r[1:4], "max_hits": r[4]})
        )


if __name__ == "__main__":
    main()
