"""Extractive `ok ask` on short-answer questions about the example documents.

    .venv/bin/python bench/qa.py [--split dev|test|all] [--save]

The questions (bench/data/qa_examples.jsonl) are written from the five documents in
examples/docs, SQuAD-style: each has a short answer string that occurs in one document.
Half are `dev` (used while changing the sentence scoring), half `test` (reported, never
tuned on). A fresh folder is built from examples/docs, and each question goes through the
same code as `ok ask --no-llm`. Three numbers:

- contains_answer: share of answers whose text contains the gold answer string;
- first_cite_gold: share whose first citation [1] quotes a span holding the gold answer;
- mean_words: mean length of the answer text in words ([N] markers left out).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from openkl import ops  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402

DATA = HERE / "data" / "qa_examples.jsonl"
DOCS = HERE.parent / "examples" / "docs"


def norm(text: str) -> str:
    return " ".join(re.sub(r"\[\d+\]", " ", text).split()).lower()


def build(where: Path) -> Folder:
    ops.init_folder(where, what="bench")
    folder = Folder(where)
    with folder.write_lock("bench"):
        ops.ingest(folder, [str(DOCS)])
    return folder


def run(split: str) -> dict[str, object]:
    items = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    items = [i for i in items if split == "all" or i["split"] == split]
    with tempfile.TemporaryDirectory() as tmp:
        folder = build(Path(tmp) / "kb")
        rows = []
        for it in items:
            a = ops.ask(ops.Call(folder), it["question"], use_llm=False)
            gold = norm(it["answer"])
            first = a["citations"][0]["quote"] if a["citations"] else ""
            rows.append(
                {
                    "id": it["id"],
                    "question": it["question"],
                    "gold": it["answer"],
                    "answer": a["answer"],
                    "contains_answer": gold in norm(a["answer"]),
                    "first_cite_gold": gold in norm(first),
                    "words": len(norm(a["answer"]).split()),
                }
            )
    n = len(rows)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    ).stdout.strip()
    return {
        "command": f"uv run python bench/qa.py --split {split}",
        "commit": commit,
        "data": str(DATA.relative_to(HERE.parent)),
        "split": split,
        "n": n,
        "contains_answer": round(sum(r["contains_answer"] for r in rows) / n, 3),
        "first_cite_gold": round(sum(r["first_cite_gold"] for r in rows) / n, 3),
        "mean_words": round(sum(r["words"] for r in rows) / n, 1),
        "rows": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="test", choices=["dev", "test", "all"])
    ap.add_argument("--save", action="store_true")
    ap.add_argument("--show", action="store_true", help="print each miss")
    args = ap.parse_args()
    out = run(args.split)
    if args.show:
        for r in out["rows"]:  # type: ignore[attr-defined]
            if not r["contains_answer"]:
                print(f"MISS {r['question']!r} gold={r['gold']!r}\n     {r['answer'][:300]}")
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}, indent=2))
    if args.save:
        dest = HERE / "results" / f"qa-{args.split}-{out['commit']}.json"
        dest.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        print(f"saved {dest}")


if __name__ == "__main__":
    main()
