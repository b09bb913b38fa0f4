"""The layers every request passes through, outermost first: `Observed` (counted, timed and
logged, refused ones too), `Guarded` (Host and origin; in .guard), CORS, `BodyCap` (at most
so many bytes), `Gated` (credentials and rate) and, for callers with credentials,
`Relative` (answers without the server's absolute paths)."""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response
from starlette.routing import BaseRoute, Match

from ..errors import OkError
from .auth import OPEN, Authenticator, RateLimited, RateLimiter
from .failures import status_of
from .metrics import AccessLog
from .routes_web import is_public
from .shared import error
from .stacks import Stacks

# what needs no credentials
PUBLIC = {"/health", "/ready", "/docs", "/openapi.json", "/docs/oauth2-redirect", "/redoc"}


class Gate:
    """Credentials and rate limit, before any route runs. With `auth`, a key or a token
    (metered by `limiter`); without, every caller may do everything (each client address
    metered by `local_limiter`)."""

    def __init__(
        self,
        auth: Authenticator | None,
        limiter: RateLimiter | None,
        local_limiter: RateLimiter | None,
    ) -> None:
        self.auth, self.limiter, self.local_limiter = auth, limiter, local_limiter

    def __call__(self, scope: Any) -> Response | None:
        """A refusal, or None (the caller is then in the request's state)."""
        request = Request(scope)
        if request.url.path in PUBLIC or is_public(request.url.path):
            return None
        try:
            if self.auth is None:
                caller = OPEN
                meter = self.local_limiter
                who = request.client.host if request.client else "local"
            else:
                caller = self.auth.caller(request.headers.get("authorization"))
                meter = self.limiter
                who = caller.who
            request.state.caller = caller  # the log says whose requests were over the rate
            if meter is not None:
                meter.take(who)
        except RateLimited as e:
            resp = error(429, e.message, e.hint)
            resp.headers["Retry-After"] = str(max(1, math.ceil(e.retry_after)))
            return resp
        except OkError as e:
            return error(status_of(e), e.message, e.hint)
        request.state.caller = caller
        return None


class Observer:
    """Count and time each request of `app` (until its response starts), and log it:
    refused ones too (a bad Host or origin, no credentials, over the rate), by the route of
    `routers` or of `app` they asked for."""

    def __init__(
        self, app: FastAPI, routers: list[APIRouter], stacks: Stacks, log: AccessLog
    ) -> None:
        self.stacks, self.log = stacks, log
        # the routes of the routers, then those of the app itself (/mcp, the docs)
        self.routes = [r for routes in routers for r in routes.routes] + app.router.routes

    def __call__(self, scope: Any, status: int, took: float) -> None:
        route, params = _route_of(self.routes, scope)
        request = Request(scope)
        stack = params.get("stack") or request.query_params.get("domain") or "-"
        if stack not in self.stacks.by_name:
            stack = "-"  # a label per made-up name would grow without end
        labels = (request.method, route, stack)
        metrics = self.stacks.metrics
        metrics.requests.labels(*labels, str(status)).inc()
        metrics.latency.labels(*labels).observe(took)
        caller = (scope.get("state") or {}).get("caller")
        self.log.write(
            method=request.method,
            path=request.url.path,
            status=status,
            ms=round(took * 1000, 1),
            who=caller.who if caller is not None else None,
            client=request.client.host if request.client else None,
        )


class Gated:
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


def _route_of(routes: Iterable[BaseRoute], scope: Any) -> tuple[str, dict[str, Any]]:
    """The route a request went to, or would have gone to had it not been refused before
    routing (the first of `routes` it matches), and its path parameters."""
    route = scope.get("route")
    if route is not None:
        return str(getattr(route, "path", "unmatched")), scope.get("path_params") or {}
    for r in routes:
        match, child = r.matches(scope)
        if match is Match.FULL:
            return str(getattr(r, "path", "unmatched")), child.get("path_params") or {}
    return "unmatched", {}


class Observed:
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


def shown_roots(stacks: Stacks) -> list[tuple[str, str]]:
    """The absolute paths a remote caller is not shown, longest first, each with what it
    reads as instead: a served folder (its stack's name) and serve.stacks_dir."""
    out = [(str(st.folder.root), name) for name, st in stacks.by_name.items()]
    with contextlib.suppress(OkError):
        out.append((str(stacks.stacks_dir()), "serve.stacks_dir"))
    return sorted(out, key=lambda pair: -len(pair[0]))


class Relative:
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
    """`value` with the absolute paths of `roots` made relative (see `Relative`)."""
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


class BodyCap:
    """Refuse a request body over `limit` bytes with a JSON 413: at once when its
    Content-Length says so, else as soon as the bytes streamed in pass it."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = error(413, f"the request body is over {self.limit} bytes", "send less at once")
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
