"""The shell side of `ok`: --version, colour, completion, paging."""

from __future__ import annotations

from conftest import run_cli, run_ok


def test_version_flag_alone_prints_version() -> None:
    from importlib.metadata import version

    r = run_ok("--version")
    assert r.code == 0, r.err
    assert r.out == f"ok {version('openkl')}\n"
    assert run_cli("--version").out == r.out
