"""Backfeed over AKS v1: proposals of entities and relationships are queued, then approved
(absorbed as verified) or rejected by an admin. Each item keeps who queued it and who
decided: the key or token, and its key id."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from .. import ops
from ..errors import BadInput
from ..records import BackfeedItem, FlaggedBackfeedItem
from .graph_edits import edit_caller
from .shared import Domain, Ok, router, text

routes = router()


class DecisionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item_id: str = Field(min_length=1, description="The backfeed item (bf-…, or a prefix).")
    domain: str | None = Field(default=None, description="The stack (default: the first).")
    reason: str | None = Field(default=None, min_length=1, description="Why (kept in the item).")


@routes.post(
    "/aks/v1/backfeed/flag",
    tags=["aks"],
    status_code=201,
    response_model=FlaggedBackfeedItem,
    responses={200: {"model": FlaggedBackfeedItem, "description": "Queued before."}},
)
async def flag_backfeed(request: Request, ok: Ok, domain: Domain = None) -> JSONResponse:
    """Queue the proposal in the body ({"entities": […], "relationships": […]}) for
    review, as `ok backfeed flag`: 201, or 200 with `created` false when the same
    proposal was queued before."""
    st = ok.allow(request, domain, "write")
    got = text(await request.body(), "a backfeed proposal (JSON)")
    caller = edit_caller(request.state.caller)

    def flag() -> FlaggedBackfeedItem:
        with st.writing("backfeed flag"):
            return ops.flag_backfeed(st.folder, got, caller)

    item = await run_in_threadpool(flag)
    return JSONResponse(item, status_code=201 if item["created"] else 200)


@routes.get("/aks/v1/backfeed/queue", tags=["aks"])
def backfeed_queue(
    request: Request,
    ok: Ok,
    domain: Domain = None,
    status: Annotated[str, Query(pattern="^(pending|approved|rejected|all)$")] = "pending",
) -> list[BackfeedItem]:
    """Backfeed items with this status, oldest first."""
    return list(ops.backfeed_queue(ok.allow(request, domain, "read").folder, status))


@routes.post("/aks/v1/backfeed/approve", tags=["aks"])
def approve_backfeed(request: Request, body: DecisionIn, ok: Ok) -> BackfeedItem:
    """Approve a pending item (admin): it is absorbed with verified=true and
    source_kind=backfeed."""
    st = ok.allow(request, body.domain, "admin")
    with st.writing("backfeed approve"):
        return ops.decide_backfeed(
            st.folder,
            body.item_id,
            approve=True,
            reason=body.reason,
            caller=edit_caller(request.state.caller),
        )


@routes.post("/aks/v1/backfeed/reject", tags=["aks"])
def reject_backfeed(request: Request, body: DecisionIn, ok: Ok) -> BackfeedItem:
    """Reject a pending item (admin), with a reason; it stays, marked rejected."""
    st = ok.allow(request, body.domain, "admin")
    if not body.reason:
        raise BadInput("a rejection needs a reason", 'send {"item_id": …, "reason": …}')
    with st.writing("backfeed reject"):
        return ops.decide_backfeed(
            st.folder,
            body.item_id,
            approve=False,
            reason=body.reason,
            caller=edit_caller(request.state.caller),
        )


@routes.get("/aks/v1/backfeed/{item_id}", tags=["aks"])
def backfeed_item(request: Request, item_id: str, ok: Ok, domain: Domain = None) -> BackfeedItem:
    """One backfeed item, by id or unique prefix."""
    return ops.backfeed_item(ok.allow(request, domain, "read").folder, item_id)
