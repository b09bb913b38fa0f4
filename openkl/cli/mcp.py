"""`ok mcp`: serve knowledge folders to agents over MCP (stdio)."""

from __future__ import annotations

import typer

from .output import state


def mcp(
    roots: list[str] = typer.Option(None, "--root", metavar="DIR", help="A folder to serve (repeatable; each "
                                    "is a stack named by its config domain). Default: the "
                                    "current folder."),
    read_only: bool = typer.Option(False, "--read-only", help="Leave out the write tools "
                                   "(mem_add, store_ingest, persisted citations)."),
    list_tools: bool = typer.Option(False, "--list-tools", help="Print the tools as JSON and "
                                    "exit instead of serving."),
) -> None:
    """Serve the folder(s) over MCP on stdin/stdout (register it with your agent's client)."""
    from ..mcp_server import KnowledgeServer, serve

    chosen = list(roots or []) or [state.root]
    if list_tools:
        from .output import emit_json

        ks = KnowledgeServer(chosen, read_only=read_only)  # type: ignore[arg-type]
        emit_json([{"name": fn.__name__, "annotations": ann,
                    "description": (fn.__doc__ or "").split("\n")[0]}
                   for fn, ann in ks.tool_specs()])
        return
    serve(chosen, read_only=read_only)  # type: ignore[arg-type]
