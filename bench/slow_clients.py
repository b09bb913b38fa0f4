"""Slow clients against `ok serve`: N connections that each send a request line and then a
header line every few seconds, never finishing their headers (slowloris), while one client
searches. Reported: when the server cut the slow ones off (it must, at
serve.header_timeout), and the search latency meanwhile.

    uv run python bench/slow_clients.py --root DIR [--clients 1500] [--every 5] [--bound 10]

`--root` is a knowledge folder (it is served as it is: nothing is written). The server
starts on a free 127.0.0.1 port with serve.header_timeout = `--bound`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(root: Path, port: int, bound: float, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    ok = str(Path(sys.executable).parent / "ok")
    env = {**os.environ, "OK_SERVE_HEADER_TIMEOUT": str(bound), "OK_SERVE_REFRESH_EVERY": "0"}
    proc = subprocess.Popen(
        [ok, "serve", "--root", str(root), "--port", str(port)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            r = httpx.get(f"{url}/ready", timeout=10)
            if r.status_code == 200:
                return proc, r.json()["stacks"][0]
        time.sleep(0.3)
    proc.kill()
    raise SystemExit("the server did not start: " + log.read_text()[-2000:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--clients", type=int, default=1500)
    ap.add_argument("--every", type=float, default=5.0, help="seconds between header lines")
    ap.add_argument("--bound", type=float, default=10.0, help="serve.header_timeout")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.clients + 256)), hard))
    port = _free_port()
    log = Path(f"/tmp/slow-clients-{port}.log")
    proc, stack = _start(Path(args.root).resolve(), port, args.bound, log)
    url = f"http://127.0.0.1:{port}"
    try:
        sel = selectors.DefaultSelector()
        socks: list[socket.socket] = []
        started = time.monotonic()
        for i in range(args.clients):
            c = socket.create_connection(("127.0.0.1", port), timeout=30)
            c.sendall(f"GET /v1/{stack}/status HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())
            c.setblocking(False)
            sel.register(c, selectors.EVENT_READ, i)
            socks.append(c)
        opened = time.monotonic() - started
        closed: dict[int, float] = {}
        latencies: list[float] = []
        last_drip = time.monotonic()
        search = httpx.Client(base_url=url, timeout=60)
        while len(closed) < len(socks) and time.monotonic() - started < args.bound * 10 + 60:
            for key, _ in sel.select(timeout=0.05):
                c = key.fileobj
                assert isinstance(c, socket.socket)
                try:
                    data = c.recv(4096)
                except (ConnectionResetError, BlockingIOError):
                    data = b""
                if not data or b"408" in data:
                    closed.setdefault(key.data, time.monotonic() - started)
                    sel.unregister(c)
            if time.monotonic() - last_drip >= args.every:
                last_drip = time.monotonic()
                for i, c in enumerate(socks):
                    if i not in closed:
                        with contextlib.suppress(OSError):
                            c.send(b"X-Slow: yes\r\n")
            t = time.perf_counter()
            r = search.get(f"/v1/{stack}/search", params={"q": "gene editing", "k": 5})
            latencies.append(time.perf_counter() - t)
            assert r.status_code == 200, r.text
        for c in socks:
            c.close()
        still_open = len(socks) - len(closed)
        times = sorted(closed.values())
        print(
            json.dumps(
                {
                    "clients": args.clients,
                    "header_every_s": args.every,
                    "header_timeout_s": args.bound,
                    "opened_in_s": round(opened, 2),
                    "still_open": still_open,
                    "first_cut_s": round(times[0], 2) if times else None,
                    "last_cut_s": round(times[-1], 2) if times else None,
                    "searches_meanwhile": len(latencies),
                    "search_ms_median": round(statistics.median(latencies) * 1000, 1),
                    "search_ms_max": round(max(latencies) * 1000, 1),
                },
                indent=1,
            )
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)


if __name__ == "__main__":
    main()
