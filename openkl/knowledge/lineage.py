"""Lineage: where a piece of knowledge came from, and what came of it.

Walks the derived graph from a note, chunk or document:
- up (provenance): a note `DERIVED_FROM` chunks or documents, a chunk is `PART_OF` its
  document, a document `SUPERSEDES` its older versions;
- down (descendants): notes derived from it, and the newer version that superseded it.

Each note (and document) also shows its `[[links]]`: `LINKS_TO` the notes and documents it
links to, `LINKED_FROM` the notes that link to it. A link is not provenance, so the walk
shows linked nodes but does not go on from them.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import BadInput, NotFound, OkError
from ..files import notes as notes_mod
from ..files.folder import Folder
from ..files.mapping import resolve
from ..graph.lineage_queries import DIRECTIONS, lineage_row
from ..graph.protocol import GraphStore
from ..records import Lineage, LineageNode, LineageStep


def _node(g: GraphStore, kind: str, nid: str) -> LineageNode | None:
    return _shown(kind, nid, lineage_row(g, kind, nid))


def _shown(kind: str, nid: str, row: Any) -> LineageNode | None:
    """A node as lineage shows it, from what the graph holds of it (`lineage_row`)."""
    if not row:
        return None
    if kind == "memory":
        first = (row["text"] or "").strip().splitlines() or [""]
        return {
            "id": nid,
            "kind": kind,
            "path": row["path"],
            "title": first[0][:80],
            "current": True,
        }
    if kind == "chunk":
        return {
            "id": nid,
            "kind": kind,
            "doc": row["doc"],
            "current": bool(row["current"]),
            "title": " ".join((row["text"] or "").split())[:80],
        }
    return {
        "id": nid,
        "kind": "doc",
        "path": row["path"],
        "title": row["title"],
        "current": bool(row["current"]),
    }


def _missing(kind: str, nid: str) -> LineageNode:
    return {"id": nid, "kind": kind, "missing": True}


def _file_refs(folder: Folder, nid: str) -> list[str]:
    """What a note's file says it was derived from (its `derived_from` frontmatter is
    canonical; the walk links a chunk the graph holds, else the id's document)."""
    try:
        refs = notes_mod.find(folder, nid).extra.get("derived_from") or []
    except OkError:
        return []
    return [str(r) for r in (refs if isinstance(refs, list) else [refs])]


def _start(folder: Folder, g: GraphStore, ref: str) -> tuple[str, str]:
    ref = ref.strip()
    if not ref:
        raise BadInput("no id given", "pass a note, chunk or document id")
    if ref.startswith("m-") and _node(g, "memory", ref):
        return "memory", ref
    if "#char" in ref:
        if _node(g, "chunk", ref):
            return "chunk", ref
        ref = ref.split("#", 1)[0]  # a chunk of a retired version: start from its document
    if _node(g, "doc", ref):
        return "doc", ref

    try:
        return "doc", resolve(folder, ref, include_old=True)["id"]
    except NotFound:
        raise NotFound(
            f"nothing in the graph has id {ref!r}",
            "pass a note id (m-…), a chunk id (<doc>#char…) or a document id/path",
        ) from None


def lineage(
    folder: Folder, g: GraphStore, ref: str, depth: int = 5, direction: str = "both"
) -> Lineage:
    """The lineage of a note, chunk or document, breadth first up to `depth` hops."""
    if direction not in DIRECTIONS:
        raise BadInput(
            f"direction {direction!r} is not one of {', '.join(DIRECTIONS)}",
            "--direction up, down or both",
        )
    if depth < 1:
        raise BadInput("--depth must be at least 1", "e.g. --depth 3")
    kind, nid = _start(folder, g, ref)
    root = _node(g, kind, nid) or _missing(kind, nid)
    walked = g.lineage_walk(kind, nid, direction, depth, lambda n: _file_refs(folder, n))
    nodes: list[LineageStep] = [
        {
            **(_shown(n["kind"], n["id"], n["row"]) or _missing(n["kind"], n["id"])),
            "depth": n["depth"],
            "via": n["via"],
            "rel": n["rel"],
        }
        for n in walked["nodes"]
    ]
    return {"root": root, "nodes": nodes, "edges": walked["edges"]}


# -- keeping DERIVED_FROM edges in step with new versions --------------------------------------
def derived_notes(g: GraphStore, doc_ids: list[str]) -> list[str]:
    """Notes with a `DERIVED_FROM` edge into these documents or their chunks.

    Called before the documents leave the graph, so `relink` can restore those edges once
    the new versions (and the old versions' Doc nodes) are in place.
    """
    if not doc_ids:
        return []
    return g.notes_derived_from_docs(doc_ids)


def relink(folder: Folder, g: GraphStore, note_ids: list[str]) -> None:
    """Re-derive the `DERIVED_FROM` edges of notes from their files (`derived_from` is
    canonical), exactly as `ok index --rebuild` would."""

    if not note_ids:
        return
    paths = g.notes()
    notes = []
    for nid in note_ids:
        if nid not in paths:
            continue
        try:
            notes.append(notes_mod.read_note(folder.root / paths[nid]["path"], folder))
        except (OkError, OSError):
            continue
    g.unlink_derived([n.id for n in notes])
    link_derived(g, notes)


def link_derived(g: GraphStore, notes: list[notes_mod.Note]) -> None:
    """`DERIVED_FROM` edges from a note's `derived_from` frontmatter (chunk or doc ids).

    A span that is not a chunk of its own (a sentence, `--lines`) links to the chunks it
    overlaps; a chunk that no longer exists (its doc was re-chunked) falls back to its doc.
    """
    for n in notes:
        for ref in n.extra.get("derived_from") or []:
            ref = str(ref)
            if notes_mod.NOTE_ID.match(ref):
                continue  # another note: `link_note_refs` below
            chunks = [ref] if "#" in ref and g.has_chunk(ref) else []
            span = re.fullmatch(r"([0-9a-f]{16})#char(\d+)-(\d+)", ref)
            if span and not chunks:
                chunks = g.chunks_overlapping(span[1], int(span[2]), int(span[3]))
            for c in chunks:
                g.link_note_to_chunk(n.id, c)
            if not chunks:
                g.link_note_to_doc(n.id, ref.split("#")[0])
    g.link_note_refs()
