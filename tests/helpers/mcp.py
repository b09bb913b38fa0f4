"""`ok mcp` over stdio, driven by the real MCP client."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from helpers.run import OK_BIN


def serve(
    roots: list[Path],
    fn: Callable[[Any], Awaitable[Any]],
    *extra: str,
    env: dict[str, str] | None = None,
) -> Any:
    """Spawn `ok mcp --root …` and run `fn(client)` against it."""
    from mcp import Client, StdioServerParameters

    args = ["mcp", *[a for r in roots for a in ("--root", str(r))], *extra]
    params = StdioServerParameters(command=OK_BIN, args=args, env={**os.environ, **(env or {})})

    async def main() -> Any:
        async with Client(params, read_timeout_seconds=120) as client:
            return await fn(client)

    try:
        return anyio.run(main)
    except BaseExceptionGroup as eg:  # show the test's own failure, not the task-group wrapping
        leaf: BaseException = eg
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        raise leaf from None


async def call(client: Any, tool: str, **args: Any) -> dict[str, Any]:
    r = await client.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return json.loads(r.content[0].text)


async def fail(client: Any, tool: str, **args: Any) -> str:
    r = await client.call_tool(tool, args)
    assert r.is_error, r.content[0].text[:300]
    return r.content[0].text
