"""`ok backfeed …`: proposed entities and relationships, reviewed before they count."""

from __future__ import annotations

import typer

from ..records import BackfeedItem
from .common import cli_caller, folder, writing
from .output import FormatOpt, JsonOpt, emit, emit_records, formats, read_stdin_text

app = typer.Typer(
    help="Human-reviewed writeback: flag, queue, approve, reject.", no_args_is_help=True
)


def _line(i: BackfeedItem) -> str:
    ents = ", ".join(e["name"] for e in i["entities"])
    rels = ", ".join(f"{r['from']} -{r['type']}-> {r['to']}" for r in i["relationships"])
    return f"{i['id']}\t{i['status']}\t{ents}" + (f"\t{rels}" if rels else "")


@app.command()
def flag(
    file: str = typer.Option(
        "-", "--file", "-f", help="JSON file with the proposal (default stdin)."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Queue a proposal: {"entities": [{name, type, …}], "relationships": [{from, to, type}]}.

    Examples:

    \b
      echo '{"relationships": [{"from": "Litestream", "to": "SQLite", "type": "uses"}]}' | ok backfeed flag
      ok backfeed flag -f proposal.json
      ok backfeed queue --status pending && ok backfeed approve <id>
    """
    from pathlib import Path

    from .. import ops
    from ..errors import BadInput

    if file == "-":
        text = read_stdin_text()
    else:
        p = Path(file).expanduser()
        if not p.is_file():
            raise BadInput(f"no file at {file}", "pass a JSON file, or pipe JSON to stdin")
        text = p.read_text(encoding="utf-8")
    f = folder()
    with writing(f, "ok backfeed flag"):
        item = ops.flag_backfeed(f, text, cli_caller())
    emit(
        item,
        json_,
        plain=lambda d: d["id"] + ("" if d["created"] else "\t(already queued)"),
    )


@app.command()
@formats
def queue(
    status: str = typer.Option("pending", "--status", help="pending, approved, rejected or all."),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """List backfeed items."""
    from .. import ops

    emit_records(
        ops.backfeed_queue(folder(), status),
        json_,
        fmt,
        plain=lambda items: "\n".join(_line(i) for i in items),
    )


@app.command()
def show(item_id: str = typer.Argument(...), json_: bool = JsonOpt) -> None:
    """One backfeed item."""
    from .. import ops

    emit(ops.backfeed_item(folder(), item_id), json_, plain=_shown)


def _shown(i: BackfeedItem) -> str:
    """An item's line, then who queued it (through what, when, on what) and who decided."""
    lines = [_line(i)]
    prov = i.get("provenance")
    if prov:
        lines.append(f"queued by {prov['by']} via {prov['via']} at {prov['at']}")
        lines += [f"  source: {s['id']}  {s['path'] or s['title']}" for s in prov["sources"]]
    by = i.get("decided_by")
    if by:
        lines.append(f"{i['status']} by {by['by']} via {by['via']} at {i['decided_at']}")
    return "\n".join(lines)


@app.command()
def approve(item_id: str = typer.Argument(...), json_: bool = JsonOpt) -> None:
    """Approve an item: absorb it with verified=true, source_kind=backfeed."""
    from .. import ops

    f = folder()
    with writing(f, "ok backfeed approve"):
        item = ops.decide_backfeed(f, item_id, approve=True, caller=cli_caller())
    emit(item, json_, plain=lambda i: f"approved {i['id']}")


@app.command()
def reject(
    item_id: str = typer.Argument(...),
    reason: str = typer.Option(..., "--reason", help="Why it is rejected (kept in the item)."),
    json_: bool = JsonOpt,
) -> None:
    """Reject an item (it stays in the folder, marked rejected, with the reason)."""
    from .. import ops

    f = folder()
    with writing(f, "ok backfeed reject"):
        item = ops.decide_backfeed(f, item_id, approve=False, reason=reason, caller=cli_caller())
    emit(item, json_, plain=lambda i: f"rejected {i['id']}")
