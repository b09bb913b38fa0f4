"""The derived graph, read: Cypher, entities, walks, entity pages and lineage."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from typing import Any

from ..entities import queries
from ..entities.consolidation import min_confidence as default_min_confidence
from ..errors import NotFound, UsageError
from ..files.folder import Folder
from ..files.mapping import resolve
from ..graph import QueryLimits
from ..graph.indexing import open_graph
from ..knowledge import descriptions, links, pages
from ..knowledge import lineage as lineage_mod
from ..records import (
    Conflict,
    DescribedEntity,
    DescriptionsMade,
    DocCompiled,
    EntityDetail,
    EntityListed,
    EntityPage,
    Lineage,
    Neighbourhood,
    PagesWritten,
    Traversal,
)
from .answering import context
from .call import Call
from .read import Opener, described, reading

SCOPES = ("memory", "store", "all")


def _floor(folder: Folder, value: float | None) -> float:
    return default_min_confidence(folder) if value is None else value


def query_limits(
    folder: Folder, seconds: float | None = None, setting: str = "graph.query_timeout"
) -> QueryLimits:
    """What a caller's Cypher query may take: `seconds` (else graph.query_timeout, 0 for no
    limit), graph.query_memory_mb, graph.query_output_mb; `setting` is named when time
    runs out."""
    if seconds is None:
        seconds = float(folder.setting("graph.query_timeout")) or None
    return QueryLimits(
        seconds=seconds,
        memory_mb=int(folder.setting("graph.query_memory_mb")),
        output_mb=float(folder.setting("graph.query_output_mb")),
        workers=int(folder.setting("graph.query_workers")),
        setting=setting,
    )


def cypher(
    folder: Folder,
    query: str,
    params: dict[str, Any] | None = None,
    *,
    write: bool = False,
    graph: Opener | None = None,
    limits: QueryLimits | None = None,
) -> list[dict[str, Any]]:
    """Run one Cypher statement, read-only unless `write`: then on a graph opened for
    writing, and logged (the caller holds the writer lock). A read runs in a worker process
    held to `limits` (default: `query_limits(folder)`). Unlike the other reads it takes the
    folder, its opener and its limits rather than a `Call`: Cypher reads the Kùzu graph even
    where a stack's other reads go to PostgreSQL, and each adapter names the setting its
    time cap comes from."""
    if write:
        with open_graph(folder, write=True) as g:
            rows = g.cypher(query, params or {})
            folder.log_op("graph.cypher", query=query)
        return rows
    with reading(folder, graph) as g:
        return g.cypher(query, params or {}, limits or query_limits(folder))


def list_entities(
    call: Call,
    *,
    type: str | None = None,
    min_confidence: float | None = None,
    doc: str | None = None,
    name: str | None = None,
    limit: int | None = None,
    verified_only: bool = False,
) -> list[EntityListed]:
    """Entities, most confident first: of this type, at least this confident (default
    entities.min_confidence), from this document (id, prefix or path), with names
    containing `name`, only those a reviewer approved (`verified_only`: through backfeed
    or a verified bundle); at most `limit` (None: all)."""
    folder = call.folder
    doc_id = resolve(folder, doc)["id"] if doc else None
    floor = _floor(folder, min_confidence)
    with reading(folder, call.reader) as g:
        rows = queries.list_entities(
            g,
            type=type,
            min_confidence=floor,
            doc=doc_id,
            limit=None if verified_only else limit,
            query=name,
        )
        if verified_only:
            rows = [r for r in rows if r.get("verified")][:limit]
        return described(folder, g, rows)


def compile_doc(call: Call, doc: str) -> DocCompiled:
    """What a document compiled into: its chunks, the entities they mention (at least
    entities.min_confidence) and the relationships among those. A document is compiled as
    it is stored, so asking again changes nothing and gives the same answer."""
    folder = call.folder
    entry = resolve(folder, doc)
    floor = _floor(folder, None)
    with reading(folder, call.reader) as g:
        chunks = [c["id"] for c in g.current_chunks_of([entry["id"]])]
        ents = sorted({m["e"] for m in g.mentions_in(chunks, floor)}) if chunks else []
        rels = g.relationships_among(ents, floor) if ents else []
    return {
        "id": entry["id"],
        "path": entry["path"],
        "status": "compiled" if chunks else "empty",
        "chunks": len(chunks),
        "entities": len(ents),
        "relationships": len(rels),
    }


DESCRIBERS = ("local", "llm")


def synthesize_descriptions(
    call: Call,
    names: list[str] | None = None,
    *,
    describer: str | None = None,
    min_confidence: float | None = None,
) -> DescriptionsMade:
    """Describe the entities named (names, aliases or ids), or every entity at least this
    confident (default entities.min_confidence), now rather than when first read: each
    description is cached until its entity changes. `describer` (`local` or `llm`) says who
    describes for this call (default: entities.describer, which also decides what later
    reads show); `llm` needs one configured."""
    folder = call.folder
    if describer is not None and describer not in DESCRIBERS:
        raise UsageError(f"unknown describer {describer!r}", "use local or llm")
    with reading(folder, call.reader) as g:
        found: dict[str, str] = {}  # id: name
        if names:
            for n in names:
                e = queries.find_entity(g, n)
                found[e["id"]] = e["name"]
        else:
            for r in queries.list_entities(g, min_confidence=_floor(folder, min_confidence)):
                found[r["id"]] = r["name"]
        got = descriptions.describe(folder, g, list(found), describer)
    rows: list[DescribedEntity] = []
    for eid, name in found.items():
        d, m = descriptions.split(got.get(eid))
        rows.append({"id": eid, "name": name, "description": d, "mention": m})
    return {
        "describer": describer or folder.setting("entities.describer"),
        "entities": len(rows),
        "described": sum(1 for r in rows if r["description"]),
        "mentioned": sum(1 for r in rows if r["mention"]),
        "results": rows,
    }


def entity(call: Call, name: str, *, min_confidence: float | None = None) -> EntityDetail:
    """One entity (name, alias or id): its relationships at least this confident (default
    entities.min_confidence), its sources and mentions."""
    folder = call.folder
    floor = _floor(folder, min_confidence)
    with reading(folder, call.reader) as g:
        detail = queries.entity_detail(folder, g, name, min_confidence=floor)
        return described(folder, g, [detail])[0]


def traverse(
    call: Call,
    name: str,
    *,
    depth: int = 2,
    rel: str | None = None,
    min_confidence: float | None = None,
    limit: int = 200,
) -> Traversal:
    """Breadth-first walk from an entity over relationships (only `rel`, if given), at
    least this confident (default entities.min_confidence), stopping after `limit`.

    From a note (its id, `[[id or title]]`, or a title no entity has) the walk follows
    LINKS_TO, both ways: the `[[links]]` in a note and the notes that link to it."""
    folder = call.folder
    floor = _floor(folder, min_confidence)
    with reading(folder, call.reader) as g:
        as_link = name.startswith("[[") and name.endswith("]]")
        note = links.find_note(g, name[2:-2]) if as_link else g.link_ends([name], []).get(name)
        if as_link and note is None:
            raise NotFound(f"{name} matches no note", "list notes with `ok mem list`")
        if note is None:
            try:
                return queries.traverse(
                    g, name, depth=depth, rel=rel, min_confidence=floor, limit=limit
                )
            except NotFound:
                note = links.find_note(g, name)
                if note is None:
                    raise
        if rel and rel.strip().upper() != "LINKS_TO":
            raise UsageError(f"a walk from a note follows LINKS_TO, not {rel!r}", "leave out --rel")
        return links.walk(g, note, depth=depth, limit=limit)


def conflicts(call: Call, *, scope: str = "mem", use_llm: bool = True) -> list[Conflict]:
    """Statements about one entity, in different notes (`scope` mem, or memory) or also
    passages (store, all), that disagree; judged by the configured LLM too unless `use_llm`
    is off."""
    folder = call.folder
    from ..knowledge import conflicts as conflicts_mod
    from ..text.llm import ChatClient, config_from

    scope = {"mem": "memory"}.get(scope, scope)
    if scope not in SCOPES:
        raise UsageError(f"unknown scope {scope!r}", "use one of: mem, store, all")
    cfg = config_from(folder, required=False, role="chat") if use_llm else None
    llm = ChatClient(cfg) if cfg is not None else None
    with reading(folder, call.reader) as g:
        return conflicts_mod.find(
            folder, g, scope=scope, llm=llm, min_confidence=default_min_confidence(folder)
        )


NEIGHBOURHOOD_LIMIT = 300  # entities a neighbourhood holds by default
NEIGHBOURHOOD_SEEDS = 12  # entities a query's neighbourhood starts from


def neighbourhood(
    call: Call,
    *,
    entity: str | None = None,
    query: str | None = None,
    depth: int = 1,
    min_confidence: float | None = None,
    types: list[str] | None = None,
    limit: int = NEIGHBOURHOOD_LIMIT,
) -> Neighbourhood:
    """The entities within `depth` hops of an entity (name, alias or id), or of the ones a
    query's passages mention (as `ok context` picks them), and the relationships among
    them: at least this confident (default entities.min_confidence), of these types, at
    most `limit` entities (`capped` says when more were in reach)."""
    folder = call.folder
    if (entity is None) == (query is None):
        raise UsageError(
            "name an entity or a query, not both nor neither", "pass entity= or query="
        )
    if not 0 <= depth <= 3:
        raise UsageError(f"depth {depth} is out of range", "pick a depth from 0 to 3")
    floor = _floor(folder, min_confidence)
    if query is not None:
        picked = context(
            call,
            query,
            max_entities=NEIGHBOURHOOD_SEEDS,
            min_confidence=floor,
            use_llm=False,
        )
        seeds = [e["id"] for e in picked["entities"]]
    with reading(folder, call.reader) as g:
        if entity is not None:
            seeds = [queries.find_entity(g, entity)["id"]]
        nb = queries.neighbourhood(
            g, seeds, depth=depth, min_confidence=floor, types=types or (), limit=limit
        )
    nb["query"] = query  # what a query's graph was drawn for: the explorer shows it
    return nb


def entity_page(call: Call, name: str, *, force: bool = False) -> EntityPage:
    """An entity's markdown page, cached by graph version unless `force`."""
    folder = call.folder
    with reading(folder, call.reader) as g:
        return pages.page(folder, g, name, force=force)


def write_pages(
    folder: Folder, *, min_confidence: float | None = None, force: bool = False
) -> PagesWritten:
    """Every entity's page (at least this confident, default entities.min_confidence)
    into graph/pages/, with an index, and log it (the caller holds the writer lock)."""
    with open_graph(folder) as g:
        data = pages.write_all(
            folder, g, min_confidence=_floor(folder, min_confidence), force=force
        )
        folder.log_op("graph.pages", dir=data["dir"], pages=data["pages"])
    return data


def zip_pages(call: Call, *, min_confidence: float | None = None) -> Iterator[bytes]:
    """Every entity's page (at least this confident, default entities.min_confidence) and
    their index, the files `ok graph page --all` writes, as the bytes of a zip archive,
    produced a page at a time. The graph stays open until the last bytes are taken."""
    folder, out = call.folder, _Chunks()
    with reading(folder, call.reader) as g, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text, _ in pages.all_pages(folder, g, _floor(folder, min_confidence)):
            zf.writestr(name, text)
            yield out.take()
    yield out.take()  # the archive's central directory


class _Chunks(io.RawIOBase):
    """A write-only stream that hands on what was written to it since the last `take`."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self._parts.append(bytes(b))
        return len(b)

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


def lineage(
    call: Call,
    ref: str,
    *,
    depth: int = 5,
    direction: str = "both",
) -> Lineage:
    """Where a note, chunk or document came from (`up`), what came of it (`down`), or both:
    DERIVED_FROM and SUPERSEDES walked breadth first up to `depth` hops."""
    folder = call.folder
    with reading(folder, call.reader) as g:
        return lineage_mod.lineage(folder, g, ref, depth=depth, direction=direction)
