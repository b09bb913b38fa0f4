"""Reading the entity graph: list and find entities, their relationships, contributing
sources and evidence, neighbourhood walks (`ok graph entities|entity|traverse`, the MCP
entity tools, pages and context)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ..errors import NotFound, UsageError
from ..folder import Folder, shown
from ..graph import ENTITY_COLS, Graph, rel_docs
from ..records import Cite
from .local import entity_id, key_of


def _entity_row(r: dict[str, Any]) -> dict[str, Any]:
    out = {
        k: r[k]
        for k in ("id", "name", "type", "description", "confidence", "verified", "source_kind")
    }
    if r.get("ext_id"):
        out["ext_id"] = r["ext_id"]
    out["aliases"] = list(r.get("aliases") or [])
    out["docs"] = list(r.get("docs") or [])
    return out


def list_entities(
    g: Graph,
    *,
    type: str | None = None,
    min_confidence: float = 0.0,
    doc: str | None = None,
    limit: int | None = None,
    query: str | None = None,
) -> list[dict[str, Any]]:
    """Entities, most confident first (ties by name)."""
    where = ["e.confidence >= $mc"]
    params: dict[str, Any] = {"mc": float(min_confidence)}
    if type:
        where.append("lower(e.type) = lower($t)")
        params["t"] = type
    if doc:
        where.append("list_contains(e.docs, $d)")
        params["d"] = doc
    rows = g.query(
        f"MATCH (e:Entity) WHERE {' AND '.join(where)} RETURN {ENTITY_COLS},"
        " COUNT {MATCH (:Chunk)-[:MENTIONS]->(e)} + COUNT {MATCH (:MemoryNote)"
        "-[:MENTIONS]->(e)} AS mentions"
        " ORDER BY e.confidence DESC, e.name, e.id",
        params,
    )
    out = []
    for r in rows:
        if query and query.lower() not in r["name"].lower():
            continue
        row = _entity_row(r)
        row["mentions"] = int(r["mentions"])
        out.append(row)
    return out[:limit] if limit else out


def find_entity(g: Graph, name: str) -> dict[str, Any]:
    """An entity by name, alias or id; NotFound suggests near names."""
    k = key_of(name)
    if not k:
        raise UsageError("the entity name is empty", "pass a name, e.g. `ok graph entity Kùzu`")
    rows = g.query(
        f"MATCH (e:Entity) WHERE e.id = $id OR e.id = $raw RETURN {ENTITY_COLS}",
        {"id": entity_id(k), "raw": name},
    )
    if not rows:
        hits = [
            r["id"]
            for r in g.query(
                "MATCH (e:Entity) WHERE size(e.aliases) > 0 RETURN e.id AS id, e.aliases AS a"
                " ORDER BY e.confidence DESC, e.id"
            )
            if any(key_of(x) == k for x in r["a"])
        ]
        if hits:
            rows = g.query(f"MATCH (e:Entity {{id: $id}}) RETURN {ENTITY_COLS}", {"id": hits[0]})
    if not rows:
        near = g.query(
            "MATCH (e:Entity) WHERE e.id CONTAINS $p RETURN e.name AS name"
            " ORDER BY e.confidence DESC, e.name LIMIT 5",
            {"p": entity_id(k)},
        )
        hint = (
            ("did you mean: " + ", ".join(r["name"] for r in near))
            if near
            else "list entities with `ok graph entities`"
        )
        raise NotFound(f"no entity named '{shown(name)}'", hint)
    return _entity_row(rows[0])


def relationships(
    g: Graph, eid: str, min_confidence: float = 0.0, rel: str | None = None
) -> list[dict[str, Any]]:
    """Relationships touching an entity, both directions, most confident first."""
    rows = g.query(
        "MATCH (a:Entity)-[r:RELATED]->(b:Entity) WHERE (a.id = $id OR b.id = $id)"
        " AND r.confidence >= $mc RETURN a.id AS from_id, a.name AS from_name, b.id AS to_id,"
        " b.name AS to_name, r.type AS type, r.confidence AS confidence, r.evidence AS evidence,"
        " r.docs AS docs, r.verified AS verified, r.source_kind AS source_kind,"
        " r.description AS description ORDER BY r.confidence DESC, r.type, a.id, b.id",
        {"id": eid, "mc": float(min_confidence)},
    )
    out = []
    for r in rows:
        if rel and r["type"] != rel:
            continue
        out.append(
            {**r, "docs": rel_docs(r["docs"]), "direction": "out" if r["from_id"] == eid else "in"}
        )
    return out


def sources(folder: Folder, g: Graph, doc_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Titles and paths of contributing documents and notes (and bundle documents)."""
    from .. import aks

    local = [d for d in doc_ids if not d.startswith("aks:")]
    rows = {
        r["id"]: r
        for r in g.query(
            "MATCH (d:Doc) WHERE d.id IN $ids RETURN d.id AS id, d.title AS title, d.path AS path,"
            " d.source AS source",
            {"ids": local},
        )
    }
    notes = {
        r["id"]: r
        for r in g.query(
            "MATCH (m:MemoryNote) WHERE m.id IN $ids RETURN m.id AS id, m.path AS path,"
            " m.text AS text",
            {"ids": local},
        )
    }
    bundle_docs = aks.imported_documents(folder) if len(local) < len(doc_ids) else {}
    out = []
    for d in doc_ids:
        if d in rows:
            out.append({"id": d, "kind": "doc", "title": rows[d]["title"], "path": rows[d]["path"]})
        elif d in notes:
            first = (notes[d]["text"].splitlines() or [""])[0][:80]
            out.append({"id": d, "kind": "memory", "title": first, "path": notes[d]["path"]})
        elif d.startswith("aks:"):
            info = bundle_docs.get(d[4:], {})
            out.append(
                {
                    "id": d,
                    "kind": "bundle",
                    "title": info.get("filename") or d[4:],
                    "path": info.get("bundle") or "",
                }
            )
        else:
            out.append({"id": d, "kind": "missing", "title": "", "path": ""})
    return out


def evidence_cites(folder: Folder, g: Graph, eid: str, limit: int = 5) -> list[Cite]:
    """Cite objects for the chunks and notes that mention an entity, strongest first."""
    from ..search import chunk_cite, note_cite

    rows = g.query(
        "MATCH (c:Chunk)-[m:MENTIONS]->(e:Entity {id: $id}) RETURN c.id AS id,"
        " m.confidence AS c ORDER BY m.confidence DESC, c.id LIMIT $k",
        {"id": eid, "k": limit},
    )
    nrows = g.query(
        "MATCH (n:MemoryNote)-[m:MENTIONS]->(e:Entity {id: $id}) RETURN n.id AS id,"
        " m.confidence AS c ORDER BY m.confidence DESC, n.id LIMIT $k",
        {"id": eid, "k": limit},
    )
    files: dict[str, str | None] = {}
    chunks = g.chunks_by_id([r["id"] for r in rows])
    notes = g.notes_by_id([r["id"] for r in nrows])
    out = [chunk_cite(folder, chunks[r["id"]], files) for r in rows if r["id"] in chunks]
    out += [note_cite(folder, notes[r["id"]], files) for r in nrows if r["id"] in notes]
    return out[:limit]


def entity_detail(
    folder: Folder, g: Graph, name: str, min_confidence: float = 0.0, cites: int = 3
) -> dict[str, Any]:
    """`ok graph entity NAME`: the entity, its relationships, sources and evidence."""
    e = find_entity(g, name)
    e["relationships"] = relationships(g, e["id"], min_confidence)
    e["sources"] = sources(folder, g, e["docs"])
    e["mentions"] = evidence_cites(folder, g, e["id"], cites) if cites else []
    return e


def traverse(
    g: Graph,
    name: str,
    depth: int = 2,
    rel: str | None = None,
    min_confidence: float = 0.0,
    limit: int = 200,
) -> dict[str, Any]:
    """Breadth-first walk from an entity over RELATED (both directions), with each path."""
    if depth < 0:
        raise UsageError("--depth must be 0 or more")
    start = find_entity(g, name)
    if rel:
        types = [
            r["t"]
            for r in g.query(
                "MATCH ()-[r:RELATED]->() RETURN r.type AS t, count(*) AS n ORDER BY n DESC, t"
            )
        ]
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
    paths: dict[str, list[dict[str, Any]]] = {start["id"]: []}
    steps: list[dict[str, Any]] = []
    frontier = [start["id"]]
    names = {start["id"]: start["name"]}
    for d in range(1, depth + 1):
        if not frontier or len(steps) >= limit:
            break
        rows = g.query(
            "MATCH (a:Entity)-[r:RELATED]->(b:Entity) WHERE (a.id IN $f OR b.id IN $f)"
            " AND r.confidence >= $mc AND a.confidence >= $mc AND b.confidence >= $mc"
            " RETURN a.id AS a, a.name AS an, b.id AS b, b.name AS bn, r.type AS type,"
            " r.confidence AS confidence, r.evidence AS evidence"
            " ORDER BY r.confidence DESC, a.id, b.id, r.type",
            {"f": frontier, "mc": float(min_confidence)},
        )
        nxt: list[str] = []
        fset = set(frontier)
        for r in rows:
            if rel and r["type"] != rel:
                continue
            for here, there, there_name, direction in (
                (r["a"], r["b"], r["bn"], "out"),
                (r["b"], r["a"], r["an"], "in"),
            ):
                if here not in fset or there in seen:
                    continue
                names[there] = there_name
                seen[there] = d
                hop = {
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


def graph_version(g: Graph, eid: str) -> str:
    """A hash of an entity, its relationships and its documents: pages cache by it."""
    e = g.query(f"MATCH (e:Entity {{id: $id}}) RETURN {ENTITY_COLS}", {"id": eid})
    rels = relationships(g, eid)
    docs = e[0]["docs"] if e else []
    doc_rows = g.query(
        "MATCH (d:Doc) WHERE d.id IN $ids RETURN d.id AS id, d.sha256 AS sha,"
        " d.path AS path, d.title AS title ORDER BY d.id",
        {"ids": list(docs)},
    )
    payload = {
        "entity": {
            k: (sorted(v) if isinstance(v, list) else v) for k, v in (e[0] if e else {}).items()
        },
        "relations": sorted(json.dumps(r, sort_keys=True, default=str) for r in rels),
        "docs": [json.dumps(r, sort_keys=True) for r in doc_rows],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[
        :16
    ]
