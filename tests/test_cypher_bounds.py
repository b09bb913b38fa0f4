"""A caller's Cypher is held to a time, memory and output bound that the server enforces:
over HTTP with a read key, over MCP, through the routed CLI and by `ok graph cypher` alone.

The query that once grew a server to the machine's memory (`UNWIND range(1, 300000000)`)
fails at once with a 4xx, the server's own memory stays where it was, its other callers
are served meanwhile, and no query process outlives its request."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.mcp import call, fail, serve
from helpers.run import OK_BIN, run_ok, until
from helpers.serve import Server, mcp_http

HUGE = "UNWIND range(1, 300000000) AS x RETURN sum(x) AS s"
# rows without end and no memory to speak of: only the time bound stops it
ENDLESS = (
    "UNWIND range(1, 200000) AS a UNWIND range(1, 200000) AS b "
    "WITH a, b WHERE a % 7 = b % 5 RETURN sum(a + b) AS n"
)
WIDE = "RETURN repeat('a', 20000000) AS s"
# a list that doubles clause by clause, past any memory
DOUBLING = (
    "WITH range(1, 1000) AS l "
    + " ".join("WITH list_concat(l, l) AS l" for _ in range(24))
    + " RETURN size(l) AS n"
)


def rss_mb(pid: int) -> float:
    """Resident memory of process `pid` and its children, in MiB."""
    total = 0.0
    for p in [pid, *children(pid)]:
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) / 1024
    return total


def children(pid: int) -> list[int]:
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        return [int(c) for t in tasks for c in (t / "children").read_text().split()]
    except OSError:
        return []


def workers(pid: int) -> list[int]:
    """The query processes `pid` runs now."""
    out = []
    for c in children(pid):
        try:
            if b"query_worker" in Path(f"/proc/{c}/cmdline").read_bytes():
                out.append(c)
        except OSError:
            pass
    return out


@pytest.fixture(scope="module")
def served(_example_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import shutil

    root = tmp_path_factory.mktemp("bounds") / "kb"
    shutil.copytree(_example_template, root, symlinks=True)
    read = run_ok("--root", str(root), "serve", "keys", "add", "reader", "--scope", "read")
    assert read.code == 0, read.err
    env = {"OK_SERVE_TIMEOUT": "4", "OK_SERVE_RATE_LIMIT": "0"}
    s = Server(root, "--auth", env=env)
    s.http.headers["Authorization"] = f"Bearer {read.out.strip()}"
    try:
        yield s
    finally:
        s.stop()


def _cypher(s: Server, query: str) -> httpx.Response:
    return s.http.post(f"/v1/{s.stack}/cypher", json={"query": query})


@pytest.mark.server
def test_a_read_key_cannot_take_the_server_s_memory(served: Server) -> None:
    pid = served.proc.pid
    assert _cypher(served, "MATCH (d:Doc) RETURN count(*) AS n").status_code == 200
    before = rss_mb(pid)
    for query, said in [
        (WIDE, "graph.query_output_mb"),
        ("RETURN size(range(1, 100000000)) AS n", "graph.query_memory_mb"),
        # past the memory bound, or (on a slow machine) the time bound first
        (DOUBLING, "graph.query_memory_mb|serve.timeout"),
        (HUGE, "graph.query_memory_mb"),
    ]:
        r = _cypher(served, query)
        assert r.status_code in (422, 504), (query, r.status_code, r.text)
        got = r.json()["error"]
        assert any(s in got for s in said.split("|")) and r.json()["hint"], r.text
        assert (r.status_code == 504) == ("serve.timeout" in got), r.text
    # the server never held what the queries built, and no query process is left
    assert rss_mb(pid) < before + 150, (before, rss_mb(pid))
    until(lambda: not workers(pid), 30)
    r = _cypher(served, "MATCH (d:Doc) RETURN d.title AS t ORDER BY t LIMIT 2")
    assert r.status_code == 200 and len(r.json()) == 2, r.text


@pytest.mark.server
def test_a_query_past_serve_timeout_is_stopped_while_others_are_served(served: Server) -> None:
    pid = served.proc.pid
    answer: dict[str, Any] = {}

    def slow() -> None:
        started = time.monotonic()
        answer["r"] = _cypher(served, ENDLESS)
        answer["took"] = time.monotonic() - started

    t = threading.Thread(target=slow)
    t.start()
    until(lambda: workers(pid), 60, every=0.05)
    # meanwhile the server answers other callers, Cypher included
    served_meanwhile = 0
    while t.is_alive() and served_meanwhile < 3:
        assert served.http.get(f"/v1/{served.stack}/status").status_code == 200
        r = _cypher(served, "MATCH (d:Doc) RETURN count(*) AS n")
        assert r.status_code == 200, r.text
        served_meanwhile += 1
    t.join(120)
    r = answer["r"]
    assert r.status_code == 504 and "serve.timeout (4 s)" in r.json()["error"], r.text
    assert served_meanwhile == 3 or answer["took"] < 60
    until(lambda: not workers(pid), 30)


@pytest.mark.server
def test_the_server_keeps_the_graph_to_itself_between_queries(served: Server) -> None:
    """A query process opens the graph beside the server; once it has, no other process
    may open the graph, as before."""
    assert _cypher(served, "MATCH (d:Doc) RETURN count(*) AS n").status_code == 200
    db = served.root / ".ok" / "kuzu" / "graph.kz"
    for read_only in (True, False):
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import kuzu, sys; kuzu.Database(sys.argv[1], read_only={read_only})",
                str(db),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert probe.returncode != 0 and "lock" in probe.stderr.lower(), probe.stderr[-300:]


@pytest.mark.server
def test_values_of_every_kind_come_back_as_before(served: Server) -> None:
    """Dates, intervals, decimals, lists, maps and nulls cross from the query process with
    their types, and render as the route always rendered them."""
    q = (
        "RETURN date('2024-01-02') AS d, timestamp('2024-01-02 03:04:05') AS t, "
        "interval('1 day') AS i, CAST(1.5 AS DECIMAL(4,2)) AS x, [1, 2] AS l, "
        "{a: 1} AS m, NULL AS n, 'é' AS s, gen_random_uuid() IS NOT NULL AS u"
    )
    r = _cypher(served, q)
    assert r.status_code == 200, r.text
    assert r.json() == [
        {
            "d": "2024-01-02",
            "t": "2024-01-02T03:04:05",
            "i": "P1D",
            "x": "1.50",
            "l": [1, 2],
            "m": {"a": 1},
            "n": None,
            "s": "é",
            "u": True,
        }
    ]


@pytest.mark.server
def test_mcp_over_http_is_held_to_the_same_bound(served: Server) -> None:
    async def go(c: Any) -> None:
        err = await fail(c, "graph_cypher", query=HUGE)
        assert "graph.query_memory_mb" in err, err
        # MCP's own cap is 30 s; in a server, serve.timeout holds if it is shorter
        err = await fail(c, "graph_cypher", query=ENDLESS)
        assert "serve.timeout (4 s)" in err, err
        rows = await call(c, "graph_cypher", query="MATCH (d:Doc) RETURN count(*) AS n")
        assert rows["results"][0]["n"] > 0

    before = rss_mb(served.proc.pid)
    mcp_http(served.url, go, token=served.http.headers["Authorization"].split()[1])
    assert rss_mb(served.proc.pid) < before + 150


@pytest.mark.server
def test_the_routed_cli_and_the_cli_alone_are_held_to_it(served: Server, tmp_path: Path) -> None:
    env = {**os.environ, "OK_ROOT": str(served.root)}
    before = rss_mb(served.proc.pid)
    routed = subprocess.run(
        [OK_BIN, "graph", "cypher", HUGE], capture_output=True, text=True, env=env, timeout=120
    )
    assert routed.returncode == 2, routed
    assert routed.stderr.startswith("Error: the query needs more memory"), routed.stderr
    assert "hint:" in routed.stderr and routed.stdout == ""
    assert rss_mb(served.proc.pid) < before + 150
    # a folder no server holds: the same answer from `ok` alone, and a time limit of its own
    alone = tmp_path / "alone"
    assert run_ok("init", str(alone)).code == 0
    assert run_ok("--root", str(alone), "mem", "add", "A note to index.").code == 0
    r = run_ok("--root", str(alone), "graph", "cypher", HUGE)
    assert r.code == 2 and "graph.query_memory_mb" in r.err, r.err
    slow = subprocess.run(
        [OK_BIN, "--root", str(alone), "graph", "cypher", ENDLESS],
        capture_output=True,
        text=True,
        env={**os.environ, "OK_GRAPH_QUERY_TIMEOUT": "2"},
        timeout=120,
    )
    assert slow.returncode == 2 and "graph.query_timeout (2 s)" in slow.stderr, slow.stderr


@pytest.mark.server
def test_mcp_over_stdio_is_held_to_it(example_kf: Path) -> None:
    async def go(c: Any) -> None:
        err = await fail(c, "graph_cypher", query=HUGE)
        assert "graph.query_memory_mb" in err, err
        err = await fail(c, "graph_cypher", query=WIDE)
        assert "graph.query_output_mb" in err, err

    serve([example_kf], go)


@pytest.mark.server
def test_a_query_process_ends_with_its_server(example_kf: Path) -> None:
    s = Server(example_kf, env={"OK_SERVE_TIMEOUT": "600"})
    pid = s.proc.pid
    t = threading.Thread(
        target=lambda: _quiet(lambda: s.http.post(f"/v1/{s.stack}/cypher", json={"query": ENDLESS}))
    )
    t.start()
    [worker] = until(lambda: workers(pid), 60, every=0.05)
    os.killpg(pid, 9)
    s.proc.wait(60)
    until(lambda: not Path(f"/proc/{worker}").exists() or _zombie(worker), 30)
    t.join(60)


def _quiet(fn: Any) -> None:
    with contextlib.suppress(httpx.HTTPError):
        fn()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True
