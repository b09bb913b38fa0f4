"""A folder's resident process: what the first `ok` command in a folder that no server owns
starts (openkl.cli.spawn), and `ok daemon start`. It is `ok serve` without HTTP: it keeps
the folder's graph open and the model loaded, runs the other `ok` commands of its user on
the folder through the same private socket and the same checks (openkl.server.command_socket), and,
as `ok serve` does, syncs after files change on disk and runs the refreshes that are due.

It exits after `serve.idle_exit` seconds without a command; when told to (SIGTERM: `ok
daemon stop`, or an `ok serve` taking the folder over); and as soon as the folder's claim
(`.ok/serve.json`) no longer names it, the claim removed or the folder gone: it never
outlives its claim. While it lives it holds `.ok/cache/resident.run` locked, so that a
second one started at the same moment waits for it to go, or gives way."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..cli.argv import command_at
from ..files.folder import Folder, atomic_write, iso, open_folder
from . import environ
from .command_socket import Router
from .stacks import Stacks

CHECK_EVERY = 0.5  # seconds between its looks at its claim and its idle time
GIVE_WAY_AFTER = 30.0  # seconds it waits for another resident process of the folder to go
RUN_LOCK = "resident.run"


def run_lock_path(folder_ok_dir: Path) -> Path:
    """The file a folder's resident process holds locked while it lives."""
    return folder_ok_dir / "cache" / RUN_LOCK


def serve(root: str | Path | None, run: Callable[[list[str]], int]) -> int:
    """Be the folder's resident process until it is idle, stopped or unclaimed; the exit
    code (0: it ran, or another one had the folder; 2: it could not start)."""
    environ.hide()  # as `ok serve`: trigger commands cannot read this process's secrets
    folder = open_folder(root)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda _signum, _frame: stop.set())
    with _run_lock(folder, stop) as mine:
        if not mine:
            _log(event="resident.gave_way", root=str(folder.root))
            return 0
        return _serve(folder, run, stop)


def _serve(folder: Folder, run: Callable[[list[str]], int], stop: threading.Event) -> int:
    idle_exit = float(folder.setting("serve.idle_exit"))
    # a killed server's claim goes now, with its socket: the name that this one's takes
    served = folder.server()
    if served is not None:
        _log(event="resident.gave_way", root=str(folder.root), server=served.get("pid"))
        return 0
    stacks = Stacks([folder.root], resident={"idle_exit": idle_exit})

    def settled(argv: list[str]) -> int:
        if reads_entities(argv):  # what `ok mem add` left owed is recomputed first
            stacks.settle(stacks.get(None))
        return run(argv)

    router = Router(folder.ok_dir, settled, roots=lambda: [folder.root])
    listed: Path | None = None
    try:
        router.start()
        stacks.socket = router.path
        stacks.open()  # synced, the graph open, the model loaded, the folder claimed
        if stop.is_set():
            return 0
        stacks.start_background(
            watch=folder.setting("serve.watch"),
            refresh_every=folder.setting("serve.refresh_every"),
        )
        assert router.path is not None
        listed = router.path.with_suffix(".json")
        since = iso()
        _log(event="resident.started", root=str(folder.root), socket=str(router.path))
        why = _wait(folder, router, stop, idle_exit, listed, since)
        _log(event="resident.stopping", reason=why)
    finally:
        stacks.stopping()
        router.stop()
        router.close()
        stacks.close()
        if listed is not None:
            with contextlib.suppress(OSError):
                listed.unlink()
    return 0


# commands that read no entity, which run at once while entities are owed (Stacks.settle)
NO_ENTITIES = {
    ("search",), ("grep",), ("open",), ("events",), ("config",), ("cite",), ("trigger",),
    ("mem", "add"), ("mem", "list"), ("mem", "show"), ("mem", "search"), ("mem", "topics"),
    ("mem", "update"), ("mem", "edit"), ("mem", "delete"), ("mem", "restore"), ("mem", "gc"),
    ("mem", "dedupe"),
    ("store", "list"), ("store", "show"), ("store", "search"), ("store", "history"),
}  # fmt: skip


def reads_entities(argv: list[str]) -> bool:
    """Whether the command `argv` may read entities (anything not known not to)."""
    at = command_at(argv)
    if at is None:
        return False
    return not any(tuple(argv[at : at + len(c)]) == c for c in NO_ENTITIES)


def _wait(
    folder: Folder,
    router: Router,
    stop: threading.Event,
    idle_exit: float,
    listed: Path,
    since: str,
) -> str:
    """Until a reason to stop, which it returns; meanwhile it keeps its entry in the list
    of this user's resident processes (`ok daemon status`) up to date."""
    said: tuple[int, bool] | None = None
    while True:
        now = (router.commands, router.busy())
        if now != said:
            said = now
            entry = {
                "root": str(folder.root),
                "pid": os.getpid(),
                "since": since,
                "idle_exit": idle_exit,
                "commands": router.commands,
                "last_active": iso() if router.commands else None,
            }
            with contextlib.suppress(OSError):
                atomic_write(listed, json.dumps(entry) + "\n")
        if stop.wait(CHECK_EVERY):
            return "asked to stop"
        if not _claimed(folder):
            return "its claim of the folder is gone"
        if idle_exit > 0 and router.close_if_idle(idle_exit):
            return f"no command for {idle_exit:g} s"


def _claimed(folder: Folder) -> bool:
    """The folder's claim still names this process."""
    try:
        info = json.loads(folder.served_path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and info.get("pid") == os.getpid()


@contextlib.contextmanager
def _run_lock(folder: Folder, stop: threading.Event) -> Iterator[bool]:
    """Hold the folder's run lock (True), waiting a while for another resident process
    that is on its way out; False when another one keeps it."""
    path = run_lock_path(folder.ok_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + GIVE_WAY_AFTER
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if stop.is_set() or time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield True
    finally:
        os.close(fd)


def _log(**fields: object) -> None:
    """A line of its log (`.ok/cache/resident.log`; the shape of `ok serve`'s)."""
    print(json.dumps({"ts": iso(), **fields}, default=str), file=sys.stderr, flush=True)
