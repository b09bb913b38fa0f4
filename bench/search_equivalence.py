"""Does `ok search --json` give the same hits before and after a change? Runs the SciFact
test queries through the CLI of one checkout and writes every hit's id and score.

    uv run python bench/search_equivalence.py --ok /path/to/checkout/.venv/bin/ok \
        --root /tmp/scifact-a --out a.json [--modes hybrid,fts,vector] [--limit N]
    uv run python bench/search_equivalence.py --compare a.json b.json

The folder is built with the same CLI (`ok init`, `ok store ingest`), so each checkout
indexes with its own code. `--compare` prints how many queries differ in ids, in order or in
score (beyond 1e-9), and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("OK_BENCH_DATA", HERE.parent.parent / "shared" / "bench" / "scifact"))


def ok(binary: str, root: Path, *args: str) -> str:
    r = subprocess.run(
        [binary, "--root", str(root), *args], capture_output=True, text=True, check=False
    )
    if r.returncode:
        sys.exit(f"ok {' '.join(args[:2])} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def build(binary: str, root: Path) -> None:
    if (root / ".ok").exists():
        return
    corpus = root.parent / (root.name + "-corpus") / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    with open(DATA / "corpus.jsonl") as f:
        for line in f:
            d = json.loads(line)
            (corpus / f"{d['_id']}.txt").write_text(
                f"{d.get('title', '').strip()}\n\n{d.get('text', '').strip()}\n"
            )
    subprocess.run([binary, "init", str(root)], check=True, capture_output=True)
    ok(binary, root, "store", "ingest", str(corpus), "--json")


def queries(limit: int | None) -> list[tuple[str, str]]:
    with open(DATA / "queries.jsonl") as f:
        out = [(q["_id"], q["text"]) for q in map(json.loads, f)]
    return out[:limit] if limit else out


def run(args: argparse.Namespace) -> None:
    root = Path(args.root)
    build(args.ok, root)
    result: dict[str, dict[str, list[list[object]]]] = {}
    qs = queries(args.limit)
    for mode in args.modes.split(","):
        result[mode] = {}
        for i, (qid, text) in enumerate(qs):
            hits = json.loads(ok(args.ok, root, "search", text, "--mode", mode, "--json"))
            result[mode][qid] = [[h["id"], h["score"]] for h in hits]
            if i % 50 == 0:
                print(f"{mode}: {i}/{len(qs)}", file=sys.stderr)
    Path(args.out).write_text(json.dumps(result, indent=1))


def compare(a_path: str, b_path: str) -> int:
    a, b = json.loads(Path(a_path).read_text()), json.loads(Path(b_path).read_text())
    bad = 0
    for mode in sorted(set(a) | set(b)):
        qa, qb = a.get(mode, {}), b.get(mode, {})
        ids = order = score = 0
        for qid in sorted(set(qa) | set(qb)):
            ha, hb = qa.get(qid, []), qb.get(qid, [])
            if {h[0] for h in ha} != {h[0] for h in hb}:
                ids += 1
            elif [h[0] for h in ha] != [h[0] for h in hb]:
                order += 1
            elif any(abs(x[1] - y[1]) > 1e-9 for x, y in zip(ha, hb, strict=True)):
                score += 1
        n = len(set(qa) | set(qb))
        print(f"{mode}: {n} queries, {ids} differ in ids, {order} in order, {score} in score")
        bad += ids + order + score
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ok", help="the `ok` executable of the checkout to run")
    ap.add_argument("--root", help="knowledge folder to build (once) and search")
    ap.add_argument("--out", help="where to write {mode: {query id: [[id, score], …]}}")
    ap.add_argument("--modes", default="hybrid,fts,vector")
    ap.add_argument("--limit", type=int, help="only the first N test queries")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    args = ap.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if not (args.ok and args.root and args.out):
        ap.error("give --ok, --root and --out (or --compare A B)")
    run(args)


if __name__ == "__main__":
    main()
