"""How long `ok graph export` takes, and what it writes, on a built folder.

    uv run python bench/export_speed.py FOLDER [--runs 3] [--save NAME]

Runs `ok graph export -o FILE` (the default: entities above the confidence floor) and
`ok graph export --all -o FILE` as a user would, each first with the cache of entity
descriptions emptied (`cold`: every description is worked out from its evidence) and then
`--runs` times with it kept (`warm`, the median is given). Reports the seconds (wall and the
process's CPU), the entities and relationships written and the file's size, with the
1-minute load average before each run (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OK = str(Path(sys.executable).parent / "ok")


def once(folder: Path, out: Path, *extra: str) -> dict:
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [OK, "--root", str(folder), "graph", "export", "-o", str(out), *extra],
        check=True,
        capture_output=True,
        env={**os.environ, "OK_NO_PROGRESS": "1"},
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    b = json.loads(out.read_text())
    return {
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "load": round(load, 1),
        "entities": b["entity_count"],
        "relationships": b["relationship_count"],
        "mb": round(out.stat().st_size / 1e6, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--save", metavar="NAME", help="write bench/results/export_speed-NAME.json")
    args = ap.parse_args()
    chunks = subprocess.run(
        [OK, "--root", str(args.folder), "status", "--json"], capture_output=True, text=True
    )
    counts = json.loads(chunks.stdout).get("counts", {})
    report: dict = {"folder": str(args.folder), "counts": counts}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bundle.aks.json"
        for name, extra in (("floor", ()), ("all", ("--all",))):
            shutil.rmtree(args.folder / ".ok" / "cache" / "descriptions", ignore_errors=True)
            cold = once(args.folder, out, *extra)
            warm = [once(args.folder, out, *extra) for _ in range(args.runs)]
            report[name] = {
                "cold": cold,
                "warm": {
                    **warm[0],
                    "seconds": statistics.median(w["seconds"] for w in warm),
                    "cpu_seconds": statistics.median(w["cpu_seconds"] for w in warm),
                    "runs": [w["seconds"] for w in warm],
                },
            }
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    report["commit"] = commit.stdout.strip()
    print(json.dumps(report, indent=2))
    if args.save:
        dest = HERE / "results" / f"export_speed-{args.save}.json"
        dest.write_text(json.dumps(report, indent=2) + "\n")
        print(f"saved {dest.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
