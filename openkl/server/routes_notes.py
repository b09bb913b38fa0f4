"""A stack's notes: listed, written, shown, changed and deleted; and distilled notes, written
from cited sources with the distillation prompts."""

from __future__ import annotations

from typing import Annotated, Any, cast

from fastapi import Query, Request
from pydantic import BaseModel, ConfigDict, Field

from .. import ops
from ..records import DistilledNote, DistillPrompt, NoteDeleted, NoteDict
from .shared import WHERE, Ok, router

routes = router()


class NoteIn(BaseModel):
    text: str = Field(min_length=1, description="The note's markdown body.")
    tags: list[str] = []
    topics: list[str] = []
    allow_duplicate: bool = Field(
        False, description="Write it even when it repeats a live note (else 409)."
    )
    supersedes: list[str] = Field(
        [], description="Ids of the notes it replaces (they leave search and ask)."
    )
    ttl: str | None = Field(None, description="Expire the note after this long: 12h, 30d, 2w.")


class NotePatch(BaseModel):
    text: str | None = Field(default=None, min_length=1)
    tags: list[str] | None = None
    topics: list[str] | None = None


class DistillIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(
        min_length=1,
        description="The distilled note; each claim ends with [N], the N-th of `citations`.",
    )
    citations: list[str | dict[str, Any]] = Field(
        min_length=1,
        description="What it rests on, in [N] order: cite objects or ids (chunk, c-…, doc, "
        "memory), as search and /citations return them.",
    )
    tags: list[str] = []
    topics: list[str] = []


@routes.get("/v1/{stack}/notes", tags=["notes"])
def list_notes(
    request: Request,
    stack: str,
    ok: Ok,
    tag: Annotated[list[str] | None, Query()] = None,
    topic: Annotated[list[str] | None, Query()] = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
    where: Annotated[list[str] | None, Query(description=WHERE)] = None,
) -> list[NoteDict]:
    """Notes, newest first."""
    folder = ok.allow(request, stack, "read").folder
    got = ops.list_notes(folder, tags=tag, topics=topic, limit=limit, where=where)
    return [n.as_dict(folder) for n in got.notes]


@routes.post("/v1/{stack}/notes", tags=["notes"], status_code=201)
def add_note(request: Request, stack: str, body: NoteIn, ok: Ok) -> NoteDict:
    """Write a note and index it."""
    st = ok.allow(request, stack, "write")
    with st.writing("mem add"):
        note = ops.add_note(
            st.folder,
            body.text,
            body.tags,
            body.topics,
            via="http",
            allow_duplicate=body.allow_duplicate,
            supersedes=body.supersedes,
            ttl=body.ttl,
        )
    return note.as_dict(st.folder)


@routes.get("/v1/{stack}/notes/{note_id}", tags=["notes"])
def show_note(request: Request, stack: str, note_id: str, ok: Ok) -> NoteDict:
    """One note by id or unique prefix."""
    folder = ok.allow(request, stack, "read").folder
    return ops.show_note(folder, note_id).as_dict(folder)


@routes.patch("/v1/{stack}/notes/{note_id}", tags=["notes"])
def update_note(request: Request, stack: str, note_id: str, body: NotePatch, ok: Ok) -> NoteDict:
    """Change a note's text, tags or topics; its id stays."""
    st = ok.allow(request, stack, "write")
    with st.writing("mem update"):
        note = ops.update_note(
            st.folder, note_id, text=body.text, tags=body.tags, topics=body.topics, via="http"
        )
    return note.as_dict(st.folder)


@routes.delete("/v1/{stack}/notes/{note_id}", tags=["notes"])
def delete_note(
    request: Request, stack: str, note_id: str, ok: Ok, purge: bool = False
) -> NoteDeleted:
    """Take a note out of search and the index: its file moves to memories/archive/
    (`ok mem restore` brings it back), or with `purge=true` is deleted for good (an
    archived note's too). The full id is needed; a prefix is refused (400)."""
    st = ok.allow(request, stack, "write")
    with st.writing("mem delete"):
        done = ops.delete_note(st.folder, note_id, purge=purge, via="http")
    return done.as_dict()


@routes.get("/v1/{stack}/distill/prompts", tags=["notes"])
def distill_prompts(request: Request, stack: str, ok: Ok) -> list[DistillPrompt]:
    """The distillation prompts, each with its instructions, as `ok distill get-prompt`."""
    ok.allow(request, stack, "read")
    return [cast(DistillPrompt, ops.distill_prompt(p["name"])) for p in ops.distill_prompts()]


@routes.post("/v1/{stack}/distill", tags=["notes"], status_code=201)
def distill(request: Request, stack: str, body: DistillIn, ok: Ok) -> DistilledNote:
    """Write a distilled note from cited sources, as `ok distill create`: the citations
    are verified first (one that changed or is gone: 400, nothing written) and kept, and
    the note is DERIVED_FROM each; a text whose claims carry no [N] marker is refused."""
    st = ok.allow(request, stack, "write")
    with st.writing("distill create"):
        done = ops.distill_note(
            st.folder,
            body.text,
            body.citations,
            tags=body.tags,
            topics=body.topics,
            via="http",
        )
    return done.as_dict(st.folder)
