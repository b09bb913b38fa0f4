"""The shell side of `ok`: --version, colour, completion, paging."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli, run_ok


def test_version_flag_alone_prints_version() -> None:
    from importlib.metadata import version

    r = run_ok("--version")
    assert r.code == 0, r.err
    assert r.out == f"ok {version('openkl')}\n"
    assert run_cli("--version").out == r.out


def _on_tty(*args: str, env: dict[str, str]) -> bytes:
    """Run the installed `ok` with stdout on a real pseudo-terminal; return what it wrote."""
    import os
    import pty
    import subprocess

    from conftest import OK_BIN

    master, slave = pty.openpty()
    full = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    proc = subprocess.Popen(
        [OK_BIN, *args],
        stdout=slave,
        stderr=subprocess.PIPE,
        env={**full, "TERM": "xterm-256color", "COLUMNS": "200", "PAGER": "cat", **env},
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not b:
            break
        chunks.append(b)
    os.close(master)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks)


def test_bold_on_a_terminal_and_none_with_no_color(kf: Path) -> None:
    env = {"OK_ROOT": str(kf), "OK_SEARCH_K": "5"}
    styled = _on_tty("config", "list", "--changed", env=env)
    assert b"search.k" in styled and b"\x1b[1m" in styled
    for plain in (
        _on_tty("config", "list", "--changed", env={**env, "NO_COLOR": "1"}),
        _on_tty("--color", "never", "config", "list", "--changed", env=env),
    ):
        assert b"search.k" in plain and b"\x1b[" not in plain


def test_color_always_styles_a_pipe_and_bad_values_are_usage_errors(
    kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OK_SEARCH_K", "5")
    monkeypatch.setenv("NO_COLOR", "1")
    r = run_ok("--color", "always", "config", "list", "--changed")
    assert r.code == 0, r.err
    assert "\x1b[1m" in r.out and "search.k" in r.out
    r = run_ok("config", "list", "--changed")
    assert "\x1b[" not in r.out and "search.k\t5\tenv OK_SEARCH_K" in r.out
    r = run_ok("--color", "sometimes", "config", "list")
    assert r.code == 2 and "auto, always, never" in r.err
