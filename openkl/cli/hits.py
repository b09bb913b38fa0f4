"""`ok search` and `ok mem search`: run one search, then print its hits (a table on a
terminal, one record per hit when piped, JSON with --json)."""

from __future__ import annotations

from typing import Any

from .. import ops
from . import output
from .common import folder, split_labels
from .output import emit


def run_search(
    query: str,
    *,
    k: int | None,
    scope: str,
    mode: str | None,
    tags: list[str] | None,
    topics: list[str] | None,
    path: str | None,
    since: str | None,
    until: str | None,
    per_doc: int | None,
    diverse: bool,
    explain: bool,
    show_query: bool,
    json_: bool,
) -> None:
    from ..indexer import embedder, files_newer_than_index, open_graph
    from ..search import Filters

    if query == "-":
        query = output.read_stdin_text().strip()
    f = folder()
    opts = ops.search_options(f, k, mode, per_doc, diverse, names=("-k", "--per-doc"))
    flt = Filters(
        tags=split_labels(tags), topics=split_labels(topics), path=path, since=since, until=until
    ).normalized("--since", "--until")
    with open_graph(f) as g:
        if show_query:
            g.trace = []
        hits = ops.search(
            f, g, query, opts, scope=scope, filters=flt, explain=explain, embedder=embedder(f)
        )
        if show_query:
            for q in g.trace or []:
                output.info(q)
    emit(
        hits,
        json_,
        render=lambda h: _render_hits(h, query, explain),
        plain=lambda h: _plain_hits(h, query),
    )
    if files_newer_than_index(f):
        output.warn("files changed since the index was last updated; run `ok sync`")


def _plain_hits(hits: list[dict[str, Any]], query: str = "") -> str:
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


def _render_hits(hits: list[dict[str, Any]], query: str, explain: bool) -> None:
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
