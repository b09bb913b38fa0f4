"""While `ok serve` owns a folder, every `ok` command on it runs in the server (through the
unix socket in .ok/), with the output and exit code it has when run on its own."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import OK_BIN, Result, run_cli, run_ok
from test_serve import Server


class Pair:
    """Two copies of one folder: `here` is run on its own, `served` through a server."""

    def __init__(self, base: Path, template: Path) -> None:
        self.here = base / "alone" / "kb"
        self.served = base / "served" / "kb"
        for root in (self.here, self.served):
            shutil.copytree(template, root, symlinks=True)
        self.server = Server(self.served)

    def same(self, a: str, root: Path) -> str:
        """`a` with what differs by folder alone (its path, ids, times) made equal."""
        a = a.replace(str(root), "ROOT")
        a = re.sub(r"m-\d{8}-[0-9a-z]{4}", "m-ID", a)
        a = re.sub(r"\b[0-9a-f]{64}\b", "SHA256", a)  # of a note, which holds its id
        a = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?", "TIME", a)
        return re.sub(r"\b\d+(\.\d+)? ?(ms|s)\b", "DURATION", a)

    def both(self, *args: str, sub: str = "", input: str | None = None) -> tuple[Result, Result]:
        """Run `ok ARGS` in each copy (in its subdirectory `sub`); the second is routed."""
        (self.here / sub).mkdir(exist_ok=True, parents=True)
        (self.served / sub).mkdir(exist_ok=True, parents=True)
        alone = run_ok(*args, cwd=self.here / sub, input=input)
        routed = run_cli(*args, cwd=self.served / sub, input=input)
        return alone, routed

    def check(self, *args: str, sub: str = "", input: str | None = None) -> Result:
        alone, routed = self.both(*args, sub=sub, input=input)
        assert routed.code == alone.code, (args, alone, routed)
        assert self.same(routed.out, self.served) == self.same(alone.out, self.here), args
        assert self.same(routed.err, self.served) == self.same(alone.err, self.here), args
        return routed


@pytest.fixture(scope="module")
def pair(_example_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    p = Pair(tmp_path_factory.mktemp("route"), _example_template)
    try:
        yield p
    finally:
        p.server.stop()


READS = [
    ["search", "gene editing", "-k", "3"],
    ["search", "gene editing", "-k", "3", "--json"],
    ["search", "gene editing", "--format", "tsv", "--explain"],
    ["search", "xyzzy quux"],
    ["search"],
    ["--json", "search", "writer", "--in", "mem"],
    ["mem", "list"],
    ["mem", "search", "one writer"],
    ["mem", "topics"],
    ["mem", "conflicts", "--in", "all", "--json"],
    ["mem", "show", "m-20000101-zzzz"],
    ["store", "list", "--format", "jsonl"],
    ["grep", "writer", "-i"],
    ["graph", "entities", "--format", "tsv"],
    ["graph", "cypher", "MATCH (d:Document) RETURN count(*) AS n"],
    ["graph", "cypher", "LOAD FROM '/etc/passwd' (file_format='csv') RETURN *"],
    ["graph", "cypher", "MATCH (d:Document) SET d.title = 'x'"],
    ["context", "gene editing", "--json"],
    ["ask", "what is gene editing?"],
    ["events", "--json"],
    ["cite", "list"],
    ["trigger", "list"],
    ["config", "get", "search.min_score"],
    ["config", "list", "--json"],
    ["refresh", "--due", "--json"],
    ["nosuch"],
    ["search", "x", "--format", "yaml"],
]


@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a)[:40])
def test_a_routed_read_prints_what_the_command_prints_alone(pair: Pair, args: list[str]) -> None:
    pair.check(*args)


def test_status_says_the_server_and_otherwise_the_same(pair: Pair) -> None:
    alone, routed = pair.both("status")
    assert routed.code == alone.code == 0
    served_line = f"served by `ok serve` (pid {pair.server.proc.pid}"
    lines = [ln for ln in routed.out.splitlines() if served_line not in ln]
    assert len(lines) == len(routed.out.splitlines()) - 1, routed.out
    assert pair.same("\n".join(lines), pair.served) == pair.same(alone.out.strip(), pair.here)


def test_open_takes_the_rank_of_the_last_search(pair: Pair) -> None:
    pair.check("search", "gene editing", "-k", "2")
    out = pair.check("open", "1")
    assert out.out.strip()


def test_routed_writes_do_what_they_do_alone(pair: Pair) -> None:
    added = pair.check("mem", "add", "The staging cluster runs in eu-west-1.", "--tags", "infra")
    note = added.out.split()[-1] if added.out.strip() else ""
    assert re.search(r"m-\d{8}-", added.out), added.out
    pair.check("mem", "add", "")  # empty: refused the same way
    pair.check("mem", "add", input="Piped notes are read from stdin.\n")
    pair.check("search", "staging cluster region", "-k", "1", "--json")
    # a relative path means the same from a subdirectory
    for root in (pair.here, pair.served):
        (root / "inbox").mkdir(exist_ok=True)
        (root / "inbox" / "runbook.md").write_text("# Runbook\n\nPage the on-call by phone.\n")
    pair.check("store", "ingest", "../inbox/runbook.md", sub="work")
    pair.check("store", "ingest", "../inbox/missing.md", sub="work")
    pair.check("search", "on-call phone", "-k", "1")
    pair.check("config", "set", "search.k", "7")
    pair.check("config", "get", "search.k")
    pair.check("sync", "--json")
    pair.check("trigger", "add", "t1", "-e", "on-call paging", "--threshold", "0.5")
    pair.check("trigger", "list", "--json")
    assert note
    # the served copy now holds what the lone copy holds
    counts = "MATCH (n) RETURN labels(n) AS l, count(*) AS c ORDER BY l"
    pair.check("graph", "cypher", counts, "--json")


def test_the_rebuild_swaps_the_graph_under_the_running_server(pair: Pair) -> None:
    r = run_cli("index", "--rebuild", cwd=pair.served)
    assert r.code == 0, r.err
    r = run_cli("search", "gene editing", "-k", "1", "--json", cwd=pair.served)
    assert r.code == 0 and r.json(), r.err
    h = pair.server.http.get(f"/v1/{pair.server.stack}/search", params={"q": "gene editing"})
    assert h.status_code == 200 and h.json()["hits"][0]["id"] == r.json()[0]["id"]


def test_the_client_loads_neither_the_cli_nor_the_graph_nor_the_model(pair: Pair) -> None:
    code = (
        "import sys\n"
        "from openkl.cli import route\n"
        "rc = route.forward(['search', 'gene editing', '--json'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('typer', 'kuzu', 'onnxruntime', 'tokenizers', 'numpy', 'rich') "
        "or m in ('openkl.cli.app', 'openkl.graph', 'openkl.embeddings'))\n"
        "print(rc, heavy, file=sys.stderr)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=pair.served, capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip() == "0 []", p.stderr
    assert json.loads(p.stdout)[0]["type"]  # the hits came from the server


def test_commands_from_two_directories_at_once_keep_their_own(pair: Pair) -> None:
    results: dict[str, Result] = {}
    for sub in ("a", "b"):
        d = pair.served / "dirs" / sub
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{sub}.md").write_text(f"# {sub}\n\nThe {sub} file talks about lighthouses.\n")

        twin = pair.here / "dirs" / sub  # the lone copy gets the same documents
        twin.mkdir(parents=True, exist_ok=True)
        shutil.copy(d / f"{sub}.md", twin / f"{sub}.md")
        assert run_ok("store", "ingest", f"{sub}.md", cwd=twin).code == 0

    def one(sub: str) -> None:
        results[sub] = run_cli("store", "ingest", f"{sub}.md", cwd=pair.served / "dirs" / sub)

    threads = [threading.Thread(target=one, args=(s,)) for s in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for sub in ("a", "b"):
        assert results[sub].code == 0, results[sub].err
        assert f"{sub}.ok.md" in results[sub].out


def test_ctrl_c_interrupts_a_routed_command_as_it_does_alone(pair: Pair) -> None:
    codes = []
    for env in ({}, {"OK_NO_ROUTE": "1"}):
        root = pair.served if not env else pair.here
        p = subprocess.Popen(
            [OK_BIN, "sync", "--watch"],
            cwd=root,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert p.stderr is not None
        line = p.stderr.readline()  # "watching …": the watch is under way
        assert "watching" in line, line
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        codes.append((p.returncode, err))
    assert codes[0][0] == codes[1][0], codes
    # the server still answers
    assert run_cli("search", "gene", "-k", "1", cwd=pair.served).code == 0


def test_mcp_over_stdio_runs_on_the_server(pair: Pair) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def talk() -> tuple[str, list[str]]:
        params = StdioServerParameters(
            command=OK_BIN, args=["mcp"], cwd=str(pair.served), env=dict(os.environ)
        )
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            tools = [t.name for t in (await s.list_tools()).tools]
            res = await s.call_tool("search", {"query": "gene editing", "k": 2})
            return res.content[0].text, tools  # type: ignore[union-attr]

    text, tools = anyio.run(talk)
    assert "search" in tools and "mem_add" in tools
    assert json.loads(text)["results"], text


def test_the_server_runs_no_second_server_for_a_client(pair: Pair) -> None:
    import socket as sk

    from openkl.cli import route

    where = route.served_socket(["--root", str(pair.served), "status"])
    assert where is not None
    for argv in (["serve", "--port", "0"], ["init", "elsewhere"]):
        with sk.socket(sk.AF_UNIX, sk.SOCK_STREAM) as conn:
            conn.connect(where)
            # a client that skips its own check: the server still refuses
            code = route._call(conn, ["--root", str(pair.served), *argv])
        assert code == 2, argv
    assert not (pair.served / "elsewhere").exists()
    assert run_cli("status", cwd=pair.served).code == 0


def test_keys_are_managed_while_the_folder_is_served(pair: Pair) -> None:
    added = run_cli("serve", "keys", "add", "ci", "--scope", "read", "--json", cwd=pair.served)
    assert added.code == 0, added.err
    listed = run_cli("serve", "keys", "list", "--json", cwd=pair.served)
    assert [k["name"] for k in listed.json()] == ["ci"]
    assert run_cli("serve", "keys", "revoke", "ci", cwd=pair.served).code == 0


def test_help_and_no_server_stay_local(pair: Pair, tmp_path: Path) -> None:
    from openkl.cli import route

    assert route.served_socket(["search", "--help"]) is None
    assert route.served_socket(["init", str(pair.served)]) is None
    assert route.served_socket(["--root", str(pair.here), "search", "x"]) is None
    assert route.served_socket(["--root", str(pair.served), "search", "x"]) is not None
    assert route.served_socket(["search", "x", "-C", str(pair.served)]) is not None
    assert route.served_socket(["grep", "-C", "2", "x"]) is None  # here: tmp_path, no folder
    mixed = ["mcp", "--root", str(pair.served), "--root", str(pair.here)]
    assert route.served_socket(mixed) is None


def test_a_dead_server_s_socket_is_left_behind_harmlessly(
    _example_template: Path, tmp_path: Path
) -> None:
    root = tmp_path / "kb"
    shutil.copytree(_example_template, root, symlinks=True)
    s = Server(root)
    sock = json.loads((root / ".ok/serve.json").read_text())["socket"]
    assert Path(sock).exists()
    s.stop(signal.SIGKILL)
    r = run_cli("search", "gene editing", "-k", "1", cwd=root)  # runs alone, cleans the claim
    assert r.code == 0, r.err
    assert not (root / ".ok/serve.json").exists()
    s = Server(root)  # a new server takes the stale socket's place
    try:
        assert run_cli("mem", "list", cwd=root).code == 0
    finally:
        s.stop()
    assert not Path(sock).exists() and not (root / ".ok/serve.json").exists()


def test_every_other_command_routed_prints_what_it_prints_alone(pair: Pair) -> None:
    docs = run_ok("store", "list", "--json", cwd=pair.here).json()
    doc = docs[0]["id"]
    # the example's note: the one id both copies share (notes added since have their own)
    served_notes = {n["id"] for n in run_cli("mem", "list", "--json", cwd=pair.served).json()}
    note = next(
        n["id"]
        for n in run_ok("mem", "list", "--json", cwd=pair.here).json()
        if n["id"] in served_notes
    )
    entity = run_ok("graph", "entities", "--json", cwd=pair.here).json()[0]["name"]
    reads = [
        ["store", "show", doc],
        ["store", "history", doc, "--json"],
        ["graph", "lineage", note, "--json"],
        ["graph", "lineage", doc, "--direction", "down"],
        ["graph", "entity", entity, "--json"],
        ["graph", "traverse", entity, "--depth", "1", "--json"],
        ["graph", "export", "--format", "graphml", "-o", "-"],
        ["trigger", "test", "gene editing in human cells"],
        ["backfeed", "queue", "--json"],
        ["distill", "prompts", "--json"],
        ["doctor", "--json"],
        ["index"],
        ["cite", "make", f"{docs[0]['path']}", "--lines", "1-2", "--json"],
    ]
    for args in reads:
        assert pair.check(*args).code == 0, args
    made = pair.check("cite", "make", f"{doc}#char0-40", "--persist", "--json").json()
    cid = made[0]["id"] if isinstance(made, list) else made["id"]
    writes = [
        ["cite", "verify", "--all", "--json"],
        ["cite", "open", cid, "--json"],
        ["cite", "gc", "--dry-run"],
        ["store", "policy", doc, "--refresh", "6h"],
        ["mem", "update", note, "--tags", "kuzu,locks"],
        ["graph", "page", entity],
        ["config", "set", "search.k", "4"],
        ["config", "unset", "search.k"],
        ["store", "remove", doc],
        ["store", "remove", doc],
        ["mem", "delete", note],
        ["mem", "delete", note],
        ["index", "--rebuild", "--json"],
        ["status", "--json"],
    ]
    seen = set()
    for args in writes:
        if args[0] == "status":
            alone, routed = pair.both(*args)
            assert routed.json()["server"]["pid"] == pair.server.proc.pid
            assert alone.json()["server"] is None
            assert routed.json()["counts"] == alone.json()["counts"]
            continue
        r = pair.check(*args)
        # the first removal works; the second is refused the same way in both
        assert (r.code == 0) == (tuple(args) not in seen), (args, r.err)
        seen.add(tuple(args))


def test_socket_only_serves_the_api_on_a_unix_socket_and_no_port(
    _example_template: Path, tmp_path: Path
) -> None:
    import httpx

    root = tmp_path / "kb"
    shutil.copytree(_example_template, root, symlinks=True)
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(
        [OK_BIN, "serve", "--socket-only", "--host", "0.0.0.0"],
        cwd=root,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        http_sock = root / ".ok/http.sock"
        client = httpx.Client(transport=httpx.HTTPTransport(uds=str(http_sock)), timeout=30)
        deadline = time.monotonic() + 120
        stack = None
        while stack is None and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            try:
                ready = client.get("http://ok/ready")
                stack = ready.json()["stacks"][0] if ready.status_code == 200 else None
            except httpx.TransportError:
                time.sleep(0.2)
        r = client.get(f"http://ok/v1/{stack}/search", params={"q": "gene editing", "k": 1})
        assert r.status_code == 200 and r.json()["hits"], r.text  # no key asked on a socket
        claim = json.loads((root / ".ok/serve.json").read_text())
        assert claim["url"].startswith("http+unix://") and "http.sock" in claim["url"]
        listening = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout
        assert f"pid={proc.pid}," not in listening  # no TCP port at all
        assert run_cli("search", "gene editing", "-k", "1", cwd=root).code == 0  # routed
        client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
    assert not (root / ".ok/http.sock").exists() and not (root / ".ok/serve.sock").exists()


def test_the_editor_runs_with_the_caller_s_environment_and_streams(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    editor = tmp_path / "ed.sh"
    # the editor sees the caller's variables, and writes to the caller's stderr
    editor.write_text(
        '#!/bin/sh\necho "editing with $ED_MARK" >&2\nsed -i "s/writer/WRITER/" "$1"\n'
    )
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.setenv("ED_MARK", "mark-42")
    added = run_cli("mem", "add", "The lock has one writer.", "--json", cwd=pair.served)
    assert added.code == 0, added.err
    served_id = added.json()["id"]
    # the lone copy gets the same note and edit
    alone = run_ok("mem", "add", "The lock has one writer.", "--json", cwd=pair.here).json()
    assert run_ok("mem", "edit", alone["id"], cwd=pair.here).code == 0
    routed = run_cli("mem", "edit", served_id, cwd=pair.served)
    assert routed.code == 0, routed.err
    assert "editing with mark-42" in routed.err
    shown = run_cli("mem", "show", served_id, "--json", cwd=pair.served).json()
    assert "WRITER" in json.dumps(shown)
    hits = run_cli("search", "WRITER", "--in", "mem", "--json", cwd=pair.served).json()
    assert any(h["id"] == served_id for h in hits)  # re-indexed by the server


def test_triggers_and_bundles_routed(pair: Pair, tmp_path: Path) -> None:
    pair.check("trigger", "add", "t2", "-e", "lighthouse keepers", "--threshold", "0.5")
    pair.check("trigger", "remove", "t2")
    pair.check("trigger", "remove", "t2")
    assert pair.check("graph", "export", "-o", "b.aks.json").code == 0
    pair.check("bundle", "validate", "b.aks.json")
    pair.check("bundle", "validate", "missing.aks.json")
