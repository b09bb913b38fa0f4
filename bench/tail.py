"""The tail cutoff of hybrid search: what it removes, and whether any of it was relevant.

    uv run python bench/tail.py [--split train|test] [--floor 0.37] [--save]

`ok search` (hybrid) keeps a hit that BM25 did not find only when its cosine similarity
reaches search.tail_floor (`search.cut_tail`). For each query of a set, the ten hits of a
hybrid search are ranked without the cutoff (the same candidates, `fuse` and
`first_per_doc` as `ok search`), then the cutoff is applied; counted: hits removed,
relevant hits removed, and nDCG@10 before and after. Sets:

- SciFact (`--split`; relevance from its qrels), in the folder bench/scifact.py builds;
- the reading-comprehension questions of bench/gold/qa (the question's document is the
  relevant one; `dev` with the train split, `test` with test), in the folder
  bench/qa_tune.py builds;
- notes on small mixed topics (bench/data/tail_notes.json): a few notes per query are about
  it, the rest are about other things, as in a personal folder.

The floor was chosen beforehand: the value of search.min_score, tuned on SciFact train for
"no good match" (bench/nomatch.py); this script measures it, it does not tune it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import provenance  # noqa: E402

from openkl import ops  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402
from openkl.graph.search import (  # noqa: E402
    Fusion,
    QueryUse,
    candidates,
    cut_tail,
    first_per_doc,
    fuse,
    pool_size,
)
from openkl.sync import indexer  # noqa: E402

DATA = Path(os.environ.get("OK_BENCH_DATA", HERE.parent.parent / "shared" / "bench" / "scifact"))
WORK = Path(os.environ.get("OK_BENCH_WORK", HERE / ".work"))
NOTES = HERE / "data" / "tail_notes.json"
K = 10


def ndcg(ranked: list[str], rel: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:K]) if d in rel)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(K, len(rel))))
    return dcg / ideal if ideal else 0.0


def measure(folder: Folder, queries: list[tuple[str, set[str]]], name_of, floor: float) -> dict:
    """`queries`: (text, relevant names); `name_of(table, id)`: a hit's name in those sets."""
    emb = indexer.embedder(folder)
    fusion = Fusion.from_folder(folder)
    n = removed = rel_removed = rel_kept = hits_before = 0
    nd_before = nd_after = 0.0
    with indexer.open_graph(folder) as g:
        for text, rel in queries:
            use = QueryUse.of(text, "hybrid", emb)
            qvec = emb.embed_query(text[: use.vector_chars])
            lists = candidates(g, text, qvec, "hybrid", "all", pool_size(K), use.fts_text)
            ranked = fuse(lists, "hybrid", fusion)
            before = first_per_doc(ranked, 1, K)
            after = first_per_doc(cut_tail(ranked, "hybrid", floor), 1, K)
            kept = {h["id"] for h in after}
            names_before = [name_of(h["table"], h["id"]) for h in before]
            names_after = [name_of(h["table"], h["id"]) for h in after]
            gone = [x for h, x in zip(before, names_before, strict=True) if h["id"] not in kept]
            n += 1
            hits_before += len(before)
            removed += len(gone)
            rel_removed += sum(x in rel for x in gone)
            rel_kept += sum(x in rel for x in names_after)
            nd_before += ndcg(names_before, rel)
            nd_after += ndcg(names_after, rel)
    return {
        "queries": n,
        "hits_before": hits_before,
        "removed": removed,
        "relevant_removed": rel_removed,
        "relevant_kept": rel_kept,
        "ndcg@10_before": round(nd_before / n, 4),
        "ndcg@10_after": round(nd_after / n, 4),
    }


def chunk_doc_names(folder: Folder) -> dict[str, str]:
    """Chunk and note ids by the name of their file (SciFact ids, set documents)."""
    with indexer.open_graph(folder) as g:
        rows = g.query("MATCH (d:Doc)-[:HAS_CHUNK]->(c:Chunk) RETURN c.id AS c, d.path AS p")
    return {r["c"]: Path(r["p"]).name.removesuffix(".ok.md") for r in rows}


def scifact(split: str, floor: float) -> dict:
    folder = Folder(WORK / "scifact")
    name = "queries.jsonl" if split == "test" else "queries_train.jsonl"
    qrels: dict[str, set[str]] = {}
    with open(DATA / ("qrels.tsv" if split == "test" else "qrels_train.tsv")) as f:
        next(f)
        for line in f:
            q, d, s = line.rstrip("\n").split("\t")
            if int(s) > 0:
                qrels.setdefault(q, set()).add(d)
    queries = []
    with open(DATA / name) as f:
        for line in f:
            q = json.loads(line)
            if str(q["_id"]) in qrels:
                queries.append((q["text"], qrels[str(q["_id"])]))
    names = chunk_doc_names(folder)
    return measure(folder, queries, lambda t, i: names.get(i, i), floor)


def qa_set(split: str, floor: float) -> dict:
    folder = Folder(WORK / "qa" / "kb")
    items = [
        json.loads(x)
        for x in (HERE / "gold" / "qa" / "questions.jsonl").read_text().splitlines()
        if x.strip()
    ]
    qs = [q for q in items if q["split"] == split and q["answerable"]]
    names = chunk_doc_names(folder)
    queries = [(q["question"], {Path(q["doc"]).stem}) for q in qs]
    return measure(folder, queries, lambda t, i: names.get(i, i), floor)


def notes_set(floor: float) -> dict:
    data = json.loads(NOTES.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "kb"
        ops.init_folder(root, what="bench")
        folder = Folder(root)
        ids: dict[str, str] = {}
        with folder.write_lock("bench"):
            for key, text in data["notes"].items():
                ids[ops.add_note(folder, text, allow_duplicate=True).id] = key
        queries = [(q["query"], set(q["relevant"])) for q in data["queries"]]
        return measure(folder, queries, lambda t, i: ids.get(i, i), floor)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="train", choices=["train", "test"])
    ap.add_argument("--floor", type=float, default=None, help="default: search.tail_floor")
    ap.add_argument("--sets", default="notes,qa,scifact")
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    from openkl.settings import default

    floor = args.floor if args.floor is not None else float(default("search.tail_floor"))
    report = provenance.stamp()
    report["floor"] = floor
    report["split"] = args.split
    sets = args.sets.split(",")
    if "notes" in sets:
        report["notes"] = notes_set(floor)
        print("notes", json.dumps(report["notes"]), flush=True)
    if "qa" in sets:
        report["qa"] = qa_set("dev" if args.split == "train" else "test", floor)
        print("qa", json.dumps(report["qa"]), flush=True)
    if "scifact" in sets:
        report["scifact"] = scifact(args.split, floor)
        print("scifact", json.dumps(report["scifact"]), flush=True)
    if args.save:
        provenance.save(report)


if __name__ == "__main__":
    main()
