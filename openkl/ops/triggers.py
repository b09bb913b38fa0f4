"""Semantic triggers: add, list, remove and test them."""

from __future__ import annotations

from .. import triggers as triggers_mod
from ..folder import Folder
from ..records import TriggerTest

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
) -> Trigger:
    """Write `triggers/<name>.yml` (it checks what is indexed from now on) and log it. The
    caller holds the writer lock."""
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
    )


def list_triggers(folder: Folder) -> tuple[list[Trigger], list[str]]:
    """The folder's triggers, and a line for each trigger file that could not be read."""
    return triggers_mod.load(folder)


def remove_trigger(folder: Folder, name: str) -> Trigger:
    """Delete a trigger's file and log it. The caller holds the writer lock."""
    return triggers_mod.remove(folder, name)


def match_triggers(folder: Folder, text: str) -> list[TriggerTest]:
    """How close `text` is to each trigger, and which would fire (nothing is written)."""
    return triggers_mod.test(folder, text)
