"""Where a benchmark's numbers came from: the commit, the command, the machine.

Each script adds `provenance.stamp()` to the JSON it prints; with `--save` it also writes
that JSON to `bench/results/<script>-<commit>.json`, which docs/benchmarks.md cites. Saving
refuses a tree with uncommitted changes to tracked files: the commit in the name would
not be the code that ran.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=HERE, capture_output=True, text=True, check=True
    ).stdout.strip()


def commit() -> str:
    return _git("rev-parse", "--short=7", "HEAD")


def dirty() -> bool:
    return bool(_git("status", "--porcelain", "--untracked-files=no"))


def stamp() -> dict[str, Any]:
    """The commit, whether tracked files differ from it, the command line, the date and the
    machine, for the top of a report."""
    script = Path(sys.argv[0]).resolve().relative_to(HERE.parent)
    return {
        "commit": commit(),
        "dirty": dirty(),
        "command": " ".join(["uv run python", str(script), *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "system": platform.system(),
            "load_1min": round(os.getloadavg()[0], 2),
        },
    }


def save(report: dict[str, Any], variant: str = "") -> Path:
    """Write `report` (which carries `stamp()`) to
    bench/results/<script>[-<variant>]-<commit>.json."""
    if report["dirty"]:
        sys.exit("refusing to save: tracked files differ from the commit; commit first")
    name = Path(sys.argv[0]).stem + (f"-{variant}" if variant else "")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}-{report['commit']}.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"saved {path.relative_to(HERE.parent)}", file=sys.stderr)
    return path
