"""Drift between versions of a document, and what an ingest records about new versions.

Drift is `1 - cosine` between the mean chunk embeddings of the old and the new version; it
is stored on the old version's mapping entry (and on the `SUPERSEDES` edge), so the history
of a document can be read from the files alone.
"""

from __future__ import annotations

from typing import Any

from ..errors import OkError
from ..files import events
from ..files import mapping as mapping_mod
from ..files.folder import Folder
from ..records import Added, MappingEntry


def doc_vector(folder: Folder, text: str) -> Any:
    """Mean of a text's chunk embeddings (chunked as the indexer does; vectors are cached)."""
    import numpy as np

    from ..graph.indexing import embedder
    from ..text.chunking import chunk_text
    from ..text.normalize import frontmatter

    emb = embedder(folder)
    max_tokens = folder.setting("chunking.max_tokens")
    overlap = folder.setting("chunking.overlap")
    chunks = chunk_text(text, emb.tokenizer, max_tokens, overlap, frontmatter(text)[1])
    if not chunks:
        return None
    vecs = emb.embed([c.text for c in chunks])
    mean = vecs.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm else None


def drift_between(folder: Folder, old_text: str, new_text: str) -> float | None:
    """`1 - cosine(mean(old), mean(new))`, rounded; None when either side has no text."""
    a, b = doc_vector(folder, old_text), doc_vector(folder, new_text)
    if a is None or b is None:
        return None
    return round(max(0.0, 1.0 - float(a @ b)), 6)


def after_ingest(
    folder: Folder,
    entries: dict[str, MappingEntry],
    added: list[Added],
    drift_threshold: float | None = None,
) -> None:
    """After new docs were written: drift of each new version against the one it supersedes
    (stored on the old entry), and the `ingested` / `drifted` events."""
    threshold = (
        float(folder.setting("refresh.drift_threshold"))
        if drift_threshold is None
        else float(drift_threshold)
    )
    changed = False
    for a in added:
        old = entries.get(a.get("supersedes") or "")
        new = entries.get(a["id"])
        if not old or not new:
            continue
        try:
            old_text = (folder.root / old["path"]).read_text(encoding="utf-8")
            new_text = (folder.root / new["path"]).read_text(encoding="utf-8")
            drift = drift_between(folder, old_text, new_text)
        except (OSError, UnicodeDecodeError, OkError):
            drift = None  # the old text is gone: no drift, the version link still stands
        if drift is not None:
            old["drift"] = drift
            a["drift"] = drift
            changed = True
    if changed:
        mapping_mod.save(folder, entries)
    batch: list[tuple[str, dict[str, Any]]] = []
    for a in added:
        e = entries.get(a["id"])
        batch.append(
            (
                "ingested",
                {
                    "doc": a["id"],
                    "path": a["path"],
                    "source": e.get("source") if e else None,
                    "supersedes": a.get("supersedes"),
                    "drift": a.get("drift"),
                },
            )
        )
        if a.get("drift") is not None and a["drift"] > threshold:
            batch.append(
                (
                    "drifted",
                    {
                        "doc": a["id"],
                        "previous": a["supersedes"],
                        "path": a["path"],
                        "drift": a["drift"],
                        "threshold": threshold,
                    },
                )
            )
    events.emit_many(folder, batch)


# -- history ---------------------------------------------------------------------------------
