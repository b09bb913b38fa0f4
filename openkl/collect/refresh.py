"""Keeping collected knowledge fresh: refresh policies, `ok refresh`, drift and version history.

A document's mapping entry may carry a policy, `{"interval": "1d"}` and/or
`{"cron": "0 6 * * *"}` (cron wins when both are set). A source is due when the policy's next
time after its last fetch (`fetched_at`) has passed. `ok refresh` re-fetches due sources (web
pages with ETag/Last-Modified, arXiv papers by version, repositories by their files, local
files by re-reading them); changed content becomes a new version through the normal ingest,
which supersedes the old one and retires its chunks from search.

Drift is `1 - cosine` between the mean chunk embeddings of the old and the new version; it
is stored on the old version's mapping entry (and on the `SUPERSEDES` edge), so the history
of a document can be read from the files alone.

A source that fails to refresh backs off: it is due again `refresh.retry_after` seconds
later, twice that after a second failure in a row, and so on up to a day (`refresh_error`
on its mapping entry holds the streak). A streak is one `refresh_failed` event, with the
reason; the refresh that ends it is a `refresh_recovered` event.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..errors import BadInput, OkError, UsageError
from ..files import crash, events
from ..files import mapping as mapping_mod
from ..files.folder import Folder, iso, utcnow
from ..knowledge.drift import after_ingest, doc_vector, drift_between
from ..records import (
    DocRef,
    DocVersion,
    DueSource,
    FetchInfo,
    MappingEntry,
    RefreshChange,
    RefreshError,
    RefreshFailure,
    RefreshPolicy,
    RefreshRemoved,
    RefreshReportDict,
    RefreshSkip,
)

if TYPE_CHECKING:  # imported where a refresh runs: sources loads the store and the indexer
    from .sources import Batch, WebClient

__all__ = ["after_ingest", "doc_vector", "drift_between"]

_INTERVAL = re.compile(r"^\s*(\d+)\s*(s|m|min|h|d|w)\s*$", re.I)
_INTERVAL_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


# -- policies ------------------------------------------------------------------------------
def parse_interval(text: str) -> dt.timedelta:
    m = _INTERVAL.match(text or "")
    if not m or int(m.group(1)) <= 0:
        raise BadInput(
            f"refresh interval {text!r} is not valid", "use a number and a unit: 30m, 6h, 1d, 2w"
        )
    return dt.timedelta(seconds=int(m.group(1)) * _INTERVAL_UNITS[m.group(2).lower()])


_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES = {3: {m: i for i, m in enumerate(_MONTHS, 1)}, 4: {d: i for i, d in enumerate(_WEEKDAYS)}}
_RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
_FIELD_NAMES = ["minute", "hour", "day of month", "month", "day of week"]


@dataclass(frozen=True)
class Cron:
    """A standard five-field cron expression (UTC), evaluated at minute resolution."""

    expr: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool
    any_weekday: bool

    def _day_ok(self, d: dt.date) -> bool:
        dom = d.day in self.days
        dow = (d.isoweekday() % 7) in self.weekdays
        if self.any_day and self.any_weekday:
            return True
        if self.any_day:
            return dow
        if self.any_weekday:
            return dom
        return dom or dow  # both restricted: either matches (classic cron)

    def next_after(self, t: dt.datetime) -> dt.datetime | None:
        """The first firing time strictly after `t`, or None within eight years."""
        t = t.astimezone(dt.UTC).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
        day = t.date()
        first = True
        for _ in range(366 * 8 + 2):
            if day.month in self.months and self._day_ok(day):
                h0, m0 = (t.hour, t.minute) if first else (0, 0)
                for h in self.hours:
                    if h < h0:
                        continue
                    for m in self.minutes:
                        if h == h0 and m < m0:
                            continue
                        return dt.datetime(day.year, day.month, day.day, h, m, tzinfo=dt.UTC)
            first = False
            day += dt.timedelta(days=1)
        return None


def _cron_field(text: str, idx: int) -> set[int]:
    lo, hi = _RANGES[idx]
    names = _NAMES.get(idx, {})
    out: set[int] = set()

    def value(tok: str) -> int:
        tok = tok.lower()
        if tok in names:
            return names[tok]
        if not tok.isdigit():
            raise ValueError(f"{tok!r} is not a number")
        v = int(tok)
        if not lo <= v <= hi:
            raise ValueError(f"{v} is outside {lo}-{hi}")
        return v

    for part in text.split(","):
        if not part:
            raise ValueError("empty list item")
        rng, _, step_s = part.partition("/")
        step = 1
        if step_s:
            if not step_s.isdigit() or int(step_s) == 0:
                raise ValueError(f"step {step_s!r} must be a positive number")
            step = int(step_s)
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            a_s, b_s = rng.split("-", 1)
            a, b = value(a_s), value(b_s)
            if a > b:
                raise ValueError(f"range {rng} runs backwards")
        else:
            a = value(rng)
            b = hi if step_s else a
        out.update(range(a, b + 1, step))
    return out


@functools.lru_cache(maxsize=1024)
def parse_cron(expr: str) -> Cron:
    """Parse a cron expression; `BadInput` naming the bad field if it is not valid."""
    text = _MACROS.get((expr or "").strip().lower(), (expr or "").strip())
    parts = text.split()
    if len(parts) != 5:
        raise BadInput(
            f"cron expression {expr!r} must have 5 fields "
            "(minute hour day-of-month month day-of-week)",
            'e.g. "0 6 * * *" for 06:00 UTC daily, or @hourly/@daily/@weekly',
        )
    sets = []
    for i, p in enumerate(parts):
        try:
            sets.append(_cron_field(p, i))
        except ValueError as e:
            raise BadInput(
                f"cron expression {expr!r}: bad {_FIELD_NAMES[i]} field {p!r} ({e})",
                "fields are minute 0-59, hour 0-23, day 1-31, month 1-12, "
                "weekday 0-7 (0 and 7 are Sunday)",
            ) from None
    weekdays = frozenset(d % 7 for d in sets[4])
    cron = Cron(
        expr=expr,
        minutes=tuple(sorted(sets[0])),
        hours=tuple(sorted(sets[1])),
        days=frozenset(sets[2]),
        months=frozenset(sets[3]),
        weekdays=weekdays,
        any_day=parts[2].startswith("*"),
        any_weekday=parts[4].startswith("*"),
    )
    if cron.next_after(dt.datetime(2000, 1, 1, tzinfo=dt.UTC)) is None:
        raise BadInput(f"cron expression {expr!r} never fires", "check the day and month fields")
    return cron


def make_policy(every: str | None = None, cron: str | None = None) -> RefreshPolicy | None:
    """A refresh policy from `--refresh` and `--cron`, validated (None when neither is given)."""
    policy: RefreshPolicy = {}
    if every:
        parse_interval(every)
        policy["interval"] = every.strip()
    if cron:
        parse_cron(cron.strip())
        policy["cron"] = cron.strip()
    return policy or None


def _parse_ts(s: str | None) -> dt.datetime | None:
    if not s:
        return None
    try:
        return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None


@functools.lru_cache(maxsize=65536)
def _next_cron(expr: str, last: str) -> dt.datetime | None:
    when = _parse_ts(last)
    try:
        cron = parse_cron(expr)
    except BadInput:
        return None
    return cron.next_after(when) if when else None


@functools.lru_cache(maxsize=65536)
def _next_interval(every: str, last: str) -> dt.datetime | None:
    when = _parse_ts(last)
    try:
        return when + parse_interval(every) if when else None
    except BadInput:
        return None


NEVER_FETCHED = dt.datetime.min.replace(tzinfo=dt.UTC)
RETRY_MAX = 86400.0  # seconds: the longest a failing source waits between tries


def next_due(entry: MappingEntry) -> dt.datetime | None:
    """When a document's source is next due (None: no policy, or no valid one); a source
    whose last refresh failed not before its retry time."""
    policy = entry.get("refresh")
    if not policy or not isinstance(policy, dict):
        return None
    last = entry.get("fetched_at") or entry.get("ingested_at")
    when: dt.datetime | None = None
    if not last:
        when = NEVER_FETCHED
    elif policy.get("cron"):
        when = _next_cron(str(policy["cron"]), str(last))
    elif policy.get("interval"):
        when = _next_interval(str(policy["interval"]), str(last))
    err = entry.get("refresh_error")
    retry = _parse_ts(str(err.get("retry_at") or "")) if isinstance(err, dict) else None
    return max(when, retry) if when is not None and retry is not None else when


def retry_wait(base: float, failures: int) -> float:
    """Seconds a source waits after `failures` failures in a row: `base`, doubled for each
    failure after the first, up to a day."""
    return min(max(base, 0.0) * 2.0 ** min(max(failures - 1, 0), 40), RETRY_MAX)


def is_due(entry: MappingEntry, now: dt.datetime) -> bool:
    when = next_due(entry)
    return when is not None and when <= now


def source_kind(entry: MappingEntry) -> str | None:
    """web | arxiv | repo | s3 | file, or None when the source cannot be re-read."""
    src = entry.get("source") or {}
    if src.get("s3"):
        return "s3"
    if src.get("url"):
        return "web"
    if src.get("arxiv"):
        return "arxiv"
    if src.get("repo"):
        return "repo"
    path = str(src.get("path") or "")
    if path.startswith("store/sources/") and not path.startswith("store/sources/stdin/"):
        return "file"
    return None


# -- drift -----------------------------------------------------------------------------------
def history(folder: Folder, ref: str) -> list[DocVersion]:
    """Every version of a document, newest first, with the drift from the version before."""
    from ..files.mapping import resolve

    entries = mapping_mod.load(folder)
    start = resolve(folder, ref, include_old=True)
    seen: set[str] = set()
    cur = start
    while cur.get("superseded_by") in entries and cur["id"] not in seen:
        seen.add(cur["id"])
        cur = entries[cur["superseded_by"]]
    out: list[DocVersion] = []
    seen = set()
    node: MappingEntry | None = cur
    while node is not None and node["id"] not in seen:
        seen.add(node["id"])
        prev = entries.get(node.get("supersedes") or "")
        version: DocVersion = {
            "id": node["id"],
            "current": bool(node.get("current", True)),
            "path": node.get("path"),
            "title": node.get("title", ""),
            "sha256": node.get("sha256"),
            "source": node.get("source"),
            "ingested_at": node.get("ingested_at"),
            "fetched_at": node.get("fetched_at"),
            "superseded_at": node.get("superseded_at"),
            "superseded_by": node.get("superseded_by"),
            "supersedes": node.get("supersedes"),
            "drift": prev.get("drift") if prev else None,
        }
        if node.get("fetch"):
            version["fetch"] = node["fetch"]
        out.append(version)
        node = prev
    return out


# -- refresh ---------------------------------------------------------------------------------
@dataclass
class RefreshReport:
    due: list[DueSource] = field(default_factory=list)  # what was looked at
    changed: list[RefreshChange] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    added: list[DocRef] = field(default_factory=list)  # new files of a repository
    removed: list[RefreshRemoved] = field(default_factory=list)  # files deleted upstream
    failed: list[RefreshFailure] = field(default_factory=list)
    skipped: list[RefreshSkip] = field(default_factory=list)
    dry_run: bool = False

    def as_dict(self) -> RefreshReportDict:
        return cast(RefreshReportDict, {k: getattr(self, k) for k in self.__dataclass_fields__})


def plan(
    folder: Folder,
    refs: list[str] | None = None,
    all_: bool = False,
    entries: dict[str, MappingEntry] | None = None,
) -> list[MappingEntry]:
    """The mapping entries a refresh looks at: the given docs, all sources, or the due ones."""
    entries = mapping_mod.load(folder) if entries is None else entries
    if refs:
        from ..files.mapping import resolve

        out: list[MappingEntry] = []
        for r in refs:
            e = entries[resolve(folder, r, include_old=True)["id"]]
            seen: set[str] = set()
            while (
                not e.get("current", True)
                and e.get("superseded_by") in entries
                and e["id"] not in seen
            ):
                seen.add(e["id"])
                e = entries[e["superseded_by"]]
            if all(o["id"] != e["id"] for o in out):
                out.append(e)
        return out
    if all_:
        return [e for e in entries.values() if e.get("current", True) and source_kind(e)]
    now = utcnow()
    return [
        e
        for e in entries.values()
        if e.get("refresh") and e.get("current", True) and is_due(e, now)
    ]


def refresh(
    folder: Folder,
    refs: list[str] | None = None,
    due: bool = False,
    all_: bool = False,
    drift_threshold: float | None = None,
    dry_run: bool = False,
    writing: Callable[[], AbstractContextManager[object]] | None = None,
) -> RefreshReport:
    """Re-fetch sources and store what changed (`ok refresh`).

    Takes the writer lock itself (`writing`: how to take it, default the folder's writer
    lock), and only when there is something to store: the network part runs without it, so
    a slow site does not block other writers. With nothing due it reads the mapping and
    returns.
    """
    if sum(bool(x) for x in (refs, due, all_)) > 1:
        raise UsageError(
            "pass documents, --due or --all, not several", "`ok refresh` alone means --due"
        )
    rep = RefreshReport(dry_run=dry_run)
    targets = plan(folder, refs, all_)
    for e in targets:
        when = next_due(e)
        rep.due.append(
            {
                "id": e["id"],
                "path": e.get("path"),
                "kind": source_kind(e),
                "refresh": e.get("refresh"),
                "next_due": iso(when) if when and when != NEVER_FETCHED else None,
            }
        )
    if dry_run or not targets:
        return rep
    failing = {e["id"]: e["refresh_error"] for e in targets if e.get("refresh_error")}
    batch, owners, not_modified = _fetch(folder, targets, rep)
    crash.point("refresh.fetched")
    with writing() if writing is not None else folder.write_lock("ok refresh"):
        _apply(folder, batch, owners, not_modified, rep, drift_threshold, failing)
    return rep


def _fetch(
    folder: Folder, targets: list[MappingEntry], rep: RefreshReport
) -> tuple[Batch, dict[str, str], dict[str, FetchInfo]]:
    from . import sources

    batch = sources.Batch()
    owners: dict[str, str] = {}  # candidate origin -> the doc it refreshes
    not_modified: dict[str, FetchInfo] = {}  # doc id -> fetch info of an unchanged source
    repos: dict[tuple[str, str], list[MappingEntry]] = {}
    prefixes: dict[tuple[str, str, str, bool], list[MappingEntry]] = {}
    papers: list[MappingEntry] = []
    with sources.WebClient(folder) as client:
        for e in targets:
            kind = source_kind(e)
            try:
                if kind == "web":
                    _fetch_web(client, e, batch, owners, not_modified)
                elif kind == "file":
                    _fetch_file(folder, e, batch, owners)
                elif kind == "arxiv":
                    papers.append(e)
                elif kind == "repo":
                    src = e["source"]
                    repos.setdefault((src["repo"], src.get("branch") or ""), []).append(e)
                elif kind == "s3":
                    from .s3 import group_key

                    prefixes.setdefault(group_key(e), []).append(e)
                else:
                    rep.skipped.append(
                        {
                            "id": e["id"],
                            "reason": "no source to re-read (stdin, "
                            "or edited in place: `ok sync` picks that up)",
                        }
                    )
            except OkError as err:
                rep.failed.append({"id": e["id"], "error": str(err)})
        if papers:
            _fetch_arxiv(folder, client, papers, batch, owners, not_modified, rep)
    for (repo, branch), members in repos.items():
        _fetch_repo(folder, repo, branch, members, batch, owners, rep)
    if prefixes:
        entries = mapping_mod.load(folder)
        for members in prefixes.values():
            _fetch_s3(folder, members, entries, batch, owners, not_modified, rep)
    return batch, owners, not_modified


def _fetch_web(
    client: WebClient,
    e: MappingEntry,
    batch: Batch,
    owners: dict[str, str],
    not_modified: dict[str, FetchInfo],
) -> None:
    from . import sources

    fetch = e.get("fetch") or {}
    f = client.get(
        e["source"]["url"], etag=fetch.get("etag"), last_modified=fetch.get("last_modified")
    )
    if f.not_modified:
        not_modified[e["id"]] = {**fetch, "status": 304}
        return
    cand, _ = sources.page_candidate(f)
    if cand.source != e["source"]:
        cand.source = e["source"]
    batch.cands.append(cand)
    batch.fetch[cand.origin] = sources.web_fetch_info(f)
    owners[cand.origin] = e["id"]


def _fetch_file(folder: Folder, e: MappingEntry, batch: Batch, owners: dict[str, str]) -> None:
    from .store import Candidate

    src = str(e["source"]["path"])
    origin = str(e.get("origin") or "")
    outside = Path(origin) if origin and Path(origin).is_absolute() else None
    if outside is not None and (folder.root == outside or folder.root in outside.parents):
        outside = None
    if outside is not None and outside.is_file():
        data, copy = outside.read_bytes(), True
    elif (folder.root / src).is_file():
        data, copy, origin = (folder.root / src).read_bytes(), False, str(folder.root / src)
    else:
        raise OkError(
            f"the original of {e['path']} is gone ({origin or src})",
            "restore it, or remove the document with `ok store remove`",
        )
    cand = Candidate(
        data=data,
        rel=src[len("store/sources/") :],
        origin=origin,
        source=e["source"],
        copy_original=copy,
    )
    batch.cands.append(cand)
    batch.fetch[cand.origin] = {"kind": "file"}
    owners[cand.origin] = e["id"]


def _fetch_arxiv(
    folder: Folder,
    client: WebClient,
    targets: list[MappingEntry],
    batch: Batch,
    owners: dict[str, str],
    not_modified: dict[str, FetchInfo],
    rep: RefreshReport,
) -> None:
    from . import sources

    by_id = {str(e["source"]["arxiv"]): e for e in targets}
    known = {k: (e.get("fetch") or {}).get("version", "") for k, e in by_id.items()}
    try:
        b = sources.fetch_arxiv(folder, list(by_id), client=client, known=known)
    except OkError as err:
        rep.failed += [{"id": e["id"], "error": str(err)} for e in targets]
        return
    for key, info in b.fetch.items():
        if info.get("unchanged") and key in by_id:
            known_version = info.copy()
            del known_version["unchanged"]
            not_modified[by_id[key]["id"]] = known_version
    for c in b.cands:
        batch.cands.append(c)
        batch.fetch[c.origin] = b.fetch[c.origin]
        owners[c.origin] = by_id[c.source["arxiv"]]["id"]


def _fetch_repo(
    folder: Folder,
    repo: str,
    branch: str,
    members: list[MappingEntry],
    batch: Batch,
    owners: dict[str, str],
    rep: RefreshReport,
) -> None:
    """A repository refreshes as a whole: one update of the checkout, every file re-read.

    New files are added; documents whose file is gone from the working tree are removed
    (`_apply`, with a `removed` event). Members stored with different --include globs are
    re-read with all of them.
    """
    from . import sources

    globs = [(m.get("fetch") or {}).get("include") or [] for m in members]
    include = sorted({g for gs in globs for g in gs}) if all(globs) else None
    try:
        b = sources.fetch_repo(folder, repo, include=include, branch=branch or None)
    except OkError as err:
        rep.failed += [{"id": m["id"], "error": str(err)} for m in members]
        return
    batch.cands += b.cands
    batch.fetch.update(b.fetch)
    batch.skipped += b.skipped
    by_file = {m["source"].get("file"): m["id"] for m in members}
    for c in b.cands:
        if c.source.get("file") in by_file:
            owners[c.origin] = by_file[c.source["file"]]
    present = {c.source.get("file") for c in b.cands}
    for m in members:
        file = m["source"].get("file")
        if file in present:
            continue
        if b.tree is not None and file and not (b.tree / file).exists():
            rep.removed.append({"id": m["id"], "path": m["path"], "reason": "deleted upstream"})
        else:
            rep.skipped.append(
                {
                    "id": m["id"],
                    "reason": "not re-read (outside --include, or "
                    "no longer a file the repository source takes)",
                }
            )


def _fetch_s3(
    folder: Folder,
    members: list[MappingEntry],
    entries: dict[str, MappingEntry],
    batch: Batch,
    owners: dict[str, str],
    not_modified: dict[str, FetchInfo],
    rep: RefreshReport,
) -> None:
    """An S3 prefix refreshes as a whole, by ETag: one listing, and only changed or new
    objects downloaded; documents whose object is gone are removed (`_apply`), as a file
    deleted from a repository is."""
    from . import s3

    try:
        got = s3.refresh_prefix(folder, members, entries)
    except OkError as err:
        rep.failed += [{"id": m["id"], "error": str(err)} for m in members]
        return
    batch.cands += got.batch.cands
    batch.fetch.update(got.batch.fetch)
    batch.skipped += got.batch.skipped
    batch.policies.update(got.batch.policies)
    owners.update(got.owners)
    not_modified.update(got.not_modified)
    for m in got.removed:
        rep.removed.append({"id": m["id"], "path": m["path"], "reason": "deleted upstream"})
    rep.skipped += [{"id": did, "reason": why} for did, why in got.skipped]


def _apply(
    folder: Folder,
    batch: Batch,
    owners: dict[str, str],
    not_modified: dict[str, FetchInfo],
    rep: RefreshReport,
    drift_threshold: float | None,
    failing: dict[str, RefreshError] | None = None,
) -> None:
    from . import sources
    from .store import IngestReport, ingest

    ing = IngestReport()
    if batch.cands:
        ingest(folder, batch.cands, ing, drift_threshold=drift_threshold)
        sources.record_fetch(folder, batch, ing)
    entries = mapping_mod.load(folder)
    now = iso()
    touched = False
    for did, info in not_modified.items():
        if did in entries:
            entries[did]["fetch"] = info
            entries[did]["fetched_at"] = now
            entries[did].pop("refresh_error", None)
            touched = True
        rep.unchanged.append(did)
    out: list[tuple[str, dict[str, Any]]] = []
    for a in ing.added:
        owner = owners.get(a["origin"])
        new = entries.get(a["id"])
        if owner:
            change: RefreshChange = {
                "id": owner,
                "new": a["id"],
                "path": a["path"],
                "drift": a.get("drift"),
            }
            rep.changed.append(change)
            out.append(
                (
                    "refreshed",
                    {
                        "doc": a["id"],
                        "previous": owner,
                        "path": a["path"],
                        "drift": a.get("drift"),
                        "source": new.get("source") if new else None,
                    },
                )
            )
        else:
            rep.added.append({"id": a["id"], "path": a["path"]})
    for u in ing.unchanged:
        if owners.get(u["origin"]):
            rep.unchanged.append(owners[u["origin"]])
    if rep.removed:
        from .store import remove

        for r in rep.removed:
            remove(folder, r["id"], reason=r["reason"])
        entries = mapping_mod.load(folder)
    for s in ing.skipped + batch.skipped:
        rep.failed.append({"id": owners.get(s["path"], s["path"]), "error": s["reason"]})
    out += _failures(folder, entries, rep.failed, now)
    out += _recoveries(entries, rep, failing or {})
    touched = touched or bool(rep.failed) or bool(failing)
    if touched:
        mapping_mod.save(folder, entries)
    events.emit_many(folder, out)
    folder.log_op(
        "refresh",
        checked=len(rep.due),
        changed=[c["new"] for c in rep.changed],
        removed=[r["id"] for r in rep.removed],
        failed=[f["id"] for f in rep.failed],
    )


def _failures(
    folder: Folder, entries: dict[str, MappingEntry], failed: list[RefreshFailure], now: str
) -> list[tuple[str, dict[str, Any]]]:
    """Record each failure on its document's entry, with when it is due again; the first
    failure of a streak is a `refresh_failed` event (later ones only count)."""
    base = float(folder.setting("refresh.retry_after"))
    out: list[tuple[str, dict[str, Any]]] = []
    for f in failed:
        e = entries.get(f["id"])
        if e is None:  # not a document (a path of a repository): nothing to keep a streak on
            out.append(("refresh_failed", {"doc": f["id"], "error": f["error"]}))
            continue
        prev = cast(dict[str, Any], e.get("refresh_error") or {})
        n = int(prev.get("failures") or 0) + 1
        retry = iso(utcnow() + dt.timedelta(seconds=retry_wait(base, n)))
        e["refresh_error"] = {
            "at": now,
            "error": f["error"],
            "since": prev.get("since") or now,
            "failures": n,
            "retry_at": retry,
        }
        f["retry_at"] = retry
        if n == 1:
            fields = {"doc": f["id"], "path": e.get("path"), "error": f["error"]}
            out.append(("refresh_failed", {**fields, "retry_at": retry}))
    return out


def _recoveries(
    entries: dict[str, MappingEntry], rep: RefreshReport, failing: dict[str, RefreshError]
) -> list[tuple[str, dict[str, Any]]]:
    """A `refresh_recovered` event for each source refreshed after failing, and its entry
    cleared (an old version's too)."""
    done = [*rep.unchanged, *(c["id"] for c in rep.changed)]
    out: list[tuple[str, dict[str, Any]]] = []
    for did in dict.fromkeys(done):
        err = failing.get(did)
        if err is None:
            continue
        if did in entries:
            entries[did].pop("refresh_error", None)
        fields = {
            "doc": did,
            "path": entries[did].get("path") if did in entries else None,
            "failures": int(err.get("failures") or 1),
            "since": err.get("since") or err.get("at"),
            "error": err.get("error"),
        }
        out.append(("refresh_recovered", fields))
    return out


def set_policy(folder: Folder, refs: list[str], policy: RefreshPolicy | None) -> list[DueSource]:
    """Set (or, with None, clear) the refresh policy of documents. The caller holds the lock."""
    from ..files.mapping import resolve

    entries = mapping_mod.load(folder)
    out: list[DueSource] = []
    for r in refs:
        e = entries[resolve(folder, r)["id"]]
        if policy and not source_kind(e):
            raise BadInput(
                f"{e['path']} has no source that can be re-read",
                "web, arXiv, repository, S3 and file sources can refresh",
            )
        if policy:
            e["refresh"] = policy
        else:
            e.pop("refresh", None)
        when = next_due(e)
        out.append(
            {
                "id": e["id"],
                "path": e["path"],
                "refresh": e.get("refresh"),
                "next_due": iso(when) if when and when != NEVER_FETCHED else None,
            }
        )
    mapping_mod.save(folder, entries)
    folder.log_op("refresh.policy", ids=[o["id"] for o in out], policy=policy)
    return out
