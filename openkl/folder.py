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
    "search": {
        "k": 10,
        "mode": "hybrid",
        "per_doc": 1,
        "vector_index": "exact",
        "fusion": "wsum",
        "vector_weight": 0.5,
        "rrf_k": 60,
        "diversity": 0.5,
    },
    "lock_timeout": 30.0,
    "llm": {
        "base_url": None,
        "model": None,
        "api_key_env": "OPENAI_API_KEY",
        "timeout": 60.0,
        "retries": 2,
    },
    "ingest": {"max_file_mb": 64},
    "graph": {"buffer_pool_mb": 512, "min_free_mb": 64},
    # caps for `ok mcp`: results per call, bytes per result, seconds per call (per tool)
    "mcp": {
        "max_k": 50,
        "max_bytes": 100000,
        "timeout": 30.0,
        "timeouts": {"ask": 120.0, "store_ingest": 300.0, "context": 60.0},
        "fs_max_entries": 500,
        "grep_max": 200,
        "cypher_max_rows": 500,
        "read_only": False,
    },
}

GITIGNORE = """\
# Derived by `ok`; rebuilt from the files with `ok index`.
.ok/kuzu/
.ok/kuzu.rebuild/
.ok/kuzu.old/
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


def parse_time(value: str | None, option: str = "--since", end_of_day: bool = False) -> str | None:
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
            cfg = copy.deepcopy(DEFAULT_CONFIG)
            cfg["domain"] = domain or root.name
            atomic_write(folder.config_path, yaml.safe_dump(cfg, sort_keys=False))
        gi = root / ".gitignore"
        if not gi.exists():
            atomic_write(gi, GITIGNORE)
        elif ".ok/kuzu/" not in gi.read_text(encoding="utf-8", errors="replace"):
            atomic_write(
                gi,
                gi.read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n\n" + GITIGNORE,
            )
        if not folder.mapping_path.exists():
            atomic_write(folder.mapping_path, "")
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

    # -- config -----------------------------------------------------------------
    @property
    def config(self) -> dict[str, Any]:
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
            return (
                int(raw)
                if isinstance(like, int) and raw.strip().lstrip("-").isdigit()
                else float(raw)
            )
        except ValueError:
            raise BadInput(
                f"environment value {raw!r} is not a number", "set the OK_* variable to a number"
            ) from None
    return raw


def find_root(start: Path | None = None, explicit: str | Path | None = None) -> Path:
    """`--root`, else `$OK_ROOT`, else the nearest parent holding `.ok/` (like git)."""
    given = explicit or os.environ.get("OK_ROOT")
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
