"""The derived graph, read: Cypher, entities, walks, entity pages and exports."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import aks, pages
from ..entities import queries
from ..entities.consolidation import min_confidence as default_min_confidence
from ..folder import Folder, atomic_write
from ..indexing import open_graph
from ..mapping import resolve
from .read import Opener, reading

# what `table` may name in a CSV export, and the file each is
EXPORT_TABLES = {
    "entities": "entities.csv",
    "relationships": "relationships.csv",
    "relations": "relationships.csv",
}


def _floor(folder: Folder, value: float | None) -> float:
    return default_min_confidence(folder) if value is None else value


def cypher(
    folder: Folder,
    query: str,
    params: dict[str, Any] | None = None,
    *,
    write: bool = False,
    graph: Opener | None = None,
) -> list[dict[str, Any]]:
    """Run one Cypher statement, read-only unless `write`: then on a graph opened for
    writing, and logged (the caller holds the writer lock)."""
    if write:
        with open_graph(folder, write=True) as g:
            rows = g.cypher(query, params or {})
            folder.log_op("graph.cypher", query=query)
        return rows
    with reading(folder, graph) as g:
        return g.cypher(query, params or {})


def list_entities(
    folder: Folder,
    *,
    type: str | None = None,
    min_confidence: float | None = None,
    doc: str | None = None,
    name: str | None = None,
    limit: int | None = None,
    graph: Opener | None = None,
) -> list[dict[str, Any]]:
    """Entities, most confident first: of this type, at least this confident (default
    entities.min_confidence), from this document (id, prefix or path), with names
    containing `name`; at most `limit` (None: all)."""
    doc_id = resolve(folder, doc)["id"] if doc else None
    floor = _floor(folder, min_confidence)
    with reading(folder, graph) as g:
        return queries.list_entities(
            g, type=type, min_confidence=floor, doc=doc_id, limit=limit, query=name
        )


def entity(
    folder: Folder, name: str, *, min_confidence: float = 0.0, graph: Opener | None = None
) -> dict[str, Any]:
    """One entity (name, alias or id): its relationships at least this confident, its
    sources and mentions."""
    with reading(folder, graph) as g:
        return queries.entity_detail(folder, g, name, min_confidence=min_confidence)


def traverse(
    folder: Folder,
    name: str,
    *,
    depth: int = 2,
    rel: str | None = None,
    min_confidence: float | None = None,
    limit: int = 200,
    graph: Opener | None = None,
) -> dict[str, Any]:
    """Breadth-first walk from an entity over relationships (only `rel`, if given), at
    least this confident (default entities.min_confidence), stopping after `limit`."""
    floor = _floor(folder, min_confidence)
    with reading(folder, graph) as g:
        return queries.traverse(g, name, depth=depth, rel=rel, min_confidence=floor, limit=limit)


def entity_page(
    folder: Folder, name: str, *, force: bool = False, graph: Opener | None = None
) -> dict[str, Any]:
    """An entity's markdown page, cached by graph version unless `force`."""
    with reading(folder, graph) as g:
        return pages.page(folder, g, name, force=force)


def write_pages(folder: Folder, *, min_confidence: float | None = None) -> dict[str, Any]:
    """Every entity's page (at least this confident, default entities.min_confidence)
    into graph/pages/, with an index, and log it (the caller holds the writer lock)."""
    with open_graph(folder) as g:
        data = pages.write_all(folder, g, min_confidence=_floor(folder, min_confidence))
        folder.log_op("graph.pages", dir=data["dir"], pages=data["pages"])
    return data


@dataclass(frozen=True)
class GraphExport:
    """An export of the entity graph: its files' text by name, and where they went."""

    format: str
    files: dict[str, str]
    entities: int
    relationships: int
    # the paths written (none when the files were only made)
    written: list[str] = field(default_factory=list)


def export_graph(
    folder: Folder,
    *,
    format: str = "aks",
    table: str | None = None,
    min_confidence: float | None = None,
    entity_type: str | None = None,
    max_entities: int | None = None,
    verified_only: bool = False,
    save: bool = True,
    out: Path | None = None,
    graph: Opener | None = None,
) -> GraphExport:
    """The entity graph as an AKS bundle, GraphML or CSV (both tables, or only `table`).
    With `save` the files are written (logged) into graph/, or `out`: a directory, or the
    file to write when there is one."""
    with reading(folder, graph) as g:
        bundle = aks.export(
            folder,
            g,
            min_confidence=min_confidence,
            entity_type=entity_type,
            max_entities=max_entities,
            verified_only=verified_only,
        )
    slug = aks.domain_slug(folder)
    files: dict[str, str]
    if format == "aks":
        files = {f"{slug}.aks.json": json.dumps(bundle, indent=2, ensure_ascii=False) + "\n"}
    elif format == "graphml":
        files = {f"{slug}.graphml": aks.graphml(bundle)}
    else:
        files = aks.csv_tables(bundle)
        if table is not None:
            files = {EXPORT_TABLES[table]: files[EXPORT_TABLES[table]]}
    written = []
    if save:
        target = out or folder.graph_dir
        for fname, text in files.items():
            p = (
                target
                if (out and len(files) == 1 and not target.is_dir() and target.suffix)
                else target / fname
            )
            atomic_write(p, text)
            written.append(str(p))
        folder.log_op("graph.export", format=format, files=written)
    return GraphExport(
        format=format,
        files=files,
        entities=bundle["entity_count"],
        relationships=bundle["relationship_count"],
        written=written,
    )
