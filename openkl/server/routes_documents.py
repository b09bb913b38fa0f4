"""A stack's documents: stored (one body, or a multipart form of files) and indexed in one
ingest, listed, shown, removed, and their versions; and the AKS reference server's
upload and compile routes under `/stacks/{stack}/documents`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import ops
from ..errors import BadInput
from ..records import (
    DocCompiled,
    DocShown,
    DocVersion,
    IngestRefused,
    IngestReportDict,
    MappingEntry,
    Uploaded,
)
from .shared import Ok, error, router

routes = router()

MAX_FILES = 10_000  # file parts of one multipart upload

# what POST /v1/{stack}/documents takes, for the OpenAPI page (the route reads the body
# itself: one document's bytes, or a form of files)
DOCUMENTS_BODY = {
    "required": True,
    "content": {
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {
                    "file": {"type": "array", "items": {"type": "string", "format": "binary"}}
                },
            }
        },
    },
}

# what an upload answers when every file was skipped
REFUSED: dict[int | str, dict[str, object]] = {
    422: {"model": IngestRefused, "description": "Every file was skipped."}
}


@routes.get("/v1/{stack}/documents", tags=["documents"])
def list_documents(
    request: Request, stack: str, ok: Ok, all_versions: bool = False
) -> list[MappingEntry]:
    """The stored documents' mapping entries."""
    folder = ok.allow(request, stack, "read").folder
    return list(ops.list_docs(folder, all_versions=all_versions))


@routes.get("/v1/{stack}/documents/{doc}", tags=["documents"])
def show_document(request: Request, stack: str, doc: str, ok: Ok) -> DocShown:
    """A document by id or id prefix: its mapping entry and normalized text."""
    got = ops.show_doc(ok.allow(request, stack, "read").folder, doc)
    return {"entry": got.entry, "text": got.text}


@routes.post(
    "/v1/{stack}/documents",
    tags=["documents"],
    status_code=201,
    response_model=IngestReportDict,
    responses=REFUSED,
    openapi_extra={"requestBody": DOCUMENTS_BODY},
)
async def add_document(
    request: Request,
    stack: str,
    ok: Ok,
    name: Annotated[
        str | None,
        Query(min_length=1, description="The file name, e.g. notes.md (one document)."),
    ] = None,
) -> IngestReportDict | JSONResponse:
    """Store documents and index them, in one ingest. Either the body is one document
    named `name` (as `ok store ingest - --name NAME`; the type comes from the name's
    extension), or a `multipart/form-data` body holds several, one file part each,
    named by the part's file name (up to 10,000 files, 16 MiB in all)."""
    st = ok.allow(request, stack, "write")
    files: list[tuple[str, bytes]] | None = None
    data = b""
    if _is_multipart(request):
        files = await _uploaded(request)
    else:
        if name is None:
            raise BadInput(
                "the document needs a name",
                "pass ?name=notes.md, or send the files as multipart/form-data",
            )
        data = await request.body()
        if not data:
            raise BadInput("the body is empty", "send the document's bytes as the body")

    def store() -> IngestReportDict:
        with st.writing("store ingest"):
            if files is not None:
                return ops.ingest(st.folder, files=files).as_dict()
            return ops.ingest(st.folder, data=data, name=name).as_dict()

    rep = await run_in_threadpool(store)
    ok.metrics.chunks_indexed.labels(st.name).inc(rep.get("chunks", 0))
    if rep["skipped"] and not rep["added"] and not rep["unchanged"]:
        first = rep["skipped"][0]
        return error(
            422,
            f"nothing was stored: {_files(len(rep['skipped']))} skipped "
            f"({first['path']}: {first['reason']})",
            "see `skipped` for each file's reason",
            skipped=rep["skipped"],
        )
    return rep


@routes.delete("/v1/{stack}/documents/{doc}", tags=["documents"])
def remove_document(request: Request, stack: str, doc: str, ok: Ok) -> MappingEntry:
    """Remove a document (its text, original, mapping entry and graph nodes)."""
    st = ok.allow(request, stack, "write")
    with st.writing("store remove"):
        return ops.remove_doc(st.folder, doc)


@routes.get("/v1/{stack}/documents/{doc}/history", tags=["documents"])
def document_history(request: Request, stack: str, doc: str, ok: Ok) -> list[DocVersion]:
    """A document's versions, newest first."""
    return ops.doc_history(ok.allow(request, stack, "read").folder, doc)


# -- the AKS reference server's paths ----------------------------------------------------
@routes.post(
    "/stacks/{stack}/documents",
    tags=["aks"],
    status_code=201,
    response_model=Uploaded,
    responses=REFUSED,
    openapi_extra={"requestBody": DOCUMENTS_BODY},
)
async def seed_upload(
    request: Request,
    stack: str,
    ok: Ok,
    name: Annotated[str | None, Query(min_length=1)] = None,
) -> Uploaded | IngestReportDict | JSONResponse:
    """As `POST /v1/{stack}/documents` (`curl -F file=@runbook.md`): stored and
    compiled in one step. With one document, its `id` is at the top of the answer, for
    `POST /stacks/{stack}/documents/{id}/ingest`."""
    rep = await add_document(request, stack, ok, name)
    if isinstance(rep, dict):
        docs = rep.get("added", []) + rep.get("unchanged", [])
        if len(docs) == 1:
            return {"id": docs[0]["id"], **rep}
    return rep


@routes.post("/stacks/{stack}/documents/{doc}/ingest", tags=["aks"])
def seed_compile(request: Request, stack: str, doc: str, ok: Ok) -> DocCompiled:
    """What the document compiled into: chunks, entities, relationships. A document is
    compiled as it is stored, so this changes nothing and may be called again (a
    document on disk the index has not seen yet is synced first)."""
    st = ok.allow(request, stack, "write")
    done = ops.compile_doc(ok.call(st), doc)
    if done["status"] == "empty":
        with st.writing("sync"):
            ops.sync(st.folder)
        done = ops.compile_doc(ok.call(st), doc)
    return done


# a signpost, not an operation: the OpenAPI document leaves it out
@routes.api_route("/documents/{doc}", methods=["GET", "DELETE"], include_in_schema=False)
def seed_document(request: Request, doc: str) -> JSONResponse:
    """A document belongs to a stack here: the answer names the route to use."""
    verb = request.method
    return error(
        404,
        f"{verb} /documents/{{id}} is not a route here: documents belong to a stack",
        f"use {verb} /v1/STACK/documents/{doc} (GET /stacks lists the stacks)",
    )


def _is_multipart(request: Request) -> bool:
    kind = request.headers.get("content-type", "")
    return kind.split(";", 1)[0].strip().lower() == "multipart/form-data"


async def _uploaded(request: Request) -> list[tuple[str, bytes]]:
    """The file parts of a multipart body as (file name, bytes), in their order."""
    from starlette.datastructures import UploadFile
    from starlette.formparsers import MultiPartException

    try:
        form = await request.form(max_files=MAX_FILES, max_fields=MAX_FILES)
    except (MultiPartException, StarletteHTTPException) as e:
        said = e.message if isinstance(e, MultiPartException) else str(e.detail)
        raise BadInput(
            f"the multipart body cannot be read: {said}",
            f"send at most {MAX_FILES:,} files, each as a part with a file name",
        ) from e
    try:
        files: list[tuple[str, bytes]] = []
        for field_name, value in form.multi_items():
            if not isinstance(value, UploadFile):
                raise BadInput(
                    f"the form field {field_name!r} is not a file",
                    "send each document as a file part (curl -F file=@notes.md)",
                )
            if not value.filename:
                raise BadInput(
                    f"a file part ({field_name!r}) has no file name",
                    "name each part's file: it names the document",
                )
            files.append((value.filename, await value.read()))
    finally:
        await form.close()
    if not files:
        raise BadInput("the form holds no file", "send each document as a file part")
    return files


def _files(n: int) -> str:
    return f"{n} file" + ("" if n == 1 else "s")
