"""A folder's resident process (openkl.server.resident), seen from the `ok` entry point:
started by the first command that finds no server of the folder, found and stopped by
`ok daemon`.

A command that starts one waits until it owns the folder, then runs in it as every later
command does (openkl.cli.route); other commands arriving meanwhile wait for the same one
(`.ok/cache/resident.lock`). A start that fails is said once and not tried again for
RETRY_AFTER seconds; the command then runs in its own process, as always.

Standard library only, but for reading the folder's `serve.auto` setting (openkl.files.folder),
which happens only when no server owns the folder: the command then loads the CLI anyway."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

from ..files import routing

START_LOCK = "resident.lock"  # held by the command that starts one
RUN_LOCK = "resident.run"  # held by the resident process while it lives
LOG = "resident.log"
FAILED = "resident.failed"  # when a start last failed
TOLD = "resident.told"  # the first start was said
RETRY_AFTER = 600.0  # seconds after a failed start before a command tries again
LOG_MAX = 1 << 20  # bytes of log kept (and one older file)
READY_WITHIN = 600.0  # seconds a command waits for a resident process to own the folder
SLOW_NOTICE = 3.0  # seconds of waiting before the command says what it waits for
STOP_WITHIN = 120.0  # seconds `stop` waits for one to end


def turned_off(environ: dict[str, str] | os._Environ[str]) -> bool:
    """OK_NO_DAEMON says no command starts a resident process."""
    return environ.get("OK_NO_DAEMON", "").strip().lower() not in ("", "0", "false", "no", "off")


def may_start(root: Path) -> bool:
    """Whether a command may start a resident process for the folder `root`: not turned
    off (OK_NO_DAEMON, `serve.auto: false`), its `.ok` this user's own (another user's
    commands would find the folder claimed by a process that is not theirs) and writable,
    and no start failed in the last RETRY_AFTER seconds."""
    if turned_off(os.environ):
        return False
    ok_dir = root / ".ok"
    try:
        if ok_dir.stat().st_uid != os.getuid() or not os.access(ok_dir, os.W_OK | os.X_OK):
            return False
        with contextlib.suppress(FileNotFoundError):
            if time.time() - (ok_dir / "cache" / FAILED).stat().st_mtime < RETRY_AFTER:
                return False
    except OSError:
        return False
    from ..files.folder import Folder  # the folder's settings: YAML, only on this path

    try:
        return Folder(root).setting("serve.auto") is True
    except Exception:  # a config the command itself reports
        return False


def start(root: Path, tell: bool = True) -> int | None:
    """Start the folder's resident process, or wait for the one another command starts,
    until a server owns the folder: its pid. None when none could (said on stderr).
    `tell`: say so the first time a command starts one in this folder."""
    cache = root / ".ok" / "cache"
    cache.mkdir(exist_ok=True)
    fd = os.open(cache / START_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another command may be starting one: wait for it
        return _start(root, cache, tell)
    finally:
        os.close(fd)


def _start(root: Path, cache: Path, tell: bool) -> int | None:
    proc: subprocess.Popen[bytes] | None = None
    started = time.monotonic()
    noticed = False
    while True:
        pid = owner(root)
        if pid is not None:
            return pid
        if _foreign(root):
            return None  # served by a process of another user: the command says so
        if proc is None and not _held(cache / RUN_LOCK):
            proc = _spawn(root, cache)
            if tell:
                noticed = _tell_once(cache, proc.pid)
        elif proc is not None and proc.poll() is not None:
            pid = owner(root)  # it gave way to another, which owns the folder now
            if pid is None:
                _failed(cache, proc.pid)
            return pid
        waited = time.monotonic() - started
        if waited > READY_WITHIN:
            _failed(cache, proc.pid if proc else None, f"not ready in {READY_WITHIN:g} s")
            return None
        if not noticed and waited > SLOW_NOTICE:
            noticed = True
            print(
                "ok: waiting for the folder's resident process to open it (it syncs the "
                "folder first)…",
                file=sys.stderr,
                flush=True,
            )
        time.sleep(0.02)


def _spawn(root: Path, cache: Path) -> subprocess.Popen[bytes]:
    """The resident process, detached: a session of its own (a terminal's Ctrl-C is not
    for it), no stream of this command's (a `$(ok …)` does not wait for it), its output
    to `.ok/cache/resident.log`."""
    import subprocess  # here: a routed command has no use for it

    log = cache / LOG
    with contextlib.suppress(OSError):
        if log.stat().st_size > LOG_MAX:
            os.replace(log, cache / (LOG + ".1"))
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    env = {k: v for k, v in os.environ.items() if k != "OK_ROOT"}
    try:
        # -P: the working directory is not searched for modules
        return subprocess.Popen(
            [sys.executable, "-P", "-m", "openkl.cli.route", "serve", "--resident"]
            + ["--root", str(root)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd="/",
            env=env,
            start_new_session=True,
        )
    finally:
        os.close(out)


def _tell_once(cache: Path, pid: int) -> bool:
    """Say, the first time in this folder, that a resident process started (True)."""
    told = cache / TOLD
    if told.exists():
        return False
    with contextlib.suppress(OSError):
        told.write_text(f"{pid}\n")
    print(
        f"ok: started a resident process for this folder (pid {pid}): it keeps the graph and "
        "the model loaded, so ok commands here run in it at once; it exits after "
        "serve.idle_exit seconds (600) without one. `ok daemon status` shows it, `ok daemon "
        "stop` stops it; `ok config set serve.auto false` or OK_NO_DAEMON=1 keeps each "
        "command in its own process. (said once)",
        file=sys.stderr,
        flush=True,
    )
    return True


def _failed(cache: Path, pid: int | None, why: str = "") -> None:
    with contextlib.suppress(OSError):
        (cache / FAILED).write_text(f"{pid}\n")
    if not why:
        why = _last_line(cache / LOG) or "it ended at once"
    print(
        f"ok: the folder's resident process could not start ({why}); commands run in their "
        f"own process, and none is started for {RETRY_AFTER / 60:g} min (its log: "
        f"{cache / LOG})",
        file=sys.stderr,
        flush=True,
    )


def _last_line(log: Path) -> str:
    """The last line of the log that says something, shortened."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = [x.strip() for x in f.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    said = [x for x in lines if x]
    if not said:
        return ""
    last = said[-1]
    with contextlib.suppress(ValueError, AttributeError):
        event = json.loads(last)
        last = str(event.get("error") or event.get("event") or last)
    return last[:200]


def _held(path: Path) -> bool:
    """Someone holds the lock file `path` (a resident process lives)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def claim(root: Path) -> dict[str, Any] | None:
    """What `.ok/serve.json` says, if anything."""
    try:
        record = json.loads((root / ".ok" / "serve.json").read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _foreign(root: Path) -> bool:
    record = claim(root)
    pid = None if record is None else record.get("pid")
    return isinstance(pid, int) and pid > 0 and routing.is_server(pid, record or {})


def owner(root: Path) -> int | None:
    """The pid of the live server of ours (resident or `ok serve`) that owns the folder and
    takes commands, or None."""
    record = claim(root)
    pid = None if record is None else record.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or not record or "socket" not in record:
        return None
    return pid if routing.is_own_server(pid, record) else None


def resident_pid(root: Path) -> int | None:
    """The pid of the folder's resident process of ours, starting, serving or on its way
    out; None when there is none."""
    path = root / ".ok" / "cache" / RUN_LOCK
    if not _held(path):
        return None
    try:
        pid = int(path.read_text().strip() or 0)
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        uid = Path(f"/proc/{pid}/status").stat().st_uid
    except (OSError, ValueError):
        return None
    return pid if b"--resident" in cmd and uid == os.getuid() else None


def stop(root: Path, within: float = STOP_WITHIN) -> int | None:
    """Stop the folder's resident process and wait for it to end: its pid; None when
    there was none. TimeoutError when it did not end `within` seconds."""
    pid = resident_pid(root)
    if pid is None:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + within
    while _held(root / ".ok" / "cache" / RUN_LOCK):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the resident process (pid {pid}) did not end in {within:g} s")
        time.sleep(0.05)
    return pid


def listed(ok_dir: Path | None = None) -> list[dict[str, Any]]:
    """This user's resident processes, each as its entry beside its socket says (root,
    pid, since, idle_exit, commands, last_active) and its memory (rss_mb). Entries of
    processes that are gone are removed."""
    out = []
    dirs = list(routing.socket_dirs(Path("/nonexistent/.ok")))  # this user's own
    if ok_dir is not None and (ok_dir / "run").is_dir():  # the folder's, never made here
        dirs.append(ok_dir / "run")
    for d in dict.fromkeys(dirs):
        for entry in sorted(d.glob("serve-*.json")):
            try:
                info = json.loads(entry.read_text())
                root = Path(info["root"])
                pid = int(info["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            record = claim(root)
            if record is None or record.get("pid") != pid or not routing.is_own_server(pid, record):
                if routing.process_stamp(pid) is None:  # gone without cleaning up
                    with contextlib.suppress(OSError):
                        entry.unlink()
                continue
            out.append({**info, "rss_mb": _rss_mb(pid)})
    return out


def _rss_mb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
