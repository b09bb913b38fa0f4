"""Writes into a large folder: the whole SciFact corpus ingested at once, then the small
writes of daily use in the folder it made.

    uv run python bench/writes.py [--ok PATH/TO/ok] [--runs 2]

Each run starts a fresh folder whose embedding and extraction caches are copied from the
folder `bench/scifact.py` built (run that first), so the model is not timed, then times with
a wall clock, each as its own `ok` process:

- `ok store ingest` of the 5,183 abstracts (10,090 chunks);
- `ok mem add` of a one-sentence note;
- `ok store ingest` of one new short document;
- `ok sync` after one normalized document was edited in place.

`--ok` runs another checkout's `ok` (e.g. `../base/.venv/bin/ok`) on the same data, so two
commits are compared on the same machine on the same day.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
CORPUS = WORK / "scifact-corpus" / "corpus"
CACHE = WORK / "scifact" / ".ok" / "cache"


def timed(ok: str, root: Path, *args: str) -> float:
    t = time.perf_counter()
    subprocess.run([ok, "--root", str(root), *args], check=True, stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - t, 2)


def one_run(ok: str, n: int) -> dict[str, float]:
    root = WORK / f"writes-{n}"
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run([ok, "init", str(root)], check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(root / ".ok" / "cache", ignore_errors=True)
    shutil.copytree(CACHE, root / ".ok" / "cache")
    (root / ".ok" / "cache" / "graph-written").unlink(missing_ok=True)
    out = {"ingest_corpus_s": timed(ok, root, "store", "ingest", str(CORPUS))}
    out["mem_add_s"] = timed(
        ok, root, "mem", "add", f"Carol met Dave at the insulin conference in Paris ({n})."
    )
    doc = WORK / f"writes-doc-{n}.txt"
    doc.write_text(
        f"Vitamin D deficiency and bone density in elderly women ({n}). Calcium "
        "supplements were given to patients with osteoporosis.\n"
    )
    out["ingest_one_s"] = timed(ok, root, "store", "ingest", str(doc))
    edited = sorted((root / "store" / "normalized").rglob("*.ok.md"))[7]
    edited.write_text(edited.read_text() + "\nInsulin resistance was measured in the cohort.\n")
    out["sync_one_edit_s"] = timed(ok, root, "sync")
    shutil.rmtree(root)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ok", default=shutil.which("ok") or "ok", help="the ok to time")
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    if not CORPUS.exists() or not CACHE.exists():
        sys.exit("run `uv run python bench/scifact.py` first: it writes the corpus and caches")
    rev = subprocess.run(
        ["git", "-C", str(Path(a.ok).resolve().parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    runs = [one_run(a.ok, n) for n in range(a.runs)]
    print(
        json.dumps(
            {
                "ok": a.ok,
                "commit": rev or None,
                "runs": runs,
                "mean": {k: round(sum(r[k] for r in runs) / len(runs), 2) for k in runs[0]},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
