"""`ok mcp`: serve knowledge folders to agents over MCP (stdio)."""

from __future__ import annotations

import typer

from .output import state


def mcp(
    roots: list[str] = typer.Option(
        None,
        "--root",
        metavar="DIR",
        help="A folder to serve (repeatable; each "
        "is a stack named by its config domain). Default: the "
        "current folder.",
    ),
    read_only: bool = typer.Option(
        False,
        "--read-only",
        help="Leave out the write tools (mem_add, distill_create, store_ingest, persisted citations).",
    ),
    list_tools: bool = typer.Option(
        False, "--list-tools", help="Print the tools as JSON and exit instead of serving."
    ),
) -> None:
    """Serve the folder(s) over MCP on stdin/stdout (register it with your agent's client).

    A client starts it itself; in its MCP configuration:

    \b
      {"mcpServers": {"openkl": {"command": "ok", "args": ["mcp", "--root", "/path/to/kb"]}}}

    Examples:

    \b
      ok mcp --list-tools | jq -r '.[].name'      # what an agent will see
      ok mcp --root ~/kb --root ~/work-kb --read-only
    """
    from ..mcp.tools import KnowledgeServer, describe, serve

    chosen: list[str | None] = list(roots or []) or [state.root]
    if list_tools:
        from .output import emit_json

        ks = KnowledgeServer(chosen, read_only=read_only)
        emit_json(
            [
                {"name": fn.__name__, "annotations": ann, "description": describe(fn)}
                for fn, ann in ks.tool_specs()
            ]
        )
        return
    serve(chosen, read_only=read_only)
