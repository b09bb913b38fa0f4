"""The knowledge folder: layout, root discovery, config, errors outside a folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.run import run_ok

from openkl.files.folder import Folder, find_root


def test_init_creates_layout_and_gitignore(tmp_path: Path) -> None:
    r = run_ok("init", str(tmp_path / "k"), "--json")
    assert r.code == 0, r.err
    assert r.json() == {"root": str((tmp_path / "k").resolve()), "created": True}
    root = tmp_path / "k"
    for d in (
        "store/sources",
        "store/normalized",
        "memories/by_date",
        "memories/topics",
        "citations",
        "graph",
        ".ok/kuzu",
        ".ok/cache",
    ):
        assert (root / d).is_dir(), d
    gi = (root / ".gitignore").read_text()
    assert ".ok/kuzu/" in gi and ".ok/cache/" in gi and "memories/topics/" in gi
    assert "domain: k" in (root / ".ok/config.yml").read_text()
    # a second init keeps everything and says so
    r = run_ok("init", str(root), "--json")
    assert r.json()["created"] is False


def test_root_discovery_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    Folder.init(a)
    Folder.init(b)
    (a / "sub" / "deeper").mkdir(parents=True)
    assert find_root(start=a / "sub" / "deeper") == a.resolve()
    monkeypatch.setenv("OK_ROOT", str(b))
    assert find_root(start=a / "sub") == b.resolve()
    assert find_root(start=a, explicit=str(a)) == a.resolve()


def test_outside_a_folder_is_one_clear_line(tmp_path: Path) -> None:
    r = run_ok("status", cwd=tmp_path)
    assert r.code == 2
    assert r.err.count("\n") == 1
    assert "not inside a knowledge folder" in r.err and "ok init" in r.err
    r = run_ok("--root", str(tmp_path / "nope"), "search", "x")
    assert r.code == 2 and "is not a knowledge folder" in r.err


def test_env_overrides_config(kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = Folder(kf)
    assert f.setting("search.k") == 10
    monkeypatch.setenv("OK_SEARCH_K", "3")
    assert f.setting("search.k") == 3


def test_broken_config_is_reported(kf: Path) -> None:
    (kf / ".ok/config.yml").write_text("search: [unclosed\n")
    r = run_ok("search", "anything")
    assert r.code == 2
    assert "config.yml is not valid YAML" in r.err


def test_write_commands_append_to_ops_log_and_tee(kf: Path, tmp_path: Path) -> None:
    tee = tmp_path / "tee.log"
    r = run_ok("--tee", str(tee), "mem", "add", "a note for the log", "--json")
    assert r.code == 0, r.err
    nid = r.json()["id"]
    lines = [json.loads(x) for x in (kf / ".ok/ops.log").read_text().splitlines()]
    assert lines[-1]["op"] == "mem.add" and lines[-1]["ids"] == [nid] and lines[-1]["ts"]
    assert json.loads(tee.read_text().splitlines()[-1]) == lines[-1]


@pytest.mark.parametrize(
    "where, reason",
    [
        ("/proc/nope", "cannot create a knowledge folder at /proc/nope: No such file or directory"),
        ("/sys/nope", "cannot create a knowledge folder at /sys/nope: Operation not permitted"),
    ],
)
def test_init_where_nothing_can_be_created(where: str, reason: str) -> None:
    if not Path(where).parent.is_dir():
        pytest.skip(f"no {Path(where).parent} here")
    r = run_ok("init", where)
    assert r.code == 2 and r.out == ""
    assert r.err.startswith(f"Error: {reason} (hint: ") and "ok init ~/kb" in r.err, r.err
    assert r.err.count("\n") == 1 and "unexpected" not in r.err


def test_init_on_a_file_or_below_one(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("keep me\n")
    for target in (f, f / "kb", f / "a" / "b"):
        r = run_ok("init", str(target))
        assert (
            r.code == 2
            and r.err == f"Error: {f} exists and is not a directory (hint: choose another path)\n"
        ), r.err
    assert f.read_text() == "keep me\n"


def test_init_in_a_read_only_directory(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: permissions do not stop us")
        r = run_ok("init", str(ro / "kb"))
        assert r.code == 2 and "Permission denied" in r.err and "unexpected" not in r.err, r.err
        assert r.err.startswith(f"Error: cannot create a knowledge folder at {ro / 'kb'}")
    finally:
        ro.chmod(0o755)


def test_root_option_after_the_subcommand(
    example_kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OK_ROOT")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = str(example_kf)
    r = run_ok("search", "CRISPR gene editing", "-C", root, "--json", cwd=elsewhere)
    assert r.code == 0, r.err
    assert "crispr" in r.out.lower()
    r = run_ok("status", "--root", root, "--json", cwd=elsewhere)
    assert r.code == 0, r.err
    assert r.json()["root"] == str(example_kf.resolve())
    r = run_ok("mem", "add", "said after the command", f"--root={root}", cwd=elsewhere)
    assert r.code == 0, r.err
    r = run_ok("mem", "list", "--json", "-C", root, cwd=elsewhere)
    assert "said after the command" in r.out
    # before the subcommand, as always; and a note whose text is `-C` after `--` stays text
    r = run_ok("-C", root, "mem", "add", "--", "-C", cwd=elsewhere)
    assert r.code == 0, r.err


def test_ok_mcp_keeps_its_own_roots() -> None:
    """`ok mcp --root A --root B` serves two folders: its --root is not the global one."""
    from openkl.cli.root import hoist_root

    argv = ["mcp", "--root", "a", "--root", "b", "--read-only"]
    assert hoist_root(argv) == argv
    assert hoist_root(["--color", "never", "mcp", "--root", "a"]) == [
        "--color",
        "never",
        "mcp",
        "--root",
        "a",
    ]
    assert hoist_root(["search", "x", "-C", "d"]) == ["-C", "d", "search", "x"]
