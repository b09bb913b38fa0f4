"""Citations: keep cite objects under citations/, or remember them for `ok cite open`."""

from __future__ import annotations

from typing import Any

from .. import citations as cit
from ..folder import Folder
from .notes import _via


def keep_citations(
    folder: Folder,
    cites: list[dict[str, Any]],
    tags: list[str] | None = None,
    retention_class: str | None = None,
    via: str | None = None,
) -> list[dict[str, Any]]:
    """Persist cite objects under citations/ and log it; returns them as kept."""
    kept = [cit.persist(folder, c, tags or [], retention_class) for c in cites]
    folder.log_op("cite.make", ids=[c["id"] for c in kept], **_via(via))
    return kept


def remember_citations(folder: Folder, cites: list[dict[str, Any]]) -> None:
    """Keep transient cite objects where `ok cite open ID` finds them."""
    for c in cites:
        cit.remember(folder, c)
