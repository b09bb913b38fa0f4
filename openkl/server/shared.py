"""What the routes share: the `Server` built once per app (the stacks, who may do what, how
a route reads a stack's graph), the route class every router uses, and the small helpers of
the answers (errors, server-sent events, request bodies, streams)."""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Depends, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute

from .. import ops
from ..errors import BadInput, OkError
from ..files.folder import Folder
from ..graph import Graph
from ..graph.indexing import open_graph
from ..graph.protocol import GraphStore
from ..ops.read import Opener
from ..records import StackRow
from .auth import Authenticator, Caller, Forbidden
from .backend import Backend
from .metrics import Metrics
from .stacks import Served, Stacks

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


class TimedOut(OkError):
    """A request's graph query ran past serve.timeout (504)."""

    http_status = 504


@contextlib.contextmanager
def timed(seconds: float) -> Iterator[None]:
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


def error(status: int, message: str, hint: str | None = None, **more: Any) -> JSONResponse:
    """The JSON of a refusal: `{"error": …, "hint": …}` and what else it says."""
    body: dict[str, Any] = {"error": message}
    if hint:
        body["hint"] = hint
    return JSONResponse({**body, **more}, status_code=status)


def sse(kind: str, data: Any) -> str:
    """One server-sent event."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


class Server:
    """What every route shares, made once by `create_app` and kept in `app.state.ok`: the
    stacks served, the authenticator (None: every caller may do everything), the metrics,
    and what follows the stacks as they come and go (the MCP servers)."""

    def __init__(
        self,
        stacks: Stacks,
        auth: Authenticator | None,
        version: str,
        follow: Callable[[], None],
        allow_exec_triggers: bool = False,
    ) -> None:
        self.stacks, self.auth, self.version = stacks, auth, version
        self.follow, self.allow_exec_triggers = follow, allow_exec_triggers

    @property
    def metrics(self) -> Metrics:
        return self.stacks.metrics

    def allow(self, request: Request, name: str | None, need: str) -> Served:
        """The stack called `name` (none: the first the caller may read), if the caller's
        scope covers `need` there. A caller is never told of stacks it may not see."""
        caller: Caller = request.state.caller
        if not name:
            name = next((n for n in self.stacks.by_name if caller.allows(n, "read")), None)
            if name is None:
                raise Forbidden(f"{caller.who} may read no stack here", "ask for a key")
        caller.require(name, need)  # with auth off, the caller may do everything
        return self.stacks.get(name)

    def kuzu_reader(self, folder: Folder) -> Opener:
        """How a route opens the resident Kùzu graph: its queries are interrupted after
        serve.timeout seconds, and the caller is told so (504). Cypher reads it on a
        PostgreSQL backend too."""
        seconds = float(folder.setting("serve.timeout"))

        @contextlib.contextmanager
        def opened() -> Iterator[Graph]:
            with open_graph(folder) as g, timed(seconds):
                g.set_timeout(seconds)
                yield g

        return opened

    def backend_of(self, folder: Folder) -> Backend | None:
        return next(
            (st.backend for st in self.stacks.by_name.values() if st.folder is folder), None
        )

    def reader(self, folder: Folder) -> Opener:
        """How a route reads the graph (documents, chunks, notes, lineage, entities): from
        the stack's PostgreSQL backend when it has one, else as `kuzu_reader`."""
        backend = self.backend_of(folder)
        if backend is None:
            return self.kuzu_reader(folder)
        seconds = float(folder.setting("serve.timeout"))
        opener = backend.reader(seconds)

        @contextlib.contextmanager
        def opened() -> Iterator[GraphStore]:
            with opener() as g, timed(seconds):
                yield g

        return opened

    def call(self, st: Served) -> ops.Call:
        """What one request's operation on `st` runs with: the stack's folder, its reader
        (`reader`), serve.timeout, and its writer (the stack's writer queue, then the
        folder's writer lock; a PostgreSQL backend is synced after each write)."""
        return ops.Call(
            st.folder,
            reader=self.reader(st.folder),
            timeout=float(st.folder.setting("serve.timeout")),
            writer=st.writing,
        )

    def stack_row(self, name: str) -> StackRow:
        """A stack as the stack routes answer: its name, folder, about and counts."""
        st = self.stacks.get(name)
        return {
            "name": name,
            "root": str(st.folder.root),
            **ops.about(st.folder),
            **ops.counts(self.call(st)),
        }


async def _server(request: Request) -> Server:
    return cast(Server, request.app.state.ok)


# the shared state, as a route's parameter
Ok = Annotated[Server, Depends(_server)]


class AsMade(APIRoute):
    """A route whose response model (its return annotation, or `response_model=`) describes
    its answer in the OpenAPI document, while the answer is the value the route returns,
    encoded as JSON as it is: a record's keys are never dropped, nor its values coerced, by
    the model. A route that returns a `Response` answers with it."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, _as_made(endpoint, kwargs.get("status_code") or 200), **kwargs)


def _as_made(endpoint: Callable[..., Any], status: int) -> Callable[..., Any]:
    def answer(value: Any) -> Any:
        if isinstance(value, Response):
            return value
        return JSONResponse(jsonable_encoder(value), status_code=status)

    if inspect.iscoroutinefunction(endpoint):

        @functools.wraps(endpoint)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            return answer(await endpoint(*args, **kwargs))

        return run_async

    @functools.wraps(endpoint)
    def run(*args: Any, **kwargs: Any) -> Any:
        return answer(endpoint(*args, **kwargs))

    return run


def router() -> APIRouter:
    """A router of the API: its routes answer as `AsMade` says."""
    return APIRouter(route_class=AsMade)


class EventStream(StreamingResponse):
    """Server-sent events."""

    media_type = "text/event-stream"


class ZipStream(StreamingResponse):
    """A zip archive, streamed as it is made."""

    media_type = "application/zip"


# how the OpenAPI document tells of a route that may also answer as server-sent events
SSE = {"content": {"text/event-stream": {"schema": {"type": "string"}}}}


def text(data: bytes, what: str) -> str:
    """A request body that must be UTF-8 text."""
    if not data:
        raise BadInput("the body is empty", f"send {what} as the body")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"the body is not UTF-8 text: {e}", f"send {what}") from e


def streamed(chunks: Iterator[bytes]) -> Iterator[bytes]:
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
