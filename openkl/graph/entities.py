"""The entity graph's queries: entities, their mentions and relationships.

`EntityQueries` holds them for Kùzu; `EntityStore` is what a backend of the entity graph
provides, so the readers and consolidation do not depend on Cypher.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

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
from .entity_writes import ENT_FIELDS, EntityWrites, RelKey, Steps, rel_docs

# the columns of an entity, as the readers of entities return them
ENTITY_COLS = (
    "e.id AS id, e.name AS name, e.type AS type, e.description AS description,"
    " e.confidence AS confidence, e.aliases AS aliases, e.docs AS docs,"
    " e.verified AS verified, e.source_kind AS source_kind, e.ext_id AS ext_id,"
    " e.extra AS extra"
)


class EntityQueries(EntityWrites):
    """Named queries over Entity, MENTIONS and RELATED, mixed into `Graph`."""

    # -- entities -----------------------------------------------------------------
    def entities(
        self, *, min_confidence: float, type: str | None = None, doc: str | None = None
    ) -> list[CountedEntity]:
        """Entities at or above a confidence, of a type, named by a document or note, with
        their mention counts: most confident first (ties by name, then id)."""
        where = ["e.confidence >= $mc"]
        params: dict[str, Any] = {"mc": float(min_confidence)}
        if type:
            where.append("lower(e.type) = lower($t)")
            params["t"] = type
        if doc:
            where.append("list_contains(e.docs, $d)")
            params["d"] = doc
        return self.query(  # type: ignore[return-value]
            f"MATCH (e:Entity) WHERE {' AND '.join(where)} RETURN {ENTITY_COLS},"
            " COUNT {MATCH (:Chunk)-[:MENTIONS]->(e)} + COUNT {MATCH (:MemoryNote)"
            "-[:MENTIONS]->(e)} AS mentions"
            " ORDER BY e.confidence DESC, e.name, e.id",
            params,
        )

    def entity(self, eid: str) -> Entity | None:
        """The entity with this id."""
        rows = self.query(f"MATCH (e:Entity {{id: $id}}) RETURN {ENTITY_COLS}", {"id": eid})
        return rows[0] if rows else None  # type: ignore[return-value]

    def entity_either(self, eid: str, raw: str) -> Entity | None:
        """The entity whose id is one of two (a name's id, or the name taken as an id)."""
        rows = self.query(
            f"MATCH (e:Entity) WHERE e.id = $id OR e.id = $raw RETURN {ENTITY_COLS}",
            {"id": eid, "raw": raw},
        )
        return rows[0] if rows else None  # type: ignore[return-value]

    def entity_aliases(self) -> list[tuple[str, list[str]]]:
        """(id, aliases) of the entities that have aliases, most confident first."""
        return [
            (r["id"], r["a"])
            for r in self.query(
                "MATCH (e:Entity) WHERE size(e.aliases) > 0 RETURN e.id AS id, e.aliases AS a"
                " ORDER BY e.confidence DESC, e.id"
            )
        ]

    def entity_names_near(self, part: str) -> list[str]:
        """The names of the five most confident entities whose id contains `part`."""
        return [
            r["name"]
            for r in self.query(
                "MATCH (e:Entity) WHERE e.id CONTAINS $p RETURN e.name AS name"
                " ORDER BY e.confidence DESC, e.name LIMIT 5",
                {"p": part},
            )
        ]

    def entity_ids(self) -> list[str]:
        """The id of every entity."""
        return [r["id"] for r in self.query("MATCH (e:Entity) RETURN e.id AS id")]

    def canonical_entity_ids(self) -> list[str]:
        """The ids of the entities a canonical file contributes to."""
        return [r["id"] for r in self.query("MATCH (e:Entity) WHERE e.canonical RETURN e.id AS id")]

    def export_entities(
        self,
        *,
        min_confidence: float | None = None,
        type: str | None = None,
        verified_only: bool = False,
    ) -> list[Entity]:
        """Entities for an export (any that pass the given filters), most confident first
        (ties by id)."""
        where: list[str] = []
        params: dict[str, Any] = {}
        if min_confidence is not None:
            where.append("e.confidence >= $mc")
            params["mc"] = float(min_confidence)
        if type:
            where.append("lower(e.type) = lower($t)")
            params["t"] = type
        if verified_only:
            where.append("e.verified")
        clause = ("WHERE " + " AND ".join(where)) if where else ""
        return self.query(  # type: ignore[return-value]
            f"MATCH (e:Entity) {clause} RETURN {ENTITY_COLS} ORDER BY e.confidence DESC, e.id",
            params,
        )

    # -- mentions -------------------------------------------------------------------
    def chunk_mentions(self, eid: str, limit: int) -> list[Mention]:
        """The chunks that mention an entity, most confident first (ties by chunk id)."""
        return self._mentions_of("Chunk", eid, limit)

    def note_mentions(self, eid: str, limit: int) -> list[Mention]:
        """The memory notes that mention an entity, most confident first (ties by note id)."""
        return self._mentions_of("MemoryNote", eid, limit)

    def _mentions_of(self, label: str, eid: str, limit: int) -> list[Mention]:
        return [
            {"id": r["id"], "confidence": r["c"]}
            for r in self.query(
                f"MATCH (x:{label})-[m:MENTIONS]->(e:Entity {{id: $id}}) RETURN x.id AS id,"
                " m.confidence AS c ORDER BY m.confidence DESC, x.id LIMIT $k",
                {"id": eid, "k": limit},
            )
        ]

    def mentions_of_many(self, label: str, ids: list[str], limit: int) -> dict[str, list[Mention]]:
        """For each of these entities, what `chunk_mentions` (label "Chunk") or
        `note_mentions` ("MemoryNote") returns for it, in one query."""
        out: dict[str, list[Mention]] = {eid: [] for eid in ids}
        # UNWIND and a key lookup: an IN list is compared with every row of a large table
        rows = self.query(
            f"UNWIND $ids AS i MATCH (x:{label})-[m:MENTIONS]->(e:Entity {{id: i}})"
            " RETURN e.id AS e, x.id AS id, m.confidence AS c",
            {"ids": ids},
        )
        for r in sorted(rows, key=lambda r: (r["e"], -r["c"], r["id"])):
            got = out[r["e"]]
            if len(got) < limit:
                got.append({"id": r["id"], "confidence": r["c"]})
        return out

    # -- relationships --------------------------------------------------------------
    def relationships_of_many(
        self, ids: list[str], min_confidence: float
    ) -> dict[str, list[Relationship]]:
        """For each of these entities, what `relationships_of` returns for it: two queries
        (out of and into them), in the order `relationships_of` gives."""
        out: dict[str, list[Relationship]] = {eid: [] for eid in ids}
        cols = (
            " AND r.confidence >= $mc RETURN a.id AS from_id, a.name AS from_name, b.id AS to_id,"
            " b.name AS to_name, r.type AS type, r.confidence AS confidence, r.evidence AS evidence,"
            " r.docs AS docs, r.verified AS verified, r.source_kind AS source_kind,"
            " r.description AS description"
        )
        seen: dict[tuple[str, str, str], dict[str, Any]] = {}
        for pattern in (
            "UNWIND $ids AS i MATCH (a:Entity {id: i})-[r:RELATED]->(b:Entity) WHERE true",
            "UNWIND $ids AS i MATCH (a:Entity)-[r:RELATED]->(b:Entity {id: i}) WHERE true",
        ):
            for r in self.query(pattern + cols, {"ids": ids, "mc": float(min_confidence)}):
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

    def relationships_of(self, eid: str, min_confidence: float) -> list[Relationship]:
        """The relationships from or to an entity at or above a confidence: most confident
        first (ties by type, then the ends' ids)."""
        rows = self.query(
            "MATCH (a:Entity)-[r:RELATED]->(b:Entity) WHERE (a.id = $id OR b.id = $id)"
            " AND r.confidence >= $mc RETURN a.id AS from_id, a.name AS from_name, b.id AS to_id,"
            " b.name AS to_name, r.type AS type, r.confidence AS confidence, r.evidence AS evidence,"
            " r.docs AS docs, r.verified AS verified, r.source_kind AS source_kind,"
            " r.description AS description ORDER BY r.confidence DESC, r.type, a.id, b.id",
            {"id": eid, "mc": float(min_confidence)},
        )
        return [{**r, "docs": rel_docs(r["docs"])} for r in rows]  # type: ignore[typeddict-item]

    def relationship_types(self) -> list[str]:
        """Every relationship type, the most common first (ties by name)."""
        return [
            r["t"]
            for r in self.query(
                "MATCH ()-[r:RELATED]->() RETURN r.type AS t, count(*) AS n ORDER BY n DESC, t"
            )
        ]

    def relationships_touching(self, ids: list[str], min_confidence: float) -> list[RelatedPair]:
        """The relationships from or to any of these entities, where it and both its ends
        are at or above a confidence: most confident first (ties by the ends' ids, type)."""
        return self.query(  # type: ignore[return-value]
            "MATCH (a:Entity)-[r:RELATED]->(b:Entity) WHERE (a.id IN $f OR b.id IN $f)"
            " AND r.confidence >= $mc AND a.confidence >= $mc AND b.confidence >= $mc"
            " RETURN a.id AS a, a.name AS an, b.id AS b, b.name AS bn, r.type AS type,"
            " r.confidence AS confidence, r.evidence AS evidence"
            " ORDER BY r.confidence DESC, a.id, b.id, r.type",
            {"f": ids, "mc": float(min_confidence)},
        )

    def relationships_walk(
        self,
        start: str,
        depth: int,
        min_confidence: float,
        type: str | None = None,
        limit: int | None = None,
    ) -> list[list[RelatedPair]]:
        """For each level 1..depth of a breadth-first walk from `start` over relationships
        (of `type` only, when given), what `relationships_touching` returns for the entities
        first reached one level before. It ends at the first level that reaches nothing, or
        once `limit` entities besides `start` are reached."""
        out: list[list[RelatedPair]] = []
        seen, frontier = {start}, [start]
        for _ in range(depth):
            if not frontier or (limit is not None and len(seen) - 1 >= limit):
                break
            rows = [
                r
                for r in self.relationships_touching(frontier, min_confidence)
                if not type or r["type"] == type
            ]
            out.append(rows)
            here = set(frontier)
            frontier = []
            for r in rows:
                for a, b in ((r["a"], r["b"]), (r["b"], r["a"])):
                    if a in here and b not in seen:
                        seen.add(b)
                        frontier.append(b)
        while out and not out[-1]:
            out.pop()
        return out

    def export_relationships(self) -> list[ExportedRelationship]:
        """Every relationship, by the ends' ids and type."""
        rows = self.query(
            "MATCH (a:Entity)-[r:RELATED]->(b:Entity) RETURN a.id AS a, b.id AS b,"
            " r.type AS type, r.confidence AS confidence, r.description AS description,"
            " r.docs AS docs, r.verified AS verified, r.source_kind AS source_kind,"
            " r.ext_id AS ext_id, r.extra AS extra ORDER BY a.id, b.id, r.type"
        )
        return [{**r, "docs": rel_docs(r["docs"])} for r in rows]  # type: ignore[typeddict-item]

    # -- what a question touches ----------------------------------------------------
    def mentions_in(self, ids: list[str], min_confidence: float) -> list[MentionedIn]:
        """The entities at or above a confidence that these chunks and notes mention:
        `x` (chunk or note), `e` (entity), `c` (the mention's confidence), chunks first."""
        rows: list[MentionedIn] = []
        for table in ("Chunk", "MemoryNote"):  # one label per query: mixed-label reads are unsafe
            rows += self.query(  # type: ignore[arg-type]
                f"MATCH (x:{table})-[m:MENTIONS]->(e:Entity) WHERE x.id IN $ids AND"
                " e.confidence >= $mc RETURN x.id AS x, e.id AS e, m.confidence AS c"
                " ORDER BY x.id, e.id",
                {"ids": ids, "mc": min_confidence},
            )
        return rows

    def entities_named_by(self, term: str, min_confidence: float) -> list[str]:
        """The ids of the entities at or above a confidence that a query term names: the
        id itself, one of its hyphenated parts, or an alias equal to the term upper-cased."""
        t = term
        return [
            r["id"]
            for r in self.query(
                "MATCH (e:Entity) WHERE e.confidence >= $mc AND (e.id = $t OR"
                " e.id STARTS WITH $p OR e.id ENDS WITH $s OR e.id CONTAINS $c OR"
                " list_contains(e.aliases, $raw)) RETURN e.id AS id",
                {
                    "mc": min_confidence,
                    "t": t,
                    "p": t + "-",
                    "s": "-" + t,
                    "c": "-" + t + "-",
                    "raw": t.upper(),
                },
            )
        ]

    def entities_by_id(self, ids: list[str]) -> dict[str, Entity]:
        """The entities with these ids, by id."""
        return {
            r["id"]: r  # type: ignore[misc]
            for r in self.query(
                f"MATCH (e:Entity) WHERE e.id IN $ids RETURN {ENTITY_COLS}", {"ids": ids}
            )
        }

    def relationships_among(
        self, ids: list[str], min_confidence: float
    ) -> list[ContextRelationship]:
        """The relationships at or above a confidence whose both ends are among these
        entities: most confident first (ties by the ends' ids, type)."""
        return self.query(  # type: ignore[return-value]
            "MATCH (a:Entity)-[r:RELATED]->(b:Entity) WHERE a.id IN $ids AND b.id IN $ids"
            " AND r.confidence >= $mc RETURN a.id AS from_id, a.name AS from_name, r.type AS type,"
            " b.id AS to_id, b.name AS to_name, r.confidence AS confidence, r.evidence AS evidence"
            " ORDER BY r.confidence DESC, a.id, b.id, r.type",
            {"ids": ids, "mc": min_confidence},
        )

    def all_entity_aliases(self) -> list[tuple[str, list[str]]]:
        """(id, aliases) of every entity, aliases or not."""
        return [
            (r["id"], r["a"] or [])
            for r in self.query("MATCH (e:Entity) RETURN e.id AS id, e.aliases AS a")
        ]

    # -- what entities come from -----------------------------------------------------
    def source_docs(self, ids: list[str]) -> dict[str, SourceDoc]:
        """Id, title, path and source of the documents among these ids, by id."""
        return {
            r["id"]: r  # type: ignore[misc]
            for r in self.query(
                "MATCH (d:Doc) WHERE d.id IN $ids RETURN d.id AS id, d.title AS title,"
                " d.path AS path, d.source AS source",
                {"ids": ids},
            )
        }

    def source_notes(self, ids: list[str]) -> dict[str, SourceNote]:
        """Id, path and text of the memory notes among these ids, by id."""
        return {
            r["id"]: r  # type: ignore[misc]
            for r in self.query(
                "MATCH (m:MemoryNote) WHERE m.id IN $ids RETURN m.id AS id, m.path AS path,"
                " m.text AS text",
                {"ids": ids},
            )
        }

    def source_versions(self, ids: list[str]) -> list[SourceVersion]:
        """Id, sha256 (as `sha`), path and title of the documents among these ids, by id."""
        return self.query(  # type: ignore[return-value]
            "MATCH (d:Doc) WHERE d.id IN $ids RETURN d.id AS id, d.sha256 AS sha,"
            " d.path AS path, d.title AS title ORDER BY d.id",
            {"ids": ids},
        )


class EntityStore(Protocol):
    """What a backend of the entity graph provides: the readers of entities, mentions and
    relationships, and the writes of extraction and consolidation."""

    # -- entities
    def entities(
        self, *, min_confidence: float, type: str | None = None, doc: str | None = None
    ) -> list[CountedEntity]:
        """Entities at or above a confidence (of a type, named by a document), counted."""
        ...

    def entity(self, eid: str) -> Entity | None:
        """The entity with this id."""
        ...

    def entity_either(self, eid: str, raw: str) -> Entity | None:
        """The entity whose id is one of two."""
        ...

    def entity_aliases(self) -> list[tuple[str, list[str]]]:
        """(id, aliases) of the entities that have aliases, most confident first."""
        ...

    def entity_names_near(self, part: str) -> list[str]:
        """The names of the five most confident entities whose id contains `part`."""
        ...

    def entity_ids(self) -> list[str]:
        """The id of every entity."""
        ...

    def canonical_entity_ids(self) -> list[str]:
        """The ids of the entities a canonical file contributes to."""
        ...

    def export_entities(
        self,
        *,
        min_confidence: float | None = None,
        type: str | None = None,
        verified_only: bool = False,
    ) -> list[Entity]:
        """Entities for an export, most confident first."""
        ...

    # -- mentions and relationships
    def mentions_of_many(self, label: str, ids: list[str], limit: int) -> dict[str, list[Mention]]:
        """Chunk ("Chunk") or note ("MemoryNote") mentions of many entities, by entity."""
        ...

    def relationships_of(self, eid: str, min_confidence: float) -> list[Relationship]:
        """The relationships from or to an entity, most confident first."""
        ...

    def relationships_of_many(
        self, ids: list[str], min_confidence: float
    ) -> dict[str, list[Relationship]]:
        """`relationships_of` for many entities at once, by entity."""
        ...

    def relationship_types(self) -> list[str]:
        """Every relationship type, the most common first."""
        ...

    def relationships_touching(self, ids: list[str], min_confidence: float) -> list[RelatedPair]:
        """The relationships from or to any of these entities, most confident first."""
        ...

    def relationships_walk(
        self,
        start: str,
        depth: int,
        min_confidence: float,
        type: str | None = None,
        limit: int | None = None,
    ) -> list[list[RelatedPair]]:
        """Per level of a breadth-first walk from `start`, the relationships touching the
        level before (`relationships_touching`), in one call."""
        ...

    def export_relationships(self) -> list[ExportedRelationship]:
        """Every relationship, by the ends' ids and type."""
        ...

    # -- what a question touches
    def mentions_in(self, ids: list[str], min_confidence: float) -> list[MentionedIn]:
        """The entities these chunks and notes mention (`x`, `e`, `c`), chunks first."""
        ...

    def entities_named_by(self, term: str, min_confidence: float) -> list[str]:
        """The ids of the entities a query term names (id, id part or alias)."""
        ...

    def entities_by_id(self, ids: list[str]) -> dict[str, Entity]:
        """The entities with these ids, by id."""
        ...

    def relationships_among(
        self, ids: list[str], min_confidence: float
    ) -> list[ContextRelationship]:
        """The relationships whose both ends are among these entities, most confident first."""
        ...

    def all_entity_aliases(self) -> list[tuple[str, list[str]]]:
        """(id, aliases) of every entity."""
        ...

    # -- what entities come from
    def source_docs(self, ids: list[str]) -> dict[str, SourceDoc]:
        """Title, path and source of the documents among these ids."""
        ...

    def source_notes(self, ids: list[str]) -> dict[str, SourceNote]:
        """Path and text of the memory notes among these ids."""
        ...

    def source_versions(self, ids: list[str]) -> list[SourceVersion]:
        """sha256, path and title of the documents among these ids."""
        ...

    # -- extractions
    def chunks_to_extract(self, doc_ids: list[str]) -> list[ExtractionInput]:
        """The chunks of documents, with their text."""
        ...

    def notes_to_extract(self, note_ids: list[str]) -> list[ExtractionInput]:
        """Memory notes, with their text."""
        ...

    def delete_extractions(self, ids: list[str]) -> None:
        """Drop the extractions of chunks and notes."""
        ...

    def add_extractions(
        self,
        ids: list[str],
        owners: list[str],
        bases: list[int],
        keys: list[list[str]],
        aliases: list[list[str]],
        data: list[str],
    ) -> None:
        """Store extractions in bulk."""
        ...

    def has_other_extractions(self, ids: list[str]) -> bool:
        """Whether any extraction is held besides those of these ids."""
        ...

    def extraction_keys(self) -> list[ExtractionKeys]:
        """The entity keys and aliases of every extraction."""
        ...

    def extraction_keys_of(self, owners: list[str]) -> list[ExtractionKeys]:
        """The entity keys and aliases of the extractions of documents and notes."""
        ...

    def delete_extractions_of(self, owners: list[str]) -> None:
        """Drop the extractions of documents and notes."""
        ...

    def extraction_index(self) -> list[ExtractionIndexed]:
        """Every extraction's id, owner, base, keys and aliases."""
        ...

    def extraction_aliases(self) -> list[ExtractionIndexed]:
        """`extraction_index`, only the extractions that name aliases."""
        ...

    def extractions_with_keys(self, keys: list[str]) -> list[str]:
        """The ids of the extractions that name any of these keys."""
        ...

    def extraction_data(self, ids: list[str]) -> dict[str, ExtractionData]:
        """The stored results of extractions, by id."""
        ...

    # -- consolidation's writer
    def held_entities(
        self, ids: list[str]
    ) -> tuple[
        dict[str, ConsolidatedEntity],
        dict[tuple[str, str], float],
        dict[RelKey, StoredRelationship | None],
    ]:
        """What is held for entity ids: entities, mentions and relationships."""
        ...

    def delete_entities(self, ids: list[str]) -> None:
        """Delete entities with their mentions and relationships."""
        ...

    def add_entities(self, ents: list[ConsolidatedEntity]) -> None:
        """Create entities in bulk."""
        ...

    def update_entities(
        self, ents: list[ConsolidatedEntity], columns: Sequence[str] = ENT_FIELDS
    ) -> None:
        """Set `columns` (by default every one) of existing entities."""
        ...

    def existing_entities(self, ids: list[str]) -> set[str]:
        """Those of these entity ids that are held."""
        ...

    def delete_mentions(self, by_entity: Mapping[str, list[str]]) -> None:
        """Delete mentions: entity id → chunk and note ids."""
        ...

    def add_mentions(
        self,
        sources: list[str],
        entities: list[str],
        confidences: list[float],
        *,
        notes: bool,
        steps: Steps,
    ) -> None:
        """Create mentions in bulk, committing in the pieces `steps` cuts."""
        ...

    def delete_relationships(self, keys: list[RelKey]) -> None:
        """Delete relationships, by (from entity id, to entity id, type)."""
        ...

    def add_relationships(
        self, keys: list[RelKey], props: Mapping[RelKey, RelationshipProps], steps: Steps
    ) -> None:
        """Create relationships in bulk, committing in the pieces `steps` cuts."""
        ...

    def commit_and_continue(self) -> None:
        """Commit what the open transaction holds so far and start the next one."""
        ...
