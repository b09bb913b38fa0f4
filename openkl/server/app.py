"""The HTTP API: the AKS v1 surface under `/aks/v1` and the rest of openkl under `/v1/{stack}`.

Every route is parse → one `openkl.ops` call → JSON, like the CLI and the MCP server. Reads
run in the worker threads, each on its own connection to the resident graph (or, with
`--backend`, a pooled connection to the stack in PostgreSQL); writes hold the stack's
writer. An `OkError` becomes a 4xx with `{"error": …, "hint": …}`.

`create_app` puts the app together: the routers (one module per resource, `routes_*`),
the shared `Server` they reach through `app.state.ok`, the error answers (`failures`), MCP
at `/mcp`, and the layers each request passes through (`middleware`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from importlib.metadata import version

from fastapi import APIRouter, FastAPI
from fastapi.middleware.cors import CORSMiddleware

from . import (
    graph_edits,
    routes_aks,
    routes_backfeed,
    routes_citations,
    routes_documents,
    routes_events,
    routes_graph,
    routes_health,
    routes_mcp,
    routes_notes,
    routes_search,
    routes_stacks,
)
from . import (
    routes_web as web,
)
from .auth import Authenticator, RateLimiter
from .failures import add_handlers
from .guard import Guard, Guarded
from .metrics import AccessLog
from .middleware import BodyCap, Gate, Gated, Observed, Observer, Relative, shown_roots
from .shared import Server
from .stacks import Stacks

MAX_BODY = 16 << 20  # bytes of a request body

# the API's routers, in the order their routes are matched
ROUTERS: list[APIRouter] = [
    routes_health.routes,
    routes_stacks.routes,
    routes_aks.routes,
    routes_backfeed.routes,
    routes_documents.routes,
    routes_notes.routes,
    routes_citations.routes,
    routes_search.routes,
    routes_events.routes,
    routes_graph.routes,
    graph_edits.routes,
    web.routes,
]


def create_app(
    stacks: Stacks,
    auth: Authenticator | None = None,
    limiter: RateLimiter | None = None,
    local_limiter: RateLimiter | None = None,
    host: str = "127.0.0.1",
    access_log: bool = True,
    cors_origins: list[str] | None = None,
    guard: Guard | None = None,
    allow_exec_triggers: bool = False,
) -> FastAPI:
    """The API over `stacks`, which it opens on startup and closes on shutdown (unless they
    were open already: then their opener closes them). With `auth`, every route but /health,
    /ready and the docs needs a key or a JWT whose scope covers the stack, and answers carry
    folder-relative paths only; without, every caller may do everything. `limiter` meters
    each key or token; `local_limiter` each client address when auth is off (all the local
    agents of one user share an address, so it is usually none). `guard` says which Host
    names and browser origins are the server's own (default: those of `host`). Triggers
    with a command are added over HTTP only with `allow_exec_triggers`, the operator's
    flag."""
    __version__ = version("openkl")
    mcp = routes_mcp.Mcp(stacks)
    app = FastAPI(
        title="openkl",
        version=__version__,
        summary="Knowledge folders: search, notes, documents, citations and the entity graph.",
        lifespan=_lifespan(stacks, mcp),
    )
    app.state.ready = False
    app.state.ok = Server(stacks, auth, __version__, mcp.follow, allow_exec_triggers)
    for routes in ROUTERS:
        app.include_router(routes)
    add_handlers(app)
    routes_mcp.mount(app, mcp)

    # from the inside out: each added one wraps those before it
    if auth is not None:
        app.add_middleware(Relative, roots=lambda: shown_roots(stacks))
    app.add_middleware(Gated, gate=Gate(auth, limiter, local_limiter))
    app.add_middleware(BodyCap, limit=MAX_BODY)
    if cors_origins:  # a browser's preflight is answered before the gate
        app.add_middleware(
            CORSMiddleware,
            allow_origins=cors_origins,
            allow_methods=["*"],
            allow_headers=["Authorization", "Content-Type"],
        )
    guard = guard or Guard.of(host, cors_origins=cors_origins or ())
    app.add_middleware(Guarded, guard=guard)  # Host and origin before anything else
    # outermost: refusals are counted too
    observer = Observer(app, ROUTERS, stacks, AccessLog(access_log))
    app.add_middleware(Observed, observe=observer)
    return app


def _lifespan(
    stacks: Stacks, mcp: routes_mcp.Mcp
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """Open the stacks and run the MCP sessions while the app serves; `app.state.ready`
    says so."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # stacks the caller opened are the caller's to close: `ok serve` first stops the
        # commands it runs for other processes, which use them too
        opened = not stacks.is_open
        stacks.open()
        async with mcp.full.session_manager.run(), mcp.read.session_manager.run():
            app.state.ready = True
            try:
                yield
            finally:
                app.state.ready = False
                if opened:
                    stacks.close()

    return lifespan
