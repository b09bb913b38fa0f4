"""Retrieval quality on SciFact through the same code path as `ok search`.

    uv run python bench/scifact.py [--split test|train] [--modes fts,vector,hybrid] [--save]

Builds (once) a knowledge folder whose documents are the SciFact corpus, one file per
`_id`, runs every query of the split with each mode, writes a run file per mode and scores
it with ../shared/bench/eval_run.py. The embedding cache makes re-runs cheap.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import provenance  # noqa: E402

from openkl.collect.store import ingest_paths  # noqa: E402
from openkl.errors import IndexMismatch  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402
from openkl.graph.search import Fusion, search  # noqa: E402
from openkl.sync import indexer  # noqa: E402

DATA = Path(os.environ.get("OK_BENCH_DATA", HERE.parent.parent / "shared" / "bench" / "scifact"))
WORK = Path(os.environ.get("OK_BENCH_WORK", HERE / ".work"))


def write_corpus() -> Path:
    """The corpus as one file per `_id` (`title\n\ntext\n`), written once."""
    corpus_dir = WORK / "scifact-corpus" / "corpus"
    if not corpus_dir.exists():
        part = corpus_dir.with_name("corpus.part")
        part.mkdir(parents=True, exist_ok=True)
        with open(DATA / "corpus.jsonl") as f:
            for line in f:
                d = json.loads(line)
                (part / f"{d['_id']}.txt").write_text(
                    f"{d.get('title', '').strip()}\n\n{d.get('text', '').strip()}\n"
                )
        part.rename(corpus_dir)  # a cut-off run leaves no half corpus behind
    return corpus_dir


def build_folder() -> Folder:
    root = WORK / "scifact"
    corpus_dir = write_corpus()
    folder = Folder.init(root)
    t = time.time()
    with folder.write_lock("bench"):
        rep = ingest_paths(folder, [str(corpus_dir)])
        if rep.added:
            print(
                f"ingested {len(rep.added)} docs, {rep.chunks} chunks in {time.time() - t:.1f}s",
                file=sys.stderr,
            )
        try:
            with indexer.open_graph(folder):
                pass
        except IndexMismatch:
            t = time.time()
            indexer.sync(folder, rebuild=True)  # schema changed: rebuild (embeddings are cached)
            print(f"rebuilt the index in {time.time() - t:.1f}s", file=sys.stderr)
    return folder


def load_queries(split: str) -> list[tuple[str, str]]:
    name = "queries.jsonl" if split == "test" else "queries_train.jsonl"
    out = []
    with open(DATA / name) as f:
        for line in f:
            q = json.loads(line)
            out.append((str(q["_id"]), q["text"]))
    return out


def qrels_path(split: str) -> Path:
    return DATA / ("qrels.tsv" if split == "test" else "qrels_train.tsv")


def run(folder: Folder, split: str, mode: str, fusion: Fusion | None = None, k: int = 100) -> dict:
    queries = load_queries(split)
    emb = indexer.embedder(folder)
    out_path = WORK / f"run-{split}-{mode}.jsonl"
    t = time.time()
    with indexer.open_graph(folder) as g, open(out_path, "w") as out:
        for qid, text in queries:
            hits = search(
                folder, g, text, k=k, mode=mode, scope="store", embedder=emb, fusion=fusion
            )
            ids = [Path(h["path"]).name.removesuffix(".ok.md") for h in hits]
            out.write(json.dumps({"query_id": qid, "doc_ids": ids}) + "\n")
    elapsed = time.time() - t
    res = subprocess.run(
        [sys.executable, str(DATA.parent / "eval_run.py"), str(qrels_path(split)), str(out_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    scores = json.loads(res.stdout)
    scores.update({"mode": mode, "split": split, "seconds": round(elapsed, 1)})
    return scores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--split", default="test", choices=["test", "train"])
    ap.add_argument("--modes", default="fts,vector,hybrid")
    ap.add_argument("--tune", action="store_true", help="grid-search fusion on the train split")
    ap.add_argument("--save", action="store_true", help="write bench/results/<script>-<commit>")
    args = ap.parse_args()
    folder = build_folder()
    if args.tune:
        for method, weights in (("wsum", [0.3, 0.4, 0.5, 0.6, 0.7]), ("rrf", [0.0])):
            for w in weights:
                s = run(folder, "train", "hybrid", Fusion(method=method, vector_weight=w))
                print(json.dumps({"fusion": method, "vector_weight": w, **s}))
        return
    report = provenance.stamp()
    with indexer.open_graph(folder) as g:
        report["chunks"] = g.query("MATCH (c:Chunk) WHERE c.current RETURN count(c) AS n")[0]["n"]
    report["runs"] = []
    for mode in args.modes.split(","):
        scores = run(folder, args.split, mode)
        report["runs"].append(scores)
        print(json.dumps(scores))
    if args.save:
        provenance.save(report)


if __name__ == "__main__":
    main()
