"""Tune hybrid fusion on the SciFact *train* split (never on test).

    uv run python bench/fusion_tune.py

Collects each query's BM25 and vector candidate lists once (through openkl.graph, as
`ok search` does), then scores fusion variants offline: weighted sum of normalized scores
at chunk or document level, with min-max or max normalization, and RRF. Prints nDCG@10 per
variant, best first. Needs the folder built by bench/scifact.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from openkl import indexer  # noqa: E402
from openkl.folder import Folder  # noqa: E402
from openkl.graph import Graph  # noqa: E402
from openkl.search import _fts_query  # noqa: E402

DATA = Path(os.environ.get("OK_BENCH_DATA", HERE.parent.parent / "shared" / "bench" / "scifact"))
WORK = Path(os.environ.get("OK_BENCH_WORK", HERE / ".work"))
N_CAND = 100


def _eval_module():
    spec = importlib.util.spec_from_file_location("eval_run", DATA.parent / "eval_run.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def collect(split: str = "train") -> list[dict]:
    cache = WORK / f"fusion-cands-{split}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    folder = Folder(WORK / "scifact")
    emb = indexer.embedder(folder)
    name = "queries_train.jsonl" if split == "train" else "queries.jsonl"
    out = []
    with Graph.open(folder.kuzu_dir, write=False, check=False) as g:
        for line in (DATA / name).read_text().splitlines():
            q = json.loads(line)
            out.append(
                {
                    "qid": str(q["_id"]),
                    "fts": g.fts("Chunk", _fts_query(q["text"]), N_CAND),
                    "vec": g.vector("Chunk", emb.embed_query(q["text"]), N_CAND),
                }
            )
    cache.write_text(json.dumps(out))
    return out


def doc_of(chunk_id: str, paths: dict[str, str]) -> str:
    return paths[chunk_id.split("#")[0]]


def norm(items: list, how: str) -> dict[str, float]:
    if not items:
        return {}
    scores = [s for _, s in items]
    hi, lo = max(scores), min(scores)
    if how == "max":
        return {i: s / hi if hi else 0.0 for i, s in items}
    return {i: (s - lo) / (hi - lo) if hi > lo else 1.0 for i, s in items}


def fuse(c: dict, method: str, w: float, level: str, how: str, paths: dict[str, str]) -> list[str]:
    lists = {"fts": c["fts"], "vec": c["vec"]}
    if level == "doc":
        agg = {}
        for name, items in lists.items():
            best: dict[str, float] = {}
            for cid, s in items:
                d = doc_of(cid, paths)
                best[d] = max(best.get(d, float("-inf")), s)
            agg[name] = sorted(best.items(), key=lambda x: -x[1])
        lists = agg
    score: dict[str, float] = {}
    if method == "rrf":
        for items in lists.values():
            for rank, (i, _) in enumerate(items, 1):
                score[i] = score.get(i, 0.0) + 1.0 / (w + rank)
    else:
        nf, nv = norm(lists["fts"], how), norm(lists["vec"], how)
        for i in set(nf) | set(nv):
            score[i] = w * nv.get(i, 0.0) + (1 - w) * nf.get(i, 0.0)
    ranked = sorted(score, key=lambda i: (-score[i], i))
    out, seen = [], set()
    for i in ranked:
        d = i if level == "doc" else doc_of(i, paths)
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def main() -> None:
    ev = _eval_module()
    split = sys.argv[1] if len(sys.argv) > 1 else "train"
    qrels = ev.load_qrels(DATA / ("qrels_train.tsv" if split == "train" else "qrels.tsv"))
    cands = collect(split)
    folder = Folder(WORK / "scifact")
    with Graph.open(folder.kuzu_dir, write=False, check=False) as g:
        paths = {
            r["id"]: Path(r["path"]).name.removesuffix(".ok.md")
            for r in g.query("MATCH (d:Doc) RETURN d.id AS id, d.path AS path")
        }
    variants = []
    for level in ("chunk", "doc"):
        for how in ("minmax", "max"):
            for w in (0.3, 0.4, 0.5, 0.6, 0.7):
                variants.append(("wsum", w, level, how))
        for k in (10, 30, 60):
            variants.append(("rrf", k, level, "-"))
    results = []
    for method, w, level, how in variants:
        nd = []
        for c in cands:
            if c["qid"] in qrels:
                nd.append(ev.ndcg_at(fuse(c, method, w, level, how, paths), qrels[c["qid"]]))
        results.append(
            {
                "method": method,
                "param": w,
                "level": level,
                "norm": how,
                "ndcg@10": round(sum(nd) / len(qrels), 4),
            }
        )
    for r in sorted(results, key=lambda r: -r["ndcg@10"]):
        print(json.dumps(r))


if __name__ == "__main__":
    main()
