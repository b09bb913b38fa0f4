"""The HTTP API: the AKS v1 surface under `/aks/v1` and the rest of openkl under `/v1/{stack}`.

Every route is parse → one `openkl.ops` call → JSON, like the CLI and the MCP server. Reads
run in the worker threads, each on its own connection to the resident graph (or, with
`--backend`, a pooled connection to the stack in PostgreSQL); writes hold the stack's
writer. An `OkError` becomes a 4xx with `{"error": …, "hint": …}`.
"""

from __future__ import annotations

import contextlib
import json
import math
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from importlib.metadata import version
from typing import Annotated, Any, Literal, cast

from fastapi import Body, Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from .. import ops
from ..errors import (
    BadInput,
    Duplicate,
    IndexMismatch,
    LockBusy,
    NotFound,
    OkError,
    QueryRefused,
    QueryTimedOut,
    QueryTooLarge,
    ReadOnlyViolation,
    StackTaken,
    UsageError,
)
from ..folder import Folder
from ..graph import Graph
from ..graph.postgres import ReadOnly, Unavailable
from ..graph.protocol import GraphStore
from ..indexing import open_graph
from ..ops.read import Opener
from ..records import Cite
from .auth import OPEN, Authenticator, Caller, Forbidden, RateLimited, RateLimiter, Unauthorized
from .backend import Backend, NotPublished
from .graph_edits import add_routes as add_graph_edit_routes
from .guard import Guard, Guarded
from .metrics import AccessLog
from .stacks import Conflict, Served, Stacks
from .web import add_routes as add_web_routes
from .web import is_public

MAX_BODY = 16 << 20  # bytes of a request body

# `where=` of the search and notes routes
WHERE = (
    "A condition on the frontmatter of each hit's file (repeatable, all must hold): "
    "key=value (a list contains it), key!=value, key>=2026-01-01 or a number, key<…, or a "
    "bare key (it is set)."
)

# who describes entities, for one call
Describer = Annotated[
    Literal["local", "llm"] | None,
    Query(description="Who describes, for this call: local or llm (default entities.describer)."),
]

# the AKS routes name the stack as `?domain=`
Domain = Annotated[str | None, Query(description="The stack (default: the first).")]

# what needs no credentials
PUBLIC = {"/health", "/ready", "/docs", "/openapi.json", "/docs/oauth2-redirect", "/redoc"}


class TimedOut(OkError):
    """A request's graph query ran past serve.timeout (504)."""


_STATUS: list[tuple[type[OkError], int]] = [
    (TimedOut, 504),
    (QueryTimedOut, 504),
    (QueryTooLarge, 422),
    (NotPublished, 503),
    (Unavailable, 503),
    (ReadOnly, 503),
    (Duplicate, 409),
    (Unauthorized, 401),
    (Forbidden, 403),
    (RateLimited, 429),
    (NotFound, 404),
    (Conflict, 409),
    (StackTaken, 409),
    (ReadOnlyViolation, 403),
    (QueryRefused, 403),
    (LockBusy, 503),
    (IndexMismatch, 503),
    (UsageError, 400),
    (BadInput, 400),
]


@contextlib.contextmanager
def _timed(seconds: float) -> Iterator[None]:
    """A graph query stopped at serve.timeout becomes a `TimedOut` (504)."""
    try:
        yield
    except OkError as e:
        said = e.message.lower()
        if "interrupt" not in said and "took too long" not in said:
            raise
        raise TimedOut(
            f"the query ran past serve.timeout ({seconds:g} s) and was stopped",
            "narrow it (a smaller k, a LIMIT), or raise serve.timeout",
        ) from e


def _sse(kind: str, data: Any) -> str:
    """One server-sent event."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


def _status(exc: OkError) -> int:
    return next((code for cls, code in _STATUS if isinstance(exc, cls)), 400)


def _error(status: int, message: str, hint: str | None = None, **more: Any) -> JSONResponse:
    body: dict[str, Any] = {"error": message}
    if hint:
        body["hint"] = hint
    return JSONResponse({**body, **more}, status_code=status)


class NoteIn(BaseModel):
    text: str = Field(min_length=1, description="The note's markdown body.")
    tags: list[str] = []
    topics: list[str] = []
    allow_duplicate: bool = Field(
        False, description="Write it even when it repeats a live note (else 409)."
    )
    supersedes: list[str] = Field(
        [], description="Ids of the notes it replaces (they leave search and ask)."
    )
    ttl: str | None = Field(None, description="Expire the note after this long: 12h, 30d, 2w.")


class BundleQuery:
    """What of the graph an AKS bundle holds (the filters of `ok graph export`)."""

    def __init__(
        self,
        min_confidence: Annotated[
            float | None,
            Query(ge=0, le=1, description="Only entities this confident (default: the floor)."),
        ] = None,
        type: str | None = None,
        max_entities: Annotated[int | None, Query(ge=1)] = None,
        verified_only: bool = False,
        all_: Annotated[
            bool,
            Query(
                alias="all",
                description="Every entity, also those below the floor entities.min_confidence.",
            ),
        ] = False,
    ) -> None:
        self.min_confidence = min_confidence
        self.type = type
        self.max_entities = max_entities
        self.verified_only = verified_only
        self.all = all_


class NotePatch(BaseModel):
    text: str | None = Field(default=None, min_length=1)
    tags: list[str] | None = None
    topics: list[str] | None = None


class CypherIn(BaseModel):
    query: str = Field(min_length=1, description="Read-only Cypher, as `ok graph cypher`.")
    params: dict[str, Any] = {}


class AskIn(BaseModel):
    question: str = Field(min_length=1)
    stream: bool = Field(default=False, description="Answer as server-sent events.")
    k: int | None = Field(default=None, ge=1)
    scope: str = "all"
    llm: bool = Field(default=True, description="Use the configured LLM, if there is one.")
    include_superseded: bool = Field(
        default=False, description="Also notes that a newer note supersedes."
    )
    recency: str | None = Field(
        default=None, description="Favour newer items: a half-life (90d) or off."
    )


class VerifyIn(BaseModel):
    items: list[str | dict[str, Any]] = Field(
        min_length=1, description="Citation ids (c-…), other ids, or cite objects."
    )


class CiteIn(BaseModel):
    items: list[str | dict[str, Any]] = Field(min_length=1, description="Ids or cite objects.")
    lines: str | None = Field(default=None, description="A line span of the one item: 3-7.")
    chars: str | None = Field(default=None, description="A character span of the one item.")
    persist: bool = False
    tags: list[str] = []


class DistillIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(
        min_length=1,
        description="The distilled note; each claim ends with [N], the N-th of `citations`.",
    )
    citations: list[str | dict[str, Any]] = Field(
        min_length=1,
        description="What it rests on, in [N] order: cite objects or ids (chunk, c-…, doc, "
        "memory), as search and /citations return them.",
    )
    tags: list[str] = []
    topics: list[str] = []


class ContextIn(BaseModel):
    query: str = Field(min_length=1)
    domain: str | None = Field(default=None, description="The stack (default: the first).")
    k: int | None = Field(default=None, ge=1)
    max_entities: int | None = Field(default=None, ge=1)
    min_confidence: float | None = Field(default=None, ge=0, le=1)


class StackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(
        min_length=1, description="The stack's name, also its folder's under serve.stacks_dir."
    )
    description: str | None = Field(default=None, max_length=2000)
    metadata: dict[str, Any] = Field(default={}, description="Free fields kept with the stack.")


class SeedStackIn(BaseModel):
    """`POST /stacks` as the AKS reference server takes it: a display name and a slug."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, description="The stack's name (its id, unless `domain`).")
    domain: str | None = Field(
        default=None, min_length=1, description="The stack's id: its folder's name."
    )
    description: str | None = Field(default=None, max_length=2000)
    metadata: dict[str, Any] = Field(default={}, description="Free fields kept with the stack.")


class StackPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str | None = Field(
        default=None, max_length=2000, description="A new description (null: none)."
    )
    metadata: dict[str, Any] | None = Field(
        default=None, description="Merged into the stack's metadata; a key set to null goes."
    )


class DecisionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item_id: str = Field(min_length=1, description="The backfeed item (bf-…, or a prefix).")
    domain: str | None = Field(default=None, description="The stack (default: the first).")
    reason: str | None = Field(default=None, min_length=1, description="Why (kept in the item).")


class TriggerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, description="Lowercase, digits, - _ .")
    example: str = Field(min_length=1, description="Text new knowledge is compared with.")
    threshold: float = Field(default=0.8, description="Cosine similarity to fire at.")
    scope: str = Field(default="all", description="What to watch: all, mem or store.")
    exec: str | None = Field(
        default=None,
        min_length=1,
        description="Shell command run with the event JSON (admin, and only on a server "
        "started with --allow-exec-triggers).",
    )
    env: list[str] = Field(default=[], description="Variables passed on to the command.")
    timeout: float = Field(default=30.0, description="Seconds the command may run.")
    replace: bool = Field(default=False, description="Overwrite a trigger of that name.")


class ScanIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, min_length=1, description="Only this trigger.")


class RefreshIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    docs: list[str] = Field(default=[], description="Documents to refresh now (ids, paths, URLs).")
    due: bool = Field(default=False, description="Those whose policy says so (the default).")
    all: bool = Field(default=False, description="Every source that can be re-read.")
    drift_threshold: float | None = Field(default=None, ge=0, le=2)
    dry_run: bool = Field(default=False, description="Only list what is due.")


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
    names and browser origins are the server's own (default: those of `host`). Triggers with a command are added over HTTP only with
    `allow_exec_triggers`, the operator's flag."""
    __version__ = version("openkl")
    guard = guard or Guard.of(host, cors_origins=cors_origins or ())

    mcp = _Mcp(stacks)
    mcp_full, mcp_read = mcp.full, mcp.read
    metrics = stacks.metrics
    log = AccessLog(access_log)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # stacks the caller opened are the caller's to close: `ok serve` first stops the
        # commands it runs for other processes, which use them too
        opened = not stacks.is_open
        stacks.open()
        async with mcp_full.session_manager.run(), mcp_read.session_manager.run():
            app.state.ready = True
            try:
                yield
            finally:
                app.state.ready = False
                if opened:
                    stacks.close()

    app = FastAPI(
        title="openkl",
        version=__version__,
        summary="Knowledge folders: search, notes, documents, citations and the entity graph.",
        lifespan=lifespan,
    )
    app.state.ready = False

    @app.exception_handler(OkError)
    async def ok_error(request: Request, exc: OkError) -> JSONResponse:
        if isinstance(exc, Duplicate):
            return _error(_status(exc), exc.message, exc.hint, duplicate_of=exc.duplicate_of)
        return _error(_status(exc), exc.message, exc.hint)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        msg = first.get("msg", "invalid request")
        return _error(422, f"{where}: {msg}" if where else msg, "see /docs for the request shape")

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        return _error(500, f"internal error: {type(exc).__name__}", "see the server's log")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        hint = "see /docs for the routes" if exc.status_code in (404, 405) else None
        return _error(exc.status_code, str(exc.detail), hint)

    def observe(scope: Any, status: int, took: float) -> None:
        """Count and time a request (until its response starts), and log it: refused ones
        too (a bad Host or origin, no credentials, over the rate), by the route they asked
        for."""
        route, params = _route_of(app, scope)
        request = Request(scope)
        stack = params.get("stack") or request.query_params.get("domain") or "-"
        if stack not in stacks.by_name:
            stack = "-"  # a label per made-up name would grow without end
        labels = (request.method, route, stack)
        metrics.requests.labels(*labels, str(status)).inc()
        metrics.latency.labels(*labels).observe(took)
        caller = (scope.get("state") or {}).get("caller")
        log.write(
            method=request.method,
            path=request.url.path,
            status=status,
            ms=round(took * 1000, 1),
            who=caller.who if caller is not None else None,
            client=request.client.host if request.client else None,
        )

    def gate(scope: Any) -> Response | None:
        """Credentials and rate limit, before any route runs: a refusal, or None (the caller
        is then in the request's state)."""
        request = Request(scope)
        if request.url.path in PUBLIC or is_public(request.url.path):
            return None
        try:
            if auth is None:
                caller = OPEN
                meter = local_limiter
                who = request.client.host if request.client else "local"
            else:
                caller = auth.caller(request.headers.get("authorization"))
                meter = limiter
                who = caller.who
            request.state.caller = caller  # the log says whose requests were over the rate
            if meter is not None:
                meter.take(who)
        except RateLimited as e:
            resp = _error(429, e.message, e.hint)
            resp.headers["Retry-After"] = str(max(1, math.ceil(e.retry_after)))
            return resp
        except OkError as e:
            return _error(_status(e), e.message, e.hint)
        request.state.caller = caller
        return None

    def kuzu_reader(folder: Folder) -> Opener:
        """How a route opens the resident Kùzu graph: its queries are interrupted after
        serve.timeout seconds, and the caller is told so (504). Cypher reads it on a
        PostgreSQL backend too."""
        seconds = float(folder.setting("serve.timeout"))

        @contextlib.contextmanager
        def opened() -> Iterator[Graph]:
            with open_graph(folder) as g, _timed(seconds):
                g.set_timeout(seconds)
                yield g

        return opened

    def _backend_of(folder: Folder) -> Backend | None:
        return next((st.backend for st in stacks.by_name.values() if st.folder is folder), None)

    def reader(folder: Folder) -> Opener:
        """How a route reads the graph (documents, chunks, notes, lineage, entities): from
        the stack's PostgreSQL backend when it has one, else as `kuzu_reader`."""
        backend = _backend_of(folder)
        if backend is None:
            return kuzu_reader(folder)
        seconds = float(folder.setting("serve.timeout"))
        opener = backend.reader(seconds)

        @contextlib.contextmanager
        def opened() -> Iterator[GraphStore]:
            with opener() as g, _timed(seconds):
                yield g

        return opened

    def allow(request: Request, name: str | None, need: str) -> Served:
        """The stack called `name` (none: the first the caller may read), if the caller's
        scope covers `need` there. A caller is never told of stacks it may not see."""
        caller: Caller = request.state.caller
        if not name:
            name = next((n for n in stacks.by_name if caller.allows(n, "read")), None)
            if name is None:
                raise Forbidden(f"{caller.who} may read no stack here", "ask for a key")
        caller.require(name, need)  # with auth off, the caller may do everything
        return stacks.get(name)

    # -- health -------------------------------------------------------------------------
    @app.get("/health", tags=["health"])
    def health() -> dict[str, Any]:
        """The process is up."""
        return {"status": "ok", "version": __version__}

    @app.get("/ready", tags=["health"])
    def ready() -> JSONResponse:
        """Every stack is open and serving, and its watch keeps it in line with its files:
        503 while a stack's watch or the syncs after changes fail (`failing` says how; the
        answers may be stale until it recovers)."""
        if not app.state.ready:
            return _error(503, "starting", "wait for the folders to open")
        failing = stacks.failing()
        if failing:
            said = "; ".join(
                f"{n}: {s['failing']} failing ({s['error']})" for n, s in failing.items()
            )
            return _error(
                503,
                f"stale: the watch of stack {said}",
                "it tries again by itself (see `retry_in`); its status says more, and the "
                "server's log each failure",
                stacks=list(stacks.by_name),
                failing=failing,
            )
        return JSONResponse({"status": "ready", "stacks": list(stacks.by_name)})

    @app.get("/metrics", tags=["health"])
    def prometheus(request: Request) -> Response:
        """Prometheus metrics: requests and latency per route and stack, search latency by
        mode, writers waiting, chunks indexed, refresh outcomes and drift, trigger fires."""
        caller: Caller = request.state.caller
        if not caller.operator("read"):
            raise Forbidden(
                f"{caller.who} may not read the server's metrics",
                "they cover every stack: use a token with the scope *:read",
            )
        body, kind = metrics.render()
        return Response(body, media_type=kind)

    # -- AKS v1 -------------------------------------------------------------------------
    @app.get("/aks/v1/stacks", tags=["aks"])
    def list_stacks(request: Request) -> list[dict[str, Any]]:
        """The stacks served that the caller may read, with their counts."""
        caller: Caller = request.state.caller
        return [_stack_row(name) for name in stacks.by_name if caller.allows(name, "read")]

    def _stack_row(name: str) -> dict[str, Any]:
        st = stacks.get(name)
        return {
            "name": name,
            "root": str(st.folder.root),
            **ops.about(st.folder),
            **ops.counts(st.folder, graph=reader(st.folder)),
        }

    @app.post("/aks/v1/stacks", tags=["aks"], status_code=201)
    def create_stack(request: Request, body: StackIn) -> dict[str, Any]:
        """Make a new folder under serve.stacks_dir (as `ok init`) and serve it from now on
        (admin on that stack's name). It is not served again after a restart unless it is
        named with --root."""
        caller: Caller = request.state.caller
        caller.require(body.name, "admin")
        st = stacks.create(body.name, {"description": body.description, "metadata": body.metadata})
        if auth is not None:
            auth.folders = {**auth.folders, st.name: st.folder}
        mcp.follow()
        return {**_stack_row(st.name), "created": True}

    @app.patch("/aks/v1/stacks/{stack}", tags=["aks"])
    def patch_stack(request: Request, stack: str, body: StackPatch) -> dict[str, Any]:
        """Change the stack's description or metadata (in its .ok/config.yml)."""
        st = allow(request, stack, "admin")
        with st.writing("stacks patch"):
            ops.describe(st.folder, body.model_dump(exclude_unset=True))
        return _stack_row(st.name)

    @app.delete("/aks/v1/stacks/{stack}", tags=["aks"])
    def delete_stack(request: Request, stack: str) -> dict[str, Any]:
        """Stop serving the stack: its graph is closed and its claim released. No file is
        deleted; the folder works with `ok` again, or `ok serve --root` serves it again."""
        st = allow(request, stack, "admin")
        stacks.drop(st.name)
        if auth is not None:
            auth.folders = {n: f for n, f in auth.folders.items() if n != st.name}
        mcp.follow()
        root = str(st.folder.root)
        return {
            "name": st.name,
            "root": root,
            "served": False,
            "files_deleted": False,
            "message": f"stopped serving {st.name!r}; its files stay in {root}",
        }

    @app.get("/aks/v1/stacks/{stack}", tags=["aks"])
    def get_stack(request: Request, stack: str) -> dict[str, Any]:
        """One stack, with its counts."""
        return _stack_row(allow(request, stack, "read").name)

    @app.get("/aks/v1/stacks/{stack}/documents", tags=["aks"])
    def stack_documents(request: Request, stack: str) -> list[Any]:
        """The stack's documents (their mapping entries)."""
        return list(ops.list_docs(allow(request, stack, "read").folder))

    @app.get("/aks/v1/entities", tags=["aks"])
    def entities(
        request: Request,
        domain: Domain = None,
        type: str | None = None,
        min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
        name: str | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
        scope: Annotated[
            Literal["all", "verified"],
            Query(description="verified: only entities a reviewer approved (backfeed)."),
        ] = "all",
    ) -> list[Any]:
        """Entities, most mentioned first, filtered by type, confidence, name and scope."""
        folder = allow(request, domain, "read").folder
        return list(
            ops.list_entities(
                folder,
                graph=reader(folder),
                type=type,
                min_confidence=min_confidence,
                name=name,
                limit=limit,
                verified_only=scope == "verified",
            )
        )

    @app.get("/aks/v1/entities/{name}", tags=["aks"])
    def entity(
        request: Request,
        name: str,
        domain: Domain = None,
        min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
    ) -> Any:
        """One entity by name: its relationships (at least this confident, default
        entities.min_confidence) and evidence."""
        folder = allow(request, domain, "read").folder
        return ops.entity(folder, name, min_confidence=min_confidence, graph=reader(folder))

    @app.get("/aks/v1/traverse", tags=["aks"])
    def traverse(
        request: Request,
        start: str,
        domain: Domain = None,
        depth: Annotated[int, Query(ge=1, le=5)] = 2,
        rel: str | None = None,
        min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 200,
    ) -> Any:
        """Walk the entity graph from `start`, up to `depth` hops."""
        folder = allow(request, domain, "read").folder
        return ops.traverse(
            folder,
            start,
            graph=reader(folder),
            depth=depth,
            rel=rel,
            min_confidence=min_confidence,
            limit=limit,
        )

    @app.post("/aks/v1/context", tags=["aks"])
    def context(request: Request, body: ContextIn) -> Any:
        """Passages and the entities around them for a natural-language query."""
        folder = allow(request, body.domain, "read").folder
        return ops.context(
            folder,
            body.query,
            graph=reader(folder),
            k=body.k,
            max_entities=body.max_entities,
            min_confidence=body.min_confidence,
        )

    @app.get("/aks/v1/pages/{name}", tags=["aks"])
    def page(request: Request, name: str, domain: Domain = None) -> Any:
        """An entity's page as markdown."""
        folder = allow(request, domain, "read").folder
        return ops.entity_page(folder, name, graph=reader(folder))

    @app.get("/aks/v1/pages", tags=["aks"], response_class=StreamingResponse)
    def all_pages(
        request: Request,
        domain: Domain = None,
        min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
    ) -> StreamingResponse:
        """Every entity's page and their index.md as a zip (the files `ok graph page --all`
        writes), streamed as the pages are made."""
        st = allow(request, domain, "read")
        chunks = ops.zip_pages(st.folder, min_confidence=min_confidence, graph=reader(st.folder))
        return StreamingResponse(
            _streamed(chunks),
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{st.name}-pages.zip"'},
        )

    def _bundle(st: Served, q: BundleQuery) -> Response:
        got = ops.export_graph(
            st.folder,
            format_="aks",
            out="-",
            min_confidence=q.min_confidence,
            entity_type=q.type,
            max_entities=q.max_entities,
            verified_only=q.verified_only,
            all_=q.all,
            graph=reader(st.folder),
        )
        return Response(next(iter(got.files.values())), media_type="application/json")

    @app.get("/aks/v1/export", tags=["aks"])
    def export_bundle(
        request: Request, q: Annotated[BundleQuery, Depends()], domain: Domain = None
    ) -> Response:
        """The stack as an AKS bundle, as `ok graph export --format aks` writes it."""
        return _bundle(allow(request, domain, "read"), q)

    @app.get("/aks/v1/stacks/{stack}/bundle", tags=["aks"])
    def stack_bundle(
        request: Request, stack: str, q: Annotated[BundleQuery, Depends()]
    ) -> Response:
        """The stack as an AKS bundle (the same as /aks/v1/export?domain=STACK)."""
        return _bundle(allow(request, stack, "read"), q)

    @app.post("/aks/v1/stacks/{stack}/bundle", tags=["aks"], status_code=201)
    async def import_bundle(request: Request, stack: str) -> Any:
        """Load the AKS bundle in the body into the stack, as `ok bundle import`: checked
        against the AKS schema first, then kept under aks/imports/."""
        st = allow(request, stack, "write")
        text = _text(await request.body(), "an AKS bundle (JSON)")

        def keep() -> Any:
            with st.writing("bundle import"):
                return ops.import_bundle(st.folder, text, "the request body")

        return await run_in_threadpool(keep)

    @app.post("/aks/v1/backfeed/flag", tags=["aks"], status_code=201)
    async def flag_backfeed(request: Request, domain: Domain = None) -> Any:
        """Queue the proposal in the body ({"entities": […], "relationships": […]}) for
        review, as `ok backfeed flag`: 201, or 200 with `created` false when the same
        proposal was queued before."""
        st = allow(request, domain, "write")
        text = _text(await request.body(), "a backfeed proposal (JSON)")

        def flag() -> Any:
            with st.writing("backfeed flag"):
                return ops.flag_backfeed(st.folder, text)

        item = await run_in_threadpool(flag)
        return JSONResponse(item, status_code=201 if item["created"] else 200)

    @app.get("/aks/v1/backfeed/queue", tags=["aks"])
    def backfeed_queue(
        request: Request,
        domain: Domain = None,
        status: Annotated[str, Query(pattern="^(pending|approved|rejected|all)$")] = "pending",
    ) -> list[Any]:
        """Backfeed items with this status, oldest first."""
        return list(ops.backfeed_queue(allow(request, domain, "read").folder, status))

    @app.post("/aks/v1/backfeed/approve", tags=["aks"])
    def approve_backfeed(request: Request, body: DecisionIn) -> Any:
        """Approve a pending item (admin): it is absorbed with verified=true and
        source_kind=backfeed."""
        st = allow(request, body.domain, "admin")
        with st.writing("backfeed approve"):
            return ops.decide_backfeed(st.folder, body.item_id, approve=True, reason=body.reason)

    @app.post("/aks/v1/backfeed/reject", tags=["aks"])
    def reject_backfeed(request: Request, body: DecisionIn) -> Any:
        """Reject a pending item (admin), with a reason; it stays, marked rejected."""
        st = allow(request, body.domain, "admin")
        if not body.reason:
            raise BadInput("a rejection needs a reason", 'send {"item_id": …, "reason": …}')
        with st.writing("backfeed reject"):
            return ops.decide_backfeed(st.folder, body.item_id, approve=False, reason=body.reason)

    @app.get("/aks/v1/backfeed/{item_id}", tags=["aks"])
    def backfeed_item(request: Request, item_id: str, domain: Domain = None) -> Any:
        """One backfeed item, by id or unique prefix."""
        return ops.backfeed_item(allow(request, domain, "read").folder, item_id)

    # -- the AKS reference server's paths ------------------------------------------------
    # its quick start names a stack by `id` under /stacks; here a stack's id is its name
    @app.get("/stacks", tags=["aks"])
    def seed_stacks(request: Request) -> list[dict[str, Any]]:
        """As `GET /aks/v1/stacks`, each stack with its `id` (its name)."""
        return [{"id": row["name"], **row} for row in list_stacks(request)]

    @app.post("/stacks", tags=["aks"], status_code=201)
    def seed_create_stack(request: Request, body: SeedStackIn) -> dict[str, Any]:
        """As `POST /aks/v1/stacks`: the stack is named by `domain` (else `name`), and a
        `name` that differs from it is kept as the metadata's `title`."""
        meta = dict(body.metadata)
        if body.domain and body.name != body.domain:
            meta.setdefault("title", body.name)
        created = create_stack(
            request,
            StackIn(name=body.domain or body.name, description=body.description, metadata=meta),
        )
        return {"id": created["name"], **created}

    @app.get("/stacks/{stack}", tags=["aks"])
    def seed_stack(request: Request, stack: str) -> dict[str, Any]:
        """As `GET /aks/v1/stacks/{stack}`."""
        return {"id": stack, **get_stack(request, stack)}

    @app.patch("/stacks/{stack}", tags=["aks"])
    def seed_patch_stack(request: Request, stack: str, body: StackPatch) -> dict[str, Any]:
        """As `PATCH /aks/v1/stacks/{stack}`."""
        return {"id": stack, **patch_stack(request, stack, body)}

    @app.delete("/stacks/{stack}", tags=["aks"])
    def seed_delete_stack(request: Request, stack: str) -> dict[str, Any]:
        """As `DELETE /aks/v1/stacks/{stack}`: it stops serving the stack; no file is
        deleted."""
        return {"id": stack, **delete_stack(request, stack)}

    @app.get("/stacks/{stack}/documents", tags=["aks"])
    def seed_documents(request: Request, stack: str) -> list[Any]:
        """As `GET /aks/v1/stacks/{stack}/documents`."""
        return stack_documents(request, stack)

    @app.post(
        "/stacks/{stack}/documents",
        tags=["aks"],
        status_code=201,
        openapi_extra={"requestBody": _DOCUMENTS_BODY},
    )
    async def seed_upload(
        request: Request,
        stack: str,
        name: Annotated[str | None, Query(min_length=1)] = None,
    ) -> Any:
        """As `POST /v1/{stack}/documents` (`curl -F file=@runbook.md`): stored and
        compiled in one step. With one document, its `id` is at the top of the answer, for
        `POST /stacks/{stack}/documents/{id}/ingest`."""
        rep = await add_document(request, stack, name)
        if isinstance(rep, dict):
            docs = rep.get("added", []) + rep.get("unchanged", [])
            if len(docs) == 1:
                return {"id": docs[0]["id"], **rep}
        return rep

    @app.post("/stacks/{stack}/documents/{doc}/ingest", tags=["aks"])
    def seed_compile(request: Request, stack: str, doc: str) -> Any:
        """What the document compiled into: chunks, entities, relationships. A document is
        compiled as it is stored, so this changes nothing and may be called again (a
        document on disk the index has not seen yet is synced first)."""
        st = allow(request, stack, "write")
        done = ops.compile_doc(st.folder, doc, graph=reader(st.folder))
        if done["status"] == "empty":
            with st.writing("sync"):
                ops.sync(st.folder)
            done = ops.compile_doc(st.folder, doc, graph=reader(st.folder))
        return done

    @app.post("/stacks/{stack}/synthesize-descriptions", tags=["aks"])
    def seed_synthesize(
        request: Request,
        stack: str,
        describer: Describer = None,
        name: Annotated[list[str] | None, Query(description="Only these entities.")] = None,
        min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
    ) -> Any:
        """Describe every entity of the stack (at least this confident, default
        entities.min_confidence), or those named, now: each description is cited and cached
        until its entity changes. `describer` overrides entities.describer for this call."""
        folder = allow(request, stack, "write").folder
        return ops.synthesize_descriptions(
            folder,
            name,
            describer=describer,
            min_confidence=min_confidence,
            graph=reader(folder),
        )

    @app.post("/aks/v1/entities/{name}/synthesize-description", tags=["aks"])
    def synthesize_description(
        request: Request, name: str, domain: Domain = None, describer: Describer = None
    ) -> Any:
        """One entity's description, made now (cited; `describer` overrides
        entities.describer for this call)."""
        folder = allow(request, domain, "write").folder
        made = ops.synthesize_descriptions(
            folder, [name], describer=describer, graph=reader(folder)
        )
        return {"describer": made["describer"], **made["results"][0]}

    @app.api_route("/documents/{doc}", methods=["GET", "DELETE"], tags=["aks"])
    def seed_document(request: Request, doc: str) -> JSONResponse:
        """A document belongs to a stack here: the answer names the route to use."""
        verb = request.method
        return _error(
            404,
            f"{verb} /documents/{{id}} is not a route here: documents belong to a stack",
            f"use {verb} /v1/STACK/documents/{doc} (GET /stacks lists the stacks)",
        )

    # -- openkl -------------------------------------------------------------------------
    @app.get("/v1/{stack}/status", tags=["openkl"])
    def status(request: Request, stack: str) -> Any:
        """Counts and staleness, as `ok status --json`."""
        return ops.status(allow(request, stack, "read").folder)

    @app.get("/v1/{stack}/search", tags=["openkl"])
    def search(
        request: Request,
        stack: str,
        q: Annotated[str, Query(min_length=1, description="The query.")],
        k: Annotated[int | None, Query(ge=1)] = None,
        mode: str | None = None,
        scope: str = "all",
        tag: Annotated[list[str] | None, Query()] = None,
        topic: Annotated[list[str] | None, Query()] = None,
        path: str | None = None,
        since: str | None = None,
        until: str | None = None,
        per_doc: Annotated[int | None, Query(ge=1)] = None,
        explain: bool = False,
        include_superseded: Annotated[
            bool, Query(description="Also notes that a newer note supersedes.")
        ] = False,
        recency: Annotated[
            str | None, Query(description="Favour newer items: a half-life (90d) or off.")
        ] = None,
        where: Annotated[list[str] | None, Query(description=WHERE)] = None,
        drift_penalty: Annotated[
            float | None,
            Query(
                ge=0,
                le=10,
                description="Hold back documents whose latest version drifted: each score "
                "times 1 - weight * drift (0: off).",
            ),
        ] = None,
    ) -> JSONResponse:
        """Hybrid search: the same parameters and cite objects as `ok search --json`."""
        st = allow(request, stack, "read")
        started = time.perf_counter()
        res = ops.search(
            st.folder,
            q,
            k=k,
            mode=mode,
            scope=scope,
            tags=tag,
            topics=topic,
            path=path,
            since=since,
            until=until,
            per_doc=per_doc,
            explain=explain,
            graph=reader(st.folder),
            include_superseded=include_superseded,
            recency=recency,
            where=where,
            drift_penalty=drift_penalty,
        )
        metrics.search.labels(res.options.mode).observe(time.perf_counter() - started)
        body: dict[str, Any] = {"stack": st.name, "query": res.query, "hits": res.hits}
        if res.warning:
            body["warning"] = res.warning
        if res.no_good_match:
            body["no_good_match"] = True
            body["best_score"] = res.best_score
        # plain JSON values all through: rendered as they are, without a pass to convert them
        return JSONResponse(body)

    @app.post("/v1/{stack}/ask", tags=["openkl"])
    def ask(request: Request, stack: str, body: AskIn) -> Any:
        """An answer with `[N]` citations, as `ok ask --json`. With `"stream": true`, server-
        sent events: `token` events as the LLM writes (`{"text": …}`), then one `answer`
        event holding the whole answer (or one `error` event)."""
        folder = allow(request, stack, "read").folder
        if not body.stream:
            return ops.ask(
                folder,
                body.question,
                k=body.k,
                scope=body.scope,
                use_llm=body.llm,
                graph=reader(folder),
                include_superseded=body.include_superseded,
                recency=body.recency,
            )
        out: queue.Queue[tuple[str, Any]] = queue.Queue()
        passages = reader(folder) if _backend_of(folder) else None

        def answer() -> None:
            try:
                got = ops.ask(
                    folder,
                    body.question,
                    k=body.k,
                    scope=body.scope,
                    use_llm=body.llm,
                    graph=passages,
                    on_token=lambda t: out.put(("token", {"text": t})),
                    include_superseded=body.include_superseded,
                    recency=body.recency,
                )
                out.put(("answer", got))
            except OkError as e:
                out.put(("error", {"error": e.message, "hint": e.hint}))
            except Exception as e:  # the stream has started: say it there
                out.put(("error", {"error": f"internal error: {type(e).__name__}"}))

        threading.Thread(target=answer, name="ok-serve-ask", daemon=True).start()

        def stream() -> Iterator[str]:
            while True:
                kind, data = out.get()
                yield _sse(kind, data)
                if kind != "token":
                    return

        return StreamingResponse(stream(), media_type="text/event-stream")

    @app.get("/v1/{stack}/events/follow", tags=["events"])
    def follow_events(
        request: Request,
        stack: str,
        type: Annotated[list[str] | None, Query()] = None,
        doc: str | None = None,
        timeout: Annotated[float, Query(gt=0, le=3600)] = 300,
    ) -> StreamingResponse:
        """Events appended from now on, as server-sent `event` events (like `ok events
        --follow`), for `timeout` seconds."""
        st = allow(request, stack, "read")
        # ends when the server begins to stop, too: a follower never holds up a shutdown
        found = ops.follow_events(st.folder, types=type, doc=doc, timeout=timeout, stop=st.stop)
        return StreamingResponse((_sse("event", e) for e in found), media_type="text/event-stream")

    @app.get("/v1/{stack}/notes", tags=["notes"])
    def list_notes(
        request: Request,
        stack: str,
        tag: Annotated[list[str] | None, Query()] = None,
        topic: Annotated[list[str] | None, Query()] = None,
        limit: Annotated[int | None, Query(ge=1)] = None,
        where: Annotated[list[str] | None, Query(description=WHERE)] = None,
    ) -> list[dict[str, Any]]:
        """Notes, newest first."""
        folder = allow(request, stack, "read").folder
        got = ops.list_notes(folder, tags=tag, topics=topic, limit=limit, where=where)
        return [n.as_dict(folder) for n in got.notes]

    @app.post("/v1/{stack}/notes", tags=["notes"], status_code=201)
    def add_note(request: Request, stack: str, body: NoteIn) -> dict[str, Any]:
        """Write a note and index it."""
        st = allow(request, stack, "write")
        with st.writing("mem add"):
            note = ops.add_note(
                st.folder,
                body.text,
                body.tags,
                body.topics,
                via="http",
                allow_duplicate=body.allow_duplicate,
                supersedes=body.supersedes,
                ttl=body.ttl,
            )
        return note.as_dict(st.folder)

    @app.get("/v1/{stack}/notes/{note_id}", tags=["notes"])
    def show_note(request: Request, stack: str, note_id: str) -> dict[str, Any]:
        """One note by id or unique prefix."""
        folder = allow(request, stack, "read").folder
        return ops.show_note(folder, note_id).as_dict(folder)

    @app.patch("/v1/{stack}/notes/{note_id}", tags=["notes"])
    def update_note(request: Request, stack: str, note_id: str, body: NotePatch) -> dict[str, Any]:
        """Change a note's text, tags or topics; its id stays."""
        st = allow(request, stack, "write")
        with st.writing("mem update"):
            note = ops.update_note(
                st.folder, note_id, text=body.text, tags=body.tags, topics=body.topics, via="http"
            )
        return note.as_dict(st.folder)

    @app.delete("/v1/{stack}/notes/{note_id}", tags=["notes"])
    def delete_note(
        request: Request, stack: str, note_id: str, purge: bool = False
    ) -> dict[str, Any]:
        """Take a note out of search and the index: its file moves to memories/archive/
        (`ok mem restore` brings it back), or with `purge=true` is deleted for good (an
        archived note's too). The full id is needed; a prefix is refused (400)."""
        st = allow(request, stack, "write")
        with st.writing("mem delete"):
            done = ops.delete_note(st.folder, note_id, purge=purge, via="http")
        return done.as_dict()

    @app.get("/v1/{stack}/documents", tags=["documents"])
    def list_documents(request: Request, stack: str, all_versions: bool = False) -> list[Any]:
        """The stored documents' mapping entries."""
        return list(ops.list_docs(allow(request, stack, "read").folder, all_versions=all_versions))

    @app.get("/v1/{stack}/documents/{doc}", tags=["documents"])
    def show_document(request: Request, stack: str, doc: str) -> dict[str, Any]:
        """A document by id or id prefix: its mapping entry and normalized text."""
        got = ops.show_doc(allow(request, stack, "read").folder, doc)
        return {"entry": got.entry, "text": got.text}

    @app.post(
        "/v1/{stack}/documents",
        tags=["documents"],
        status_code=201,
        openapi_extra={"requestBody": _DOCUMENTS_BODY},
    )
    async def add_document(
        request: Request,
        stack: str,
        name: Annotated[
            str | None,
            Query(min_length=1, description="The file name, e.g. notes.md (one document)."),
        ] = None,
    ) -> Any:
        """Store documents and index them, in one ingest. Either the body is one document
        named `name` (as `ok store ingest - --name NAME`; the type comes from the name's
        extension), or a `multipart/form-data` body holds several, one file part each,
        named by the part's file name (up to 10,000 files, 16 MiB in all)."""
        st = allow(request, stack, "write")
        files: list[tuple[str, bytes]] | None = None
        data = b""
        if _is_multipart(request):
            files = await _uploaded(request)
        else:
            if name is None:
                raise BadInput(
                    "the document needs a name",
                    "pass ?name=notes.md, or send the files as multipart/form-data",
                )
            data = await request.body()
            if not data:
                raise BadInput("the body is empty", "send the document's bytes as the body")

        def store() -> Any:
            with st.writing("store ingest"):
                if files is not None:
                    return ops.ingest(st.folder, files=files).as_dict()
                return ops.ingest(st.folder, data=data, name=name).as_dict()

        rep = await run_in_threadpool(store)
        metrics.chunks_indexed.labels(st.name).inc(rep.get("chunks", 0))
        if rep["skipped"] and not rep["added"] and not rep["unchanged"]:
            first = rep["skipped"][0]
            return _error(
                422,
                f"nothing was stored: {_files(len(rep['skipped']))} skipped "
                f"({first['path']}: {first['reason']})",
                "see `skipped` for each file's reason",
                skipped=rep["skipped"],
            )
        return rep

    @app.delete("/v1/{stack}/documents/{doc}", tags=["documents"])
    def remove_document(request: Request, stack: str, doc: str) -> Any:
        """Remove a document (its text, original, mapping entry and graph nodes)."""
        st = allow(request, stack, "write")
        with st.writing("store remove"):
            return ops.remove_doc(st.folder, doc)

    @app.get("/v1/{stack}/documents/{doc}/history", tags=["documents"])
    def document_history(request: Request, stack: str, doc: str) -> Any:
        """A document's versions, newest first."""
        return ops.doc_history(allow(request, stack, "read").folder, doc)

    @app.get("/v1/{stack}/citations", tags=["citations"])
    def list_citations(
        request: Request,
        stack: str,
        tag: Annotated[list[str] | None, Query()] = None,
        doc: str | None = None,
        status: str | None = None,
    ) -> dict[str, Any]:
        """Persisted citations, filtered by tag, document and current status."""
        got = ops.list_citations(
            allow(request, stack, "read").folder, tags=tag, doc=doc, status=status
        )
        return {"citations": got.citations, "problems": got.problems}

    @app.post("/v1/{stack}/citations/verify", tags=["citations"])
    def verify_citations(request: Request, stack: str, body: VerifyIn) -> dict[str, Any]:
        """verified, moved, changed or missing, for citation ids, other ids or cite objects."""
        v = ops.verify_citations(allow(request, stack, "read").folder, body.items)
        return {"ok": v.ok, "results": v.results}

    @app.post("/v1/{stack}/citations", tags=["citations"], status_code=201)
    def make_citations(request: Request, stack: str, body: CiteIn) -> list[Any]:
        """Cite objects for ids (a span with `lines` or `chars`); `persist` keeps them under
        citations/."""
        st = allow(request, stack, "write" if body.persist else "read")
        with st.writing("cite make") if body.persist else contextlib.nullcontext():
            return ops.make_citations(
                st.folder,
                cast(list[str | Cite], body.items),
                lines=body.lines,
                chars=body.chars,
                persist=body.persist,
                tags=body.tags,
                via="http",
            )

    @app.get("/v1/{stack}/distill/prompts", tags=["notes"])
    def distill_prompts(request: Request, stack: str) -> list[dict[str, str]]:
        """The distillation prompts, each with its instructions, as `ok distill get-prompt`."""
        allow(request, stack, "read")
        return [ops.distill_prompt(p["name"]) for p in ops.distill_prompts()]

    @app.post("/v1/{stack}/distill", tags=["notes"], status_code=201)
    def distill(request: Request, stack: str, body: DistillIn) -> dict[str, Any]:
        """Write a distilled note from cited sources, as `ok distill create`: the citations
        are verified first (one that changed or is gone: 400, nothing written) and kept, and
        the note is DERIVED_FROM each; a text whose claims carry no [N] marker is refused."""
        st = allow(request, stack, "write")
        with st.writing("distill create"):
            done = ops.distill_note(
                st.folder,
                body.text,
                body.citations,
                tags=body.tags,
                topics=body.topics,
                via="http",
            )
        return done.as_dict(st.folder)

    @app.get("/v1/{stack}/events", tags=["events"])
    def events(
        request: Request,
        stack: str,
        since: str | None = None,
        type: Annotated[list[str] | None, Query()] = None,
        doc: str | None = None,
        limit: Annotated[int | None, Query(ge=1)] = None,
    ) -> list[Any]:
        """Events, oldest first (ingested, refreshed, drifted, trigger fired, …)."""
        folder = allow(request, stack, "read").folder
        return list(ops.events(folder, since=since, types=type, doc=doc, limit=limit))

    @app.get("/v1/{stack}/lineage/{ref}", tags=["graph"])
    def lineage(
        request: Request,
        stack: str,
        ref: str,
        depth: Annotated[int, Query(ge=1, le=20)] = 5,
        direction: Annotated[str, Query(pattern="^(up|down|both)$")] = "both",
    ) -> Any:
        """Where a note, chunk or document came from, and what came of it."""
        folder = allow(request, stack, "read").folder
        return ops.lineage(folder, ref, depth=depth, direction=direction, graph=reader(folder))

    @app.get("/v1/{stack}/triggers", tags=["events"])
    def triggers(request: Request, stack: str) -> dict[str, Any]:
        """The folder's triggers, and the trigger files that could not be read."""
        rows, problems = ops.list_triggers(allow(request, stack, "read").folder)
        return {"triggers": rows, "problems": problems}

    @app.post("/v1/{stack}/triggers", tags=["events"], status_code=201)
    def add_trigger(request: Request, stack: str, body: TriggerIn) -> Any:
        """Add a trigger, as `ok trigger add`: it checks what is indexed from now on. One
        with a command (`exec`) is code run on the server, as its user: it needs admin, and
        a server started with `--allow-exec-triggers` (which approves what admins add)."""
        st = allow(request, stack, "admin" if body.exec else "write")
        if body.exec and not allow_exec_triggers:
            raise Forbidden(
                "this server takes no trigger commands (exec) over HTTP: a command runs on "
                "the server",
                "add it on the server's machine with `ok trigger add --exec`, or start the "
                "server with `ok serve --allow-exec-triggers`",
            )
        caller: Caller = request.state.caller
        with st.writing("trigger add"):
            t = ops.add_trigger(
                st.folder,
                body.name,
                body.example,
                threshold=body.threshold,
                scope=body.scope,
                exec_=body.exec,
                timeout=body.timeout,
                replace=body.replace,
                env=body.env,
                approved_by=f"http {caller.who}" if body.exec else None,
            )
        return t.as_dict()

    @app.post("/v1/{stack}/triggers/scan", tags=["events"])
    def scan_triggers(request: Request, stack: str, body: ScanIn | None = None) -> Any:
        """Check what the stack holds against its triggers (or the one named), as `ok
        trigger scan --json`: each fires once per document or note version."""
        st = allow(request, stack, "write")
        with st.writing("trigger scan"):
            return ops.scan_triggers(st.folder, body.name if body else None)

    @app.delete("/v1/{stack}/triggers/{name}", tags=["events"])
    def remove_trigger(request: Request, stack: str, name: str) -> dict[str, Any]:
        """Remove a trigger."""
        st = allow(request, stack, "write")
        with st.writing("trigger remove"):
            t = ops.remove_trigger(st.folder, name)
        return {"removed": t.name}

    @app.post("/v1/{stack}/refresh", tags=["events"])
    def refresh(request: Request, stack: str, body: RefreshIn | None = None) -> Any:
        """Re-fetch sources and store what changed, as `ok refresh --json`: the documents
        named, those due (the default) or all. A source that could not be refreshed is in
        `failed`."""
        body = body or RefreshIn()
        st = allow(request, stack, "write")
        return stacks.refresh(
            st,
            body.docs,
            due=body.due,
            all_=body.all,
            drift_threshold=body.drift_threshold,
            dry_run=body.dry_run,
        ).as_dict()

    @app.post("/v1/{stack}/cypher", tags=["graph"])
    def cypher(
        request: Request, stack: str, body: Annotated[CypherIn, Body()]
    ) -> list[dict[str, Any]]:
        """Read-only Cypher under the CLI's rules (no files, no extensions, no writes)."""
        folder = allow(request, stack, "read").folder
        limits = ops.query_limits(folder, float(folder.setting("serve.timeout")), "serve.timeout")
        return ops.cypher(folder, body.query, body.params, graph=kuzu_reader(folder), limits=limits)

    @app.post("/v1/{stack}/sync", tags=["openkl"])
    def sync(request: Request, stack: str) -> Any:
        """Bring the index in line with the files, as `ok sync --json`."""
        st = allow(request, stack, "write")
        with st.writing("sync"):
            rep = ops.sync(st.folder)
        metrics.chunks_indexed.labels(st.name).inc(rep.chunks_added)
        return rep.as_dict()

    add_web_routes(app, allow, reader)  # the explorer's neighbourhood: entities
    add_graph_edit_routes(app, allow)  # POST /v1/{stack}/entities, /relationships

    full_app, read_app = mcp.http_apps("/mcp")

    # from the inside out: each added one wraps those before it
    if auth is not None:
        app.add_middleware(_Relative, roots=lambda: _shown_roots(stacks))
    app.add_middleware(_Gated, gate=gate)
    app.add_middleware(_BodyCap, limit=MAX_BODY)
    if cors_origins:  # a browser's preflight is answered before the gate
        app.add_middleware(
            CORSMiddleware,
            allow_origins=cors_origins,
            allow_methods=["*"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(Guarded, guard=guard)  # Host and origin before anything else
    app.add_middleware(_Observed, observe=observe)  # outermost: refusals are counted too
    app.router.routes.append(
        Route("/mcp", _McpGate(mcp, full_app, read_app), include_in_schema=False)
    )
    return app


MAX_FILES = 10_000  # file parts of one multipart upload

# what POST /v1/{stack}/documents takes, for the OpenAPI page (the route reads the body
# itself: one document's bytes, or a form of files)
_DOCUMENTS_BODY = {
    "required": True,
    "content": {
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {
                    "file": {"type": "array", "items": {"type": "string", "format": "binary"}}
                },
            }
        },
    },
}


def _is_multipart(request: Request) -> bool:
    kind = request.headers.get("content-type", "")
    return kind.split(";", 1)[0].strip().lower() == "multipart/form-data"


async def _uploaded(request: Request) -> list[tuple[str, bytes]]:
    """The file parts of a multipart body as (file name, bytes), in their order."""
    from starlette.datastructures import UploadFile
    from starlette.formparsers import MultiPartException

    try:
        form = await request.form(max_files=MAX_FILES, max_fields=MAX_FILES)
    except (MultiPartException, StarletteHTTPException) as e:
        said = e.message if isinstance(e, MultiPartException) else str(e.detail)
        raise BadInput(
            f"the multipart body cannot be read: {said}",
            f"send at most {MAX_FILES:,} files, each as a part with a file name",
        ) from e
    try:
        files: list[tuple[str, bytes]] = []
        for field_name, value in form.multi_items():
            if not isinstance(value, UploadFile):
                raise BadInput(
                    f"the form field {field_name!r} is not a file",
                    "send each document as a file part (curl -F file=@notes.md)",
                )
            if not value.filename:
                raise BadInput(
                    f"a file part ({field_name!r}) has no file name",
                    "name each part's file: it names the document",
                )
            files.append((value.filename, await value.read()))
    finally:
        await form.close()
    if not files:
        raise BadInput("the form holds no file", "send each document as a file part")
    return files


def _text(data: bytes, what: str) -> str:
    """A request body that must be UTF-8 text."""
    if not data:
        raise BadInput("the body is empty", f"send {what} as the body")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"the body is not UTF-8 text: {e}", f"send {what}") from e


def _streamed(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """What `chunks` produces, made in a thread of its own that keeps what it holds (a graph
    connection) to itself and always runs to its end, so it lets go of the graph even when
    the client goes away. An error before the first chunk is raised here, while it can
    still be a JSON error."""
    out: queue.Queue[bytes | BaseException | None] = queue.Queue()

    def make() -> None:
        try:
            for chunk in chunks:
                out.put(chunk)
        except BaseException as e:
            out.put(e)
        else:
            out.put(None)

    threading.Thread(target=make, name="ok-serve-stream", daemon=True).start()
    first = out.get()
    if isinstance(first, BaseException):
        raise first

    def rest(got: bytes | BaseException | None) -> Iterator[bytes]:
        while got is not None:
            if isinstance(got, BaseException):  # the response has started: end it short
                raise got
            yield got
            got = out.get()

    return rest(first)


class _Mcp:
    """The MCP servers over the stacks served, as `ok mcp` over the same folders: all
    tools, and the read-only ones. `follow()` brings them in line when stacks come and go."""

    def __init__(self, stacks: Stacks) -> None:
        from ..mcp_server import KnowledgeServer

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
        from ..mcp_server import http_app

        return http_app(self.full, path), http_app(self.read, path)

    def follow(self) -> None:
        from ..mcp_server import Stack

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

    def __init__(self, mcp: _Mcp, full: Any, read: Any) -> None:
        self.mcp, self.full, self.read = mcp, full, read

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        caller: Caller = scope["state"]["caller"]
        names = self.mcp.names
        if caller.allows_all(names, "write"):
            await self.full(scope, receive, send)
        elif caller.allows_all(names, "read"):
            await self.read(scope, receive, send)
        else:
            resp = _error(
                403,
                f"{caller.who} may not read every stack this server holds, as MCP needs",
                "use the HTTP routes of your stack, or a key for each stack",
            )
            await resp(scope, receive, send)


class _Gated:
    """Let a request through only when `gate` has no refusal for it (plain ASGI: no task
    or stream per request, as a `BaseHTTPMiddleware` has)."""

    def __init__(self, app: Any, gate: Callable[[Any], Response | None]) -> None:
        self.app, self.gate = app, gate

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        refused = self.gate(scope) if scope["type"] == "http" else None
        if refused is not None:
            await refused(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def _route_of(app: FastAPI, scope: Any) -> tuple[str, dict[str, Any]]:
    """The route a request went to, or would have gone to had it not been refused before
    routing, and its path parameters."""
    from starlette.routing import Match

    route = scope.get("route")
    if route is not None:
        return str(getattr(route, "path", "unmatched")), scope.get("path_params") or {}
    for r in app.router.routes:
        match, child = r.matches(scope)
        if match is Match.FULL:
            return str(getattr(r, "path", "unmatched")), child.get("path_params") or {}
    return "unmatched", {}


def _files(n: int) -> str:
    return f"{n} file" + ("" if n == 1 else "s")


class _Observed:
    """Tell `observe` each request's status and the seconds until its response started (a
    500 when a route fails before it answers)."""

    def __init__(self, app: Any, observe: Callable[[Any, int, float], None]) -> None:
        self.app, self.observe = app, observe

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        answered = False

        async def sending(message: Any) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = True
                self.observe(scope, message["status"], time.perf_counter() - started)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            if not answered:  # the server's error handler answers 500 outside this
                self.observe(scope, 500, time.perf_counter() - started)
            raise


def _shown_roots(stacks: Stacks) -> list[tuple[str, str]]:
    """The absolute paths a remote caller is not shown, longest first, each with what it
    reads as instead: a served folder (its stack's name) and serve.stacks_dir."""
    out = [(str(st.folder.root), name) for name, st in stacks.by_name.items()]
    with contextlib.suppress(OkError):
        out.append((str(stacks.stacks_dir()), "serve.stacks_dir"))
    return sorted(out, key=lambda pair: -len(pair[0]))


class _Relative:
    """Answers to callers with credentials carry folder-relative paths only: JSON bodies (and
    the JSON of server-sent events) lose `abs_path` and a `root` naming a folder, and every
    other mention of a served folder's absolute path is cut to what follows it (the folder
    itself reads as its stack's name). A local caller (no credentials asked for) is
    answered as the CLI is."""

    def __init__(self, app: Any, roots: Callable[[], list[tuple[str, str]]]) -> None:
        self.app, self.roots = app, roots

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: dict[str, Any] = {}  # a JSON response's start, until its whole body is in
        body: list[bytes] = []
        mode = "pass"

        async def sending(message: Any) -> None:
            nonlocal mode
            if message["type"] == "http.response.start":
                kind = dict(message.get("headers") or []).get(b"content-type", b"")
                if kind.startswith(b"application/json"):
                    mode = "json"
                    held["start"] = message
                    return
                mode = "sse" if kind.startswith(b"text/event-stream") else "pass"
            elif message["type"] == "http.response.body" and mode == "json":
                body.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                data = _relative_json(b"".join(body), self.roots())  # those made by now
                start = held.pop("start")
                start["headers"] = [
                    (k, str(len(data)).encode() if k == b"content-length" else v)
                    for k, v in start.get("headers") or []
                ]
                await send(start)
                await send({"type": "http.response.body", "body": data})
                return
            elif message["type"] == "http.response.body" and mode == "sse":
                message = {**message, "body": _relative_sse(message.get("body", b""), self.roots())}
            await send(message)

        await self.app(scope, receive, sending)


def _relative(value: Any, roots: list[tuple[str, str]]) -> Any:
    """`value` with the absolute paths of `roots` made relative (see `_Relative`)."""
    if isinstance(value, str):
        for root, name in roots:
            if root in value:
                value = value.replace(root + "/", "").replace(root, name)
        return value
    if isinstance(value, list):
        return [_relative(v, roots) for v in value]
    if isinstance(value, dict):
        return {
            k: _relative(v, roots)
            for k, v in value.items()
            if k != "abs_path" and not (k == "root" and _under(v, roots))
        }
    return value


def _under(value: Any, roots: list[tuple[str, str]]) -> bool:
    """`value` is one of `roots`, or a path under one."""
    return isinstance(value, str) and any(value == r or value.startswith(r + "/") for r, _ in roots)


def _relative_json(data: bytes, roots: list[tuple[str, str]]) -> bytes:
    if b'"abs_path"' not in data and not any(
        r.encode() in data or json.dumps(r)[1:-1].encode() in data for r, _ in roots
    ):
        return data  # nothing to cut: sent as it was made
    try:
        value = json.loads(data)
    except ValueError:
        return data
    return json.dumps(_relative(value, roots), ensure_ascii=False).encode()


def _relative_sse(data: bytes, roots: list[tuple[str, str]]) -> bytes:
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if line.startswith(b"data: "):
            lines[i] = b"data: " + _relative_json(line[len(b"data: ") :], roots)
    return b"\n".join(lines)


class _BodyTooLarge(Exception):
    pass


class _BodyCap:
    """Refuse a request body over `limit` bytes with a JSON 413: at once when its
    Content-Length says so, else as soon as the bytes streamed in pass it."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = _error(413, f"the request body is over {self.limit} bytes", "send less at once")
        size = dict(scope.get("headers") or []).get(b"content-length")
        if size is not None and (not size.isdigit() or int(size) > self.limit):
            await too_big(scope, receive, send)
            return
        seen = 0
        started = False

        async def counted() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _BodyTooLarge
            return message

        async def sending(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except Exception as e:
            if started or not _caused_by(e, _BodyTooLarge):
                raise
            await too_big(scope, receive, send)


def _caused_by(e: BaseException, kind: type[BaseException]) -> bool:
    """`e` is, wraps or groups an exception of `kind`."""
    while e is not None:
        if isinstance(e, kind):
            return True
        if isinstance(e, BaseExceptionGroup):
            return any(_caused_by(x, kind) for x in e.exceptions)
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return False
