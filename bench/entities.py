"""Entity extraction benchmark: local extractor throughput and its share of ingest time.

    .venv/bin/python bench/entities.py [--chunks 10000] [--ingest-docs 300] [--gold] [--save]

1. Throughput: the local extractor over N chunk-sized passages made from the example and
   gold documents (each copy numbered, so no two texts are alike and nothing is cached).
2. Share of ingest: a real `ingest` of generated documents into a fresh folder, timing the
   entity hook (extraction + consolidation) against the whole ingest (chunking, embedding,
   loading). Embeddings are cold, as on a first ingest.
3. --gold: precision/recall of the entity graph on the development sets, all seen while the
   extractor was tuned (tests/gold/docs, tests/gold/dev, tests/gold/dev2, tests/gold/mixed),
   and on the held-out sets (tests/gold/heldout, tests/gold/mixed_heldout), which nothing
   else runs the extractor on; see tests/gold/evaluate.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests" / "gold"))

import provenance  # noqa: E402

from openkl.collect.store import ingest_paths  # noqa: E402
from openkl.entities.local import extract  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402
from openkl.sync import indexer  # noqa: E402

SOURCES = sorted((HERE.parent / "examples" / "docs").glob("*.m*")) + sorted(
    (HERE.parent / "tests" / "gold" / "docs").glob("*")
)


def passages(n: int) -> list[str]:
    paras = []
    for p in SOURCES:
        paras += [x.strip() for x in p.read_text().split("\n\n") if len(x.strip()) > 200]
    out: list[str] = []
    i = 0
    while len(out) < n:
        a, b = paras[i % len(paras)], paras[(i * 7 + 3) % len(paras)]
        out.append(f"{a}\n\nRevision {i} of note {i % 97}.\n\n{b}")
        i += 1
    return out


def throughput(n: int) -> dict[str, float]:
    texts = passages(n)
    t = time.perf_counter()
    for x in texts:
        extract(x)
    dt = time.perf_counter() - t
    return {
        "chunks": n,
        "seconds": round(dt, 2),
        "chunks_per_s": round(n / dt, 1),
        "avg_chars": round(sum(map(len, texts)) / n),
    }


def ingest_share(docs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(
        dir=str(HERE / ".work") if (HERE / ".work").exists() else None
    ) as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        texts = passages(docs * 4)
        for d in range(docs):
            (src / f"doc{d:05d}.md").write_text(
                f"# Document {d}\n\n" + "\n\n".join(texts[d * 4 : (d + 1) * 4])
            )
        folder = Folder.init(Path(tmp) / "kf")
        spent = {"entities": 0.0}
        hook = indexer.post_index_hooks[0]

        def timed(*a: object) -> None:
            t0 = time.perf_counter()
            hook(*a)
            spent["entities"] += time.perf_counter() - t0

        indexer.post_index_hooks[0] = timed
        try:
            t = time.perf_counter()
            with folder.write_lock("bench"):
                rep = ingest_paths(folder, [str(src)])
            total = time.perf_counter() - t
        finally:
            indexer.post_index_hooks[0] = hook
        return {
            "docs": docs,
            "chunks": rep.chunks,
            "ingest_s": round(total, 2),
            "entities_s": round(spent["entities"], 2),
            "share_of_ingest": round(spent["entities"] / total, 3),
            "slowdown_vs_without": round(spent["entities"] / (total - spent["entities"]), 3),
        }


def gold(which: str = "gold") -> dict[float, Any]:
    """Scores on a gold set: "gold", "dev", "dev2" and "mixed" are for tuning, "heldout" and
    "mixed_heldout" never are."""
    from evaluate import DEV, DEV2, DOCS, GOLD, HELDOUT, MIXED, MIXED_HELDOUT, evaluate

    docs, path = {
        "gold": (DOCS, GOLD),
        "dev": (DEV / "docs", DEV / "gold.json"),
        "dev2": (DEV2 / "docs", DEV2 / "gold.json"),
        "heldout": (HELDOUT / "docs", HELDOUT / "gold.json"),
        "mixed": (MIXED / "docs", MIXED / "gold.json"),
        "mixed_heldout": (MIXED_HELDOUT / "docs", MIXED_HELDOUT / "gold.json"),
    }[which]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Folder.init(Path(tmp) / "kf")
        with folder.write_lock("bench"):
            ingest_paths(folder, [str(docs)])
        with indexer.open_graph(folder) as g:
            return {th: evaluate(folder, g, th, path) for th in (0.4, 0.5)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=10000)
    ap.add_argument("--ingest-docs", type=int, default=300)
    ap.add_argument("--gold", action="store_true")
    ap.add_argument(
        "--sets", default="gold,dev,dev2,mixed,heldout,mixed_heldout", help="gold sets for --gold"
    )
    ap.add_argument(
        "--save", action="store_true", help="write bench/results/entities-<commit>.json"
    )
    a = ap.parse_args()
    out: dict[str, Any] = provenance.stamp()
    out["throughput"] = throughput(a.chunks)
    print(json.dumps(out["throughput"]), file=sys.stderr)
    if a.ingest_docs:
        out["ingest"] = ingest_share(a.ingest_docs)
        print(json.dumps(out["ingest"]), file=sys.stderr)
    if a.gold:
        for name in a.sets.split(","):
            res = gold(name)
            out[name] = {th: {k: v for k, v in r.items() if k != "docs"} for th, r in res.items()}
    print(json.dumps(out, indent=2))
    if a.save:
        provenance.save(out)


if __name__ == "__main__":
    main()
