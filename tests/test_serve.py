"""`ok serve`: a real uvicorn on 127.0.0.1, called over HTTP with httpx."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.localsite import free_port
from helpers.run import OK_BIN, run_cli, run_ok, until
from helpers.serve import (
    ROUTES,
    Server,
    call_route,
    hand_written_note,
    jwt_token,
    mcp_http,
    watch_bursts,
)

pytestmark = pytest.mark.server


@pytest.fixture
def server(example_kf: Path) -> Iterator[Server]:
    s = Server(example_kf)
    try:
        yield s
    finally:
        s.stop()


def test_search_over_http_gives_the_cli_s_cite_objects(example_kf: Path) -> None:
    cli = run_ok("search", "gene editing", "-k", "3", "--json")
    assert cli.code == 0, cli.err
    s = Server(example_kf)
    try:
        r = s.http.get(f"/v1/{s.stack}/search", params={"q": "gene editing", "k": 3})
        assert r.status_code == 200, r.text
        assert r.json()["hits"] == cli.json()
        stacks = s.http.get("/aks/v1/stacks").json()
        assert [st["name"] for st in stacks] == [s.stack] and stacks[0]["chunks"] > 0
    finally:
        assert s.stop() == 0
    # a stopped server leaves the folder as it found it
    r = run_ok("status", "--json")
    assert r.code == 0 and r.json()["in_sync"], r.out


def test_notes_written_over_http_are_searchable_and_files(server: Server) -> None:
    h = server.http
    r = h.post(
        f"/v1/{server.stack}/notes", json={"text": "The harbour pilot boards at the red buoy."}
    )
    assert r.status_code == 201, r.text
    note = r.json()
    assert (
        (server.root / note["path"])
        .read_text()
        .endswith("The harbour pilot boards at the red buoy.\n")
    )
    hits = h.get(
        f"/v1/{server.stack}/search", params={"q": "harbour pilot red buoy", "k": 1}
    ).json()
    assert hits["hits"][0]["id"] == note["id"]
    r = h.patch(f"/v1/{server.stack}/notes/{note['id']}", json={"tags": ["harbour"]})
    assert r.status_code == 200 and r.json()["tags"] == ["harbour"]
    assert h.get(f"/v1/{server.stack}/notes/{note['id']}").json()["tags"] == ["harbour"]
    gone = h.delete(f"/v1/{server.stack}/notes/{note['id']}").json()
    assert gone["deleted"] == note["id"] and gone["purged"] is False
    r = h.get(f"/v1/{server.stack}/notes/{note['id']}")
    assert r.status_code == 404 and "error" in r.json()
    hits = h.get(f"/v1/{server.stack}/search", params={"q": "harbour pilot red buoy"}).json()[
        "hits"
    ]
    assert note["id"] not in [x["id"] for x in hits]


def test_reads_run_while_notes_are_written(server: Server) -> None:
    errors: list[str] = []
    done = threading.Event()

    def reader() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            while not done.is_set():
                r = c.get(f"/v1/{server.stack}/search", params={"q": "gene editing", "k": 3})
                if r.status_code != 200 or not r.json()["hits"]:
                    errors.append(r.text)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    ids = []
    try:
        for i in range(6):
            r = server.http.post(
                f"/v1/{server.stack}/notes",
                json={"text": f"Tide table entry {i}.", "allow_duplicate": True},
            )
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
    finally:
        done.set()
        for t in threads:
            t.join(timeout=120)
    assert errors == []
    listed = {n["id"] for n in server.http.get(f"/v1/{server.stack}/notes").json()}
    assert set(ids) <= listed
    status = server.http.get(f"/v1/{server.stack}/status").json()
    assert status["in_sync"], status


def test_bad_requests_get_a_json_4xx_and_write_nothing(server: Server) -> None:
    h = server.http
    notes_before = len(h.get(f"/v1/{server.stack}/notes").json())
    cases = [
        h.post(
            f"/v1/{server.stack}/notes",
            content=b"{bad json",
            headers={"content-type": "application/json"},
        ),
        h.post(f"/v1/{server.stack}/notes", json={"text": ""}),
        h.post(
            f"/v1/{server.stack}/notes", content=b"text", headers={"content-type": "text/plain"}
        ),
        h.post(
            f"/v1/{server.stack}/notes",
            content=b"x" * (17 << 20),
            headers={"content-type": "application/json"},
        ),
        h.get("/v1/nowhere/search", params={"q": "x"}),
        h.get(f"/v1/{server.stack}/search", params={"q": "x", "k": 0}),
        h.get(f"/v1/{server.stack}/notes/..%2F..%2Fetc%2Fpasswd"),
        h.get(f"/v1/{server.stack}/documents/%00"),
        h.post(
            f"/v1/{server.stack}/cypher",
            json={"query": "LOAD FROM '/etc/passwd' (file_format='csv') RETURN *"},
        ),
        h.post(f"/v1/{server.stack}/cypher", json={"query": "MATCH (n:Entity) DETACH DELETE n"}),
    ]
    for r in cases:
        assert 400 <= r.status_code < 500, (r.request.url, r.status_code, r.text)
        body = r.json()
        assert isinstance(body["error"], str) and body["error"], body
    assert [r.status_code for r in cases][3:5] == [413, 404]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the cap must hold as it streams
        for _ in range(18):
            yield b"x" * (1 << 20)

    r = h.post(f"/v1/{server.stack}/documents", params={"name": "big.md"}, content=chunks())
    assert "content-length" not in r.request.headers
    assert r.status_code == 413 and r.json()["error"], r.text
    assert not list((server.root / "store").rglob("big.md*"))
    assert len(h.get(f"/v1/{server.stack}/notes").json()) == notes_before
    assert h.get("/aks/v1/entities", params={"limit": 1}).status_code == 200


def test_aks_routes_answer(server: Server) -> None:
    h = server.http
    ents = h.get("/aks/v1/entities", params={"limit": 5}).json()
    assert ents and all("name" in e for e in ents)
    name = ents[0]["name"]
    assert h.get(f"/aks/v1/entities/{name}").json()["name"] == name
    walk = h.get("/aks/v1/traverse", params={"start": name, "depth": 1})
    assert walk.status_code == 200, walk.text
    ctx = h.post("/aks/v1/context", json={"query": "gene editing"})
    assert ctx.status_code == 200 and ctx.json()["sources"], ctx.text
    assert h.get("/aks/v1/entities/no-such-entity-anywhere").status_code == 404
    docs = h.get(f"/v1/{server.stack}/documents").json()
    one = h.get(f"/v1/{server.stack}/documents/{docs[0]['id']}").json()
    assert one["entry"]["id"] == docs[0]["id"] and one["text"]
    assert h.get("/docs").status_code == 200
    assert "/v1/{stack}/search" in h.get("/openapi.json").json()["paths"]


def test_serve_refuses_a_port_in_use(example_kf: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        r = run_cli("serve", "--port", str(taken.getsockname()[1]))
    assert r.code == 2 and "cannot listen on 127.0.0.1:" in r.err and "--port" in r.err
    assert not (example_kf / ".ok/serve.json").exists()


@pytest.mark.crash
def test_a_killed_server_leaves_a_folder_the_next_command_repairs(example_kf: Path) -> None:
    s = Server(example_kf)
    for i in range(3):
        assert s.http.post(
            f"/v1/{s.stack}/notes", json={"text": f"Buoy {i} is green.", "allow_duplicate": True}
        ).status_code
    s.stop(signal.SIGKILL)
    assert (example_kf / ".ok/serve.json").exists()  # the killed server's claim stays
    r = run_ok("sync", "--json")
    assert r.code == 0, r.err
    assert not (example_kf / ".ok/serve.json").exists()  # seen to be stale, and removed
    assert run_ok("status", "--json").json()["in_sync"]
    hits = run_ok("search", "buoy green", "--json").json()
    assert any("Buoy" in h["quote"] for h in hits)
    r = run_ok("graph", "cypher", "MATCH (n:MemoryNote) RETURN count(*) AS n", "--json")
    assert r.code == 0 and r.json()[0]["n"] == 1 + 3  # the example's note and the three


def test_other_commands_say_the_folder_is_served(server: Server) -> None:
    claim = json.loads((server.root / ".ok/serve.json").read_text())
    assert claim["pid"] == server.proc.pid and claim["url"] == server.url
    # ok status says so and still reports what the files hold
    r = run_cli("status", cwd=server.root)
    assert r.code == 0 and f"served by `ok serve` (pid {server.proc.pid}" in r.out
    # commands run in the server; kept from it (OK_NO_ROUTE=1), they say it is served
    for args in (["search", "gene"], ["mem", "add", "a note"], ["sync"]):
        r = run_cli(*args, cwd=server.root, env={"OK_NO_ROUTE": "1"})
        assert r.code == 2, (args, r.out, r.err)
        assert f"served by `ok serve` (pid {server.proc.pid}" in r.err and r.err.count("\n") == 1
    assert not list((server.root / "memories").rglob("*a note*"))
    r = run_cli("mem", "add", "a routed note", cwd=server.root)
    assert r.code == 0, r.err
    assert server.http.get(f"/v1/{server.stack}/notes").json()
    # a second server is refused the same way, and the first one keeps serving
    r = run_cli("serve", "--root", str(server.root), "--port", str(free_port()))
    assert r.code == 2 and "served by `ok serve`" in r.err
    assert server.http.get(f"/v1/{server.stack}/status").status_code == 200
    server.stop()
    assert not (server.root / ".ok/serve.json").exists()
    assert run_ok("status").code == 0


def test_every_route_checks_the_key_its_stack_and_its_scope(
    example_kf: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    assert run_ok("init", str(other)).code == 0
    assert run_ok("-C", str(other), "mem", "add", "The other team's secret plan.").code == 0
    read = run_ok("serve", "keys", "add", "reader", "--scope", "read").out.strip()
    write = run_ok("serve", "keys", "add", "writer", "--scope", "write", "--json").json()["key"]
    revoked = run_ok("serve", "keys", "add", "gone").out.strip()
    assert run_ok("serve", "keys", "revoke", "gone").code == 0
    theirs = run_ok("serve", "keys", "add", "them", "--root", str(other)).out.strip()
    listed = run_ok("serve", "keys", "list", "--json").json()
    assert [k["name"] for k in listed] == ["reader", "writer", "gone"]
    assert all("sha256" not in k and "key" not in k for k in listed)
    assert read not in (example_kf / ".ok/keys.json").read_text()
    secret = "s3cret-for-tests-that-is-long-enough-for-hs256"
    s = Server(
        example_kf,
        "--auth",
        more=(other,),
        env={"OK_SERVE_JWT_SECRET_ENV": "T_SECRET", "T_SECRET": secret},
    )
    try:
        h = s.http
        mine, their_name = s.stack, "other"
        assert h.get("/health").status_code == 200 and h.get("/ready").status_code == 200
        forged = jwt_token("not-the-secret-but-as-long-as-one-for-hs256", f"{mine}:admin")
        expired = jwt_token(secret, f"{mine}:admin", exp=int(time.time()) - 60)
        their_jwt = jwt_token(secret, f"{their_name}:admin")
        for method, path, body, need in ROUTES:
            for token, want in [
                ("", 401),
                ("okk_kdeadbeef_nope", 401),
                (revoked, 401),
                (forged, 401),
                (expired, 401),
                (theirs, 403),
                (their_jwt, 403),
                *([(read, 403)] if need == "write" else []),
            ]:
                r = call_route(h, method, path, body, mine, token)
                assert r.status_code == want, (method, path, token[:12], r.status_code, r.text)
                assert r.json()["error"]
            for token in (write, jwt_token(secret, f"{mine}:write")) + (
                (read,) if need == "read" else ()
            ):
                r = call_route(h, method, path, body, mine, token)
                assert r.status_code not in (401, 403), (method, path, r.text)
        # a caller sees only its own stack, and cannot reach the other one's notes
        r = h.get("/aks/v1/stacks", headers={"Authorization": f"Bearer {read}"})
        assert [x["name"] for x in r.json()] == [mine]
        r = h.get(
            f"/v1/{their_name}/search",
            params={"q": "secret plan"},
            headers={"Authorization": f"Bearer {read}"},
        )
        assert r.status_code == 403 and "secret" not in r.text.replace("secret plan", "")
        r = h.get("/aks/v1/entities", headers={"Authorization": f"Bearer {theirs}"})
        assert r.status_code == 200  # the default stack is the caller's own
        r = h.get(
            f"/v1/{their_name}/search",
            params={"q": "secret plan"},
            headers={"Authorization": f"Bearer {theirs}"},
        )
        assert "secret plan" in r.json()["hits"][0]["quote"]
    finally:
        s.stop()


def test_a_key_over_its_rate_gets_429_with_retry_after(example_kf: Path) -> None:
    key = run_ok("serve", "keys", "add", "agent", "--scope", "read").out.strip()
    other = run_ok("serve", "keys", "add", "other", "--scope", "read").out.strip()
    secret = "s3cret-for-tests-that-is-long-enough-for-hs256"
    s = Server(
        example_kf,
        "--auth",
        env={
            "OK_SERVE_RATE_LIMIT": "0.5",
            "OK_SERVE_BURST": "3",
            "OK_SERVE_JWT_SECRET_ENV": "T_SECRET",
            "T_SECRET": secret,
        },
        headers={"Authorization": f"Bearer {key}"},
    )
    try:
        codes = [s.http.get(f"/v1/{s.stack}/status").status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429], codes
        r = s.http.get(f"/v1/{s.stack}/status")
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        assert "too many requests" in r.json()["error"]
        assert s.http.get("/health").status_code == 200  # never metered
        # each key has a bucket of its own
        r = s.http.get(f"/v1/{s.stack}/status", headers={"Authorization": f"Bearer {other}"})
        assert r.status_code == 200, r.text
        for token in ("okk_kdeadbeef_nope", "not-a-jwt"):
            r = s.http.get(
                f"/v1/{s.stack}/search?q=x", headers={"Authorization": f"Bearer {token}"}
            )
            assert r.status_code == 401, r.text
        # refusals are counted by the route they asked for, and logged with who was refused
        text = s.http.get(
            "/metrics", headers={"Authorization": f"Bearer {jwt_token(secret, '*:read')}"}
        )
        assert text.status_code == 200, text.text
        route = f'method="GET",route="/v1/{{stack}}/status",stack="{s.stack}"'
        assert f'ok_http_requests_total{{{route},status="429"}} 3.0' in text.text, text.text
        route = f'method="GET",route="/v1/{{stack}}/search",stack="{s.stack}"'
        assert f'ok_http_requests_total{{{route},status="401"}} 2.0' in text.text, text.text
    finally:
        s.stop()
    lines = [json.loads(x) for x in s.log.read_text().splitlines() if x.startswith("{")]
    refused = [(x["status"], x["who"]) for x in lines if x.get("status") in (401, 429)]
    assert refused == [(429, f"key:{s.stack}/agent")] * 3 + [(401, None)] * 2, refused


def test_local_callers_are_metered_only_when_configured(example_kf: Path) -> None:
    # auth off: serve.rate_limit is for keys; serve.local_rate_limit meters each address
    s = Server(example_kf, env={"OK_SERVE_LOCAL_RATE_LIMIT": "0.5", "OK_SERVE_BURST": "3"})
    try:
        codes = [s.http.get(f"/v1/{s.stack}/status").status_code for _ in range(5)]
        assert codes == [200, 200, 200, 429, 429], codes
        assert int(s.http.get(f"/v1/{s.stack}/status").headers["Retry-After"]) >= 1
    finally:
        s.stop()


def test_32_concurrent_local_clients_get_only_200s(example_kf: Path) -> None:
    # the defaults, with a tight serve.rate_limit that must not apply to local callers, and
    # more clients than the server runs at once (its threads), each searching and reading
    s = Server(example_kf, env={"OK_SERVE_RATE_LIMIT": "1", "OK_SERVE_BURST": "2"})
    want = s.http.get(f"/v1/{s.stack}/search", params={"q": "gene editing", "k": 5}).json()
    codes: list[int] = []
    wrong: list[object] = []
    lock = threading.Lock()
    start = threading.Barrier(32)

    def client(i: int) -> None:
        with httpx.Client(base_url=s.url, timeout=120) as c:
            start.wait()
            for j in range(6):
                if j % 3 == 2:
                    r = c.get(f"/v1/{s.stack}/status")
                else:
                    r = c.get(f"/v1/{s.stack}/search", params={"q": "gene editing", "k": 5})
                    if r.status_code == 200 and r.json() != want:
                        with lock:
                            wrong.append(r.json())
                with lock:
                    codes.append(r.status_code)

    try:
        threads = [threading.Thread(target=client, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(codes) == 32 * 6
        assert set(codes) == {200}, sorted(set(codes))
        assert not wrong, wrong[0]
    finally:
        assert s.stop() == 0


def test_serving_beyond_loopback_needs_credentials(example_kf: Path) -> None:
    r = run_cli("serve", "--host", "0.0.0.0", "--port", str(free_port()))
    assert r.code == 2 and "needs credentials" in r.err and "ok serve keys add" in r.err
    r = run_ok("serve", "keys", "add", "x", "--scope", "root")
    assert r.code == 2 and "unknown scope 'root'" in r.err
    r = run_ok("serve", "keys", "revoke", "nobody")
    assert r.code == 2 and "no live key" in r.err


def test_mcp_over_streamable_http_has_the_tools_of_ok_mcp(example_kf: Path) -> None:
    read = run_ok("serve", "keys", "add", "agent", "--scope", "read").out.strip()
    write = run_ok("serve", "keys", "add", "writer", "--scope", "write").out.strip()
    stdio = {t["name"] for t in run_ok("mcp", "--list-tools", "--root", str(example_kf)).json()}
    s = Server(example_kf, "--auth")

    async def use(client: Any) -> Any:
        tools = {t.name for t in (await client.list_tools()).tools}
        hit = await client.call_tool("search", {"query": "gene editing", "k": 2})
        return tools, json.loads(hit.content[0].text)

    async def add(client: Any) -> Any:
        r = await client.call_tool("mem_add", {"text": "Agents may write over HTTP too."})
        assert not r.is_error, r.content[0].text
        return json.loads(r.content[0].text)

    try:
        tools, found = mcp_http(s.url, use, write)
        assert tools == stdio
        assert found["results"] and found["results"][0]["type"] == "chunk"
        note = mcp_http(s.url, add, write)
        hits = s.http.get(
            f"/v1/{s.stack}/search",
            params={"q": "agents write over HTTP", "k": 1},
            headers={"Authorization": f"Bearer {read}"},
        ).json()["hits"]
        assert hits[0]["id"] == note["id"]
        # a read key gets the read-only tools; no key, no MCP
        read_tools, _ = mcp_http(s.url, use, read)
        assert "mem_add" not in read_tools and "search" in read_tools
        assert read_tools < tools
        r = httpx.post(f"{s.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert r.status_code == 401 and r.json()["error"]
    finally:
        s.stop()


def test_metrics_count_requests_per_route_and_stack_and_the_log_says_who(
    example_kf: Path,
) -> None:
    s = Server(example_kf)
    try:
        for q in ("gene", "editing", "crispr"):
            assert s.http.get(f"/v1/{s.stack}/search", params={"q": q}).status_code == 200
        assert s.http.get("/v1/made-up/search", params={"q": "x"}).status_code == 404
        text = s.http.get("/metrics").text
        want = (
            'ok_http_requests_total{method="GET",route="/v1/{stack}/search",'
            f'stack="{s.stack}",status="200"}} 3.0'
        )
        assert want in text, text[:2000]
        assert 'stack="made-up"' not in text and 'status="404"' in text
        assert 'ok_search_seconds_count{mode="hybrid"} 3.0' in text
        assert f'ok_writer_queue_depth{{stack="{s.stack}"}} 0.0' in text
    finally:
        s.stop()
    lines = [json.loads(x) for x in s.log.read_text().splitlines() if x.startswith("{")]
    searches = [x for x in lines if x["path"] == f"/v1/{s.stack}/search"]
    assert len(searches) == 3 and all(x["status"] == 200 and x["ms"] > 0 for x in searches)
    assert {x["who"] for x in searches} == {"local"}


def test_the_server_syncs_files_changed_on_disk(server: Server) -> None:
    h = server.http
    # its own writes are indexed already: the watch sees them and does not sync
    r = h.post(f"/v1/{server.stack}/notes", json={"text": "Sea otters crack urchins on rocks."})
    assert r.status_code == 201, r.text
    until(lambda: watch_bursts(h).get("own", 0) >= 1)
    assert watch_bursts(h).get("synced", 0) == 0
    path = hand_written_note(server.root, "m-20260105-wtch", "Kelp forests shelter otters.")

    def found() -> bool:
        r = h.get(f"/v1/{server.stack}/search", params={"q": "kelp forests otters", "k": 1})
        return r.json()["hits"][:1] != [] and r.json()["hits"][0]["id"] == "m-20260105-wtch"

    until(found)
    assert watch_bursts(h).get("synced", 0) >= 1
    path.unlink()
    until(lambda: not found())
    assert h.get(f"/v1/{server.stack}/status").json()["in_sync"]


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """The lines of `proc`'s stdout as they come (None once it closes), so that a test can
    wait for the next one with a bound."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _next_report(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> Any:
    """The next JSON line of `ok sync --watch --json`; fails once the watch has ended or said
    nothing for two minutes."""
    try:
        line = lines.get(timeout=120)
    except queue.Empty:
        raise AssertionError("the watch reported no sync within 120 s") from None
    assert line is not None, f"the watch ended: {proc.wait(timeout=120)}"
    return json.loads(line)


def test_ok_sync_watch_syncs_after_each_change(example_kf: Path) -> None:
    proc = subprocess.Popen(
        [OK_BIN, "sync", "--watch", "--json"],
        cwd=example_kf,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OK_NO_PROGRESS": "1"},
    )
    lines = _lines(proc)
    try:
        first = _next_report(proc, lines)
        assert first["notes_added"] == []
        hand_written_note(example_kf, "m-20260105-swch", "Sea urchins graze the kelp.")
        # a loaded machine may let the watch see the file before its text is written: that
        # sync reports the empty note, and the next one, once the text is there, adds it
        until(lambda: _next_report(proc, lines)["notes_added"] == ["m-20260105-swch"], every=0)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    hits = run_ok("search", "sea urchins graze kelp", "-k", "1", "--json").json()
    assert hits[0]["id"] == "m-20260105-swch"


def test_documents_citations_events_and_lineage_over_http(server: Server) -> None:
    h, v1 = server.http, f"/v1/{server.stack}"
    text = b"# Tide gauges\n\nA tide gauge records the sea level every six minutes.\n"
    r = h.post(f"{v1}/documents", params={"name": "tides.md"}, content=text)
    assert r.status_code == 201, r.text
    doc = r.json()["added"][0]
    assert (server.root / doc["path"]).exists()
    hits = h.get(f"{v1}/search", params={"q": "tide gauge sea level", "k": 1}).json()["hits"]
    assert hits[0]["doc_id"] == doc["id"]
    # the same bytes again: unchanged, nothing new
    again = h.post(f"{v1}/documents", params={"name": "tides.md"}, content=text).json()
    assert again["added"] == [] and again["unchanged"]
    for bad in ("../escape.md", ".hidden", "a/b.md"):
        r = h.post(f"{v1}/documents", params={"name": bad}, content=b"x")
        assert r.status_code == 400 and r.json()["error"], (bad, r.text)
    assert h.post(f"{v1}/documents", params={"name": "e.md"}, content=b"").status_code == 400
    assert h.get(f"{v1}/documents/{doc['id']}/history").json()[0]["id"] == doc["id"]
    # a citation made, kept, listed and verified
    made = h.post(f"{v1}/citations", json={"items": [hits[0]["id"]], "persist": True})
    assert made.status_code == 201, made.text
    cid = made.json()[0]["id"]
    listed = h.get(f"{v1}/citations").json()["citations"]
    assert cid in [c["id"] for c in listed]
    v = h.post(f"{v1}/citations/verify", json={"items": [cid]}).json()
    assert v["ok"] and v["results"][0]["status"] == "verified"
    kinds = {e["type"] for e in h.get(f"{v1}/events").json()}
    assert "ingested" in kinds, kinds
    assert h.get(f"{v1}/lineage/{doc['id']}").status_code == 200
    assert h.get(f"{v1}/triggers").json()["triggers"] == []
    # removed: gone from search, and its citation is missing
    assert h.delete(f"{v1}/documents/{doc['id']}").json()["id"] == doc["id"]
    hits = h.get(f"{v1}/search", params={"q": "tide gauge sea level"}).json()["hits"]
    assert doc["id"] not in [x["doc_id"] for x in hits]
    v = h.post(f"{v1}/citations/verify", json={"items": [cid]}).json()
    assert not v["ok"] and v["results"][0]["status"] == "missing"


def test_a_distilled_note_is_written_over_http_from_verified_citations(server: Server) -> None:
    h, v1 = server.http, f"/v1/{server.stack}"
    prompts = h.get(f"{v1}/distill/prompts").json()
    assert "memory-synthesis" in [p["name"] for p in prompts]
    assert all(p["prompt"].strip() and p["description"] for p in prompts)
    hits = h.get(f"{v1}/search", params={"q": "write-ahead logging", "k": 2}).json()["hits"]
    notes = h.get(f"{v1}/notes").json()
    # refused, with nothing written: no marker, a forged quote, a marker past the list, no
    # citations at all, an unknown field
    forged = {**hits[1], "quote": "The log is written after the data, never before."}
    for body, status, said in (
        (
            {"text": "WAL is durable. So is the log.", "citations": hits[:1]},
            400,
            "no claim carries",
        ),
        ({"text": "WAL [1]; after [2].", "citations": [hits[0], forged]}, 400, "does not verify"),
        ({"text": "WAL [3].", "citations": hits[:1]}, 400, "cites [3] but 1"),
        ({"text": "WAL [1].", "citations": []}, 422, ""),
        ({"text": "WAL [1].", "citations": hits[:1], "via": "x"}, 422, ""),
    ):
        r = h.post(f"{v1}/distill", json=body)
        assert r.status_code == status and said in r.json()["error"], r.text
    assert h.get(f"{v1}/notes").json() == notes
    r = h.post(
        f"{v1}/distill",
        json={
            "text": "Write-ahead logging flushes the log first [1][2].",
            "citations": [hits[0], hits[1]["id"]],
            "tags": ["wal"],
        },
    )
    assert r.status_code == 201, r.text
    note = r.json()
    assert note["kind"] == "distilled" and note["tags"] == ["wal"]
    assert [c["quote"] for c in note["citations"]] == [x["quote"] for x in hits]
    rows = h.post(
        f"{v1}/cypher",
        json={
            "query": "MATCH (m:MemoryNote {id: $id})-[:DERIVED_FROM]->(x) RETURN x.id AS id",
            "params": {"id": note["id"]},
        },
    ).json()
    assert sorted(x["id"] for x in rows) == sorted(x["id"] for x in hits)
    found = h.get(f"{v1}/search", params={"q": "flushes the log first", "scope": "mem"})
    assert found.json()["hits"][0]["id"] == note["id"]
    ver = h.post(f"{v1}/citations/verify", json={"items": [c["id"] for c in note["citations"]]})
    assert ver.json()["ok"]


def _sse_events(lines: Any) -> Iterator[tuple[str, Any]]:
    kind = None
    for line in lines:
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: ") and kind:
            yield kind, json.loads(line[len("data: ") :])
            kind = None


def test_ask_streams_tokens_and_events_are_followed_over_sse(example_kf: Path) -> None:
    from helpers.openai_stub import chat_server

    reply = "Write-ahead logging writes changes to a log before the data files [1]."
    with chat_server([reply], chunk=5) as stub:
        env = {"OK_LLM_BASE_URL": stub.url, "OK_LLM_MODEL": "stub-model", "OK_LLM_RETRIES": "0"}
        s = Server(example_kf, env=env)
        try:
            v1 = f"/v1/{s.stack}"
            body = {"question": "what is write-ahead logging?", "stream": True}
            with s.http.stream("POST", f"{v1}/ask", json=body) as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                got = list(_sse_events(r.iter_lines()))
            tokens = [d["text"] for k, d in got if k == "token"]
            assert len(tokens) > 5 and "".join(tokens) == reply
            assert got[-1][0] == "answer" and got[-1][1]["answer"] == reply
            assert got[-1][1]["citations"][0]["n"] == 1

            seen: list[tuple[str, Any]] = []

            def follow() -> None:
                with httpx.stream(
                    "GET", f"{s.url}{v1}/events/follow", params={"timeout": 300}, timeout=330
                ) as r:
                    for ev in _sse_events(r.iter_lines()):
                        seen.append(ev)
                        return

            t = threading.Thread(target=follow)
            t.start()
            # until the follower is listening, an event may come before it: add more
            deadline = time.monotonic() + 240
            i = 0
            while not seen and t.is_alive() and time.monotonic() < deadline:
                up = s.http.post(
                    f"{v1}/documents", params={"name": f"f{i}.md"}, content=f"Buoy {i}.\n".encode()
                )
                assert up.status_code == 201, up.text
                t.join(timeout=2)
                i += 1
            assert seen and seen[0][0] == "event" and seen[0][1]["type"] == "ingested"
        finally:
            s.stop()


def test_a_query_past_its_time_is_stopped_and_cors_is_what_config_says(
    example_kf: Path,
) -> None:
    env = {"OK_SERVE_TIMEOUT": "1", "OK_SERVE_CORS_ORIGINS": "http://explorer.test"}
    key = run_ok("serve", "keys", "add", "k").out.strip()
    s = Server(example_kf, "--auth", env=env)
    auth = {"Authorization": f"Bearer {key}"}
    try:
        slow = (
            "UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b "
            "WITH a, b WHERE a % 7 = b % 5 RETURN sum(a + b) AS n"
        )
        r = s.http.post(f"/v1/{s.stack}/cypher", json={"query": slow}, headers=auth)
        assert r.status_code == 504 and "serve.timeout" in r.json()["error"], r.text
        r = s.http.get(f"/v1/{s.stack}/status", headers=auth)
        assert r.status_code == 200  # the server goes on
        pre = s.http.options(
            f"/v1/{s.stack}/search",
            headers={
                "Origin": "http://explorer.test",
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "authorization",
            },
        )
        assert pre.status_code == 200
        assert pre.headers["access-control-allow-origin"] == "http://explorer.test"
        r = s.http.get(f"/v1/{s.stack}/status", headers={**auth, "Origin": "http://elsewhere.test"})
        assert "access-control-allow-origin" not in r.headers
    finally:
        s.stop()


def test_a_follower_does_not_hold_up_a_stop(example_kf: Path) -> None:
    s = Server(example_kf)
    url = f"{s.url}/v1/{s.stack}/events/follow"
    opened = threading.Event()

    def follow() -> None:
        with (
            contextlib.suppress(httpx.HTTPError),
            httpx.stream("GET", url, params={"timeout": 3600}, timeout=120) as r,
        ):
            opened.set()
            for _ in r.iter_lines():
                pass

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    assert opened.wait(120)
    started = time.monotonic()
    assert s.stop() == 0
    assert time.monotonic() - started < 120  # not the follower's hour
    t.join(timeout=60)
    assert not t.is_alive()


def test_a_query_over_the_cap_is_a_json_4xx(server: Server) -> None:
    from openkl.graph.search import MAX_QUERY

    over = "x" * (MAX_QUERY + 1)
    r = server.http.post(f"/v1/{server.stack}/ask", json={"question": over, "llm": False})
    assert 400 <= r.status_code < 500 and "characters long" in r.json()["error"], r.text
    r = server.http.get(f"/v1/{server.stack}/search", params={"q": "gene editing " * 2000})
    assert r.status_code == 200, r.text[:300]


def test_several_documents_are_uploaded_in_one_multipart_request(server: Server) -> None:
    h, v1 = server.http, f"/v1/{server.stack}"
    before = h.get(f"{v1}/status").json()["counts"]["Doc"]
    files = [
        ("file", ("tides.md", b"# Tide gauges\n\nA tide gauge records the sea level.\n")),
        ("file", ("buoys.txt", b"Wave buoys measure the height of passing swells.\n")),
        ("file", ("moorings.md", b"# Moorings\n\nA mooring holds a buoy on its station.\n")),
    ]
    r = h.post(f"{v1}/documents", files=files)
    assert r.status_code == 201, r.text
    added = r.json()["added"]
    assert [a["path"].rsplit("/", 1)[-1] for a in added] == [
        "tides.ok.md",
        "buoys.ok.md",
        "moorings.ok.md",
    ]
    assert all((server.root / a["path"]).exists() for a in added)
    assert h.get(f"{v1}/status").json()["counts"]["Doc"] == before + 3
    hits = h.get(f"{v1}/search", params={"q": "wave buoys swells", "k": 1}).json()["hits"]
    assert hits[0]["doc_id"] == added[1]["id"]
    # sent again: nothing new; a bad name or a repeated one refuses the whole request
    again = h.post(f"{v1}/documents", files=files).json()
    assert again["added"] == [] and len(again["unchanged"]) == 3
    for bad in (
        [("file", ("a.md", b"Alpha.\n")), ("file", ("../b.md", b"Beta.\n"))],
        [("file", ("c.md", b"Gamma.\n")), ("file", ("c.md", b"Delta.\n"))],
    ):
        r = h.post(f"{v1}/documents", files=bad)
        assert r.status_code == 400 and r.json()["hint"], r.text
    r = h.post(f"{v1}/documents", data={"text": "not a file"}, files=[("x", ("", b""))])
    assert r.status_code == 400 and "error" in r.json(), r.text
    r = h.post(f"{v1}/documents", content=b"no name")
    assert r.status_code == 400 and "name" in r.json()["error"], r.text
    assert h.get(f"{v1}/status").json()["counts"]["Doc"] == before + 3


def test_the_listening_socket_is_tcp_so_responses_are_not_held_back() -> None:
    """asyncio sets TCP_NODELAY only on sockets that name IPPROTO_TCP; without it a response
    body waits for the client's delayed acknowledgement (40 ms a request)."""
    from openkl.cli.cmd_serve import _listen

    sock = _listen("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        sock.listen()
        with socket.create_connection(sock.getsockname()):
            conn, _ = sock.accept()
            with conn:
                assert conn.proto == socket.IPPROTO_TCP
    finally:
        sock.close()
