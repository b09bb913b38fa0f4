"""`ok graph …`: the derived graph."""

from __future__ import annotations

from typing import Any

import typer

from ..records import EntityDetail, GraphEdit, Lineage, Traversal
from . import cmd_completion as completion
from . import output
from .common import cli_caller, depth_opt, folder, limit_opt, writing
from .output import FormatOpt, JsonOpt, emit, emit_records, formats

app = typer.Typer(
    help="The derived graph: Cypher, entities, exports; add entities and relationships.",
    no_args_is_help=True,
)
add_app = typer.Typer(
    help="Add an entity or a relationship: a backfeed item, pending review or --approve'd.",
    no_args_is_help=True,
)
app.add_typer(add_app, name="add")

SourceOpt = typer.Option(
    None,
    "--source",
    metavar="ID|PATH",
    help="A document (id, prefix or path) or memory note (id) it rests on; repeatable. "
    "Checked to exist; kept as its provenance and shown as its source.",
)
ApproveOpt = typer.Option(
    False,
    "--approve",
    help="Approve it at once (it is in the graph now) instead of queuing it for review.",
)
EditDescriptionOpt = typer.Option(None, "--description", help="What it is, in a sentence.")


@app.command()
@formats
def cypher(
    query: str = typer.Argument(..., help="A Cypher query (`-` reads stdin)."),
    write: bool = typer.Option(
        False, "--write", help="Allow the query to change the graph (never files or extensions)."
    ),
    param: list[str] = typer.Option(None, "--param", "-p", help="NAME=VALUE (JSON values ok)."),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """Run one Cypher statement (read-only unless --write).

    A query starts with MATCH, OPTIONAL MATCH, RETURN, WITH, UNWIND or CALL of a catalog or
    index function (show_tables, table_info, query_fts_index, …); --write adds CREATE, MERGE,
    SET, DELETE, REMOVE, DROP, ALTER. Clauses that reach files, other databases or
    extensions are refused even with --write: LOAD FROM, COPY, EXPORT/IMPORT DATABASE,
    INSTALL, LOAD EXTENSION, ATTACH, USE.

    Examples:

    \b
      ok graph cypher "MATCH (d:Doc) RETURN d.title LIMIT 5"
      ok graph cypher 'MATCH (d:Doc) WHERE d.title CONTAINS $t RETURN d.id' -p t=Ada
      ok graph cypher "MATCH (d:Doc) RETURN d.path AS path, d.title AS title" --csv
    """
    import json

    from .. import ops
    from .output import read_stdin_text

    if query == "-":
        query = read_stdin_text()
    params: dict[str, Any] = {}
    for p in param or []:
        if "=" not in p:
            raise typer.BadParameter(f"--param {p!r} must look like NAME=VALUE")
        k, v = p.split("=", 1)
        try:
            params[k] = json.loads(v)
        except ValueError:
            params[k] = v
        if isinstance(params[k], int) and not -(1 << 63) <= params[k] < 1 << 63:
            raise typer.BadParameter(f"--param {k}: {v} does not fit in a 64-bit integer")
    f = folder()
    if write:
        with writing(f, "ok graph cypher --write"):
            rows = ops.cypher(f, query, params, write=True)
    else:
        rows = ops.cypher(f, query, params)
    # JSON keys stay the engine's column names (stable for scripts; `AS` names them);
    # the table's headers are the RETURN items as written
    emit_records(rows, json_, fmt, plain=lambda rs: _tsv(rs, _return_items(query)))


def _tsv(rows: list[dict[str, Any]], headers: list[str] | None = None) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    shown = headers if headers and len(headers) == len(cols) else cols
    return "\n".join(["\t".join(shown)] + ["\t".join(str(r[c]) for c in cols) for r in rows])


def _return_items(query: str) -> list[str] | None:
    """The items of the query's last RETURN as written (`count(*)`, not `COUNT_STAR()`),
    an alias for an item with `AS`; None when they cannot be told apart (`RETURN *`)."""
    import re

    items: list[str] = []
    depth, quote, start, cur, i = 0, "", -1, "", 0
    q = query.strip().rstrip(";")
    tail_kw = re.compile(r"(ORDER\s+BY|SKIP|LIMIT|UNION)\b", re.I)
    while i < len(q):
        c = q[i]
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"`":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and start >= 0 and c == ",":
            items.append(cur)
            cur = ""
            i += 1
            continue
        elif depth == 0 and (i == 0 or not (q[i - 1].isalnum() or q[i - 1] == "_")):
            if re.match(r"RETURN\b", q[i:], re.I):
                start, items, cur = i + 6, [], ""
                i += 6
                continue
            if start >= 0 and tail_kw.match(q[i:]):
                break
        if start >= 0:
            cur += c
        i += 1
    if start < 0:
        return None
    items.append(cur)
    items = [" ".join(x.split()) for x in items]
    if items and re.match(r"DISTINCT\b", items[0], re.I):
        items[0] = items[0][8:].strip()
    if not all(items) or items == ["*"]:
        return None
    out = []
    for x in items:
        m = re.search(r"\s+AS\s+`?(\w+)`?$", x, re.I)
        out.append(m.group(1) if m else x)
    return out


@app.command()
def lineage(
    ref: str = typer.Argument(
        ...,
        help="A note id, chunk id or document id/path.",
        autocompletion=completion.note_or_doc_ids,
    ),
    depth: int = depth_opt(5, "How many hops to walk."),
    direction: str = typer.Option(
        "both", "--direction", help="up (where it came from), down (what came of it), both."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Walk DERIVED_FROM and SUPERSEDES: a note's sources, a document's versions.

    Each note on the way also shows its [[links]]: LINKS_TO what it links to, LINKED_FROM
    the notes that link to it (shown, not walked on from).

    Examples:

    \b
      ok graph lineage m-20260110-ab12            # the passages a note came from
      ok graph lineage ee43fb66 --direction down  # newer versions, notes derived from it
    """
    from .. import ops

    data = ops.lineage(ops.Call(folder()), ref, depth=depth, direction=direction)

    def plain(d: Lineage) -> str:
        r = d["root"]
        lines = [f"{r['kind']} {r['id']}  {r.get('path') or r.get('title') or ''}"]
        for n in d["nodes"]:
            state = "" if n.get("current", True) else "  (old version)"
            lines.append(
                f"{'  ' * n['depth']}{n['rel']} {n['kind']} {n['id']}  "
                f"{n.get('path') or n.get('title') or ''}{state}"
            )
        return "\n".join(lines)

    emit(data, json_, plain=plain)


# -- entities -------------------------------------------------------------------------------
@app.command()
@formats
def entities(
    type_: str = typer.Option(
        None, "--type", "-t", metavar="TYPE", help="Only this type (Person, Concept, …)."
    ),
    min_confidence: float = typer.Option(
        None, "--min-confidence", help="Confidence floor (default entities.min_confidence)."
    ),
    doc: str = typer.Option(
        None,
        "--doc",
        metavar="ID|PATH",
        help="Only entities from this document (id, prefix or path).",
    ),
    name: str = typer.Option(None, "--name", help="Only names containing this text."),
    limit: int = limit_opt(0, "At most this many (0: all).", min=0),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """List compiled entities, most confident first.

    Examples:

    \b
      ok graph entities -n 20                      # the 20 most confident
      ok graph entities --type Person
      ok graph entities --doc docs/crispr-gene-editing.md --min-confidence 0.6
    """
    from .. import ops

    rows = ops.list_entities(
        ops.Call(folder()),
        type=type_,
        min_confidence=min_confidence,
        doc=doc,
        name=name,
        limit=limit or None,
    )
    emit_records(
        rows,
        json_,
        fmt,
        plain=lambda rs: "\n".join(
            f"{r['confidence']:.2f}\t{r['type']}\t{r['name']}\t{len(r['docs'])} doc{'s' if len(r['docs']) != 1 else ''}"
            + ("\tverified" if r["verified"] else "")
            for r in rs
        ),
    )


@app.command()
def entity(
    name: str = typer.Argument(..., help="Entity name, alias or id."),
    min_confidence: float = typer.Option(
        None,
        "--min-confidence",
        help="Only relationships at least this confident (default entities.min_confidence).",
    ),
    json_: bool = JsonOpt,
) -> None:
    """One entity: type, confidence, aliases, relationships, sources and mentions.

    Examples:

    \b
      ok graph entity "Ada Lovelace"
      ok graph entity wal --json | jq '.relationships'
    """
    from .. import ops

    data = ops.entity(ops.Call(folder()), name, min_confidence=min_confidence)

    def plain(d: EntityDetail) -> str:
        lines = [
            f"{d['name']}  ({d['type']}, confidence {d['confidence']:.2f}"
            + (", verified" if d["verified"] else "")
            + ")"
        ]
        if d["aliases"]:
            lines.append("aliases: " + ", ".join(d["aliases"]))
        if d["description"]:
            lines.append(d["description"])
            cite = d.get("description_cite")
            if cite:
                loc = cite["loc"]
                lines.append(
                    f"  — cite: {cite['id']} ({cite['path']}, {loc['start']}–{loc['end']})"
                )
        elif d.get("mention"):
            lines.append("Named in: " + d["mention"])
            cite = d.get("mention_cite")
            if cite:
                loc = cite["loc"]
                lines.append(
                    f"  — cite: {cite['id']} ({cite['path']}, {loc['start']}–{loc['end']})"
                )
        for r in d["relationships"]:
            arrow = (
                f"-{r['type']}-> {r['to_name']}"
                if r["direction"] == "out"
                else f"<-{r['type']}- {r['from_name']}"
            )
            lines.append(f"  {arrow}  ({r['confidence']:.2f})")
        for s in d["sources"]:
            lines.append(f"  source: {s['id']}  {s['path'] or s['title']}")
        return "\n".join(lines)

    emit(data, json_, plain=plain)


@app.command()
def traverse(
    name: str = typer.Argument(..., help="Entity, or note (id, [[id or title]]), to start from."),
    depth: int = depth_opt(2, "How many hops."),
    rel: str = typer.Option(None, "--rel", help="Follow only this relationship type."),
    min_confidence: float = typer.Option(
        None,
        "--min-confidence",
        help="Confidence floor for entities and relationships (default entities.min_confidence).",
    ),
    limit: int = limit_opt(200, "Stop after this many entities."),
    json_: bool = JsonOpt,
) -> None:
    """Breadth-first walk over relationships, with the path of every step.

    From an entity it follows RELATED, both directions. From a note (its id, [[its id or
    title]] as a link names it, or a title that no entity has) it follows LINKS_TO, both
    directions: the notes and documents the note's [[links]] point to (->) and the notes
    that link to it (<-), and on from those.

    Examples:

    \b
      ok graph traverse SQLite --depth 2
      ok graph traverse "Ada Lovelace" --rel works_with --min-confidence 0
      ok graph traverse m-20261101-ab12 --depth 1     # a note's links and backlinks
      ok graph traverse "[[Storage engines]]"         # a note by title
    """
    from .. import ops

    data = ops.traverse(
        ops.Call(folder()), name, depth=depth, rel=rel, min_confidence=min_confidence, limit=limit
    )

    def plain(d: Traversal) -> str:
        lines = [d["start"]["name"]]
        for s in d["steps"]:
            v = s["via"]
            arrow = f"-{v['type']}->" if v["direction"] == "out" else f"<-{v['type']}-"
            lines.append(
                f"{'  ' * s['depth']}{arrow} {s['entity']}  ({v['confidence']:.2f})"
                f"  path: {' > '.join(s['path'])}"
            )
        return "\n".join(lines)

    emit(data, json_, plain=plain)


@app.command()
def page(
    name: str = typer.Argument(None, help="Entity name (omit with --all)."),
    all_: bool = typer.Option(
        False,
        "--all",
        help="Write the page of every entity at or above the confidence floor into "
        "graph/pages/ (and remove pages of entities now below it).",
    ),
    min_confidence: float = typer.Option(
        None,
        "--min-confidence",
        help="With --all: only entities this confident (default entities.min_confidence).",
    ),
    force: bool = typer.Option(False, "--force", help="Regenerate even if cached."),
    json_: bool = JsonOpt,
) -> None:
    """A markdown page for an entity, built from the graph (cached by graph version).

    Examples:

    \b
      ok graph page "Write-ahead logging"
      ok graph page --all            # graph/pages/*.md and an index
    """
    from .. import ops

    f = folder()
    if all_:
        with writing(f, "ok graph page --all"):
            data = ops.write_pages(f, min_confidence=min_confidence, force=force)
        emit(
            data,
            json_,
            plain=lambda d: (
                f"{d['pages']} pages in {d['dir']} "
                f"({d['regenerated']} regenerated, {d['cached']} cached"
                + (f", {d['removed']} removed" if d["removed"] else "")
                + ")"
            ),
        )
        return
    if not name:
        raise typer.BadParameter("give an entity name, or --all")
    built = ops.entity_page(ops.Call(f), name, force=force)
    with output.paged(json_):
        emit(built, json_, plain=lambda d: d["markdown"])


@app.command()
def export(
    format_: str = typer.Option(
        "aks", "--format", metavar="aks|graphml|csv|html", help="What to write."
    ),
    out: str = typer.Option(
        None,
        "--out",
        "-o",
        help="File or directory (default graph/); `-` prints to stdout. "
        "CSV is two tables: a directory gets both files; a file or "
        "`-` needs --table.",
    ),
    table: str = typer.Option(
        None,
        "--table",
        metavar="entities|relationships",
        help="With --format csv: only this table.",
    ),
    min_confidence: float = typer.Option(
        None,
        "--min-confidence",
        help="Only entities this confident (default entities.min_confidence).",
    ),
    all_: bool = typer.Option(
        False, "--all", help="Every entity, also those below the confidence floor."
    ),
    type_: str = typer.Option(
        None, "--type", "-t", metavar="TYPE", help="Only entities of this type."
    ),
    max_entities: int = typer.Option(
        None, "--max-entities", min=1, help="At most this many (most confident)."
    ),
    verified_only: bool = typer.Option(False, "--verified-only", help="Only verified entities."),
    entity: str = typer.Option(
        None, "--entity", metavar="NAME", help="With --format html: draw around this entity."
    ),
    query: str = typer.Option(
        None, "--query", metavar="TEXT", help="With --format html: around what this finds."
    ),
    depth: int = depth_opt(None, "With --format html: hops from the start (1).", min=0, max=3),
    json_: bool = JsonOpt,
) -> None:
    """Export the entity graph: an AKS bundle (JSON), GraphML or CSV; or one neighbourhood
    as a self-contained HTML page (the graph view of `ok serve`, no server needed).

    Entities below the confidence floor (entities.min_confidence), which every other view
    leaves out, stay out unless --all. On a terminal a bar shows the entities described.

    With `-o -` and --json, GraphML and CSV come wrapped in one JSON object (`content` by
    file name; for CSV also `rows` by table); an AKS bundle is JSON already.

    Examples:

    \b
      ok graph export                                  # graph/<folder>.aks.json
      ok graph export --format graphml -o - > kb.graphml
      ok graph export --format csv -o exports/         # entities.csv, relationships.csv
      ok graph export --format csv --table entities -o - | head
      ok graph export --min-confidence 0.6 --max-entities 500 -o team.aks.json
      ok graph export --all -o everything.aks.json     # also entities below the floor
      ok graph export --format html --entity Cas9 --depth 2 -o cas9.html
      ok graph export --format html --query "gene editing" -o gene-editing.html
    """
    import sys

    from .. import ops
    from .output import want_json

    as_json = want_json(json_)
    around = None
    if entity is not None or query is not None or depth is not None:
        around = ops.Around(entity=entity, query=query, depth=1 if depth is None else depth)
    ops.check_export(format_, table=table, out=out, json_stdout=as_json, around=around)
    done = ops.export_graph(
        ops.Call(folder()),
        format_=format_,
        around=around,
        out=out,
        table=table,
        min_confidence=min_confidence,
        entity_type=type_,
        max_entities=max_entities,
        verified_only=verified_only,
        all_=all_,
    )
    if out == "-":
        if format_ == "aks" or not as_json:
            for text in done.files.values():
                sys.stdout.write(text)
            return
        emit(done.content(), True)
        return
    emit(done.as_dict(), json_, plain=lambda d: "\n".join(d["files"]))


# -- edits ----------------------------------------------------------------------------------
def _said(d: GraphEdit) -> None:
    """What became of an edit, on stderr: how to approve it, or where it is now."""
    iid = d["id"]
    for end in d["unknown"]:
        output.warn(f"no entity {end!r} yet: add it before `ok backfeed approve {iid}`")
    if d["status"] == "pending":
        again = "" if d["created"] else " (queued before)"
        output.info(f"pending review{again}: approve with `ok backfeed approve {iid}`")
    elif d["status"] == "approved":
        output.info("approved: in the graph now, and kept through `ok index --rebuild`")
    else:
        output.info(f"this edit was {d['status']} before: `ok backfeed show {iid}` says why")


def _edit_line(d: GraphEdit) -> str:
    ents = [f"{e['name']} ({e['type']})" for e in d["entities"]]
    rels = [f"{r['from']} -{r['type']}-> {r['to']}" for r in d["relationships"]]
    return f"{d['id']}\t{d['status']}\t" + ", ".join(ents + rels)


@add_app.command("entity")
def add_entity(
    name: str = typer.Argument(..., help="The entity's name."),
    type_: str = typer.Option(
        ...,
        "--type",
        "-t",
        metavar="TYPE",
        help="Person, Organization, Place, Event, Work, Software, Method, Chemical, "
        "GeneProtein, Disease, Organism, Anatomy, Concept, Code or Reference.",
    ),
    description: str = EditDescriptionOpt,
    alias: list[str] = typer.Option(None, "--alias", help="Another name it goes by; repeatable."),
    source: list[str] = SourceOpt,
    approve: bool = ApproveOpt,
    json_: bool = JsonOpt,
) -> None:
    """Add an entity to the graph, as a backfeed item kept in aks/backfeed/.

    Without --approve it waits for review (`ok backfeed queue`, `ok backfeed approve ID`);
    with --approve it is approved at once. Either way the folder keeps it, with who added
    it, when, and its --source documents and notes, so `ok index --rebuild` keeps it too.
    The same entity added twice is one item.

    Examples:

    \b
      ok graph add entity Litestream --type Software --description "Streams SQLite to S3."
      ok graph add entity "Ada Lovelace" -t Person --alias "Countess of Lovelace" --approve
      ok graph add entity CRISPR -t Method --source docs/crispr-gene-editing.ok.md --json
    """
    from .. import ops

    f = folder()
    with writing(f, "ok graph add entity"):
        done = ops.add_entity(
            f,
            name,
            type_,
            caller=cli_caller(),
            description=description,
            aliases=alias or [],
            sources=source or [],
            approve=approve,
        )
    emit(done, json_, plain=_edit_line)
    _said(done)


@add_app.command("relation")
def add_relation(
    source_entity: str = typer.Argument(..., metavar="SOURCE", help="The entity it goes from."),
    relation: str = typer.Argument(
        ..., metavar="RELATION", help="Its type, a snake_case verb: uses, part_of, works_with."
    ),
    target_entity: str = typer.Argument(..., metavar="TARGET", help="The entity it goes to."),
    description: str = EditDescriptionOpt,
    source: list[str] = SourceOpt,
    approve: bool = ApproveOpt,
    json_: bool = JsonOpt,
) -> None:
    """Add a relationship SOURCE -RELATION-> TARGET, as a backfeed item (as `ok graph add
    entity` adds an entity).

    With --approve both ends must be entities of the graph (else it is refused, and nothing
    is written); without, it may wait for an entity added later, and is checked again when
    approved.

    Examples:

    \b
      ok graph add relation Litestream uses SQLite
      ok graph add relation "Ada Lovelace" works_with "Charles Babbage" --approve
      ok graph add relation Cas9 part_of CRISPR --source m-20260110-ab12 --json
      ok backfeed queue                 # what waits for review; ok backfeed approve ID
    """
    from .. import ops

    f = folder()
    with writing(f, "ok graph add relation"):
        done = ops.add_relation(
            f,
            source_entity,
            relation,
            target_entity,
            caller=cli_caller(),
            description=description,
            sources=source or [],
            approve=approve,
        )
    emit(done, json_, plain=_edit_line)
    _said(done)
