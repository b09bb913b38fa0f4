"""How often `ok context`'s confidence is right, on the questions of bench/gold/qa.

    uv run python bench/context_calibration.py [--split dev|test] [--fit] [--save]

One folder is built from the set's 102 documents (kept in bench/.work/qa-gold, so a second
run reuses it) and every question of the split goes through the same code as
`ok context --no-llm`. The context is *right* when the folder answers the question and one
of its first three sources holds the gold answer span (bench/gold/qa/check.py: `holds`); a
question the folder cannot answer (52 of 518) is never right, so a confidence other than
LOW on it is an error. The reliability table gives, per label and per score bucket, how
many contexts got it and the share that were right. Beside it, the same questions under the
label `ok context` gave before it was calibrated (from its top entity's confidence and
whether the query names it), recomputed from each context.

`--fit` (dev only) fits the logistic score of `openkl.knowledge.context.CALIBRATION` to the dev
questions and prints the constants; tune on dev, report test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLD = HERE / "gold" / "qa"
WORK = HERE / ".work" / "qa-gold"
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(GOLD))
sys.path.insert(0, str(HERE))

from check import holds, spans  # noqa: E402

from openkl import ops  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402

QUESTIONS = GOLD / "questions.jsonl"
TOP = 3  # sources a reader looks at
BUCKETS = [(0.0, 0.2), (0.2, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 1.01)]


def folder() -> Folder:
    """The folder of the set's documents, built once."""
    if (WORK / ".ok").exists():
        return Folder(WORK)
    import qa_gold

    return qa_gold.build(WORK)


def old_label(ctx: dict) -> str:
    """The label `ok context` gave before calibration (its `_label`, from the context)."""
    ents = ctx["entities"]
    if not ents:
        return "LOW"
    top = ents[0]
    named = "named in the query" in top["why"]
    mentioned = len([w for w in top["why"] if w.startswith("mentioned in")])
    strong = top["confidence"] >= 0.7 and (named or mentioned >= 2)
    if strong and ctx["sources"]:
        return "HIGH"
    return "MEDIUM" if top["confidence"] >= 0.5 or named else "LOW"


def score(f: Folder, q: dict) -> dict:
    t0 = time.perf_counter()
    ctx = ops.context(ops.Call(f), q["question"], use_llm=False)
    secs = time.perf_counter() - t0
    quotes = [s["quote"] for s in ctx["sources"][:TOP]]
    right = q["answerable"] and any(holds(x, s) for x in quotes for s in spans(q))
    return {
        "id": q["id"],
        "kind": q["kind"],
        "answerable": q["answerable"],
        "question": q["question"],
        "right": bool(right),
        "label": ctx["confidence"],
        "score": ctx["confidence_score"],
        "support": ctx["support"],
        "old_label": old_label(ctx),
        "entities": [e["name"] for e in ctx["entities"][:5]],
        "seconds": round(secs, 3),
    }


def table(rows: Sequence[dict], key: str, values: Sequence[str]) -> list[dict]:
    out = []
    for v in values:
        got = [r for r in rows if r[key] == v]
        out.append(
            {
                "bucket": v,
                "n": len(got),
                "right": round(sum(r["right"] for r in got) / len(got), 3) if got else None,
                "unanswerable": sum(not r["answerable"] for r in got),
            }
        )
    return out


def by_score(rows: Sequence[dict]) -> list[dict]:
    out = []
    for lo, hi in BUCKETS:
        got = [r for r in rows if lo <= r["score"] < hi]
        out.append(
            {
                "bucket": f"{lo:.1f}–{min(hi, 1.0):.1f}",
                "n": len(got),
                "mean_score": round(sum(r["score"] for r in got) / len(got), 3) if got else None,
                "right": round(sum(r["right"] for r in got) / len(got), 3) if got else None,
            }
        )
    return out


def fit(rows: Sequence[dict]) -> dict[str, float]:
    """Logistic regression of `right` on similarity and coverage (gradient descent)."""
    import numpy as np

    x = np.array(
        [[r["support"][k] for k in ("similarity", "coverage", "typed")] + [1.0] for r in rows]
    )
    y = np.array([float(r["right"]) for r in rows])
    w = np.zeros(4)
    for _ in range(20000):
        p = 1 / (1 + np.exp(-(x @ w)))
        w -= 0.5 * (x.T @ (p - y)) / len(y)
    names = ("similarity", "coverage", "typed", "bias")
    return {k: round(float(v), 3) for k, v in zip(names, w, strict=True)}


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="test", choices=["dev", "test"])
    ap.add_argument("--fit", action="store_true", help="fit CALIBRATION on dev")
    ap.add_argument("--save", action="store_true", help="write bench/results/…json")
    args = ap.parse_args()
    if args.fit and args.split != "dev":
        ap.error("--fit tunes on dev only")
    items = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    items = [q for q in items if q["split"] == args.split]
    measured = commit()
    f = folder()
    rows = [score(f, q) for q in items]
    labels = ["HIGH", "MEDIUM", "LOW"]
    out = {
        "command": f"uv run python bench/context_calibration.py --split {args.split}",
        "commit": measured,
        "data": str(QUESTIONS.relative_to(HERE.parent)),
        "split": args.split,
        "n": len(rows),
        "right": round(sum(r["right"] for r in rows) / len(rows), 3),
        "by_label": table(rows, "label", labels),
        "by_label_before": table(rows, "old_label", labels),
        "by_score": by_score(rows),
        "mean_seconds": round(sum(r["seconds"] for r in rows) / len(rows), 3),
    }
    if args.fit:
        out["fit"] = fit(rows)
    print(json.dumps(out, indent=2, ensure_ascii=False))
    if args.save:
        dest = HERE / "results" / f"context_calibration-{measured}-{args.split}.json"
        dest.write_text(json.dumps({**out, "rows": rows}, indent=2, ensure_ascii=False) + "\n")
        print(f"saved {dest.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
