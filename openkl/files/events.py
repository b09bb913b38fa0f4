"""The event log: what happened to the folder's knowledge, one JSON line per event.

Events live in `events/YYYY-MM.jsonl` at the root of the folder, versioned with everything
else (not git-ignored). The log is append-only: a line, once written, is never rewritten,
so `git diff` of the log only ever shows additions and `ok events --follow` can tail it.

Types written by openkl: `ingested`, `drifted`, `refreshed`, `refresh_failed` (once per
streak of failures), `refresh_recovered`, `removed`,
`mem_added`, `mem_updated`, `mem_deleted`, `mem_archived`,
`mem_restored`, `trigger_fired`, `trigger_exec_failed`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

from ..records import Event
from .folder import Folder, append_whole, iso, parse_time, utcnow

EVENTS_DIR = "events"
_MONTH_FILE = re.compile(r"^(\d{4})-(\d{2})\.jsonl$")
# fields that name a document or note an event is about (for `--doc`)
SUBJECT_FIELDS = ("doc", "previous", "new", "note", "item", "doc_id")


def events_dir(folder: Folder) -> Path:
    return folder.root / EVENTS_DIR


def _build(type_: str, fields: Mapping[str, Any], now: dt.datetime) -> Event:
    event: dict[str, Any] = {"ts": iso(now), "type": type_}
    event.update({k: v for k, v in fields.items() if v is not None})
    body = json.dumps(event, ensure_ascii=False, sort_keys=True, default=str)
    eid = f"ev-{now:%Y%m%d%H%M%S}-{hashlib.sha256(body.encode()).hexdigest()[:8]}"
    return cast(Event, {"id": eid, **event})


def emit(folder: Folder, type_: str, **fields: Any) -> Event:
    """Append one event and return it (fields that are None are left out)."""
    return emit_many(folder, [(type_, fields)])[0]


def emit_many(folder: Folder, items: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Event]:
    """Append several events with one write.

    Appending (O_APPEND, whole lines or nothing, then fsync) is what keeps the log
    append-only and cheap; rewriting it through a temp file would copy the month's log on
    every event. Callers hold the writer lock, so writers never interleave.
    """
    now = utcnow()
    evs = [_build(t, f, now) for t, f in items]
    if not evs:
        return []
    data = "".join(json.dumps(e, ensure_ascii=False, default=str) + "\n" for e in evs)
    log = events_dir(folder) / f"{now:%Y-%m}.jsonl"
    append_whole(log, data.encode("utf-8"), fsync=True, within=folder.root)
    return evs


def parse_since(value: str | None) -> str | None:
    """`--since`: an ISO date/time, or a span back from now such as `30m`, `2h`, `7d`."""
    return parse_time(value or None, "--since")


def _files(folder: Folder, since: str | None = None) -> list[Path]:
    out = []
    # a month's log that is a symlink out of the folder is not read
    for p in folder.files_under(events_dir(folder), ".jsonl", recursive=False).files:
        m = _MONTH_FILE.match(p.name)
        if not m or (since and f"{m.group(1)}-{m.group(2)}" < since[:7]):
            continue
        out.append(p)
    return out


def _decode(line: str) -> Event | None:
    line = line.strip()
    if not line:
        return None
    try:
        ev = json.loads(line)
    except ValueError:
        return None  # a torn line from a crash mid-append: skip it, keep the rest
    return cast(Event, ev) if isinstance(ev, dict) else None


def matches(
    ev: Event,
    since: str | None = None,
    types: Iterable[str] | None = None,
    doc: str | None = None,
) -> bool:
    if since and str(ev.get("ts", "")) < since:
        return False
    types = list(types or [])
    if types and ev.get("type") not in types:
        return False
    if doc:
        ids = [str(ev.get(f) or "") for f in SUBJECT_FIELDS]
        if not any(i == doc or i.startswith(doc) or i.split("#", 1)[0] == doc for i in ids if i):
            return False
    return True


def read(
    folder: Folder,
    since: str | None = None,
    types: Iterable[str] | None = None,
    doc: str | None = None,
    limit: int | None = None,
    until: str | None = None,
) -> list[Event]:
    """Events, oldest first, filtered (`since` and `until` are UTC ISO times, both
    included); `limit` keeps the newest ones."""
    types = list(types or [])
    out: list[Event] = []
    for p in _files(folder, since):
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
            ev = _decode(line)
            if ev is None or (until and str(ev.get("ts", "")) > until):
                continue
            if matches(ev, since, types, doc):
                out.append(ev)
    return out[-limit:] if limit else out


def follow(
    folder: Folder,
    types: Iterable[str] | None = None,
    doc: str | None = None,
    poll: float = 0.5,
    timeout: float | None = None,
    stop: threading.Event | None = None,
) -> Iterator[Event]:
    """Yield matching events appended from now on (like `tail -f`), until `timeout` seconds
    or until `stop` is set."""
    types = list(types or [])
    offsets: dict[Path, int] = {p: p.stat().st_size for p in _files(folder)}
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        for p in _files(folder):
            start = offsets.get(p, 0)
            with open(p, "rb") as f:
                f.seek(start)
                data = f.read()
            # only whole lines; a line still being written is picked up next round
            end = data.rfind(b"\n") + 1
            offsets[p] = start + end
            for line in data[:end].decode("utf-8", errors="replace").splitlines():
                ev = _decode(line)
                if ev is not None and matches(ev, None, types, doc):
                    yield ev
        if deadline is not None and time.monotonic() >= deadline:
            return
        wait = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
        if stop is None:
            time.sleep(wait)
        elif stop.wait(wait):
            return
