"""`ok serve`: own knowledge folders in one resident process and serve them over HTTP."""

from __future__ import annotations

import ipaddress
import signal
import socket

import typer

from ..errors import BadInput, UsageError
from .output import state


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    roots: list[str] = typer.Option(
        None,
        "--root",
        metavar="DIR",
        help="A folder to serve (repeatable; each is a stack named by its config domain). "
        "Default: the current folder.",
    ),
    host: str = typer.Option("127.0.0.1", help="The address to listen on."),
    port: int = typer.Option(8765, min=0, max=65535, help="The TCP port (0: any free one)."),
) -> None:
    """Serve the folder(s) over HTTP from one process that keeps the graph and the model open.

    Reads run concurrently and writes one at a time, under the folder's writer lock. On
    start it brings each index in line with its files (`ok sync`). The API is described at
    /docs; the AKS v1 surface is under /aks/v1, the rest under /v1/STACK.

    Examples:

    \b
      ok serve --root ~/kb                        # http://127.0.0.1:8765/docs
      curl -s 'http://127.0.0.1:8765/v1/kb/search?q=rollback&k=3' | jq '.hits[].quote'
    """
    if not _loopback(host):
        raise UsageError(
            f"ok serve listens only on a loopback address, not {host!r}",
            "use --host 127.0.0.1 and a reverse proxy in front",
        )
    import uvicorn

    from ..server import Stacks, create_app

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise BadInput(
            f"cannot listen on {host}:{port}: {e.strerror}", "choose another --port (0: any)"
        ) from e
    url = f"http://{host}:{sock.getsockname()[1]}"
    stacks = Stacks(list(roots or []) or [state.root], url=url)
    try:
        stacks.open()
        app = create_app(stacks)
        print(f"serving {', '.join(stacks.by_name)} on {url} (Ctrl-C stops)", flush=True)
        # uvicorn finishes the requests under way on SIGTERM or SIGINT, then sends the
        # signal again: a stop asked for is a clean exit, not a death by signal
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: None)
        config = uvicorn.Config(app, log_level="warning", access_log=False)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        stacks.close()
        sock.close()
    print("stopped", flush=True)
