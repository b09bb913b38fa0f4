"""A folder's resident process: the first `ok` command in a folder that no server owns starts
one, later commands run in it, it exits when idle or unclaimed, and it can be turned off.
Commands that need no graph never load the heavy layers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.route import Rogue, forge_claim, public_dir
from helpers.run import OK_BIN, Result, run_cli, run_ok, until

from openkl.cli import spawn
from openkl.files import routing

HEAVY = ("kuzu", "onnxruntime", "tokenizers", "numpy", "kreuzberg", "psycopg", "httpx", "mcp")


@pytest.mark.parametrize(
    "argv, env",
    [
        (["grep", "-i", "gene"], {}),
        (["grep", "-c", "gene", "--json"], {}),
        (["--version"], {}),
        (["completion", "bash"], {}),
        ([], {"_OK_COMPLETE": "complete_bash", "COMP_WORDS": "ok mem show m-", "COMP_CWORD": "3"}),
    ],
    ids=["grep", "grep -c", "--version", "completion", "TAB"],
)
def test_commands_that_need_no_graph_load_no_heavy_layer(
    example_kf: Path, argv: list[str], env: dict[str, str]
) -> None:
    code = (
        "import sys\n"
        "from openkl.cli.route import main\n"
        "sys.argv = ['ok', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} "
        "or m in ('openkl.graph', 'openkl.text.embeddings', 'openkl.graph.indexing', 'openkl.graph.search'))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=example_kf,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OK_NO_DAEMON": "", **env},
    )
    assert p.stdout.strip(), p.stderr  # it did its work
    assert p.stderr.strip().splitlines()[-1] == "HEAVY []", p.stderr
    assert not (example_kf / ".ok/serve.json").exists()  # and started nothing


# -- the resident process -------------------------------------------------------------------
class Folder:
    """A copy of the example folder in which commands may start a resident process; any
    that runs is stopped at the end."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def ok(self, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Result:
        # run to the end: a resident process that kept the command's pipes open would make
        # this wait until it exits (600 s), beyond the timeout
        return run_cli(
            *args, cwd=self.root, env={"OK_NO_DAEMON": "", **(env or {})}, timeout=timeout
        )

    def claim(self) -> dict[str, object]:
        return json.loads((self.root / ".ok/serve.json").read_text())

    def pid(self) -> int | None:
        return spawn.resident_pid(self.root)

    def log(self) -> list[dict[str, object]]:
        path = self.root / ".ok/cache/resident.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(x) for x in lines if x.startswith("{")]

    def gone(self) -> bool:
        return self.pid() is None and not (self.root / ".ok/serve.json").exists()


@pytest.fixture
def folder(
    _example_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Folder]:
    root = tmp_path / "kb"
    shutil.copytree(_example_template, root, symlinks=True)
    monkeypatch.delenv("OK_ROOT", raising=False)
    f = Folder(root)
    try:
        yield f
    finally:
        pid = f.pid()
        try:
            spawn.stop(root, within=120)
        except TimeoutError:
            if pid is not None:
                os.kill(pid, signal.SIGKILL)


@pytest.mark.server
def test_the_first_command_starts_it_and_later_ones_run_in_it(folder: Folder) -> None:
    alone = run_ok("search", "gene editing", "-k", "3", "--json", cwd=folder.root)
    first = folder.ok("search", "gene editing", "-k", "3", "--json")
    assert first.code == 0, first.err
    assert first.out == alone.out
    # said once, on stderr, with how to turn it off
    assert first.err.count("started a resident process") == 1, first.err
    assert "OK_NO_DAEMON=1" in first.err and "serve.auto false" in first.err
    claim = folder.claim()
    pid = folder.pid()
    assert pid is not None and claim["pid"] == pid and claim["resident"]
    second = folder.ok("search", "gene editing", "-k", "3", "--json")
    assert second.code == 0 and second.out == alone.out and second.err == "", second.err

    def mine() -> list[dict[str, object]]:  # its entry is written within a second
        status = folder.ok("daemon", "status", "--json")
        assert status.code == 0, status.err
        rows = [r for r in status.json() if r["root"] == str(folder.root)]
        assert len(rows) == 1 and rows[0]["pid"] == pid and rows[0]["this"], status.out
        return rows if rows[0]["commands"] >= 2 else []

    assert int(until(mine, 60)[0]["rss_mb"]) > 0
    text = folder.ok("status")
    assert f"served by its resident process (pid {pid}" in text.out, text.out
    # a new one after a stop is not announced again
    assert folder.ok("daemon", "stop").code == 0
    assert folder.gone()
    again = folder.ok("mem", "list")
    assert again.code == 0 and "started a resident process" not in again.err, again.err
    assert folder.pid() not in (None, pid)


@pytest.mark.server
def test_it_exits_when_idle(folder: Folder) -> None:
    r = folder.ok("mem", "list", env={"OK_SERVE_IDLE_EXIT": "2"})
    assert r.code == 0, r.err
    sock = Path(str(folder.claim()["socket"]))
    assert sock.exists()
    until(folder.gone, 120, 0.2)
    assert not sock.exists() and not sock.with_suffix(".json").exists()
    assert any(e.get("reason") == "no command for 2 s" for e in folder.log()), folder.log()


@pytest.mark.server
def test_commands_keep_it_busy_and_it_never_outlives_its_claim(folder: Folder) -> None:
    assert folder.ok("mem", "list", env={"OK_SERVE_IDLE_EXIT": "4"}).code == 0
    pid = folder.pid()
    for _ in range(4):  # commands 2 s apart: never idle for 4 s
        time.sleep(2)
        assert folder.ok("mem", "list").code == 0
        assert folder.pid() == pid
    (folder.root / ".ok/serve.json").unlink()
    until(lambda: folder.pid() is None, 60, 0.2)
    assert any(e.get("reason") == "its claim of the folder is gone" for e in folder.log())


@pytest.mark.server
@pytest.mark.parametrize("how", ["OK_NO_DAEMON=1", "serve.auto false", "OK_NO_ROUTE=1"])
def test_turned_off_no_command_starts_one(folder: Folder, how: str) -> None:
    env = {}
    if how == "serve.auto false":
        assert run_ok("config", "set", "serve.auto", "false", cwd=folder.root).code == 0
    else:
        env = {how.split("=")[0]: "1"}
    for args in (["search", "gene editing"], ["mem", "add", "A note with it off."], ["status"]):
        r = folder.ok(*args, env=env)
        assert r.code == 0, r.err
        assert "resident" not in r.err
    assert folder.gone()
    assert not (folder.root / ".ok/cache/resident.log").exists()


@pytest.mark.server
def test_commands_that_need_no_graph_start_none(folder: Folder) -> None:
    for args in (["grep", "gene"], ["config", "get", "search.k"], ["--version"], ["--help"]):
        assert folder.ok(*args).code == 0, args
    assert folder.ok("search", "--help").code == 0
    assert folder.gone()


@pytest.mark.server
def test_a_killed_one_is_cleaned_up_by_the_next_command(folder: Folder) -> None:
    assert folder.ok("mem", "list").code == 0
    pid = folder.pid()
    assert pid is not None
    sock = Path(str(folder.claim()["socket"]))
    os.kill(pid, signal.SIGKILL)
    until(lambda: routing.process_stamp(pid) is None, 60, 0.1)
    r = folder.ok("search", "gene editing", "-k", "1", "--json")
    assert r.code == 0 and r.json(), r.err
    new = folder.pid()
    assert new is not None and new != pid and folder.claim()["pid"] == new
    assert sock.exists()  # the same name, the new process's socket
    listed = until(lambda: [r["pid"] for r in spawn.listed() if r["pid"] in (pid, new)], 60)
    assert listed == [new]


@pytest.mark.server
def test_a_failed_start_is_said_once_and_the_command_runs_here(folder: Folder) -> None:
    r = folder.ok("search", "gene editing", "-k", "1", env={"OK_SERVE_IDLE_EXIT": "soon"})
    assert r.code == 0 and r.out, r.err  # the command ran in its own process
    assert "resident process could not start" in r.err and "soon" in r.err, r.err
    assert folder.gone()
    later = folder.ok("search", "gene editing", "-k", "1")  # not tried again for a while
    assert later.code == 0 and later.err == "", later.err
    assert folder.gone()


@pytest.mark.server
def test_a_socket_that_is_not_the_resident_process_s_receives_nothing(folder: Folder) -> None:
    assert folder.ok("mem", "list").code == 0
    pid = folder.pid()
    where = public_dir()
    try:
        rogue = Rogue(where)
        real = forge_claim(folder.root, socket=str(rogue.path))
        r = folder.ok("mem", "add", "A note for the rogue.", env={"GITHUB_TOKEN": "t0k"})
        got = rogue.got()
        assert got["bytes"] == 0 and got["fds"] == 0, got
    finally:
        shutil.rmtree(where, ignore_errors=True)
    assert r.code == 2 and r.out == "", r
    assert r.err.startswith("Error: the folder is served by its resident process"), r.err
    assert folder.pid() == pid  # no second one started
    (folder.root / ".ok/serve.json").write_text(real)
    assert "A note for the rogue." not in folder.ok("mem", "list").out


@pytest.mark.server
def test_ctrl_c_interrupts_the_command_not_the_resident_process(folder: Folder) -> None:
    # while the first command waits for the process it started: that one goes on starting
    first = subprocess.Popen(
        [OK_BIN, "mem", "list"],
        cwd=folder.root,
        env={**os.environ, "OK_NO_DAEMON": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stderr is not None
        line = first.stderr.readline()
        assert "started a resident process" in line, line
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 130 and err.strip() == "Interrupted.", (first.returncode, err)
    until(lambda: "pid" in folder.claim() if (folder.root / ".ok/serve.json").exists() else None)
    assert folder.ok("mem", "list").code == 0
    pid = folder.pid()
    assert pid == folder.claim()["pid"]
    p = subprocess.Popen(
        [OK_BIN, "sync", "--watch"],
        cwd=folder.root,
        env={**os.environ, "OK_NO_DAEMON": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stderr is not None
        line = p.stderr.readline()
        assert "watching" in line, line
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode in (0, 130), (p.returncode, err)
    assert folder.pid() == pid
    assert folder.ok("search", "gene", "-k", "1").code == 0


@pytest.mark.server
def test_writes_at_once_go_through_one_writer(folder: Folder) -> None:
    results: dict[int, Result] = {}

    def add(i: int) -> None:
        results[i] = folder.ok("mem", "add", f"Concurrent note number {i} about tides.")

    threads = [threading.Thread(target=add, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, r in results.items():
        assert r.code == 0, (i, r.err)
    started = [e for e in folder.log() if e.get("event") == "resident.started"]
    assert len(started) == 1, folder.log()  # the others waited for the first one's
    notes = folder.ok("mem", "list", "--json", "-n", "100").json()
    texts = {n.get("text", n.get("title", "")) for n in notes}
    assert sum("Concurrent note number" in t for t in texts) == 6, texts
    assert len(list((folder.root / "memories/by_date").rglob("*.md"))) == 7
    # a write beside the resident process, in a process of its own, is refused
    alone = folder.ok("mem", "add", "Written beside it.", env={"OK_NO_ROUTE": "1"})
    assert alone.code == 2 and "resident process" in alone.err, alone.err
    assert folder.ok("status", "--json").json()["counts"]["MemoryNote"] == 7


@pytest.mark.server
def test_daemon_start_stop_status(folder: Folder) -> None:
    none = folder.ok("daemon", "stop")
    assert none.code == 1 and "no resident process" in none.out, none
    started = folder.ok("daemon", "start", "--json", env={"OK_NO_DAEMON": "1"})
    assert started.code == 0, started.err
    d = started.json()
    assert d["started"] and d["pid"] == folder.pid()
    assert "started a resident process" not in started.err  # asked for: nothing to tell
    again = folder.ok("daemon", "start", "--json")
    assert again.code == 0 and again.json() == {**d, "started": False}
    text = folder.ok("daemon", "status")
    assert f"pid {d['pid']}" in text.out and "(this folder)" in text.out, text.out
    stopped = folder.ok("daemon", "stop", "--json")
    assert stopped.code == 0 and stopped.json()["stopped"] == d["pid"]
    assert folder.gone()


@pytest.mark.server
def test_ok_serve_takes_the_folder_over(folder: Folder) -> None:
    from helpers.serve import Server

    assert folder.ok("mem", "list").code == 0
    pid = folder.pid()
    s = Server(folder.root)
    try:
        assert routing.process_stamp(pid or 0) is None or folder.pid() is None
        assert folder.claim()["pid"] == s.proc.pid and "resident" not in folder.claim()
        assert "this server takes its place" in s.log.read_text()
        r = folder.ok("search", "gene", "-k", "1", "--json")
        assert r.code == 0 and r.json(), r.err
        assert folder.pid() is None  # routed to the server: no resident process started
    finally:
        s.stop()


def _entities(root: Path) -> list[dict[str, object]]:
    r = run_ok("graph", "entities", "--json", "-n", "1000", "--min-confidence", "0", cwd=root)
    assert r.code == 0, r.err
    return sorted(r.json(), key=lambda e: str(e["id"]))


NOTES = [
    "Grace Hopper wrote the first compiler, the A-0 System, at Remington Rand.",
    "Grace Hopper led the work on COBOL after the A-0 System.",
    "The A-0 System ran on the UNIVAC I.",
]


@pytest.mark.server
def test_a_note_s_entities_follow_it_and_equal_a_rebuild(folder: Folder, tmp_path: Path) -> None:
    for text in NOTES:  # answered first; the entities come when the writes pause
        r = folder.ok("mem", "add", text)
        assert r.code == 0, r.err
    # a command that reads entities waits for them
    r = folder.ok("graph", "entities", "--json", "-n", "1000", "--min-confidence", "0")
    assert r.code == 0, r.err
    assert any(e["name"] == "Grace Hopper" for e in r.json()), r.out
    assert folder.ok("daemon", "stop").code == 0
    served = _entities(folder.root)
    rebuilt = tmp_path / "rebuilt"
    shutil.copytree(folder.root, rebuilt, symlinks=True)
    assert run_ok("index", "--rebuild", cwd=rebuilt).code == 0
    assert served == _entities(rebuilt)


def test_entities_owed_when_a_process_ends_are_made_by_the_next_sync(
    example_kf: Path, tmp_path: Path
) -> None:
    from openkl.entities.consolidation import consolidating_later

    woken = []
    with consolidating_later(example_kf, lambda: woken.append(1)):
        for text in NOTES:
            assert run_ok("mem", "add", text).code == 0
    assert woken  # and no one paid: the process "ended" here
    assert not any(e["name"] == "Grace Hopper" for e in _entities(example_kf))
    r = run_ok("sync", "--json")
    assert r.code == 0, r.err
    synced = _entities(example_kf)
    assert any(e["name"] == "Grace Hopper" for e in synced)
    rebuilt = tmp_path / "rebuilt"
    shutil.copytree(example_kf, rebuilt, symlinks=True)
    assert run_ok("index", "--rebuild", cwd=rebuilt).code == 0
    assert synced == _entities(rebuilt)
