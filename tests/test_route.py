"""While `ok serve` owns a folder, every `ok` command on it runs in the server (through the
unix socket in .ok/), with the output and exit code it has when run on its own."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from helpers.route import Rogue, forge_claim, public_dir
from helpers.run import OK_BIN, Result, run_cli, run_ok, until
from helpers.serve import Server


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


@pytest.mark.server
@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a)[:40])
def test_a_routed_read_prints_what_the_command_prints_alone(pair: Pair, args: list[str]) -> None:
    pair.check(*args)


@pytest.mark.server
def test_status_says_the_server_and_otherwise_the_same(pair: Pair) -> None:
    alone, routed = pair.both("status")
    assert routed.code == alone.code == 0
    served_line = f"served by `ok serve` (pid {pair.server.proc.pid}"
    lines = [ln for ln in routed.out.splitlines() if served_line not in ln]
    assert len(lines) == len(routed.out.splitlines()) - 1, routed.out
    assert pair.same("\n".join(lines), pair.served) == pair.same(alone.out.strip(), pair.here)


@pytest.mark.server
def test_open_takes_the_rank_of_the_last_search(pair: Pair) -> None:
    pair.check("search", "gene editing", "-k", "2")
    out = pair.check("open", "1")
    assert out.out.strip()


@pytest.mark.server
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


@pytest.mark.server
def test_the_rebuild_swaps_the_graph_under_the_running_server(pair: Pair) -> None:
    r = run_cli("index", "--rebuild", cwd=pair.served)
    assert r.code == 0, r.err
    r = run_cli("search", "gene editing", "-k", "1", "--json", cwd=pair.served)
    assert r.code == 0 and r.json(), r.err
    h = pair.server.http.get(f"/v1/{pair.server.stack}/search", params={"q": "gene editing"})
    assert h.status_code == 200 and h.json()["hits"][0]["id"] == r.json()[0]["id"]


@pytest.mark.server
def test_the_client_loads_neither_the_cli_nor_the_graph_nor_the_model(pair: Pair) -> None:
    code = (
        "import sys\n"
        "from openkl.cli import route\n"
        "rc = route.forward(['search', 'gene editing', '--json'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('typer', 'kuzu', 'onnxruntime', 'tokenizers', 'numpy', 'rich') "
        "or m in ('openkl.cli.root', 'openkl.graph', 'openkl.text.embeddings'))\n"
        "print(rc, heavy, file=sys.stderr)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=pair.served, capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip() == "0 []", p.stderr
    assert json.loads(p.stdout)[0]["type"]  # the hits came from the server


@pytest.mark.server
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


def _line(stream: IO[str], seconds: float) -> str:
    """The next line of `stream`, waited for up to `seconds` (a loaded machine is slow)."""
    got: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: got.put(stream.readline()), daemon=True).start()
    try:
        return got.get(timeout=seconds)
    except queue.Empty:
        raise AssertionError(f"no line within {seconds:g} s") from None


@pytest.mark.server
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
        try:
            assert p.stdout is not None and p.stderr is not None
            line = _line(p.stderr, 300)  # "watching …"
            assert "watching" in line, line
            # its first sync's line: the watch is set up, and waits for changes
            line = _line(p.stdout, 300)
            assert line.strip(), line
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=300)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        codes.append((p.returncode, err))
    assert codes[0][0] == codes[1][0], codes
    # the server still answers
    assert run_cli("search", "gene", "-k", "1", cwd=pair.served).code == 0


@pytest.mark.server
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


@pytest.mark.server
def test_the_server_runs_no_second_server_for_a_client(pair: Pair) -> None:
    from openkl.cli import route

    claim = route.served(["--root", str(pair.served), "status"])
    assert claim is not None
    for argv in (["serve", "--port", "0"], ["init", "elsewhere"]):
        conn = route.connect(claim)
        assert conn is not None
        with conn:
            # a client that skips its own check: the server still refuses
            code = route._call(conn, ["--root", str(pair.served), *argv])
        assert code == 2, argv
    assert not (pair.served / "elsewhere").exists()
    assert run_cli("status", cwd=pair.served).code == 0


@pytest.mark.server
def test_keys_are_managed_while_the_folder_is_served(pair: Pair) -> None:
    added = run_cli("serve", "keys", "add", "ci", "--scope", "read", "--json", cwd=pair.served)
    assert added.code == 0, added.err
    listed = run_cli("serve", "keys", "list", "--json", cwd=pair.served)
    assert [k["name"] for k in listed.json()] == ["ci"]
    assert run_cli("serve", "keys", "revoke", "ci", cwd=pair.served).code == 0


@pytest.mark.server
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


@pytest.mark.crash
@pytest.mark.server
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


@pytest.mark.server
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


@pytest.mark.server
def test_the_editor_runs_with_the_caller_s_environment_and_streams(
    pair: Pair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    editor = tmp_path / "ed.sh"
    # the editor sees the caller's variables (those an editor reads: its configuration's
    # place, not the caller's secrets), and writes to the caller's stderr
    editor.write_text(
        "#!/bin/sh\n"
        'echo "editing with $XDG_CONFIG_HOME token=${GITHUB_TOKEN:-none}" >&2\n'
        'sed -i "s/writer/WRITER/" "$1"\n'
    )
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.setenv("XDG_CONFIG_HOME", "/mark-42/config")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_not_for_the_editor")
    added = run_cli("mem", "add", "The lock has one writer.", "--json", cwd=pair.served)
    assert added.code == 0, added.err
    served_id = added.json()["id"]
    # the lone copy gets the same note and edit
    alone = run_ok("mem", "add", "The lock has one writer.", "--json", cwd=pair.here).json()
    assert run_ok("mem", "edit", alone["id"], cwd=pair.here).code == 0
    routed = run_cli("mem", "edit", served_id, cwd=pair.served)
    assert routed.code == 0, routed.err
    assert "editing with /mark-42/config token=none" in routed.err
    shown = run_cli("mem", "show", served_id, "--json", cwd=pair.served).json()
    assert "WRITER" in json.dumps(shown)
    hits = run_cli("search", "WRITER", "--in", "mem", "--json", cwd=pair.served).json()
    assert any(h["id"] == served_id for h in hits)  # re-indexed by the server


@pytest.mark.server
def test_triggers_and_bundles_routed(pair: Pair, tmp_path: Path) -> None:
    pair.check("trigger", "add", "t2", "-e", "lighthouse keepers", "--threshold", "0.5")
    pair.check("trigger", "remove", "t2")
    pair.check("trigger", "remove", "t2")
    assert pair.check("graph", "export", "-o", "b.aks.json").code == 0
    pair.check("bundle", "validate", "b.aks.json")
    pair.check("bundle", "validate", "missing.aks.json")


# -- who is at the other end of the socket -----------------------------------------------------


NOBODY = 65534  # a uid that is not ours (no account needed: root may act as any uid)


def _stamp(pid: int) -> dict[str, str]:
    from openkl.files.routing import process_stamp

    stamp = process_stamp(pid)
    assert stamp is not None
    return stamp


@pytest.fixture
def served_copy(_example_template: Path, tmp_path: Path) -> Iterator[tuple[Path, Server]]:
    root = tmp_path / "kb"
    shutil.copytree(_example_template, root, symlinks=True)
    s = Server(root)
    try:
        yield root, s
    finally:
        s.stop()


def _notes(s: Server) -> set[str]:
    r = s.http.get(f"/v1/{s.stack}/notes")
    assert r.status_code == 200, r.text
    return {n["id"] for n in r.json()}


def test_a_claim_of_no_live_server_sends_nothing_and_the_command_runs_here(
    _example_template: Path, tmp_path: Path
) -> None:
    root = tmp_path / "kb"
    shutil.copytree(_example_template, root, symlinks=True)
    where = public_dir()
    try:
        rogue = Rogue(where)
        # the rogue names itself (a live process, but no `ok serve` that claimed the folder)
        forge_claim(root, pid=rogue.proc.pid, socket=str(rogue.path))
        r = run_cli("search", "gene editing", "-k", "1", "--json", cwd=root, timeout=120)
        assert r.code == 0 and r.json(), r.err
        got = rogue.got()
        assert got == {"connections": 0, "bytes": 0, "fds": 0}, got
    finally:
        shutil.rmtree(where, ignore_errors=True)
    assert not (root / ".ok/serve.json").exists()  # the command run here cleaned it


@pytest.mark.server
def test_a_socket_that_is_not_the_live_server_s_receives_nothing(
    served_copy: tuple[Path, Server],
) -> None:
    root, s = served_copy
    before = _notes(s)
    where = public_dir()
    try:
        rogue = Rogue(where)  # one of our own processes, in a directory anyone may enter
        real = forge_claim(root, socket=str(rogue.path))  # the live server's claim, another socket
        r = run_cli(
            "mem",
            "add",
            "A note for the rogue.",
            cwd=root,
            env={"GITHUB_TOKEN": "t0k"},
            timeout=120,
        )
        got = rogue.got()
        assert got["bytes"] == 0 and got["fds"] == 0, got
    finally:
        shutil.rmtree(where, ignore_errors=True)
    # the real server holds the folder: the command says so in one line, and stores nothing
    assert r.code != 0 and r.out == "", r
    assert r.err.count("\n") == 1 and r.err.startswith("Error: the folder is served by"), r.err
    assert f"pid {s.proc.pid}" in r.err
    assert _notes(s) == before
    (root / ".ok/serve.json").write_text(real)


@pytest.mark.server
@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs root")
@pytest.mark.parametrize("claims", ["the server", "itself"])
def test_a_socket_of_another_user_receives_nothing(
    served_copy: tuple[Path, Server], claims: str
) -> None:
    root, s = served_copy
    before = _notes(s)
    where = public_dir(NOBODY)
    try:
        rogue = Rogue(where, uid=NOBODY)
        if claims == "the server":  # the live server's claim, with the rogue's socket
            real = forge_claim(root, socket=str(rogue.path))
        else:  # the rogue's own pid and start: a live process whose command line says serve
            real = forge_claim(
                root, pid=rogue.proc.pid, socket=str(rogue.path), **_stamp(rogue.proc.pid)
            )
        r = run_cli(
            "mem",
            "add",
            "A note for another user.",
            cwd=root,
            env={"GITHUB_TOKEN": "t0k", "OPENAI_API_KEY": "sk-x"},
            timeout=120,
        )
        got = rogue.got()
        assert got["bytes"] == 0 and got["fds"] == 0, got
    finally:
        shutil.rmtree(where, ignore_errors=True)
    assert r.code != 0 and r.out == "", r
    assert r.err.count("\n") == 1 and r.err.startswith("Error: the folder is served by"), r.err
    assert _notes(s) == before
    (root / ".ok/serve.json").write_text(real)
    routed = run_cli("status", "--json", cwd=root)  # the real claim routes again
    assert routed.code == 0 and routed.json()["server"]["pid"] == s.proc.pid, routed.err


@pytest.mark.server
@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs root")
def test_the_server_refuses_a_client_of_another_user(
    _example_template: Path, tmp_path: Path
) -> None:
    root = tmp_path / "kb"
    shutil.copytree(_example_template, root, symlinks=True)
    runtime = public_dir(os.getuid())  # in /tmp: another user can reach it once opened
    s = Server(root, env={"XDG_RUNTIME_DIR": str(runtime)})
    try:
        _refused_for_another_user(root, s, runtime)
    finally:
        s.stop()
        shutil.rmtree(runtime, ignore_errors=True)


def _refused_for_another_user(root: Path, s: Server, runtime: Path) -> None:
    before = _notes(s)
    sock = Path(json.loads((root / ".ok/serve.json").read_text())["socket"])
    assert sock.parent == runtime / "openkl", sock
    modes = sock.parent.stat().st_mode, sock.stat().st_mode
    # as if the socket had been left open to everyone: the server still checks who calls
    runtime.chmod(0o711)
    sock.parent.chmod(0o711)
    sock.chmod(0o777)
    client = (
        "import json, os, socket, sys\n"
        "c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "c.connect(sys.argv[1])\n"
        "c.settimeout(60)\n"
        "try:\n"
        "    socket.send_fds(c, [b'OK1\\n'], [0, 1, 2])\n"
        "    c.sendall(json.dumps({'argv': ['mem', 'add', 'from nobody'], 'cwd': '/',"
        " 'env': {}}).encode() + b'\\n')\n"
        "except OSError:\n"
        "    pass\n"
        "print(c.recv(65536).decode())\n"
    )
    try:
        p = subprocess.run(
            ["/usr/bin/python3", "-c", client, str(sock)],
            preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY)),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        runtime.chmod(0o700)
        sock.parent.chmod(modes[0] & 0o7777)
        sock.chmod(modes[1] & 0o7777)
    assert "error" in p.stdout and "user" in p.stdout, (p.stdout, p.stderr)
    assert _notes(s) == before


@pytest.mark.server
def test_the_routing_socket_lives_in_a_private_directory_of_ours(
    served_copy: tuple[Path, Server],
) -> None:
    import stat

    root, s = served_copy
    sock = Path(json.loads((root / ".ok/serve.json").read_text())["socket"])
    assert stat.S_ISSOCK(sock.lstat().st_mode)
    d = sock.parent.lstat()
    assert stat.S_ISDIR(d.st_mode) and d.st_uid == os.getuid(), sock
    assert d.st_mode & 0o077 == 0, oct(d.st_mode)  # nobody else may even look in
    assert sock.lstat().st_uid == os.getuid()


@pytest.mark.server
def test_a_folder_whose_socket_path_is_too_long_for_an_address_is_still_routed(
    _example_template: Path, tmp_path: Path
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    root = deep / "kb"
    shutil.copytree(_example_template, root, symlinks=True)
    runtime = deep / "run"  # a private runtime directory whose paths are too long too
    runtime.mkdir(mode=0o700)
    s = Server(root, env={"XDG_RUNTIME_DIR": str(runtime), "HOME": str(deep / "home")})
    try:
        sock = json.loads((root / ".ok/serve.json").read_text())["socket"]
        assert len(os.fsencode(sock)) > 107, sock  # longer than a unix socket address
        r = run_cli("status", "--json", cwd=root)
        assert r.code == 0 and r.json()["server"]["pid"] == s.proc.pid, r.err
    finally:
        s.stop()


def test_only_what_the_command_needs_leaves_this_process() -> None:
    from openkl.cli import route

    env = {
        "PATH": "/usr/bin",
        "HOME": "/home/me",
        "TERM": "xterm",
        "LANG": "C.UTF-8",
        "LC_TIME": "C",
        "NO_COLOR": "1",
        "EDITOR": "vi",
        "OK_SEARCH_K": "3",
        "XDG_CONFIG_HOME": "/home/me/.config",
        "GITHUB_TOKEN": "ghp_secret",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "OPENAI_API_KEY": "sk-llm",
        "SSH_AUTH_SOCK": "/run/agent",
        "GIT_SSH_COMMAND": "ssh -i key",
    }
    plain = {"PATH", "HOME", "TERM", "LANG", "LC_TIME", "NO_COLOR", "EDITOR", "OK_SEARCH_K"}
    plain.add("XDG_CONFIG_HOME")
    # a search neither asks a model nor fetches: no key, no agent
    assert set(route.environment(["search", "x"], env)) == plain
    assert set(route.environment(["--root", "kb", "mem", "list"], env)) == plain
    # what may ask the model gets the model's key (names that end in _API_KEY), never others
    assert set(route.environment(["ask", "why?"], env)) == plain | {"OPENAI_API_KEY"}
    assert set(route.environment(["mem", "add", "x"], env)) == plain | {"OPENAI_API_KEY"}
    # what may fetch a repository or S3 objects gets git's, ssh's and AWS's variables
    fetch = plain | {"OPENAI_API_KEY", "SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "AWS_SECRET_ACCESS_KEY"}
    assert set(route.environment(["store", "repo", "git@h:r"], env)) == fetch
    assert set(route.environment(["store", "s3", "s3://b/p"], env)) == fetch
    assert set(route.environment(["refresh", "--all"], env)) == fetch
    assert set(route.environment(["mcp"], env)) == fetch
    assert "AWS_SECRET_ACCESS_KEY" not in route.environment(["store", "web", "https://h"], env)


@pytest.mark.server
def test_routed_writes_wait_their_turn_among_the_server_s_own(
    served_copy: tuple[Path, Server],
) -> None:
    root, s = served_copy
    before = _notes(s)
    birds = ["kestrel", "heron", "puffin", "osprey", "plover", "curlew", "merlin", "dunlin"]
    routed: list[Result] = []
    http: list[tuple[int, str]] = []

    def by_cli(i: int) -> None:
        text = f"The {birds[i]} nests on cliff ledge number {i * 7 + 3} in spring."
        # a short lock timeout: a routed write that raced for the folder lock would fail
        r = run_cli(
            "mem",
            "add",
            text,
            "--allow-duplicate",
            "--json",
            cwd=root,
            env={"OK_LOCK_TIMEOUT": "1"},
        )
        routed.append(r)

    def by_http(i: int) -> None:
        text = f"Shipment {i} of {birds[i]} rings left the depot on pallet {i * 11 + 5}."
        r = s.http.post(f"/v1/{s.stack}/notes", json={"text": text, "allow_duplicate": True})
        http.append((r.status_code, r.text))

    threads = [threading.Thread(target=by_cli, args=(i,)) for i in range(8)]
    threads += [threading.Thread(target=by_http, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads)
    assert all(r.code == 0 for r in routed), [r.err for r in routed if r.code]
    assert all(code == 201 for code, _ in http), http
    added = {r.json()["id"] for r in routed} | {json.loads(t)["id"] for _, t in http}
    assert len(added) == 16
    assert _notes(s) == before | added  # every one stored, and indexed


@pytest.mark.postgres
@pytest.mark.server
def test_a_routed_write_is_in_postgresql_when_the_command_returns(
    example_kf: Path,
    pg_uri: str,
) -> None:
    """No watcher: the routed write goes through the stack's writer, which syncs the stack
    in PostgreSQL before the command ends."""
    import psycopg

    s = Server(example_kf, "--backend", pg_uri, env={"OK_SERVE_WATCH": "false"})
    try:
        r = run_cli("mem", "add", "Sextants measure the sun's height.", "--json", cwd=example_kf)
        assert r.code == 0, r.err
        with psycopg.connect(pg_uri) as admin:
            row = admin.execute("SELECT count(*) FROM notes WHERE id = %s", (r.json()["id"],))
            assert row.fetchone() == (1,)
    finally:
        assert s.stop() == 0


def test_a_write_waiting_its_turn_is_interrupted_and_the_queue_goes_on(kf: Path) -> None:
    """A routed write waits behind the server's own, with no time limit, and a Ctrl-C (an
    interrupt in its thread) ends the wait without taking or losing the slot."""
    from openkl.files.folder import open_folder, queue_writes
    from openkl.server.command_socket import _interrupt
    from openkl.server.stacks import Served

    st = Served("kf", open_folder(kf))
    holding, release = threading.Event(), threading.Event()
    ended: dict[str, object] = {}

    def server_write() -> None:
        with st.writing("a long write"):
            holding.set()
            release.wait(120)

    def routed_write(name: str) -> None:
        try:
            # another Folder, as a command's; and a third one in the same thread: nested,
            # not a second wait
            with (
                open_folder(kf).write_lock("ok mem add"),
                open_folder(kf).write_lock("ok mem add"),
            ):
                ended[name] = "wrote"
        except KeyboardInterrupt:
            ended[name] = "interrupted"

    with queue_writes(kf, st.routed):
        server = threading.Thread(target=server_write)
        server.start()
        assert holding.wait(120)
        waiting = threading.Thread(target=routed_write, args=("first",))
        waiting.start()
        until(lambda: st.queued() == 1, 120, 0.02)
        _interrupt(waiting)
        waiting.join(120)
        assert ended == {"first": "interrupted"} and st.queued() == 0
        second = threading.Thread(target=routed_write, args=("second",))
        second.start()
        until(lambda: st.queued() == 1, 120, 0.02)
        release.set()
        server.join(120)
        second.join(120)
    assert ended == {"first": "interrupted", "second": "wrote"}
    assert not st.writer.locked()
    with open_folder(kf).write_lock("after", timeout=0):  # the folder's lock is free too
        pass


@pytest.mark.server
def test_a_claim_copied_from_another_served_folder_is_not_followed(
    served_copy: tuple[Path, Server], _example_template: Path, tmp_path: Path
) -> None:
    """Our own live server, but of another folder: its greeting does not name this one, so
    nothing is sent and the command says the folder is served (as its claim says)."""
    root, s = served_copy
    other = tmp_path / "other"
    shutil.copytree(_example_template, other, symlinks=True)
    shutil.copy(root / ".ok/serve.json", other / ".ok/serve.json")
    before = _notes(s)
    r = run_cli("mem", "add", "A note for the wrong folder.", "--json", cwd=other, timeout=120)
    assert r.code != 0 and r.out == "", r
    assert r.err.startswith("Error: the folder is served by") and r.err.count("\n") == 1, r.err
    assert _notes(s) == before
    notes = [p.read_text() for p in (other / "memories").rglob("*.md")]
    assert notes and not any("wrong folder" in n for n in notes)  # nor here
