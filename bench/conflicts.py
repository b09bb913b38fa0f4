"""Precision and recall of `ok mem conflicts` (deterministic signals) on a labelled set.

    uv run python bench/conflicts.py [--split dev|test] [--show] [--save]

Each split holds pairs of statements, each pair about its own entity: some contradict
(different numbers or dates for the same fact, or a negation), the others do not
(different facts with numbers, paraphrases, two negations, different attributes).
`dev` (bench/data/conflicts.jsonl, 30 pairs, 12 contradicting) was written while the
signals were built and tuned on; `test` (bench/data/conflicts-test.jsonl, 20 pairs, 8
contradicting) was written after, and the signals were not changed for it.

Each statement becomes one note in a fresh folder; `ok mem conflicts --json --no-llm`
runs over all of them, and every flagged pair is scored: a true positive when it is one
of the contradicting pairs, else a false positive (a pair across two labelled pairs
counts as false).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import provenance  # noqa: E402

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")

OK = str(Path(sys.executable).parent / "ok")
SETS = {"dev": HERE / "data" / "conflicts.jsonl", "test": HERE / "data" / "conflicts-test.jsonl"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--split", choices=sorted(SETS), default="test")
    ap.add_argument("--show", action="store_true", help="print every flagged pair")
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    data = SETS[args.split]
    pairs = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()]
    side = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "kf"
        env = {**os.environ, "OK_NO_PROGRESS": "1", "OK_NO_ROUTE": "1", "OK_ROOT": str(root)}
        subprocess.run([OK, "init", str(root)], check=True, capture_output=True, env=env)
        for p in pairs:
            for s in ("a", "b"):
                r = subprocess.run(
                    [OK, "mem", "add", p[s], "--json", "--allow-duplicate"],
                    capture_output=True,
                    env=env,
                    text=True,
                )
                if r.returncode != 0:
                    sys.exit(f"ok mem add failed: {r.stderr.strip()}")
                side[p[s]] = p["id"]
        r = subprocess.run(
            [OK, "mem", "conflicts", "--json", "--no-llm"], capture_output=True, env=env, text=True
        )
        if r.returncode != 0:
            sys.exit(f"ok mem conflicts failed: {r.stderr.strip()}")
        found = json.loads(r.stdout)
    truth = {p["id"] for p in pairs if p["conflict"]}
    hits: set[int] = set()
    false = []
    for c in found:
        a, b = side.get(c["a"]["quote"].strip()), side.get(c["b"]["quote"].strip())
        if a is not None and a == b and a in truth:
            hits.add(a)
        else:
            false.append(c)
        if args.show:
            print(
                f"{'TP' if a == b and a in truth else 'FP'} {c['kind']}: {c['a']['quote']!r} | {c['b']['quote']!r}",
                file=sys.stderr,
            )
    flagged = len(found)
    out = {
        **provenance.stamp(),
        "split": args.split,
        "pairs": len(pairs),
        "contradicting": len(truth),
        "flagged": flagged,
        "true_positives": len(hits),
        "precision": round(len(hits) / flagged, 3) if flagged else None,
        "recall": round(len(hits) / len(truth), 3),
        "missed": sorted(truth - hits),
        "false_positives": [[c["a"]["quote"], c["b"]["quote"]] for c in false],
    }
    print(json.dumps(out, indent=2, ensure_ascii=False))
    if args.save:
        provenance.save(out, args.split)


if __name__ == "__main__":
    main()
