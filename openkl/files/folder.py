"""The knowledge folder: layout, discovery, config, atomic writes, the ops log and the writer lock.

Everything canonical lives in plain files under the root; `.ok/` holds settings and derived
state. `Folder` is the one way in: commands get a folder from `open_folder()` and never
build paths by hand.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import fcntl
import json
import os
import re
import socket
import stat
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from .. import settings
from ..errors import BadInput, LockBusy, NotAFolder, OkError, Served, UsageError
from .routing import is_server, own_socket

CONFIG_VERSION = 1
LOCK_NOTICE_AFTER = 1.0  # seconds of waiting for the writer lock before saying so

# what `ok init` writes; every other setting has its default in openkl/settings.py
CONFIG_HEADER = """\
# Settings of this knowledge folder. `ok config list` shows every setting, its value and
# where it comes from; `ok config set KEY VALUE` changes one. Keys are nested by their
# dots: `search.k` is `k:` under `search:`. OK_* environment variables win over this file.
"""

GITIGNORE = """\
# Derived by `ok`; rebuilt from the files with `ok index`.
.ok/kuzu/
.ok/kuzu.rebuild/
.ok/kuzu.old/
.ok/keyword*
.ok/cache/
.ok/ops.log
.ok/lock
.ok/lock.info
.ok/drafts/
.ok/serve.json
.ok/keys.json
.ok/approved-triggers.json
memories/topics/
graph/
"""

# what `ok init` writes to .gitattributes: how git merges the files that two clones both add
# lines to. The event log is only ever appended to; the mapping is appended to and compacted
# by `ok sync`, and reads the last line of an id as its entry, so a line kept from both sides
# still loads (docs/git.md).
GITATTRIBUTES = """\
# Written by `ok init`: lines added on both sides of a merge are all kept (docs/git.md).
events/*.jsonl merge=union
.ok/mapping.jsonl merge=union
"""


def utcnow() -> dt.datetime:
    """The current time in UTC; `OK_NOW` (ISO 8601) pins it for reproducible runs and tests."""
    pinned = settings.env("OK_NOW")
    if pinned:
        return dt.datetime.fromisoformat(pinned.replace("Z", "+00:00")).astimezone(dt.UTC)
    return dt.datetime.now(dt.UTC)


def iso(ts: dt.datetime | None = None) -> str:
    return (ts or utcnow()).strftime("%Y-%m-%dT%H:%M:%SZ")


_SPAN = re.compile(r"^(\d+)\s*([smhdw])$")
_SPAN_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
TIME_FORMS = "use e.g. 2026-01-31, 2026-01-31T08:00:00Z, 90m, 12h, 7d or 2w"


def parse_span(value: str) -> dt.timedelta | None:
    """A span such as `30m`, `12h`, `7d` or `2w` (None when `value` is not one); one too
    long for a `timedelta` is an `OverflowError`."""
    m = _SPAN.match(value.strip())
    return dt.timedelta(seconds=int(m.group(1)) * _SPAN_SECONDS[m.group(2)]) if m else None


def parse_time(value: str | None, option: str = "--since", end_of_day: bool = False) -> str | None:
    """An ISO date/time, or a span back from now (`30m`, `12h`, `7d`, `2w`), as UTC ISO.

    A bare date means the start of that day, or its last second with `end_of_day` (so
    `--until 2026-01-31` includes the 31st). Anything else is a usage error naming `option`.
    """
    if value is None:
        return None
    value = value.strip()
    if _SPAN.match(value):
        try:
            when = utcnow() - (parse_span(value) or dt.timedelta())
        except (OverflowError, ValueError):
            raise UsageError(
                f"{option} {value!r} reaches back before the year 1", TIME_FORMS
            ) from None
    else:
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(
                f"{option} {value!r} is neither a date nor a span", TIME_FORMS
            ) from None
        if end_of_day and len(value) == 10:
            when = when.replace(hour=23, minute=59, second=59)
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
    # isoformat pads the year to four digits, so the result compares as a string
    return when.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


Signature = tuple[Any, ...]  # what `signature` says of a file or directory


class Listing(NamedTuple):
    """The files a walk of the folder found, and the symlinks it met that lead out of the
    folder (not followed: `LINK_OUT` says why)."""

    files: list[Path]
    outside: list[Path]


LINK_OUT = (
    "a symlink that leads out of the knowledge folder, so it is not followed "
    "(hint: copy the file into the folder instead)"
)
_own = threading.local()  # the writes of this thread that `recording_writes` notes

# -- a server's writer queues ---------------------------------------------------------------
# A server takes each folder's writer lock through a queue of its own (its threads share the
# process, so the flock alone would have them race); every write of the process on a served
# folder, a routed command's too, goes through it. By the folder's real path.
WriterQueue = Callable[[str, float | None], AbstractContextManager[None]]
_queues: dict[str, WriterQueue] = {}
_writers = threading.local()  # this thread's: .locks {folder: depth}, .turns {folder}


def _locks_held() -> dict[str, int]:
    """The folders whose writer lock this thread holds (and how deep)."""
    if not hasattr(_writers, "locks"):
        _writers.locks = {}
    locks: dict[str, int] = _writers.locks
    return locks


def _turns() -> set[str]:
    """The folders whose writer queue this thread has its turn in."""
    if not hasattr(_writers, "turns"):
        _writers.turns = set()
    turns: set[str] = _writers.turns
    return turns


@contextlib.contextmanager
def queue_writes(root: Path, queue: WriterQueue) -> Iterator[None]:
    """Within the block, `Folder.write_lock` of `root` in this process calls `queue(what,
    timeout)`, which holds a turn (`writer_turn`) and then the lock."""
    key = os.path.realpath(root)
    _queues[key] = queue
    try:
        yield
    finally:
        _queues.pop(key, None)


@contextlib.contextmanager
def writer_turn(root: Path) -> Iterator[None]:
    """This thread has its turn in `root`'s writer queue: its `write_lock` takes the lock."""
    key = os.path.realpath(root)
    turns = _turns()
    mine = key not in turns
    turns.add(key)
    try:
        yield
    finally:
        if mine:
            turns.discard(key)


def signature(path: str | Path) -> Signature | None:
    """What a file is now (inode, size, modification time; a directory: its inode), or
    None when there is nothing at `path`."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return ("dir", st.st_ino)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@contextlib.contextmanager
def recording_writes() -> Iterator[dict[str, Signature | None]]:
    """Inside the block, every `atomic_write` of this thread notes what it left: the file's
    real path and `signature` (and those of the directories it made), in the dict given.
    A server tells its own writes from other processes' changes this way."""
    outer = getattr(_own, "writes", None)
    writes: dict[str, Signature | None] = {} if outer is None else outer
    _own.writes = writes
    try:
        yield writes
    finally:
        _own.writes = outer


_umask_lock = threading.Lock()


def umask() -> int:
    """The process's umask. Read from /proc where it is shown (Linux), as setting it to
    read it back would race with the threads of a server writing files meanwhile."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _umask_lock:
        old = os.umask(0o022)
        os.umask(old)
    return old


def file_mode() -> int:
    """The mode a new file gets here, as `open()` would make it: 0644 under umask 022,
    0664 under 002."""
    return 0o666 & ~umask()


# the mode of files only their owner may read (API keys, approvals of commands)
PRIVATE = 0o600


def atomic_write(
    path: Path, data: str | bytes, *, durable: bool = True, mode: int | None = None
) -> None:
    """Write a file so that readers see the old or the new content, never half of it;
    `durable=False` skips the sync to disk, for derived files a crash may lose. The file
    gets the umask's mode, as any file a user's tools write (the temporary file it is
    written through would be private), or `mode` (PRIVATE for secrets)."""
    made = _dirs_to_make(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, file_mode() if mode is None else mode)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        _name(e, path)
        raise
    _noted(path, made)


def _dirs_to_make(path: Path) -> list[Path]:
    """The directories a write to `path` will make, when this thread's writes are noted."""
    if getattr(_own, "writes", None) is None:
        return []
    return [d for d in (path.parent, *path.parent.parents) if not d.exists()]


def _noted(path: Path, made: list[Path]) -> None:
    """Note what a write left at `path` (and the directories it made), if this thread's
    writes are noted (`recording_writes`)."""
    writes: dict[str, Signature | None] | None = getattr(_own, "writes", None)
    if writes is not None:
        for p in (path, *made):
            real = os.path.realpath(p)
            writes[real] = signature(real)


# Linux's PATH_MAX and NAME_MAX; deeper than MAX_DEPTH levels is a mistake, not a folder
MAX_PATH = 4096
MAX_NAME = 255
MAX_DEPTH = 128


def shown(value: str | Path, limit: int = 120) -> str:
    """A path or name fit for a one-line message: bytes that are not UTF-8 become `\\xNN`,
    control characters are escaped and anything past `limit` characters is cut."""
    raw = os.fsencode(str(value)).decode("utf-8", "backslashreplace")
    text = raw.encode("unicode_escape").decode("ascii") if not raw.isprintable() else raw
    return text if len(text) <= limit else text[: limit - 1] + "…"


NAME_NOT_UTF8 = (
    "its name is not valid UTF-8 (the mapping and the index need UTF-8), so it is "
    "left out (hint: rename it to a UTF-8 name)"
)


def is_utf8(path: str | Path) -> bool:
    """Whether a path can be written to JSON, the mapping and the graph (all UTF-8)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_path(path: str | Path, what: str = "path") -> None:
    """Refuse paths no file system would take (NUL, too long, too deep), with the reason."""
    text = str(path)
    if "\x00" in text:
        raise BadInput(f"{what} contains a NUL byte", "pass a plain path without \\x00")
    size = len(os.fsencode(text))
    if size > MAX_PATH:
        raise BadInput(
            f"{what} is {size} bytes long; paths are at most {MAX_PATH}",
            "pass a shorter path, relative to the folder root",
        )
    parts = [x for x in text.replace("\\", "/").split("/") if x]
    if len(parts) > MAX_DEPTH:
        raise BadInput(
            f"{what} is {len(parts)} directories deep; at most {MAX_DEPTH} are accepted",
            "pass the path of a real file or directory",
        )
    long = next((x for x in parts if len(os.fsencode(x)) > MAX_NAME), None)
    if long is not None:
        raise BadInput(
            f"{what} has a name of {len(os.fsencode(long))} bytes "
            f"({shown(long, 40)}); names are at most {MAX_NAME}",
            "pass the path of a real file or directory",
        )


def append_whole(path: Path, data: bytes, fsync: bool = False, within: Path | None = None) -> None:
    """Append `data` to `path` entirely or not at all; with `within` (a folder's root),
    never through a symlink that leads out of it (a `BadInput`: a log that arrived by `git
    pull` as a link must not write into the user's other files).

    A full disk can take part of a write; the rest of a torn line would glue the next
    line onto it, so on failure the file is cut back to its old length.
    """
    if within is not None:
        refuse_link_out(path, within)
    made = _dirs_to_make(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # less the umask
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if fsync:
                os.fsync(fd)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            _name(e, path)
            raise
    finally:
        os.close(fd)
    _noted(path, made)


def refuse_link_out(path: Path, root: Path) -> None:
    """A `BadInput` when `path` is a symlink, or lies under one, that leads out of `root`:
    a file of the folder's own that is read and appended to in place (a log that arrived by
    `git pull` as a link, say) must not read or write files elsewhere."""
    real = Path(os.path.realpath(path))
    if real != root and root not in real.parents:
        raise BadInput(
            f"{shown(path)} is a symlink, or lies under one, that leads out of the knowledge "
            "folder: ok neither reads nor writes through it",
            "replace the link with a plain file (move it away), then run the command again",
        )


def _name(e: BaseException, path: Path) -> None:
    """Put the file's name on an OSError from write/fsync, which carry none, so the error
    can say which file (a full disk: which disk)."""
    if isinstance(e, OSError) and not e.filename:
        e.filename = str(path)


class Folder:
    """A knowledge folder rooted at `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.ok_dir = self.root / ".ok"
        self.store_dir = self.root / "store"
        self.sources_dir = self.store_dir / "sources"
        self.normalized_dir = self.store_dir / "normalized"
        self.memories_dir = self.root / "memories"
        self.by_date_dir = self.memories_dir / "by_date"
        self.topics_dir = self.memories_dir / "topics"
        self.citations_dir = self.root / "citations"
        self.graph_dir = self.root / "graph"
        self.kuzu_dir = self.ok_dir / "kuzu"
        self.cache_dir = self.ok_dir / "cache"
        self.config_path = self.ok_dir / "config.yml"
        self.mapping_path = self.ok_dir / "mapping.jsonl"
        self.ops_log = self.ok_dir / "ops.log"
        self.id_path = self.ok_dir / "folder_id"
        self.lock_path = self.ok_dir / "lock"
        self._config: dict[str, Any] | None = None
        self.tee: Path | None = None
        self._held = threading.local()  # writer-lock nesting depth, per thread

    # -- layout -----------------------------------------------------------------
    @classmethod
    def init(cls, root: Path, domain: str | None = None) -> Folder:
        """Create the layout (idempotent: an existing folder keeps its files)."""
        root = root.expanduser().resolve()
        check_path(root)
        above = next((p for p in (root, *root.parents) if p.exists()), root)
        if not above.is_dir():
            raise BadInput(f"{shown(above)} exists and is not a directory", "choose another path")
        try:
            return cls._lay_out(root, domain)
        except OSError as e:
            raise BadInput(
                f"cannot create a knowledge folder at {shown(root)}: {e.strerror or e}",
                "choose a directory you can write to, e.g. `ok init ~/kb`",
            ) from None

    @classmethod
    def _lay_out(cls, root: Path, domain: str | None) -> Folder:
        folder = cls(root)
        for d in (
            folder.sources_dir,
            folder.normalized_dir,
            folder.by_date_dir,
            folder.topics_dir,
            folder.citations_dir,
            folder.graph_dir,
            folder.kuzu_dir,
            folder.cache_dir,
        ):
            d.mkdir(parents=True, exist_ok=True)
        if not folder.config_path.exists():
            cfg = {"version": CONFIG_VERSION, "domain": domain or root.name}
            folder.write_config(cfg)
        _ensure_block(root / ".gitignore", GITIGNORE, ".ok/kuzu/")
        _ensure_block(root / ".gitattributes", GITATTRIBUTES, "events/*.jsonl")
        if not folder.mapping_path.exists():
            atomic_write(folder.mapping_path, "")
        folder.identity()
        return folder

    def rel(self, path: Path) -> str:
        """A path relative to the root, with forward slashes."""
        return path.resolve().relative_to(self.root).as_posix()

    def inside(self, path: str | Path) -> Path:
        """Resolve `path` (relative to the root or absolute) and refuse anything outside it."""
        check_path(path)
        p = Path(path)
        full = (p if p.is_absolute() else self.root / p).resolve()
        if not self.holds(full):
            raise BadInput(
                f"path {shown(path)} is outside the knowledge folder {self.root}",
                "use a path inside the folder",
            )
        return full

    def holds(self, resolved: Path) -> bool:
        """Whether a resolved path is the root or lies under it."""
        return resolved == self.root or self.root in resolved.parents

    def named(self, path: Path) -> str:
        """A path under the root relative to it as named, symlinks not followed (`rel`
        follows them, and fails for a link out of the folder)."""
        return path.relative_to(self.root).as_posix()

    def files_under(self, top: Path, suffix: str = "", recursive: bool = True) -> Listing:
        """The files under `top` whose names end with `suffix`, sorted, as the walks of
        `ok sync` and the rest read the folder: hidden names are left out, symlinked
        directories are not entered (a file of theirs comes by its real path, if at all),
        and a symlink that leads out of the folder is not followed but listed in
        `outside`, for the caller to report."""
        if not top.is_dir():
            return Listing([], [])
        if not self.holds(Path(os.path.realpath(top))):
            return Listing([], [top])
        files: list[Path] = []
        outside: list[Path] = []
        todo = [top]
        while todo:  # a stack, not recursion: a hostile tree may be deeper than Python's
            d = todo.pop()
            try:
                entries = list(os.scandir(d))
            except OSError:
                continue  # gone meanwhile, or unreadable: as rglob does
            for ent in entries:
                p = d / ent.name
                try:
                    link = ent.is_symlink()
                    is_dir = ent.is_dir(follow_symlinks=False)
                    is_file = ent.is_file(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir:
                    if recursive:
                        todo.append(p)
                    continue
                if ent.name.startswith("."):
                    continue
                if link:
                    if not self.holds(Path(os.path.realpath(p))):
                        if ent.name.endswith(suffix) or p.is_dir():
                            outside.append(p)
                        continue
                    is_file = p.is_file()  # a link to a directory is not entered
                if is_file and ent.name.endswith(suffix):
                    files.append(p)
        return Listing(sorted(files), sorted(outside))

    def identity(self) -> str:
        """The folder's own id, made once and kept in `.ok/folder_id` (in git: a clone is
        the same folder; another folder that happens to share its `domain` is not). Its
        stack in PostgreSQL records it, and refuses the rows of another folder."""
        if not self.id_path.exists():
            # written aside and linked in: two first uses at once agree on one id, and no
            # reader sees the file empty
            fd, tmp = tempfile.mkstemp(prefix=".folder_id.", suffix=".tmp", dir=self.ok_dir)
            try:
                os.fchmod(fd, file_mode())
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(uuid.uuid4().hex + "\n")
                with contextlib.suppress(FileExistsError):
                    os.link(tmp, self.id_path)
            finally:
                os.unlink(tmp)
        said = self.id_path.read_text(encoding="utf-8").strip()
        if not re.fullmatch(r"[0-9a-f]{32}", said):
            raise BadInput(
                f"{self.named(self.id_path)} does not hold a folder id",
                "delete it: a new one is made, and the folder's stack in PostgreSQL is then "
                "taken over with --take-over",
            )
        return said

    # -- config -----------------------------------------------------------------
    @property
    def config(self) -> dict[str, Any]:
        """The mapping in `.ok/config.yml` as written (defaults live in `openkl.settings`)."""
        if self._config is None:
            data: dict[str, Any] = {}
            if self.config_path.exists():
                try:
                    data = yaml.safe_load(self.config_path.read_text(encoding="utf-8")) or {}
                except yaml.YAMLError as e:
                    raise BadInput(
                        f"{self.config_path} is not valid YAML: {e}".splitlines()[0],
                        "fix the file or delete it to get the defaults",
                    ) from e
                if not isinstance(data, dict):
                    raise BadInput(
                        f"{self.config_path} must hold a mapping",
                        "fix the file or delete it to get the defaults",
                    )
            self._config = data
        return self._config

    def config_now(self) -> dict[str, Any]:
        """A copy of `.ok/config.yml` as it is now on disk (a long-lived process may have
        read it long ago), to change and pass to `write_config`."""
        self._config = None
        return copy.deepcopy(self.config)

    def setting(self, key: str) -> Any:
        """A declared setting's value, of its declared type: `OK_<KEY>` in the environment
        wins over `.ok/config.yml`, which wins over the default in `openkl.settings`."""
        return self.explain(key).value

    def explain(self, key: str) -> settings.Value:
        """A declared setting's value and where it came from (default, config or env)."""
        return settings.resolve(settings.spec(key), self.config)

    def secret_env(self, key: str) -> str | None:
        """The environment variable a secret's setting names (`settings.SECRET_ENV`): from
        this folder's config file only a name of the allow-list, from the environment any."""
        return settings.secret_env(self.explain(key))

    def write_config(self, data: dict[str, Any]) -> None:
        """Replace `.ok/config.yml` atomically, keeping the comment lines that open it."""
        header = CONFIG_HEADER
        if self.config_path.exists():
            lines = self.config_path.read_text(encoding="utf-8", errors="replace").splitlines()
            kept = _leading_comments(lines)
            header = "\n".join(kept) + "\n" if kept else ""
        body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True) if data else ""
        atomic_write(self.config_path, header + body)
        self._config = None

    def set_setting(self, key: str, raw: str) -> settings.Value:
        """Check `raw` against `key`'s type and write it to `.ok/config.yml`."""
        s = self._settable(key)
        value = s.parse(raw, "", f"give {s.expected}, e.g. `ok config set {s.key} {s.example()}`")
        if s.key in settings.SECRET_ENV:
            settings.secret_env(settings.Value(s, value, "config"))
        with self.write_lock(f"ok config set {s.key}"):
            self._config = None
            data = copy.deepcopy(self.config)
            settings.put(data, s.key, value)
            self.write_config(data)
            self.log_op("config.set", key=s.key, value=value)
        return settings.resolve(s, self.config)

    def unset_setting(self, key: str) -> bool:
        """Remove `key` from `.ok/config.yml` (it goes back to its default); whether it was
        there. Keys the file sets that are not declared (old or misspelt) can be removed too."""
        with self.write_lock(f"ok config unset {key}"):
            self._config = None
            data = copy.deepcopy(self.config)
            if key in settings.SETTINGS or key.upper() in settings.BY_ENV:
                key = self._settable(key).key
            elif key not in settings.unknown_keys(data, retired=True):
                settings.lookup(key)  # refused, with close matches
            removed = settings.drop(data, key)
            if removed:
                self.write_config(data)
                self.log_op("config.unset", key=key)
        return removed

    def _settable(self, key: str) -> settings.Setting:
        s = settings.lookup(key)
        if s.env_only:
            raise UsageError(
                f"{s.env} is read from the environment only, not from .ok/config.yml",
                f"export {s.env}=… in the shell that runs ok",
            )
        return s

    # -- logs -------------------------------------------------------------------
    def log_op(self, op: str, **fields: Any) -> dict[str, Any]:
        """Append one JSON line to `.ok/ops.log` (and to the `--tee` file, if any)."""
        entry = {"ts": iso(), "op": op, **fields}
        line = json.dumps(entry, ensure_ascii=False, sort_keys=False) + "\n"
        for target in filter(None, (self.ops_log, self.tee)):
            append_whole(target, line.encode("utf-8"))
        return entry

    # -- writer lock ------------------------------------------------------------
    @contextlib.contextmanager
    def write_lock(self, what: str, timeout: float | None = None) -> Iterator[None]:
        """Hold the folder's single writer lock; wait up to `timeout` s, then name the holder.

        The lock is an flock, so a killed process releases it. A nested call in the thread
        that holds it (through this `Folder` or another of the same folder) is a no-op;
        another thread of the same process waits like another process would (each call
        opens its own file description, and flock locks those). In a server, a thread's
        write waits its turn in the server's writer queue for the folder (`queue_writes`)
        instead: behind the server's own writes, for as long as they take (`timeout` only
        when one is given).
        """
        held = self._held.__dict__
        key = os.path.realpath(self.root)
        if held.get("depth", 0) or _locks_held().get(key):
            held["depth"] = held.get("depth", 0) + 1
            try:
                yield
            finally:
                held["depth"] -= 1
            return
        queue = _queues.get(key)
        if queue is not None and key not in _turns():
            hold = queue(what, timeout)
        else:
            hold = self._flock(what, timeout)
        with hold:
            held["depth"] = 1
            try:
                yield
            finally:
                held["depth"] = 0

    @contextlib.contextmanager
    def _flock(self, what: str, timeout: float | None) -> Iterator[None]:
        if os.path.realpath(self.root) not in _queues:
            # a process that serves the folder writes in its own turn, whatever a claim
            # says; any other is refused while a server owns the folder
            self.refuse_if_served()
        timeout = float(self.setting("lock_timeout") if timeout is None else timeout)
        self.ok_dir.mkdir(parents=True, exist_ok=True)
        # the umask decides, so that a group sharing the folder can take the lock too
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        started = time.monotonic()
        deadline = started + timeout
        told = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    now = time.monotonic()
                    if now >= deadline:
                        raise LockBusy(
                            f"the folder is locked by another writer: {self.lock_holder()}",
                            "wait for it to finish, or raise OK_LOCK_TIMEOUT",
                        ) from None
                    # said once, and only for a real wait: a writer that finishes within a
                    # second is not worth a line; a silent 30 s wait looks like a hang
                    if not told and now - started >= LOCK_NOTICE_AFTER:
                        print(
                            f"waiting for the writer lock, held by {self.lock_holder()}; "
                            f"giving up after {timeout:g}s (OK_LOCK_TIMEOUT)…",
                            file=sys.stderr,
                            flush=True,
                        )
                        told = True
                    time.sleep(0.1)
            info = {"pid": os.getpid(), "host": socket.gethostname(), "what": what, "since": iso()}
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(info).encode(), 0)
            except OSError as e:
                _name(e, self.lock_path)
                raise
            locks = _locks_held()
            key = os.path.realpath(self.root)
            locks[key] = locks.get(key, 0) + 1
            try:
                yield
            finally:
                locks[key] -= 1
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    # -- a resident server --------------------------------------------------------
    @property
    def served_path(self) -> Path:
        """Where a running `ok serve` says that it owns the folder."""
        return self.ok_dir / "serve.json"

    def server(self) -> dict[str, Any] | None:
        """The running `ok serve` that owns this folder (its pid, url, start), or None. The
        record a killed server left is removed."""
        try:
            info = json.loads(self.served_path.read_text() or "{}")
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            info = {}
        pid = info.get("pid") if isinstance(info, dict) else None
        if isinstance(pid, int) and (pid == os.getpid() or is_server(pid, info)):
            return info
        # a killed server's claim, and the routing socket it left beside it (only a socket
        # of ours in a private directory of ours: a claim may name anything)
        sock = info.get("socket") if isinstance(info, dict) else None
        if isinstance(sock, str) and os.path.isabs(sock) and own_socket(Path(sock)):
            with contextlib.suppress(OSError):
                Path(sock).unlink()
        with contextlib.suppress(FileNotFoundError):
            self.served_path.unlink()
        return None

    def refuse_if_served(self) -> None:
        """Raise `Served` when another process's `ok serve` owns the folder."""
        info = self.server()
        if not info or info.get("pid") == os.getpid():
            return
        # routed commands run in the server; one that runs here was told not to, or could
        # not reach it
        there = (
            "run the command as `ok` without OK_NO_ROUTE=1 and it runs there"
            if settings.env("OK_NO_ROUTE") == "1"
            else "it did not take the command; run it again"
        )
        if info.get("resident"):
            raise Served(
                f"the folder is served by its resident process (pid {info['pid']})",
                f"{there}; or stop it first: ok daemon stop",
            )
        raise Served(
            f"the folder is served by `ok serve` (pid {info['pid']}, {info.get('url')})",
            f"{there}; or use its HTTP API ({info.get('url')}/docs), or stop it: "
            f"kill {info['pid']}",
        )

    def lock_holder(self) -> str:
        try:
            info = json.loads(self.lock_path.read_text() or "{}")
        except (OSError, ValueError):
            info = {}
        if not info:
            return "unknown process"
        return f"pid {info.get('pid')} ({info.get('what')}, since {info.get('since')})"

    def lock_state(self) -> dict[str, Any] | None:
        """The current holder of the writer lock, or None when it is free."""
        if not self.lock_path.exists():
            return None
        fd = os.open(self.lock_path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        except BlockingIOError:
            try:
                return json.loads(self.lock_path.read_text() or "{}") or {"pid": None}
            except ValueError:
                return {"pid": None}
        finally:
            os.close(fd)


def _leading_comments(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if not line.startswith("#"):
            break
        out.append(line)
    return out


def stack_name(folder: Folder) -> str:
    """The folder's name as a stack: its `domain` setting, else its directory's name."""
    return str(folder.setting("domain") or folder.root.name)


def stacks_of(folders: Sequence[Folder]) -> dict[str, Folder]:
    """The folders a server serves, by stack name: the folder's `domain` setting, else its
    directory's name. The same folder twice counts once; two folders with one name are
    refused."""
    out: dict[str, Folder] = {}
    for f in folders:
        name = stack_name(f)
        if name in out:
            if out[name].root == f.root:
                continue
            raise BadInput(
                f"two folders are both named {name!r} ({out[name].root} and {f.root})",
                "set a distinct `domain:` in one folder's .ok/config.yml",
            )
        out[name] = f
    return out


def find_root(start: Path | None = None, explicit: str | Path | None = None) -> Path:
    """`--root`, else `$OK_ROOT`, else the nearest parent holding `.ok/` (like git)."""
    given = explicit or settings.env("OK_ROOT")
    if given:
        root = Path(given).expanduser().resolve()
        if not (root / ".ok").is_dir():
            raise NotAFolder(
                f"{root} is not a knowledge folder (no .ok/ inside)", f"run `ok init {given}` first"
            )
        return root
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / ".ok").is_dir():
            return d
    raise NotAFolder(
        "not inside a knowledge folder (no .ok/ here or in any parent)",
        "run `ok init` here, or pass --root / set OK_ROOT",
    )


def open_folder(explicit: str | Path | None = None) -> Folder:
    """The folder the current command works on."""
    return Folder(find_root(explicit=explicit))


__all__ = [
    "Folder",
    "OkError",
    "append_whole",
    "atomic_write",
    "find_root",
    "iso",
    "open_folder",
    "parse_time",
    "utcnow",
]


def _ensure_block(path: Path, block: str, marker: str) -> None:
    """Write `block` to a git file (.gitignore, .gitattributes), or append it to the user's
    own file when that does not have it yet (`marker` is a line only the block has)."""
    if not path.exists():
        atomic_write(path, block)
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    if marker not in text:
        atomic_write(path, text.rstrip("\n") + "\n\n" + block)
