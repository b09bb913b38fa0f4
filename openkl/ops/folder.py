"""The folder itself: create it, bring its graph in line with the files, check it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from .. import doctor as doctor_mod
from .. import indexer, pg_sync
from ..errors import BadInput, OkError
from ..folder import Folder
from ..indexing import open_graph, open_postgres
from ..records import Check, FolderInitialized


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


def publish(folder: Folder, backend: str) -> indexer.Published:
    """Build the folder's stack in the PostgreSQL graph at `backend` from the files, and log
    it. The caller holds the writer lock."""
    with open_postgres(folder, backend, write=True, who="ok index --backend") as g:
        rep = indexer.publish(folder, g)
    folder.log_op("publish", stack=rep.stack, docs=rep.docs, chunks=rep.chunks, notes=rep.notes)
    return rep


def sync_postgres(folder: Folder, backend: str) -> pg_sync.Synced:
    """Bring the folder's stack in the PostgreSQL graph at `backend` in line with the files,
    writing only what changed, and log it. The caller holds the writer lock."""
    with open_postgres(folder, backend, write=True, who="ok sync --backend") as g:
        rep = pg_sync.sync(folder, g)
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


def watch(
    folder: Folder,
    on_sync: Callable[[indexer.SyncReport | OkError], None],
    *,
    stop: threading.Event | None = None,
    debounce_ms: int = 500,
    writing: Callable[[], AbstractContextManager[object]] | None = None,
    initial: bool = False,
    ours: Callable[[set[str]], bool] | None = None,
) -> None:
    """Sync whenever files of the folder change (an editor, `git pull`), a burst of changes
    once `debounce_ms` after it settles, until `stop` is set; `on_sync` gets each report, or
    the error a sync ended with (the watch goes on). With `initial`, sync once as soon as
    the watch is set up, so no change between that sync and the watch is missed. Takes the
    writer lock for each sync (or what `writing` gives). A burst of which `ours` says, once
    the writer lock is held, that this process made every change (and indexed it) needs no
    sync."""
    import watchfiles

    hold = writing or (lambda: folder.write_lock("ok sync --watch"))
    first = True
    for changes in watchfiles.watch(
        folder.root,
        watch_filter=lambda _change, path: _watched(folder, path),
        debounce=debounce_ms,
        stop_event=stop,
        raise_interrupt=False,
        yield_on_timeout=True,  # the first (empty) yield: the watch is set up
        rust_timeout=1000,
    ):
        if not changes and not (first and initial):
            continue
        first = False
        try:
            with hold():
                if changes and ours is not None and ours({path for _, path in changes}):
                    continue
                rep = sync(folder)
        except OkError as e:
            on_sync(e)
            continue
        on_sync(rep)


def doctor(root: str | None) -> list[Check]:
    """`ok doctor`'s checks of the folder at `root` (or the one found from here), each
    {check, ok, detail, fix}; it need not be a working folder, which is the point."""
    return doctor_mod.run_checks(root)
