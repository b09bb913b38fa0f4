"""`/health`, `/ready` and `/metrics`: is the process up, are its stacks serving, and how
it is doing."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from ..records import Health, Ready, Refusal
from .auth import Caller, Forbidden
from .shared import Ok, error, router

routes = router()


@routes.get("/health", tags=["health"])
def health(ok: Ok) -> Health:
    """The process is up."""
    return {"status": "ok", "version": ok.version}


@routes.get("/ready", tags=["health"], response_model=Ready, responses={503: {"model": Refusal}})
def ready(request: Request, ok: Ok) -> JSONResponse:
    """Every stack is open and serving, and its watch keeps it in line with its files:
    503 while a stack's watch or the syncs after changes fail (`failing` says how; the
    answers may be stale until it recovers)."""
    stacks = ok.stacks
    if not request.app.state.ready:
        return error(503, "starting", "wait for the folders to open")
    failing = stacks.failing()
    if failing:
        said = "; ".join(f"{n}: {s['failing']} failing ({s['error']})" for n, s in failing.items())
        return error(
            503,
            f"stale: the watch of stack {said}",
            "it tries again by itself (see `retry_in`); its status says more, and the "
            "server's log each failure",
            stacks=list(stacks.by_name),
            failing=failing,
        )
    return JSONResponse({"status": "ready", "stacks": list(stacks.by_name)})


@routes.get("/metrics", tags=["health"], response_class=PlainTextResponse)
def prometheus(request: Request, ok: Ok) -> Response:
    """Prometheus metrics (text/plain, the exposition format): requests and latency per
    route and stack, search latency by mode, writers waiting, chunks indexed, refresh
    outcomes and drift, trigger fires."""
    caller: Caller = request.state.caller
    if not caller.operator("read"):
        raise Forbidden(
            f"{caller.who} may not read the server's metrics",
            "they cover every stack: use a token with the scope *:read",
        )
    body, kind = ok.metrics.render()
    return Response(body, media_type=kind)
