"""`ok refresh` and `ok events`: keeping sources fresh, and what happened."""

from __future__ import annotations

import json
import sys

import typer

from ..errors import ERROR, PARTIAL, UsageError
from ..records import Event, RefreshReportDict
from . import output
from .common import SinceOpt, UntilOpt, folder, limit_opt
from .output import FormatOpt, JsonOpt, emit, emit_records, formats


def refresh(
    docs: list[str] = typer.Argument(
        None, help="Documents to refresh now (ids, paths, URLs, s3:// URLs or arXiv ids)."
    ),
    due: bool = typer.Option(False, "--due", help="Sources whose policy says so (the default)."),
    all_: bool = typer.Option(False, "--all", help="Every source that can be re-read."),
    drift_threshold: float = typer.Option(
        None,
        "--drift-threshold",
        help="Drift above which a `drifted` event is written "
        "(default: refresh.drift_threshold, 0.1).",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Only list what is due."),
    json_: bool = JsonOpt,
) -> None:
    """Re-fetch sources and store what changed as new versions. Safe to run from cron.

    Web pages are asked with ETag/Last-Modified, arXiv papers by version, S3 prefixes
    listed again (only objects whose ETag changed are read), repositories and files are
    re-read. Exits 3 when a source could not be refreshed (2 when none could);
    such a source is due again after refresh.retry_after seconds, doubled for each failure
    in a row up to a day (naming it tries it at once). A streak of failures is one
    `refresh_failed` event, its end a `refresh_recovered` one.

    Examples:

    \b
      ok refresh                         # whatever is due (cheap when nothing is)
      ok refresh -n                      # only list what is due
      ok refresh https://example.org/guide --drift-threshold 0.2
      15 * * * *  cd ~/kb && ok refresh  # crontab: every hour
    """
    from .. import ops

    if drift_threshold is not None and not 0.0 <= drift_threshold <= 2.0:
        raise typer.BadParameter("--drift-threshold must be between 0 and 2")
    rep = ops.refresh(
        folder(),
        docs,
        due=due,
        all_=all_,
        drift_threshold=drift_threshold,
        dry_run=dry_run,
    )
    for f in rep.failed:
        again = f" (due again at {f['retry_at']})" if f.get("retry_at") else ""
        output.warn(f"could not refresh {f['id']}: {f['error']}{again}")
    emit(rep.as_dict(), json_, plain=_plain_refresh)
    if rep.failed:  # the others were refreshed: partly done, unless nothing else was due
        raise typer.Exit(PARTIAL if len(rep.failed) < len(rep.due) else ERROR)


def _plain_refresh(d: RefreshReportDict) -> str:
    if d["dry_run"]:
        return (
            "\n".join(f"due {r['id']}\t{r['kind'] or '-'}\t{r['path']}" for r in d["due"])
            or "Nothing is due."
        )
    if not d["due"]:
        return "Nothing is due."
    lines = [
        f"changed {c['id']} -> {c['new']}  {c['path']}"
        + ("" if c["drift"] is None else f"  (drift {c['drift']:.4f})")
        for c in d["changed"]
    ]
    lines += [f"added {a['id']}  {a['path']}" for a in d["added"]]
    lines += [f"removed {r['id']}  {r['path']}  ({r['reason']})" for r in d["removed"]]
    lines += [f"skipped {s['id']}: {s['reason']}" for s in d["skipped"]]
    lines.append(
        f"{len(d['due'])} checked, {len(d['changed'])} changed, "
        f"{len(d['unchanged'])} unchanged, {len(d['removed'])} removed, "
        f"{len(d['failed'])} failed"
    )
    return "\n".join(lines)


def _event_line(ev: Event) -> str:
    about = ev.get("doc") or ev.get("note") or ev.get("trigger") or ""
    rest = {
        k: v
        for k, v in ev.items()
        if k not in ("id", "ts", "type", "doc", "source", "quote") and v is not None
    }
    detail = " ".join(f"{k}={v}" for k, v in rest.items() if not isinstance(v, dict | list))
    return f"{ev['ts']}\t{ev['type']}\t{about}\t{detail}"


@formats
def events(
    since: str = SinceOpt,
    until: str = UntilOpt,
    type_: list[str] = typer.Option(
        None,
        "--type",
        "-t",
        metavar="TYPE",
        help="Only these types (repeatable, or comma-separated).",
    ),
    doc: str = typer.Option(
        None, "--doc", metavar="ID|PATH", help="Only events about this doc or note id."
    ),
    limit: int = limit_opt(0, "Only the newest N (0: all).", min=0),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events."),
    timeout: float = typer.Option(None, "--timeout", help="With --follow: stop after N seconds."),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """The event log (events/YYYY-MM.jsonl): ingested, refreshed, drifted, trigger_fired…

    Examples:

    \b
      ok events --since 1d
      ok events -t drifted,removed --json
      ok events --follow | grep trigger_fired
    """
    from .. import ops
    from .common import split_labels

    f = folder()
    types = split_labels(type_)
    rows = ops.events(f, since=since, until=until, types=types, doc=doc, limit=limit)
    if follow and until:
        raise UsageError("--follow and --until do not go together", "drop one of them")
    if not follow:
        emit_records(rows, json_, fmt, plain=lambda rs: "\n".join(_event_line(e) for e in rs))
        return
    chosen = output.records_format(fmt, json_)
    if chosen in ("csv", "tsv"):
        raise UsageError(
            f"--follow cannot print {chosen}: the columns are not known in advance",
            "use --format jsonl (or --json: JSON lines while following)",
        )
    as_json = chosen is not None
    output.state.long_running = True
    for ev in rows:
        _print_event(ev, as_json)
    try:
        for ev in ops.follow_events(f, types=types, doc=doc, timeout=timeout):
            _print_event(ev, as_json)
    except KeyboardInterrupt:
        pass


def _print_event(ev: Event, as_json: bool) -> None:
    # one JSON object per line while following, so `jq` can consume the stream
    sys.stdout.write((json.dumps(ev, ensure_ascii=False) if as_json else _event_line(ev)) + "\n")
    sys.stdout.flush()
