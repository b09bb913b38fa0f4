"""`ok search` and `ok mem search`: print a search's hits (a table on a terminal, one line
per hit when piped, records with --json/--format)."""

from __future__ import annotations

import os
from typing import Any

from .. import ops
from ..errors import NOTHING_FOUND
from ..files.folder import Folder
from ..records import Cite
from . import output


def query_arg(query: str) -> str:
    """The query as given, or read from stdin for `-`."""
    return output.read_stdin_text().strip() if query == "-" else query


def search_request(
    query: str,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    where: list[str] | None = None,
    **given: Any,
) -> ops.SearchRequest:
    """A search as a command asks for it (`given`: its other options, as `SearchRequest`
    names them): the query read from stdin for `-`, tags and topics split at commas, its
    flags named in error messages, files changed since the index was updated looked for,
    and the hits remembered for `ok open RANK`."""
    from .common import split_labels

    return ops.SearchRequest(
        query_arg(query),
        tags=tuple(split_labels(tags)),
        topics=tuple(split_labels(topics)),
        where=tuple(where or ()),
        check_stale=True,
        remember=True,
        names=ops.FLAGS,
        **given,
    )


def show_hits(
    f: Folder,
    res: ops.SearchResult,
    json_: bool,
    explain: bool = False,
    fmt: str | None = None,
    filtered: bool = False,
) -> None:
    """Print a search's hits, the Cypher it ran (stderr) and a staleness warning; with no
    good match, or no hit at all (`filtered`: filters were given), say so on stderr (`[]`
    for --json) and exit 1, as rg does. A person reads each hit's place as `path:L1-L2`
    (lines); the records keep `loc` in characters."""
    for q in res.queries:
        output.info(q)
    if res.warning:
        output.warn(res.warning)
    if res.no_good_match or not res.hits:
        import typer

        if output.want_json(json_) or fmt == "json":
            output.emit_json([])
        output.info(no_good_match_line(res) if res.no_good_match else _no_hit(res, filtered))
        if res.stale:
            output.warn("files changed since the index was last updated; run `ok sync`")
        raise typer.Exit(NOTHING_FOUND)
    hits = list(res.hits)

    def lines() -> list[str]:
        return [w[len(h["path"]) :] for h, w in zip(hits, ops.where(f, hits), strict=True)]

    output.emit_records(
        hits,
        json_,
        fmt,
        render=lambda h: _render_hits(h, res.query, explain, lines()),
        plain=lambda h: _plain_hits(h, res.query, explain, lines()),
    )
    if res.stale:
        output.warn("files changed since the index was last updated; run `ok sync`")


def _no_hit(res: ops.SearchResult, filtered: bool) -> str:
    if filtered:
        return (
            f"no match for {res.query!r} within the filters given (hint: loosen --tag, "
            "--topic, --path, --since or --until)"
        )
    return (
        f"no match for {res.query!r} in what is indexed (hint: other words, `ok grep` for "
        "exact text, `ok status` for what is indexed)"
    )


def no_good_match_line(res: ops.SearchResult) -> str:
    """The one stderr line of a search that found nothing near its query."""
    return (
        f"no good match for {res.query!r}: none of its words occur, and the nearest "
        f"passage's similarity is {res.best_score or 0.0:.2f}, under --min-score "
        f"{res.options.min_score:g} (hint: --min-score 0 shows the nearest passages anyway)"
    )


def shown_path(hit: Cite | dict[str, Any]) -> str:
    """The hit's file as a path to type or paste here: relative to the working directory
    when the file is at most two folders up from it, else absolute."""
    full = hit.get("abs_path") or hit["path"]
    try:
        rel = os.path.relpath(full)
    except ValueError:  # another drive (Windows)
        return str(full)
    return str(full) if rel.startswith(os.path.join("..", "..", "..")) else rel


def _signals(h: Cite, sep: str = " ") -> str:
    """Every signal of a hit as name=score#rank, then any other values it reports
    (name=score#rank,key=value…), whatever signals the search gives."""

    def num(v: object) -> str:
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    parts = []
    for name, s in (h.get("signals") or {}).items():
        sig: dict[str, Any] = dict(s)
        part = f"{name}={num(sig.pop('score', ''))}"
        if "rank" in sig:
            part += f"#{sig.pop('rank')}"
        part += "".join(f",{k}={num(v)}" for k, v in sig.items() if not isinstance(v, dict | list))
        parts.append(part)
    for name in ("recency", "drift"):  # what multiplied the fused score
        v = h.get(name)
        if isinstance(v, dict):  # its own value first, then the others: drift=0.2,factor=0.98
            rest = "".join(f",{k}={num(x)}" for k, x in v.items() if k != name)
            parts.append(f"{name}={num(v.get(name, ''))}{rest}")
        elif v is not None:
            parts.append(f"{name}={num(v)}")
    return sep.join(parts)


def _plain_hits(
    hits: list[Cite], query: str = "", explain: bool = False, lines: list[str] | None = None
) -> str:
    """One line per hit, tab-separated: rank, score, id, path:L1-L2 (relative to the root,
    as in the JSON; `ok open` takes it), snippet, and with --explain the signals; `cut -f3`
    gives the ids."""
    from ..graph.search import snippet

    out = []
    for i, h in enumerate(hits):
        where = h["path"] + (lines[i] if lines else "")
        fields = [str(h.get("rank", "")), f"{h.get('score', 0.0):.4f}", h["id"], where]
        fields.append(snippet(h["quote"], query).replace("\t", " "))
        if explain:
            fields.append(_signals(h))
        out.append("\t".join(fields))
    return "\n".join(out)


def _render_hits(
    hits: list[Cite], query: str, explain: bool, lines: list[str] | None = None
) -> None:
    """A table that reads at 80 columns: rank and score, then the id and the path on one line
    (the id never folds, so it can be copied), the title, and the passage wrapped below."""
    import re

    from rich.table import Table
    from rich.text import Text

    from ..graph.search import snippet

    con = output.console()
    if not hits:
        output.console(stderr=True).print("no results")
        return
    words = [w for w in re.findall(r"\w{3,}", query.lower())]
    table = Table(box=None, expand=True, padding=(0, 2, 1, 0), show_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("score", no_wrap=True)
    table.add_column("hit", ratio=1)
    room = max(20, con.width - 13)  # what the hit column gets, padding taken off
    for i, h in enumerate(hits):
        cell = Text()
        where = shown_path(h) + (lines[i] if lines else "")
        cell.append(h["id"], style="bold cyan")
        # the path beside the id when both fit, else on a line of its own
        cell.append("  " if len(h["id"]) + 2 + len(where) <= room else "\n")
        cell.append(where, style="green")
        title = h.get("title") or ""
        if title and h.get("type") != "memory":
            cell.append("\n" + title, style="bold")
        passage = Text(snippet(h["quote"], query, 320))
        for w in words:
            passage.highlight_words([w], style="bold yellow", case_sensitive=False)
        cell.append("\n")
        cell.append_text(passage)
        if explain and h.get("signals"):
            cell.append("\n" + _signals(h, "  "), style="dim")
        table.add_row(str(h.get("rank", "")), f"{h.get('score', 0.0):.3f}", cell)
    con.print(table)


def open_spot(spot: Any, json_: bool) -> None:
    """Open the spot in the editor ($VISUAL, else $EDITOR, else vi) at its line when stdout
    is a terminal; else print it: a `path:line` header, then the lines."""
    import sys
    from pathlib import Path

    from . import editor

    if output.want_json(json_):
        output.emit_json(spot)
        return
    if sys.stdout.isatty():  # at the best sentence for the search, as the explorer marks it
        editor.edit(Path(spot["abs_path"]), saved=None, line=spot.get("best_line", spot["line"]))
        return
    span = f"{spot['line']}" + (f"-{spot['end_line']}" if spot["end_line"] != spot["line"] else "")
    sys.stdout.write(f"{shown_path(spot)}:{span}\n{spot['text']}\n")
