"""A knowledge folder kept in git by a team: two real clones write, pull and merge."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers.run import run_ok


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "pull.rebase=false", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture
def team(example_kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two clones of one folder, shared through a bare repository."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Team")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "team@example.org")
    monkeypatch.delenv("OK_ROOT")
    git(example_kf, "init", "-q")
    git(example_kf, "add", "-A")
    git(example_kf, "commit", "-qm", "the folder")
    git(tmp_path, "clone", "-q", "--bare", str(example_kf), "shared.git")
    a, b = tmp_path / "a", tmp_path / "b"
    for clone in (a, b):
        git(tmp_path, "clone", "-q", "shared.git", clone.name)
    return a, b


def test_init_writes_gitattributes(kf: Path) -> None:
    attrs = (kf / ".gitattributes").read_text()
    assert "events/*.jsonl merge=union" in attrs
    assert ".ok/mapping.jsonl merge=union" in attrs
    # a second init keeps what is there and adds nothing twice
    (kf / ".gitattributes").write_text("*.pdf binary\n" + attrs)
    assert run_ok("init", str(kf)).code == 0
    again = (kf / ".gitattributes").read_text()
    assert again.startswith("*.pdf binary\n") and again.count("merge=union") == 2


def test_two_clones_append_events_and_merge(
    team: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = team
    monkeypatch.setenv("OK_NOW", "2026-05-10T12:00:00Z")
    for clone, text in ((a, "Alice found the index lags."), (b, "Bob pinned the model.")):
        assert run_ok("--root", str(clone), "sync").code == 0
        r = run_ok("--root", str(clone), "mem", "add", text, "--topics", clone.name)
        assert r.code == 0, r.err
        git(clone, "add", "-A")
        git(clone, "commit", "-qm", f"a note from {clone.name}")
    git(a, "push", "-q", "origin", "HEAD")
    # both appended to events/2026-05.jsonl: without merge=union this pull conflicts
    git(b, "pull", "-q", "--no-edit", "origin", "main")
    assert not git(b, "diff", "--name-only", "--diff-filter=U")
    lines = (b / "events/2026-05.jsonl").read_text().splitlines()
    assert sum('"mem_added"' in line for line in lines) == 2
    assert all(json.loads(line) for line in lines)
    assert run_ok("--root", str(b), "sync").code == 0
    r = run_ok("--root", str(b), "events", "--type", "mem_added", "--json")
    assert r.code == 0, r.err
    notes = {e["note"] for e in r.json() if e["ts"].startswith("2026-05")}
    assert len(notes) == 2
    git(b, "push", "-q", "origin", "HEAD")
    git(a, "pull", "-q", "--no-edit", "origin", "main")
    assert (a / "events/2026-05.jsonl").read_text() == (b / "events/2026-05.jsonl").read_text()


def test_fresh_clone_syncs_and_searches(team: tuple[Path, Path]) -> None:
    a, _ = team
    # the graph is derived and not committed; the mapping is, so provenance survives
    assert not (a / ".ok/kuzu").exists()
    mapping = (a / ".ok/mapping.jsonl").read_text()
    assert "store/sources/docs/crispr-gene-editing.txt" in mapping
    r = run_ok("--root", str(a), "sync")
    assert r.code == 0, r.err
    r = run_ok("--root", str(a), "search", "CRISPR gene editing", "--json")
    assert r.code == 0, r.err
    assert any("crispr" in json.dumps(h).lower() for h in r.json())
    # syncing a fresh clone leaves the committed files as they were
    assert not git(a, "status", "--porcelain", "--untracked-files=no")


def test_two_clones_ingest_and_merge_the_mapping(team: tuple[Path, Path]) -> None:
    a, b = team
    for clone, text in (
        (a, "Alice writes about tidal power."),
        (b, "Bob writes about wind farms."),
    ):
        doc = clone.parent / f"{clone.name}-note.txt"
        doc.write_text(text + "\n")
        assert run_ok("--root", str(clone), "sync").code == 0
        r = run_ok("--root", str(clone), "store", "ingest", str(doc))
        assert r.code == 0, r.err
        git(clone, "add", "-A")
        git(clone, "commit", "-qm", f"a document from {clone.name}")
    git(a, "push", "-q", "origin", "HEAD")
    git(b, "pull", "-q", "--no-edit", "origin", "main")
    assert not git(b, "diff", "--name-only", "--diff-filter=U")
    r = run_ok("--root", str(b), "sync")
    assert r.code == 0, r.err
    r = run_ok("--root", str(b), "store", "list", "--json")
    assert r.code == 0, r.err
    listed = json.dumps(r.json())
    assert "a-note" in listed and "b-note" in listed
