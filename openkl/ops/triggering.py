"""Semantic triggers: add, list, remove and test them."""

from __future__ import annotations

from ..files.folder import Folder
from ..graph.indexing import open_graph
from ..knowledge import triggers as triggers_mod
from ..records import ExecWaiting, TriggerScan, TriggerTest

Trigger = triggers_mod.Trigger


def add_trigger(
    folder: Folder,
    name: str,
    example: str,
    *,
    threshold: float,
    scope: str = "all",
    exec_: str | None = None,
    timeout: float,
    replace: bool = False,
    env: list[str] | None = None,
    approved_by: str | None = None,
) -> Trigger:
    """Write `triggers/<name>.yml` (it checks what is indexed from now on) and log it. Its
    command runs once approved on this machine: `approved_by` names who added it and so
    approved it (None: it waits for `approve_trigger`). The caller holds the writer lock."""
    return triggers_mod.add(
        folder,
        name,
        example,
        threshold=threshold,
        scope=scope,
        exec_=exec_,
        timeout=timeout,
        replace=replace,
        env=env,
        approved_by=approved_by,
    )


def approve_trigger(folder: Folder, name: str, by: str) -> Trigger:
    """Approve a trigger's command as it is now, on this machine (`ok trigger approve`). The
    caller holds the writer lock."""
    t = triggers_mod.get(folder, name)
    triggers_mod.approve(folder, t, by)
    return t


def waiting_triggers(folder: Folder) -> list[ExecWaiting]:
    """Trigger commands that wait for approval on this machine."""
    return triggers_mod.waiting(folder)


def approved_triggers(folder: Folder) -> set[str]:
    """The names of the triggers whose command, as it is now, is approved here."""
    known = triggers_mod.approvals(folder)
    trigs, _ = triggers_mod.load(folder)
    return {t.name for t in trigs if triggers_mod.is_approved(folder, t, known)}


def list_triggers(folder: Folder) -> tuple[list[Trigger], list[str]]:
    """The folder's triggers, and a line for each trigger file that could not be read."""
    return triggers_mod.load(folder)


def remove_trigger(folder: Folder, name: str) -> Trigger:
    """Delete a trigger's file and log it. The caller holds the writer lock."""
    return triggers_mod.remove(folder, name)


def match_triggers(folder: Folder, text: str) -> list[TriggerTest]:
    """How close `text` is to each trigger, and which would fire (nothing is written)."""
    return triggers_mod.test(folder, text)


def scan_triggers(folder: Folder, name: str | None = None) -> TriggerScan:
    """Check every current document and live note against the triggers (or the one named),
    firing each once per item version, as after indexing; what fired before stays quiet.
    Logged when something fired. The caller holds the writer lock."""
    with open_graph(folder) as g:
        rep = triggers_mod.scan(folder, g, name)
    if rep["fired"]:
        folder.log_op(
            "trigger.scan", triggers=rep["triggers"], fired=[e["id"] for e in rep["fired"]]
        )
    return rep
