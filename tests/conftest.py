"""Shared fixtures: every test gets its own knowledge folder and a clean environment.

The real engine, embedding model and parsers are used. The example folder is built once
per session and copied for each test that needs it, so the suite stays fast.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# no `ok` process a test starts leaves a resident process behind (tests/test_daemon.py
# starts them where it means to)
os.environ["OK_NO_DAEMON"] = "1"

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "docs"
OK_BIN = str(Path(sys.executable).parent / "ok")


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def until(check: Callable[[], Any], seconds: float = 90, every: float = 0.3) -> Any:
    """What `check` returns once it is true, polled every `every` seconds (a server's
    watcher or a waiting query works in the background); fails after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"not seen within {seconds:g} s")


def run_ok(*args: str, input: str | bytes | None = None, cwd: Path | None = None) -> Result:
    """Run `ok` in this process (fast: the model stays loaded). Returns code, stdout, stderr."""
    from openkl.cli.app import run

    raw_in = input.encode() if isinstance(input, str) else (input or b"")
    out_b, err_b = io.BytesIO(), io.BytesIO()
    old = sys.stdin, sys.stdout, sys.stderr
    old_cwd = os.getcwd()
    wrappers = (
        io.TextIOWrapper(io.BytesIO(raw_in), encoding="utf-8"),
        io.TextIOWrapper(out_b, encoding="utf-8", write_through=True),
        io.TextIOWrapper(err_b, encoding="utf-8", write_through=True),
    )
    sys.stdin, sys.stdout, sys.stderr = wrappers
    try:
        if cwd:
            os.chdir(cwd)
        code = run(list(args))
    except SystemExit as e:  # pragma: no cover - commands should return, not exit
        code = int(e.code or 0)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdin, sys.stdout, sys.stderr = old
        os.chdir(old_cwd)
        for w in wrappers:
            w.detach()
    return Result(code, out_b.getvalue().decode(), err_b.getvalue().decode())


def run_cli(
    *args: str,
    input: str | bytes | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> Result:
    """Run the installed `ok` executable in a subprocess."""
    proc = subprocess.run(
        [OK_BIN, *args],
        input=input.encode() if isinstance(input, str) else input,
        capture_output=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def pytest_configure(config: pytest.Config) -> None:
    # a shell starts a background job (`.ci/run &`, nohup) with SIGINT ignored, and every
    # process a test starts inherits that: the tests that press Ctrl-C need it heard
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for k in list(os.environ):
        if k.startswith("OK_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("OK_NO_PROGRESS", "1")
    monkeypatch.setenv("OK_NO_DAEMON", "1")
    monkeypatch.setenv("OK_LOCK_TIMEOUT", "5")
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def kf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty knowledge folder; OK_ROOT points at it."""
    root = tmp_path / "kf"
    r = run_ok("init", str(root))
    assert r.code == 0, r.err
    monkeypatch.setenv("OK_ROOT", str(root))
    return root


@pytest.fixture(scope="session")
def _example_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template") / "kf"
    assert run_ok("init", str(root)).code == 0
    r = run_ok("--root", str(root), "store", "ingest", str(EXAMPLES))
    assert r.code == 0, r.err
    r = run_ok(
        "--root",
        str(root),
        "mem",
        "add",
        "Kùzu keeps one writer at a time, so the MCP server opens the graph per call.",
        "--tags",
        "kuzu,concurrency",
        "--topics",
        "design",
    )
    assert r.code == 0, r.err
    return root


@pytest.fixture
def example_kf(_example_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of a folder holding the example documents and one note; OK_ROOT points at it."""
    root = tmp_path / "example"
    shutil.copytree(_example_template, root, symlinks=True)
    monkeypatch.setenv("OK_ROOT", str(root))
    return root


@pytest.fixture
def ok():
    return run_ok
