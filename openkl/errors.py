"""Typed errors. Each kind says once how every adapter reports it: the CLI prints one line,
``Error: … (hint: …)``, and exits with its `exit_code`; the HTTP API answers its
`http_status` with `{"error": …, "hint": …}`; an MCP tool fails with the same line."""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path

# Exit codes, as rg's and grep's (docs/commands.md has the table): a script tells a query
# that found nothing from one that failed
NOTHING_FOUND = 1  # a query found nothing, or a check said no
ERROR = 2  # usage errors and failures: nothing (or not all) was done
PARTIAL = 3  # the work was done, but part of it failed


class OkError(Exception):
    """An expected failure with a message for the user and, where possible, a fix."""

    exit_code = ERROR
    http_status = 400  # what the HTTP API answers with

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"


class UsageError(OkError):
    """The command line itself is wrong (exit 2, as every error)."""

    exit_code = ERROR


class CheckFailed(OkError):
    """A check that ran to its end and says no (`ok status` with files it cannot index):
    exit 1, as a search that finds nothing."""

    exit_code = NOTHING_FOUND


class PartlyDone(OkError):
    """The work was done, but part of it failed (exit 3): what failed is said first."""

    exit_code = PARTIAL


class NotAFolder(OkError):
    """No knowledge folder could be found."""


class NotFound(OkError):
    """An id or path names nothing."""

    http_status = 404


class BadInput(OkError):
    """A file or value that cannot be used as given."""


class Duplicate(BadInput):
    """A new note repeats an existing one (`duplicate_of` is its id): nothing is written."""

    http_status = 409

    def __init__(self, message: str, hint: str | None, duplicate_of: str) -> None:
        super().__init__(message, hint)
        self.duplicate_of = duplicate_of


class EmptyDraft(BadInput):
    """A note written in the editor came back empty: nothing is saved."""


class LockBusy(OkError):
    """Another process holds the writer lock (or the graph) longer than we may wait."""

    http_status = 503


class Served(LockBusy):
    """An `ok serve` process owns the folder: it alone opens the graph and writes."""


class StackTaken(OkError):
    """A PostgreSQL stack holds another folder's rows; syncing this folder would replace
    them (`--take-over` does so on purpose)."""

    http_status = 409


class GraphUnrecoverable(OkError):
    """The derived graph cannot be opened (its engine crashes replaying a killed writer's
    log); the files are intact and a rebuild recreates it."""


class IndexMismatch(OkError):
    """The derived graph was built with another schema or embedder."""

    http_status = 503


class ReadOnlyViolation(OkError):
    """A write was attempted through a read-only surface."""

    http_status = 403


class QueryRefused(OkError):
    """A query that no flag allows: it reaches files or extensions, or is several statements."""

    http_status = 403


class QueryTimedOut(OkError):
    """A caller's query ran past its time limit and was stopped."""

    http_status = 504


class QueryTooLarge(OkError):
    """A caller's query needed more memory, or gave more output, than it may."""

    http_status = 422


class DiskFull(OkError):
    """A write failed (or would) because the disk (or the user's quota) is full."""

    def __init__(
        self, message: str, hint: str | None = None, path: str | os.PathLike[str] | None = None
    ) -> None:
        super().__init__(message, hint)
        self.path = path


# how the OS, Kùzu and SQLite put it
_FULL_WORDS = ("no space left on device", "disk quota exceeded", "database or disk is full")


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out and len(out) < 10:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _text(exc: BaseException) -> str:
    return exc.message if isinstance(exc, OkError) else str(exc)


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"  # pragma: no cover


def disk_full(exc: BaseException, root: str | os.PathLike[str] | None = None) -> DiskFull | None:
    """`exc` (or what caused it) as a DiskFull error saying where and how to fix it, when
    it is ENOSPC/EDQUOT or the graph engine's or SQLite's words for that; else None."""
    chain = _chain(exc)
    hit: BaseException | None = next((x for x in reversed(chain) if isinstance(x, DiskFull)), None)
    if hit is None:
        hit = next(
            (
                x
                for x in chain
                if isinstance(x, OSError) and x.errno in (errno.ENOSPC, errno.EDQUOT)
            ),
            None,
        )
    if hit is None:  # the innermost: outer errors often repeat its words in their own
        hit = next(
            (x for x in reversed(chain) if any(w in _text(x).lower() for w in _FULL_WORDS)), None
        )
    if hit is None:
        # SQLite reports a write that ran out of room mid-page as a bare I/O error
        io = next(
            (
                x
                for x in chain
                if type(x).__name__ == "OperationalError" and "disk i/o error" in str(x).lower()
            ),
            None,
        )
        if io is None or root is None or _free(Path(root)) > 1 << 20:
            return None
        hit = io
    where: str | None = None
    if isinstance(hit, DiskFull):
        where = str(hit.path) if hit.path else None
    elif isinstance(hit, OSError) and hit.filename:
        where = str(hit.filename)
    else:
        m = re.search(r"path: (\S+)", _text(hit))
        where = m.group(1) if m else None
    base = Path(where) if where else Path(root) if root else None
    quota = isinstance(hit, OSError) and hit.errno == errno.EDQUOT or "quota" in _text(hit).lower()
    what = "the disk quota is used up" if quota else "the disk is full"
    if isinstance(hit, DiskFull):
        msg = hit.message
    else:
        msg = what + (
            f": cannot write {_shown(where, root)}"
            if where
            else f" (writing in {root})"
            if root
            else ""
        )
    # what an outer error said about the situation, without the inner error's text
    context = _text(exc) if exc is not hit else ""
    for inner in chain[1:]:
        i = context.find(_text(inner))
        if i > 0:
            context = context[:i].rstrip(": ")
            break
    if context and not any(w in context.lower() for w in _FULL_WORDS):
        msg += f"; {context}"
    free = f" on {_mount(base)} ({_size(_free(base))} left)" if base else ""
    # files are written before the graph: `ok sync` indexes whatever was saved, and running
    # the command again after a save would add a second copy
    then = "run `ok sync`" if "saved" in context else "run `ok sync` and the command again"
    hint = f"free some space{free}, then {then}"
    return DiskFull(msg, hint)


def _free(path: Path) -> int:
    for p in (path, *path.parents):
        try:
            return shutil.disk_usage(p).free
        except OSError:
            continue
    return 0


def _mount(path: Path) -> str:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return str(p)


def _shown(where: str, root: str | os.PathLike[str] | None) -> str:
    if root is not None:
        # not resolved: a file that is a symlink is named as the folder knows it
        for base in (Path(os.path.abspath(root)), Path(root).resolve()):
            try:
                return Path(os.path.abspath(where)).relative_to(base).as_posix()
            except ValueError:
                continue
    return where
