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
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from .errors import BadInput, LockBusy, NotAFolder, OkError, UsageError

CONFIG_VERSION = 1
LOCK_NOTICE_AFTER = 1.0  # seconds of waiting for the writer lock before saying so

DEFAULT_CONFIG: dict[str, Any] = {
    "version": CONFIG_VERSION,
    "domain": None,  # defaults to the folder's name
    "embedding": {"model": "default", "batch_size": 32},
    "chunking": {"max_tokens": 256, "overlap": 64},
    "search": {"k": 10, "mode": "hybrid", "per_doc": 1, "vector_index": "exact",
               "fusion": "wsum", "vector_weight": 0.5, "rrf_k": 60, "diversity": 0.5},
    "lock_timeout": 30.0,
    "llm": {"base_url": None, "model": None, "api_key_env": "OPENAI_API_KEY", "timeout": 60.0,
            "retries": 2},
    "ingest": {"max_file_mb": 64},
    "graph": {"buffer_pool_mb": 512, "min_free_mb": 64},
    # caps for `ok mcp`: results per call, bytes per result, seconds per call (per tool)
    "mcp": {"max_k": 50, "max_bytes": 100000, "timeout": 30.0,
            "timeouts": {"ask": 120.0, "store_ingest": 300.0, "context": 60.0},
            "fs_max_entries": 500, "grep_max": 200, "cypher_max_rows": 500, "read_only": False},
}

GITIGNORE = """\
# Derived by `ok`; rebuilt from the files with `ok index`.
.ok/kuzu/
.ok/cache/
.ok/ops.log
.ok/lock
.ok/lock.info
memories/topics/
graph/
"""


def utcnow() -> dt.datetime:
    """The current time in UTC; `OK_NOW` (ISO 8601) pins it for reproducible runs and tests."""
    pinned = os.environ.get("OK_NOW")
    if pinned:
        return dt.datetime.fromisoformat(pinned.replace("Z", "+00:00")).astimezone(dt.UTC)
    return dt.datetime.now(dt.UTC)


def iso(ts: dt.datetime | None = None) -> str:
    return (ts or utcnow()).strftime("%Y-%m-%dT%H:%M:%SZ")


_SPAN = re.compile(r"^(\d+)\s*([smhdw])$")
_SPAN_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
TIME_FORMS = "use e.g. 2026-01-31, 2026-01-31T08:00:00Z, 90m, 12h, 7d or 2w"


def parse_time(value: str | None, option: str = "--since", end_of_day: bool = False
               ) -> str | None:
    """An ISO date/time, or a span back from now (`30m`, `12h`, `7d`, `2w`), as UTC ISO.

    A bare date means the start of that day, or its last second with `end_of_day` (so
    `--until 2026-01-31` includes the 31st). Anything else is a usage error naming `option`.
    """
    if value is None:
        return None
    value = value.strip()
    m = _SPAN.match(value)
    if m:
        try:
            when = utcnow() - dt.timedelta(seconds=int(m.group(1)) * _SPAN_SECONDS[m.group(2)])
        except (OverflowError, ValueError):
            raise UsageError(f"{option} {value!r} reaches back before the year 1",
                             TIME_FORMS) from None
    else:
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"{option} {value!r} is neither a date nor a span",
                             TIME_FORMS) from None
        if end_of_day and len(value) == 10:
            when = when.replace(hour=23, minute=59, second=59)
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
    # isoformat pads the year to four digits, so the result compares as a string
    return when.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write a file so that readers see the old or the new content, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        _name(e, path)
        raise


def append_whole(path: Path, data: bytes, fsync: bool = False) -> None:
    """Append `data` to `path` entirely or not at all.

    A full disk can take part of a write; the rest of a torn line would glue the next
    line onto it, so on failure the file is cut back to its old length.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            _name(e, path)
            raise
    finally:
        os.close(fd)


def _name(e: BaseException, path: Path) -> None:
    """Put the file's name on an OSError from write/fsync, which carry none, so the error
    can say which file (a full disk: which disk)."""
    if isinstance(e, OSError) and not e.filename:
        e.filename = str(path)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


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
        self.lock_path = self.ok_dir / "lock"
        self._config: dict[str, Any] | None = None
        self.tee: Path | None = None
        self._held = threading.local()  # writer-lock nesting depth, per thread

    # -- layout -----------------------------------------------------------------
    @classmethod
    def init(cls, root: Path, domain: str | None = None) -> Folder:
        """Create the layout (idempotent: an existing folder keeps its files)."""
        root = root.resolve()
        if root.exists() and not root.is_dir():
            raise BadInput(f"{root} exists and is not a directory", "choose another path")
        folder = cls(root)
        for d in (folder.sources_dir, folder.normalized_dir, folder.by_date_dir,
                  folder.topics_dir, folder.citations_dir, folder.graph_dir, folder.kuzu_dir,
                  folder.cache_dir):
            d.mkdir(parents=True, exist_ok=True)
        if not folder.config_path.exists():
            cfg = copy.deepcopy(DEFAULT_CONFIG)
            cfg["domain"] = domain or root.name
            atomic_write(folder.config_path, yaml.safe_dump(cfg, sort_keys=False))
        gi = root / ".gitignore"
        if not gi.exists():
            atomic_write(gi, GITIGNORE)
        elif ".ok/kuzu/" not in gi.read_text(encoding="utf-8", errors="replace"):
            atomic_write(gi, gi.read_text(encoding="utf-8", errors="replace").rstrip("\n")
                         + "\n\n" + GITIGNORE)
        if not folder.mapping_path.exists():
            atomic_write(folder.mapping_path, "")
        return folder

    def rel(self, path: Path) -> str:
        """A path relative to the root, with forward slashes."""
        return path.resolve().relative_to(self.root).as_posix()

    def inside(self, path: str | Path) -> Path:
        """Resolve `path` (relative to the root or absolute) and refuse anything outside it."""
        p = Path(path)
        if "\x00" in str(path):
            raise BadInput("path contains a NUL byte", "pass a plain path")
        full = (p if p.is_absolute() else self.root / p).resolve()
        if full != self.root and self.root not in full.parents:
            raise BadInput(f"path {path} is outside the knowledge folder {self.root}",
                           "use a path inside the folder")
        return full

    # -- config -----------------------------------------------------------------
    @property
    def config(self) -> dict[str, Any]:
        if self._config is None:
            data: dict[str, Any] = {}
            if self.config_path.exists():
                try:
                    data = yaml.safe_load(self.config_path.read_text(encoding="utf-8")) or {}
                except yaml.YAMLError as e:
                    raise BadInput(f"{self.config_path} is not valid YAML: {e}".splitlines()[0],
                                   "fix the file or delete it to get the defaults") from e
                if not isinstance(data, dict):
                    raise BadInput(f"{self.config_path} must hold a mapping",
                                   "fix the file or delete it to get the defaults")
            self._config = _merge(DEFAULT_CONFIG, data)
            if not self._config.get("domain"):
                self._config["domain"] = self.root.name
        return self._config

    def setting(self, dotted: str, default: Any = None) -> Any:
        """A setting by dotted name; `OK_<DOTTED_UPPER>` in the environment wins over the file."""
        env = os.environ.get("OK_" + dotted.replace(".", "_").upper())
        node: Any = self.config
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                break
        value = default if node is None else node
        if env is not None:
            return _coerce(env, value)
        return value

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
        that holds it is a no-op; another thread of the same process waits like another
        process would (each call opens its own file description, and flock locks those).
        """
        held = self._held.__dict__
        if held.get("depth", 0):
            held["depth"] += 1
            try:
                yield
            finally:
                held["depth"] -= 1
            return
        timeout = float(self.setting("lock_timeout", 30.0) if timeout is None else timeout)
        self.ok_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
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
                        raise LockBusy(f"the folder is locked by another writer: {self.lock_holder()}",
                                       "wait for it to finish, or raise OK_LOCK_TIMEOUT") from None
                    # said once, and only for a real wait: a writer that finishes within a
                    # second is not worth a line; a silent 30 s wait looks like a hang
                    if not told and now - started >= LOCK_NOTICE_AFTER:
                        print(f"waiting for the writer lock, held by {self.lock_holder()}; "
                              f"giving up after {timeout:g}s (OK_LOCK_TIMEOUT)…",
                              file=sys.stderr, flush=True)
                        told = True
                    time.sleep(0.1)
            info = {"pid": os.getpid(), "host": socket.gethostname(), "what": what,
                    "since": iso()}
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(info).encode(), 0)
            except OSError as e:
                _name(e, self.lock_path)
                raise
            held["depth"] = 1
            try:
                yield
            finally:
                held["depth"] = 0
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

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


def _coerce(raw: str, like: Any) -> Any:
    if isinstance(like, bool):
        return raw.lower() in ("1", "true", "yes", "on")
    if isinstance(like, int | float):
        try:
            return int(raw) if isinstance(like, int) and raw.strip().lstrip("-").isdigit() \
                else float(raw)
        except ValueError:
            raise BadInput(f"environment value {raw!r} is not a number",
                           "set the OK_* variable to a number") from None
    return raw


def find_root(start: Path | None = None, explicit: str | Path | None = None) -> Path:
    """`--root`, else `$OK_ROOT`, else the nearest parent holding `.ok/` (like git)."""
    given = explicit or os.environ.get("OK_ROOT")
    if given:
        root = Path(given).expanduser().resolve()
        if not (root / ".ok").is_dir():
            raise NotAFolder(f"{root} is not a knowledge folder (no .ok/ inside)",
                             f"run `ok init {given}` first")
        return root
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / ".ok").is_dir():
            return d
    raise NotAFolder("not inside a knowledge folder (no .ok/ here or in any parent)",
                     "run `ok init` here, or pass --root / set OK_ROOT")


def open_folder(explicit: str | Path | None = None) -> Folder:
    """The folder the current command works on."""
    return Folder(find_root(explicit=explicit))


__all__ = ["Folder", "OkError", "append_whole", "atomic_write", "find_root", "iso", "open_folder", "parse_time",
           "utcnow"]
