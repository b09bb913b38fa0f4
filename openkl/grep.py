"""`ok grep`: ripgrep over memories and normalized docs, with a pure-Python fallback.

Matches come back as {path, line, column, text, match}; the same shape either way.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .errors import BadInput, UsageError
from .folder import Folder, shown
from .records import GrepMatch


def rg_binary() -> str | None:
    """The `rg` next to our interpreter (the ripgrep wheel), else on PATH."""
    local = Path(sys.executable).parent / "rg"
    if local.exists():
        return str(local)
    return shutil.which("rg")


def targets(folder: Folder, scope: str) -> list[Path]:
    out = []
    if scope in ("all", "mem"):
        out.append(folder.by_date_dir)
    if scope in ("all", "store"):
        out.append(folder.normalized_dir)
    return [p for p in out if p.exists()]


def grep(
    folder: Folder,
    pattern: str,
    *,
    scope: str = "all",
    ignore_case: bool = False,
    fixed: bool = False,
    max_count: int = 1000,
    use_rg: bool = True,
) -> list[GrepMatch]:
    if not pattern:
        raise UsageError("the pattern is empty", "pass a regular expression or use -F for text")
    if "\x00" in pattern:
        raise BadInput(
            "the pattern contains a NUL byte",
            "notes and documents are text; search for something else",
        )
    paths = targets(folder, scope)
    if not paths:
        return []
    rg = rg_binary() if use_rg else None
    if rg:
        return _rg(folder, rg, pattern, paths, ignore_case, fixed, max_count)
    return _py(folder, pattern, paths, ignore_case, fixed, max_count)


def _rg(
    folder: Folder,
    rg: str,
    pattern: str,
    paths: list[Path],
    ignore_case: bool,
    fixed: bool,
    max_count: int,
) -> list[GrepMatch]:
    cmd = [rg, "--json", "--no-config", "--sort", "path", "-g", "*.md"]
    if ignore_case:
        cmd.append("-i")
    if fixed:
        cmd.append("-F")
    cmd += ["-e", pattern, "--", *map(str, paths)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode == 2 and not proc.stdout:
        msg = (proc.stderr.strip().splitlines() or ["rg failed"])[-1]
        raise BadInput(f"invalid pattern: {msg}", "check the regex, or use -F for plain text")
    out: list[GrepMatch] = []
    for line in proc.stdout.splitlines():
        ev = json.loads(line)
        if ev.get("type") != "match":
            continue
        d = ev["data"]
        text = d["lines"].get("text", "")
        for sub in d.get("submatches", [])[:1]:
            # rg gives a name that is not UTF-8 as base64 bytes (`ok sync` reports the file)
            name = d["path"].get("text") or os.fsdecode(base64.b64decode(d["path"]["bytes"]))
            out.append(
                {
                    "path": shown(folder.rel(Path(name)), 4096),
                    "line": d["line_number"],
                    "column": _col(text, sub["start"]) + 1,
                    "text": text.rstrip("\n"),
                    "match": sub["match"].get("text", ""),
                }
            )
        if len(out) >= max_count:
            break
    return out


def _col(line: str, byte_off: int) -> int:
    return len(line.encode("utf-8")[:byte_off].decode("utf-8", errors="ignore"))


def _py(
    folder: Folder, pattern: str, paths: list[Path], ignore_case: bool, fixed: bool, max_count: int
) -> list[GrepMatch]:
    try:
        rx = re.compile(re.escape(pattern) if fixed else pattern, re.I if ignore_case else 0)
    except re.error as e:
        raise BadInput(f"invalid pattern: {e}", "check the regex, or use -F for plain text") from e
    out: list[GrepMatch] = []
    files = sorted(f for p in paths for f in p.rglob("*.md") if f.is_file())
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            m = rx.search(line)
            if m:
                out.append(
                    {
                        "path": shown(folder.rel(f), 4096),
                        "line": n,
                        "column": m.start() + 1,
                        "text": line,
                        "match": m.group(0),
                    }
                )
                if len(out) >= max_count:
                    return out
    return out
