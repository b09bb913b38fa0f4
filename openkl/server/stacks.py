"""The folders a server owns: each one's graph kept open, and one writer at a time."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import ops
from ..errors import BadInput, LockBusy, NotFound, OkError
from ..files import crash
from ..files.folder import (
    LOCK_NOTICE_AFTER,
    Folder,
    Signature,
    atomic_write,
    iso,
    open_folder,
    queue_writes,
    recording_writes,
    signature,
    stacks_of,
    writer_turn,
)
from ..files.routing import process_stamp
from ..graph import Graph
from ..graph.indexing import embedder
from ..ops.freshness import RefreshReport
from ..ops.upkeep import WatchHealth
from ..records import WatchState
from .backend import Backend
from .metrics import Metrics


class Conflict(OkError):
    """What a request would make is there already (409)."""

    http_status = 409


_OWN_MAX = 100_000  # files a stack remembers writing (past that it forgets them all)
# seconds without a write before owed entities are recomputed: a loop of `ok mem add` runs
# its writes a few tenths of a second apart, and one that came during the recomputation
# would wait for it (a command that reads entities hurries it: `settle`)
OWED_PAUSE = 2.0
OWED_AT_MOST = 60.0  # seconds entities stay owed, however the writes go on

# a stack's name is also its folder's: no path in it, nothing hidden, nothing odd
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_name(name: str) -> str:
    """`name`, if it can name a new stack and its folder."""
    if not _NAME.fullmatch(name) or ".." in name:
        raise BadInput(
            f"{name[:80]!r} cannot name a stack",
            "use up to 64 letters, digits and - _ . (starting with a letter or digit, "
            "no ..), e.g. team-notes",
        )
    return name


def check_served(name: str, folder: Folder) -> str:
    """`name`, the stack name of `folder`, if it can name a stack as `check_name` says (a
    folder's `domain:` is as free as a name given over HTTP is not)."""
    try:
        return check_name(name)
    except BadInput as e:
        said = (
            "its `domain:` in .ok/config.yml"
            if folder.setting("domain")
            else "its directory's name, as it has no `domain:` in .ok/config.yml"
        )
        raise BadInput(
            f"{folder.root} cannot be served: its stack name {name[:80]!r} ({said}) is not "
            "a stack name",
            "set `domain:` in its .ok/config.yml to up to 64 letters, digits and - _ . "
            "(starting with a letter or digit, no ..), e.g. team-notes",
        ) from e


@dataclass
class Served:
    """One served folder (a stack)."""

    name: str
    folder: Folder
    # writes of this process queue here before taking the folder's writer lock, which is
    # re-entrant per thread and so does not order this process's own threads
    writer: threading.Lock = field(default_factory=threading.Lock)
    _waiting: list[None] = field(default_factory=list)  # one item per queued write
    stop: threading.Event = field(default_factory=threading.Event)  # its threads end
    threads: list[threading.Thread] = field(default_factory=list)
    held: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)  # graph, claim
    # its graph in PostgreSQL, synced after every write (`ok serve --backend`)
    backend: Backend | None = None
    # the files its writes left (real path -> `signature`), so that the watch does not sync
    # after them: each was indexed by the write that made it
    own: dict[str, Signature | None] = field(default_factory=dict)
    # how its watch is doing (`/ready` says when it fails)
    health: WatchHealth = field(default_factory=WatchHealth)
    # entities that writes of notes left to recompute (a resident process's
    # `consolidating_later`): `owed` wakes the thread that pays them, `settled` is set
    # while nothing is owed; `wrote` is when the last write ended (monotonic)
    owed: threading.Event = field(default_factory=threading.Event)
    settled: threading.Event = field(default_factory=threading.Event)
    hurry: threading.Event = field(default_factory=threading.Event)
    wrote: float = 0.0

    def queued(self) -> int:
        """Writes waiting for this stack's writer."""
        return len(self._waiting)

    @contextlib.contextmanager
    def writing(
        self, what: str, timeout: float | None = None, notice: bool = False
    ) -> Iterator[None]:
        """Hold this stack's writer slot and the folder's writer lock. The slot is waited
        for as long as the writes before it take (up to `timeout` s when given; `notice`:
        say on stderr, once, when the wait is long)."""
        got = [False]  # set the moment the slot is taken: an interrupt after it releases it
        try:
            self._take(timeout, notice, got)
            with (
                writer_turn(self.folder.root),
                self.folder.write_lock(f"ok serve {what}"),
                recording_writes() as wrote,
            ):
                yield
                if self.backend is not None and what not in ("start", "stop"):
                    self.backend.after_write()
            # only a write that ended well: after one that failed, the watch syncs
            if len(self.own) + len(wrote) > _OWN_MAX:
                self.own.clear()
            self.own.update(wrote)
        finally:
            if got[0]:
                self.wrote = time.monotonic()
                self.writer.release()

    def _take(self, timeout: float | None, notice: bool, got: list[bool]) -> None:
        """Take the writer slot (`got[0]` says it is taken). In steps: an interrupt (a
        routed command's Ctrl-C) lands between them."""
        self._waiting.append(None)  # list operations are atomic: no lock to count
        try:
            started = time.monotonic()
            told = not notice
            while True:
                if self.writer.acquire(timeout=0.1):
                    got[0] = True
                    return
                waited = time.monotonic() - started
                if timeout is not None and waited >= timeout:
                    raise LockBusy(
                        f"the folder is locked by another writer: {self.folder.lock_holder()}",
                        "wait for it to finish, or raise OK_LOCK_TIMEOUT",
                    )
                if not told and waited >= LOCK_NOTICE_AFTER:
                    print(
                        f"waiting for the writer lock, behind the server's writes "
                        f"({self.queued()} queued; now: {self.folder.lock_holder()})…",
                        file=sys.stderr,
                        flush=True,
                    )
                    told = True
        finally:
            self._waiting.pop()

    def routed(self, what: str, timeout: float | None) -> contextlib.AbstractContextManager[None]:
        """The writer queue of the folder for this process's other writes (routed commands,
        `ok mcp` in the server): `writing`, saying so when the wait is long."""
        return self.writing(f"{what.removeprefix('ok ')} (routed)", timeout, notice=True)

    def made_all(self, paths: set[str]) -> bool:
        """Whether these paths are as this stack's own writes left them (call it holding the
        writer, so that no write of its own is half done)."""
        for p in paths:
            real = os.path.realpath(p)
            if real not in self.own or self.own[real] != signature(real):
                return False
        return True


class Stacks:
    """The served folders by name, open from `open()` until `close()`; stacks can be added
    and dropped while they are open."""

    def __init__(
        self,
        roots: Sequence[str | Path | None],
        url: str = "",
        backend: str | None = None,
        resident: dict[str, object] | None = None,
        take_over: bool = False,
    ) -> None:
        folders = stacks_of([open_folder(r) for r in (roots or [None])])
        for name, f in folders.items():
            check_served(name, f)
        self.backend = backend  # a PostgreSQL database for every stack, else graph.backend
        # a stack in PostgreSQL that holds another folder's rows is replaced, not refused
        self.take_over = take_over
        # replaced, never changed in place: requests iterate over it while stacks come and go
        self.by_name = {name: self._served(name, f) for name, f in folders.items()}
        self.home = next(iter(folders.values()))  # whose serve.* settings apply
        self.url = url
        self.socket: Path | None = None  # where other `ok` commands are run (server.route)
        # a resident process started by a command (server.resident): what its claims say of
        # it (None: `ok serve`)
        self.resident = resident
        self.is_open = False
        self.metrics = Metrics()
        self._changing = threading.RLock()  # one create, add or drop at a time
        self._background: tuple[bool, float] | None = None
        for st in self.by_name.values():
            self.metrics.writers_waiting.labels(st.name).set_function(st.queued)

    def _served(self, name: str, folder: Folder) -> Served:
        uri = self.backend or folder.setting("graph.backend")
        backend = Backend(folder, uri, take_over=self.take_over) if uri else None
        return Served(name, folder, backend=backend)

    def open(self) -> None:
        """Bring each folder's index in line with its files, then keep its graph open and
        the model loaded. Once: a second call does nothing."""
        if self.is_open:
            return
        self.is_open = True
        for st in self.by_name.values():
            self._open_one(st)

    def _open_one(self, st: Served) -> None:
        with st.writing("start"), crash.paused():
            rep = ops.sync(st.folder)
            if st.backend is not None:
                st.held.callback(st.backend.close)
                synced = st.backend.open()
                _log(stack=st.name, event="backend.open", **st.backend.describe())
                if synced is not None and synced.changed:
                    _log(stack=st.name, event="backend.synced", **_counts(synced))
        self.metrics.chunks_indexed.labels(st.name).inc(rep.chunks_added)
        st.held.enter_context(
            Graph.resident(
                st.folder.kuzu_dir, buffer_pool_mb=st.folder.setting("serve.buffer_pool_mb")
            )
        )
        embedder(st.folder).warm()
        # this process's other writes (routed commands) queue behind the server's own
        st.held.enter_context(queue_writes(st.folder.root, st.routed))
        st.settled.set()
        if self.resident is not None:  # `ok mem add` answers first, its entities follow
            st.held.enter_context(ops.consolidating_later(st.folder.root, st.owed.set))
        st.held.callback(_unclaim, st.folder)
        _claim(st.folder, self.url, self.socket, self.resident)

    def start_background(self, watch: bool, refresh_every: float) -> None:
        """Per stack, a thread that syncs after files change on disk (`watch`) and one that
        runs the refreshes that are due every `refresh_every` seconds (0: none), one that scans
        it for triggers every triggers.scan_every seconds (its own setting; 0: none), and one
        that counts the triggers fired. They stop on `close()`; stacks added later get them too."""
        self._background = (watch, refresh_every)
        for st in self.by_name.values():
            self._start_one(st)

    def _start_one(self, st: Served) -> None:
        if self._background is None:
            return
        watch, refresh_every = self._background
        if watch:
            self._thread(st, "watch", functools.partial(self._watch, st))
        if refresh_every > 0:
            self._thread(st, "refresh", functools.partial(self._refresh, st, refresh_every))
        if self.resident is not None:
            self._thread(st, "entities", functools.partial(self._pay_owed, st))
        scan_every = float(st.folder.setting("triggers.scan_every"))
        if scan_every > 0:
            self._thread(st, "trigger-scan", functools.partial(self._scan, st, scan_every))
        self._thread(st, "events", functools.partial(self._count_events, st))

    def _thread(self, st: Served, what: str, run: Callable[[], None]) -> None:
        t = threading.Thread(target=run, name=f"ok-serve-{what}-{st.name}", daemon=True)
        t.start()
        st.threads.append(t)

    def failing(self) -> dict[str, WatchState]:
        """The stacks whose watch is failing now (it cannot watch, or its syncs fail), with
        how: `/ready` answers 503 while there are any."""
        out = {}
        for name, st in self.by_name.items():
            state = st.health.state
            if state["failing"]:
                out[name] = state
        return out

    def _watch(self, st: Served) -> None:
        def said(rep: object) -> None:
            if isinstance(rep, OkError):
                stage = st.health.state["failing"] or "sync"
                self.metrics.watch_failures.labels(st.name, stage).inc()
                _log(stack=st.name, event="watch.failed", stage=stage, error=str(rep))
            elif getattr(rep, "changed", False):
                self.metrics.chunks_indexed.labels(st.name).inc(getattr(rep, "chunks_added", 0))
                _log(stack=st.name, event="watch.synced", **_counts(rep))

        ops.watch(
            st.folder,
            said,
            stop=st.stop,
            writing=lambda: st.writing("watch"),
            initial=True,
            ours=functools.partial(self._own_burst, st),
            health=st.health,
        )

    def _pay_owed(self, st: Served) -> None:
        """Recompute the entities that writes of notes left owed, once the writes pause
        (a loop of `ok mem add` is answered note by note, and its entities come once) or
        when a command that reads entities waits for them (`settle`)."""
        while True:
            if not st.owed.wait(timeout=1.0):
                if st.stop.is_set():
                    return
                continue
            st.settled.clear()
            since = time.monotonic()
            while not (st.hurry.is_set() or st.stop.is_set()):
                now = time.monotonic()
                if now - since >= OWED_AT_MOST:
                    break
                if not st.queued() and now - st.wrote >= OWED_PAUSE:
                    break
                st.hurry.wait(0.05)
            st.owed.clear()
            st.hurry.clear()
            try:
                with st.writing("entities"):
                    paid = ops.pay_entities(st.folder)
                if paid:
                    _log(stack=st.name, event="entities.consolidated", keys=paid)
            except OkError as e:  # `ok sync` pays it later
                _log(stack=st.name, event="entities.failed", error=str(e))
            finally:
                if not st.owed.is_set():
                    st.settled.set()

    def settle(self, st: Served, within: float = 300.0) -> None:
        """Wait until no entity of the stack is owed (`_pay_owed` hurried): before a command
        that reads entities."""
        if not st.settled.is_set():
            st.hurry.set()
            deadline = time.monotonic() + within
            # in steps: an interrupt (a routed command's Ctrl-C) lands between them
            while not st.settled.wait(0.1) and time.monotonic() < deadline:
                st.hurry.set()

    def _own_burst(self, st: Served, paths: set[str]) -> bool:
        own = st.made_all(paths)
        self.metrics.watch_bursts.labels(st.name, "own" if own else "synced").inc()
        return own

    def _refresh(self, st: Served, every: float) -> None:
        while not st.stop.wait(every):
            try:
                self.refresh(st, due=True)
            except OkError as e:
                _log(stack=st.name, event="refresh.failed", error=str(e))

    def _scan(self, st: Served, every: float) -> None:
        """A full trigger scan every `every` seconds (triggers.scan_every), through the
        stack's writer; what fires is counted by `_count_events`."""
        while not st.stop.wait(every):
            try:
                with st.writing("trigger scan"):
                    rep = ops.scan_triggers(st.folder)
                if rep["fired"]:
                    _log(stack=st.name, event="trigger.scan", fired=len(rep["fired"]))
            except OkError as e:
                _log(stack=st.name, event="trigger.scan_failed", error=str(e))

    def refresh(self, st: Served, refs: list[str] | None = None, **options: Any) -> RefreshReport:
        """`ok refresh` on a stack, its writes through the stack's writer, its outcomes
        counted (and logged when something happened)."""
        rep = ops.refresh(st.folder, refs, writing=lambda: st.writing("refresh"), **options)
        if not rep.dry_run:
            self.metrics.refreshed(st.name, rep)
        if rep.changed or rep.added or rep.removed or rep.failed:
            _log(stack=st.name, event="refresh.done", **rep.as_dict())
        return rep

    def _count_events(self, st: Served) -> None:
        """Count the triggers that fire, whichever write indexed what fired them, and the
        commands of theirs that fail (they run after the write, in the background)."""
        for ev in ops.follow_events(st.folder, types=list(_FIRES), stop=st.stop):
            self.metrics.trigger_fires.labels(
                st.name, str(ev.get("trigger")), _FIRES[ev["type"]]
            ).inc()

    def stacks_dir(self) -> Path:
        """Where stacks created over HTTP go (serve.stacks_dir of the first folder served)."""
        value = self.home.setting("serve.stacks_dir")
        if not value:
            raise BadInput(
                "this server has no serve.stacks_dir, so it cannot create stacks",
                "set serve.stacks_dir (or OK_SERVE_STACKS_DIR) to a directory and restart "
                "`ok serve`",
            )
        return self.home.root / Path(value).expanduser()  # an absolute path stays itself

    def create(self, name: str, about: dict[str, Any]) -> Served:
        """Make a new folder `name` under `stacks_dir()` (as `ok init`), with this
        description and metadata, and serve it (`add`)."""
        check_name(name)
        with self._changing:
            if name in self.by_name:
                raise Conflict(f"a stack named {name!r} is served already", "choose another name")
            where = self.stacks_dir() / name
            if where.exists() or where.is_symlink():
                raise Conflict(
                    f"{where} exists already",
                    f"choose another name, or serve that folder with `ok serve --root {where}`",
                )
            folder = ops.init_folder(where, name, what="ok serve stacks create").folder
            st = self.add(folder)
            if about.get("description") is not None or about.get("metadata"):
                with st.writing("stacks create"):
                    ops.describe(st.folder, about)
            return st

    def add(self, folder: Folder) -> Served:
        """Serve one more folder, as `open()` and `start_background()` serve each: synced,
        its graph kept open, claimed, its threads started."""
        with self._changing:
            name = check_served(next(iter(stacks_of([folder]))), folder)
            if name in self.by_name:
                raise Conflict(f"a stack named {name!r} is served already", "choose another name")
            st = self._served(name, folder)
            if self.is_open:
                try:
                    self._open_one(st)
                except BaseException:
                    st.held.close()
                    raise
                self._start_one(st)
            self.metrics.writers_waiting.labels(st.name).set_function(st.queued)
            self.by_name = {**self.by_name, name: st}
            return st

    def drop(self, name: str) -> Served:
        """Stop serving a stack: no new request finds it; the writes under way finish, its
        threads stop, its graph is closed once the reads under way end, and its claim is
        released. Its files stay as they are."""
        with self._changing:
            st = self.get(name)
            if len(self.by_name) == 1:
                raise BadInput(
                    f"{name!r} is the last stack this server holds", "stop the server instead"
                )
            self.by_name = {n: s for n, s in self.by_name.items() if n != name}
            self._stop_threads(st)
            with st.writing("stop"):  # a write under way ends first
                self._close_one(st)
            with contextlib.suppress(KeyError):
                self.metrics.writers_waiting.remove(st.name)
            return st

    def _stop_threads(self, st: Served) -> None:
        st.stop.set()
        for t in st.threads:
            t.join(timeout=30)
        st.threads.clear()

    def _close_one(self, st: Served) -> None:
        self._stop_threads(st)
        st.held.close()

    def stopping(self) -> None:
        """The server begins to stop: background threads and followers end now, before the
        requests under way are waited for."""
        for st in self.by_name.values():
            st.stop.set()

    def close(self) -> None:
        """Stop the background threads, finish the open connections and close every graph
        (again: nothing)."""
        for st in self.by_name.values():
            st.stop.set()
        for st in self.by_name.values():
            self._close_one(st)
        self.is_open = False

    def get(self, name: str | None) -> Served:
        """The stack called `name`, or the first one when no name is given."""
        by_name = self.by_name
        if not name:
            return next(iter(by_name.values()))
        if name not in by_name:
            raise NotFound(f"no stack named {name!r}", "stacks: " + ", ".join(by_name))
        return by_name[name]


# the events that count as trigger fires, and the outcome each stands for
_FIRES = {"trigger_fired": "fired", "trigger_exec_failed": "exec_failed"}


def _claim(
    folder: Folder, url: str, sock: Path | None, resident: dict[str, object] | None = None
) -> None:
    """Say in the folder that this process serves it: other `ok` commands then run on this
    server (through `sock`) rather than wait for a lock the server never lets go.
    `resident`: it is a resident process (`ok daemon`), and this is what it says of itself."""
    folder.refuse_if_served()  # another live server has it
    record: dict[str, object] = {
        "pid": os.getpid(),
        **(process_stamp(os.getpid()) or {}),
        "url": url,
        "since": iso(),
    }
    if sock is not None:
        record["socket"] = str(sock)
    if resident is not None:
        record["resident"] = resident
    atomic_write(folder.served_path, json.dumps(record) + "\n")


def _unclaim(folder: Folder) -> None:
    try:
        info = json.loads(folder.served_path.read_text())
    except FileNotFoundError:
        return
    except (OSError, ValueError):
        info = None
    if isinstance(info, dict) and info.get("pid") not in (None, os.getpid()):
        return  # another process's claim, made after this one's was removed
    with contextlib.suppress(FileNotFoundError):
        folder.served_path.unlink()


def _counts(rep: object) -> dict[str, int]:
    d = rep.as_dict()  # type: ignore[attr-defined]
    return {k: len(v) for k, v in d.items() if isinstance(v, list) and v}


def _log(**fields: object) -> None:
    """A line of the server's log about its own work (the access log's shape)."""
    print(json.dumps({"ts": iso(), **fields}, default=str), file=sys.stderr, flush=True)
