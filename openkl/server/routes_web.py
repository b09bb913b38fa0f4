"""The web explorer at `/`, its assets under `/ui/`, and the neighbourhood route it draws
the entity graph from. The page and its assets need no credentials; every API call the
page makes carries the caller's key."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, Response

from .. import ops
from ..knowledge import explorer as web
from ..records import Neighbourhood
from .shared import Ok, router

UI = "/ui/"  # the prefix of the page's assets


def is_public(path: str) -> bool:
    """The page and its assets: what a browser loads before it can ask for a key."""
    return path == "/" or path.startswith(UI)


routes = router()  # the page, its assets and `GET /v1/{stack}/neighbourhood`


@routes.get("/", include_in_schema=False)
def page() -> HTMLResponse:
    return HTMLResponse(web.served_page(), headers={"Cache-Control": "no-cache"})


@routes.get(UI + "{name}", include_in_schema=False)
def ui_asset(name: str) -> Response:
    return Response(
        web.asset(name), media_type=web.ASSETS[name], headers={"Cache-Control": "no-cache"}
    )


@routes.get("/v1/{stack}/neighbourhood", tags=["graph"])
def neighbourhood(
    request: Request,
    stack: str,
    ok: Ok,
    entity: Annotated[str | None, Query(min_length=1, description="Start here.")] = None,
    query: Annotated[
        str | None,
        Query(min_length=1, max_length=2000, description="Or: start from what it finds."),
    ] = None,
    depth: Annotated[int, Query(ge=0, le=3)] = 1,
    min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
    types: Annotated[list[str] | None, Query(description="Only these entity types.")] = None,
    limit: Annotated[int, Query(ge=1, le=2000)] = ops.NEIGHBOURHOOD_LIMIT,
) -> Neighbourhood:
    """The entities within `depth` hops of an entity or of a query's results, and every
    relationship among them; at most `limit` entities (`capped` says when more were in
    reach)."""
    return ops.neighbourhood(
        ok.call(ok.allow(request, stack, "read")),
        entity=entity,
        query=query,
        depth=depth,
        min_confidence=min_confidence,
        types=types,
        limit=limit,
    )
