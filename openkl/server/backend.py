"""A served stack's graph in PostgreSQL (`ok serve --backend`, or the graph.backend setting).

The folder stays the truth and its Kùzu graph stays open: writes go to the files and Kùzu
as without a backend, and after each one (and at start, and after a watched change) the
stack in PostgreSQL is synced incrementally (`pg_sync`), entities included. Every read
(search, ask, lineage, counts, and the entity routes: entities, traverse, context, pages,
the bundle export, the explorer's neighbourhood) is then answered from PostgreSQL; only
read-only Cypher answers from the resident Kùzu graph.

The stack records the folder whose rows it holds: a server of another folder with the same
`domain` is refused at start, unless told to take the stack over (`--take-over`).

The server is the stack's one writer for as long as it runs: its writer connection holds
the stack's advisory lock, and a second server (or `ok index --backend`) on the same stack
waits for it, then says who holds it. On a read-only database (a replica) it serves reads
only: a write is kept in the folder, and the response says PostgreSQL was not updated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..errors import OkError
from ..files.folder import Folder, stack_name
from ..graph.indexing import embedder
from ..graph.postgres import PgGraph, Readers, ReadOnly, Unavailable, who_am_i
from ..graph.protocol import GraphStore
from ..ops.read import Opener
from ..sync import pg_sync
from ..sync.plan import SyncReport


class NotPublished(OkError):
    """A write is saved in the folder, but the stack in PostgreSQL could not follow (503)."""

    http_status = 503


class Backend:
    """One stack's graph in the PostgreSQL database at `uri`: a writer connection holding
    the stack's writer lock, and connections for reads."""

    def __init__(self, folder: Folder, uri: str, take_over: bool = False) -> None:
        self.folder, self.uri = folder, uri
        # the stack may hold another folder's rows, to be replaced (`ok serve --take-over`)
        self.take_over = take_over
        self.stack = stack_name(folder)
        self.readers = Readers(uri, who_am_i(f"ok serve {self.stack} reads"))
        self.read_only = False  # a replica: reads only
        self.rls = False  # row-level security binds this server's user
        self._writer: PgGraph | None = None
        self._held = contextlib.ExitStack()

    def open(self) -> SyncReport | None:
        """Take the stack's writer lock and sync it; on a read-only database, check that
        the stack is there to read instead (None)."""
        try:
            synced: SyncReport | None = self.sync()
            if not self._writing().writes():
                raise ReadOnly("the database is read-only")
        except ReadOnly:
            self.read_only, synced = True, None
            self.close_writer()
        self.rls = not self.readers.bypasses_rls()
        if synced is not None:
            return synced
        emb = embedder(self.folder)
        with self.readers.reading(self.stack) as g:
            g._check(emb.identity)
        return None

    def _writing(self) -> PgGraph:
        """The writer connection, opened again (and the lock taken again) once lost."""
        if self._writer is not None and not self._writer.closed:
            return self._writer
        self.close_writer()
        emb = embedder(self.folder)
        self._writer = self._held.enter_context(
            PgGraph.open(
                self.uri,
                stack=self.stack,
                write=True,
                dim=emb.dim,
                embedder_identity=emb.identity,
                check=False,
                who=who_am_i(f"ok serve {self.stack}"),
                lock=self.folder.setting("lock_timeout"),
            )
        )
        return self._writer

    def sync(self) -> SyncReport:
        """Bring the stack in line with the folder's files (the caller holds the folder's
        writer lock)."""
        g = self._writing()
        try:
            with g.transaction():
                return pg_sync.sync(self.folder, g, self.take_over)
        except (Unavailable, ReadOnly):
            self.close_writer()  # the next sync connects again: the primary may be back
            raise

    def after_write(self) -> None:
        """Sync after a write to the folder; a failure says the write itself is kept."""
        try:
            self.sync()
        except OkError as e:
            raise NotPublished(
                f"saved in the folder, but its stack in PostgreSQL was not updated: {e.message}",
                "it is brought up to date at the next write, or POST /v1/STACK/sync",
            ) from e

    def reader(self, timeout: float | None) -> Opener:
        """How a route reads the stack: one read-only transaction on a pooled connection,
        set to this stack (SET LOCAL), its queries stopped after `timeout` seconds."""

        @contextlib.contextmanager
        def opened() -> Iterator[GraphStore]:
            with self.readers.reading(self.stack, timeout) as g:
                yield g.as_store()

        return opened

    def close_writer(self) -> None:
        self._held.close()
        self._held = contextlib.ExitStack()
        self._writer = None

    def close(self) -> None:
        self.close_writer()
        self.readers.close()

    def describe(self) -> dict[str, Any]:
        said: dict[str, Any] = {"backend": "postgresql", "read_only": self.read_only}
        said["row_level_security"] = self.rls
        if not self.rls:
            said["warning"] = (
                "this user is a superuser or BYPASSRLS: only the queries' stack filters keep"
                " stacks apart; serve as a role without those for row-level security"
            )
        return said
