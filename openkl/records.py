"""The records that pass between the layers, by name: what a mapping entry, a cite object,
a report, an entity or a relationship holds.

They are TypedDicts because they are also the JSON the adapters print: a record is a plain
dict at run time, and mypy checks its keys.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

# -- files, citations and reports --------------------------------------------------------


# -- the entity graph --------------------------------------------------------------------
class Entity(TypedDict):
    """An entity as the graph returns it (`graph.ENTITY_COLS`)."""

    id: str
    name: str
    type: str
    description: str
    confidence: float
    aliases: list[str]
    docs: list[str]  # ids of the documents and notes that name it
    verified: bool
    source_kind: str
    ext_id: str
    extra: str  # JSON of what an imported bundle said beyond the columns, or ""


class CountedEntity(Entity):
    """An entity with how many chunks and notes mention it."""

    mentions: int


class ConsolidatedEntity(Entity):
    """An entity as consolidation writes it (and the writer reads it back)."""

    canonical: bool  # a canonical file (backfeed, an imported bundle) contributes to it


class EntityView(TypedDict):
    """An entity as the readers show it (`ok graph entities`, pages, MCP)."""

    id: str
    name: str
    type: str
    description: str
    confidence: float
    verified: bool
    source_kind: str
    ext_id: NotRequired[str]  # only when it has one
    aliases: list[str]
    docs: list[str]


class EntityListed(EntityView):
    """An entity in a listing, with its mention count."""

    mentions: int


class EntitySource(TypedDict):
    """A document, note or bundle document an entity came from."""

    id: str
    kind: str  # doc, memory, bundle or missing
    title: str
    path: str


class EntityDetail(EntityView):
    """`ok graph entity NAME`: the entity with its relationships, sources and evidence."""

    relationships: list[DirectedRelationship]
    sources: list[EntitySource]
    mentions: list[dict[str, Any]]  # cite objects of the chunks and notes that name it


class Mention(TypedDict):
    """A chunk or note naming an entity, with the extractor's confidence."""

    id: str  # the chunk or note
    confidence: float


class RelationshipProps(TypedDict):
    """What a relationship holds besides its ends and type, as consolidation makes it."""

    confidence: float
    evidence: str  # the chunk or note id of its best mention, or a canonical item's text
    docs: list[str]
    verified: bool
    source_kind: str
    description: str
    ext_id: str
    extra: str


class StoredRelationship(TypedDict):
    """A relationship as the graph holds it, for the writer to compare with (`docs` as
    stored, see `graph.rel_docs_text`)."""

    a: str
    b: str
    type: str
    rid: Any  # the engine's edge id
    confidence: float
    evidence: str
    docs: str
    verified: bool
    source_kind: str
    description: str
    ext_id: str
    extra: str


class Relationship(TypedDict):
    """A relationship between two entities, with their names."""

    from_id: str
    from_name: str
    to_id: str
    to_name: str
    type: str
    confidence: float
    evidence: str
    docs: list[str]
    verified: bool
    source_kind: str
    description: str


class DirectedRelationship(Relationship):
    """A relationship seen from one of its entities: `out` when it is the `from` end."""

    direction: str


class RelatedPair(TypedDict):
    """One step of a walk over relationships: both ends and the relationship."""

    a: str
    an: str  # a's name
    b: str
    bn: str
    type: str
    confidence: float
    evidence: str


# one relationship followed by a walk, in the direction it was walked ("from" is a keyword)
Hop = TypedDict(
    "Hop",
    {
        "from": str,
        "from_id": str,
        "to": str,
        "to_id": str,
        "type": str,
        "direction": str,
        "confidence": float,
        "evidence": str,
    },
)


class Step(TypedDict):
    """An entity a walk reached, with the path that reached it."""

    entity: str
    id: str
    depth: int
    via: Hop
    path: list[str]
    hops: list[Hop]


class Traversal(TypedDict):
    """`ok graph traverse`: the walk from an entity."""

    start: EntityView
    depth: int
    rel: str | None
    min_confidence: float
    steps: list[Step]
    truncated: bool


class ExportedRelationship(TypedDict):
    """A relationship as an AKS export reads it."""

    a: str
    b: str
    type: str
    confidence: float
    description: str
    docs: list[str]
    verified: bool
    source_kind: str
    ext_id: str
    extra: str


class ExtractionKeys(TypedDict):
    """The entity keys and alias pairs ("short\\tlong") one extraction names."""

    keys: list[str] | None
    aliases: list[str] | None


class ExtractionIndexed(ExtractionKeys):
    """An extraction's id and owner with its keys, for deciding what to consolidate."""

    id: str
    owner: str
    base: int


class ExtractionData(TypedDict):
    """An extraction's stored result (JSON) with where its chunk or note starts."""

    id: str
    owner: str
    base: int
    data: str


class ExtractionInput(TypedDict):
    """A chunk or note to extract entities from."""

    id: str
    owner: str  # the document or note
    base: int  # where the text starts in its owner
    text: str


class PageBuilt(TypedDict):
    """An entity's page as built and cached (`ok graph page`)."""

    entity_name: str
    markdown: str
    generated_at: str
    source_entity_id: str
    entity_id: str
    graph_version: str
    source_type: str  # "compiled"
    render: str  # the renderer's version


class EntityPage(PageBuilt):
    """An entity's page as `pages.page` returns it."""

    cached: bool  # read from the cache rather than built
