"""Writing the entity graph: extractions, and the bulk steps of consolidation's diff writer
(entities, mentions and relationships), with how `RELATED.docs` is stored."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..records import (
    ConsolidatedEntity,
    ExtractionData,
    ExtractionIndexed,
    ExtractionInput,
    ExtractionKeys,
    RelationshipProps,
    StoredRelationship,
)


def rel_docs_text(ids: list[str]) -> str:
    """`RELATED.docs` as stored: a JSON list of document and note ids (the ids need no
    escaping, so most skip the encoder: a large consolidation writes 750k of them)."""
    joined = '", "'.join(ids)
    if '"' in joined or "\\" in joined or not joined.isprintable():
        return json.dumps(ids)
    return f'["{joined}"]' if ids else "[]"


def rel_docs(stored: str | None) -> list[str]:
    """The document and note ids of a relationship, from its stored `docs`."""
    return list(json.loads(stored)) if stored else []


# the columns of an entity and of a relationship as consolidation writes them
ENT_FIELDS = (
    "id",
    "name",
    "type",
    "description",
    "confidence",
    "aliases",
    "docs",
    "verified",
    "source_kind",
    "canonical",
    "ext_id",
    "extra",
)
REL_FIELDS = (
    "confidence",
    "evidence",
    "docs",
    "verified",
    "source_kind",
    "description",
    "ext_id",
    "extra",
)
_IDS_PER_QUERY = 5000
_IDS_ONE_BY_ONE = 100
_IDS_SCAN = 20_000  # more entity ids than this: scan the tables once instead
ROWS_PER_STEP = 1_200_000  # rows of one commit in a stepwise consolidation (SciFact: 1.16M)
# ... when the tables already hold rows: Kùzu then keeps what a transaction writes in its
# buffer pool until the commit (about 200 bytes a relationship created or deleted), where
# a load into empty tables goes straight to disk
ROWS_PER_STEP_HELD = 400_000

RelKey = tuple[str, str, str]  # (from entity id, to entity id, type)


class Steps:
    """Cuts a stepwise consolidation's rows into commits of at most `limit` rows.

    Each commit costs a checkpoint, which rewrites the tables written since the last one,
    so pieces are as large as a transaction safely holds.
    """

    def __init__(
        self, step: Callable[[], None] | None, held: int = 0, limit: int = ROWS_PER_STEP
    ) -> None:
        self.step, self.held = step, held  # rows written since the last commit
        self.limit = limit

    def pieces(self, n: int) -> Iterator[slice]:
        if self.step is None:
            yield slice(0, n)
            return
        i = 0
        while i < n:
            if self.held >= self.limit:
                self.step()
                self.held = 0
            take = min(n - i, self.limit - self.held)
            yield slice(i, i + take)
            self.held += take
            i += take

    def wrote(self, n: int) -> None:
        """Count rows written outside `pieces`."""
        self.held += n

    def commit(self) -> None:
        """In a stepwise consolidation, commit what is held now: the entities, the mentions
        and the relationships each go in commits of their own, so a commit's checkpoint
        rewrites one of those tables, and holds no more than one table's changes."""
        if self.step is not None and self.held:
            self.step()
            self.held = 0


class EntityWrites:
    """Named writes (and the reads the writer compares with) over Extraction, Entity,
    MENTIONS and RELATED, mixed into `Graph` through `EntityQueries`."""

    if TYPE_CHECKING:
        # provided by `Graph`
        def query(
            self, cypher: str, params: dict[str, Any] | None = None
        ) -> list[dict[str, Any]]: ...

        def copy_rows(
            self,
            table: str,
            rows: dict[str, Sequence[Any]],
            types: dict[str, Any] | None = None,
            rel_from_to: tuple[str, str] | None = None,
        ) -> None: ...

        def update_rows(
            self, table: str, rows: dict[str, Sequence[Any]], types: dict[str, Any] | None = None
        ) -> None: ...

        def columns(
            self, cypher: str, params: dict[str, Any] | None = None
        ) -> dict[str, list[Any]]: ...

        def load_rows(
            self, cypher: str, rows: dict[str, Sequence[Any]], types: dict[str, Any] | None = None
        ) -> None: ...

    # -- extractions ---------------------------------------------------------------
    def chunks_to_extract(self, doc_ids: list[str]) -> list[ExtractionInput]:
        """The chunks of documents, by chunk id, with their text."""
        return self.query(  # type: ignore[return-value]
            "MATCH (c:Chunk) WHERE c.doc_id IN $ids RETURN c.id AS id,"
            " c.doc_id AS owner, c.span_start AS base, c.text AS text ORDER BY c.id",
            {"ids": list(doc_ids)},
        )

    def notes_to_extract(self, note_ids: list[str]) -> list[ExtractionInput]:
        """Memory notes, by id, with their text."""
        return self.query(  # type: ignore[return-value]
            "MATCH (m:MemoryNote) WHERE m.id IN $ids RETURN m.id AS id,"
            " m.id AS owner, 0 AS base, m.text AS text ORDER BY m.id",
            {"ids": list(note_ids)},
        )

    def delete_extractions(self, ids: list[str]) -> None:
        """Drop the extractions of chunks and notes, by their ids."""
        self.query("MATCH (x:Extraction) WHERE x.id IN $ids DELETE x", {"ids": ids})

    def add_extractions(
        self,
        ids: list[str],
        owners: list[str],
        bases: list[int],
        keys: list[list[str]],
        aliases: list[list[str]],
        data: list[str],
    ) -> None:
        """Store extractions in bulk, one per chunk or note (columns of equal length)."""
        import pyarrow as pa

        self.copy_rows(
            "Extraction",
            {
                "id": ids,
                "owner": owners,
                "base": bases,
                "keys": keys,
                "aliases": aliases,
                "data": data,
            },
            types={
                "base": pa.int64(),
                "keys": pa.list_(pa.string()),
                "aliases": pa.list_(pa.string()),
            },
        )

    def has_other_extractions(self, ids: list[str]) -> bool:
        """Whether any extraction is held besides those of these chunk and note ids."""
        return bool(
            self.query(
                "MATCH (x:Extraction) WHERE NOT x.id IN $ids RETURN x.id LIMIT 1", {"ids": ids}
            )
        )

    def extraction_keys(self) -> list[ExtractionKeys]:
        """The entity keys and aliases of every extraction."""
        return self.query(  # type: ignore[return-value]
            "MATCH (x:Extraction) RETURN x.keys AS keys, x.aliases AS aliases"
        )

    def extraction_keys_of(self, owners: list[str]) -> list[ExtractionKeys]:
        """The entity keys and aliases of the extractions of documents and notes."""
        return self.query(  # type: ignore[return-value]
            "MATCH (x:Extraction) WHERE x.owner IN $o RETURN x.keys AS keys, x.aliases AS aliases",
            {"o": owners},
        )

    def delete_extractions_of(self, owners: list[str]) -> None:
        """Drop the extractions of documents and notes."""
        self.query("MATCH (x:Extraction) WHERE x.owner IN $o DELETE x", {"o": owners})

    def extraction_index(self) -> list[ExtractionIndexed]:
        """Every extraction's id, owner, base, keys and aliases (not its data)."""
        cols = self.columns(
            "MATCH (x:Extraction) RETURN x.id AS id, x.owner AS owner, x.base AS base,"
            " x.keys AS keys, x.aliases AS aliases"
        )
        return [
            {"id": x, "owner": o, "base": b, "keys": k, "aliases": a}
            for x, o, b, k, a in zip(
                cols["id"], cols["owner"], cols["base"], cols["keys"], cols["aliases"], strict=True
            )
        ]

    def extraction_aliases(self) -> list[ExtractionIndexed]:
        """`extraction_index`, only the extractions that name aliases."""
        return self.query(  # type: ignore[return-value]
            "MATCH (x:Extraction) WHERE size(x.aliases) > 0 RETURN x.id AS id,"
            " x.owner AS owner, x.base AS base, x.keys AS keys, x.aliases AS aliases"
        )

    def extractions_with_keys(self, keys: list[str]) -> list[str]:
        """The ids of the extractions that name any of these keys, in storage order."""
        if not keys:
            return []
        rows = self.query(
            "MATCH (x:Extraction) UNWIND x.keys AS k WITH x, k WHERE list_contains($keys, k)"
            " RETURN DISTINCT x.id AS id, offset(ID(x)) AS at",
            {"keys": keys},
        )
        return [r["id"] for r in sorted(rows, key=lambda r: r["at"])]

    def extraction_data(self, ids: list[str]) -> dict[str, ExtractionData]:
        """The stored results of extractions, by id."""
        data: dict[str, ExtractionData] = {}
        for i in range(0, len(ids), 2000):
            cols = self.columns(
                "MATCH (x:Extraction) WHERE x.id IN $ids RETURN x.id AS id,"
                " x.owner AS owner, x.base AS base, x.data AS data",
                {"ids": ids[i : i + 2000]},
            )
            for x, owner, base, d in zip(
                cols["id"], cols["owner"], cols["base"], cols["data"], strict=True
            ):
                data[x] = {"id": x, "owner": owner, "base": base, "data": d}
        return data

    # -- the diff writer's steps ------------------------------------------------------
    def held_entities(
        self, ids: list[str]
    ) -> tuple[
        dict[str, ConsolidatedEntity],
        dict[tuple[str, str], float],
        dict[RelKey, StoredRelationship | None],
    ]:
        """What the graph holds now for entity ids: entities, mentions ((chunk or note id,
        entity id) → confidence) and relationships (a relationship held twice maps to None,
        so it is written anew)."""
        ents: dict[str, ConsolidatedEntity] = {}
        ments: dict[tuple[str, str], float] = {}
        rels: dict[RelKey, StoredRelationship | None] = {}
        seen: set[str] = set()
        ret_e = "RETURN " + ", ".join(f"e.{c} AS {c}" for c in ENT_FIELDS)
        ret_m = "RETURN x.id AS x, e.id AS e, m.confidence AS c"
        ret_r = "RETURN a.id AS a, b.id AS b, r.type AS type, ID(r) AS rid, " + ", ".join(
            f"r.{c} AS {c}" for c in REL_FIELDS
        )
        if len(ids) > _IDS_SCAN:
            # most of the graph (a large load): one scan of each table, each edge once
            want = set(ids)
            cols = self.columns(f"MATCH (e:Entity) {ret_e}")
            for i, e in enumerate(cols["id"]):
                if e in want:
                    ents[e] = {c: cols[c][i] for c in ENT_FIELDS}  # type: ignore[assignment]
            cols = self.columns(f"MATCH (x)-[m:MENTIONS]->(e:Entity) {ret_m}")
            for x, e, c in zip(cols["x"], cols["e"], cols["c"], strict=True):
                if e in want:
                    ments[(x, e)] = c
            ret_r = ret_r.replace(" ID(r) AS rid,", "")
            cols = self.columns(f"MATCH (a:Entity)-[r:RELATED]->(b:Entity) {ret_r}")
            for i, (a, b) in enumerate(zip(cols["a"], cols["b"], strict=True)):
                if a in want or b in want:
                    key = (a, b, cols["type"][i])
                    row = {c: cols[c][i] for c in ("a", "b", "type", *REL_FIELDS)} | {"rid": None}
                    rels[key] = None if key in rels else row  # type: ignore[assignment]
            return ents, ments, rels
        # Kùzu follows the edges of one entity found by its key quickly, while a pattern over
        # many keys at once scans the whole table: a few keys are asked one by one
        parts: list[dict[str, Any]]
        if len(ids) <= _IDS_ONE_BY_ONE:
            head, one = "", "{id: $i}"
            parts = [{"i": i} for i in ids]
        else:
            head, one = "UNWIND $ids AS i ", "{id: i}"
            parts = [
                {"ids": ids[k : k + _IDS_PER_QUERY]} for k in range(0, len(ids), _IDS_PER_QUERY)
            ]
        for params in parts:
            for r in self.query(f"{head}MATCH (e:Entity {one}) {ret_e}", params):
                ents[r["id"]] = r  # type: ignore[assignment]
            for r in self.query(f"{head}MATCH (x)-[m:MENTIONS]->(e:Entity {one}) {ret_m}", params):
                ments[(r["x"], r["e"])] = r["c"]
            for pattern in (
                f"(a:Entity {one})-[r:RELATED]->(b:Entity)",
                f"(a:Entity)-[r:RELATED]->(b:Entity {one})",
            ):
                for r in self.query(f"{head}MATCH {pattern} {ret_r}", params):
                    rid = str(r["rid"])
                    if rid in seen:  # both ends are among the ids
                        continue
                    seen.add(rid)
                    key = (r["a"], r["b"], r["type"])
                    rels[key] = None if key in rels else r  # type: ignore[assignment]
        return ents, ments, rels

    def delete_entities(self, ids: list[str]) -> None:
        """Delete entities, by id, with their mentions and relationships."""
        for i in range(0, len(ids), _IDS_PER_QUERY):
            self.query(
                "UNWIND $ids AS i MATCH (e:Entity {id: i}) DETACH DELETE e",
                {"ids": ids[i : i + _IDS_PER_QUERY]},
            )

    def add_entities(self, ents: list[ConsolidatedEntity]) -> None:
        """Create entities in bulk."""
        cols: dict[str, Sequence[Any]] = {
            c: [e[c] for e in ents]  # type: ignore[literal-required]
            for c in ENT_FIELDS
        }
        self.copy_rows("Entity", cols, types=_entity_types())

    def update_entities(
        self, ents: list[ConsolidatedEntity], columns: Sequence[str] = ENT_FIELDS
    ) -> None:
        """Set `columns` of existing entities, found by id (Kùzu keeps a copy of each column
        a transaction sets, per 2,048 rows it touches, until the commit: only what changed
        is set)."""
        cols: dict[str, Sequence[Any]] = {
            c: [e[c] for e in ents]  # type: ignore[literal-required]
            for c in ("id", *(c for c in columns if c != "id"))
        }
        types = _entity_types()
        self.update_rows("Entity", cols, types={c: t for c, t in types.items() if c in cols})

    def existing_entities(self, ids: list[str]) -> set[str]:
        """Those of these entity ids that the graph holds."""
        return {
            r["id"]
            for r in self.query(
                "UNWIND $ids AS i MATCH (e:Entity {id: i}) RETURN e.id AS id", {"ids": ids}
            )
        }

    def delete_mentions(self, by_entity: Mapping[str, list[str]]) -> None:
        """Delete mentions: entity id → the chunk and note ids whose mention of it goes."""
        for e, xs in sorted(by_entity.items()):
            self.query(
                "MATCH (x)-[m:MENTIONS]->(e:Entity {id: $e}) WHERE x.id IN $xs DELETE m",
                {"e": e, "xs": xs},
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
        """Create mentions in bulk: from chunks (or, with `notes`, memory notes) to entities,
        committing in the pieces `steps` cuts."""
        import pyarrow as pa

        table = "MemoryNote" if notes else "Chunk"
        for part in steps.pieces(len(sources)):
            self.copy_rows(
                "MENTIONS",
                {"from": sources[part], "to": entities[part], "confidence": confidences[part]},
                types={"confidence": pa.float64()},
                rel_from_to=(table, "Entity"),
            )

    def delete_relationships(self, keys: list[RelKey]) -> None:
        """Delete relationships, by (from entity id, to entity id, type), in one statement."""
        self.load_rows(
            "MATCH (a:Entity {id: `_a`})-[r:RELATED]->(b:Entity {id: `_b`})"
            " WHERE r.type = `_t` DELETE r",
            {"_a": [k[0] for k in keys], "_b": [k[1] for k in keys], "_t": [k[2] for k in keys]},
        )

    def add_relationships(
        self, keys: list[RelKey], props: Mapping[RelKey, RelationshipProps], steps: Steps
    ) -> None:
        """Create the relationships `keys` names, with their properties, in bulk, committing
        in the pieces `steps` cuts."""
        import pyarrow as pa

        if not keys:
            return
        cols: dict[str, list[Any]] = {c: [] for c in ("from", "to", "type", *REL_FIELDS)}
        for k in keys:
            v = props[k]
            cols["from"].append(k[0])
            cols["to"].append(k[1])
            cols["type"].append(k[2])
            for col in REL_FIELDS:
                cols[col].append(v[col])  # type: ignore[literal-required]
        cols["docs"] = [rel_docs_text(d) for d in cols["docs"]]
        for part in steps.pieces(len(keys)):
            self.copy_rows(
                "RELATED",
                {col: vals[part] for col, vals in cols.items()},
                types={"confidence": pa.float64()},
            )


def _entity_types() -> dict[str, Any]:
    import pyarrow as pa

    return {
        "aliases": pa.list_(pa.string()),
        "docs": pa.list_(pa.string()),
        "confidence": pa.float64(),
    }
