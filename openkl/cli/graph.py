"""`ok graph …`: the derived graph."""

from __future__ import annotations

from typing import Any

import typer

from .common import folder, writing
from .output import JsonOpt, emit

app = typer.Typer(help="The derived graph: Cypher, entities, exports.", no_args_is_help=True)


@app.command()
def cypher(
    query: str = typer.Argument(..., help="A Cypher query (`-` reads stdin)."),
    write: bool = typer.Option(False, "--write", help="Allow the query to change the graph."),
    param: list[str] = typer.Option(None, "--param", "-p", help="NAME=VALUE (JSON values ok)."),
    json_: bool = JsonOpt,
) -> None:
    """Run Cypher against the graph (read-only unless --write)."""
    import json

    from ..indexer import open_graph
    from .output import read_stdin_text

    if query == "-":
        query = read_stdin_text()
    params: dict[str, Any] = {}
    for p in param or []:
        if "=" not in p:
            raise typer.BadParameter(f"--param {p!r} must look like NAME=VALUE")
        k, v = p.split("=", 1)
        try:
            params[k] = json.loads(v)
        except ValueError:
            params[k] = v
    f = folder()
    if write:
        with writing(f, "ok graph cypher --write"), open_graph(f, write=True) as g:
            rows = g.query(query, params)
            f.log_op("graph.cypher", query=query)
    else:
        with open_graph(f) as g:
            rows = g.query(query, params)
    emit(rows, json_, plain=_tsv)


def _tsv(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    return "\n".join(["\t".join(cols)] + ["\t".join(str(r[c]) for c in cols) for r in rows])


@app.command()
def lineage(
    ref: str = typer.Argument(..., help="A note id, chunk id or document id/path."),
    depth: int = typer.Option(5, "--depth", help="How many hops to walk."),
    direction: str = typer.Option("both", "--direction",
                                  help="up (where it came from), down (what came of it), both."),
    json_: bool = JsonOpt,
) -> None:
    """Walk DERIVED_FROM and SUPERSEDES: a note's sources, a document's versions."""
    from ..indexer import open_graph
    from ..lineage import lineage as walk

    f = folder()
    with open_graph(f) as g:
        data = walk(f, g, ref, depth=depth, direction=direction)

    def plain(d: dict[str, Any]) -> str:
        r = d["root"]
        lines = [f"{r['kind']} {r['id']}  {r.get('path') or r.get('title') or ''}"]
        for n in d["nodes"]:
            state = "" if n.get("current", True) else "  (old version)"
            lines.append(f"{'  ' * n['depth']}{n['rel']} {n['kind']} {n['id']}  "
                         f"{n.get('path') or n.get('title') or ''}{state}")
        return "\n".join(lines)

    emit(data, json_, plain=plain)
