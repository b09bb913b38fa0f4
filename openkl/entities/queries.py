"""Reading the entity graph: list and find entities, their relationships, contributing
sources and evidence, neighbourhood walks (`ok graph entities|entity|traverse`, the MCP
entity tools, pages and context)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ..errors import NotFound, UsageError
from ..files.folder import Folder, shown
from ..graph.protocol import GraphStore
from ..records import (
    Cite,
    DirectedRelationship,
    EntityDetail,
    EntityListed,
    EntitySource,
    EntityView,
    GraphNode,
    Hop,
    Neighbourhood,
    Step,
    Traversal,
)
from .local import entity_id, key_of


def _entity_row(r: Mapping[str, Any]) -> dict[str, Any]:
    out = {
        k: r[k]
        for k in ("id", "name", "type", "description", "confidence", "verified", "source_kind")
    }
    if r.get("ext_id"):
        out["ext_id"] = r["ext_id"]
    out["aliases"] = list(r.get("aliases") or [])
    out["docs"] = list(r.get("docs") or [])
    return out


def _entity_view(r: Mapping[str, Any]) -> EntityView:
    return cast(EntityView, _entity_row(r))


def list_entities(
    g: GraphStore,
    *,
    type: str | None = None,
    min_confidence: float = 0.0,
    doc: str | None = None,
    limit: int | None = None,
    query: str | None = None,
) -> list[EntityListed]:
    """Entities, most confident first (ties by name)."""
    rows = g.entities(min_confidence=min_confidence, type=type, doc=doc)
    out: list[EntityListed] = []
    for r in rows:
        if query and query.lower() not in r["name"].lower():
            continue
        row: EntityListed = {**_entity_view(r), "mentions": int(r["mentions"])}
        out.append(row)
    return out[:limit] if limit else out


def find_entity(g: GraphStore, name: str) -> EntityView:
    """An entity by name, alias or id; NotFound suggests near names."""
    k = key_of(name)
    if not k:
        raise UsageError("the entity name is empty", "pass a name, e.g. `ok graph entity Kùzu`")
    e = g.entity_either(entity_id(k), name)
    if e is None:
        hits = [eid for eid, aliases in g.entity_aliases() if any(key_of(x) == k for x in aliases)]
        if hits:
            e = g.entity(hits[0])
    if e is None:
        near = g.entity_names_near(entity_id(k))
        hint = (
            ("did you mean: " + ", ".join(near))
            if near
            else "list entities with `ok graph entities`"
        )
        raise NotFound(f"no entity named '{shown(name)}'", hint)
    return _entity_view(e)


def relationships(
    g: GraphStore, eid: str, min_confidence: float = 0.0, rel: str | None = None
) -> list[DirectedRelationship]:
    """Relationships touching an entity, both directions, most confident first."""
    out: list[DirectedRelationship] = []
    for r in g.relationships_of(eid, min_confidence):
        if rel and r["type"] != rel:
            continue
        out.append({**r, "direction": "out" if r["from_id"] == eid else "in"})
    return out


def sources(folder: Folder, g: GraphStore, doc_ids: Sequence[str]) -> list[EntitySource]:
    """Titles and paths of contributing documents and notes (and bundle documents)."""
    return _Sources(folder, g, doc_ids).of(doc_ids)


class _Sources:
    """The documents, notes and bundle documents among some ids, read once."""

    def __init__(self, folder: Folder, g: GraphStore, doc_ids: Sequence[str]) -> None:
        from ..knowledge import aks

        local = [d for d in doc_ids if not d.startswith("aks:")]
        self.rows = g.source_docs(local)
        self.notes = g.source_notes(local)
        self.bundle_docs = aks.imported_documents(folder) if len(local) < len(doc_ids) else {}

    def of(self, doc_ids: Sequence[str]) -> list[EntitySource]:
        rows, notes, bundle_docs = self.rows, self.notes, self.bundle_docs
        out: list[EntitySource] = []
        for d in doc_ids:
            if d in rows:
                out.append(
                    {"id": d, "kind": "doc", "title": rows[d]["title"], "path": rows[d]["path"]}
                )
            elif d in notes:
                first = (notes[d]["text"].splitlines() or [""])[0][:80]
                out.append({"id": d, "kind": "memory", "title": first, "path": notes[d]["path"]})
            elif d.startswith("aks:"):
                info = bundle_docs.get(d[4:])
                out.append(
                    {
                        "id": d,
                        "kind": "bundle",
                        "title": (info.get("filename") if info else None) or d[4:],
                        "path": (info.get("bundle") if info else None) or "",
                    }
                )
            else:
                out.append({"id": d, "kind": "missing", "title": "", "path": ""})
        return out


def evidence_cites(folder: Folder, g: GraphStore, eid: str, limit: int = 5) -> list[Cite]:
    """Cite objects for the chunks and notes that mention an entity, strongest first."""
    return evidence_of_many(folder, g, [eid], limit)[eid]


def evidence_of_many(
    folder: Folder, g: GraphStore, ids: list[str], limit: int
) -> dict[str, list[Cite]]:
    from ..graph.search import chunk_cite, note_cite

    rows = g.mentions_of_many("Chunk", ids, limit)
    nrows = g.mentions_of_many("MemoryNote", ids, limit)
    files: dict[str, str | None] = {}
    chunks = g.chunks_by_id(sorted({r["id"] for eid in ids for r in rows[eid]}))
    notes = g.notes_by_id(sorted({r["id"] for eid in ids for r in nrows[eid]}))
    out: dict[str, list[Cite]] = {}
    for eid in ids:
        cites = [chunk_cite(folder, chunks[r["id"]], files) for r in rows[eid] if r["id"] in chunks]
        cites += [note_cite(folder, notes[r["id"]], files) for r in nrows[eid] if r["id"] in notes]
        out[eid] = cites[:limit]
    return out


def entity_detail(
    folder: Folder, g: GraphStore, name: str, min_confidence: float = 0.0, cites: int = 3
) -> EntityDetail:
    """`ok graph entity NAME`: the entity, its relationships, sources and evidence."""
    e = find_entity(g, name)
    return {
        **e,
        "relationships": relationships(g, e["id"], min_confidence),
        "sources": sources(folder, g, e["docs"]),
        "mentions": evidence_cites(folder, g, e["id"], cites) if cites else [],
    }


def traverse(
    g: GraphStore,
    name: str,
    depth: int = 2,
    rel: str | None = None,
    min_confidence: float = 0.0,
    limit: int = 200,
) -> Traversal:
    """Breadth-first walk from an entity over RELATED (both directions), with each path."""
    if depth < 0:
        raise UsageError("--depth must be 0 or more")
    start = find_entity(g, name)
    if rel:
        types = g.relationship_types()
        match = [t for t in types if t.lower() == rel.strip().lower().replace(" ", "_")]
        if not match:
            raise UsageError(
                f"no relationship has type {rel!r}",
                "most common types here: "
                + ", ".join(types[:12])
                + (", …" if len(types) > 12 else ""),
            )
        rel = match[0]
    seen = {start["id"]: 0}
    paths: dict[str, list[Hop]] = {start["id"]: []}
    steps: list[Step] = []
    frontier = [start["id"]]
    names = {start["id"]: start["name"]}
    # every level's relationships in one call (a recursive query on PostgreSQL)
    levels = g.relationships_walk(start["id"], depth, min_confidence, rel, limit)
    for d in range(1, depth + 1):
        if not frontier or len(steps) >= limit or d > len(levels):
            break
        rows = levels[d - 1]
        nxt: list[str] = []
        fset = set(frontier)
        for r in rows:
            for here, there, there_name, direction in (
                (r["a"], r["b"], r["bn"], "out"),
                (r["b"], r["a"], r["an"], "in"),
            ):
                if here not in fset or there in seen:
                    continue
                names[there] = there_name
                seen[there] = d
                hop: Hop = {
                    "from": names[here],
                    "from_id": here,
                    "to": there_name,
                    "to_id": there,
                    "type": r["type"],
                    "direction": direction,
                    "confidence": r["confidence"],
                    "evidence": r["evidence"],
                }
                paths[there] = paths[here] + [hop]
                steps.append(
                    {
                        "entity": there_name,
                        "id": there,
                        "depth": d,
                        "via": hop,
                        "path": [start["name"]] + [h["to"] for h in paths[there]],
                        "hops": paths[there],
                    }
                )
                nxt.append(there)
                if len(steps) >= limit:
                    break
            if len(steps) >= limit:
                break
        frontier = nxt
    return {
        "start": start,
        "depth": depth,
        "rel": rel,
        "min_confidence": min_confidence,
        "steps": steps,
        "truncated": len(steps) >= limit,
    }


def neighbourhood(
    g: GraphStore,
    seeds: Sequence[str],
    *,
    depth: int = 1,
    min_confidence: float = 0.0,
    types: Sequence[str] = (),
    limit: int = 300,
) -> Neighbourhood:
    """The entities within `depth` hops of the seed entities (ids) over RELATED, both ways,
    at least this confident and of these types (the seeds whatever their type), nearest
    first and at most `limit` of them; with every relationship among them."""
    wanted = {t.lower() for t in types}
    reach = {s: 0 for s in list(dict.fromkeys(seeds))[:limit]}
    frontier = list(reach)
    capped = len(reach) < len(set(seeds))
    for d in range(1, depth + 1):
        if not frontier or capped:
            break
        ends = {
            there
            for r in g.relationships_touching(frontier, min_confidence)
            for there in (r["a"], r["b"])
            if there not in reach
        }
        if wanted:
            found = g.entities_by_id(sorted(ends))
            nxt = [e for e in sorted(found) if found[e]["type"].lower() in wanted]
        else:  # no type to check: read only the entities kept, once, below
            nxt = sorted(ends)
        if len(reach) + len(nxt) > limit:
            nxt, capped = nxt[: limit - len(reach)], True
        reach.update((e, d) for e in nxt)
        frontier = nxt
    found = g.entities_by_id(list(reach))
    nodes: list[GraphNode] = [
        {
            "id": e,
            "name": found[e]["name"],
            "type": found[e]["type"],
            "confidence": found[e]["confidence"],
            "depth": d,
            "docs": found[e]["docs"],
        }
        for e, d in reach.items()
        if e in found
    ]
    return {
        "seeds": [s for s in reach if reach[s] == 0],
        "depth": depth,
        "min_confidence": min_confidence,
        "types": sorted(wanted),
        "nodes": nodes,
        "edges": g.relationships_among(list(reach), min_confidence),
        "capped": capped,
        "limit": limit,
    }


def graph_version(g: GraphStore, eid: str) -> str:
    """A hash of an entity, its relationships and its documents: pages cache by it."""
    return EntityReader(g, [eid]).version(eid)


class EntityReader:
    """What the pages of many entities read, in a few queries for all of them instead of a
    dozen for each (`ok graph page --all`); one entity's page reads through it too, so both
    give the same page."""

    def __init__(self, g: GraphStore, ids: list[str]) -> None:
        self.g = g
        self.rows = g.entities_by_id(ids)
        self.rels = g.relationships_of_many(ids, 0.0)
        docs = sorted({d for r in self.rows.values() for d in r["docs"] or []})
        self.doc_rows = {r["id"]: r for r in g.source_versions(docs)}

    def relationships(self, eid: str) -> list[DirectedRelationship]:
        return [
            {**r, "direction": "out" if r["from_id"] == eid else "in"}
            for r in self.rels.get(eid, [])
        ]

    def version(self, eid: str) -> str:
        """`graph_version` of one of the entities."""
        e = self.rows.get(eid)
        docs = sorted(set(e["docs"] or []) & self.doc_rows.keys()) if e else []
        payload = {
            "entity": {k: (sorted(v) if isinstance(v, list) else v) for k, v in (e or {}).items()},
            "relations": sorted(
                json.dumps(r, sort_keys=True, default=str) for r in self.relationships(eid)
            ),
            "docs": [json.dumps(self.doc_rows[d], sort_keys=True) for d in docs],
        }
        return hashlib.sha256(
            json.dumps(payload, sort_keys=True, default=str).encode()
        ).hexdigest()[:16]

    def details(self, folder: Folder, ids: list[str], cites: int) -> dict[str, EntityDetail]:
        """`entity_detail(…, cites=cites)` of some of the entities, by id."""
        views = {eid: _entity_view(self.rows[eid]) for eid in ids}
        srcs = _Sources(folder, self.g, sorted({d for v in views.values() for d in v["docs"]}))
        evidence = evidence_of_many(folder, self.g, ids, cites) if cites else {}
        return {
            eid: {
                **v,
                "relationships": self.relationships(eid),
                "sources": srcs.of(v["docs"]),
                "mentions": evidence.get(eid, []),
            }
            for eid, v in views.items()
        }
