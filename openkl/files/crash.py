"""Named crash points, so tests can kill a writer at every step that matters.

`OK_CRASH_AT=<name>[:<n>]` makes the n-th pass (default the first) through the point `name`
end the process at once with `os._exit(CRASH_EXIT)`: no cleanup, no `finally`, no flush,
as `kill -9` would. Without the variable a point costs two dictionary lookups.

`paused()` keeps the points of the work inside it (in that thread) from firing or counting:
`ok serve` syncs at start-up under it, so that a point meant for a request is not reached
by the start.

Every point a writer passes is listed in `POINTS`; a test checks that the code names no other
and that each is reached, so a crash test cannot silently lose coverage.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from .. import settings

CRASH_EXIT = 86

POINTS: dict[str, str] = {
    # ingest (and refresh, which ingests changed content)
    "ingest.source-written": "an original was copied under store/sources/",
    "ingest.journaled": "a document's mapping entry was appended to .ok/mapping.jsonl",
    "ingest.version-kept": "the text of a replaced version was copied to .ok/versions/",
    "ingest.normalized-written": "a normalized .ok.md file was written",
    "ingest.mapping-saved": "the mapping was rewritten whole after the files",
    "ingest.events-written": "drift was computed and events were appended",
    # notes
    "note.written": "a note file was written (add, update)",
    "note.deleted": "a note file was deleted",
    # the graph: every writer passes these inside its transaction
    "graph.docs-loaded": "documents, chunks and vectors were loaded",
    "graph.notes-loaded": "notes and vectors were loaded",
    "graph.removed": "documents or notes were taken out",
    "entities.extracted": "extraction rows were written, before consolidation",
    "entities.consolidated": "entities and relationships were recomputed",
    "graph.before-commit": "all changes are made, the transaction is not committed",
    "graph.committed": "the transaction is committed, the database not yet closed",
    "keyword.committed": "the keyword index committed a transaction's changes, its stamp not"
    " yet written",
    # sync and rebuild
    "sync.mapping-saved": "sync rewrote the mapping from the files",
    "rebuild.loading": "a rebuild is loading its new database",
    "rebuild.built": "a rebuild's new database is complete, not yet swapped in",
    "rebuild.swapping": "the old database was moved aside, the new one not yet in place",
    # refresh
    "refresh.fetched": "a refresh fetched a source, before writing anything",
}

_passes: dict[str, int] = {}


class _Pause(threading.local):
    depth = 0  # how many `paused()` blocks this thread is in


_pause = _Pause()


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No crash point fires, nor counts a pass, in this thread until the block ends."""
    _pause.depth += 1
    try:
        yield
    finally:
        _pause.depth -= 1


def point(name: str) -> None:
    """Crash here if `OK_CRASH_AT` names this point (and this is its n-th pass)."""
    spec = settings.env("OK_CRASH_AT")
    if not spec or _pause.depth:
        return
    want, _, nth = spec.partition(":")
    if want != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] >= max(1, int(nth or 1)):
        os._exit(CRASH_EXIT)
