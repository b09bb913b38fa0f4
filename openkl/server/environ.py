"""The server's environment, kept out of reach of the commands it runs.

A trigger's command is given a scrubbed environment of its own (`openkl.knowledge.triggers.exec_env`),
but Linux shows any process of the same user (or root) the environment a process started
with: `/proc/<pid>/environ` reads the block of memory the kernel filled at `exec`, whatever
the process did to its variables since. So at start `ok serve` blanks the values in that
block, after pointing its own variables at copies: the process and what it starts see the
same environment as before, and `/proc/<pid>/environ` shows only the names.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

# /proc/<pid>/stat fields 50 and 51 (Linux 3.5 and later): where the block starts and ends
_ENV_START, _ENV_END = 50, 51


def _block() -> tuple[int, int] | None:
    """The address and length of this process's initial environment block."""
    try:
        stat = Path("/proc/self/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces
        start, end = int(fields[_ENV_START - 3]), int(fields[_ENV_END - 3])
    except (OSError, ValueError, IndexError):
        return None
    return (start, end - start) if start and end > start else None


def hide() -> int:
    """Blank the values of the initial environment as /proc shows it (this process keeps
    them); how many were blanked. Nothing happens where there is no /proc (not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    where = _block()
    if where is None:
        return 0
    start, size = where
    raw = ctypes.string_at(start, size)
    if raw != Path("/proc/self/environ").read_bytes():
        return 0  # not the block the kernel shows: leave it alone
    # first point every variable at a copy (setenv), so that nothing reads the block any more
    for name, value in list(os.environb.items()):
        os.environb[name] = value
    blanked = 0
    offset = 0
    for entry in raw.split(b"\0"):
        eq = entry.find(b"=")
        if eq > 0 and len(entry) > eq + 1:
            ctypes.memset(start + offset + eq + 1, 0, len(entry) - eq - 1)
            blanked += 1
        offset += len(entry) + 1
    return blanked
