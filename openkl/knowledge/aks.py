"""AKS bundles (Agent Knowledge Standard v0.1.0): export the entity graph, import a bundle.

Ids are uuid5 under a fixed namespace, derived from openkl's own ids (entity key, doc id),
so re-exports — and exports of different folders naming the same thing — agree. An
imported bundle is kept verbatim (normalized JSON) under `aks/imports/` and takes part in
every consolidation, so `ok index --rebuild` keeps it; its own ids are kept for re-export.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from ..entities.local import VERSION as LOCAL_VERSION
from ..entities.local import entity_id, key_of
from ..errors import BadInput, OkError
from ..files.folder import Folder, atomic_write, iso
from ..files.ids import STACK_ID
from ..graph.protocol import GraphStore
from ..records import (
    AksBundle,
    AksDocument,
    AksEntity,
    AksRelationship,
    AksSource,
    BundleKept,
    CanonicalEntity,
    CanonicalRelation,
    Description,
    ImportedDocument,
)

AKS_VERSION = "0.1.0"
NAMESPACE = uuid.UUID("5b0c5a8e-8f5e-5c1b-9d1e-6f6b6c2e6b31")
SCHEMA_PATH = Path(__file__).parent.parent / "data" / "aks-schema.json"
_EPOCH = "1970-01-01T00:00:00Z"


def uid(kind: str, value: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{kind}:{value}"))


def domain_slug(folder: Folder) -> str:
    raw = str(folder.setting("domain") or folder.root.name)
    slug = re.sub(r"[^a-z0-9]+", "-", raw.lower()).strip("-")
    return slug or "knowledge"


def imports_dir(folder: Folder) -> Path:
    return folder.root / "aks" / "imports"


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def json_path(parts: Any) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z"


@lru_cache(maxsize=1)
def _fast_check() -> Callable[[Any], Any]:
    """The schema compiled to Python (fastjsonschema): a bundle of 10,000 entities is checked
    in a fraction of a second, where jsonschema takes many seconds. The schema's keywords
    (type, required, properties, $ref, enum, const, pattern, minimum, maximum, formats
    date-time and uuid) mean the same in its draft as in 2020-12."""
    import fastjsonschema

    return cast(Callable[[Any], Any], fastjsonschema.compile(schema(), formats={"uuid": UUID}))


def validate(bundle: Any) -> None:
    """Raise BadInput naming the JSON path of the first schema violation (or bad count)."""
    import fastjsonschema

    try:
        _fast_check()(bundle)
        fast_error = None
    except fastjsonschema.JsonSchemaValueException as e:
        fast_error = e
    if fast_error is not None:
        _explain(bundle, fast_error)
    for arr, count in (("entities", "entity_count"), ("relationships", "relationship_count")):
        if bundle[count] != len(bundle[arr]):
            raise BadInput(
                f"bundle fails the AKS schema at $.{count}: {bundle[count]} but "
                f"$.{arr} has {len(bundle[arr])} items",
                "counts must equal the array lengths",
            )


def _explain(bundle: Any, fast: Exception) -> None:
    """Raise BadInput for a bundle the compiled check refused: jsonschema's first error, by
    JSON path, and how many more; else the compiled check's own words."""
    from jsonschema import Draft202012Validator, FormatChecker

    v = Draft202012Validator(schema(), format_checker=FormatChecker())
    errors = sorted(
        v.iter_errors(bundle), key=lambda e: (list(map(str, e.absolute_path)), e.message)
    )
    if errors:
        e = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise BadInput(
            f"bundle fails the AKS schema at {json_path(e.absolute_path)}: {e.message}{more}",
            "fix the bundle; schema: AKS v0.1.0 SCHEMA.json",
        )
    where = str(getattr(fast, "name", "data")).replace("data", "$", 1)
    raise BadInput(
        f"bundle fails the AKS schema at {where}: {fast}",
        "fix the bundle; schema: AKS v0.1.0 SCHEMA.json",
    )


# -- export ---------------------------------------------------------------------------------
# describe(entity ids, advance): their cited descriptions, `advance(n)` as n more are done
Describe = Callable[[list[str], Callable[[int], None]], Mapping[str, Description | None]]


def export(
    folder: Folder,
    g: GraphStore,
    *,
    min_confidence: float | None = None,
    entity_type: str | None = None,
    max_entities: int | None = None,
    verified_only: bool = False,
    describe: Describe | None = None,
) -> AksBundle:
    """The folder's entity graph as an AKS bundle (validated before it is returned).
    `describe` gives the entities' cited descriptions (`descriptions.describe`): each
    goes into `description`, and its citation into `properties.description_cite`. On a
    terminal a bar shows the entities described."""
    from ..files.progress import progress

    rows = g.export_entities(
        min_confidence=min_confidence, type=entity_type, verified_only=verified_only
    )
    if max_entities is not None:
        rows = rows[:max_entities]
    rows.sort(key=lambda r: r["id"])
    doc_rows = {r["id"]: r for r in g.doc_summaries()}
    note_rows = {r["id"]: r for r in g.note_summaries()}
    bundle_docs = imported_documents(folder)
    documents: dict[str, AksDocument] = {}

    def doc_uuid(d: str) -> str | None:
        if d.startswith("aks:"):
            info = bundle_docs.get(d[4:])
            if info and d[4:] not in documents:
                documents[d[4:]] = cast(
                    AksDocument, {k: v for k, v in info.items() if k != "bundle"}
                )
            return d[4:]
        if d in doc_rows:
            u = uid("doc", d)
            r = doc_rows[d]
            documents.setdefault(
                u,
                {
                    "id": u,
                    "filename": Path(r["path"]).name,
                    "ingested_at": _dt(r["created_at"]),
                    "source_hash": r["sha"],
                },
            )
            return u
        if d in note_rows:
            u = uid("note", d)
            n = note_rows[d]
            documents.setdefault(
                u,
                {
                    "id": u,
                    "filename": Path(n["path"]).name,
                    "ingested_at": _dt(n["ts"]),
                    "source_hash": n["sha"],
                },
            )
            return u
        return None

    ents: list[AksEntity] = []
    uuids: dict[str, str] = {}
    described: Mapping[str, Description | None] = {}
    if describe is not None:
        with progress("describing entities", len(rows)) as advance:
            described = describe([r["id"] for r in rows], advance)
    model = _model(g)  # one read of the graph's stamp, not one per entity
    for r in rows:
        extra: dict[str, Any] = json.loads(r["extra"]) if r.get("extra") else {}
        eu = r["ext_id"] or uid("entity", r["id"])
        uuids[r["id"]] = eu
        docs = sorted({u for u in (doc_uuid(d) for d in r["docs"] or []) if u})
        seen = [doc_rows[d]["created_at"] for d in r["docs"] or [] if d in doc_rows] + [
            note_rows[d]["ts"] for d in r["docs"] or [] if d in note_rows
        ]
        props = dict(extra.get("properties") or {})
        if r["aliases"]:
            props["aliases"] = list(r["aliases"])
        desc = described.get(r["id"])
        if desc is not None:
            c = desc["cite"]
            props["description_cite"] = {
                "citation": c["id"],
                "ref": c["ref"],
                "document_id": doc_uuid(c["doc_id"]),
                "path": c["path"],
                "start": c["loc"]["start"],
                "end": c["loc"]["end"],
                "quote": c["quote"],
            }
        ent: AksEntity = {
            "id": eu,
            "name": r["name"],
            "type": r["type"] or "Concept",
            "description": r["description"] or (desc["text"] if desc else None),
            "properties": props,
            "confidence": round(float(r["confidence"]), 4),
            "contributing_documents": docs,
            "last_seen_at": _dt(max(seen)) if seen else extra.get("last_seen_at"),
            "source": cast(
                AksSource,
                extra.get("source")
                or {
                    "document_id": docs[0] if docs else None,
                    "source_kind": r["source_kind"] or "document",
                    "extracted_at": _dt(max(seen)) if seen else None,
                    "model": model,
                    "verified": bool(r["verified"]),
                    "pipeline": "openkl-entities",
                },
            ),
        }
        src = ent["source"]
        if src.get("source_kind") == "backfeed":
            src["pipeline"] = "backfeed"
        ents.append(ent)
    rels: list[AksRelationship] = []
    for rel in g.export_relationships():
        if rel["a"] not in uuids or rel["b"] not in uuids:
            continue  # dangling in this (filtered) bundle
        if min_confidence is not None and rel["confidence"] < min_confidence:
            continue
        extra = json.loads(rel["extra"]) if rel.get("extra") else {}
        fu, tu = uuids[rel["a"]], uuids[rel["b"]]
        docs = sorted({u for u in (doc_uuid(d) for d in rel["docs"]) if u})
        rels.append(
            {
                "id": rel["ext_id"] or uid("rel", f"{fu}:{rel['type']}:{tu}"),
                "from_entity_id": fu,
                "to_entity_id": tu,
                "type": rel["type"],
                "description": rel["description"] or None,
                "confidence": round(float(rel["confidence"]), 4),
                "source": cast(
                    AksSource,
                    extra.get("source")
                    or {
                        "document_id": docs[0] if docs else None,
                        "source_kind": rel["source_kind"] or "document",
                        "model": model,
                        "verified": bool(rel["verified"]),
                        "pipeline": "backfeed"
                        if rel["source_kind"] == "backfeed"
                        else "openkl-entities",
                    },
                ),
            }
        )
    domain = domain_slug(folder)
    bundle: AksBundle = {
        "aks_version": AKS_VERSION,
        "domain": domain,
        "stack_id": uid("stack", domain),
        "stack_name": str(folder.setting("domain") or domain),
        "compiled_at": iso(),
        "scope": "stack",
        "entity_count": len(ents),
        "relationship_count": len(rels),
        "document_count": len(documents),
        "compilation_strategy": "incremental",
        "documents": [documents[k] for k in sorted(documents)],
        "entities": ents,
        "relationships": rels,
    }
    if min_confidence is not None or entity_type or max_entities is not None or verified_only:
        bundle["filters_applied"] = {
            "min_confidence": min_confidence,
            "verified_only": verified_only or None,
            "entity_type": entity_type,
            "max_entities": max_entities,
        }
    validate(bundle)
    return bundle


def _dt(ts: str | None) -> str:
    return ts if ts and re.match(r"\d{4}-\d{2}-\d{2}T", ts) else _EPOCH


def _model(g: GraphStore) -> str:
    return g.meta().get("entities.extractor") or LOCAL_VERSION


def graphml(bundle: AksBundle) -> str:
    from xml.sax.saxutils import escape, quoteattr

    keys = [
        ("name", "node"),
        ("type", "node"),
        ("confidence", "node"),
        ("description", "node"),
        ("rtype", "edge"),
        ("rconfidence", "edge"),
    ]
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">',
    ]
    for k, where in keys:
        typ = "double" if "confidence" in k else "string"
        name = k[1:] if k.startswith("r") and where == "edge" else k
        out.append(f'  <key id="{k}" for="{where}" attr.name="{name}" attr.type="{typ}"/>')
    out.append(f'  <graph id={quoteattr(bundle["domain"])} edgedefault="directed">')
    for e in bundle["entities"]:
        out.append(f"    <node id={quoteattr(e['id'])}>")
        out.append(f'      <data key="name">{escape(e["name"])}</data>')
        out.append(f'      <data key="type">{escape(e["type"])}</data>')
        out.append(f'      <data key="confidence">{e["confidence"]}</data>')
        desc = e.get("description")
        if desc:
            out.append(f'      <data key="description">{escape(desc)}</data>')
        out.append("    </node>")
    for r in bundle["relationships"]:
        out.append(
            f"    <edge id={quoteattr(r['id'])} source={quoteattr(r['from_entity_id'])} "
            f"target={quoteattr(r['to_entity_id'])}>"
        )
        out.append(f'      <data key="rtype">{escape(r["type"])}</data>')
        out.append(f'      <data key="rconfidence">{r["confidence"]}</data>')
        out.append("    </edge>")
    out += ["  </graph>", "</graphml>"]
    return "\n".join(out) + "\n"


def csv_tables(bundle: AksBundle) -> dict[str, str]:
    """entities.csv and relationships.csv."""
    import csv
    import io

    names = {e["id"]: e["name"] for e in bundle["entities"]}
    ebuf, rbuf = io.StringIO(), io.StringIO()
    w = csv.writer(ebuf, lineterminator="\n")
    w.writerow(
        [
            "id",
            "name",
            "type",
            "confidence",
            "verified",
            "source_kind",
            "aliases",
            "documents",
            "description",
        ]
    )
    for e in bundle["entities"]:
        w.writerow(
            [
                e["id"],
                e["name"],
                e["type"],
                e["confidence"],
                e["source"]["verified"],
                e["source"].get("source_kind") or "",
                "|".join(e["properties"].get("aliases", [])),
                len(e["contributing_documents"]),
                e.get("description") or "",
            ]
        )
    w = csv.writer(rbuf, lineterminator="\n")
    w.writerow(["id", "from_id", "from", "type", "to_id", "to", "confidence"])
    for r in bundle["relationships"]:
        w.writerow(
            [
                r["id"],
                r["from_entity_id"],
                names[r["from_entity_id"]],
                r["type"],
                r["to_entity_id"],
                names[r["to_entity_id"]],
                r["confidence"],
            ]
        )
    return {"entities.csv": ebuf.getvalue(), "relationships.csv": rbuf.getvalue()}


# -- import ---------------------------------------------------------------------------------
def load_bundle(text: str, where: str = "bundle") -> AksBundle:
    try:
        try:
            data = json.loads(text)
        except ValueError as e:
            raise BadInput(f"{where} is not valid JSON: {e}", "pass an AKS bundle (JSON)") from e
        validate(data)
    except RecursionError as e:  # JSON's parser and the schema's checks both recurse
        raise BadInput(
            f"{where} is nested too deeply to read", "pass an AKS bundle (JSON) of plain depth"
        ) from e
    return cast(AksBundle, data)


def keep_bundle(folder: Folder, text: str, where: str = "bundle") -> tuple[BundleKept, set[str]]:
    """Keep a bundle under aks/imports/: what was kept, and the entity keys it touches
    (old copy and new), which `ops.import_bundle` consolidates.

    The caller holds the writer lock. Relationships whose ends are not in the bundle are
    dropped (and counted); re-importing the same stack replaces the earlier copy.
    """
    bundle = load_bundle(text, where)
    ids = {e["id"] for e in bundle["entities"]}
    kept = [
        r
        for r in bundle["relationships"]
        if r["from_entity_id"] in ids and r["to_entity_id"] in ids
    ]
    dropped = len(bundle["relationships"]) - len(kept)
    bundle["relationships"] = kept
    bundle["relationship_count"] = len(kept)
    # the schema checks both; they name the file the bundle is kept in, so once more here
    stack = STACK_ID.check(bundle["stack_id"], f"{where}: $.stack_id")
    if not re.fullmatch(r"[a-z0-9-]+", str(bundle["domain"])):
        raise BadInput(
            f"{where}: $.domain must be lowercase letters, digits and -",
            "fix the bundle; schema: AKS v0.1.0 SCHEMA.json",
        )
    name = f"{bundle['domain']}-{stack[:8]}.json"
    target = imports_dir(folder) / name
    old_keys: set[str] = set()
    if target.exists():
        old_ents, old_rels, _ = _contrib_of(json.loads(target.read_text(encoding="utf-8")), name)
        old_keys = {e["key"] for e in old_ents} | {
            k for r in old_rels for k in (r["src"], r["dst"])
        }
    atomic_write(target, json.dumps(bundle, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    ents, rels, _ = _contrib_of(bundle, name)
    keys = old_keys | {e["key"] for e in ents} | {a for e in ents for a in e["alias_keys"]}
    folder.log_op(
        "bundle.import",
        path=folder.rel(target),
        domain=bundle["domain"],
        entities=len(ents),
        relationships=len(rels),
        dropped=dropped,
    )
    return {
        "path": folder.rel(target),
        "domain": bundle["domain"],
        "stack_id": bundle["stack_id"],
        "entities": len(ents),
        "relationships": len(rels),
        "dropped_relationships": dropped,
        "documents": len(bundle.get("documents") or []),
    }, keys


def _contrib_of(
    bundle: AksBundle, name: str
) -> tuple[list[CanonicalEntity], list[CanonicalRelation], str]:
    ents: list[CanonicalEntity] = []
    rels: list[CanonicalRelation] = []
    by_id = {}
    for e in bundle["entities"]:
        k = key_of(e["name"])
        if not k:
            continue
        by_id[e["id"]] = k
        props = dict(e.get("properties") or {})
        aliases = [a for a in props.pop("aliases", []) if isinstance(a, str)]
        src = e.get("source") or {}
        extra: dict[str, Any] = {"source": src}
        if props:
            extra["properties"] = props
        if e.get("last_seen_at"):
            extra["last_seen_at"] = e["last_seen_at"]
        ents.append(
            {
                "key": k,
                "name": e["name"],
                "type": e["type"],
                "description": e.get("description") or "",
                "confidence": e["confidence"],
                "verified": bool(src.get("verified")),
                "source_kind": src.get("source_kind") or "document",
                "aliases": aliases,
                "alias_keys": [key_of(a) for a in aliases],
                "ext_id": e["id"],
                "extra": extra,
                "origin": name,
                "docs": ["aks:" + d for d in e.get("contributing_documents") or []],
            }
        )
    for r in bundle["relationships"]:
        a, b = by_id.get(r["from_entity_id"]), by_id.get(r["to_entity_id"])
        if not a or not b:
            continue
        src = r.get("source") or {}
        rels.append(
            {
                "src": a,
                "dst": b,
                "type": r["type"],
                "confidence": r["confidence"],
                "verified": bool(src.get("verified")),
                "source_kind": src.get("source_kind") or "document",
                "description": r.get("description") or "",
                "ext_id": r["id"],
                "extra": {"source": src},
                "evidence": name,
                "docs": [],
            }
        )
    digest = hashlib.sha256(json.dumps(bundle, sort_keys=True).encode()).hexdigest()
    return ents, rels, digest


def _imports(folder: Folder) -> list[tuple[str, AksBundle]]:
    """The bundles kept under aks/imports/ (symlinks out of the folder left out)."""
    out = []
    for p in folder.files_under(imports_dir(folder), ".json", recursive=False).files:
        try:
            out.append((p.name, json.loads(p.read_text(encoding="utf-8"))))
        except (OSError, ValueError) as e:
            raise OkError(
                f"{folder.rel(p)} is not valid JSON",
                "restore it from git or import the bundle again",
            ) from e
    return out


def contributions(
    folder: Folder,
) -> tuple[list[CanonicalEntity], list[CanonicalRelation], str]:
    """Entities and relationships of the imported bundles, for consolidation; plus a digest."""
    ents: list[CanonicalEntity] = []
    rels: list[CanonicalRelation] = []
    h = hashlib.sha256()
    for name, bundle in _imports(folder):
        e, r, digest = _contrib_of(bundle, name)
        ents += e
        rels += r
        h.update(digest.encode())
    return ents, rels, h.hexdigest()


def imported_documents(folder: Folder) -> dict[str, ImportedDocument]:
    """Documents listed by imported bundles, by their uuid."""
    out: dict[str, ImportedDocument] = {}
    for name, bundle in _imports(folder):
        for d in bundle.get("documents") or []:
            out.setdefault(d["id"], {**d, "bundle": f"aks/imports/{name}"})
    return out


def entity_uuid(eid: str) -> str:
    return uid("entity", eid)


__all__ = ["entity_id", "entity_uuid", "export", "keep_bundle", "validate"]
