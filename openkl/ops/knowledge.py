"""The entity graph's other inputs: AKS bundles and backfeed decisions."""

from __future__ import annotations

from typing import Any

from .. import aks, backfeed
from ..entities import consolidation
from ..folder import Folder
from ..indexing import open_graph


def import_bundle(folder: Folder, text: str, where: str = "bundle") -> dict[str, Any]:
    """Keep an AKS bundle under aks/imports/ and consolidate the entities it touches."""
    kept, keys = aks.keep_bundle(folder, text, where)
    with open_graph(folder, write=True) as g:
        consolidation.consolidate(folder, g, keys)
    return kept


def decide_backfeed(
    folder: Folder, iid: str, approve: bool, reason: str | None = None
) -> dict[str, Any]:
    """Approve (and absorb into the entity graph) or reject a pending backfeed item."""
    item = backfeed.decide(folder, iid, approve, reason)
    if approve:
        with open_graph(folder, write=True) as g:
            consolidation.consolidate(folder, g, backfeed.touched_keys(item))
    return item
