"""An MCP tool is registered once, in `settings.MCP_TOOL_TABLE`: that row lists it, describes
it (its method's docstring), gives its annotations, and declares its time cap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.run import run_ok

from openkl import settings
from openkl.mcp.tools import KnowledgeServer, describe


def listed(kf: Path, *flags: str) -> dict[str, dict[str, Any]]:
    r = run_ok("mcp", "--list-tools", "--root", str(kf), *flags)
    assert r.code == 0, r.err
    return {t["name"]: t for t in r.json()}


def test_each_row_is_a_listed_described_tool_with_a_time_cap(kf: Path) -> None:
    tools = listed(kf)
    assert list(tools) == [t.name for t in settings.MCP_TOOL_TABLE]
    server = KnowledgeServer([kf])
    for row in settings.MCP_TOOL_TABLE:
        tool = tools[row.name]
        assert tool["description"] == describe(getattr(server, row.name)) != row.name
        ann = tool["annotations"]
        assert ann["read_only_hint"] is (row.does in ("read", "read-out")), row.name
        assert ann["open_world_hint"] is (row.does == "read-out"), row.name
        assert ann["idempotent_hint"] is (row.does != "add"), row.name
        assert ann["destructive_hint"] is False
        # its own time cap is a setting, defaulting to the row's
        r = run_ok("config", "get", f"mcp.timeouts.{row.name}", "--json")
        assert r.code == 0, r.err
        assert r.json()["value"] == row.timeout, row.name
        assert run_ok("config", "set", f"mcp.timeouts.{row.name}", "7").code == 0
    # a method that is not a row is no tool, and has no time cap
    assert "warm" not in tools and "read_note" not in tools
    r = run_ok("config", "set", "mcp.timeouts.warm", "7")
    assert r.code != 0 and "mcp.timeouts.warm" in r.err


def test_a_read_only_server_leaves_out_the_rows_that_write(kf: Path) -> None:
    tools = listed(kf, "--read-only")
    want = [t.name for t in settings.MCP_TOOL_TABLE if t.does not in ("add", "write")]
    assert list(tools) == want
    assert "mem_add" not in tools and "graph_add_entity" not in tools
    assert tools["cite_make"]["annotations"]["read_only_hint"] is True  # persisting refused


class Echoing(KnowledgeServer):
    def echo(self, text: str) -> dict[str, Any]:
        """Say `text` back."""
        return {"text": text}


def test_a_new_row_is_all_a_new_tool_needs(kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = Echoing([kf])
    assert "echo" not in [fn.__name__ for fn, _ in server.tool_specs()]
    table = (*settings.MCP_TOOL_TABLE, settings.McpTool("echo"))
    monkeypatch.setattr(settings, "MCP_TOOL_TABLE", table)
    mcp = server.build()
    tools = {t.name: t for t in anyio.run(mcp.list_tools)}
    assert list(tools)[-1] == "echo"
    assert tools["echo"].description == "Say `text` back."
    assert tools["echo"].annotations.read_only_hint is True
    assert tools["echo"].input_schema["required"] == ["text"]
