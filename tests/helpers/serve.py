"""An `ok serve` process for a test (`Server`), and what the tests of its routes share: the
routes with their scopes, keys, MCP over HTTP, notes written by hand, /metrics samples."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from helpers.localsite import free_port
from helpers.run import OK_BIN


class Server:
    stack: str

    def __init__(
        self,
        root: Path,
        *args: str,
        more: tuple[Path, ...] = (),
        env: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = root.parent / f"serve-{self.port}.log"
        roots = [a for r in (root, *more) for a in ("--root", str(r))]
        self.proc = subprocess.Popen(
            [OK_BIN, "serve", *roots, "--port", str(self.port), *args],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a test may kill all of it
            env={**os.environ, "OK_NO_PROGRESS": "1", **(env or {})},
        )
        self.http = httpx.Client(base_url=self.url, timeout=60, headers=headers)
        # a start loads the model and syncs the folder: slow on a loaded machine; a server
        # that dies fails at once
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                r = self.http.get("/ready")
                if r.status_code == 200:
                    self.stack = r.json()["stacks"][0]
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError("the server did not become ready: " + self.log.read_text())

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=120)


def jwt_token(secret: str, scope: str, **claims: object) -> str:
    import jwt

    body = {"sub": "agent-7", "scope": scope, "exp": int(time.time()) + 600, **claims}
    return jwt.encode(body, secret, algorithm="HS256")


# every route, with the scope it needs; {s} is the stack
ROUTES = [
    ("GET", "/aks/v1/stacks/{s}", None, "read"),
    ("GET", "/aks/v1/stacks/{s}/documents", None, "read"),
    ("GET", "/aks/v1/entities?domain={s}", None, "read"),
    ("GET", "/aks/v1/entities/crispr?domain={s}", None, "read"),
    ("GET", "/aks/v1/traverse?start=crispr&domain={s}", None, "read"),
    ("POST", "/aks/v1/context", {"query": "gene", "domain": "{s}"}, "read"),
    ("GET", "/aks/v1/pages/crispr?domain={s}", None, "read"),
    ("GET", "/v1/{s}/status", None, "read"),
    ("GET", "/v1/{s}/search?q=gene", None, "read"),
    ("POST", "/v1/{s}/ask", {"question": "what is crispr?", "llm": False}, "read"),
    ("GET", "/v1/{s}/notes", None, "read"),
    ("POST", "/v1/{s}/notes", {"text": "A note from a caller."}, "write"),
    ("GET", "/v1/{s}/notes/m-x", None, "read"),
    ("PATCH", "/v1/{s}/notes/m-x", {"tags": ["x"]}, "write"),
    ("DELETE", "/v1/{s}/notes/m-x", None, "write"),
    ("GET", "/v1/{s}/documents", None, "read"),
    ("GET", "/v1/{s}/documents/x", None, "read"),
    ("POST", "/v1/{s}/cypher", {"query": "MATCH (d:Doc) RETURN count(*) AS n"}, "read"),
    ("POST", "/v1/{s}/sync", None, "write"),
    ("POST", "/v1/{s}/documents?name=up.md", {"t": "x"}, "write"),
    ("DELETE", "/v1/{s}/documents/x", None, "write"),
    ("GET", "/v1/{s}/documents/x/history", None, "read"),
    ("GET", "/v1/{s}/citations", None, "read"),
    ("POST", "/v1/{s}/citations/verify", {"items": ["c-x"]}, "read"),
    ("POST", "/v1/{s}/citations", {"items": ["x"], "persist": True}, "write"),
    ("GET", "/v1/{s}/events", None, "read"),
    ("GET", "/v1/{s}/lineage/x", None, "read"),
    ("GET", "/v1/{s}/triggers", None, "read"),
    ("POST", "/v1/{s}/triggers/scan", {"name": "nope"}, "write"),
    ("GET", "/stacks/{s}", None, "read"),
    ("GET", "/stacks/{s}/documents", None, "read"),
    ("POST", "/stacks/{s}/documents/x/ingest", None, "write"),
    ("POST", "/stacks/{s}/synthesize-descriptions?name=crispr", None, "write"),
    ("POST", "/aks/v1/entities/crispr/synthesize-description?domain={s}", None, "write"),
    ("GET", "/v1/{s}/distill/prompts", None, "read"),
    ("POST", "/v1/{s}/distill", {"text": "A claim [1].", "citations": ["x"]}, "write"),
    ("POST", "/v1/{s}/entities", {"name": "Tide table", "type": "Gadget"}, "write"),
    ("POST", "/v1/{s}/relationships", {"from": "a", "to": "b", "type": "??"}, "write"),
]


def call_route(h: httpx.Client, method: str, path: str, body: object, stack: str, token: str):
    path = path.replace("{s}", stack)
    if isinstance(body, dict):
        body = {k: (v.replace("{s}", stack) if isinstance(v, str) else v) for k, v in body.items()}
    return h.request(
        method, path, json=body, headers={"Authorization": f"Bearer {token}"} if token else {}
    )


def mcp_http(url: str, fn: Any, token: str | None = None) -> Any:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            transport = streamable_http_client(f"{url}/mcp", http_client=http)
            async with Client(transport, read_timeout_seconds=120) as client:
                return await fn(client)

    try:
        return anyio.run(main)
    except BaseExceptionGroup as eg:
        leaf: BaseException = eg
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        raise leaf from None


def hand_written_note(root: Path, nid: str, body: str) -> Path:
    path = root / "memories/by_date/2026-01/05" / f"{nid}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nid: {nid}\nts: 2026-01-05T10:00:00Z\n---\n{body}\n")
    return path


def watch_bursts(h: httpx.Client) -> dict[str, float]:
    """The watch's bursts by outcome, from /metrics."""
    out: dict[str, float] = {}
    for line in h.get("/metrics").text.splitlines():
        if line.startswith("ok_watch_bursts_total{"):
            outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
            out[outcome] = out.get(outcome, 0) + float(line.rsplit(" ", 1)[1])
    return out


def metric_value(text: str, name: str, **labels: str) -> float:
    """The value of one sample of /metrics, 0 when it is not there."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        got = dict(part.split("=", 1) for part in line[len(name) + 1 : line.index("}")].split(","))
        if all(got.get(k) == f'"{v}"' for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
