"""A stack's citations: kept ones listed, any verified, new ones made (and kept)."""

from __future__ import annotations

import contextlib
from typing import Annotated, Any, cast

from fastapi import Query, Request
from pydantic import BaseModel, Field

from .. import ops
from ..records import CitationsListed, CitationsVerified, Cite
from .shared import Ok, router

routes = router()


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


@routes.get("/v1/{stack}/citations", tags=["citations"])
def list_citations(
    request: Request,
    stack: str,
    ok: Ok,
    tag: Annotated[list[str] | None, Query()] = None,
    doc: str | None = None,
    status: str | None = None,
) -> CitationsListed:
    """Persisted citations, filtered by tag, document and current status."""
    got = ops.list_citations(
        ok.allow(request, stack, "read").folder, tags=tag, doc=doc, status=status
    )
    return {"citations": got.citations, "problems": got.problems}


@routes.post("/v1/{stack}/citations/verify", tags=["citations"])
def verify_citations(request: Request, stack: str, body: VerifyIn, ok: Ok) -> CitationsVerified:
    """verified, moved, changed or missing, for citation ids, other ids or cite objects."""
    v = ops.verify_citations(ok.allow(request, stack, "read").folder, body.items)
    return {"ok": v.ok, "results": v.results}


@routes.post("/v1/{stack}/citations", tags=["citations"], status_code=201)
def make_citations(request: Request, stack: str, body: CiteIn, ok: Ok) -> list[Cite]:
    """Cite objects for ids (a span with `lines` or `chars`); `persist` keeps them under
    citations/."""
    st = ok.allow(request, stack, "write" if body.persist else "read")
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
