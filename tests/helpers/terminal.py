"""`ok` run on a real pseudo-terminal, and the bash completion asked as bash asks."""

from __future__ import annotations

import os
import pty
import select
import shlex
import subprocess
import time
from pathlib import Path

from helpers.run import OK_BIN


def on_tty(*args: str, env: dict[str, str]) -> bytes:
    """Run the installed `ok` with stdout on a real pseudo-terminal; return what it wrote."""
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
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks)


def bash_complete(script: Path, words: list[str], root: Path) -> list[str]:
    """What the generated bash completion offers for `words` (the last one being typed),
    asked the way bash asks on TAB: COMP_WORDS/COMP_CWORD and the script's function."""
    line = " ".join(shlex.quote(w) for w in words)
    prog = (
        f"source {shlex.quote(str(script))}\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}\n"
        '_ok_completion ok; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "OK_ROOT": str(root)}
    env["PATH"] = str(Path(OK_BIN).parent) + os.pathsep + env["PATH"]
    r = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return [x for x in r.stdout.splitlines() if x]


def at_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `ok` with a terminal as its stdin, stdout and stderr; all it wrote."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [OK_BIN, *args], stdin=follower, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the other end closed: the process is gone
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    code = proc.wait(timeout=60)
    os.close(leader)
    return code, seen.decode(errors="replace")
