"""One writer at a time; readers never block forever; a killed ingest is repaired by sync."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.run import OK_BIN, run_cli, run_ok

# holds the writer lock until its stdin closes (`_release`), or for at most argv[2] seconds
HOLD_LOCK = """
import select, sys
from openkl.files.folder import Folder
f = Folder(__import__('pathlib').Path(sys.argv[1]))
with f.write_lock("ok store ingest (test holder)"):
    print("locked", flush=True)
    select.select([sys.stdin], [], [], float(sys.argv[2]))
"""


def _hold(root: Path, seconds: float = 600) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(root), str(seconds)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "locked"
    return p


def _release(holder: subprocess.Popen) -> None:
    """The holder lets the lock go and ends."""
    assert holder.stdin is not None
    holder.stdin.close()
    assert holder.wait(timeout=120) == 0


def test_second_writer_waits_then_fails_naming_the_holder(kf: Path) -> None:
    holder = _hold(kf)
    try:
        t = time.monotonic()
        r = run_ok("mem", "add", "should wait for the lock")
        waited = time.monotonic() - t
        assert r.code == 2
        assert "locked by another writer" in r.err
        assert f"pid {holder.pid}" in r.err and "test holder" in r.err
        assert 4.5 <= waited < 60  # lock_timeout is 5 s here
        assert not list(kf.glob("memories/by_date/**/*.md"))
        st = run_ok("status", "--json").json()
        assert st["lock"]["pid"] == holder.pid
    finally:
        holder.kill()
        holder.wait()
    # a killed holder leaves no stale lock behind
    assert run_ok("mem", "add", "now it works").code == 0
    assert run_ok("status", "--json").json()["lock"] is None


def test_a_waiting_writer_says_who_holds_the_lock(kf: Path) -> None:
    """After about a second of waiting, once, on stderr (a pipe here, not a terminal): the
    holder's pid and that it is waiting; then it either gets the lock or names the holder."""
    env = {"OK_LOCK_TIMEOUT": "3", "OK_ROOT": str(kf)}
    # the holder lets go once the writer has said that it waits
    holder = _hold(kf)
    writer = subprocess.Popen(
        [OK_BIN, "mem", "add", "waits, says so, then succeeds"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env, "OK_LOCK_TIMEOUT": "120"},
    )
    try:
        assert writer.stderr is not None
        said = writer.stderr.readline()  # "" if the writer ended without a word
        assert "waiting for the writer lock" in said and f"pid {holder.pid}" in said, said
        assert "test holder" in said and "120s" in said
        _release(holder)
        _, rest = writer.communicate(timeout=120)
        assert writer.returncode == 0, said + rest
        assert rest == ""  # said once
    finally:
        holder.kill()
        holder.wait()
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    holder = _hold(kf)
    try:
        r = run_cli("mem", "add", "gives up", env=env)
        assert r.code == 2
        waiting, error = r.err.strip().splitlines()
        assert "waiting for the writer lock" in waiting and f"pid {holder.pid}" in waiting
        assert error.startswith("Error: the folder is locked by another writer")
        assert f"pid {holder.pid}" in error
    finally:
        holder.kill()
        holder.wait()
    # a writer that gets the lock at once says nothing
    r = run_cli("mem", "add", "no wait", env=env)
    assert r.code == 0 and r.err == ""


def test_writer_waits_for_a_short_holder(kf: Path, monkeypatch) -> None:
    import threading

    monkeypatch.setenv("OK_LOCK_TIMEOUT", "120")
    holder = _hold(kf)
    letting_go = threading.Timer(1.0, _release, (holder,))
    letting_go.start()
    try:
        r = run_ok("mem", "add", "waits a moment, then succeeds")
        assert r.code == 0, r.err
    finally:
        letting_go.join()
        holder.kill()
        holder.wait()


def test_reader_during_a_writer_does_not_corrupt(example_kf: Path, monkeypatch) -> None:
    """Readers wait (bounded) for the graph while a writer has it, and then read fine."""
    monkeypatch.setenv("OK_LOCK_TIMEOUT", "60")  # a loaded machine may slow the writer
    writer = subprocess.Popen(
        [OK_BIN, "store", "ingest", str(Path(__file__).parent.parent / "README.md")],
        env={**os.environ},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        results = [run_cli("search", "Lovelace", "--json", "-k", "1") for _ in range(3)]
    finally:
        writer.wait(timeout=300)
    for r in results:
        assert r.code == 0, r.err
        assert "ada-lovelace" in r.json()[0]["path"]


@pytest.mark.crash
def test_killed_ingest_is_repaired_by_sync(kf: Path, tmp_path: Path) -> None:
    src = tmp_path / "many"
    src.mkdir()
    words = [
        "river",
        "delta",
        "sediment",
        "tide",
        "estuary",
        "marsh",
        "heron",
        "reed",
        "current",
        "silt",
    ]
    for i in range(120):
        body = " ".join(words[(i + j) % len(words)] for j in range(400))
        tag = "mark" + chr(97 + i % 26) + chr(97 + i // 26)  # letters only: one FTS token
        (src / f"doc{i:03d}.md").write_text(f"# Document {i}\n\n{body} {tag}\n")
    keep = run_ok("mem", "add", "a note that must survive", "--json").json()
    note_file = next(kf.glob("memories/by_date/*/*/*.md"))
    before = note_file.read_bytes()
    proc = subprocess.Popen(
        [OK_BIN, "store", "ingest", str(src)],
        env={**os.environ},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # kill it once it has started writing normalized files, before it can finish
    deadline = time.monotonic() + 120
    while (
        proc.poll() is None
        and time.monotonic() < deadline
        and not list((kf / "store/normalized").rglob("*.ok.md"))
    ):
        time.sleep(0.05)
    assert proc.poll() is None, "the ingest ended before it was killed"
    time.sleep(0.5)  # a moment into its writing: where the kill lands is the test's point
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert note_file.read_bytes() == before
    r = run_ok("sync", "--json")
    assert r.code == 0, r.err
    st = run_ok("status", "--json").json()
    assert st["in_sync"] is True
    n_files = len(list((kf / "store/normalized").rglob("*.ok.md")))
    assert st["counts"]["Doc"] == n_files
    # finishing the ingest afterwards adds the rest and leaves everything consistent
    r = run_ok("store", "ingest", str(src), "--json")
    assert r.code == 0, r.err
    assert run_ok("status", "--json").json()["counts"]["Doc"] == 120
    hits = run_ok("search", "markzc", "--mode", "fts", "--json", "--in", "store").json()
    assert hits and hits[0]["path"].endswith("doc077.ok.md")
    assert run_ok("mem", "show", keep["id"], "--json").json()["text"] == "a note that must survive"
    assert not list((kf / "store").rglob("*.tmp"))


def test_help_is_light() -> None:
    """`ok --help` imports none of the heavy modules (its speed is measured in
    bench/refresh.py, not here: a loaded machine must not fail the suite)."""
    code = (
        "import sys, time; t=time.perf_counter(); sys.argv=['ok','--help'];\n"
        "from openkl.cli.root import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy=[m for m in ('kuzu','fastembed','kreuzberg','onnxruntime','numpy','mcp','httpx')"
        " if m in sys.modules]\n"
        "print('HEAVY', heavy, time.perf_counter()-t)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    line = [x for x in r.stdout.splitlines() if x.startswith("HEAVY")][0]
    assert line.startswith("HEAVY []"), line
    r2 = run_cli("--help")
    assert r2.code == 0 and "Usage" in r2.out


HOLD_GRAPH = """
import sys, time
from pathlib import Path
from openkl.graph import Graph
with Graph.open(Path(sys.argv[1]) / ".ok" / "kuzu", write=False, check=False):
    print("open", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_note_written_while_the_graph_is_busy_is_kept_and_synced_later(
    kf: Path, monkeypatch
) -> None:
    monkeypatch.setenv("OK_LOCK_TIMEOUT", "1")
    reader = subprocess.Popen(
        [sys.executable, "-c", HOLD_GRAPH, str(kf), "30"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
        r = run_ok("mem", "add", "written while a reader had the graph")
        assert r.code == 2
        assert "is saved in memories/by_date/" in r.err and "ok sync" in r.err
        assert len(r.err.strip().splitlines()) == 1
    finally:
        reader.kill()
        reader.wait()
    assert len(list(kf.glob("memories/by_date/*/*/*.md"))) == 1
    assert run_ok("sync", "--json").json()["notes_added"]
    hits = run_ok("search", "reader had the graph", "--json").json()
    assert hits and hits[0]["type"] == "memory"


def test_writer_lock_nests_in_a_thread_and_excludes_other_threads(kf: Path) -> None:
    import threading

    from openkl.files.folder import Folder

    f = Folder(kf)
    order: list[str] = []
    with f.write_lock("outer"):
        with f.write_lock("inner"):  # same thread: no deadlock
            order.append("nested")

        def other() -> None:
            with f.write_lock("other thread", timeout=120):
                order.append("other")

        t = threading.Thread(target=other)
        t.start()
        time.sleep(0.5)
        order.append("outer done")  # the other thread must still be waiting
    t.join(timeout=120)
    assert order == ["nested", "outer done", "other"]


def test_readers_keep_working_through_a_stream_of_writes(example_kf: Path, monkeypatch) -> None:
    """Many short writers and readers interleaved: every read succeeds (readers wait out a
    writer, including the moment it closes and its log is being checkpointed)."""
    monkeypatch.setenv("OK_LOCK_TIMEOUT", "60")
    script = (
        "for i in 1 2 3 4 5 6; do "
        f'{OK_BIN} mem add --allow-duplicate "stream note $i about lighthouses" >/dev/null || exit 1; done'
    )
    writer = subprocess.Popen(
        ["bash", "-c", script], env={**os.environ}, stderr=subprocess.PIPE, text=True
    )
    reads = []
    try:
        while writer.poll() is None and len(reads) < 40:
            reads.append(run_cli("search", "Lovelace", "--json", "-k", "1"))
    finally:
        _, err = writer.communicate(timeout=280)
    assert writer.returncode == 0, err
    assert reads
    for r in reads:
        assert r.code == 0, r.err
        assert "ada-lovelace" in r.json()[0]["path"]
    assert len(run_ok("mem", "list", "--json").json()) == 7
