"""The entity graph in PostgreSQL: `EntityStore` for `PgGraph`, mixed into it.

Entities, their mentions (MENTIONS) and relationships (RELATED), and the per chunk and per
note extractions they are consolidated from, each in a table with the `stack` column and
row-level security of the others (`postgres.schema`). Reads return what the Kùzu queries
of `entities.py` return, in the same order: text is ordered byte by byte (`COLLATE "C"`),
as Kùzu orders strings. Bulk writes send columns as arrays and `unnest` them, one
statement per piece, which row-level security allows (COPY FROM does not).

The walk of `ok graph traverse` is one recursive CTE (`relationships_walk`) instead of a
query per level.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..records import (
    ConsolidatedEntity,
    ContextRelationship,
    CountedEntity,
    Entity,
    ExportedRelationship,
    ExtractionData,
    ExtractionIndexed,
    ExtractionInput,
    ExtractionKeys,
    Mention,
    MentionedIn,
    RelatedPair,
    Relationship,
    RelationshipProps,
    SourceDoc,
    SourceNote,
    SourceVersion,
    StoredRelationship,
)
from .entity_writes import ENT_FIELDS, REL_FIELDS, RelKey, Steps, rel_docs, rel_docs_text

C = 'COLLATE "C"'  # Kùzu orders strings by their bytes

# the columns of an entity, as the readers return them (`entities.ENTITY_COLS`)
ENTITY_COLS = (
    "e.id, e.name, e.type, e.description, e.confidence, e.aliases, e.docs, e.verified,"
    " e.source_kind, e.ext_id, e.extra"
)
# a relationship with its ends' names (`Relationship`)
_REL_COLS = (
    "a.id AS from_id, a.name AS from_name, b.id AS to_id, b.name AS to_name, r.type,"
    " r.confidence, r.evidence, r.docs, r.verified, r.source_kind, r.description"
)
# a relationship joined to the entities at its ends, as Kùzu's RELATED always has them
_RELATED = (
    "relationships r JOIN entities a ON a.stack = r.stack AND a.id = r.src"
    " JOIN entities b ON b.stack = r.stack AND b.id = r.dst"
)
_LABELS = {"Chunk": "chunk", "MemoryNote": "note"}
# the SQL types of the columns consolidation writes ("list": a text[] sent as JSON)
_ENT_TYPES = {c: "text" for c in ENT_FIELDS} | {
    "confidence": "double precision",
    "aliases": "list",
    "docs": "list",
    "verified": "boolean",
    "canonical": "boolean",
}
_REL_TYPES = {c: "text" for c in ("src", "dst", "type", *REL_FIELDS)} | {
    "confidence": "double precision",
    "verified": "boolean",
}
_ROWS_PER_INSERT = 20_000


def tables() -> dict[str, str]:
    """The entity graph's tables (name → columns after `stack`)."""
    return {
        "entities": "id text, name text, type text, description text, confidence double"
        " precision, aliases text[], docs text[], verified boolean, source_kind text,"
        " canonical boolean, ext_id text, extra text, PRIMARY KEY (stack, id)",
        # per chunk or note: the entity keys and aliases it names, and the extractor's JSON
        "extractions": "id text, owner text, base bigint, keys text[], aliases text[],"
        " data text, PRIMARY KEY (stack, id)",
        # owner_kind: chunk or note (Kùzu's MENTIONS from Chunk or from MemoryNote)
        "mentions": "owner text, owner_kind text, entity text, confidence double precision,"
        " PRIMARY KEY (stack, owner, entity)",
        # no key: as in Kùzu, one (src, dst, type) may be held twice, and the writer mends it
        "relationships": "src text, dst text, type text, confidence double precision,"
        " evidence text, docs text, verified boolean, source_kind text, description text,"
        " ext_id text, extra text",
    }


def indexes() -> list[str]:
    """The indexes the entity reads and the consolidation writer need."""
    return [
        "CREATE INDEX IF NOT EXISTS mentions_entity ON mentions (stack, entity)",
        "CREATE INDEX IF NOT EXISTS relationships_src ON relationships (stack, src)",
        "CREATE INDEX IF NOT EXISTS relationships_dst ON relationships (stack, dst)",
        "CREATE INDEX IF NOT EXISTS extractions_owner ON extractions (stack, owner)",
        # none on entities' confidence: without statistics, the planner took it for the
        # lookups by id in every join and scanned the stack's entities once per row
    ]


def _json_list(values: Sequence[Any] | None) -> str:
    return json.dumps(list(values or []), ensure_ascii=False)


# a JSON list sent as text, made a text[] in SQL: rows of an unnest may hold lists of
# different lengths, which an array of arrays may not
_LIST = "ARRAY(SELECT jsonb_array_elements_text({}::jsonb))"


class PgEntities:
    """`EntityStore` over the tables of `tables()`, mixed into `PgGraph`."""

    if TYPE_CHECKING:
        # provided by `PgGraph`
        stack: str

        def _run(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...

        def _ids(self, sql: str, params: dict[str, Any] | None = None) -> list[str]: ...

        def commit_and_continue(self) -> None: ...

    def _insert(
        self, table: str, types: Mapping[str, str], values: Mapping[str, Sequence[Any]]
    ) -> None:
        """Insert rows given as columns of equal length; `types` are the columns' SQL types,
        "list" for a text[] sent as JSON."""
        cols = list(types)
        picks = ", ".join(_LIST.format(f"u.{c}") if types[c] == "list" else f"u.{c}" for c in cols)
        args = ", ".join(f"%({c})s::{'text' if types[c] == 'list' else types[c]}[]" for c in cols)
        sql = (
            f"INSERT INTO {table} ({', '.join(cols)}) SELECT {picks}"
            f" FROM unnest({args}) AS u({', '.join(cols)})"
        )
        n = len(values[cols[0]])
        for i in range(0, n, _ROWS_PER_INSERT):
            part = {
                c: [_json_list(v) for v in values[c][i : i + _ROWS_PER_INSERT]]
                if types[c] == "list"
                else list(values[c][i : i + _ROWS_PER_INSERT])
                for c in cols
            }
            self._run(sql, part)

    def analyze_entities(self) -> None:
        """Refresh the planner's statistics of the entity tables after a bulk load: a
        table it has none of looks empty, and it plans its joins as if it were."""
        for t in tables():
            self._run(f"ANALYZE {t}")

    # -- entities -----------------------------------------------------------------------
    def entities(
        self, *, min_confidence: float, type: str | None = None, doc: str | None = None
    ) -> list[CountedEntity]:
        where = ["e.stack = %(st)s", "e.confidence >= %(mc)s"]
        params: dict[str, Any] = {"mc": float(min_confidence)}
        if type:
            where.append("lower(e.type) = lower(%(t)s)")
            params["t"] = type
        if doc:
            where.append("%(d)s = ANY(e.docs)")
            params["d"] = doc
        return self._run(  # type: ignore[return-value]
            f"SELECT {ENTITY_COLS}, (SELECT count(*) FROM mentions m WHERE m.stack = e.stack"
            f" AND m.entity = e.id) AS mentions FROM entities e WHERE {' AND '.join(where)}"
            f" ORDER BY e.confidence DESC, e.name {C}, e.id {C}",
            params,
        )

    def entity(self, eid: str) -> Entity | None:
        rows = self._run(
            f"SELECT {ENTITY_COLS} FROM entities e WHERE e.stack = %(st)s AND e.id = %(id)s",
            {"id": eid},
        )
        return rows[0] if rows else None  # type: ignore[return-value]

    def entity_either(self, eid: str, raw: str) -> Entity | None:
        rows = self._run(
            f"SELECT {ENTITY_COLS} FROM entities e WHERE e.stack = %(st)s"
            f" AND e.id IN (%(id)s, %(raw)s) ORDER BY e.id = %(id)s DESC",
            {"id": eid, "raw": raw},
        )
        return rows[0] if rows else None  # type: ignore[return-value]

    def entity_aliases(self) -> list[tuple[str, list[str]]]:
        rows = self._run(
            "SELECT id, aliases FROM entities WHERE stack = %(st)s AND cardinality(aliases) > 0"
            f" ORDER BY confidence DESC, id {C}"
        )
        return [(r["id"], r["aliases"]) for r in rows]

    def entity_names_near(self, part: str) -> list[str]:
        rows = self._run(
            "SELECT name FROM entities WHERE stack = %(st)s AND strpos(id, %(p)s) > 0"
            f" ORDER BY confidence DESC, name {C} LIMIT 5",
            {"p": part},
        )
        return [r["name"] for r in rows]

    def entity_ids(self) -> list[str]:
        return self._ids("SELECT id FROM entities WHERE stack = %(st)s")

    def canonical_entity_ids(self) -> list[str]:
        return self._ids("SELECT id FROM entities WHERE stack = %(st)s AND canonical")

    def export_entities(
        self,
        *,
        min_confidence: float | None = None,
        type: str | None = None,
        verified_only: bool = False,
    ) -> list[Entity]:
        where = ["e.stack = %(st)s"]
        params: dict[str, Any] = {}
        if min_confidence is not None:
            where.append("e.confidence >= %(mc)s")
            params["mc"] = float(min_confidence)
        if type:
            where.append("lower(e.type) = lower(%(t)s)")
            params["t"] = type
        if verified_only:
            where.append("e.verified")
        return self._run(  # type: ignore[return-value]
            f"SELECT {ENTITY_COLS} FROM entities e WHERE {' AND '.join(where)}"
            f" ORDER BY e.confidence DESC, e.id {C}",
            params,
        )

    def entities_by_id(self, ids: list[str]) -> dict[str, Entity]:
        rows = self._run(
            f"SELECT {ENTITY_COLS} FROM entities e WHERE e.stack = %(st)s AND e.id = ANY(%(ids)s)",
            {"ids": list(ids)},
        )
        return {r["id"]: r for r in rows}  # type: ignore[misc]

    def all_entity_aliases(self) -> list[tuple[str, list[str]]]:
        rows = self._run("SELECT id, aliases FROM entities WHERE stack = %(st)s")
        return [(r["id"], r["aliases"] or []) for r in rows]

    def entities_named_by(self, term: str, min_confidence: float) -> list[str]:
        return self._ids(
            "SELECT id FROM entities WHERE stack = %(st)s AND confidence >= %(mc)s AND"
            " (id = %(t)s OR starts_with(id, %(p)s) OR right(id, length(%(s)s)) = %(s)s"
            " OR strpos(id, %(c)s) > 0 OR %(raw)s = ANY(aliases))",
            {
                "mc": min_confidence,
                "t": term,
                "p": term + "-",
                "s": "-" + term,
                "c": "-" + term + "-",
                "raw": term.upper(),
            },
        )

    # -- mentions -----------------------------------------------------------------------
    def chunk_mentions(self, eid: str, limit: int) -> list[Mention]:
        return self._mentions_of("Chunk", eid, limit)

    def note_mentions(self, eid: str, limit: int) -> list[Mention]:
        return self._mentions_of("MemoryNote", eid, limit)

    def _mentions_of(self, label: str, eid: str, limit: int) -> list[Mention]:
        return self._run(  # type: ignore[return-value]
            "SELECT owner AS id, confidence FROM mentions WHERE stack = %(st)s"
            f" AND entity = %(e)s AND owner_kind = %(k)s ORDER BY confidence DESC, owner {C}"
            " LIMIT %(n)s",
            {"e": eid, "k": _LABELS[label], "n": limit},
        )

    def mentions_of_many(self, label: str, ids: list[str], limit: int) -> dict[str, list[Mention]]:
        out: dict[str, list[Mention]] = {eid: [] for eid in ids}
        rows = self._run(
            "SELECT entity AS e, owner AS id, confidence AS c FROM (SELECT m.*, row_number()"
            f" OVER (PARTITION BY entity ORDER BY confidence DESC, owner {C}) AS n"
            " FROM mentions m WHERE stack = %(st)s AND entity = ANY(%(ids)s)"
            f" AND owner_kind = %(k)s) t WHERE n <= %(n)s ORDER BY e, n",
            {"ids": list(ids), "k": _LABELS[label], "n": limit},
        )
        for r in rows:
            out[r["e"]].append({"id": r["id"], "confidence": r["c"]})
        return out

    def mentions_in(self, ids: list[str], min_confidence: float) -> list[MentionedIn]:
        return self._run(  # type: ignore[return-value]
            "SELECT m.owner AS x, m.entity AS e, m.confidence AS c FROM mentions m JOIN entities e"
            " ON e.stack = m.stack AND e.id = m.entity WHERE m.stack = %(st)s"
            " AND m.owner = ANY(%(ids)s) AND e.confidence >= %(mc)s"
            f" ORDER BY m.owner_kind = 'note', m.owner {C}, m.entity {C}",
            {"ids": list(ids), "mc": min_confidence},
        )

    # -- relationships ------------------------------------------------------------------
    def relationships_of(self, eid: str, min_confidence: float) -> list[Relationship]:
        rows = self._run(
            f"SELECT {_REL_COLS} FROM {_RELATED} WHERE r.stack = %(st)s"
            " AND (r.src = %(id)s OR r.dst = %(id)s) AND r.confidence >= %(mc)s"
            f" ORDER BY r.confidence DESC, r.type {C}, a.id {C}, b.id {C}",
            {"id": eid, "mc": float(min_confidence)},
        )
        return [{**r, "docs": rel_docs(r["docs"])} for r in rows]  # type: ignore[typeddict-item]

    def relationships_of_many(
        self, ids: list[str], min_confidence: float
    ) -> dict[str, list[Relationship]]:
        out: dict[str, list[Relationship]] = {eid: [] for eid in ids}
        seen: dict[tuple[str, str, str], dict[str, Any]] = {}
        for r in self._run(
            f"SELECT {_REL_COLS} FROM {_RELATED} WHERE r.stack = %(st)s"
            " AND (r.src = ANY(%(ids)s) OR r.dst = ANY(%(ids)s)) AND r.confidence >= %(mc)s",
            {"ids": list(ids), "mc": float(min_confidence)},
        ):
            seen.setdefault((r["from_id"], r["to_id"], r["type"]), r)
        rows = sorted(
            seen.values(), key=lambda r: (-r["confidence"], r["type"], r["from_id"], r["to_id"])
        )
        for r in rows:
            rel: Relationship = {**r, "docs": rel_docs(r["docs"])}  # type: ignore[typeddict-item]
            for end in dict.fromkeys((r["from_id"], r["to_id"])):
                if end in out:
                    out[end].append(rel)
        return out

    def relationship_types(self) -> list[str]:
        return [
            r["type"]
            for r in self._run(
                f"SELECT r.type, count(*) AS n FROM {_RELATED} WHERE r.stack = %(st)s"
                f" GROUP BY r.type ORDER BY n DESC, r.type {C}"
            )
        ]

    def relationships_touching(self, ids: list[str], min_confidence: float) -> list[RelatedPair]:
        return self._run(  # type: ignore[return-value]
            "SELECT a.id AS a, a.name AS an, b.id AS b, b.name AS bn, r.type, r.confidence,"
            f" r.evidence FROM {_RELATED} WHERE r.stack = %(st)s"
            " AND (r.src = ANY(%(f)s) OR r.dst = ANY(%(f)s)) AND r.confidence >= %(mc)s"
            " AND a.confidence >= %(mc)s AND b.confidence >= %(mc)s"
            f" ORDER BY r.confidence DESC, a.id {C}, b.id {C}, r.type {C}",
            {"f": list(ids), "mc": float(min_confidence)},
        )

    def relationships_walk(
        self,
        start: str,
        depth: int,
        min_confidence: float,
        type: str | None = None,
        limit: int | None = None,
    ) -> list[list[RelatedPair]]:
        """For each level 1..depth of a breadth-first walk from `start`, what
        `relationships_touching` returns for the entities first reached one level before
        (of `type` only, when given), up to the level at which `limit` entities are reached:
        in one query, where a recursive CTE finds each entity's level and a join the
        relationships at each level."""
        if depth < 1:
            return []
        kind = " AND r.type = %(t)s" if type else ""
        ok = "r.confidence >= %(mc)s AND a.confidence >= %(mc)s AND b.confidence >= %(mc)s" + kind
        rows = self._run(
            "WITH RECURSIVE walk(id, d) AS (SELECT %(start)s::text, 0 UNION"
            " SELECT n.id, w.d + 1 FROM walk w CROSS JOIN LATERAL ("
            f" SELECT r.dst AS id FROM {_RELATED} WHERE r.stack = %(st)s AND r.src = w.id"
            f" AND {ok} UNION ALL"
            f" SELECT r.src FROM {_RELATED} WHERE r.stack = %(st)s AND r.dst = w.id AND {ok}"
            ") n WHERE w.d < %(last)s),"
            " level AS (SELECT id, min(d) AS d FROM walk GROUP BY id),"
            # the entities reached up to each level, besides the start
            " reach AS (SELECT d, sum(n) OVER (ORDER BY d) - 1 AS n"
            " FROM (SELECT d, count(*) AS n FROM level GROUP BY d) c),"
            " hit AS (SELECT DISTINCT l.d, r.ctid AS rid FROM level l JOIN relationships r"
            " ON r.stack = %(st)s AND (r.src = l.id OR r.dst = l.id)"
            " WHERE l.d IN (SELECT d FROM reach WHERE d = 0 OR n < %(limit)s))"
            " SELECT h.d + 1 AS level, a.id AS a, a.name AS an, b.id AS b, b.name AS bn,"
            f" r.type, r.confidence, r.evidence FROM hit h JOIN {_RELATED} ON r.ctid = h.rid"
            f" WHERE r.stack = %(st)s AND {ok}"
            f" ORDER BY level, r.confidence DESC, a.id {C}, b.id {C}, r.type {C}",
            {
                "start": start,
                "mc": float(min_confidence),
                "t": type,
                "last": depth - 1,
                "limit": limit if limit is not None else 2**62,
            },
        )
        out: list[list[RelatedPair]] = [[] for _ in range(depth)]
        for r in rows:
            level = r.pop("level")
            out[level - 1].append(r)  # type: ignore[arg-type]
        while out and not out[-1]:
            out.pop()
        return out

    def export_relationships(self) -> list[ExportedRelationship]:
        rows = self._run(
            "SELECT a.id AS a, b.id AS b, r.type, r.confidence, r.description, r.docs,"
            f" r.verified, r.source_kind, r.ext_id, r.extra FROM {_RELATED}"
            f" WHERE r.stack = %(st)s ORDER BY a.id {C}, b.id {C}, r.type {C}"
        )
        return [{**r, "docs": rel_docs(r["docs"])} for r in rows]  # type: ignore[typeddict-item]

    def relationships_among(
        self, ids: list[str], min_confidence: float
    ) -> list[ContextRelationship]:
        return self._run(  # type: ignore[return-value]
            "SELECT a.id AS from_id, a.name AS from_name, r.type, b.id AS to_id,"
            f" b.name AS to_name, r.confidence, r.evidence FROM {_RELATED}"
            " WHERE r.stack = %(st)s AND r.src = ANY(%(ids)s) AND r.dst = ANY(%(ids)s)"
            " AND r.confidence >= %(mc)s"
            f" ORDER BY r.confidence DESC, a.id {C}, b.id {C}, r.type {C}",
            {"ids": list(ids), "mc": min_confidence},
        )

    # -- what entities come from --------------------------------------------------------
    def source_docs(self, ids: list[str]) -> dict[str, SourceDoc]:
        rows = self._run(
            "SELECT id, title, path, source FROM docs WHERE stack = %(st)s AND id = ANY(%(ids)s)",
            {"ids": list(ids)},
        )
        return {r["id"]: r for r in rows}  # type: ignore[misc]

    def source_notes(self, ids: list[str]) -> dict[str, SourceNote]:
        rows = self._run(
            "SELECT id, path, text FROM notes WHERE stack = %(st)s AND id = ANY(%(ids)s)",
            {"ids": list(ids)},
        )
        return {r["id"]: r for r in rows}  # type: ignore[misc]

    def source_versions(self, ids: list[str]) -> list[SourceVersion]:
        return self._run(  # type: ignore[return-value]
            "SELECT id, sha256 AS sha, path, title FROM docs WHERE stack = %(st)s"
            f" AND id = ANY(%(ids)s) ORDER BY id {C}",
            {"ids": list(ids)},
        )

    # -- extractions --------------------------------------------------------------------
    def chunks_to_extract(self, doc_ids: list[str]) -> list[ExtractionInput]:
        return self._run(  # type: ignore[return-value]
            "SELECT id, doc_id AS owner, span_start AS base, text FROM chunks"
            f" WHERE stack = %(st)s AND doc_id = ANY(%(ids)s) ORDER BY id {C}",
            {"ids": list(doc_ids)},
        )

    def notes_to_extract(self, note_ids: list[str]) -> list[ExtractionInput]:
        return self._run(  # type: ignore[return-value]
            "SELECT id, id AS owner, 0::bigint AS base, text FROM notes"
            f" WHERE stack = %(st)s AND id = ANY(%(ids)s) ORDER BY id {C}",
            {"ids": list(note_ids)},
        )

    def delete_extractions(self, ids: list[str]) -> None:
        self._run(
            "DELETE FROM extractions WHERE stack = %(st)s AND id = ANY(%(ids)s)",
            {"ids": list(ids)},
        )

    def add_extractions(
        self,
        ids: list[str],
        owners: list[str],
        bases: list[int],
        keys: list[list[str]],
        aliases: list[list[str]],
        data: list[str],
    ) -> None:
        self._insert(
            "extractions",
            {"id": "text", "owner": "text", "base": "bigint", "keys": "list"}
            | {"aliases": "list", "data": "text"},
            {
                "id": ids,
                "owner": owners,
                "base": [int(b) for b in bases],
                "keys": keys,
                "aliases": aliases,
                "data": data,
            },
        )

    def has_other_extractions(self, ids: list[str]) -> bool:
        return bool(
            self._run(
                "SELECT 1 FROM extractions WHERE stack = %(st)s AND NOT id = ANY(%(ids)s) LIMIT 1",
                {"ids": list(ids)},
            )
        )

    def extraction_keys(self) -> list[ExtractionKeys]:
        return self._run(  # type: ignore[return-value]
            "SELECT keys, aliases FROM extractions WHERE stack = %(st)s"
        )

    def extraction_keys_of(self, owners: list[str]) -> list[ExtractionKeys]:
        return self._run(  # type: ignore[return-value]
            "SELECT keys, aliases FROM extractions WHERE stack = %(st)s AND owner = ANY(%(o)s)",
            {"o": list(owners)},
        )

    def delete_extractions_of(self, owners: list[str]) -> None:
        self._run(
            "DELETE FROM extractions WHERE stack = %(st)s AND owner = ANY(%(o)s)",
            {"o": list(owners)},
        )

    def extraction_index(self) -> list[ExtractionIndexed]:
        return self._run(  # type: ignore[return-value]
            "SELECT id, owner, base, keys, aliases FROM extractions WHERE stack = %(st)s"
        )

    def extraction_aliases(self) -> list[ExtractionIndexed]:
        return self._run(  # type: ignore[return-value]
            "SELECT id, owner, base, keys, aliases FROM extractions WHERE stack = %(st)s"
            " AND cardinality(aliases) > 0"
        )

    def extractions_with_keys(self, keys: list[str]) -> list[str]:
        if not keys:
            return []
        rows = self._run(
            "SELECT id FROM extractions WHERE stack = %(st)s AND keys && %(keys)s::text[]",
            {"keys": list(keys)},
        )
        return [r["id"] for r in rows]

    def extraction_data(self, ids: list[str]) -> dict[str, ExtractionData]:
        rows = self._run(
            "SELECT id, owner, base, data FROM extractions WHERE stack = %(st)s"
            " AND id = ANY(%(ids)s)",
            {"ids": list(ids)},
        )
        return {r["id"]: r for r in rows}  # type: ignore[misc]

    # -- consolidation's writer ---------------------------------------------------------
    def held_entities(
        self, ids: list[str]
    ) -> tuple[
        dict[str, ConsolidatedEntity],
        dict[tuple[str, str], float],
        dict[RelKey, StoredRelationship | None],
    ]:
        one = {"ids": list(ids)}
        ents: dict[str, ConsolidatedEntity] = {
            r["id"]: r  # type: ignore[misc]
            for r in self._run(
                f"SELECT {', '.join(ENT_FIELDS)} FROM entities WHERE stack = %(st)s"
                " AND id = ANY(%(ids)s)",
                one,
            )
        }
        ments = {
            (r["owner"], r["entity"]): r["confidence"]
            for r in self._run(
                "SELECT owner, entity, confidence FROM mentions WHERE stack = %(st)s"
                " AND entity = ANY(%(ids)s)",
                one,
            )
        }
        rels: dict[RelKey, StoredRelationship | None] = {}
        for r in self._run(
            "SELECT r.src AS a, r.dst AS b, r.type, r.ctid::text AS rid, "
            + ", ".join(f"r.{c}" for c in REL_FIELDS)
            + f" FROM {_RELATED} WHERE r.stack = %(st)s"
            " AND (r.src = ANY(%(ids)s) OR r.dst = ANY(%(ids)s))",
            one,
        ):
            key = (r["a"], r["b"], r["type"])
            rels[key] = None if key in rels else r  # type: ignore[assignment]
        return ents, ments, rels

    def delete_entities(self, ids: list[str]) -> None:
        if not ids:
            return
        one = {"ids": list(ids)}
        self._run("DELETE FROM mentions WHERE stack = %(st)s AND entity = ANY(%(ids)s)", one)
        self._run(
            "DELETE FROM relationships WHERE stack = %(st)s"
            " AND (src = ANY(%(ids)s) OR dst = ANY(%(ids)s))",
            one,
        )
        self._run("DELETE FROM entities WHERE stack = %(st)s AND id = ANY(%(ids)s)", one)

    def add_entities(self, ents: list[ConsolidatedEntity]) -> None:
        if ents:
            self._insert(
                "entities",
                _ENT_TYPES,
                {c: [e[c] for e in ents] for c in ENT_FIELDS},  # type: ignore[literal-required]
            )

    def update_entities(
        self, ents: list[ConsolidatedEntity], columns: Sequence[str] = ENT_FIELDS
    ) -> None:
        if not ents:
            return
        t = _ENT_TYPES
        cols = ["id", *(c for c in columns if c != "id")]
        sets = ", ".join(
            f"{c} = " + (_LIST.format(f"u.{c}") if t[c] == "list" else f"u.{c}")
            for c in cols
            if c != "id"
        )
        args = ", ".join(f"%({c})s::{'text' if t[c] == 'list' else t[c]}[]" for c in cols)
        self._run(
            f"UPDATE entities e SET {sets} FROM unnest({args}) AS u({', '.join(cols)})"
            " WHERE e.stack = %(st)s AND e.id = u.id",
            {
                c: [_json_list(e[c]) if t[c] == "list" else e[c] for e in ents]  # type: ignore[literal-required]
                for c in cols
            },
        )

    def existing_entities(self, ids: list[str]) -> set[str]:
        return set(
            self._ids(
                "SELECT id FROM entities WHERE stack = %(st)s AND id = ANY(%(ids)s)",
                {"ids": list(ids)},
            )
        )

    def delete_mentions(self, by_entity: Mapping[str, list[str]]) -> None:
        pairs = [(e, x) for e, xs in sorted(by_entity.items()) for x in xs]
        if not pairs:
            return
        self._run(
            "DELETE FROM mentions m USING unnest(%(e)s::text[], %(x)s::text[]) AS u(e, x)"
            " WHERE m.stack = %(st)s AND m.entity = u.e AND m.owner = u.x",
            {"e": [e for e, _ in pairs], "x": [x for _, x in pairs]},
        )

    def add_mentions(
        self,
        sources: list[str],
        entities: list[str],
        confidences: list[float],
        *,
        notes: bool,
        steps: Steps,
    ) -> None:
        kind = "note" if notes else "chunk"
        for part in steps.pieces(len(sources)):
            owners = sources[part]
            self._insert(
                "mentions",
                {"owner": "text", "owner_kind": "text", "entity": "text"}
                | {"confidence": "double precision"},
                {
                    "owner": owners,
                    "owner_kind": [kind] * len(owners),
                    "entity": entities[part],
                    "confidence": [float(c) for c in confidences[part]],
                },
            )

    def delete_relationships(self, keys: list[RelKey]) -> None:
        if not keys:
            return
        self._run(
            "DELETE FROM relationships r USING unnest(%(a)s::text[], %(b)s::text[],"
            " %(t)s::text[]) AS u(a, b, t)"
            " WHERE r.stack = %(st)s AND r.src = u.a AND r.dst = u.b AND r.type = u.t",
            {"a": [k[0] for k in keys], "b": [k[1] for k in keys], "t": [k[2] for k in keys]},
        )

    def add_relationships(
        self, keys: list[RelKey], props: Mapping[RelKey, RelationshipProps], steps: Steps
    ) -> None:
        if not keys:
            return
        cols: dict[str, list[Any]] = {c: [] for c in ("src", "dst", "type", *REL_FIELDS)}
        for k in keys:
            v = props[k]
            cols["src"].append(k[0])
            cols["dst"].append(k[1])
            cols["type"].append(k[2])
            for col in REL_FIELDS:
                cols[col].append(v[col])  # type: ignore[literal-required]
        cols["docs"] = [rel_docs_text(d) for d in cols["docs"]]
        cols["confidence"] = [float(c) for c in cols["confidence"]]
        for part in steps.pieces(len(keys)):
            self._insert("relationships", _REL_TYPES, {c: v[part] for c, v in cols.items()})
