"""Retrieval quality on Chinese, Japanese and Korean text, before and after bigrams.

    uv run python bench/cjk.py [--modes fts,vector,hybrid] [--save]

The test set is bench/data/cjk (32 short documents, 43 queries with graded judgments, see
its README). For each way of preparing the FTS text and the query, "spaces" (whitespace
collapsed only, as before schema version 5), "bigrams" (CJK runs as overlapping character
pairs in both) and "bigrams+unigrams" (the current `fts_text` and `fts_query`: the index
also holds each character alone, the query asks for pairs), it builds a knowledge
folder in a temporary directory through the same code as `ok store ingest`, runs every query
through the code of `ok search` in each mode, and scores the runs with the functions of
../shared/bench/eval_run.py: nDCG@10, Recall@10, Recall@100 and MRR@10, overall, per
language, and for the one-character queries apart from the longer ones. The vector mode does not read the FTS text, so its numbers are the same for all.
Two references come with them: `same_language_chance`, the score of ranking the query's own
language first in random order, and `unknown_tokens`, the share of each language's tokens
the embedding model's tokenizer maps to [UNK].
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import provenance  # noqa: E402

from openkl import graph  # noqa: E402
from openkl.collect.store import ingest_paths  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402
from openkl.graph.search import search  # noqa: E402
from openkl.sync import indexer  # noqa: E402

DATA = HERE / "data" / "cjk"
EVAL = Path(
    os.environ.get("OK_BENCH_EVAL", HERE.parent.parent / "shared" / "bench" / "eval_run.py")
)
LANGS = {"qz": "zh", "qj": "ja", "qk": "ko"}


def spaces_only(text: str) -> str:
    """The FTS text before bigrams: whitespace collapsed, nothing else."""
    return " ".join(text.split())


# name: (what the index holds, what the query asks)
VARIANTS: dict[str, tuple[Callable[[str], str], Callable[[str], str]]] = {
    "spaces": (spaces_only, spaces_only),
    "bigrams": (graph.fts_query, graph.fts_query),
    "bigrams+unigrams": (graph.fts_text, graph.fts_query),
}


def _eval_module() -> Any:
    spec = importlib.util.spec_from_file_location("eval_run", EVAL)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@contextlib.contextmanager
def fts_variant(index: Callable[[str], str], query: Callable[[str], str]) -> Iterator[None]:
    """Index with `index` and query with `query` (the graph module reads both names at each
    call)."""
    old = graph.fts_text, graph.fts_query
    graph.fts_text, graph.fts_query = index, query  # type: ignore[assignment]
    try:
        yield
    finally:
        graph.fts_text, graph.fts_query = old


def build_folder(root: Path) -> Folder:
    corpus = root.parent / "corpus"
    corpus.mkdir(parents=True)
    with open(DATA / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            (corpus / f"{d['_id']}.txt").write_text(
                f"{d['title'].strip()}\n\n{d['text'].strip()}\n", encoding="utf-8"
            )
    folder = Folder.init(root)
    with folder.write_lock("bench"):
        ingest_paths(folder, [str(corpus)])
    return folder


def corpus_ids() -> list[str]:
    lines = (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["_id"] for line in lines]


def load_queries() -> list[tuple[str, str]]:
    with open(DATA / "queries.jsonl", encoding="utf-8") as f:
        return [(q["_id"], q["text"]) for q in map(json.loads, f)]


def score(ev: Any, qrels: dict, runs: dict[str, list[str]]) -> dict[str, float | int]:
    nd, r10, r100, mrr = [], [], [], []
    for q, rels in qrels.items():
        ranked = runs.get(q, [])
        nd.append(ev.ndcg_at(ranked, rels))
        r10.append(len(set(ranked[:10]) & set(rels)) / len(rels))
        r100.append(len(set(ranked[:100]) & set(rels)) / len(rels))
        mrr.append(next((1 / (i + 1) for i, d in enumerate(ranked[:10]) if d in rels), 0.0))
    n = len(qrels)
    return {
        "queries": n,
        "ndcg@10": round(sum(nd) / n, 4),
        "recall@10": round(sum(r10) / n, 4),
        "recall@100": round(sum(r100) / n, 4),
        "mrr@10": round(sum(mrr) / n, 4),
        "no_hit_queries": sum(1 for q in qrels if not runs.get(q)),
    }


def same_language_chance(ev: Any, qrels: dict, seed: int = 0, rounds: int = 200) -> dict:
    """What ranking the query's own language first, in random order, would score: the floor
    a model that only tells the languages apart reaches on this small set."""
    import random

    rng = random.Random(seed)
    docs = corpus_ids()
    totals: dict[str, float] = {}
    for _ in range(rounds):
        runs = {}
        for q in qrels:
            own = [d for d in docs if d[0] == q[1]]
            rng.shuffle(own)
            runs[q] = own
        for key, value in score(ev, qrels, runs).items():
            totals[key] = totals.get(key, 0.0) + value / rounds
    out: dict[str, float | int] = {k: round(v, 4) for k, v in totals.items()}
    out["queries"] = len(qrels)
    del out["no_hit_queries"]
    return out


def unknown_tokens(emb: Any) -> dict[str, float]:
    """Per language, the share of the corpus's tokens that the model's tokenizer cannot
    represent ([UNK]): what the vector model never sees."""
    import copy

    tok = copy.deepcopy(emb.tokenizer)
    tok.no_padding()
    tok.no_truncation()
    counts: dict[str, list[int]] = {}
    for line in (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        tokens = tok.encode(f"{d['title']} {d['text']}").tokens[1:-1]  # without [CLS], [SEP]
        c = counts.setdefault(LANGS["q" + d["_id"][0]], [0, 0])
        c[0] += tokens.count("[UNK]")
        c[1] += len(tokens)
    return {lang: round(u / n, 3) for lang, (u, n) in counts.items()}


def run_variant(name: str, modes: list[str], ev: Any, qrels: dict) -> list[dict]:
    out = []
    short = {qid for qid, text in load_queries() if len(text.strip()) == 1}
    with tempfile.TemporaryDirectory() as tmp, fts_variant(*VARIANTS[name]):
        folder = build_folder(Path(tmp) / "kf")
        emb = indexer.embedder(folder)
        with indexer.open_graph(folder) as g:
            for mode in modes:
                runs = {}
                for qid, text in load_queries():
                    hits = search(folder, g, text, k=100, mode=mode, scope="store", embedder=emb)
                    runs[qid] = [Path(h["path"]).name.removesuffix(".ok.md") for h in hits]
                row: dict = {"fts_text": name, "mode": mode, **score(ev, qrels, runs)}
                row["by_language"] = {
                    lang: score(ev, {q: r for q, r in qrels.items() if q.startswith(p)}, runs)
                    for p, lang in LANGS.items()
                }
                row["by_length"] = {
                    kind: score(ev, {q: r for q, r in qrels.items() if (q in short) == one}, runs)
                    for kind, one in (("one_character", True), ("longer", False))
                }
                out.append(row)
                print(json.dumps(row, ensure_ascii=False))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--modes", default="fts,vector,hybrid")
    ap.add_argument("--save", action="store_true", help="write bench/results/<script>-<commit>")
    args = ap.parse_args()
    ev = _eval_module()
    qrels = ev.load_qrels(DATA / "qrels.tsv")
    report = provenance.stamp()
    report["data"] = {
        "documents": len(corpus_ids()),
        "queries": len(qrels),
        "judgments": sum(len(r) for r in qrels.values()),
    }
    with tempfile.TemporaryDirectory() as tmp:
        report["unknown_tokens"] = unknown_tokens(indexer.embedder(Folder.init(Path(tmp) / "kf")))
    print(json.dumps({"unknown_tokens": report["unknown_tokens"]}))
    report["same_language_chance"] = same_language_chance(ev, qrels)
    print(json.dumps({"same_language_chance": report["same_language_chance"]}))
    report["runs"] = []
    for name in VARIANTS:
        report["runs"] += run_variant(name, args.modes.split(","), ev, qrels)
    if args.save:
        provenance.save(report)


if __name__ == "__main__":
    main()
