"""`ok serve`: one resident process that owns knowledge folders and serves them over HTTP.

It keeps each folder's graph open (`Graph.resident`) and the embedding model loaded, runs
reads concurrently, each on its own connection, and writes one at a time per folder under
the folder's writer lock, as every other writer does. The HTTP API (`app.create_app`) is a
third adapter over `openkl.ops`, beside the CLI and the MCP server.
"""

from __future__ import annotations

from .app import create_app
from .stacks import Served, Stacks

__all__ = ["Served", "Stacks", "create_app"]
