"""A stack's graph as it is: lineage of a note, chunk or document, and read-only Cypher."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field, TypeAdapter

from .. import ops
from ..records import Lineage
from .shared import Ok, router

routes = router()


class CypherIn(BaseModel):
    query: str = Field(min_length=1, description="Read-only Cypher, as `ok graph cypher`.")
    params: dict[str, Any] = {}


@routes.get("/v1/{stack}/lineage/{ref}", tags=["graph"])
def lineage(
    request: Request,
    stack: str,
    ref: str,
    ok: Ok,
    depth: Annotated[int, Query(ge=1, le=20)] = 5,
    direction: Annotated[str, Query(pattern="^(up|down|both)$")] = "both",
) -> Lineage:
    """Where a note, chunk or document came from, and what came of it."""
    call = ok.call(ok.allow(request, stack, "read"))
    return ops.lineage(call, ref, depth=depth, direction=direction)


# encoded as pydantic encodes a typed answer (an interval as "P1D", a decimal as "1.50"),
# which the route's callers have always read
_ROWS = TypeAdapter(list[dict[str, Any]])


@routes.post("/v1/{stack}/cypher", tags=["graph"], response_model=list[dict[str, Any]])
def cypher(request: Request, stack: str, body: Annotated[CypherIn, Body()], ok: Ok) -> Response:
    """Read-only Cypher under the CLI's rules (no files, no extensions, no writes): a row
    per result, its columns by name."""
    folder = ok.allow(request, stack, "read").folder
    limits = ops.query_limits(folder, float(folder.setting("serve.timeout")), "serve.timeout")
    rows = ops.cypher(folder, body.query, body.params, graph=ok.kuzu_reader(folder), limits=limits)
    return Response(_ROWS.dump_json(rows), media_type="application/json")
