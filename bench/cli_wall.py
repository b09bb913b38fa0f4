"""Whole-process wall time of `ok` commands, each a fresh process as a shell or an agent runs
it: alone (every command loads the CLI, the graph and the model itself) and with the
folder's resident process, which the first command starts (`ok daemon`).

    uv run python bench/cli_wall.py [--calls 30] [--root DIR] [--save]

Uses the ~10k-chunk SciFact folder of bench/mcp_latency.py (bench/.work/mcp-10k, built when
missing) or `--root DIR`, copied first to bench/.work/cli-wall-scratch (the notes added
here never reach the original). Phases, one after the other:

- `alone`: OK_NO_DAEMON=1, no server: `--calls` runs each of `ok search CLAIM --json`,
  `ok grep WORD -c`, `ok mem add TEXT --json`, `ok status --json` and `ok --version`;
- `resident`: the same commands without OK_NO_DAEMON; the first `ok search` starts the
  folder's resident process (`first_call_ms`: the start, a sync that finds nothing to do,
  and the search), then `--calls` runs of each command run in it;
- `imports`: what `python -X importtime` says a routed command's client and `ok grep`
  alone import (milliseconds, summed over the modules).

Each run gets a claim (SciFact's test then train claims) or a note text no other run got.
Prints one JSON object (p50/p95/mean/max in milliseconds; load averages before and
after); `--save` writes it to bench/results/cli_wall-<commit>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mcp_latency  # noqa: E402
from mcp_latency import OK, WORK, stats  # noqa: E402
from serve import Queries, load  # noqa: E402

COMMANDS = ("search", "grep", "mem add", "status", "--version")


def scratch(source: Path) -> Path:
    """A fresh copy of `source` (its files, graph and caches; no claim, lock or log)."""
    root = WORK / "cli-wall-scratch"
    if root.exists():
        _stop(root)
        shutil.rmtree(root)
    shutil.copytree(
        source,
        root,
        symlinks=True,
        ignore=shutil.ignore_patterns("serve.json", "resident.*", "lock", "run"),
    )
    return root


def _stop(root: Path) -> None:
    subprocess.run([OK, "--root", str(root), "daemon", "stop"], capture_output=True, timeout=300)


def argv_of(cmd: str, i: int, qs: Queries, words: list[str]) -> list[str]:
    if cmd == "search":
        return ["search", qs.take(1)[0], "--json"]
    if cmd == "grep":
        return ["grep", "-c", words[i % len(words)]]
    if cmd == "mem add":
        claim = qs.take(1)[0]
        return ["mem", "add", f"Bench note {i}: {claim}", "--json"]
    if cmd == "status":
        return ["status", "--json"]
    return ["--version"]


def timed(root: Path, argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run(
        [OK, *argv], cwd=root, capture_output=True, env=env, timeout=900, stdin=subprocess.DEVNULL
    )
    ms = (time.perf_counter() - t) * 1000
    # search and grep: 1 when nothing matched, not an error
    if r.returncode not in (0, 1) or (r.returncode == 1 and argv[0] not in ("search", "grep")):
        raise SystemExit(f"ok {' '.join(argv)}: exit {r.returncode}\n{r.stderr.decode()}")
    return ms, r.stderr.decode()


def phase(
    root: Path, env: dict[str, str], calls: int, qs: Queries, words: list[str]
) -> dict[str, object]:
    out: dict[str, object] = {"load_before": load()}
    for cmd in COMMANDS:
        times = [timed(root, argv_of(cmd, i, qs, words), env)[0] for i in range(calls)]
        out[cmd] = stats(times)
    out["load_after"] = load()
    return out


def imports(root: Path) -> dict[str, float]:
    """Milliseconds of imports (cumulative, top-level modules summed) of the routed client
    and of `ok grep` run alone."""

    def total(code: str, *argv: str) -> float:
        r = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code, *argv],
            cwd=root,
            capture_output=True,
            text=True,
            env={**os.environ, "OK_NO_DAEMON": "1", "OK_NO_ROUTE": "1"},
            timeout=300,
        )
        us = 0
        for line in r.stderr.splitlines():
            m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)
            if m and not m.group(2).startswith(" "):  # top level: its children are in it
                us += int(m.group(1))
        return round(us / 1000, 1)

    grep = (
        "import sys; sys.argv = ['ok', 'grep', '-c', 'insulin']\n"
        "from openkl.cli.route import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
    )
    return {
        "routed_client_ms": total("import openkl.cli.route"),
        "grep_alone_ms": total(grep),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--root", type=Path, help="a folder to copy (default: the 10k SciFact one)")
    ap.add_argument("--skip-alone", action="store_true", help="only the resident process")
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    source = args.root or mcp_latency.build_folder().root
    root = scratch(source)
    rng = random.Random(7)
    qs = Queries()
    words = sorted({w for q in qs.all for w in re.findall(r"[a-z]{7,}", q.lower())})
    words = rng.sample(words, 50)
    base = {k: v for k, v in os.environ.items() if k not in ("OK_NO_DAEMON", "OK_ROOT")}
    st = json.loads(
        subprocess.run(
            [OK, "status", "--json"],
            cwd=root,
            capture_output=True,
            env={**base, "OK_NO_DAEMON": "1"},
            check=True,
        ).stdout
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    ).stdout.strip()
    out: dict[str, object] = {
        "commit": commit,
        "folder": str(source),
        "chunks": st["counts"]["Chunk"],
        "docs": st["counts"]["Doc"],
        "calls": args.calls,
        "cpus": os.cpu_count(),
    }
    try:
        if not args.skip_alone:
            out["alone"] = phase(root, {**base, "OK_NO_DAEMON": "1"}, args.calls, qs, words)
        first_ms, said = timed(root, argv_of("search", 0, qs, words), base)
        resident = phase(root, base, args.calls, qs, words)
        resident["first_call_ms"] = round(first_ms, 1)
        resident["first_call_said"] = said.strip()
        status = subprocess.run(
            [OK, "daemon", "status", "--json"], cwd=root, capture_output=True, env=base
        )
        mine = [r for r in json.loads(status.stdout) if r.get("this")]
        resident["rss_mb"] = mine[0].get("rss_mb") if mine else None
        out["resident"] = resident
    finally:
        _stop(root)
    out["imports"] = imports(root)
    text = json.dumps(out, indent=2)
    print(text)
    if args.save:
        (HERE / "results" / f"cli_wall-{commit}.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
