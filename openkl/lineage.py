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

from . import notes as notes_mod
from .errors import BadInput, NotFound, OkError
from .folder import Folder
from .graph.protocol import GraphStore
from .mapping import resolve
from .records import Lineage, LineageEdge, LineageNode, LineageStep

DIRECTIONS = ("up", "down", "both")
_UP = {"DERIVED_FROM", "PART_OF", "SUPERSEDES"}
_LINKS = {"LINKS_TO", "LINKED_FROM"}


def _node(g: GraphStore, kind: str, nid: str) -> LineageNode | None:
    if kind == "memory":
        note = g.lineage_note(nid)
        if note:
            first = (note["text"] or "").strip().splitlines() or [""]
            return {
                "id": nid,
                "kind": kind,
                "path": note["path"],
                "title": first[0][:80],
                "current": True,
            }
    elif kind == "chunk":
        chunk = g.lineage_chunk(nid)
        if chunk:
            return {
                "id": nid,
                "kind": kind,
                "doc": chunk["doc"],
                "current": bool(chunk["current"]),
                "title": " ".join((chunk["text"] or "").split())[:80],
            }
    else:
        doc = g.lineage_doc(nid)
        if doc:
            return {
                "id": nid,
                "kind": "doc",
                "path": doc["path"],
                "title": doc["title"],
                "current": bool(doc["current"]),
            }
    return None


def _missing(kind: str, nid: str) -> LineageNode:
    return {"id": nid, "kind": kind, "missing": True}


def _note_sources(folder: Folder, g: GraphStore, nid: str) -> list[tuple[str, str, str]]:
    """What a note says it was derived from (its `derived_from` frontmatter is canonical; a
    chunk of a version that was since replaced resolves to that version's document)."""

    try:
        refs = notes_mod.find(folder, nid).extra.get("derived_from") or []
    except OkError:
        return []
    out = []
    for ref in refs if isinstance(refs, list) else [refs]:
        ref = str(ref)
        if "#" in ref and _node(g, "chunk", ref):
            out.append(("DERIVED_FROM", "chunk", ref))
        elif _node(g, "doc", ref.split("#", 1)[0]):
            out.append(("DERIVED_FROM", "doc", ref.split("#", 1)[0]))
    return out


def _neighbours(
    folder: Folder, g: GraphStore, kind: str, nid: str, direction: str
) -> list[tuple[str, str, str]]:
    """(relationship, kind, id) of the next nodes."""
    out: list[tuple[str, str, str]] = []
    up, down = direction in ("up", "both"), direction in ("down", "both")
    if kind == "doc" and direction == "newer":
        return [("SUPERSEDED_BY", "doc", i) for i in g.newer_versions(nid)]
    if kind == "memory":
        out += [("LINKS_TO", e["kind"], e["dst"]) for e in g.links_from([nid])]
    if kind in ("memory", "doc"):
        out += [("LINKED_FROM", "memory", e["src"]) for e in g.links_to([nid])]
    if kind == "memory" and up:
        out += [("DERIVED_FROM", "chunk", i) for i in g.note_source_chunks(nid)]
        out += [("DERIVED_FROM", "doc", i) for i in g.note_source_docs(nid)]
        out += _note_sources(folder, g, nid)
        out += [("SUPERSEDES", "memory", i) for i in g.older_notes(nid)]
        out += [("DERIVED_FROM", "memory", i) for i in g.note_source_notes(nid)]
    if kind == "memory" and down:
        out += [("SUPERSEDED_BY", "memory", i) for i in g.newer_notes(nid)]
        out += [("DERIVED_BY", "memory", i) for i in g.notes_derived_from_note(nid)]
    if kind == "chunk":
        if up:
            out += [("PART_OF", "doc", i) for i in g.docs_of_chunk(nid)]
        if down:
            out += [("DERIVED_BY", "memory", i) for i in g.notes_derived_from_chunk(nid)]
    if kind == "doc":
        if up:
            out += [("SUPERSEDES", "doc", i) for i in g.older_versions(nid)]
        if up and not down:
            # provenance that reached an old version also names what replaced it
            out += [("SUPERSEDED_BY", "doc", i) for i in g.newer_versions_if_retired(nid)]
        if down:
            out += [("SUPERSEDED_BY", "doc", i) for i in g.newer_versions(nid)]
            out += [("DERIVED_BY", "memory", i) for i in g.notes_derived_from_doc(nid)]
            out += [("DERIVED_BY", "memory", i) for i in g.notes_derived_from_doc_chunks(nid)]
    return sorted(set(out))


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


def _next_way(rel: str, way: str) -> str:
    if rel == "SUPERSEDED_BY" and way in ("up", "newer"):
        return "newer"  # from an old version only on to newer ones
    return "up" if rel in _UP else "down"


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
    nodes: list[LineageStep] = []
    edges: list[LineageEdge] = []
    seen = {(kind, nid)}
    frontier = [(kind, nid, direction)]
    for level in range(1, depth + 1):
        nxt = []
        for k, i, way in frontier:
            for rel, k2, i2 in _neighbours(folder, g, k, i, way):
                edges.append({"from": i, "rel": rel, "to": i2})
                if (k2, i2) in seen:
                    continue
                seen.add((k2, i2))
                node = _node(g, k2, i2) or _missing(k2, i2)
                nodes.append({**node, "depth": level, "via": i, "rel": rel})
                if rel in _LINKS:
                    continue  # shown, not walked on from
                # provenance keeps going up and descendants keep going down: no zig-zag
                # from a note to its chunk to every other note derived from that chunk
                nxt.append((k2, i2, _next_way(rel, way)))
        frontier = nxt
        if not frontier:
            break
    return {"root": root, "nodes": nodes, "edges": edges}


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
