"""The MCP server (`tools`): the operations as tools for agents, over stdio (`ok mcp`) or
HTTP (`ok serve` at `/mcp`)."""
