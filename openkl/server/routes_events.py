"""What happens in a stack: its events (listed, or followed as they come), its triggers
(listed, added, scanned, removed), and refreshing its sources."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from pydantic import BaseModel, ConfigDict, Field

from .. import ops
from ..records import (
    Event,
    RefreshReportDict,
    TriggerDict,
    TriggerRemoved,
    TriggerScan,
    TriggersListed,
)
from .auth import Caller, Forbidden
from .shared import EventStream, Ok, router, sse

routes = router()


class TriggerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, description="Lowercase, digits, - _ .")
    example: str = Field(min_length=1, description="Text new knowledge is compared with.")
    threshold: float = Field(default=0.8, description="Cosine similarity to fire at.")
    scope: str = Field(default="all", description="What to watch: all, mem or store.")
    exec: str | None = Field(
        default=None,
        min_length=1,
        description="Shell command run with the event JSON (admin, and only on a server "
        "started with --allow-exec-triggers).",
    )
    env: list[str] = Field(default=[], description="Variables passed on to the command.")
    timeout: float = Field(default=30.0, description="Seconds the command may run.")
    replace: bool = Field(default=False, description="Overwrite a trigger of that name.")


class ScanIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, min_length=1, description="Only this trigger.")


class RefreshIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    docs: list[str] = Field(default=[], description="Documents to refresh now (ids, paths, URLs).")
    due: bool = Field(default=False, description="Those whose policy says so (the default).")
    all: bool = Field(default=False, description="Every source that can be re-read.")
    drift_threshold: float | None = Field(default=None, ge=0, le=2)
    dry_run: bool = Field(default=False, description="Only list what is due.")


@routes.get("/v1/{stack}/events/follow", tags=["events"], response_class=EventStream)
def follow_events(
    request: Request,
    stack: str,
    ok: Ok,
    type: Annotated[list[str] | None, Query()] = None,
    doc: str | None = None,
    timeout: Annotated[float, Query(gt=0, le=3600)] = 300,
) -> EventStream:
    """Events appended from now on, as server-sent `event` events (text/event-stream; like
    `ok events --follow`), for `timeout` seconds."""
    st = ok.allow(request, stack, "read")
    # ends when the server begins to stop, too: a follower never holds up a shutdown
    found = ops.follow_events(st.folder, types=type, doc=doc, timeout=timeout, stop=st.stop)
    return EventStream(sse("event", e) for e in found)


@routes.get("/v1/{stack}/events", tags=["events"])
def events(
    request: Request,
    stack: str,
    ok: Ok,
    since: str | None = None,
    type: Annotated[list[str] | None, Query()] = None,
    doc: str | None = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> list[Event]:
    """Events, oldest first (ingested, refreshed, drifted, trigger fired, …)."""
    folder = ok.allow(request, stack, "read").folder
    return list(ops.events(folder, since=since, types=type, doc=doc, limit=limit))


@routes.get("/v1/{stack}/triggers", tags=["events"])
def triggers(request: Request, stack: str, ok: Ok) -> TriggersListed:
    """The folder's triggers, and the trigger files that could not be read."""
    rows, problems = ops.list_triggers(ok.allow(request, stack, "read").folder)
    return {"triggers": [t.as_dict() for t in rows], "problems": problems}


@routes.post("/v1/{stack}/triggers", tags=["events"], status_code=201)
def add_trigger(request: Request, stack: str, body: TriggerIn, ok: Ok) -> TriggerDict:
    """Add a trigger, as `ok trigger add`: it checks what is indexed from now on. One
    with a command (`exec`) is code run on the server, as its user: it needs admin, and
    a server started with `--allow-exec-triggers` (which approves what admins add)."""
    st = ok.allow(request, stack, "admin" if body.exec else "write")
    if body.exec and not ok.allow_exec_triggers:
        raise Forbidden(
            "this server takes no trigger commands (exec) over HTTP: a command runs on the server",
            "add it on the server's machine with `ok trigger add --exec`, or start the "
            "server with `ok serve --allow-exec-triggers`",
        )
    caller: Caller = request.state.caller
    with st.writing("trigger add"):
        t = ops.add_trigger(
            st.folder,
            body.name,
            body.example,
            threshold=body.threshold,
            scope=body.scope,
            exec_=body.exec,
            timeout=body.timeout,
            replace=body.replace,
            env=body.env,
            approved_by=f"http {caller.who}" if body.exec else None,
        )
    return t.as_dict()


@routes.post("/v1/{stack}/triggers/scan", tags=["events"])
def scan_triggers(request: Request, stack: str, ok: Ok, body: ScanIn | None = None) -> TriggerScan:
    """Check what the stack holds against its triggers (or the one named), as `ok
    trigger scan --json`: each fires once per document or note version."""
    st = ok.allow(request, stack, "write")
    with st.writing("trigger scan"):
        return ops.scan_triggers(st.folder, body.name if body else None)


@routes.delete("/v1/{stack}/triggers/{name}", tags=["events"])
def remove_trigger(request: Request, stack: str, name: str, ok: Ok) -> TriggerRemoved:
    """Remove a trigger."""
    st = ok.allow(request, stack, "write")
    with st.writing("trigger remove"):
        t = ops.remove_trigger(st.folder, name)
    return {"removed": t.name}


@routes.post("/v1/{stack}/refresh", tags=["events"])
def refresh(
    request: Request, stack: str, ok: Ok, body: RefreshIn | None = None
) -> RefreshReportDict:
    """Re-fetch sources and store what changed, as `ok refresh --json`: the documents
    named, those due (the default) or all. A source that could not be refreshed is in
    `failed`."""
    body = body or RefreshIn()
    st = ok.allow(request, stack, "write")
    return ok.stacks.refresh(
        st,
        body.docs,
        due=body.due,
        all_=body.all,
        drift_threshold=body.drift_threshold,
        dry_run=body.dry_run,
    ).as_dict()
