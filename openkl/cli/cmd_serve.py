"""`ok serve`: own knowledge folders in one resident process and serve them over HTTP;
`ok serve keys`: the API keys that open them."""

from __future__ import annotations

import contextlib
import ipaddress
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import typer

from ..errors import BadInput, UsageError
from .common import TakeOverOpt
from .output import JsonOpt, emit, state

if TYPE_CHECKING:
    from ..files.folder import Folder
    from ..server.auth import JwtConfig

app = typer.Typer(no_args_is_help=False, invoke_without_command=True)
keys_app = typer.Typer(help="API keys of a folder's stack: add, list, revoke.")
app.add_typer(keys_app, name="keys")

ROOT_OPT = typer.Option(None, "--root", metavar="DIR", help="The folder (default: the current).")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.callback()
def serve(
    ctx: typer.Context,
    roots: list[str] = typer.Option(
        None,
        "--root",
        metavar="DIR",
        help="A folder to serve (repeatable; each is a stack named by its config domain). "
        "Default: the current folder.",
    ),
    host: str = typer.Option("127.0.0.1", help="The address to listen on."),
    port: int = typer.Option(8765, min=0, max=65535, help="The TCP port (0: any free one)."),
    auth: bool = typer.Option(
        False,
        "--auth",
        help="Ask for credentials on loopback too (they are always asked for elsewhere).",
    ),
    socket_only: bool = typer.Option(
        False,
        "--socket-only",
        help="No TCP port: the API on the unix socket .ok/http.sock only (curl "
        "--unix-socket), for this machine's users with access to the folder.",
    ),
    backend: str | None = typer.Option(
        None,
        "--backend",
        metavar="URI",
        help="Serve every read (search, ask, lineage, entities; HTTP and MCP) from PostgreSQL "
        "(postgresql://…; default: each folder's graph.backend setting), syncing each "
        "folder's stack into it at start and after every write; Cypher stays on the Kùzu "
        "graph. One writer per stack: a second server waits up to lock_timeout, then says "
        "who holds it.",
    ),
    resident: bool = typer.Option(
        False,
        "--resident",
        hidden=True,  # how `ok` starts a folder's resident process (cli.spawn, `ok daemon`)
        help="Be the folder's resident process: no HTTP, exits when idle.",
    ),
    take_over: bool = TakeOverOpt,
    allow_exec_triggers: bool = typer.Option(
        False,
        "--allow-exec-triggers",
        help="Let admins add triggers with a command (exec) over HTTP, and approve them "
        "as they do: the command runs on this machine as this user. Without it only `ok "
        "trigger add --exec` on this machine adds one.",
    ),
) -> None:
    """Serve the folder(s) over HTTP from one process that keeps the graph and the model open.

    Reads run concurrently and writes one at a time, under the folder's writer lock. On
    start it brings each index in line with its files (`ok sync`); while it runs, other `ok`
    commands on the folder say it is served. A web explorer is at / (search, documents,
    the entity graph, events and citations; open it in a browser). The API is described
    at /docs; the AKS v1 surface is under /aks/v1, the rest under /v1/STACK.

    Credentials are needed on any address but loopback, or with --auth: an API key
    (`ok serve keys add`) or a JWT (serve.jwt_* settings), sent as `Authorization: Bearer`.
    It answers only its own Host names (loopback, --host, serve.allowed_hosts) and refuses
    a browser's requests from other origins than its own (serve.cors_origins allows more),
    so a web page cannot write into the folder.

    Examples:

    \b
      ok serve --root ~/kb                        # http://127.0.0.1:8765/ (and /docs)
      curl -s 'http://127.0.0.1:8765/v1/kb/search?q=rollback&k=3' | jq '.hits[].quote'
      ok serve keys add laptop --scope read       # prints the key once
      ok serve --host 0.0.0.0 --root ~/kb         # keys or JWTs required
      ok serve --socket-only &                    # no port; then, from the folder:
      curl -s --unix-socket .ok/http.sock 'http://ok/v1/kb/search?q=rollback'

    While it runs, every other `ok` command of the same user on the folder (and `ok mcp`)
    runs in it, through a socket in a private directory ($XDG_RUNTIME_DIR/openkl, else
    ~/.cache/openkl/run), named in .ok/serve.json: the same output and exit code, without
    loading the graph or the model again (OK_NO_ROUTE=1 keeps a command out).

    Trigger commands run with an environment of their own, never the server's secrets:
    the values of its environment are blanked where /proc shows them.
    """
    if ctx.invoked_subcommand is not None:
        return
    import functools

    if resident:
        from ..server import resident as resident_process

        run_here = functools.partial((ctx.obj or {})["run"], routed=True)
        code = resident_process.serve(roots[0] if roots else state.root, run_here)
        raise typer.Exit(code)

    from ..server import environ

    environ.hide()  # before anything reads a variable and keeps where it was

    from .. import ops
    from ..server import Stacks, create_app
    from ..server.auth import Authenticator, RateLimiter, load_keys
    from ..server.command_socket import Router, socket_path
    from ..server.guard import Guard

    # the `ok` command line's own runner (cli.app.run), for other processes' commands
    run = functools.partial((ctx.obj or {})["run"], routed=True)
    stacks = Stacks(list(roots or []) or [state.root], backend=backend, take_over=take_over)
    first = next(iter(stacks.by_name.values())).folder
    jwt = _jwt_config(first)
    from ..knowledge import triggers

    triggers.withhold(first.secret_env("serve.jwt_secret_env"))  # no command is given it
    need_auth = auth or not (socket_only or _loopback(host))
    if (
        need_auth
        and not (jwt.secret or jwt.public_key)
        and not any(load_keys(st.folder) for st in stacks.by_name.values())
    ):
        raise UsageError(
            f"serving on {host} needs credentials, and no folder has an API key or JWT setting",
            "add a key first: ok serve keys add NAME --scope read",
        )
    authenticator = (
        Authenticator({n: st.folder for n, st in stacks.by_name.items()}, jwt)
        if need_auth
        else None
    )
    limiter = RateLimiter(first.setting("serve.rate_limit"), first.setting("serve.burst"))
    local_limiter = RateLimiter(
        first.setting("serve.local_rate_limit"), first.setting("serve.burst")
    )
    for st in stacks.by_name.values():
        _take_over(st.folder)
        st.folder.refuse_if_served()  # before the sockets of a live server are taken over
    http_path = socket_path(first.ok_dir, "http")
    if socket_only:
        sock = _listen_unix(http_path)
        stacks.url = "http+unix://" + quote(str(http_path), safe="")
    else:
        sock = _listen(host, port)
        stacks.url = f"http://{host}:{sock.getsockname()[1]}"
    router = Router(
        first.ok_dir, run, roots=lambda: [st.folder.root for st in stacks.by_name.values()]
    )
    # a stop asked for during the start (its sync) lets that write finish, then ends cleanly
    asked: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: asked.append(signum))
    try:
        try:
            router.start()
        except OSError as e:
            raise BadInput(
                e.strerror or str(e),
                "set XDG_RUNTIME_DIR to a directory of yours that only you may enter (0700)",
            ) from e
        stacks.socket = router.path
        stacks.open()
        if asked:
            print("stopping: asked to before the start was done", file=sys.stderr, flush=True)
            return
        for name, st in stacks.by_name.items():
            said = f"{name}: " if len(stacks.by_name) > 1 else ""
            print(f"{said}inference: {ops.inference(st.folder)}", file=sys.stderr, flush=True)
        cors = _listed(first.setting("serve.cors_origins"))
        api = create_app(
            stacks,
            authenticator,
            limiter,
            local_limiter,
            host=host,
            access_log=first.setting("serve.access_log"),
            cors_origins=cors,
            allow_exec_triggers=allow_exec_triggers,
            guard=Guard.of(
                host, _listed(first.setting("serve.allowed_hosts")), cors, unix=socket_only
            ),
        )
        stacks.start_background(
            watch=first.setting("serve.watch"), refresh_every=first.setting("serve.refresh_every")
        )
        print(f"serving {', '.join(stacks.by_name)} on {stacks.url} (Ctrl-C stops)", flush=True)

        def stopping() -> None:  # background threads, followers and routed commands end now
            stacks.stopping()
            router.stop()

        _run(api, sock, stopping, first.setting("serve.header_timeout"))
    finally:
        router.close()
        stacks.close()
        sock.close()
        if socket_only:
            http_path.unlink(missing_ok=True)
    print("stopped", flush=True)


def _take_over(folder: Folder) -> None:
    """Stop the folder's resident process, if it has one: a server started by hand takes
    its place."""
    from . import spawn

    try:
        pid = spawn.stop(folder.root)
    except TimeoutError as e:
        raise BadInput(str(e), "stop it (`ok daemon stop`), then start `ok serve` again") from e
    if pid is not None:
        print(
            f"stopped {folder.root}'s resident process (pid {pid}): this server takes its place",
            file=sys.stderr,
            flush=True,
        )


def _listed(value: str | None) -> list[str]:
    """A comma-separated setting's items."""
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def _jwt_config(folder: Folder) -> JwtConfig:
    """How the server checks JWTs, from the first folder's serve.jwt_* settings."""
    import os
    from pathlib import Path

    from ..server.auth import JwtConfig

    env = folder.secret_env("serve.jwt_secret_env")
    secret = os.environ.get(env) if env else None
    if env and not secret:
        raise BadInput(
            f"serve.jwt_secret_env names {env}, which is not set", f"export {env}=… first"
        )
    pem = folder.setting("serve.jwt_public_key")
    public = None
    if pem:
        try:
            public = Path(pem).expanduser().read_text()
        except OSError as e:
            raise BadInput(f"cannot read serve.jwt_public_key {pem}: {e.strerror}") from e
    return JwtConfig(
        secret=secret,
        public_key=public,
        issuer=folder.setting("serve.jwt_issuer"),
        audience=folder.setting("serve.jwt_audience"),
    )


def _listen(host: str, port: int) -> socket.socket:
    # IPPROTO_TCP named: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets
    # that say they are TCP, and with it on, a response's body waited for the client's
    # delayed acknowledgement of its headers (40 ms on Linux)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise BadInput(
            f"cannot listen on {host}:{port}: {e.strerror}", "choose another --port (0: any)"
        ) from e
    return sock


def _listen_unix(path: Path) -> socket.socket:
    import os

    path.unlink(missing_ok=True)  # a killed server's: its claim was found stale
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as e:
        sock.close()
        raise BadInput(f"cannot listen on {path}: {e.strerror}") from e
    finally:
        os.umask(old)
    return sock


def _open_files() -> None:
    """Raise the soft limit of open files to the hard one (at most 65,536): each client's
    connection is a file, and past the limit no new client is accepted at all."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def _run(
    api: Any, sock: socket.socket, stopping: Callable[[], None], header_timeout: float
) -> None:
    import uvicorn

    from ..server.guard import header_timeout_protocol

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            stopping()
            super().handle_exit(sig, frame)

    # uvicorn finishes the requests under way on SIGTERM or SIGINT, then sends the signal
    # again: a stop asked for is a clean exit, not a death by signal
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    _open_files()
    config = uvicorn.Config(
        api,
        log_level="warning",
        access_log=False,
        http=header_timeout_protocol(header_timeout),
    )
    _Server(config).run(sockets=[sock])


def _folder(root: str | None) -> Folder:
    from ..files.folder import open_folder

    return open_folder(root or state.root)


@keys_app.command("add")
def keys_add(
    name: str = typer.Argument(..., help="Who or what the key is for (e.g. laptop, ci)."),
    key_scope: str = typer.Option(
        "read", "--scope", metavar="SCOPE", help="read, write (includes read) or admin (all)."
    ),
    root: str = ROOT_OPT,
    json_: bool = JsonOpt,
) -> None:
    """Make an API key for this folder's stack and print it (this once: only its hash is kept).

    \b
      KEY=$(ok serve keys add ci --scope write)
      curl -H "Authorization: Bearer $KEY" http://127.0.0.1:8765/v1/kb/notes
    """
    from ..server.auth import add_key

    rec, key = add_key(_folder(root), name, key_scope)
    emit({**_shown(rec), "key": key}, json_, plain=lambda _: key)


@keys_app.command("list")
def keys_list(root: str = ROOT_OPT, json_: bool = JsonOpt) -> None:
    """The folder's API keys (never the keys themselves), revoked ones too."""
    from ..server.auth import load_keys

    rows = [_shown(k) for k in load_keys(_folder(root))]
    emit(
        rows,
        json_,
        plain=lambda rs: "\n".join(
            f"{r['id']}\t{r['name']}\t{r['scope']}\t{r['created']}\t{r['revoked'] or 'live'}"
            for r in rs
        ),
    )


@keys_app.command("revoke")
def keys_revoke(
    key: str = typer.Argument(..., help="The key's id or name."),
    root: str = ROOT_OPT,
    json_: bool = JsonOpt,
) -> None:
    """Revoke a key: the server refuses it from the next request on."""
    from ..server.auth import revoke_key

    rec = revoke_key(_folder(root), key)
    emit(_shown(rec), json_, plain=lambda r: f"revoked {r['id']} ({r['name']})")


def _shown(rec: Any) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k != "sha256"}
