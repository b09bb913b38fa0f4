"""MCP over streamable HTTP at `/mcp`: the MCP servers over the stacks served (as `ok mcp`
over the same folders), every tool to a caller who may write every stack, the read-only
ones to a caller who may read them all."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette.routing import Route

from .auth import Caller
from .shared import error
from .stacks import Stacks

PATH = "/mcp"


class Mcp:
    """The MCP servers over the stacks served, as `ok mcp` over the same folders: all
    tools, and the read-only ones. `follow()` brings them in line when stacks come and go."""

    def __init__(self, stacks: Stacks) -> None:
        from ..mcp.tools import KnowledgeServer

        self.stacks = stacks
        roots = [st.folder.root for st in stacks.by_name.values()]
        self._servers = [KnowledgeServer(roots), KnowledgeServer(roots, read_only=True)]
        for ks in self._servers:
            ks.served = True
        self.full, self.read = (ks.build() for ks in self._servers)
        self.follow()

    @property
    def names(self) -> list[str]:
        return list(self.stacks.by_name)

    def http_apps(self, path: str) -> tuple[Any, Any]:
        """The ASGI apps of both servers over streamable HTTP at `path`."""
        from ..mcp.tools import http_app

        return http_app(self.full, path), http_app(self.read, path)

    def follow(self) -> None:
        from ..mcp.tools import Stack

        for ks in self._servers:
            ks.stacks = {
                name: ks.stacks.get(name) or Stack(name, st.folder)
                for name, st in self.stacks.by_name.items()
            }
            ks.backends = {
                name: st.backend.reader
                for name, st in self.stacks.by_name.items()
                if st.backend is not None
            }
            ks.after_writes = {
                name: st.backend.after_write
                for name, st in self.stacks.by_name.items()
                if st.backend is not None
            }


class _McpGate:
    """MCP over streamable HTTP: every tool to a caller who may write every stack, the
    read-only tools to one who may read them all (an ASGI app, so the SDK streams)."""

    def __init__(self, mcp: Mcp, full: Any, read: Any) -> None:
        self.mcp, self.full, self.read = mcp, full, read

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        caller: Caller = scope["state"]["caller"]
        names = self.mcp.names
        if caller.allows_all(names, "write"):
            await self.full(scope, receive, send)
        elif caller.allows_all(names, "read"):
            await self.read(scope, receive, send)
        else:
            resp = error(
                403,
                f"{caller.who} may not read every stack this server holds, as MCP needs",
                "use the HTTP routes of your stack, or a key for each stack",
            )
            await resp(scope, receive, send)


def mount(app: FastAPI, mcp: Mcp) -> None:
    """`/mcp` on `app`, after its routes (an ASGI app of its own: the SDK streams)."""
    full, read = mcp.http_apps(PATH)
    app.router.routes.append(Route(PATH, _McpGate(mcp, full, read), include_in_schema=False))
