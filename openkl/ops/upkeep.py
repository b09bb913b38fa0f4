"""The folder itself: create it, bring its graph in line with the files, check it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from typing_extensions import TypedDict

from ..collect import doctor as doctor_mod
from ..entities import consolidation
from ..errors import BadInput, OkError
from ..files.folder import Folder, iso
from ..graph.indexing import open_graph, open_postgres
from ..records import Check, FolderInitialized, WatchState
from ..sync import indexer, pg_sync


@dataclass(frozen=True)
class Initialized:
    """A knowledge folder `init_folder` made, or found already there."""

    folder: Folder
    created: bool

    def as_dict(self) -> FolderInitialized:
        return {"root": str(self.folder.root), "created": self.created}


def init_folder(directory: Path, domain: str | None = None, *, what: str) -> Initialized:
    """Create a knowledge folder (idempotent) and its graph, and log it when it is new.

    There is no folder, so no writer lock, before this runs: it takes the lock itself,
    named `what`, to create the graph."""
    existed = (directory / ".ok").is_dir()
    f = Folder.init(directory, domain)
    with f.write_lock(what), open_graph(f, write=True):
        pass
    if not existed:
        f.log_op("init", root=str(f.root))
    return Initialized(folder=f, created=not existed)


class About(TypedDict):
    """What a folder says about itself: a description and free metadata."""

    description: str | None
    metadata: dict[str, Any]


def about(folder: Folder) -> About:
    """The folder's description and metadata, from `.ok/config.yml`."""
    meta = folder.config.get("metadata")
    return {
        "description": folder.setting("description"),
        "metadata": dict(meta) if isinstance(meta, dict) else {},
    }


def describe(folder: Folder, changes: Mapping[str, Any]) -> About:
    """Change the folder's `description` (None: remove it) and `metadata` (merged into what
    is there: a key given None is removed) in `.ok/config.yml`, and log it. Other keys are
    refused. The caller holds the writer lock."""
    unknown = sorted(set(changes) - {"description", "metadata"})
    if unknown:
        raise BadInput(
            f"a folder's {', '.join(unknown)} cannot be changed here",
            "change description or metadata",
        )
    meta = changes.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        raise BadInput("metadata must be a mapping", 'send an object, e.g. {"team": "ops"}')
    data = folder.config_now()
    if "description" in changes:
        if changes["description"] is None:
            data.pop("description", None)
        else:
            data["description"] = str(changes["description"])
    if meta:
        merged = dict(data.get("metadata") or {})
        for k, v in meta.items():
            if v is None:
                merged.pop(str(k), None)
            else:
                merged[str(k)] = v
        if merged:
            data["metadata"] = merged
        else:
            data.pop("metadata", None)
    folder.write_config(data)
    now = about(folder)
    folder.log_op("describe", **now)
    return now


def index(folder: Folder, rebuild: bool = False) -> indexer.SyncReport:
    """Build the graph from the files (`rebuild`: from scratch) and log it. The caller holds
    the writer lock."""
    rep = indexer.sync(folder, rebuild=rebuild)
    folder.log_op("index", rebuild=rebuild, docs=len(rep.docs_added), notes=len(rep.notes_added))
    return rep


def publish(folder: Folder, backend: str, take_over: bool = False) -> pg_sync.Published:
    """Build the folder's stack in the PostgreSQL graph at `backend` from the files, and log
    it; a stack holding another folder's rows is refused unless `take_over`. The caller
    holds the writer lock."""
    with open_postgres(folder, backend, write=True, who="ok index --backend") as g:
        rep = pg_sync.publish(folder, g, take_over)
    folder.log_op("publish", stack=rep.stack, docs=rep.docs, chunks=rep.chunks, notes=rep.notes)
    return rep


def sync_postgres(folder: Folder, backend: str, take_over: bool = False) -> indexer.SyncReport:
    """Bring the folder's stack in the PostgreSQL graph at `backend` in line with the files,
    writing only what changed, and log it; a stack holding another folder's rows is
    refused unless `take_over`. The caller holds the writer lock."""
    with open_postgres(folder, backend, write=True, who="ok sync --backend") as g:
        rep = pg_sync.sync(folder, g, take_over)
    if rep.changed:
        folder.log_op("sync_postgres", **rep.as_dict())
    return rep


def sync(folder: Folder) -> indexer.SyncReport:
    """Bring the graph up to date with the files, and log what changed. The caller holds the
    writer lock."""
    rep = indexer.sync(folder)
    if rep.changed:
        folder.log_op(
            "sync",
            docs_added=rep.docs_added,
            docs_removed=rep.docs_removed,
            notes_added=rep.notes_added,
            notes_updated=rep.notes_updated,
            notes_removed=rep.notes_removed,
        )
    return rep


# what a watcher leaves alone: derived or private to ok, and half-written temp files
_UNWATCHED = (".ok", ".git", "graph", "memories/topics")


def _watched(folder: Folder, path: str) -> bool:
    try:
        rel = Path(path).relative_to(folder.root).as_posix()
    except ValueError:
        return False
    name = rel.rsplit("/", 1)[-1]
    if name.startswith(".") and name.endswith(".tmp"):
        return False
    return not any(rel == d or rel.startswith(d + "/") for d in _UNWATCHED)


# a failed sync is tried again, and a watch that broke is set up again, after 1, 2, 4 …
# seconds, at most a minute
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0


class WatchHealth:
    """How a folder's watch is doing, as the watch itself records it: read by `/ready`,
    `ok status` and the server's metrics. Safe to read from other threads.

    Failures close together are a streak, and each waits twice as long as the one before;
    a streak ends once a failure comes more than `2 * BACKOFF_MAX` seconds after the last
    one (a watch that breaks on every change of one odd file is not set up again each
    second, though each time it works again in between)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: WatchState = _well()
        self._retry_at = 0.0
        self._streak = 0
        self._last = -1e9  # when the last failure was (monotonic)

    def failed(self, what: str, error: BaseException) -> float:
        """Record a failure of `what` (`watch` or `sync`); the seconds to wait before the
        next try."""
        with self._lock:
            now = time.monotonic()
            self._streak = self._streak + 1 if now - self._last < 2 * BACKOFF_MAX else 1
            self._last = now
            delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** min(self._streak - 1, 16))
            self._state = {
                "failing": what,
                "error": _said(error),
                "since": self._state["since"] or iso(),
                "failures": self._streak,
                "retry_in": delay,
            }
            self._retry_at = now + delay
            return delay

    def recovered(self) -> None:
        """It works again (the streak goes on, should it fail again soon)."""
        with self._lock:
            self._state = _well()

    def due(self) -> bool:
        """Whether a failed sync is to be tried again now."""
        with self._lock:
            return self._state["failing"] == "sync" and time.monotonic() >= self._retry_at

    @property
    def state(self) -> WatchState:
        with self._lock:
            out = dict(self._state)
            if out["failing"]:
                out["retry_in"] = round(max(0.0, self._retry_at - time.monotonic()), 1)
            return cast(WatchState, out)


def _well() -> WatchState:
    return {"failing": None, "error": None, "since": None, "failures": 0, "retry_in": 0.0}


def _said(error: BaseException) -> str:
    """An error in one line (an unexpected one named by its type)."""
    text = str(error).splitlines()[0] if str(error) else ""
    return text if isinstance(error, OkError) else f"{type(error).__name__}: {text}"


# the watches this process runs, by folder root: a routed `ok status` reads them
_watches: dict[Path, WatchHealth] = {}


def watch_state(folder: Folder) -> WatchState | None:
    """How the watch of `folder` in this process is doing; None when none runs here."""
    health = _watches.get(folder.root)
    return health.state if health is not None else None


def watch(
    folder: Folder,
    on_sync: Callable[[indexer.SyncReport | OkError], None],
    *,
    stop: threading.Event | None = None,
    debounce_ms: int = 500,
    writing: Callable[[], AbstractContextManager[object]] | None = None,
    initial: bool = False,
    ours: Callable[[set[str]], bool] | None = None,
    health: WatchHealth | None = None,
) -> None:
    """Sync whenever files of the folder change (an editor, `git pull`), a burst of changes
    once `debounce_ms` after it settles, until `stop` is set; `on_sync` gets each report, or
    the error a sync ended with (the watch goes on). With `initial`, sync once as soon as
    the watch is set up, so no change between that sync and the watch is missed. Takes the
    writer lock for each sync (or what `writing` gives). A burst of which `ours` says, once
    the writer lock is held, that this process made every change (and indexed it) needs no
    sync.

    Nothing ends the watch but `stop`: a sync that fails, however, is tried again after a
    pause that doubles each time (`BACKOFF_FIRST` up to `BACKOFF_MAX` seconds), and a watch
    that breaks (watchfiles cannot read a name that is not UTF-8, say) is set up again after
    such a pause and syncs then, for what changed meanwhile was not seen. `health` (also
    what `watch_state` gives) says how it is doing."""
    health = health or WatchHealth()
    _watches[folder.root] = health
    stop = stop or threading.Event()
    run = _Run(folder, on_sync, stop, debounce_ms, writing, ours, health)
    try:
        first = initial
        while not stop.is_set():
            try:
                # it returns once `stop` is set, or on Ctrl-C (which ends the watch)
                return run.once(first)
            except Exception as e:  # noqa: BLE001 - watchfiles itself failed: start again
                delay = health.failed("watch", e)
                if not run.started and not run.polling:
                    # the system's watch cannot even be set up here (a directory whose name
                    # is not UTF-8 stops it): look at the files every few seconds instead
                    run.polling = True
                how = "polling the files " if run.polling else ""
                on_sync(
                    OkError(
                        f"the watch of {folder.root} failed ({_said(e)})",
                        f"watching again {how}in {delay:g}s, and syncing then",
                    )
                )
                if stop.wait(delay):
                    return
                first = True
    finally:
        if _watches.get(folder.root) is health:
            del _watches[folder.root]


POLL_MS = 2000  # how often a watch that polls looks at the files


@dataclass
class _Run:
    """What one watch of a folder runs with, and how its last run of watchfiles went."""

    folder: Folder
    on_sync: Callable[[indexer.SyncReport | OkError], None]
    stop: threading.Event
    debounce_ms: int
    writing: Callable[[], AbstractContextManager[object]] | None
    ours: Callable[[set[str]], bool] | None
    health: WatchHealth
    polling: bool = False  # the system's watch failed to start: poll
    started: bool = False  # the last run got as far as watching

    def once(self, first: bool) -> None:
        """One run of watchfiles, until `stop` (or until it raises)."""
        import watchfiles

        folder, health = self.folder, self.health
        hold = self.writing or (lambda: folder.write_lock("ok sync --watch"))
        self.started = False
        for changes in watchfiles.watch(
            folder.root,
            watch_filter=lambda _change, path: _watched(folder, path),
            debounce=self.debounce_ms,
            stop_event=self.stop,
            raise_interrupt=False,
            yield_on_timeout=True,  # the first (empty) yield: the watch is set up
            rust_timeout=1000,  # and then one a second: a failed sync is tried again
            force_polling=self.polling,
            poll_delay_ms=POLL_MS,
        ):
            self.started = True
            retry = health.due()
            if not changes and not first and not retry:
                continue
            first = False
            try:
                with hold():
                    ours = self.ours
                    if changes and not retry and ours is not None and ours({p for _, p in changes}):
                        continue
                    rep = sync(folder)
            except Exception as e:  # noqa: BLE001 - any failed sync: reported, tried again
                delay = health.failed("sync", e)
                err = e if isinstance(e, OkError) else OkError(f"the sync failed: {_said(e)}")
                more = f"{err.hint}; " if err.hint else ""
                self.on_sync(OkError(err.message, f"{more}trying again in {delay:g}s"))
                continue
            health.recovered()
            self.on_sync(rep)


def doctor(root: str | None) -> list[Check]:
    """`ok doctor`'s checks of the folder at `root` (or the one found from here), each
    {check, ok, detail, fix}; it need not be a working folder, which is the point."""
    return doctor_mod.run_checks(root)


def consolidating_later(root: Path, wake: Callable[[], None]) -> AbstractContextManager[None]:
    """While the block runs, writes of notes to the folder at `root` in this process leave
    their entities owed and call `wake()`, for `pay_entities` after them."""
    return consolidation.consolidating_later(root, wake)


def pay_entities(folder: Folder) -> int:
    """Recompute the entities that writes of notes left owed (`consolidating_later`); the
    caller holds the writer lock. How many entity keys were owed."""
    with open_graph(folder, write=True) as g:
        return consolidation.pay(folder, g)
