"""`POST /v1/{stack}/entities` and `POST /v1/{stack}/relationships`: graph edits over HTTP,
as `ok graph add entity|relation`. Each lands as a backfeed item in the stack's folder,
pending review (write scope) or approved at once (`approve`: admin scope), with the caller
recorded as who made it."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from .. import ops
from ..records import EditCaller, GraphEdit
from .auth import Caller, Forbidden
from .shared import Ok, router
from .stacks import Served

routes = router()

SOURCES = (
    "Documents (id, prefix or path) and memory notes (id) the edit rests on: each must be "
    "in the stack's folder; kept as its provenance, and shown as its sources."
)
APPROVE = (
    "Approve it at once (admin scope): it is in the graph when the call returns. Without, "
    "it waits for review (`POST /aks/v1/backfeed/approve`)."
)


class EntityIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, description="The entity's name.")
    type: str = Field(
        min_length=1,
        description="Person, Organization, Place, Event, Work, Software, Method, Chemical, "
        "GeneProtein, Disease, Organism, Anatomy, Concept, Code or Reference.",
    )
    description: str | None = Field(default=None, description="What it is, in a sentence.")
    aliases: list[str] = Field(default=[], description="Other names it goes by.")
    sources: list[str] = Field(default=[], description=SOURCES)
    approve: bool = Field(default=False, description=APPROVE)


class RelationshipIn(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: str = Field(alias="from", min_length=1, description="The entity it goes from.")
    to: str = Field(min_length=1, description="The entity it goes to.")
    type: str = Field(min_length=1, description="A snake_case verb: uses, part_of, works_with, …")
    description: str | None = Field(default=None, description="What it says, in a sentence.")
    sources: list[str] = Field(default=[], description=SOURCES)
    approve: bool = Field(default=False, description=APPROVE)


def edit_caller(caller: Caller, via: str = "http") -> EditCaller:
    """The caller as a backfeed item records it: the key or token, and its key id."""
    out: EditCaller = {"via": via, "by": caller.who}
    if caller.key_id:
        out["key_id"] = caller.key_id
    return out


def _stack_for(ok: Ok, request: Request, stack: str, approve: bool) -> tuple[Served, EditCaller]:
    st = ok.allow(request, stack, "write")
    caller: Caller = request.state.caller
    if approve and not caller.allows(st.name, "admin"):
        raise Forbidden(
            f"{caller.who} may not approve graph edits on stack {st.name!r}",
            "approving needs the admin scope: leave out `approve` to queue the edit for review",
        )
    return st, edit_caller(caller)


@routes.post(
    "/v1/{stack}/entities",
    tags=["graph"],
    status_code=201,
    response_model=GraphEdit,
    responses={200: {"model": GraphEdit, "description": "Added before."}},
)
def add_entity(request: Request, stack: str, body: EntityIn, ok: Ok) -> JSONResponse:
    """Add an entity, as `ok graph add entity`: 201 with the backfeed item that holds
    it (pending, or approved with `approve`), 200 with `created` false when the same
    entity was added before."""
    st, caller = _stack_for(ok, request, stack, body.approve)
    with st.writing("graph add entity"):
        done = ops.add_entity(
            st.folder,
            body.name,
            body.type,
            caller=caller,
            description=body.description,
            aliases=body.aliases,
            sources=body.sources,
            approve=body.approve,
        )
    return JSONResponse(done, status_code=201 if done["created"] else 200)


@routes.post(
    "/v1/{stack}/relationships",
    tags=["graph"],
    status_code=201,
    response_model=GraphEdit,
    responses={200: {"model": GraphEdit, "description": "Added before."}},
)
def add_relationship(request: Request, stack: str, body: RelationshipIn, ok: Ok) -> JSONResponse:
    """Add a relationship `from` -`type`-> `to`, as `ok graph add relation`. With
    `approve`, both ends must be entities of the graph (else 400, nothing written);
    without, an end may be added later (`unknown` names those ends)."""
    st, caller = _stack_for(ok, request, stack, body.approve)
    with st.writing("graph add relation"):
        done = ops.add_relation(
            st.folder,
            body.from_,
            body.type,
            body.to,
            caller=caller,
            description=body.description,
            sources=body.sources,
            approve=body.approve,
        )
    return JSONResponse(done, status_code=201 if done["created"] else 200)
