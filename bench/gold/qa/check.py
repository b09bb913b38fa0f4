"""Check the question set against its documents, and the matching rule the scores use.

    uv run python bench/gold/qa/check.py [--write]

Fails (exit 1) when a gold span or an alternative does not occur, as whole words, in its
document; when a question's split is not its document's split in split.json; when an
unanswerable question has an answer; or when ids repeat. Reports the gold spans that also
occur in other documents of the set; with --write it records them in each question's
`also_in` (and drops `also_in` where there is none).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "questions.jsonl"
SPLIT = HERE / "split.json"
DOCS = HERE / "docs"
MAX_WORDS = 12


def norm(text: str) -> str:
    """Lower-cased, `[N]` citation markers dropped, white space collapsed."""
    return " ".join(re.sub(r"\[\d+\]", " ", text).split()).lower()


def holds(text: str, span: str) -> bool:
    """True when `span` occurs in `text` as whole words (both normalized first): not
    preceded or followed by a letter or digit."""
    s = norm(span)
    if not s:
        return False
    return re.search(r"(?<![^\W_])" + re.escape(s) + r"(?![^\W_])", norm(text)) is not None


def spans(q: dict) -> list[str]:
    """The gold span and its alternatives."""
    return [q["answer"], *q.get("alternatives", [])] if q["answer"] else []


def load() -> list[dict]:
    return [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]


def problems(qs: list[dict], texts: dict[str, str], split: dict[str, str]) -> list[str]:
    out = []
    for qid, n in Counter(q["id"] for q in qs).items():
        if n > 1:
            out.append(f"{qid}: id used {n} times")
    for q in qs:
        where = f"{q['id']} ({q['doc']})"
        if q["doc"] not in texts:
            out.append(f"{where}: no such document")
            continue
        if split.get(q["doc"]) != q["split"]:
            out.append(f"{where}: split {q['split']} but the document is {split.get(q['doc'])}")
        if q["doc"].split("/")[0] != q["kind"]:
            out.append(f"{where}: kind {q['kind']} does not match the document's folder")
        if not q["answerable"]:
            if q["answer"] or q.get("alternatives"):
                out.append(f"{where}: unanswerable but has an answer")
            continue
        if not q["answer"]:
            out.append(f"{where}: answerable but the answer is empty")
        for s in spans(q):
            if not holds(texts[q["doc"]], s):
                out.append(f"{where}: {s!r} is not in the document")
            if len(s.split()) > MAX_WORDS:
                out.append(f"{where}: {s!r} is longer than {MAX_WORDS} words")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="record also_in in questions.jsonl")
    args = ap.parse_args()
    texts = {p.relative_to(DOCS).as_posix(): p.read_text() for p in DOCS.rglob("*") if p.is_file()}
    split = json.loads(SPLIT.read_text())["split"]
    qs = load()
    bad = problems(qs, texts, split)
    for line in bad:
        print(line)
    shared = 0
    for q in qs:
        others = sorted(
            d for d, t in texts.items() if d != q["doc"] and q["answer"] and holds(t, q["answer"])
        )
        q.pop("also_in", None)
        if others:
            q["also_in"] = others
            shared += 1
            print(f"note {q['id']}: {q['answer']!r} also in {', '.join(others)}")
    kinds = Counter((q["kind"], q["split"], q["answerable"]) for q in qs)
    print(f"{len(qs)} questions; {shared} gold spans also occur in another document")
    for (kind, sp, ans), n in sorted(kinds.items()):
        print(f"  {kind:13} {sp:4} {'answerable' if ans else 'unanswerable':12} {n}")
    if args.write and not bad:
        QUESTIONS.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in qs))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
