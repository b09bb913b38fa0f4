"""`ok serve` under load: HTTP search latency with 1, 8 and 32 clients, a routed `ok search`
process against the same command alone, and documents uploaded while clients search.

    uv run python bench/serve.py [--requests 400] [--uploads 100] [--cli-calls 20] [--save]

Uses the ~10k-chunk SciFact folder of bench/mcp_latency.py (bench/.work/mcp-10k, built
when missing) or `--root DIR`. It starts `ok serve --root DIR` on a free 127.0.0.1 port,
warms it, then:

- `http_search`: `--requests` `GET /v1/{stack}/search` calls (SciFact test claims, k=10)
  spread over 1, 8 and 32 client threads, each with its own keep-alive connection;
  latency per request and requests per second for each client count;
- `routed_cli` / `alone_cli`: `ok search CLAIM --json` in a fresh process, `--cli-calls`
  times with the server running (the command runs in the server) and, after it stops,
  with no server (the process opens the graph and loads the model itself);
- `ingest_while_searching`: 8 client threads search while one uploads `--uploads` new
  abstracts (SciFact corpus documents with a changed title, so each is a new document)
  one by one with `POST /v1/{stack}/documents`; search latency during the uploads and the
  upload rate. The uploaded documents are removed afterwards.

Prints one JSON object (p50/p95/mean/max in milliseconds).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mcp_latency  # noqa: E402
import provenance  # noqa: E402
from mcp_latency import OK, queries, stats  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    def __init__(self, root: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        log = (root.parent / f"serve-bench-{self.port}.log").open("w")
        self.proc = subprocess.Popen(
            [OK, "serve", "--root", str(root), "--port", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "OK_NO_PROGRESS": "1"},
        )
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"ok serve exited with {self.proc.returncode}: see {log.name}")
            try:
                r = httpx.get(self.url + "/ready", timeout=5)
                if r.status_code == 200:
                    self.stack = r.json()["stacks"][0]
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise SystemExit("ok serve did not become ready in 600 s")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=300)


def _searchers(url: str, stack: str, qs: list[str], clients: int, stop: threading.Event | None):
    """`clients` threads searching `qs` round-robin (until `stop` when given, else once
    through `qs` between them); returns (threads, times in ms of the answered requests,
    count of the refused ones by status)."""
    times: list[float] = []
    errors: dict[int, int] = {}
    lock = threading.Lock()
    nxt = iter(range(10**9))

    def work() -> None:
        with httpx.Client(base_url=url, timeout=300) as c:
            while True:
                with lock:
                    i = next(nxt)
                if stop is None and i >= len(qs):
                    return
                if stop is not None and stop.is_set():
                    return
                t = time.perf_counter()
                r = c.get(f"/v1/{stack}/search", params={"q": qs[i % len(qs)], "k": 10})
                ms = (time.perf_counter() - t) * 1000
                with lock:
                    if r.status_code == 200:
                        times.append(ms)
                    else:  # counted, not timed: a refusal is no answer
                        errors[r.status_code] = errors.get(r.status_code, 0) + 1

    threads = [threading.Thread(target=work, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    return threads, times, errors


def http_search(s: Serve, qs: list[str], clients: int) -> dict:
    t0 = time.perf_counter()
    threads, times, errors = _searchers(s.url, s.stack, qs, clients, None)
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {
        "clients": clients,
        **stats(times),
        "requests_per_s": round(len(times) / wall, 1),
        "refused": errors,
    }


def cli_search(root: Path, qs: list[str], env: dict[str, str]) -> dict:
    times = []
    for q in qs:
        t = time.perf_counter()
        r = subprocess.run(
            [OK, "search", q, "-k", "10", "--json"],
            capture_output=True,
            env={**os.environ, "OK_ROOT": str(root), "OK_NO_PROGRESS": "1", **env},
        )
        times.append((time.perf_counter() - t) * 1000)
        if r.returncode != 0:
            raise SystemExit(f"ok search failed: {r.stderr.decode()[:300]}")
    return stats(times)


def _uploads(n: int) -> list[tuple[str, bytes]]:
    corpus = Path(mcp_latency.WORK) / "scifact-corpus" / "corpus"
    files = sorted(corpus.iterdir())[:n]
    return [(f"bench-upload-{i}.md", b"# Uploaded: " + f.read_bytes()) for i, f in enumerate(files)]


def ingest_while_searching(s: Serve, qs: list[str], uploads: int) -> dict:
    docs = _uploads(uploads)
    stop = threading.Event()
    threads, times, errors = _searchers(s.url, s.stack, qs, 8, stop)
    up: list[float] = []
    ids: list[str] = []
    t0 = time.perf_counter()
    with httpx.Client(base_url=s.url, timeout=600) as c:
        for name, body in docs:
            t = time.perf_counter()
            r = c.post(f"/v1/{s.stack}/documents", params={"name": name}, content=body)
            up.append((time.perf_counter() - t) * 1000)
            if r.status_code != 201:
                raise SystemExit(f"upload answered {r.status_code}: {r.text[:200]}")
            ids += [d["id"] for d in r.json().get("added", []) if isinstance(d, dict)]
        wall = time.perf_counter() - t0
        stop.set()
        for t in threads:
            t.join()
        for doc in ids:
            c.delete(f"/v1/{s.stack}/documents/{doc}")
    return {
        "uploads": len(docs),
        "upload": stats(up),
        "uploads_per_s": round(len(docs) / wall, 2),
        "search_during": {**stats(times), "refused": errors},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root", type=Path, help="a folder to serve (default: the 10k SciFact one)")
    ap.add_argument("--requests", type=int, default=400, help="HTTP searches per client count")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--uploads", type=int, default=100)
    ap.add_argument("--cli-calls", type=int, default=20)
    ap.add_argument("--save", action="store_true", help="write bench/results/serve-<commit>.json")
    args = ap.parse_args()
    root = args.root or mcp_latency.build_folder().root
    qs = queries(max(args.requests, args.cli_calls))
    out: dict = {**provenance.stamp(), "folder": str(root)}
    s = Serve(root)
    try:
        with httpx.Client(base_url=s.url, timeout=300) as c:
            st = c.get(f"/v1/{s.stack}/status").json()
            out["chunks"] = st.get("chunks")
            for q in qs[:5]:
                c.get(f"/v1/{s.stack}/search", params={"q": q, "k": 10})
        out["http_search"] = [
            http_search(s, qs[: args.requests], int(n)) for n in args.clients.split(",")
        ]
        out["routed_cli"] = cli_search(root, qs[: args.cli_calls], {})
        if args.uploads:
            out["ingest_while_searching"] = ingest_while_searching(s, qs, args.uploads)
    finally:
        s.stop()
    out["alone_cli"] = cli_search(root, qs[: args.cli_calls], {"OK_NO_ROUTE": "1"})
    print(json.dumps(out, indent=2))
    if args.save:
        provenance.save(out)


if __name__ == "__main__":
    main()
