"""The AKS v1 surface over a stack's entity graph: entities, a walk from one, the context
of a query, entity pages, the stack as an AKS bundle (out and in), and descriptions made
on demand."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import BaseModel, Field

from .. import ops
from ..records import (
    AksBundle,
    BundleKept,
    Context,
    DescribedOne,
    DescriptionsMade,
    EntityDetail,
    EntityListed,
    EntityPage,
    Traversal,
)
from .shared import Describer, Domain, Ok, Server, ZipStream, router, streamed, text
from .stacks import Served

routes = router()


class ContextIn(BaseModel):
    query: str = Field(min_length=1)
    domain: str | None = Field(default=None, description="The stack (default: the first).")
    k: int | None = Field(default=None, ge=1)
    max_entities: int | None = Field(default=None, ge=1)
    min_confidence: float | None = Field(default=None, ge=0, le=1)


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


@routes.get("/aks/v1/entities", tags=["aks"])
def entities(
    request: Request,
    ok: Ok,
    domain: Domain = None,
    type: str | None = None,
    min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
    name: str | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    scope: Annotated[
        Literal["all", "verified"],
        Query(description="verified: only entities a reviewer approved (backfeed)."),
    ] = "all",
) -> list[EntityListed]:
    """Entities, most mentioned first, filtered by type, confidence, name and scope."""
    return list(
        ops.list_entities(
            ok.call(ok.allow(request, domain, "read")),
            type=type,
            min_confidence=min_confidence,
            name=name,
            limit=limit,
            verified_only=scope == "verified",
        )
    )


@routes.get("/aks/v1/entities/{name}", tags=["aks"])
def entity(
    request: Request,
    name: str,
    ok: Ok,
    domain: Domain = None,
    min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
) -> EntityDetail:
    """One entity by name: its relationships (at least this confident, default
    entities.min_confidence) and evidence."""
    call = ok.call(ok.allow(request, domain, "read"))
    return ops.entity(call, name, min_confidence=min_confidence)


@routes.get("/aks/v1/traverse", tags=["aks"])
def traverse(
    request: Request,
    start: str,
    ok: Ok,
    domain: Domain = None,
    depth: Annotated[int, Query(ge=1, le=5)] = 2,
    rel: str | None = None,
    min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 200,
) -> Traversal:
    """Walk the entity graph from `start`, up to `depth` hops."""
    return ops.traverse(
        ok.call(ok.allow(request, domain, "read")),
        start,
        depth=depth,
        rel=rel,
        min_confidence=min_confidence,
        limit=limit,
    )


@routes.post("/aks/v1/context", tags=["aks"])
def context(request: Request, body: ContextIn, ok: Ok) -> Context:
    """Passages and the entities around them for a natural-language query."""
    return ops.context(
        ok.call(ok.allow(request, body.domain, "read")),
        body.query,
        k=body.k,
        max_entities=body.max_entities,
        min_confidence=body.min_confidence,
    )


@routes.get("/aks/v1/pages/{name}", tags=["aks"])
def page(request: Request, name: str, ok: Ok, domain: Domain = None) -> EntityPage:
    """An entity's page as markdown."""
    return ops.entity_page(ok.call(ok.allow(request, domain, "read")), name)


@routes.get("/aks/v1/pages", tags=["aks"], response_class=ZipStream)
def all_pages(
    request: Request,
    ok: Ok,
    domain: Domain = None,
    min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
) -> ZipStream:
    """Every entity's page and their index.md as a zip (application/zip: the files `ok
    graph page --all` writes), streamed as the pages are made."""
    st = ok.allow(request, domain, "read")
    chunks = ops.zip_pages(ok.call(st), min_confidence=min_confidence)
    return ZipStream(
        streamed(chunks),
        headers={"Content-Disposition": f'attachment; filename="{st.name}-pages.zip"'},
    )


def _bundle(ok: Server, st: Served, q: BundleQuery) -> Response:
    got = ops.export_graph(
        ok.call(st),
        format_="aks",
        out="-",
        min_confidence=q.min_confidence,
        entity_type=q.type,
        max_entities=q.max_entities,
        verified_only=q.verified_only,
        all_=q.all,
    )
    return Response(next(iter(got.files.values())), media_type="application/json")


@routes.get("/aks/v1/export", tags=["aks"], response_model=AksBundle)
def export_bundle(
    request: Request, q: Annotated[BundleQuery, Depends()], ok: Ok, domain: Domain = None
) -> Response:
    """The stack as an AKS bundle, as `ok graph export --format aks` writes it."""
    return _bundle(ok, ok.allow(request, domain, "read"), q)


@routes.get("/aks/v1/stacks/{stack}/bundle", tags=["aks"], response_model=AksBundle)
def stack_bundle(
    request: Request, stack: str, q: Annotated[BundleQuery, Depends()], ok: Ok
) -> Response:
    """The stack as an AKS bundle (the same as /aks/v1/export?domain=STACK)."""
    return _bundle(ok, ok.allow(request, stack, "read"), q)


@routes.post("/aks/v1/stacks/{stack}/bundle", tags=["aks"], status_code=201)
async def import_bundle(request: Request, stack: str, ok: Ok) -> BundleKept:
    """Load the AKS bundle in the body into the stack, as `ok bundle import`: checked
    against the AKS schema first, then kept under aks/imports/."""
    st = ok.allow(request, stack, "write")
    got = text(await request.body(), "an AKS bundle (JSON)")

    def keep() -> BundleKept:
        with st.writing("bundle import"):
            return ops.import_bundle(st.folder, got, "the request body")

    return await run_in_threadpool(keep)


@routes.post("/stacks/{stack}/synthesize-descriptions", tags=["aks"])
def seed_synthesize(
    request: Request,
    stack: str,
    ok: Ok,
    describer: Describer = None,
    name: Annotated[list[str] | None, Query(description="Only these entities.")] = None,
    min_confidence: Annotated[float | None, Query(ge=0, le=1)] = None,
) -> DescriptionsMade:
    """Describe every entity of the stack (at least this confident, default
    entities.min_confidence), or those named, now: each description is cited and cached
    until its entity changes. `describer` overrides entities.describer for this call."""
    return ops.synthesize_descriptions(
        ok.call(ok.allow(request, stack, "write")),
        name,
        describer=describer,
        min_confidence=min_confidence,
    )


@routes.post("/aks/v1/entities/{name}/synthesize-description", tags=["aks"])
def synthesize_description(
    request: Request, name: str, ok: Ok, domain: Domain = None, describer: Describer = None
) -> DescribedOne:
    """One entity's description, made now (cited; `describer` overrides
    entities.describer for this call)."""
    call = ok.call(ok.allow(request, domain, "write"))
    made = ops.synthesize_descriptions(call, [name], describer=describer)
    return {"describer": made["describer"], **made["results"][0]}
