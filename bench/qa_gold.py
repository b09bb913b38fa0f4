"""Extractive `ok ask` on the reading-comprehension set of bench/gold/qa.

    uv run python bench/qa_gold.py [--split dev|test|all] [--kind KIND] [--save] [--show]

The set (bench/gold/qa: GUIDE.md, questions.jsonl, split.json) has 518 questions over 102
documents of three kinds (scientific abstracts, technical documentation, encyclopedic
entries), split into dev and test by document. Tune on dev; report test.

One folder is built from all the documents (as `ok init` and `ok store ingest` do), and each
question of the split goes through the same code as `ok ask --no-llm`; each answer's
citations go through the same code as `ok cite verify`. A span matches as whole words,
case and white space aside, [N] markers left out (bench/gold/qa/check.py: `holds`).

Over the answerable questions:
- contains_answer: the answer's text holds the gold span or an alternative;
- first_cite_gold: the first citation's quote holds it;
- any_cite_gold: some citation's quote holds it;
- first_cite_doc: the first citation is from the question's document;
- said_insufficient: the answer says the folder does not hold enough (a miss here);
- mean_words: the answer's length in words, [N] markers left out.
Over every answer with a citation, citations_verify: each of its citations verifies.
Over the unanswerable questions, insufficient: the answer says the folder does not hold
enough. Each is given per kind and overall.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLD = HERE / "gold" / "qa"
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(GOLD))

from check import holds, norm, spans  # noqa: E402

from openkl import ops  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402

QUESTIONS = GOLD / "questions.jsonl"
DOCS = GOLD / "docs"
SOURCE_PREFIX = "store/sources/docs/"


def build(where: Path) -> Folder:
    """A fresh folder holding every document of the set."""
    ops.init_folder(where, what="bench")
    folder = Folder(where)
    with folder.write_lock("bench"):
        ops.ingest(folder, [str(DOCS)])
    return folder


def cited_doc(cite: dict) -> str:
    """The set's name for the document a citation quotes (`scifact/4983.md`)."""
    path = str(cite.get("source", {}).get("path", ""))
    return path.removeprefix(SOURCE_PREFIX)


def score(folder: Folder, q: dict) -> dict:
    """Ask one question and score its answer."""
    t0 = time.perf_counter()
    a = ops.ask(ops.Call(folder), q["question"], use_llm=False)
    secs = time.perf_counter() - t0
    cites = a["citations"]
    verified = ops.verify_citations(folder, cites).ok if cites else None
    gold = spans(q)
    quotes = [c["quote"] for c in cites]
    row = {
        "id": q["id"],
        "kind": q["kind"],
        "doc": q["doc"],
        "answerable": q["answerable"],
        "question": q["question"],
        "gold": q["answer"],
        "answer": a["answer"],
        "cited_docs": [cited_doc(c) for c in cites],
        "insufficient": a["insufficient"],
        "confidence": a["confidence"],
        "citations_verify": verified,
        "words": len(norm(a["answer"]).split()),
        "seconds": round(secs, 3),
    }
    if q["answerable"]:
        row["contains_answer"] = any(holds(a["answer"], s) for s in gold)
        row["first_cite_gold"] = bool(quotes) and any(holds(quotes[0], s) for s in gold)
        row["any_cite_gold"] = any(holds(x, s) for x in quotes for s in gold)
        row["first_cite_doc"] = bool(cites) and cited_doc(cites[0]) == q["doc"]
    return row


def share(rows: Sequence[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return round(sum(bool(v) for v in vals) / len(vals), 3) if vals else None


def summarize(rows: Sequence[dict]) -> dict[str, object]:
    """The numbers over `rows` (see the module's docstring)."""
    ans = [r for r in rows if r["answerable"]]
    unans = [r for r in rows if not r["answerable"]]
    return {
        "n": len(rows),
        "answerable": len(ans),
        "unanswerable": len(unans),
        "contains_answer": share(ans, "contains_answer"),
        "first_cite_gold": share(ans, "first_cite_gold"),
        "any_cite_gold": share(ans, "any_cite_gold"),
        "first_cite_doc": share(ans, "first_cite_doc"),
        "said_insufficient": share(ans, "insufficient"),
        "mean_words": round(sum(r["words"] for r in ans) / len(ans), 1) if ans else None,
        "citations_verify": share(rows, "citations_verify"),
        "unanswerable_insufficient": share(unans, "insufficient"),
        "mean_seconds": round(sum(r["seconds"] for r in rows) / len(rows), 3) if rows else None,
    }


def commit() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    )
    return out.stdout.strip()


def run(split: str, kind: str | None = None) -> dict[str, object]:
    items = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    items = [q for q in items if split == "all" or q["split"] == split]
    items = [q for q in items if kind is None or q["kind"] == kind]
    measured = commit()  # before the run, which may outlast a commit
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        folder = build(Path(tmp) / "kb")
        built = time.perf_counter() - t0
        rows = [score(folder, q) for q in items]
    kinds = sorted({r["kind"] for r in rows})
    cmd = f"uv run python bench/qa_gold.py --split {split}" + (f" --kind {kind}" if kind else "")
    return {
        "command": cmd,
        "commit": measured,
        "data": str(QUESTIONS.relative_to(HERE.parent)),
        "split": split,
        "build_seconds": round(built, 1),
        "overall": summarize(rows),
        "by_kind": {k: summarize([r for r in rows if r["kind"] == k]) for k in kinds},
        "rows": rows,
    }


def show_misses(rows: Sequence[dict]) -> None:
    for r in rows:
        if r["answerable"] and not r["contains_answer"]:
            print(f"MISS {r['id']} {r['question']!r} gold={r['gold']!r}")
            print(f"     {r['answer'][:300]!r} from {r['cited_docs'][:1]}")
        elif not r["answerable"] and not r["insufficient"]:
            print(f"ANSWERED {r['id']} {r['question']!r}\n     {r['answer'][:200]!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="test", choices=["dev", "test", "all"])
    ap.add_argument("--kind", choices=["scifact", "techdocs", "encyclopedic"])
    ap.add_argument("--save", action="store_true", help="write bench/results/qa_gold-…json")
    ap.add_argument("--show", action="store_true", help="print each miss")
    args = ap.parse_args()
    out = run(args.split, args.kind)
    if args.show:
        show_misses(out["rows"])  # type: ignore[arg-type]
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}, indent=2))
    if args.save:
        tail = f"-{args.kind}" if args.kind else ""
        dest = HERE / "results" / f"qa_gold-{out['commit']}-{args.split}{tail}.json"
        dest.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        print(f"saved {dest.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
