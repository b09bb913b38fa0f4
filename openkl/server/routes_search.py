"""A stack's index: its status, hybrid search, answers with citations (whole, or streamed as
server-sent events), and a sync of the index with the files."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from .. import ops
from ..errors import OkError
from ..records import Answer, SearchAnswer, Status, SyncReportDict
from .shared import SSE, WHERE, Ok, router, sse

routes = router()


class AskIn(BaseModel):
    question: str = Field(min_length=1)
    stream: bool = Field(default=False, description="Answer as server-sent events.")
    k: int | None = Field(default=None, ge=1)
    scope: str = "all"
    llm: bool = Field(default=True, description="Use the configured LLM, if there is one.")
    include_superseded: bool = Field(
        default=False, description="Also notes that a newer note supersedes."
    )
    recency: str | None = Field(
        default=None, description="Favour newer items: a half-life (90d) or off."
    )


@routes.get("/v1/{stack}/status", tags=["openkl"])
def status(request: Request, stack: str, ok: Ok) -> Status:
    """Counts and staleness, as `ok status --json`."""
    return ops.status(ok.allow(request, stack, "read").folder)


def search_request(
    q: Annotated[str, Query(min_length=1, description="The query.")],
    k: Annotated[int | None, Query(ge=1)] = None,
    mode: str | None = None,
    scope: str = "all",
    tag: Annotated[list[str] | None, Query()] = None,
    topic: Annotated[list[str] | None, Query()] = None,
    path: str | None = None,
    since: str | None = None,
    until: str | None = None,
    per_doc: Annotated[int | None, Query(ge=1)] = None,
    explain: bool = False,
    include_superseded: Annotated[
        bool, Query(description="Also notes that a newer note supersedes.")
    ] = False,
    recency: Annotated[
        str | None, Query(description="Favour newer items: a half-life (90d) or off.")
    ] = None,
    where: Annotated[list[str] | None, Query(description=WHERE)] = None,
    drift_penalty: Annotated[
        float | None,
        Query(
            ge=0,
            le=10,
            description="Hold back documents whose latest version drifted: each score "
            "times 1 - weight * drift (0: off).",
        ),
    ] = None,
) -> ops.SearchRequest:
    """A search as the query string of `GET /v1/{stack}/search` asks for it."""
    return ops.SearchRequest(
        q,
        k=k,
        mode=mode,
        scope=scope,
        tags=tuple(tag or ()),
        topics=tuple(topic or ()),
        path=path,
        since=since,
        until=until,
        per_doc=per_doc,
        explain=explain,
        include_superseded=include_superseded,
        recency=recency,
        where=tuple(where or ()),
        drift_penalty=drift_penalty,
    )


@routes.get("/v1/{stack}/search", tags=["openkl"], response_model=SearchAnswer)
def search(
    request: Request,
    stack: str,
    ok: Ok,
    req: Annotated[ops.SearchRequest, Depends(search_request)],
) -> JSONResponse:
    """Hybrid search: the same parameters and cite objects as `ok search --json`."""
    st = ok.allow(request, stack, "read")
    started = time.perf_counter()
    res = ops.search(ok.call(st), req)
    ok.metrics.search.labels(res.options.mode).observe(time.perf_counter() - started)
    body: SearchAnswer = {"stack": st.name, "query": res.query, "hits": res.hits}
    if res.warning:
        body["warning"] = res.warning
    if res.no_good_match:
        body["no_good_match"] = True
        body["best_score"] = res.best_score
    # plain JSON values all through: rendered as they are, without a pass to convert them
    return JSONResponse(body)


@routes.post("/v1/{stack}/ask", tags=["openkl"], response_model=Answer, responses={200: SSE})
def ask(request: Request, stack: str, body: AskIn, ok: Ok) -> Answer | StreamingResponse:
    """An answer with `[N]` citations, as `ok ask --json`. With `"stream": true`, server-
    sent events (text/event-stream): `token` events as the LLM writes (`{"text": …}`),
    then one `answer` event holding the whole answer (or one `error` event)."""
    st = ok.allow(request, stack, "read")
    folder = st.folder
    if not body.stream:
        return ops.ask(
            ok.call(st),
            body.question,
            k=body.k,
            scope=body.scope,
            use_llm=body.llm,
            include_superseded=body.include_superseded,
            recency=body.recency,
        )
    out: queue.Queue[tuple[str, Any]] = queue.Queue()
    passages = ok.reader(folder) if ok.backend_of(folder) else None

    def answer() -> None:
        try:
            got = ops.ask(
                ops.Call(folder, reader=passages),
                body.question,
                k=body.k,
                scope=body.scope,
                use_llm=body.llm,
                on_token=lambda t: out.put(("token", {"text": t})),
                include_superseded=body.include_superseded,
                recency=body.recency,
            )
            out.put(("answer", got))
        except OkError as e:
            out.put(("error", {"error": e.message, "hint": e.hint}))
        except Exception as e:  # the stream has started: say it there
            out.put(("error", {"error": f"internal error: {type(e).__name__}"}))

    threading.Thread(target=answer, name="ok-serve-ask", daemon=True).start()

    def stream() -> Iterator[str]:
        while True:
            kind, data = out.get()
            yield sse(kind, data)
            if kind != "token":
                return

    return StreamingResponse(stream(), media_type="text/event-stream")


@routes.post("/v1/{stack}/sync", tags=["openkl"])
def sync(request: Request, stack: str, ok: Ok) -> SyncReportDict:
    """Bring the index in line with the files, as `ok sync --json`."""
    st = ok.allow(request, stack, "write")
    with st.writing("sync"):
        rep = ops.sync(st.folder)
    ok.metrics.chunks_indexed.labels(st.name).inc(rep.chunks_added)
    return rep.as_dict()
