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
