"""A fresh clone holds the files but no graph (it is not in git): the first command that
reads the graph builds it, under the writer lock, as `ok sync` would."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from helpers.run import OK_BIN, run_ok


def _fresh_clone(example_kf: Path, to: Path) -> Path:
    """The folder as `git clone` gives it: what .gitignore leaves out is not there."""
    shutil.copytree(example_kf, to, symlinks=True)
    for derived in (".ok/kuzu", ".ok/cache", ".ok/ops.log", ".ok/lock", "memories/topics"):
        p = to / derived
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    return to


def test_first_search_of_a_fresh_clone_builds_the_index(example_kf: Path, tmp_path: Path) -> None:
    clone = _fresh_clone(example_kf, tmp_path / "clone")
    r = run_ok("--root", str(clone), "search", "who wrote the first computer program", "--json")
    assert r.code == 0, r.err
    assert "ada-lovelace" in r.json()[0]["path"]
    assert "building the index" in r.err and "ok sync" in r.err
    assert (clone / ".ok" / "kuzu").is_dir()
    st = run_ok("--root", str(clone), "status", "--json").json()
    assert st["in_sync"], st
    # once built, nothing more is said
    r = run_ok("--root", str(clone), "search", "gene editing", "--json")
    assert r.code == 0 and "building" not in r.err


def test_other_reads_build_it_too(example_kf: Path, tmp_path: Path) -> None:
    clone = _fresh_clone(example_kf, tmp_path / "clone")
    r = run_ok("--root", str(clone), "graph", "cypher", "MATCH (d:Doc) RETURN count(*) AS n")
    assert r.code == 0, r.err
    assert "5" in r.out


def test_two_first_searches_at_once_both_answer(example_kf: Path, tmp_path: Path) -> None:
    clone = _fresh_clone(example_kf, tmp_path / "clone")
    env_args = ["--root", str(clone), "search", "write-ahead logging", "--json"]
    # a writer lock that others give up on after a second: the one that waits for the
    # first build waits for the build, however long it takes on a busy machine
    env = {**os.environ, "OK_LOCK_TIMEOUT": "1"}
    procs = [
        subprocess.Popen(
            [OK_BIN, *env_args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()
        assert b"write-ahead" in out
    said = [err.decode().count("building the index of") for _, err in outs]
    assert sorted(said) == [0, 1], said  # one built it, the other waited and used it


def test_the_git_guide_and_the_hint_agree() -> None:
    guide = (Path(__file__).resolve().parent.parent / "docs" / "git.md").read_text()
    assert "builds the graph on first use" in guide
