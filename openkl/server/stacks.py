"""The folders a server owns: each one's graph kept open, and one writer at a time."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import ops
from ..errors import NotFound
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
        self.is_open = False
        self._open = contextlib.ExitStack()

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
            _claim(st.folder, self.url)

    def close(self) -> None:
        """Finish the open connections and close every graph (again: nothing)."""
        self._open.close()
        self.is_open = False

    def get(self, name: str | None) -> Served:
        """The stack called `name`, or the first one when no name is given."""
        if not name:
            return next(iter(self.by_name.values()))
        if name not in self.by_name:
            raise NotFound(f"no stack named {name!r}", "stacks: " + ", ".join(self.by_name))
        return self.by_name[name]


def _claim(folder: Folder, url: str) -> None:
    """Say in the folder that this process serves it: other `ok` commands then refuse to
    open its graph rather than wait for a lock the server never lets go."""
    other = folder.server()
    if other and other.get("pid") != os.getpid():
        folder.refuse_if_served()
    record = {"pid": os.getpid(), "url": url, "since": iso()}
    atomic_write(folder.served_path, json.dumps(record) + "\n")


def _unclaim(folder: Folder) -> None:
    with contextlib.suppress(FileNotFoundError):
        folder.served_path.unlink()
