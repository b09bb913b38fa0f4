"""What one call of an operation runs with, as an adapter made it for that call."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

from ..files.folder import Folder
from ..graph.indexing import open_postgres
from ..graph.protocol import GraphStore

# how an adapter opens the graph for reading, if not with `open_graph(folder)`
Opener = Callable[[], AbstractContextManager[GraphStore]]

# how a call writes: the writer it waits for and holds while `what` writes, and what
# follows a write (a PostgreSQL backend's sync) before it lets go
Writer = Callable[[str], AbstractContextManager[None]]


@dataclass(frozen=True)
class Call:
    """One call of an operation, built once by the adapter that takes it: the stack's
    folder, how the call reads its graph (`reader`; None: the folder's Kùzu graph, built
    first when it has none), its time cap in seconds (None: none), and how it writes
    (`writer`; None: the folder's writer lock, as the CLI takes it)."""

    folder: Folder
    reader: Opener | None = None
    timeout: float | None = None
    writer: Writer | None = None

    def writing(self, what: str) -> AbstractContextManager[None]:
        """Hold the call's writer while `what` writes."""
        if self.writer is not None:
            return self.writer(what)
        return self.folder.write_lock(what)


def local(folder: Folder, backend: str | None = None) -> Call:
    """A call in this process, as the CLI makes one: it reads the folder's stack in
    PostgreSQL when `backend` (a connection string) or graph.backend names one, else the
    folder's Kùzu graph, and writes under the folder's writer lock."""
    backend = backend or folder.setting("graph.backend")
    return Call(folder, reader=postgres_reader(folder, backend) if backend else None)


def postgres_reader(folder: Folder, backend: str) -> Opener:
    """How a call reads the folder's stack in PostgreSQL at `backend`."""

    @contextlib.contextmanager
    def opener() -> Iterator[GraphStore]:
        with open_postgres(folder, backend) as g:
            yield g.as_store()

    return opener
