"""A fast loop for tuning extractive answers on the dev half of bench/gold/qa.

    uv run python bench/qa_tune.py [--split dev] [--show] [--kind KIND]

Builds the folder of bench/qa_gold.py once (kept in bench/.work/qa), retrieves each
question's passages once (kept beside it, per commit of the retrieval code: delete the file
after changing retrieval), then answers from those passages with `ask.answer`, so a change to
how sentences and spans are chosen is measured in seconds. Scores as bench/qa_gold.py does
(citations are not verified here; qa_gold.py does that). Tune on dev; report test with
bench/qa_gold.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE / "gold" / "qa"))

from check import holds, norm, spans  # noqa: E402
from qa_gold import QUESTIONS, build, cited_doc, summarize  # noqa: E402

from openkl.files.folder import Folder  # noqa: E402
from openkl.graph.indexing import embedder  # noqa: E402
from openkl.knowledge import ask as ask_mod  # noqa: E402
from openkl.ops.read import reading  # noqa: E402

WORK = HERE / ".work"


def folder() -> Folder:
    root = WORK / "qa" / "kb"
    if not (root / ".ok").exists():
        root.parent.mkdir(parents=True, exist_ok=True)
        return build(root)
    return Folder(root)


def hits_of(f: Folder, items: list[dict], split: str) -> dict[str, list]:
    path = WORK / "qa" / f"hits-{split}.json"
    if path.exists():
        return json.loads(path.read_text())
    emb = embedder(f)
    out = {}
    with reading(f, None) as g:
        for q in items:
            out[q["id"]] = ask_mod.retrieve(f, g, q["question"], embedder=emb).hits
    path.write_text(json.dumps(out))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="dev", choices=["dev", "test"])
    ap.add_argument("--kind")
    ap.add_argument("--show", action="store_true")
    args = ap.parse_args()
    items = [json.loads(x) for x in QUESTIONS.read_text().splitlines() if x.strip()]
    items = [q for q in items if q["split"] == args.split]
    f = folder()
    hits = hits_of(f, items, args.split)
    emb = embedder(f)
    rows = []
    t0 = time.perf_counter()
    for q in items:
        if args.kind and q["kind"] != args.kind:
            continue
        a = ask_mod.answer(f, q["question"], hits[q["id"]], embedder=emb)
        gold = spans(q)
        quotes = [c["quote"] for c in a["citations"]]
        row = {
            "id": q["id"],
            "kind": q["kind"],
            "answerable": q["answerable"],
            "insufficient": a["insufficient"],
            "words": len(norm(a["answer"]).split()),
            "seconds": 0.0,
            "citations_verify": None,
            "question": q["question"],
            "gold": q["answer"],
            "answer": a["answer"],
        }
        if q["answerable"]:
            row["contains_answer"] = any(holds(a["answer"], s) for s in gold)
            row["first_cite_gold"] = bool(quotes) and any(holds(quotes[0], s) for s in gold)
            row["any_cite_gold"] = any(holds(x, s) for x in quotes for s in gold)
            row["first_cite_doc"] = bool(quotes) and cited_doc(a["citations"][0]) == q["doc"]
            # the gold span is somewhere in the retrieved passages
            row["retrieved_gold"] = any(holds(h["quote"], s) for h in hits[q["id"]] for s in gold)
        rows.append(row)
    s = summarize(rows)
    s["retrieved_gold"] = round(
        sum(r.get("retrieved_gold", False) for r in rows) / max(1, s["answerable"]), 3
    )
    s.pop("mean_seconds")
    s.pop("citations_verify")
    if args.show:
        for r in rows:
            if r["answerable"] and not r["contains_answer"]:
                print(f"MISS {r['id']} {r['question']!r} gold={r['gold']!r}")
                print(f"     {r['answer'][:400]!r}")
    print(json.dumps(s), f"{time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
