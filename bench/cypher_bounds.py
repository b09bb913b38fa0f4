"""A caller's hostile Cypher against `ok serve`: how long until it is stopped, and what the
server's memory does before, during and after, on each surface (HTTP, MCP over HTTP, the
routed CLI), while another client keeps searching.

    uv run python bench/cypher_bounds.py [--root DIR] [--timeout 5] [--save]

The folder (default: a copy of examples/docs, indexed) is served with serve.timeout set to
`--timeout`. A sampler reads the resident memory of the server process, and of the query
processes it starts, every 20 ms. For each surface it sends two queries:

- `memory`: `UNWIND range(1, 300000000) AS x RETURN sum(x)`, which once grew a server to
  the machine's memory;
- `time`: rows without end and no memory (two UNWINDs of 200,000 filtered), which only the
  time bound stops.

Meanwhile one client thread sends `GET /v1/{stack}/search` in a loop; its latencies and
errors during each query are reported. Prints one JSON object; `--save` also writes it to
bench/results/cypher_bounds-<commit>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from serve import OK, start_server  # noqa: E402

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")

HUGE = "UNWIND range(1, 300000000) AS x RETURN sum(x) AS s"
ENDLESS = (
    "UNWIND range(1, 200000) AS a UNWIND range(1, 200000) AS b "
    "WITH a, b WHERE a % 7 = b % 5 RETURN sum(a + b) AS n"
)


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for t in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (t / "children").read_text().split()]
    except OSError:
        pass
    return out


class Sampler(threading.Thread):
    """The server's resident memory, and its query processes', every 20 ms."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.samples: list[tuple[float, float, float]] = []  # (t, server MiB, workers MiB)
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            kids = sum(rss_mb(c) for c in children(self.pid))
            self.samples.append((time.monotonic(), rss_mb(self.pid), kids))
            time.sleep(0.02)

    def between(self, a: float, b: float) -> dict[str, float]:
        got = [s for s in self.samples if a <= s[0] <= b] or self.samples[-1:]
        return {
            "server_max_mb": round(max(s[1] for s in got), 1),
            "workers_max_mb": round(max(s[2] for s in got), 1),
        }

    def now(self) -> float:
        return round(self.samples[-1][1], 1)


class Bystander(threading.Thread):
    """Another caller searching all along."""

    def __init__(self, url: str, stack: str) -> None:
        super().__init__(daemon=True)
        self.url, self.stack = url, stack
        self.log: list[tuple[float, float, int]] = []  # (started, seconds, status)
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=120) as h:
            while not self.stop.is_set():
                t = time.monotonic()
                try:
                    status = h.get(f"/v1/{self.stack}/search", params={"q": "gene editing"})
                    code = status.status_code
                except httpx.HTTPError:
                    code = 0
                self.log.append((t, time.monotonic() - t, code))

    def between(self, a: float, b: float) -> dict[str, Any]:
        got = [x for x in self.log if a <= x[0] <= b]
        ms = sorted(x[1] * 1000 for x in got)
        return {
            "searches": len(got),
            "errors": sum(1 for x in got if x[2] != 200),
            "p50_ms": round(statistics.median(ms), 1) if ms else None,
            "max_ms": round(ms[-1], 1) if ms else None,
        }


def over_http(url: str, stack: str, query: str) -> tuple[int, str]:
    r = httpx.post(f"{url}/v1/{stack}/cypher", json={"query": query}, timeout=300)
    return r.status_code, r.json().get("error", "") if r.status_code != 200 else "ok"


def over_mcp(url: str, stack: str, query: str) -> tuple[int, str]:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> tuple[int, str]:
        async with httpx2.AsyncClient(timeout=300) as http:
            transport = streamable_http_client(f"{url}/mcp", http_client=http)
            async with Client(transport, read_timeout_seconds=300) as client:
                r = await client.call_tool("graph_cypher", {"query": query, "stack": stack})
                return (1 if r.is_error else 0), r.content[0].text[:200]

    return anyio.run(main)


def routed(root: Path, query: str, seconds: float) -> tuple[int, str]:
    """`ok graph cypher` run in the server; its time limit is graph.query_timeout, set to
    serve.timeout's value here."""
    p = subprocess.run(
        [OK, "--root", str(root), "graph", "cypher", query],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OK_GRAPH_QUERY_TIMEOUT": str(seconds)},
    )
    return p.returncode, (p.stderr or p.stdout).strip()[:200]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, help="a knowledge folder to serve (default: examples)")
    ap.add_argument("--timeout", type=float, default=5.0, help="serve.timeout in seconds")
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    work = HERE / ".work" / "cypher-bounds"
    root = args.root
    if root is None:
        root = work / "kb"
        if not (root / ".ok").exists():
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            env = {**os.environ, "OK_NO_PROGRESS": "1"}
            subprocess.run([OK, "init", str(root)], check=True, env=env, capture_output=True)
            subprocess.run(
                [OK, "--root", str(root), "store", "ingest", str(HERE.parent / "examples/docs")],
                check=True,
                env=env,
                capture_output=True,
            )
    proc, port, stack, log = start_server(
        root, "cypher-bounds", OK_SERVE_TIMEOUT=str(args.timeout), OK_SERVE_RATE_LIMIT="0"
    )
    url = f"http://127.0.0.1:{port}"
    sampler = Sampler(proc.pid)
    sampler.start()
    bystander = Bystander(url, stack)
    bystander.start()
    out: dict[str, Any] = {"serve_timeout_s": args.timeout, "folder": str(root), "runs": []}
    try:
        time.sleep(3)
        out["server_rss_baseline_mb"] = sampler.now()
        surfaces = {
            "http": lambda q: over_http(url, stack, q),
            "mcp_http": lambda q: over_mcp(url, stack, q),
            "routed_cli": lambda q: routed(root, q, args.timeout),
        }
        for surface, send in surfaces.items():
            for kind, query in (("memory", HUGE), ("time", ENDLESS)):
                before = sampler.now()
                t0 = time.monotonic()
                status, said = send(query)
                t1 = time.monotonic()
                time.sleep(2)
                run = {
                    "surface": surface,
                    "query": kind,
                    "answer": status,
                    "said": said,
                    "stopped_after_s": round(t1 - t0, 2),
                    "server_rss_before_mb": before,
                    **sampler.between(t0, t1),
                    "server_rss_after_mb": sampler.now(),
                    "other_caller": bystander.between(t0, t1),
                }
                out["runs"].append(run)
                print(json.dumps(run), file=sys.stderr)
        out["server_rss_end_mb"] = sampler.now()
    finally:
        bystander.stop.set()
        sampler.stop.set()
        proc.terminate()
        proc.wait(60)
    out["loadavg"] = os.getloadavg()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    ).stdout.strip()
    out["commit"] = commit
    print(json.dumps(out, indent=2))
    if args.save:
        (HERE / "results" / f"cypher_bounds-{commit}.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
