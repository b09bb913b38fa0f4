"""Running `ok` in a test: in this process (`run_ok`) or as the installed executable
(`run_cli`), and waiting for something that happens in the background (`until`)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
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
    from openkl.cli.root import run

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
