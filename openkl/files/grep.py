"""`ok grep`: ripgrep over memories and normalized docs, with a pure-Python fallback.

Matches come back as {path, line, column, text, match} (and `before`/`after` with context);
the same shape either way.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import BadInput, UsageError
from ..records import GrepLine, GrepMatch
from .folder import Folder, shown


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


@dataclass(frozen=True)
class Found:
    """A matched line: its record, and where every match on it sits (character offsets,
    for highlighting; the record names the first)."""

    record: GrepMatch
    spans: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Options:
    """How to match, as ripgrep's flags: -i, -F, -w, -v, -B, -A, and -m (per file)."""

    ignore_case: bool = False
    fixed: bool = False
    word: bool = False
    before: int = 0
    after: int = 0
    per_file: int | None = None
    invert: bool = False


def glob_filter(globs: list[str] | None) -> Callable[[str], bool]:
    """Whether a folder-relative path passes rg's `-g` globs (gitignore syntax: a glob
    without a slash matches the name at any depth; `!GLOB` leaves files out): with any
    plain glob given, a file must match one of them."""
    if not globs:
        return lambda rel: True
    import pathspec

    keep = [g for g in globs if not g.startswith("!")]
    drop = [g[1:] for g in globs if g.startswith("!")]
    wanted = pathspec.GitIgnoreSpec.from_lines(keep) if keep else None
    unwanted = pathspec.GitIgnoreSpec.from_lines(drop) if drop else None
    return lambda rel: (
        (wanted is None or wanted.match_file(rel))
        and not (unwanted is not None and unwanted.match_file(rel))
    )


def grep(
    folder: Folder,
    pattern: str,
    *,
    scope: str = "all",
    ignore_case: bool = False,
    fixed: bool = False,
    max_count: int | None = 1000,
    use_rg: bool = True,
    word: bool = False,
    before: int = 0,
    after: int = 0,
    per_file: int | None = None,
    invert: bool = False,
    globs: list[str] | None = None,
) -> list[Found]:
    """Matching lines in path order, at most `max_count` (None: all), at most `per_file` in
    each file; with `before`/`after`, each record carries its context lines. `invert`:
    the lines that do not match, as `rg -v`; `globs`: only the files they let through
    (`glob_filter`)."""
    if not pattern:
        raise UsageError("the pattern is empty", "pass a regular expression or use -F for text")
    if "\x00" in pattern:
        raise BadInput(
            "the pattern contains a NUL byte",
            "notes and documents are text; search for something else",
        )
    if before < 0 or after < 0:
        raise UsageError("context lines cannot be negative", "pass 0 or more, e.g. -C 2")
    paths = targets(folder, scope)
    if not paths or max_count == 0:
        return []
    opts = Options(ignore_case, fixed, word, before, after, per_file, invert)
    rg = rg_binary() if use_rg else None
    files = _rg(rg, pattern, paths, opts) if rg else _py(pattern, paths, opts)
    passes = glob_filter(globs)
    out: list[Found] = []
    for path, lines, matched in files:
        if not passes(folder.rel(path)):
            continue
        shown_path = shown(folder.rel(path), 4096)
        for n, text, spans in matched:
            first = spans[0] if spans else (0, 0)  # an inverted match has none
            rec: GrepMatch = {
                "path": shown_path,
                "line": n,
                "column": first[0] + 1,
                "text": text,
                "match": text[first[0] : first[1]],
            }
            if before or after:
                rec["before"] = _around(lines, range(n - before, n))
                rec["after"] = _around(lines, range(n + 1, n + after + 1))
            out.append(Found(rec, spans))
            if max_count is not None and len(out) >= max_count:
                return out
    return out


# per file: its path, the lines known (number -> text: matches and context), and the
# matched lines in order as (number, text, spans)
_File = tuple[Path, dict[int, str], list[tuple[int, str, tuple[tuple[int, int], ...]]]]


def _around(lines: dict[int, str], numbers: range) -> list[GrepLine]:
    return [{"line": n, "text": lines[n]} for n in numbers if n in lines]


def _rg(rg: str, pattern: str, paths: list[Path], opts: Options) -> list[_File]:
    cmd = [rg, "--json", "--no-config", "--sort", "path", "-g", "*.md"]
    if opts.ignore_case:
        cmd.append("-i")
    if opts.fixed:
        cmd.append("-F")
    if opts.word:
        cmd.append("-w")
    if opts.invert:
        cmd.append("-v")
    if opts.before:
        cmd += ["-B", str(opts.before)]
    if opts.after:
        cmd += ["-A", str(opts.after)]
    if opts.per_file is not None:
        cmd += ["-m", str(opts.per_file)]
    cmd += ["-e", pattern, "--", *map(str, paths)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode == 2 and not proc.stdout:
        msg = (proc.stderr.strip().splitlines() or ["rg failed"])[-1]
        raise BadInput(f"invalid pattern: {msg}", "check the regex, or use -F for plain text")
    files: list[_File] = []
    for raw in proc.stdout.splitlines():
        ev = json.loads(raw)
        kind = ev.get("type")
        if kind == "begin":
            d = ev["data"]
            # rg gives a name that is not UTF-8 as base64 bytes (`ok sync` reports the file)
            name = d["path"].get("text") or os.fsdecode(base64.b64decode(d["path"]["bytes"]))
            files.append((Path(name), {}, []))
        elif kind in ("match", "context") and files:
            d = ev["data"]
            raw_text = d["lines"].get("text", "")
            text = raw_text.rstrip("\n")
            n = d["line_number"]
            files[-1][1][n] = text
            subs = d.get("submatches", [])
            if kind == "match" and (subs or opts.invert):
                spans = tuple((_col(raw_text, s["start"]), _col(raw_text, s["end"])) for s in subs)
                files[-1][2].append((n, text, spans))
    return files


def _col(line: str, byte_off: int) -> int:
    return len(line.encode("utf-8")[:byte_off].decode("utf-8", errors="ignore"))


def _py(pattern: str, paths: list[Path], opts: Options) -> list[_File]:
    body = re.escape(pattern) if opts.fixed else pattern
    if opts.word:  # as rg -w: the match has no word character right before or after it
        body = rf"(?<!\w)(?:{body})(?!\w)"
    try:
        rx = re.compile(body, re.I if opts.ignore_case else 0)
    except re.error as e:
        raise BadInput(f"invalid pattern: {e}", "check the regex, or use -F for plain text") from e
    files: list[_File] = []
    # links are not followed, as rg does not follow them: one leading out is never read
    found = (f for p in paths for f in p.rglob("*.md") if f.is_file() and not f.is_symlink())
    for f in sorted(found):
        text = f.read_text(encoding="utf-8", errors="replace").splitlines()
        lines: dict[int, str] = {}
        matched: list[tuple[int, str, tuple[tuple[int, int], ...]]] = []
        for n, line in enumerate(text, 1):
            if opts.per_file is not None and len(matched) >= opts.per_file:
                break
            spans = tuple(m.span() for m in rx.finditer(line))
            if bool(spans) == opts.invert:
                continue
            matched.append((n, line, () if opts.invert else spans))
            for k in range(max(1, n - opts.before), min(len(text), n + opts.after) + 1):
                lines[k] = text[k - 1]
        if matched:
            files.append((f, lines, matched))
    return files
