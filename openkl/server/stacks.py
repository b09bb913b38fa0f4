"""The folders a server owns: each one's graph kept open, and one writer at a time."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import ops
from ..errors import NotFound, OkError
from ..folder import Folder, atomic_write, iso, open_folder, stacks_of
from ..graph import Graph
from ..indexing import embedder


@dataclass
class Served:
    """One served folder (a stack)."""

    name: str
    folder: Folder
    # writes of this process queue here before taking the folder's writer lock, which is
    # re-entrant per thread and so does not order this process's own threads
    writer: threading.Lock = field(default_factory=threading.Lock)
    _waiting: list[None] = field(default_factory=list)  # one item per queued write

    def queued(self) -> int:
        """Writes waiting for this stack's writer."""
        return len(self._waiting)

    @contextlib.contextmanager
    def writing(self, what: str) -> Iterator[None]:
        """Hold this stack's writer slot and the folder's writer lock."""
        self._waiting.append(None)  # list operations are atomic: no lock to count
        try:
            self.writer.acquire()
        finally:
            self._waiting.pop()
        try:
            with self.folder.write_lock(f"ok serve {what}"):
                yield
        finally:
            self.writer.release()


class Stacks:
    """The served folders by name, open from `open()` until `close()`."""

    def __init__(self, roots: Sequence[str | Path | None], url: str = "") -> None:
        folders = stacks_of([open_folder(r) for r in (roots or [None])])
        self.by_name = {name: Served(name, f) for name, f in folders.items()}
        self.url = url
        self.socket: Path | None = None  # where other `ok` commands are run (server.route)
        self.is_open = False
        self._open = contextlib.ExitStack()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def open(self) -> None:
        """Bring each folder's index in line with its files, then keep its graph open and
        the model loaded. Once: a second call does nothing."""
        if self.is_open:
            return
        self.is_open = True
        for st in self.by_name.values():
            with st.writing("start"):
                ops.sync(st.folder)
            self._open.enter_context(
                Graph.resident(
                    st.folder.kuzu_dir, buffer_pool_mb=st.folder.setting("graph.buffer_pool_mb")
                )
            )
            embedder(st.folder).embed_query("warm up")
            self._open.callback(_unclaim, st.folder)
            _claim(st.folder, self.url, self.socket)

    def start_background(self, watch: bool, refresh_every: float) -> None:
        """Per stack, a thread that syncs after files change on disk (`watch`) and one that
        runs the refreshes that are due every `refresh_every` seconds (0: none). They stop
        on `close()`."""
        for st in self.by_name.values():
            if watch:
                self._thread(st, "watch", functools.partial(self._watch, st))
            if refresh_every > 0:
                self._thread(st, "refresh", functools.partial(self._refresh, st, refresh_every))

    def _thread(self, st: Served, what: str, run: Callable[[], None]) -> None:
        t = threading.Thread(target=run, name=f"ok-serve-{what}-{st.name}", daemon=True)
        t.start()
        self._threads.append(t)

    def _watch(self, st: Served) -> None:
        def said(rep: object) -> None:
            if isinstance(rep, OkError):
                _log(stack=st.name, event="watch.failed", error=str(rep))
            elif getattr(rep, "changed", False):
                _log(stack=st.name, event="watch.synced", **_counts(rep))

        ops.watch(
            st.folder, said, stop=self._stop, writing=lambda: st.writing("watch"), initial=True
        )

    def _refresh(self, st: Served, every: float) -> None:
        while not self._stop.wait(every):
            try:
                rep = ops.refresh(st.folder, due=True)
            except OkError as e:
                _log(stack=st.name, event="refresh.failed", error=str(e))
                continue
            if rep.changed or rep.added or rep.removed or rep.failed:
                _log(stack=st.name, event="refresh.done", **rep.as_dict())

    def close(self) -> None:
        """Stop the background threads, finish the open connections and close every graph
        (again: nothing)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        self._threads.clear()
        self._open.close()
        self.is_open = False

    def get(self, name: str | None) -> Served:
        """The stack called `name`, or the first one when no name is given."""
        if not name:
            return next(iter(self.by_name.values()))
        if name not in self.by_name:
            raise NotFound(f"no stack named {name!r}", "stacks: " + ", ".join(self.by_name))
        return self.by_name[name]


def _claim(folder: Folder, url: str, sock: Path | None) -> None:
    """Say in the folder that this process serves it: other `ok` commands then run on this
    server (through `sock`) rather than wait for a lock the server never lets go."""
    folder.refuse_if_served()  # another live server has it
    record: dict[str, object] = {"pid": os.getpid(), "url": url, "since": iso()}
    if sock is not None:
        record["socket"] = str(sock)
    atomic_write(folder.served_path, json.dumps(record) + "\n")


def _unclaim(folder: Folder) -> None:
    with contextlib.suppress(FileNotFoundError):
        folder.served_path.unlink()


def _counts(rep: object) -> dict[str, int]:
    d = rep.as_dict()  # type: ignore[attr-defined]
    return {k: len(v) for k, v in d.items() if isinstance(v, list) and v}


def _log(**fields: object) -> None:
    """A line of the server's log about its own work (the access log's shape)."""
    print(json.dumps({"ts": iso(), **fields}, default=str), file=sys.stderr, flush=True)
