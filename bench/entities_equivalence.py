"""Entity output equivalence: a speed change to extraction or consolidation must not change
what the entity graph holds.

    .venv/bin/python bench/entities_equivalence.py --save     # record the reference
    .venv/bin/python bench/entities_equivalence.py            # compare against it
    .venv/bin/python bench/entities_equivalence.py --only gold,examples

Each corpus (tests/gold/docs, tests/gold/dev/docs, tests/gold/dev2/docs, examples/docs and the 500-document SciFact speed corpus, if bench/speed.py made it) is ingested into a fresh
folder with the clock pinned. Recorded: `ok graph export --format aks --min-confidence 0`
(without the compile time), `ok graph entities --json --min-confidence 0`, and every
MENTIONS and RELATED edge. Embeddings are seeded from a cache kept next to the reference so
a rerun spends its time on entities, not on the model; extraction results are never reused.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

WORK = HERE / ".work" / "entities-equiv"
CORPORA = {
    "gold": REPO / "tests" / "gold" / "docs",
    "dev": REPO / "tests" / "gold" / "dev" / "docs",
    "dev2": REPO / "tests" / "gold" / "dev2" / "docs",
    "examples": REPO / "examples" / "docs",
    "scifact500": HERE / ".work" / "speed-corpus-500",
}


def _run_ok(*args: str) -> str:
    from openkl.cli.root import run

    out_b, err_b = io.BytesIO(), io.BytesIO()
    old = sys.stdout, sys.stderr
    wrappers = (
        io.TextIOWrapper(out_b, encoding="utf-8", write_through=True),
        io.TextIOWrapper(err_b, encoding="utf-8", write_through=True),
    )
    sys.stdout, sys.stderr = wrappers
    try:
        code = run(list(args))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = old
        for w in wrappers:
            w.detach()
    if code:
        raise SystemExit(f"ok {' '.join(args)} failed: {err_b.getvalue().decode()}")
    return out_b.getvalue().decode()


def snapshot(name: str, src: Path) -> tuple[dict[str, str], float]:
    """Ingest `src` into a fresh folder; the recorded outputs and the ingest seconds."""
    from openkl.collect.store import ingest_paths
    from openkl.files.folder import Folder
    from openkl.sync.indexer import open_graph

    root = WORK / "kf" / name
    shutil.rmtree(root, ignore_errors=True)
    folder = Folder.init(root)
    emb = WORK / "emb" / f"{name}.sqlite"
    if emb.exists():
        shutil.copyfile(emb, folder.cache_dir / "embeddings.sqlite")
    t = time.perf_counter()
    with folder.write_lock("bench"):
        ingest_paths(folder, [str(src)])
    dt = time.perf_counter() - t
    if not emb.exists():
        emb.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder.cache_dir / "embeddings.sqlite", emb)
    os.environ["OK_ROOT"] = str(root)
    bundle = json.loads(
        _run_ok("graph", "export", "--format", "aks", "--min-confidence", "0", "-o", "-")
    )
    bundle.pop("compiled_at", None)
    out = {
        "aks.json": json.dumps(bundle, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
        "entities.json": _run_ok("graph", "entities", "--json", "--min-confidence", "0"),
    }
    with open_graph(folder) as g:
        rows = g.query(
            "MATCH (a)-[m:MENTIONS]->(e:Entity) RETURN a.id AS x, e.id AS y,"
            " m.confidence AS c ORDER BY x, y"
        )
        out["mentions.tsv"] = "".join(f"{r['x']}\t{r['y']}\t{r['c']!r}\n" for r in rows)
        rows = g.query(
            "MATCH (a:Entity)-[r:RELATED]->(b:Entity) RETURN a.id AS x, b.id AS y,"
            " r.type AS t, r.confidence AS c, r.evidence AS ev, r.docs AS docs,"
            " r.verified AS v, r.source_kind AS sk ORDER BY x, y, t"
        )
        out["related.tsv"] = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
        rows = g.query("MATCH (x:Extraction) RETURN x.id AS id, x.data AS d ORDER BY id")
        out["extractions.tsv"] = "".join(f"{r['id']}\t{r['d']}\n" for r in rows)
    return out, dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", action="store_true", help="record the reference")
    ap.add_argument("--only", default="", help="comma-separated corpus names")
    a = ap.parse_args()
    os.environ["OK_NO_PROGRESS"] = "1"
    os.environ["OK_NOW"] = "2025-01-01T00:00:00Z"
    names = [n for n in CORPORA if not a.only or n in a.only.split(",")]
    failed = []
    for name in names:
        src = CORPORA[name]
        if not src.exists():
            print(f"{name}: {src} is missing, skipped", file=sys.stderr)
            continue
        out, dt = snapshot(name, src)
        ref = WORK / "ref" / name
        if a.save:
            ref.mkdir(parents=True, exist_ok=True)
            for fname, text in out.items():
                (ref / fname).write_text(text, encoding="utf-8")
            print(f"{name}: reference saved ({dt:.1f} s ingest)", file=sys.stderr)
            continue
        bad = []
        for fname, text in out.items():
            want = (ref / fname).read_text(encoding="utf-8")
            if want != text:
                bad.append(fname)
                diff = difflib.unified_diff(
                    want.splitlines(),
                    text.splitlines(),
                    f"ref/{fname}",
                    f"now/{fname}",
                    lineterm="",
                    n=1,
                )
                print("\n".join(list(diff)[:40]), file=sys.stderr)
        digest = hashlib.sha256("".join(out.values()).encode()).hexdigest()[:12]
        print(
            f"{name}: {'DIFFERS in ' + ', '.join(bad) if bad else 'identical'}"
            f" ({digest}, {dt:.1f} s ingest)",
            file=sys.stderr,
        )
        if bad:
            failed.append(name)
    if failed:
        raise SystemExit(f"outputs differ: {', '.join(failed)}")


if __name__ == "__main__":
    main()
