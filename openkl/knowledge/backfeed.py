"""Backfeed: proposed entities and relationships, reviewed by a person before they count.

Each item is one JSON file under `aks/backfeed/<id>.json` (canonical, versioned with the
folder). `flag` queues an item as pending; `approve` marks it approved and absorbs it into
the entity graph with `verified=true` and `source_kind=backfeed`; `reject` records why.
Approved items are read again by every consolidation, so they survive `ok index --rebuild`.

A graph edit (`ok graph add entity|relation`, its HTTP routes and MCP tools) is a backfeed
item built from checked fields (`entity_edit`, `relation_edit`), with its provenance: who
queued it, through what, when, and the documents and notes it rests on, which also become
the sources of what it adds to the graph.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from ..entities.kinds import TYPES
from ..entities.local import key_of
from ..errors import BadInput, NotFound, UsageError
from ..files import ids, mapping, notes
from ..files.folder import LINK_OUT, Folder, atomic_write, iso, shown
from ..records import (
    BackfeedItem,
    BackfeedProposal,
    CanonicalEntity,
    CanonicalRelation,
    EditCaller,
    EntitySource,
    ProposedEntity,
    ProposedRelationship,
    Provenance,
)

STATUSES = ("pending", "approved", "rejected")
_ENTITY_KEYS = {"name", "type", "description", "confidence", "aliases", "properties"}
_REL_KEYS = {"from", "to", "type", "confidence", "description"}


def backfeed_dir(folder: Folder) -> Path:
    return folder.root / "aks" / "backfeed"


def _fail(where: str, problem: str) -> BadInput:
    return BadInput(
        f"backfeed item {where}: {problem}",
        'expected {"entities": [{"name": …, "type": …}], "relationships": '
        '[{"from": …, "to": …, "type": …}]}',
    )


def parse(text: str) -> BackfeedProposal:
    """Validate a proposed item (JSON text); errors name the JSON path."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise BadInput(
            f"backfeed input is not valid JSON: {e}", "pass a JSON object on stdin or with --file"
        ) from e
    except RecursionError as e:
        raise BadInput(
            "backfeed input is nested too deeply to read",
            'pass {"entities": [...], "relationships": [...]} of plain depth',
        ) from e
    if not isinstance(data, dict):
        raise _fail("$", "must be a JSON object")
    unknown = set(data) - {
        "entities",
        "relationships",
        "content",
        "origin",
        "flagged_by",
        "source_run_id",
        "stack_id",
    }
    if unknown:
        raise _fail(f"$.{sorted(unknown)[0]}", "unknown field")
    ents = data.get("entities", [])
    rels = data.get("relationships", [])
    if not isinstance(ents, list):
        raise _fail("$.entities", "must be an array")
    if not isinstance(rels, list):
        raise _fail("$.relationships", "must be an array")
    if not ents and not rels:
        raise _fail("$", "proposes no entities and no relationships")
    out_e: list[ProposedEntity] = []
    for i, ent in enumerate(ents):
        where = f"$.entities[{i}]"
        if not isinstance(ent, dict):
            raise _fail(where, "must be an object")
        if set(ent) - _ENTITY_KEYS:
            raise _fail(f"{where}.{sorted(set(ent) - _ENTITY_KEYS)[0]}", "unknown field")
        if not isinstance(ent.get("name"), str) or not key_of(ent["name"]):
            raise _fail(f"{where}.name", "must be a non-empty name")
        item: ProposedEntity = {
            "name": ent["name"].strip(),
            "type": str(ent.get("type") or "Concept"),
        }
        if ent.get("description") is not None:
            item["description"] = str(ent["description"])
        if ent.get("confidence") is not None:
            item["confidence"] = _conf(ent["confidence"], f"{where}.confidence")
        if ent.get("aliases") is not None:
            if not isinstance(ent["aliases"], list) or not all(
                isinstance(a, str) for a in ent["aliases"]
            ):
                raise _fail(f"{where}.aliases", "must be an array of strings")
            item["aliases"] = [a.strip() for a in ent["aliases"] if a.strip()]
        if ent.get("properties") is not None:
            if not isinstance(ent["properties"], dict):
                raise _fail(f"{where}.properties", "must be an object")
            item["properties"] = ent["properties"]
        out_e.append(item)
    out_r: list[ProposedRelationship] = []
    for i, r in enumerate(rels):
        where = f"$.relationships[{i}]"
        if not isinstance(r, dict):
            raise _fail(where, "must be an object")
        if set(r) - _REL_KEYS:
            raise _fail(f"{where}.{sorted(set(r) - _REL_KEYS)[0]}", "unknown field")
        for f in ("from", "to", "type"):
            if not isinstance(r.get(f), str) or not r[f].strip():
                raise _fail(f"{where}.{f}", "must be a non-empty string")
        rel: ProposedRelationship = {
            "from": r["from"].strip(),
            "to": r["to"].strip(),
            "type": r["type"].strip(),
        }
        if key_of(rel["from"]) == key_of(rel["to"]):
            raise _fail(where, "relates an entity to itself")
        if r.get("confidence") is not None:
            rel["confidence"] = _conf(r["confidence"], f"{where}.confidence")
        if r.get("description") is not None:
            rel["description"] = str(r["description"])
        out_r.append(rel)
    proposal: BackfeedProposal = {
        "entities": out_e,
        "relationships": out_r,
        "content": str(data.get("content") or ""),
        "origin": data["origin"] if data.get("origin") in ("run", "direct") else "direct",
        "flagged_by": data.get("flagged_by"),
        "source_run_id": data.get("source_run_id"),
    }
    return proposal


def _conf(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
        raise _fail(where, "must be a number between 0 and 1")
    return float(v)


def item_id(item: BackfeedProposal) -> str:
    payload = json.dumps(
        {"entities": item["entities"], "relationships": item["relationships"]},
        sort_keys=True,
        ensure_ascii=False,
    )
    return "bf-" + hashlib.sha256(payload.encode()).hexdigest()[:12]


def _path(folder: Folder, iid: str) -> Path:
    """The file of item `iid` (an id that is not a backfeed id is a `BadInput`)."""
    return backfeed_dir(folder) / f"{ids.BACKFEED.check(iid)}.json"


def _save(folder: Folder, item: BackfeedItem) -> None:
    atomic_write(
        _path(folder, item["id"]),
        json.dumps(item, indent=2, ensure_ascii=False, sort_keys=True) + "\n",
    )


def scan(folder: Folder) -> tuple[list[BackfeedItem], list[tuple[str, str]]]:
    """The items under aks/backfeed/, and (path, problem) for the files left out: a
    symlink out of the folder, or an item whose id is not the one its file name says (it
    would be saved elsewhere). A file that is not JSON is a `BadInput`."""
    listing = folder.files_under(backfeed_dir(folder), ".json", recursive=False)
    out: list[BackfeedItem] = []
    skipped = [(folder.named(p), LINK_OUT) for p in listing.outside if p.name.startswith("bf-")]
    for p in listing.files:
        if not p.name.startswith("bf-"):
            continue
        try:
            item = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise BadInput(
                f"{folder.rel(p)} is not valid JSON", "fix the file or move it out of aks/backfeed/"
            ) from e
        iid = item.get("id") if isinstance(item, dict) else None
        if iid != p.stem or not ids.BACKFEED.valid(iid):
            skipped.append(
                (
                    folder.rel(p),
                    f"holds backfeed item {shown(str(iid))}, not {p.stem}: left out "
                    "(hint: name the file after the item's id, bf-<12 hex>.json)",
                )
            )
            continue
        out.append(item)
    return out, skipped


def load_all(folder: Folder) -> list[BackfeedItem]:
    """The items under aks/backfeed/ (those `scan` leaves out are not among them)."""
    return scan(folder)[0]


def get(folder: Folder, iid: str) -> BackfeedItem:
    """An item by id or unique id prefix."""
    items = load_all(folder)
    hits = [i for i in items if i["id"] == iid] or [i for i in items if i["id"].startswith(iid)]
    if len(hits) == 1 and iid:
        return hits[0]
    raise NotFound(f"no backfeed item {shown(iid)}", "list items with `ok backfeed queue`")


def known_names(folder: Folder) -> set[str] | None:
    """Keys of entities in the graph (None when there is no graph to ask)."""
    from ..graph.indexing import open_graph

    try:
        with open_graph(folder) as g:
            rows = g.all_entity_aliases()
    except Exception:  # noqa: BLE001 - no index yet: nothing to check against
        return None
    out = set()
    for eid, aliases in rows:
        out.add(eid.replace("-", " "))
        out.update(key_of(a) for a in aliases)
    return out


def check_endpoints(item: BackfeedProposal, known: set[str] | None) -> None:
    """Every relationship must join entities the item proposes or the graph already has."""
    if known is None:
        known = set()
    have = (
        known
        | {key_of(e["name"]) for e in item["entities"]}
        | {key_of(a) for e in item["entities"] for a in e.get("aliases", [])}
    )
    for i, r in enumerate(item["relationships"]):
        for end in ("from", "to"):
            if key_of(r[end]) not in have:
                raise BadInput(
                    f"backfeed item $.relationships[{i}].{end}: unknown entity {r[end]!r}",
                    "propose it in `entities` too, or check the name with `ok graph entities`",
                )


def flag(folder: Folder, text: str, caller: EditCaller | None = None) -> tuple[BackfeedItem, bool]:
    """Queue a proposal; returns (item, created). The same proposal twice is one item."""
    return queue_proposal(folder, parse(text), caller)


def queue_proposal(
    folder: Folder,
    proposal: BackfeedProposal,
    caller: EditCaller | None = None,
    sources: Sequence[EntitySource] = (),
    check_ends: bool = True,
) -> tuple[BackfeedItem, bool]:
    """Queue a checked proposal, recording who queued it (`caller`) on what evidence
    (`sources`); returns (item, created). `check_ends` False lets a relationship name an
    entity the graph does not have yet: approving it checks again."""
    if check_ends:
        check_endpoints(proposal, known_names(folder))
    iid = item_id(proposal)
    p = _path(folder, iid)
    if p.exists():
        return cast(BackfeedItem, json.loads(p.read_text(encoding="utf-8"))), False
    now = iso()
    item: BackfeedItem = {
        "id": iid,
        "status": "pending",
        "created_at": now,
        "decided_at": None,
        "reason": None,
        **proposal,
    }
    if caller is not None:
        item["provenance"] = cast(Provenance, {**caller, "at": now, "sources": list(sources)})
    _save(folder, item)
    folder.log_op(
        "backfeed.flag",
        id=iid,
        entities=len(item["entities"]),
        relationships=len(item["relationships"]),
        **({"by": caller["by"]} if caller else {}),
    )
    return item, True


def queue(folder: Folder, status: str | None = "pending") -> list[BackfeedItem]:
    if status not in (None, "all", *STATUSES):
        raise UsageError(f"unknown status {status!r}", "use pending, approved, rejected or all")
    items = load_all(folder)
    if status and status != "all":
        items = [i for i in items if i.get("status") == status]
    return sorted(items, key=lambda i: (i.get("created_at") or "", i["id"]))


def decide(
    folder: Folder,
    iid: str,
    approve: bool,
    reason: str | None = None,
    caller: EditCaller | None = None,
) -> BackfeedItem:
    """Approve or reject a pending item (`ops.decide_backfeed` absorbs an approved one);
    `caller` is recorded as who decided."""
    item = get(folder, iid)
    if item.get("status") != "pending":
        raise BadInput(
            f"backfeed item {item['id']} is already {item.get('status')}",
            "flag a new item to change it",
        )
    if approve:
        check_endpoints(item, known_names(folder))
    elif not (reason or "").strip():
        raise UsageError("a rejection needs a reason", "pass --reason TEXT")
    item["status"] = "approved" if approve else "rejected"
    item["decided_at"] = iso()
    item["reason"] = reason
    if caller is not None:
        item["decided_by"] = caller
    _save(folder, item)
    folder.log_op(
        "backfeed.approve" if approve else "backfeed.reject",
        id=item["id"],
        reason=reason,
        **({"by": caller["by"]} if caller else {}),
    )
    return item


def touched_keys(item: BackfeedProposal) -> set[str]:
    """The entity keys an item names, which its approval consolidates."""
    keys = {key_of(e["name"]) for e in item["entities"]}
    keys |= {key_of(a) for e in item["entities"] for a in e.get("aliases", [])}
    keys |= {key_of(r[end]) for r in item["relationships"] for end in ("from", "to")}
    return keys


def contributions(
    folder: Folder,
) -> tuple[list[CanonicalEntity], list[CanonicalRelation], str]:
    """Entities and relationships of approved items, for consolidation; plus a digest."""
    ents: list[CanonicalEntity] = []
    rels: list[CanonicalRelation] = []
    h = hashlib.sha256()
    for item in load_all(folder):
        if item.get("status") != "approved":
            continue
        h.update(json.dumps(item, sort_keys=True).encode())
        # the documents and notes a graph edit rests on are the sources of what it adds
        prov = item.get("provenance")
        docs = sorted({s["id"] for s in prov.get("sources", [])}) if prov else []
        for e in item.get("entities", []):
            ents.append(
                {
                    "key": key_of(e["name"]),
                    "name": e["name"],
                    "type": e.get("type") or "Concept",
                    "description": e.get("description") or "",
                    "confidence": e.get("confidence"),
                    "verified": True,
                    "source_kind": "backfeed",
                    "aliases": e.get("aliases", []),
                    "alias_keys": [key_of(a) for a in e.get("aliases", [])],
                    "extra": {"properties": e["properties"]} if e.get("properties") else {},
                    "origin": item["id"],
                    "docs": docs,
                }
            )
        for r in item.get("relationships", []):
            rels.append(
                {
                    "src": key_of(r["from"]),
                    "dst": key_of(r["to"]),
                    "type": r["type"],
                    "confidence": r.get("confidence"),
                    "verified": True,
                    "source_kind": "backfeed",
                    "description": r.get("description") or "",
                    "evidence": item["id"],
                    "docs": docs,
                }
            )
    return ents, rels, h.hexdigest()


# -- graph edits ----------------------------------------------------------------------------
NAME_MAX = 200  # characters of an entity name or alias
DESCRIPTION_MAX = 2000
ALIASES_MAX = 20
SOURCES_MAX = 20
_REL_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
# bidirectional controls: they make a name read differently from what it holds
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def clean_text(value: str, what: str, cap: int, lines: bool = False) -> str:
    """`value` stripped, if it is not empty, at most `cap` characters long, and free of
    control characters (`lines`: newlines and tabs are allowed)."""
    text = value.strip()
    if not text:
        raise BadInput(f"{what} is empty", f"give the {what} as text")
    if len(text) > cap:
        raise BadInput(
            f"{what} is {len(text)} characters long; at most {cap} are accepted",
            f"shorten the {what}",
        )
    for c in text:
        if lines and c in "\n\t":
            continue
        if unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in _BIDI:
            raise BadInput(
                f"{what} {shown(text, 60)} holds a control character (U+{ord(c):04X})",
                f"give the {what} as plain text",
            )
    return text


def entity_type(value: str) -> str:
    """One of the entity types (`entities.kinds.TYPES`), spelt as the graph spells it."""
    t = value.strip()
    for known in TYPES:
        if known.lower() == t.lower():
            return known
    raise BadInput(f"unknown entity type {shown(t, 60)}", "use one of: " + ", ".join(TYPES))


def relation_type(value: str) -> str:
    """A relationship type as snake_case (`works with`, `Works-With` → `works_with`)."""
    t = re.sub(r"[\s-]+", "_", value.strip().lower())
    if not _REL_TYPE.fullmatch(t):
        raise BadInput(
            f"relationship type {shown(value, 60)} is not a word in snake_case",
            "use letters, digits and _, starting with a letter, at most 64: uses, part_of, "
            "works_with",
        )
    return t


def resolve_sources(folder: Folder, refs: Sequence[str]) -> list[EntitySource]:
    """The documents (id, prefix, path or URL) and memory notes (id) `refs` name, each
    checked to be in the folder."""
    if len(refs) > SOURCES_MAX:
        raise BadInput(
            f"{len(refs)} sources given; at most {SOURCES_MAX} are accepted",
            "name the documents and notes the edit rests on most",
        )
    out: dict[str, EntitySource] = {}
    for ref in refs:
        src = _source(folder, clean_text(ref, "source", 2000))
        out.setdefault(src["id"], src)
    return list(out.values())


def _source(folder: Folder, ref: str) -> EntitySource:
    if not ref.startswith(("m-", "memories/")):
        try:
            e = mapping.resolve(folder, ref)
            return {"id": e["id"], "kind": "doc", "title": e.get("title") or "", "path": e["path"]}
        except NotFound:
            pass
    try:
        n = notes.find(folder, ref)
    except (NotFound, BadInput) as e:
        if isinstance(e, BadInput) and "matches" in e.message:
            raise
        raise NotFound(
            f"no document or memory note {shown(ref)} in this folder",
            "name a document by id or path (`ok store list`) or a note by id (`ok mem list`)",
        ) from e
    first = (n.body.strip().splitlines() or [""])[0][:80]
    path = folder.rel(n.path) if n.path is not None else ""
    return {"id": n.id, "kind": "memory", "title": first, "path": path}


def _aliases(aliases: Sequence[str], name: str) -> list[str]:
    if len(aliases) > ALIASES_MAX:
        raise BadInput(
            f"{len(aliases)} aliases given; at most {ALIASES_MAX} are accepted",
            "keep the names the entity is known by",
        )
    out: list[str] = []
    for a in aliases:
        a = clean_text(a, "alias", NAME_MAX)
        if key_of(a) and key_of(a) != key_of(name) and a not in out:
            out.append(a)
    return out


def _proposal(
    entities: list[ProposedEntity], rels: list[ProposedRelationship], by: str
) -> BackfeedProposal:
    return {
        "entities": entities,
        "relationships": rels,
        "content": "",
        "origin": "direct",
        "flagged_by": by,
        "source_run_id": None,
    }


def entity_edit(
    name: str,
    type_: str,
    by: str,
    description: str | None = None,
    aliases: Sequence[str] = (),
) -> BackfeedProposal:
    """The proposal of one entity, its fields checked."""
    name = clean_text(name, "entity name", NAME_MAX)
    if not key_of(name):
        raise BadInput(
            f"entity name {shown(name, 60)} has no letters or digits", "give it a real name"
        )
    ent: ProposedEntity = {"name": name, "type": entity_type(type_)}
    if description is not None:
        ent["description"] = clean_text(description, "description", DESCRIPTION_MAX, lines=True)
    found = _aliases(aliases, name)
    if found:
        ent["aliases"] = found
    return _proposal([ent], [], by)


def relation_edit(
    source: str, relation: str, target: str, by: str, description: str | None = None
) -> BackfeedProposal:
    """The proposal of one relationship, `source` -relation-> `target` (entity names)."""
    a = clean_text(source, "source entity", NAME_MAX)
    b = clean_text(target, "target entity", NAME_MAX)
    for end in (a, b):
        if not key_of(end):
            raise BadInput(
                f"entity name {shown(end, 60)} has no letters or digits", "name an entity"
            )
    if key_of(a) == key_of(b):
        raise BadInput(f"{shown(a, 60)} is related to itself", "relate two different entities")
    rel: ProposedRelationship = {"from": a, "to": b, "type": relation_type(relation)}
    if description is not None:
        rel["description"] = clean_text(description, "description", DESCRIPTION_MAX, lines=True)
    return _proposal([], [rel], by)


def unknown_ends(item: BackfeedProposal, known: set[str] | None) -> list[str]:
    """The relationship ends of `item` that neither the graph (`known`) nor the item names."""
    have = (known or set()) | touched_keys({**item, "relationships": []})
    out: list[str] = []
    for r in item["relationships"]:
        for end in (r["from"], r["to"]):
            if key_of(end) not in have and end not in out:
                out.append(end)
    return out
