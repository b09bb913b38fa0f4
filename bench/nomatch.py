"""When search should say "no good match": tune the floor on SciFact *train*, check it.

    uv run python bench/nomatch.py [--target 0.01] [--save]

`ok search` answers "no good match" when none of the query's words occur in scope (BM25
finds nothing) and the best passage's cosine similarity to the query is under a floor
(`search.min_score`). The floor is tuned on the SciFact train split alone, with one rule
fixed in advance: the highest floor (on a 0.01 grid) that at most `--target` of the train
queries, all of which have a relevant document, fail to reach on cosine alone (they all
share words with the corpus, so the keyword condition alone would never cut them). It is then
checked, never tuned, on:

- the SciFact test split: the share of queries wrongly cut, and nDCG@10 with and without
  the floor (the floor removes whole queries' results, so kept queries rank as before);
- the unrelated queries of bench/data/unrelated_queries.txt (gibberish, ASCII art,
  off-topic questions) against the SciFact folder and against a small mixed folder (the
  example documents plus a few notes, an ASCII-art banner and test data among them): the
  share correctly told "no good match";
- queries the mixed folder does answer (the ones its tests and demo use): the share kept.

Each query's candidates are collected once with `search.candidates`, the function
`ok search` gets them from (same pool as a 10-hit search), and ranked with `search.fuse`
and `search.first_per_doc`; the floor decision is `search.no_good_match`, the function
`ok search` decides with. Needs the folder built by bench/scifact.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import provenance  # noqa: E402

from openkl import ops  # noqa: E402
from openkl.collect.store import ingest_paths  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402
from openkl.graph.search import (  # noqa: E402
    Fusion,
    best_cosine,
    candidates,
    first_per_doc,
    fuse,
    no_good_match,
    pool_size,
)
from openkl.sync import indexer  # noqa: E402

DATA = Path(os.environ.get("OK_BENCH_DATA", HERE.parent.parent / "shared" / "bench" / "scifact"))
WORK = Path(os.environ.get("OK_BENCH_WORK", HERE / ".work"))
UNRELATED = HERE / "data" / "unrelated_queries.txt"
EXAMPLES = HERE.parent / "examples" / "docs"
K = 10
GRID = [round(x * 0.01, 2) for x in range(0, 81)]

# the mixed folder's notes: everyday notes, an ASCII-art banner and test data, the kinds of
# text a nonsense query lands on when nothing else is near
NOTES = [
    ("Kùzu keeps one writer at a time, so the MCP server opens the graph per call.", "kuzu"),
    ("Deadline for the quarterly report is Friday; Maria reviews the draft first.", "work"),
    ("Retry storms: clients retrying in lockstep overload the service; add jitter.", "ops"),
    ("Standup moved to 9:30 on Tuesdays and Thursdays from next week.", "work"),
    (
        "  ___  _  __  _\n / _ \\| |/ / | |\n| (_) | ' <  |_|\n \\___/|_|\\_\\ (_)\n"
        "=================\n  banner for the README\n",
        "ascii",
    ),
    ("fixture rows: id=1 name=alpha value=0.5\nid=2 name=beta value=1.5\nid=3 name=gamma", "test"),
    ("TODO: rotate the staging TLS certificate before it expires in March.", "ops"),
    ("Idea: store citations as plain JSON next to the notes so git can diff them.", "design"),
]
# queries the mixed folder answers (from its tests and the demo): the floor must keep them
RELATED = [
    "reciprocal rank fusion",
    "gene editing",
    "write-ahead logging",
    "who wrote the first computer program",
    "can two processes write the graph at once",
    "retry storms",
    "deadline",
    "BM25",
    "wal",
    "Ada Lovelace",
    "CRISPR",
    "Kùzu",
    "embedded graph database",
    "when is standup",
    "TLS certificate",
]


def _eval_module() -> Any:
    spec = importlib.util.spec_from_file_location("eval_run", DATA.parent / "eval_run.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def unrelated_queries() -> list[str]:
    lines = UNRELATED.read_text(encoding="utf-8").splitlines()
    return [x.strip() for x in lines if x.strip() and not x.startswith("# ")]


def scifact_queries(split: str, qrels: dict) -> list[tuple[str, str]]:
    name = "queries_train.jsonl" if split == "train" else "queries.jsonl"
    rows = [json.loads(x) for x in (DATA / name).read_text().splitlines()]
    return [(str(q["_id"]), q["text"]) for q in rows if str(q["_id"]) in qrels]


def mixed_folder() -> Folder:
    """The small mixed folder, built once under bench/.work."""
    root = WORK / "nomatch-notes"
    if (root / ".ok-built").exists():
        return Folder(root)
    shutil.rmtree(root, ignore_errors=True)
    folder = Folder.init(root)
    with folder.write_lock("bench"):
        ingest_paths(folder, [str(EXAMPLES)])
        for text, tag in NOTES:
            ops.add_note(folder, text, tags=[tag])
    (root / ".ok-built").write_text("")
    return folder


def collect(folder: Folder, queries: list[str], scope: str) -> list[dict[str, Any]]:
    """Each query's best cosine and top-K document ids (as a 10-hit search ranks them)."""
    emb = indexer.embedder(folder)
    fusion = Fusion.from_folder(folder)
    out = []
    with indexer.open_graph(folder) as g:
        for text in queries:
            lists = candidates(g, text, emb.embed_query(text), "hybrid", scope, pool_size(K))
            hits = first_per_doc(fuse(lists, "hybrid", fusion), 1, K)
            out.append(
                {
                    "query": text,
                    "best_cosine": best_cosine(lists),
                    "fts_matched": bool(lists["fts"]),
                    "ranked": [h["id"].split("#", 1)[0] for h in hits],
                }
            )
    return out


def share_cut(rows: list[dict[str, Any]], floor: float, keywords: bool = True) -> float:
    """The share of `rows` that get "no good match" under `floor` (`keywords=False`: as if
    BM25 had found none of their words, the floor on meaning alone)."""
    cut = sum(no_good_match(r["best_cosine"], keywords and r["fts_matched"], floor) for r in rows)
    return round(cut / len(rows), 4) if rows else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=float, default=0.01, help="train share the floor may cut")
    ap.add_argument("--reuse", action="store_true", help="reuse the last run's candidates")
    ap.add_argument("--save", action="store_true", help="write bench/results/<script>-<commit>")
    args = ap.parse_args()
    report: dict[str, Any] = provenance.stamp()
    ev = _eval_module()
    t0 = time.perf_counter()
    sci = Folder(WORK / "scifact")
    with indexer.open_graph(sci) as g:
        names = {
            r["id"]: Path(r["path"]).name.removesuffix(".ok.md")
            for r in g.query("MATCH (d:Doc) RETURN d.id AS id, d.path AS path")
        }
    rows: dict[str, list[dict[str, Any]]] = {}
    qrels: dict[str, dict] = {}
    unrelated = unrelated_queries()
    cache = WORK / "nomatch-rows.json"
    for split in ("train", "test"):
        qrels[split] = ev.load_qrels(
            DATA / ("qrels_train.tsv" if split == "train" else "qrels.tsv")
        )
    if args.reuse and cache.exists():
        rows = json.loads(cache.read_text())
    else:
        for split in ("train", "test"):
            qs = scifact_queries(split, qrels[split])
            rows[split] = collect(sci, [t for _, t in qs], "store")
            for (qid, _), r in zip(qs, rows[split], strict=True):
                r["qid"] = qid
                r["ranked"] = [names[d] for d in r["ranked"]]
        rows["unrelated_scifact"] = collect(sci, unrelated, "store")
        mixed = mixed_folder()
        rows["unrelated_notes"] = collect(mixed, unrelated, "all")
        rows["related_notes"] = collect(mixed, RELATED, "all")
        cache.write_text(json.dumps(rows))
    collect_s = time.perf_counter() - t0

    # the tuning: train only, one rule fixed in advance. Every train query shares words
    # with the corpus (so none would be cut); the floor is tuned as the one for meaning
    # alone: the cosine that all but `target` of real questions' best passages reach
    floor = max(f for f in GRID if share_cut(rows["train"], f, keywords=False) <= args.target)

    def ndcg(split: str, with_floor: bool) -> float:
        nd = [
            0.0
            if with_floor and no_good_match(r["best_cosine"], r["fts_matched"], floor)
            else ev.ndcg_at(r["ranked"], qrels[split][r["qid"]])
            for r in rows[split]
        ]
        return round(sum(nd) / len(nd), 4)

    sweep = [
        {
            "floor": f,
            "train_cut": share_cut(rows["train"], f),
            "test_cut": share_cut(rows["test"], f),
            "unrelated_scifact_no_match": share_cut(rows["unrelated_scifact"], f),
            "unrelated_notes_no_match": share_cut(rows["unrelated_notes"], f),
            "related_notes_cut": share_cut(rows["related_notes"], f),
            # the same floor on cosine alone, whether or not the query's words occur
            "cosine_alone": {
                name: share_cut(rows[name], f, keywords=False)
                for name in (
                    "train",
                    "test",
                    "unrelated_scifact",
                    "unrelated_notes",
                    "related_notes",
                )
            },
        }
        for f in GRID
        if f >= 0.1 and round(f * 100) % 5 == 0 or f == floor
    ]

    def missed(name: str) -> list[dict[str, Any]]:
        return [
            {"query": r["query"], "best_cosine": round(r["best_cosine"] or 0.0, 4)}
            for r in rows[name]
            if not no_good_match(r["best_cosine"], r["fts_matched"], floor)
        ]

    report.update(
        {
            "rule": "no good match when BM25 finds none of the query's words in scope and the "
            "best passage's cosine similarity is under the floor",
            "tuning": {
                "split": "train",
                "queries": len(rows["train"]),
                "how": "highest floor on a 0.01 grid that at most "
                f"{args.target:.0%} of them do not reach on cosine alone",
                "floor": floor,
                "train_under_floor_on_cosine_alone": share_cut(rows["train"], floor, False),
                "train_cut": share_cut(rows["train"], floor),
            },
            "check": {
                "scifact_test_queries": len(rows["test"]),
                "scifact_test_wrongly_cut": share_cut(rows["test"], floor),
                "scifact_test_ndcg@10_without_floor": ndcg("test", False),
                "scifact_test_ndcg@10_with_floor": ndcg("test", True),
                "unrelated_queries": len(unrelated),
                "unrelated_scifact_no_good_match": share_cut(rows["unrelated_scifact"], floor),
                "unrelated_notes_no_good_match": share_cut(rows["unrelated_notes"], floor),
                "related_notes_queries": len(RELATED),
                "related_notes_wrongly_cut": share_cut(rows["related_notes"], floor),
            },
            "unrelated_kept_scifact": missed("unrelated_scifact"),
            "unrelated_kept_notes": missed("unrelated_notes"),
            "related_notes_cut": [
                {"query": r["query"], "best_cosine": round(r["best_cosine"] or 0.0, 4)}
                for r in rows["related_notes"]
                if no_good_match(r["best_cosine"], r["fts_matched"], floor)
            ],
            "sweep": sweep,
            "collect_seconds": round(collect_s, 1),
        }
    )
    print(json.dumps(report, indent=2, ensure_ascii=False))
    if args.save:
        provenance.save(report)


if __name__ == "__main__":
    main()
