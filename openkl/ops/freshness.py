"""Keeping sources fresh, and the event log that says what happened."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from ..collect import refresh as refresh_mod
from ..files import events as events_mod
from ..files.folder import Folder, parse_time
from ..records import Event

RefreshReport = refresh_mod.RefreshReport


def refresh(
    folder: Folder,
    refs: list[str] | None = None,
    *,
    due: bool = False,
    all_: bool = False,
    drift_threshold: float | None = None,
    dry_run: bool = False,
    writing: Callable[[], AbstractContextManager[object]] | None = None,
) -> RefreshReport:
    """Re-fetch the sources named (`refs`), those due (the default) or all of them, and store
    what changed as new versions (`drift_threshold` None: the folder's
    `refresh.drift_threshold`).

    Takes the writer lock itself (`writing`: how, default the folder's writer lock), and
    only when there is something to store: the network part runs without it."""
    return refresh_mod.refresh(
        folder,
        refs=refs or None,
        due=due,
        all_=all_,
        drift_threshold=drift_threshold,
        dry_run=dry_run,
        writing=writing,
    )


def events(
    folder: Folder,
    *,
    since: str | None = None,
    types: list[str] | None = None,
    doc: str | None = None,
    limit: int | None = None,
    until: str | None = None,
) -> list[Event]:
    """Events, oldest first: those since `since` and until `until` (ISO date/time, a date
    including its day, or a span: 30m, 12h, 7d), of these `types`, about this `doc` or
    note; `limit` keeps the newest ones."""
    return events_mod.read(
        folder,
        since=events_mod.parse_since(since),
        types=types,
        doc=doc,
        limit=limit or None,
        until=parse_time(until, "--until", end_of_day=True),
    )


def follow_events(
    folder: Folder,
    *,
    types: list[str] | None = None,
    doc: str | None = None,
    timeout: float | None = None,
    stop: threading.Event | None = None,
) -> Iterator[Event]:
    """Matching events appended from now on (like `tail -f`), until `timeout` seconds or
    until `stop` is set."""
    return events_mod.follow(folder, types=types, doc=doc, timeout=timeout, stop=stop)
