"""The stacks served: listed, made, described and dropped, under `/aks/v1/stacks` and under
`/stacks`, the AKS reference server's paths (which name a stack by `id`: here its name)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from .. import ops
from ..records import MappingEntry, StackDropped, StackRow
from .auth import Caller
from .shared import Ok, router

routes = router()


class StackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(
        min_length=1, description="The stack's name, also its folder's under serve.stacks_dir."
    )
    description: str | None = Field(default=None, max_length=2000)
    metadata: dict[str, Any] = Field(default={}, description="Free fields kept with the stack.")


class SeedStackIn(BaseModel):
    """`POST /stacks` as the AKS reference server takes it: a display name and a slug."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, description="The stack's name (its id, unless `domain`).")
    domain: str | None = Field(
        default=None, min_length=1, description="The stack's id: its folder's name."
    )
    description: str | None = Field(default=None, max_length=2000)
    metadata: dict[str, Any] = Field(default={}, description="Free fields kept with the stack.")


class StackPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str | None = Field(
        default=None, max_length=2000, description="A new description (null: none)."
    )
    metadata: dict[str, Any] | None = Field(
        default=None, description="Merged into the stack's metadata; a key set to null goes."
    )


@routes.get("/aks/v1/stacks", tags=["aks"])
def list_stacks(request: Request, ok: Ok) -> list[StackRow]:
    """The stacks served that the caller may read, with their counts."""
    caller: Caller = request.state.caller
    return [ok.stack_row(name) for name in ok.stacks.by_name if caller.allows(name, "read")]


@routes.post("/aks/v1/stacks", tags=["aks"], status_code=201)
def create_stack(request: Request, body: StackIn, ok: Ok) -> StackRow:
    """Make a new folder under serve.stacks_dir (as `ok init`) and serve it from now on
    (admin on that stack's name). It is not served again after a restart unless it is
    named with --root."""
    caller: Caller = request.state.caller
    caller.require(body.name, "admin")
    st = ok.stacks.create(body.name, {"description": body.description, "metadata": body.metadata})
    if ok.auth is not None:
        ok.auth.folders = {**ok.auth.folders, st.name: st.folder}
    ok.follow()
    return {**ok.stack_row(st.name), "created": True}


@routes.patch("/aks/v1/stacks/{stack}", tags=["aks"])
def patch_stack(request: Request, stack: str, body: StackPatch, ok: Ok) -> StackRow:
    """Change the stack's description or metadata (in its .ok/config.yml)."""
    st = ok.allow(request, stack, "admin")
    with st.writing("stacks patch"):
        ops.describe(st.folder, body.model_dump(exclude_unset=True))
    return ok.stack_row(st.name)


@routes.delete("/aks/v1/stacks/{stack}", tags=["aks"])
def delete_stack(request: Request, stack: str, ok: Ok) -> StackDropped:
    """Stop serving the stack: its graph is closed and its claim released. No file is
    deleted; the folder works with `ok` again, or `ok serve --root` serves it again."""
    st = ok.allow(request, stack, "admin")
    ok.stacks.drop(st.name)
    if ok.auth is not None:
        ok.auth.folders = {n: f for n, f in ok.auth.folders.items() if n != st.name}
    ok.follow()
    root = str(st.folder.root)
    return {
        "name": st.name,
        "root": root,
        "served": False,
        "files_deleted": False,
        "message": f"stopped serving {st.name!r}; its files stay in {root}",
    }


@routes.get("/aks/v1/stacks/{stack}", tags=["aks"])
def get_stack(request: Request, stack: str, ok: Ok) -> StackRow:
    """One stack, with its counts."""
    return ok.stack_row(ok.allow(request, stack, "read").name)


@routes.get("/aks/v1/stacks/{stack}/documents", tags=["aks"])
def stack_documents(request: Request, stack: str, ok: Ok) -> list[MappingEntry]:
    """The stack's documents (their mapping entries)."""
    return list(ops.list_docs(ok.allow(request, stack, "read").folder))


# -- the AKS reference server's paths ----------------------------------------------------
@routes.get("/stacks", tags=["aks"])
def seed_stacks(request: Request, ok: Ok) -> list[StackRow]:
    """As `GET /aks/v1/stacks`, each stack with its `id` (its name)."""
    return [{"id": row["name"], **row} for row in list_stacks(request, ok)]


@routes.post("/stacks", tags=["aks"], status_code=201)
def seed_create_stack(request: Request, body: SeedStackIn, ok: Ok) -> StackRow:
    """As `POST /aks/v1/stacks`: the stack is named by `domain` (else `name`), and a
    `name` that differs from it is kept as the metadata's `title`."""
    meta = dict(body.metadata)
    if body.domain and body.name != body.domain:
        meta.setdefault("title", body.name)
    created = create_stack(
        request,
        StackIn(name=body.domain or body.name, description=body.description, metadata=meta),
        ok,
    )
    return {"id": created["name"], **created}


@routes.get("/stacks/{stack}", tags=["aks"])
def seed_stack(request: Request, stack: str, ok: Ok) -> StackRow:
    """As `GET /aks/v1/stacks/{stack}`."""
    return {"id": stack, **get_stack(request, stack, ok)}


@routes.patch("/stacks/{stack}", tags=["aks"])
def seed_patch_stack(request: Request, stack: str, body: StackPatch, ok: Ok) -> StackRow:
    """As `PATCH /aks/v1/stacks/{stack}`."""
    return {"id": stack, **patch_stack(request, stack, body, ok)}


@routes.delete("/stacks/{stack}", tags=["aks"])
def seed_delete_stack(request: Request, stack: str, ok: Ok) -> StackDropped:
    """As `DELETE /aks/v1/stacks/{stack}`: it stops serving the stack; no file is
    deleted."""
    return {"id": stack, **delete_stack(request, stack, ok)}


@routes.get("/stacks/{stack}/documents", tags=["aks"])
def seed_documents(request: Request, stack: str, ok: Ok) -> list[MappingEntry]:
    """As `GET /aks/v1/stacks/{stack}/documents`."""
    return stack_documents(request, stack, ok)
