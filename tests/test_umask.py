"""Files the folder writes follow the umask, as `cp` or an editor's would: a folder shared
with a group, a web server or a container user stays readable (and, under umask 002,
writable) by them. Secrets alone are private: the API keys and the trigger approvals."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.run import EXAMPLES, run_ok


@pytest.fixture
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def _written(root: Path) -> list[Path]:
    """The files a first session writes that anyone sharing the folder reads."""
    out = [
        root / ".gitignore",
        root / ".gitattributes",
        root / ".ok" / "config.yml",
        root / ".ok" / "mapping.jsonl",
        root / ".ok" / "ops.log",
    ]
    out += sorted((root / "memories" / "by_date").rglob("*.md"))
    out += sorted((root / "store" / "normalized").rglob("*.ok.md"))
    out += sorted((root / "store" / "sources").rglob("*.md"))
    out += sorted((root / "citations").glob("*.json"))
    out += sorted((root / "events").glob("*.jsonl"))
    out += sorted((root / "graph").glob("*.json"))
    out += sorted((root / "triggers").glob("*.yml"))
    return out


@pytest.mark.parametrize("umask", [0o022, 0o002], indirect=True)
def test_files_follow_the_umask_and_secrets_stay_private(
    umask: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "kf"
    assert run_ok("init", str(root)).code == 0
    monkeypatch.setenv("OK_ROOT", str(root))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "wal.md").write_text((EXAMPLES / "write-ahead-logging.md").read_text())
    os.chmod(docs / "wal.md", 0o644)
    assert run_ok("store", "ingest", str(docs)).code == 0
    r = run_ok("mem", "add", "Group-readable notes", "--tags", "share")
    assert r.code == 0, r.err
    r = run_ok("search", "write-ahead log", "--json", "-k", "1")
    hit = r.json()[0]["id"]
    assert run_ok("cite", "make", hit, "--persist").code == 0
    assert run_ok("config", "set", "search.k", "5").code == 0
    assert run_ok("graph", "export").code == 0
    assert run_ok("serve", "keys", "add", "laptop").code == 0
    r = run_ok("trigger", "add", "wal", "-e", "logging", "--exec", "cat >/dev/null")
    assert r.code == 0, r.err

    want = 0o666 & ~umask
    files = _written(root)
    assert len(files) >= 12, files
    wrong = {str(p.relative_to(root)): oct(_mode(p)) for p in files if _mode(p) != want}
    assert not wrong, f"not {oct(want)}: {wrong}"
    assert _mode(root / ".ok" / "keys.json") == 0o600
    assert _mode(root / ".ok" / "approved-triggers.json") == 0o600
    # a file written again (atomically, through a temporary file) keeps the umask's mode
    assert run_ok("config", "set", "search.k", "6").code == 0
    assert _mode(root / ".ok" / "config.yml") == want
