"""Writes into a large folder: the whole SciFact corpus ingested at once, then the small
writes of daily use in the folder it made.

    uv run python bench/writes.py [--ok PATH/TO/ok] [--runs 2] [--size] [--save]

Each run starts a fresh folder whose embedding and extraction caches are copied from the
folder `bench/scifact.py` built (run that first), so the model is not timed, then times with
a wall clock, each as its own `ok` process:

- `ok store ingest` of the 5,183 abstracts (10,090 chunks);
- `ok mem add` of a one-sentence note;
- `ok store ingest` of one new short document;
- `ok sync` after one normalized document was edited in place.

`--size` also measures the graph right after the corpus ingest (bench/index_size.py: bytes
per chunk and where they go). `--ok` runs another checkout's `ok` (e.g.
`../base/.venv/bin/ok`) on the same data, so two commits are compared on the same machine
on the same day. `--save` writes bench/results/writes-<commit of that ok>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
CORPUS = WORK / "scifact-corpus" / "corpus"
CACHE = WORK / "scifact" / ".ok" / "cache"


def timed(ok: str, root: Path, *args: str) -> float:
    t = time.perf_counter()
    subprocess.run([ok, "--root", str(root), *args], check=True, stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - t, 2)


def index_size(root: Path) -> dict[str, Any]:
    """The size of the graph the corpus ingest left, and where its bytes go."""
    from index_size import measure

    rep = measure(root)
    keys = ("disk_bytes", "chunks", "bytes_per_chunk", "summary_bytes", "counts")
    return {k: rep[k] for k in keys} | {"related_to_by_docs": rep["related_to_by_docs"]}


def one_run(ok: str, n: int, size: bool = False, keep: bool = False) -> dict[str, Any]:
    root = WORK / f"writes-{n}"
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run([ok, "init", str(root)], check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(root / ".ok" / "cache", ignore_errors=True)
    shutil.copytree(CACHE, root / ".ok" / "cache")
    (root / ".ok" / "cache" / "graph-written").unlink(missing_ok=True)
    out: dict[str, Any] = {"ingest_corpus_s": timed(ok, root, "store", "ingest", str(CORPUS))}
    if size:
        out["index"] = index_size(root)
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
    if not keep:
        shutil.rmtree(root)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ok", default=shutil.which("ok") or "ok", help="the ok to time")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument(
        "--size", action="store_true", help="also measure the graph after the corpus ingest"
    )
    ap.add_argument("--save", action="store_true", help="write bench/results/writes-<commit>.json")
    ap.add_argument("--keep", action="store_true", help="keep the folders (bench/.work/writes-N)")
    a = ap.parse_args()
    if not CORPUS.exists() or not CACHE.exists():
        sys.exit("run `uv run python bench/scifact.py` first: it writes the corpus and caches")
    rev = subprocess.run(
        ["git", "-C", str(Path(a.ok).resolve().parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    load = os.getloadavg()
    runs = [one_run(a.ok, n, a.size, a.keep) for n in range(a.runs)]
    timed_keys = [k for k in runs[0] if k.endswith("_s")]
    text = json.dumps(
        {
            "ok": a.ok,
            "commit": rev or None,
            "load_before": [round(x, 2) for x in load],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "runs": runs,
            "mean": {k: round(sum(r[k] for r in runs) / len(runs), 2) for k in timed_keys},
        },
        indent=1,
    )
    print(text)
    if a.save:
        (HERE / "results" / f"writes-{rev}.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
