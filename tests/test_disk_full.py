"""A full disk: one clear error (where, how to fix), exit 1, nothing half-written, and a
consistent folder again once space is freed and `ok sync` has run."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.run import run_cli, run_ok

from openkl.files import notes as notes_mod
from openkl.files.folder import Folder


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 96 MB tmpfs, mounted for this test."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({(r.stderr or r.stdout).strip()}); "
            "test_full_device_on_append covers ENOSPC without a mount"
        )
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(mnt)], check=False)  # still busy: detach


def _fill(mnt: Path, leave: int) -> None:
    """Take all free space on `mnt` but about `leave` bytes."""
    filler = mnt / "filler"
    filler.unlink(missing_ok=True)
    st = os.statvfs(mnt)
    want = max(0, st.f_bavail * st.f_frsize - leave)
    block = b"\0" * (1 << 20)
    with open(filler, "wb") as f:
        try:
            while want > 0:
                want -= f.write(block[: min(len(block), want)])
            f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC


def _lines(p: Path) -> list[Any]:
    text = p.read_text(encoding="utf-8")
    assert not text or text.endswith("\n"), f"{p} ends in a torn line"
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _check_files(root: Path, docs: dict[str, str]) -> None:
    """Whatever is on disk is whole: no temp files, every log and mapping line parses,
    every note parses, every normalized document holds its whole text."""
    assert not [p for p in root.rglob("*.tmp") if p.name.startswith(".")]
    _lines(root / ".ok" / "mapping.jsonl")
    for p in [root / ".ok" / "ops.log", *(root / "events").glob("*.jsonl")]:
        if p.exists():
            _lines(p)
    _, problems = notes_mod.scan(Folder(root))
    assert problems == []
    for p in (root / "store" / "normalized").glob("*.ok.md"):
        assert p.read_text(encoding="utf-8") == docs[p.name], p


def test_full_tmpfs(small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = small_fs / "kf"
    assert run_ok("init", str(root)).code == 0
    monkeypatch.setenv("OK_ROOT", str(root))
    assert run_ok("mem", "add", "Space was plenty at first.").code == 0
    docs: dict[str, str] = {}
    failures = 0
    for i, leave in enumerate((0, 16 << 10, 64 << 10, 256 << 10, 1 << 20)):
        _fill(small_fs, leave)
        src = tmp_path / f"tide{i}.md"
        src.write_text(f"# Tide {i}\n\nThe tide table number {i} is kept here.\n")
        docs[f"tide{i}.ok.md"] = src.read_text()
        for args in (
            ("mem", "add", "--allow-duplicate", f"Note {i} written with {leave} bytes free."),
            ("store", "ingest", str(src)),
        ):
            r = run_ok(*args)
            _check_files(root, docs)
            if r.code == 0:  # enough room after all: fine, as long as nothing is torn
                continue
            failures += 1
            assert r.code == 2, r.err
            lines = r.err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("Error: the disk is "), r.err
            assert "full" in lines[0].split(";")[0], r.err
            assert "please report" not in r.err and "unexpected" not in r.err
            assert str(small_fs) in lines[0] and "`ok sync`" in lines[0]
    assert failures >= 4
    (small_fs / "filler").unlink()
    r = run_ok("sync")
    assert r.code == 0, r.err
    st = run_ok("status", "--json").json()
    assert st["in_sync"], st
    _check_files(root, docs)
    n_docs = len(list((root / "store" / "normalized").glob("*.ok.md")))
    n_notes = len(list((root / "memories" / "by_date").rglob("*.md")))
    assert st["counts"]["Doc"] == n_docs and st["counts"]["MemoryNote"] == n_notes
    # every document in the graph has its chunks (a half-loaded one would be skipped by sync)
    rows = run_ok(
        "graph",
        "cypher",
        "MATCH (d:Doc) OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c) RETURN d.path AS p, count(c) AS n",
        "--json",
    ).json()
    assert rows and all(r["n"] >= 1 for r in rows), rows
    hits = run_ok("search", "tide table", "--in", "store", "--json", "-k", "10").json()
    assert {h["path"].rsplit("/", 1)[-1] for h in hits} == set(
        p.name for p in (root / "store" / "normalized").glob("*.ok.md")
    )


@pytest.mark.server
def test_full_tmpfs_through_mcp(small_fs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.mcp import fail, serve

    root = small_fs / "kf"
    assert run_ok("init", str(root)).code == 0
    monkeypatch.setenv("OK_ROOT", str(root))
    assert run_ok("mem", "add", "Space was plenty at first.").code == 0

    async def go(c: Any) -> None:
        _fill(small_fs, 0)
        err = await fail(c, "mem_add", text="No room for this one.")
        assert "the disk is full" in err and str(small_fs) in err, err

    serve([root], go)


def test_full_device_on_append(kf: Path) -> None:
    """ENOSPC from the OS without a mount: the month's event log is a device node like
    /dev/full (a node inside the folder, since a link out of it is never followed)."""
    assert run_cli("mem", "add", "before", env={"OK_ROOT": str(kf)}).code == 0
    log = next((kf / "events").glob("*.jsonl"))
    log.unlink()
    full = os.stat("/dev/full").st_rdev
    try:
        os.mknod(log, stat.S_IFCHR | 0o666, full)
    except PermissionError:
        pytest.skip("creating a device node needs root; test_full_tmpfs covers ENOSPC")
    r = run_cli("mem", "add", "the event cannot be written", env={"OK_ROOT": str(kf)})
    assert r.code == 2
    line = r.err.strip().splitlines()[-1]
    assert line.startswith(f"Error: the disk is full: cannot write events/{log.name}"), r.err
    assert "please report" not in r.err


def test_a_large_load_stops_with_room_left_when_the_disk_fills(
    small_fs: Path, tmp_path: Path
) -> None:
    """A load of several commits asks for room before each (its rows, and the tables its
    checkpoint writes anew): when the disk fills part way, it stops with one clear line
    and room left on the disk, rather than inside the graph engine (which can abort the
    process); the batches committed so far stay, and `ok sync` finishes the rest."""
    from helpers.notes import write_notes

    src = write_notes(tmp_path / "src", range(60))
    # caches filled on another disk: on the small one, the load writes files and the graph
    warm = tmp_path / "warm"
    assert run_ok("init", str(warm)).code == 0
    assert run_ok("--root", str(warm), "store", "ingest", str(src)).code == 0
    root = small_fs / "kf"
    assert run_ok("init", str(root)).code == 0
    for cache in (warm / ".ok" / "cache").glob("*.sqlite"):
        shutil.copy(cache, root / ".ok" / "cache" / cache.name)
    env = {"OK_GRAPH_MIN_FREE_MB": "1", "OK_GRAPH_COMMIT_CHUNKS": "25"}
    _fill(small_fs, 27 << 20)
    r = run_cli("--root", str(root), "store", "ingest", str(src), env=env)
    assert r.code == 2, r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith("Error: the disk is nearly full: the graph needs about"), r.err
    assert "`ok sync`" in lines[0] and str(small_fs) in lines[0], r.err
    assert os.statvfs(small_fs).f_bavail > 0  # it stopped before the disk was full
    loaded = run_ok("--root", str(root), "status", "--json").json()
    assert 0 < loaded["counts"]["Doc"] < 60, loaded["counts"]  # some batches committed
    (small_fs / "filler").unlink()
    r = run_ok("--root", str(root), "sync")
    assert r.code == 0, r.err
    st = run_ok("--root", str(root), "status", "--json").json()
    assert st["in_sync"] and st["counts"]["Doc"] == 60, st
