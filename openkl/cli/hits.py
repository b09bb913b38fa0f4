"""`ok search` and `ok mem search`: print a search's hits (a table on a
terminal, one record per hit when piped, JSON with --json)."""

from __future__ import annotations

from .. import ops
from ..records import Cite
from . import output
from .output import emit


def query_arg(query: str) -> str:
    """The query as given, or read from stdin for `-`."""
    return output.read_stdin_text().strip() if query == "-" else query


def show_hits(res: ops.SearchResult, json_: bool, explain: bool = False) -> None:
    """Print a search's hits, the Cypher it ran (stderr) and a staleness warning; with no
    good match, say so on stderr (`[]` for --json) and exit 1, as rg does."""
    for q in res.queries:
        output.info(q)
    if res.no_good_match:
        import typer

        if output.want_json(json_):
            output.emit_json([])
        output.info(no_good_match_line(res))
        if res.stale:
            output.warn("files changed since the index was last updated; run `ok sync`")
        raise typer.Exit(1)
    emit(
        res.hits,
        json_,
        render=lambda h: _render_hits(h, res.query, explain),
        plain=lambda h: _plain_hits(h, res.query),
    )
    if res.stale:
        output.warn("files changed since the index was last updated; run `ok sync`")


def no_good_match_line(res: ops.SearchResult) -> str:
    """The one stderr line of a search that found nothing near its query."""
    return (
        f"no good match for {res.query!r}: none of its words occur, and the nearest "
        f"passage's similarity is {res.best_score or 0.0:.2f}, under --min-score "
        f"{res.options.min_score:g} (hint: --min-score 0 shows the nearest passages anyway)"
    )


def _plain_hits(hits: list[Cite], query: str = "") -> str:
    from ..search import snippet

    lines = []
    for h in hits:
        lines.append(f"{h['rank']}\t{h['score']:.4f}\t{h['id']}\t{h['path']}")
        if h.get("signals"):
            lines.append(
                "\t"
                + "  ".join(
                    f"{n}={s['score']:.4f} (rank {s['rank']})" for n, s in h["signals"].items()
                )
            )
        lines.append(f"\t{snippet(h['quote'], query)}")
    return "\n".join(lines) if hits else ""


def _render_hits(hits: list[Cite], query: str, explain: bool) -> None:
    import re

    from rich.table import Table
    from rich.text import Text

    from ..search import snippet

    if not hits:
        output.console(stderr=True).print("no results")
        return
    words = [w for w in re.findall(r"\w{3,}", query.lower())]
    table = Table(show_lines=True, expand=True)
    table.add_column("#", justify="right", width=3)
    table.add_column("score", width=7)
    table.add_column("where", ratio=1, overflow="fold")
    table.add_column("passage", ratio=3)
    for h in hits:
        text = Text(snippet(h["quote"], query, 320))
        for w in words:
            text.highlight_words([w], style="bold yellow", case_sensitive=False)
        where = f"{h['title'] or h['path']}\n[dim]{h['id']}[/dim]"
        if explain and h.get("signals"):
            where += "\n" + " ".join(
                f"{n}:{s['score']:.3f}#{s['rank']}" for n, s in h["signals"].items()
            )
        table.add_row(str(h["rank"]), f"{h['score']:.3f}", where, text)
    output.console().print(table)
