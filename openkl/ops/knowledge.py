"""The entity graph's other inputs and outputs: AKS bundles in, backfeed proposals and
decisions, the graph exported as AKS, GraphML or CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..entities import consolidation
from ..errors import BadInput, UsageError
from ..files.folder import Folder, atomic_write
from ..graph.indexing import open_graph
from ..knowledge import aks, backfeed, descriptions
from ..knowledge import explorer as web
from ..records import (
    BackfeedItem,
    BackfeedProposal,
    BundleCheck,
    BundleKept,
    EditCaller,
    ExportContent,
    ExportWritten,
    FlaggedBackfeedItem,
    GraphEdit,
)
from .call import Call
from .graph_reads import NEIGHBOURHOOD_LIMIT, neighbourhood
from .read import describe_all, reading


def import_bundle(folder: Folder, text: str, where: str = "bundle") -> BundleKept:
    """Keep an AKS bundle under aks/imports/ and consolidate the entities it touches."""
    kept, keys = aks.keep_bundle(folder, text, where)
    with open_graph(folder, write=True) as g:
        consolidation.consolidate(folder, g, keys)
    return kept


def decide_backfeed(
    folder: Folder,
    iid: str,
    approve: bool,
    reason: str | None = None,
    caller: EditCaller | None = None,
) -> BackfeedItem:
    """Approve (and absorb into the entity graph) or reject a pending backfeed item;
    `caller` is kept in the item as who decided."""
    item = backfeed.decide(folder, iid, approve, reason, caller)
    if approve:
        with open_graph(folder, write=True) as g:
            consolidation.consolidate(folder, g, backfeed.touched_keys(item))
    return item


def flag_backfeed(
    folder: Folder, text: str, caller: EditCaller | None = None
) -> FlaggedBackfeedItem:
    """Queue a proposal (JSON: entities and relationships) for review; the item, with
    `created` False when the same proposal was queued before. The caller holds the writer
    lock."""
    item, created = backfeed.flag(folder, text, caller)
    return {**item, "created": created}


def add_entity(
    folder: Folder,
    name: str,
    type_: str,
    *,
    caller: EditCaller,
    description: str | None = None,
    aliases: Sequence[str] = (),
    sources: Sequence[str] = (),
    approve: bool = False,
) -> GraphEdit:
    """Add an entity to the graph as a backfeed item: pending review, or with `approve`
    approved at once (then in the graph, and in every rebuild). `sources` (documents and
    notes, checked to exist) become its sources; `caller` is kept as who added it. The
    caller holds the writer lock."""
    proposal = backfeed.entity_edit(name, type_, caller["by"], description, aliases)
    return _graph_edit(folder, proposal, caller, sources, approve)


def add_relation(
    folder: Folder,
    source: str,
    relation: str,
    target: str,
    *,
    caller: EditCaller,
    description: str | None = None,
    sources: Sequence[str] = (),
    approve: bool = False,
) -> GraphEdit:
    """Add a relationship `source` -relation-> `target` as `add_entity` adds an entity. An
    end that no entity has yet is refused with `approve`; without, the item waits for
    review (`unknown` names such ends) and is checked again when it is approved."""
    proposal = backfeed.relation_edit(source, relation, target, caller["by"], description)
    return _graph_edit(folder, proposal, caller, sources, approve)


def _graph_edit(
    folder: Folder,
    proposal: BackfeedProposal,
    caller: EditCaller,
    sources: Sequence[str],
    approve: bool,
) -> GraphEdit:
    found = backfeed.resolve_sources(folder, sources)
    unknown = backfeed.unknown_ends(proposal, backfeed.known_names(folder))
    if unknown and approve:
        raise BadInput(
            f"no entity {unknown[0]!r} in the graph: a relationship is approved only "
            "between entities it has",
            "add the entity first, or queue the relationship for review without approving it",
        )
    item, created = backfeed.queue_proposal(folder, proposal, caller, found, check_ends=False)
    if approve and item["status"] == "pending":
        item = decide_backfeed(folder, item["id"], approve=True, caller=caller)
    pending = item["status"] == "pending"
    return {**item, "created": created, "unknown": unknown if pending else []}


def backfeed_queue(folder: Folder, status: str = "pending") -> list[BackfeedItem]:
    """Backfeed items with this status (pending, approved, rejected or all), oldest first."""
    return backfeed.queue(folder, status)


def backfeed_item(folder: Folder, iid: str) -> BackfeedItem:
    """One backfeed item, by id or unique prefix."""
    return backfeed.get(folder, iid)


def validate_bundle(text: str, where: str = "bundle") -> BundleCheck:
    """Check an AKS bundle against the schema (errors name the JSON path): {valid,
    entities, relationships}."""
    b = aks.load_bundle(text, where)
    return {"valid": True, "entities": b["entity_count"], "relationships": b["relationship_count"]}


EXPORT_FORMATS = ("aks", "graphml", "csv", "html")
CSV_TABLES = {
    "entities": "entities.csv",
    "relationships": "relationships.csv",
    "relations": "relationships.csv",
}


@dataclass(frozen=True)
class GraphExport:
    """An exported entity graph: its files (name → text), and where they were written."""

    format: str
    entities: int
    relationships: int
    files: dict[str, str]
    written: list[str]

    def as_dict(self) -> ExportWritten:
        """What `ok graph export` reports after writing the files."""
        return {
            "format": self.format,
            "files": self.written,
            "entities": self.entities,
            "relationships": self.relationships,
        }

    def content(self) -> ExportContent:
        """The files themselves, as one JSON object (CSV tables also as rows)."""
        data: ExportContent = {
            "format": self.format,
            "entities": self.entities,
            "relationships": self.relationships,
            "content": self.files,
        }
        if self.format == "csv":
            data["rows"] = {
                name.removesuffix(".csv"): list(csv.DictReader(io.StringIO(text)))
                for name, text in self.files.items()
            }
        return data


def check_export(
    format_: str,
    *,
    table: str | None = None,
    out: str | None = None,
    json_stdout: bool = True,
    around: Around | None = None,
) -> None:
    """Refuse an export that cannot be written as asked, before any work is done (`json_stdout`
    False: `-` means plain text on stdout, where two CSV tables cannot go together)."""
    if format_ not in EXPORT_FORMATS:
        raise UsageError(f"unknown format {format_!r}", "use aks, graphml, csv or html")
    if format_ == "html" and around is None:
        raise UsageError(
            "--format html draws one neighbourhood, not the whole graph",
            "pass --entity NAME (and --depth N) or --query TEXT",
        )
    if format_ != "html" and around is not None:
        raise UsageError(
            "--entity, --query and --depth choose what --format html draws",
            "add --format html, or drop them to export the whole graph",
        )
    if table is not None and format_ != "csv":
        raise UsageError("--table applies to --format csv only", "drop --table")
    if table is not None and table not in CSV_TABLES:
        raise UsageError(
            f"unknown table {table!r}", "use --table entities or --table relationships"
        )
    if format_ != "csv" or table is not None:
        return
    # two tables in one stream would read as one CSV with a second header in the middle
    if out == "-" and not json_stdout:
        raise UsageError(
            "--format csv is two tables (entities, relationships) and cannot go to stdout together",
            "pick one with --table entities|relationships, pass -o DIR for "
            "both files, or add --json",
        )
    target = Path(out) if out and out != "-" else None
    if target is not None and not target.is_dir() and (target.suffix or target.exists()):
        raise UsageError(
            f"--format csv writes two files, and {out} is not a directory",
            "pass -o DIR for both files, or --table entities|relationships for one",
        )


@dataclass(frozen=True)
class Around:
    """What `ok graph export --format html` draws: an entity's or a query's neighbourhood."""

    entity: str | None = None
    query: str | None = None
    depth: int = 1


def export_graph(
    call: Call,
    *,
    format_: str = "aks",
    around: Around | None = None,
    out: str | None = None,
    table: str | None = None,
    min_confidence: float | None = None,
    entity_type: str | None = None,
    max_entities: int | None = None,
    verified_only: bool = False,
    all_: bool = False,
) -> GraphExport:
    """Export the entity graph as an AKS bundle, GraphML or CSV (two tables, or `table`
    alone), or one neighbourhood (`around`) as a self-contained HTML page, and write it to
    `out`: a file or directory (None: graph/), or `-` to write nothing and leave the files
    to the caller. Writing it is logged. Only entities at least `min_confidence` confident
    go in (default entities.min_confidence, the floor of every other view), unless
    `all_`."""
    folder, graph = call.folder, call.reader
    check_export(format_, table=table, out=out, around=around)
    if all_ and min_confidence is not None:
        raise UsageError(
            "--all exports every entity, whatever --min-confidence says",
            "drop one of --all and --min-confidence",
        )
    if min_confidence is None and not all_:
        min_confidence = consolidation.min_confidence(folder)
    if format_ == "html" and around is not None:
        return _write_export(folder, format_, out, *_html_export(call, around, min_confidence))
    with reading(folder, graph) as g:
        bundle = aks.export(
            folder,
            g,
            min_confidence=min_confidence,
            entity_type=entity_type,
            max_entities=max_entities,
            verified_only=verified_only,
            # a bundle's descriptions say what each entity is; a mention is not one
            describe=lambda ids, advance: {
                k: descriptions.split(d)[0]
                for k, d in describe_all(folder, g, ids, advance).items()
            },
        )
    files: dict[str, str]
    slug = aks.domain_slug(folder)
    if format_ == "aks":
        files = {f"{slug}.aks.json": json.dumps(bundle, indent=2, ensure_ascii=False) + "\n"}
    elif format_ == "graphml":
        files = {f"{slug}.graphml": aks.graphml(bundle)}
    else:
        files = aks.csv_tables(bundle)
        if table is not None:
            files = {CSV_TABLES[table]: files[CSV_TABLES[table]]}
    counts = (bundle["entity_count"], bundle["relationship_count"])
    return _write_export(folder, format_, out, files, counts)


def _html_export(
    call: Call, around: Around, min_confidence: float | None
) -> tuple[dict[str, str], tuple[int, int]]:
    """The HTML page of a neighbourhood, by file name, and its entity and relationship counts."""
    nb = neighbourhood(
        call,
        entity=around.entity,
        query=around.query,
        depth=around.depth,
        min_confidence=min_confidence,
        limit=NEIGHBOURHOOD_LIMIT,
    )
    slug = aks.domain_slug(call.folder)
    files = {f"{slug}.html": web.standalone_page(slug, nb)}
    return files, (len(nb["nodes"]), len(nb["edges"]))


def _write_export(
    folder: Folder, format_: str, out: str | None, files: dict[str, str], counts: tuple[int, int]
) -> GraphExport:
    """Write an export's files to `out` (see `export_graph`) and log it."""
    target = Path(out) if out and out != "-" else None
    written: list[str] = []
    if out != "-":
        target = target or folder.graph_dir
        for fname, text in files.items():
            p = (
                target
                if (out and len(files) == 1 and not target.is_dir() and target.suffix)
                else target / fname
            )
            atomic_write(p, text)
            written.append(str(p))
        folder.log_op("graph.export", format=format_, files=written)
    return GraphExport(
        format=format_,
        entities=counts[0],
        relationships=counts[1],
        files=files,
        written=written,
    )
