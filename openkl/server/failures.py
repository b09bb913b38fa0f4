"""How the API answers what went wrong: an `OkError` by its kind (4xx, 503, 504), a request
that does not fit the route (422), an unknown route (404/405) and anything else (500),
always as JSON `{"error": …, "hint": …}`."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    Duplicate,
    OkError,
)
from .shared import error


def status_of(exc: OkError) -> int:
    """The HTTP status an `OkError` answers with: its kind's `http_status`."""
    return exc.http_status


async def _ok_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, OkError)
    if isinstance(exc, Duplicate):
        return error(status_of(exc), exc.message, exc.hint, duplicate_of=exc.duplicate_of)
    return error(status_of(exc), exc.message, exc.hint)


async def _bad_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
    msg = first.get("msg", "invalid request")
    return error(422, f"{where}: {msg}" if where else msg, "see /docs for the request shape")


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    return error(500, f"internal error: {type(exc).__name__}", "see the server's log")


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    hint = "see /docs for the routes" if exc.status_code in (404, 405) else None
    return error(exc.status_code, str(exc.detail), hint)


def add_handlers(app: FastAPI) -> None:
    """The API's error answers, on `app`."""
    app.add_exception_handler(OkError, _ok_error)
    app.add_exception_handler(RequestValidationError, _bad_request)
    app.add_exception_handler(Exception, _internal_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
