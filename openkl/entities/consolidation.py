"""Building the entity graph: extraction at index time, then consolidation.

Every chunk and memory note is run through an extractor (local by default, an LLM when
`entities.extractor: llm`); results are cached by text hash + extractor id under
`.ok/cache/` and stored per chunk in the graph (`Extraction`). Entities and their
relationships are *consolidated* from those rows plus the canonical files under `aks/`
(approved backfeed items, imported bundles):

- one entity per normalized name (case, accents, punctuation, plurals, declared aliases);
- confidence is a noisy-OR over independent sources (documents, notes, canonical items), so
  it grows as more sources name the entity; repeated mentions in one source count a little;
- every entity keeps its contributing documents (and, through MENTIONS, its chunks).

Consolidation is a pure function of those inputs, applied to the entities a change
touches, so incremental updates, removals, `ok sync` and `ok index --rebuild` agree.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..files import crash
from ..files.folder import Folder
from ..graph.entity_writes import (
    ENT_FIELDS,
    REL_FIELDS,
    ROWS_PER_STEP,
    ROWS_PER_STEP_HELD,
    Steps,
    rel_docs_text,
)
from ..graph.protocol import GraphStore
from ..records import (
    CanonicalEntity,
    CanonicalRelation,
    ConsolidatedEntity,
    ExtractionData,
    ExtractionIndexed,
    ExtractionInput,
    ExtractorMismatch,
    RelationshipProps,
)
from ..text.cache import ExtractionCache
from .local import TYPES, entity_id, key_of

REPEAT = 0.8  # each further mention in the same source removes 20% of the remaining doubt
REPEAT_FLOOR = 0.5  # ... but repeating itself can at most halve a source's doubt
WEAK = 0.35  # mentions below this are weak evidence (a common word); an entity only they
# name stays below the listing floor however often and wherever it is repeated
MAX_CONF = 0.99
TYPE_ORDER = {t: i for i, t in enumerate(TYPES)}
SOURCE_RANK = {"backfeed": 0, "manual": 1, "connector": 2, "document": 3}


def min_confidence(folder: Folder) -> float:
    """The default confidence floor for listing entities and walking relationships."""
    return float(folder.setting("entities.min_confidence"))


def cooccurrence_min_sources(folder: Folder) -> int:
    """How many sources (documents, notes) must name a pair in one sentence before it is a
    `related_to` edge (1: every pair)."""
    return max(1, int(folder.setting("entities.cooccurrence_min_sources")))


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Extraction and consolidation build many small, short-lived containers that form no
    cycles; the cyclic collector would otherwise rescan them (and everything else alive in
    the process) over and over. Reference counting still frees them as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# -- extraction with a cache (ExtractionCache) -------------------------------------------


def extractor_id(folder: Folder) -> str:
    """Which extractor results in this folder come from (part of every cache key)."""
    from . import local as entity_local

    if folder.setting("entities.extractor") == "llm":
        from . import llm_extractor as entity_llm

        return entity_llm.extractor_id(folder)
    return entity_local.VERSION


def extract_texts(folder: Folder, texts: Sequence[str]) -> list[dict[str, Any]]:
    """Extraction results (JSON-able dicts) for texts, from the cache where possible."""
    from . import local as entity_local

    ident = extractor_id(folder)
    keys = [f"{ident}:{hashlib.sha256(t.encode('utf-8')).hexdigest()}" for t in texts]
    cache = ExtractionCache(folder.cache_dir / "entities.sqlite")
    made: dict[str, dict[str, Any]] = {}
    try:
        found = cache.get_many(sorted(set(keys)))
        todo = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        if todo:
            if ident == entity_local.VERSION:
                with _gc_paused():
                    made = {k: entity_local.extract(t).as_json() for k, t in todo}
                fresh = [(k, json.dumps(v, ensure_ascii=False)) for k, v in made.items()]
            else:
                from . import llm_extractor as entity_llm

                fresh = entity_llm.extract_many(folder, todo)
            # fallback results stand in for this run only; the LLM is asked again next time
            cache.put_many([(k, v) for k, v in fresh if not k.startswith("fallback:")])
            found.update({k.removeprefix("fallback:"): v for k, v in fresh})
    finally:
        cache.close()
    # a fresh result is the JSON of itself: no need to parse what was just written
    return [made[k] if k in made else json.loads(found[k]) for k in keys]


# -- index hooks ----------------------------------------------------------------------------
PENDING = "entities.pending"  # Meta key: extractions were committed before their entities
# Meta key: the co-occurrence threshold the graph's relationships were consolidated with
COOCCURRENCE = "entities.cooccurrence_min_sources"


# Meta key: the entity keys whose entities a write of notes left to be recomputed after it
# (`consolidating_later`); `ok sync` pays what is owed, so a process killed in between
# loses nothing
OWED = "entities.owed"

# folder (real path) -> what wakes whoever pays its owed consolidation, in this process
_later: dict[str, Callable[[], None]] = {}


@contextmanager
def consolidating_later(root: Path, wake: Callable[[], None]) -> Iterator[None]:
    """While the block runs, a write of notes (not documents) to the folder at `root` in this
    process records the entities it touches as owed (`OWED`) instead of recomputing them,
    and calls `wake()`; whoever it wakes calls `pay` in a write of its own. A folder's
    resident process answers `ok mem add` first this way, and consolidates after."""
    key = os.path.realpath(root)
    _later[key] = wake
    try:
        yield
    finally:
        _later.pop(key, None)


def _deferred(folder: Folder, doc_ids: Sequence[str]) -> Callable[[], None] | None:
    return None if doc_ids else _later.get(os.path.realpath(folder.root))


def owed(g: GraphStore) -> set[str]:
    """The entity keys whose consolidation a write left owed."""
    raw = g.meta().get(OWED) or ""
    return set(json.loads(raw)) if raw else set()


def pay(folder: Folder, g: GraphStore) -> int:
    """Consolidate the entity keys that writes left owed, in the caller's write; how many."""
    keys = owed(g)
    if keys:
        consolidate(folder, g, keys)
        g.set_meta(OWED, "")
        crash.point("entities.consolidated")
    return len(keys)


def _recompute(folder: Folder, g: GraphStore, touched: set[str], doc_ids: Sequence[str]) -> None:
    wake = _deferred(folder, doc_ids)
    if wake is not None:
        g.set_meta(OWED, json.dumps(sorted(owed(g) | touched), ensure_ascii=False))
        wake()  # who pays takes the writer after this write, so it sees what it committed
        return
    consolidate(folder, g, touched)
    crash.point("entities.consolidated")


def on_indexed(folder: Folder, g: GraphStore, doc_ids: list[str], note_ids: list[str]) -> None:
    """After docs/notes were loaded: extract their chunks and consolidate what they touch."""
    touched = extract(folder, g, doc_ids, note_ids)
    if touched:
        _recompute(folder, g, touched, doc_ids)


def extract(folder: Folder, g: GraphStore, doc_ids: list[str], note_ids: list[str]) -> set[str]:
    """Store the entity extractions of loaded docs/notes; returns the entity keys they touch,
    which `consolidate` turns into entities and relationships.

    A large load extracts batch by batch and consolidates once at the end: consolidating
    each batch would delete and re-create the entities that every batch shares.
    """
    rows: list[ExtractionInput] = []
    if doc_ids:
        rows += g.chunks_to_extract(doc_ids)
    if note_ids:
        rows += g.notes_to_extract(note_ids)
    if not rows:
        return set()
    results = extract_texts(folder, [r["text"] for r in rows])
    ids = [r["id"] for r in rows]
    g.delete_extractions(ids)
    keys_col, alias_col = [], []
    touched: set[str] = set()
    for res in results:
        ks = sorted({m[0] for m in res["m"]} | {k for r in res["r"] for k in r[:2]})
        al = sorted(f"{s}\t{long}" for s, long in res["a"])
        keys_col.append(ks)
        alias_col.append(al)
        touched.update(ks)
        touched.update(k for s, long in res["a"] for k in (s, long))
    g.add_extractions(
        ids,
        [r["owner"] for r in rows],
        [int(r["base"]) for r in rows],
        keys_col,
        alias_col,
        [json.dumps(pack(r), ensure_ascii=False, sort_keys=True) for r in results],
    )
    crash.point("entities.extracted")
    ident = extractor_id(folder)
    meta = g.meta()
    stamped = meta.get("entities.extractor")
    alone = None  # no other extraction is held: asked once, when needed
    # a different extractor's results are still in the graph: keep their stamp, so the
    # mismatch stays visible (`ok status`, `ok doctor`) until `ok index --rebuild`
    if stamped != ident and (stamped is None or (alone := not g.has_other_extractions(ids))):
        g.set_meta("entities.extractor", ident)
    # the first extractions of a graph are consolidated with today's threshold
    if meta.get(COOCCURRENCE) is None and (
        alone if alone is not None else not g.has_other_extractions(ids)
    ):
        g.set_meta(COOCCURRENCE, str(cooccurrence_min_sources(folder)))
    return touched


# Co-occurrence is every pair of the terms a sentence names that no typed relation joins:
# up to 66 pairs for a sentence of 12 terms, most of an extraction result. The graph keeps
# each such sentence as its terms, [position, confidence, [keys]] under "c", and the pairs
# are expanded again where they are read; the cache keeps the results as extracted.


def _typed_at(res: Mapping[str, Any]) -> dict[int, set[frozenset[str]]]:
    out: dict[int, set[frozenset[str]]] = defaultdict(set)
    for src, dst, typ, _c, pos in res["r"]:
        if typ != "related_to":
            out[int(pos)].add(frozenset((src, dst)))
    return out


def _pairs(keys: Sequence[str], typed: set[frozenset[str]]) -> Iterator[tuple[str, str]]:
    for i, p in enumerate(keys):
        for q in keys[i + 1 :]:
            if frozenset((p, q)) not in typed:
                yield p, q


def pack(res: Mapping[str, Any]) -> dict[str, Any]:
    """An extraction result with its co-occurrence pairs held per sentence (see above):
    a sentence's pairs are packed only when expanding its terms gives exactly them."""
    typed = _typed_at(res)
    groups: dict[tuple[int, float], set[tuple[str, str]]] = defaultdict(set)
    kept = []
    for r in res["r"]:
        if r[2] == "related_to":
            groups[(int(r[4]), float(r[3]))].add((r[0], r[1]))
        else:
            kept.append(r)
    packed = []
    for (pos, c), pairs in sorted(groups.items()):
        keys = sorted({k for pair in pairs for k in pair})
        if set(_pairs(keys, typed.get(pos, set()))) == pairs:
            packed.append([pos, c, keys])
        else:
            kept += [[a, b, "related_to", c, pos] for a, b in sorted(pairs)]
    out = {**res, "r": kept}
    if packed:
        out["c"] = packed
    return out


def relations(res: Mapping[str, Any]) -> Iterator[Sequence[Any]]:
    """The relations of an extraction result as extracted, packed (`pack`) or not:
    [src, dst, type, confidence, position]."""
    yield from res["r"]
    if res.get("c"):
        typed = _typed_at(res)
        for pos, c, keys in res["c"]:
            for p, q in _pairs(keys, typed.get(int(pos), set())):
                yield p, q, "related_to", c, pos


def consolidate_all(folder: Folder, g: GraphStore) -> None:
    """Recompute every entity from the stored extractions: after a load was cut off between
    committing its extractions and consolidating them (`PENDING`)."""
    touched = {eid.replace("-", " ") for eid in g.entity_ids()}
    for r in g.extraction_keys():
        touched.update(r["keys"] or [])
        for a in r["aliases"] or []:
            touched.update(a.split("\t"))
    consolidate(folder, g, touched, stepwise=True)
    g.set_meta(PENDING, "")
    g.set_meta(OWED, "")  # every entity is recomputed: nothing is owed


def extractor_mismatch(folder: Folder, g: GraphStore) -> ExtractorMismatch | None:
    """The graph's entities came from another extractor (or version) than the configured
    one: {"graph": stamped id, "config": configured id}, else None."""
    stamped = g.meta().get("entities.extractor")
    ident = extractor_id(folder)
    if stamped is None or stamped == ident:
        return None
    return {"graph": stamped, "config": ident}


def on_removing(folder: Folder, g: GraphStore, doc_ids: list[str], note_ids: list[str]) -> None:
    """Before docs/notes leave the graph: drop their extractions and re-consolidate."""
    touched = forget(g, list(doc_ids) + list(note_ids))
    if touched:
        _recompute(folder, g, touched, doc_ids)


def forget(g: GraphStore, owners: list[str]) -> set[str]:
    """Drop the extractions of these docs and notes; returns the entity keys they named,
    which `consolidate` recomputes without them."""
    if not owners:
        return set()
    rows = g.extraction_keys_of(owners)
    if not rows:
        return set()
    touched: set[str] = set()
    for r in rows:
        touched.update(r["keys"] or [])
        for a in r["aliases"] or []:
            touched.update(a.split("\t"))
    g.delete_extractions_of(owners)
    return touched


CANONICAL = "entities.canonical"  # Meta key: the stamp of the canonical files applied


def sync_canonical(folder: Folder, g: GraphStore, canon: Canonical | None = None) -> bool:
    """Re-consolidate when the canonical files (backfeed, imports) changed; True if it did.
    `canon`: the canonical files, if the caller has loaded them already."""
    canon = canon or Canonical.load(folder)
    stamp = canon.stamp
    if g.meta().get(CANONICAL) == stamp:
        return False
    old = {eid.replace("-", " ") for eid in g.canonical_entity_ids()}
    consolidate(folder, g, old | canon.keys(), canon=canon)
    # only a full pass over the canonical keys may stamp them as applied
    g.set_meta(CANONICAL, stamp)
    return True


def stale(folder: Folder, meta: Mapping[str, str], canon: Canonical) -> list[str]:
    """What of the entity graph must be recomputed beyond what changed files touch: "all"
    (a load was cut off before its consolidation), "canonical" (the canonical files
    changed), "settings" (the co-occurrence threshold changed); `meta` is the graph's."""
    out = []
    if meta.get(PENDING) == "1":
        out.append("all")
    if meta.get(CANONICAL) != canon.stamp:
        out.append("canonical")
    if meta.get(COOCCURRENCE) not in (None, str(cooccurrence_min_sources(folder))):
        out.append("settings")
    return out


def sync_settings(folder: Folder, g: GraphStore) -> bool:
    """Re-consolidate every entity when the co-occurrence threshold differs from the one
    the graph was built with; True if it did. The new stamp and `PENDING` are written
    first, so a pass cut off is finished by the next `ok sync`."""
    want = str(cooccurrence_min_sources(folder))
    if g.meta().get(COOCCURRENCE) == want:
        return False
    g.set_meta(COOCCURRENCE, want)
    if not g.has_other_extractions([]):
        return False
    g.set_meta(PENDING, "1")
    g.commit_and_continue()
    consolidate_all(folder, g)
    return True


# -- canonical contributions ----------------------------------------------------------------
@dataclass
class Canonical:
    """Entities and relationships from the folder's canonical files (backfeed, imports)."""

    entities: list[CanonicalEntity] = field(default_factory=list)
    relations: list[CanonicalRelation] = field(default_factory=list)
    stamp: str = ""

    @classmethod
    def load(cls, folder: Folder) -> Canonical:
        from ..knowledge import aks, backfeed

        c = cls()
        h = hashlib.sha256()
        for part in (backfeed.contributions(folder), aks.contributions(folder)):
            ents, rels, digest = part
            c.entities += ents
            c.relations += rels
            h.update(digest.encode())
        c.stamp = h.hexdigest()[:16]
        return c

    def keys(self) -> set[str]:
        out = {e["key"] for e in self.entities}
        out |= {k for r in self.relations for k in (r["src"], r["dst"])}
        out |= {a for e in self.entities for a in e.get("alias_keys", [])}
        return out


# -- consolidation --------------------------------------------------------------------------
def _noisy_or(values: Iterable[float]) -> float:
    doubt = 1.0
    for v in values:
        doubt *= 1.0 - max(0.0, min(1.0, v))
    return 1.0 - doubt


def _source_conf(confs: list[float]) -> float:
    """One source's confidence: its best mention, nudged up by repeats (a source that says the
    same thing twenty times is not twenty sources: repeats at most halve its doubt)."""
    if len(confs) == 1:  # the common case; the same arithmetic as below with no repeats
        return 1.0 - (1.0 - confs[0]) * 1.0
    best = max(confs)
    strong = 0  # repeating a common word is no evidence
    for c in confs:
        if c >= WEAK:
            strong += 1
    return 1.0 - (1.0 - best) * max(REPEAT_FLOOR, REPEAT ** max(0, strong - 1))


_FEW_KEYS = 2000  # touched keys up to which consolidation asks the graph for their extractions


def _alias_map(rows: list[ExtractionIndexed], canon: Canonical) -> dict[str, str]:
    """short key → long key, decided by how many sources declare it (ties: by name)."""
    votes: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in rows:
        for a in r["aliases"] or []:
            s, long = a.split("\t")
            if s != long:
                votes[s][long].add(r["owner"])
    for e in canon.entities:
        for a in e.get("alias_keys", []):
            if a != e["key"]:
                votes[a][e["key"]].add("canonical")
    out = {
        s: sorted(c.items(), key=lambda kv: (-len(kv[1]), kv[0]))[0][0] for s, c in votes.items()
    }
    # canonical names are never aliases of something else
    for e in canon.entities:
        out.pop(e["key"], None)
    return out


def keys_into(amap: dict[str, str], resolve: Any, affected: set[str]) -> set[str]:
    """The keys an extraction may name that `resolve` turns into one of `affected`: those
    that are no alias, and the aliases that lead there."""
    return {k for k in affected if k not in amap} | {k for k in amap if resolve(k) in affected}


def _resolver(amap: dict[str, str]) -> Any:
    def resolve(k: str) -> str:
        seen = {k}
        while k in amap and amap[k] not in seen:
            k = amap[k]
            seen.add(k)
        return k

    return resolve


def consolidate(
    folder: Folder,
    g: GraphStore,
    touched: Iterable[str],
    canon: Canonical | None = None,
    stepwise: bool = False,
) -> dict[str, int]:
    """Recompute the entities named by `touched` keys (and their relationships) from scratch.

    `stepwise` commits the writes in pieces, for a consolidation too large for one of
    Kùzu's transactions; the caller has set `PENDING`, which only a finished one clears.
    """
    with _gc_paused():
        return _consolidate(folder, g, touched, canon, g.commit_and_continue if stepwise else None)


def _consolidate(
    folder: Folder,
    g: GraphStore,
    touched: Iterable[str],
    canon: Canonical | None,
    step: Callable[[], None] | None,
) -> dict[str, int]:
    canon = canon or Canonical.load(folder)
    touched = set(touched)
    if len(touched) > _FEW_KEYS:
        rows = g.extraction_index()
        resolve = _resolver(_alias_map(rows, canon))
        affected = touched | {resolve(k) for k in touched}
        gather = [r["id"] for r in rows if any(resolve(k) in affected for k in r["keys"] or [])]
    else:
        # a few keys (a note, a document): only the extractions that name aliases are read
        # for the alias map, and the graph finds those that name a key resolving to one of
        # them; the same extractions as the loop above, without reading every one
        amap = _alias_map(g.extraction_aliases(), canon)
        resolve = _resolver(amap)
        affected = touched | {resolve(k) for k in touched}
        gather = g.extractions_with_keys(sorted(keys_into(amap, resolve, affected)))
    data = g.extraction_data(gather)
    ents, mentions, rels = _aggregate(
        data, affected, resolve, canon, cooccurrence_min_sources(folder)
    )
    _write(g, affected, ents, mentions, rels, step)
    return {"entities": len(ents), "relations": len(rels)}


def _aggregate(
    data: dict[str, ExtractionData],
    affected: set[str],
    resolve: Any,
    canon: Canonical,
    min_sources: int = 1,
) -> tuple[
    dict[str, ConsolidatedEntity],
    dict[tuple[str, str], float],
    dict[tuple[str, str, str], RelationshipProps],
]:
    # entity key → owner → {abs position: conf}
    conf: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    forms: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    types: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    alias_names: dict[str, set[str]] = defaultdict(set)
    defs: dict[str, list[tuple[float, str, int, str]]] = defaultdict(list)
    mentions: dict[tuple[str, str], float] = {}
    rel: dict[tuple[str, str, str], dict[str, dict[int, tuple[float, str]]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    resolved: dict[str, str] = {}  # resolve() is pure: ask it once per key
    firm: set[tuple[str, str]] = set()  # pairs some source names as two terms

    def res_of(raw: str) -> str:
        k = resolved.get(raw)
        if k is None:
            k = resolved[raw] = resolve(raw)
        return k

    mentions_get = mentions.get
    for xid in sorted(data):
        row = data[xid]
        owner, base = row["owner"], int(row["base"])
        res = json.loads(row["data"])
        terms = set()  # what this source names as more than a common word
        for raw, name, typ, c, start, _end, natural in res["m"]:
            k = resolved.get(raw) or res_of(raw)
            c = float(c)
            if c >= WEAK:
                terms.add(k)
            if k not in affected:
                continue
            pos = base + int(start)
            slot = conf[k][owner]
            slot[pos] = max(slot.get(pos, 0.0), c)
            f = forms[k][name]
            f[0] += int(raw == k)  # the entity's own name beats its aliases
            f[1] += int(natural)
            f[2] += 1
            if typ:
                types[k][typ] += c
            if raw != k:
                alias_names[k].add(name)
            mk = (xid, k)
            mentions[mk] = max(mentions_get(mk, 0.0), c)
        for raw, (sentence, c, pos) in res.get("d", {}).items():
            k = res_of(raw)
            if k in affected:
                defs[k].append((-float(c), owner, base + int(pos), sentence))
        for src, dst, typ, c, pos in relations(res):
            a, b = resolved.get(src) or res_of(src), resolved.get(dst) or res_of(dst)
            if a == b or (a not in affected and b not in affected):
                continue
            if typ == "related_to":
                if a > b:
                    a, b = b, a
                if a in terms and b in terms:
                    firm.add((a, b))
            rslot = rel[(a, b, typ)][owner]
            p = base + int(pos)
            prev = rslot.get(p)
            c = float(c)
            if prev is None or c > prev[0]:
                rslot[p] = (c, xid)
    canon_ents: dict[str, list[CanonicalEntity]] = defaultdict(list)
    for e in canon.entities:
        if e["key"] in affected:
            canon_ents[e["key"]].append(e)
    ents: dict[str, ConsolidatedEntity] = {}
    for k in sorted(set(conf) | set(canon_ents)):
        ents[k] = _entity(
            k,
            conf.get(k, {}),
            forms.get(k, {}),
            types.get(k, {}),
            alias_names.get(k, set()),
            defs.get(k, []),
            canon_ents.get(k, []),
        )
    rels: dict[tuple[str, str, str], RelationshipProps] = {}
    # co-occurrence in one sentence is weak evidence (confidence 0.3 from one source, under
    # the listing floor) and most of the graph: each abstract pairs up its ~20 terms and
    # common words. A pair that names a common word ("role", "patients") is kept only once
    # enough sources name it, or a canonical file does (below).
    canon_keys = {(resolve(r["src"]), resolve(r["dst"]), r["type"]) for r in canon.relations}
    weak = {
        k
        for k, owners in rel.items()
        if k[2] == "related_to"
        and len(owners) < min_sources
        and k[:2] not in firm
        and k not in canon_keys
    }
    for (a, b, typ), owners in rel.items():
        if (a, b, typ) in weak:
            continue
        if len(owners) == 1:
            ((_, by_pos),) = owners.items()
            if len(by_pos) == 1:  # one mention in one source: the common case
                ((c, x),) = by_pos.values()
                per, best = [_source_conf([c])], (-c, x)
            else:
                per = [_source_conf([c for c, _ in by_pos.values()])]
                best = min((-c, x) for c, x in by_pos.values())
        else:
            per = [
                _source_conf([c for c, _ in by_pos.values()])
                for _, by_pos in sorted(owners.items())
            ]
            best = min((-c, x) for by_pos in owners.values() for c, x in by_pos.values())
        rels[(a, b, typ)] = {
            "confidence": _noisy_or(per),
            "evidence": best[1],
            "docs": sorted(owners),
            "verified": False,
            "source_kind": "document",
            "description": "",
            "ext_id": "",
            "extra": "",
        }
    for r in canon.relations:
        a, b = resolve(r["src"]), resolve(r["dst"])
        if a == b or (a not in affected and b not in affected):
            continue
        cur = rels.get((a, b, r["type"]))
        rc = r.get("confidence")
        c = float(rc) if rc is not None else 0.9
        if cur is None:
            rels[(a, b, r["type"])] = {
                "confidence": c,
                "evidence": r.get("evidence", ""),
                "docs": sorted(r.get("docs", [])),
                "verified": bool(r.get("verified")),
                "source_kind": r.get("source_kind") or "manual",
                "description": r.get("description") or "",
                "ext_id": r.get("ext_id") or "",
                "extra": json.dumps(r["extra"], sort_keys=True) if r.get("extra") else "",
            }
        else:
            cur["confidence"] = _noisy_or([cur["confidence"], c])
            cur["verified"] = cur["verified"] or bool(r.get("verified"))
            cur["docs"] = sorted(set(cur["docs"]) | set(r.get("docs", [])))
            cur["description"] = cur["description"] or r.get("description") or ""
            cur["ext_id"] = cur["ext_id"] or r.get("ext_id") or ""
            if SOURCE_RANK.get(r.get("source_kind") or "", 9) < SOURCE_RANK.get(
                cur["source_kind"], 9
            ):
                cur["source_kind"] = r["source_kind"]
    # a typed relationship says more than co-occurrence: drop the weaker edge of a pair
    typed_pairs = {frozenset((a, b)) for a, b, t in rels if t != "related_to"}
    for key in [k for k in rels if k[2] == "related_to" and frozenset(k[:2]) in typed_pairs]:
        del rels[key]
    for v in rels.values():
        v["confidence"] = round(min(MAX_CONF if not v["verified"] else 1.0, v["confidence"]), 4)
    return ents, mentions, rels


def _entity(
    k: str,
    conf: dict[str, dict[int, float]],
    forms: dict[str, list[int]],
    types: dict[str, float],
    alias_names: set[str],
    defs: list[tuple[float, str, int, str]],
    canon: list[CanonicalEntity],
) -> ConsolidatedEntity:
    per = [_source_conf(list(slot.values())) for _, slot in sorted(conf.items())]
    canon = sorted(
        canon,
        key=lambda e: (
            not e.get("verified"),
            SOURCE_RANK.get(e.get("source_kind") or "", 9),
            e.get("origin", ""),
        ),
    )
    per += [0.9 if e["confidence"] is None else float(e["confidence"]) for e in canon]
    confidence = _noisy_or(per)
    if not canon and conf and max(max(slot.values()) for slot in conf.values()) < WEAK:
        # only weak mentions (a common word, never defined, titled or named): repetition
        # across sources does not make it an entity
        confidence = min(confidence, max(max(slot.values()) for slot in conf.values()))
    verified = any(e.get("verified") for e in canon)
    if forms:
        name = sorted(forms.items(), key=lambda kv: (-kv[1][0], -kv[1][1], -kv[1][2], kv[0]))[0][0]
    else:
        name = ""
    # Concept is what a mention is typed when nothing says more: a type with evidence wins
    # unless Concept has more than twice its weight
    specific = {t: w for t, w in types.items() if t != "Concept"}
    if specific and max(specific.values()) * 2 >= types.get("Concept", 0.0):
        types = specific
    typ = (
        sorted(types.items(), key=lambda kv: (-kv[1], TYPE_ORDER.get(kv[0], 99), kv[0]))[0][0]
        if types
        else "Concept"
    )
    desc = sorted(defs)[0][3] if defs else ""
    aliases = set(alias_names)
    source_kind = "document"
    ext_id, extra = "", dict[str, Any]()
    docs = set(conf)
    for e in reversed(canon):  # the first (verified, best ranked) item wins
        name = e.get("name") or name
        typ = e.get("type") or typ
        desc = e.get("description") or desc
        ext_id = e.get("ext_id") or ext_id
        extra = {**extra, **(e.get("extra") or {})}
        aliases |= set(e.get("aliases") or [])
        docs |= set(e.get("docs") or [])
    if canon:
        best = canon[0].get("source_kind") or "manual"
        source_kind = (
            best if not conf or SOURCE_RANK.get(best, 9) < SOURCE_RANK["document"] else "document"
        )
    aliases.discard(name)
    aliases = {a for a in aliases if key_of(a) != key_of(name) or a.lower() != name.lower()}
    return {
        "id": entity_id(k),
        "name": name or k,
        "type": typ,
        "description": desc,
        "confidence": round(min(1.0 if verified else MAX_CONF, confidence), 4),
        "aliases": sorted(aliases),
        "docs": sorted(docs),
        "verified": verified,
        "source_kind": source_kind,
        "canonical": bool(canon),
        "ext_id": ext_id,
        "extra": json.dumps(extra, sort_keys=True, ensure_ascii=False) if extra else "",
    }


def _write(
    g: GraphStore,
    affected: set[str],
    ents: dict[str, ConsolidatedEntity],
    mentions: dict[tuple[str, str], float],
    rels: dict[tuple[str, str, str], RelationshipProps],
    step: Callable[[], None] | None = None,
) -> None:
    """Make the graph hold what consolidation computed for the affected entities, their
    mentions and relationships, writing only what differs from what it holds.

    A new note re-consolidates every entity it names, and a common entity has thousands of
    mentions and relationships; rewriting them all made each small write pay for the whole
    table at Kùzu's next checkpoint.
    """
    eid: dict[str, str] = {}  # entity key → graph id, computed once per key

    def eid_of(k: str) -> str:
        v = eid.get(k)
        if v is None:
            v = eid[k] = entity_id(k)
        return v

    ids = sorted(map(eid_of, affected))
    old_e, old_m, old_r = g.held_entities(ids)
    new_e = {e["id"]: e for e in ents.values()}
    gone = sorted(set(old_e) - set(new_e))
    g.delete_entities(gone)
    added = [new_e[i] for i in sorted(set(new_e) - set(old_e))]
    # changed entities, by the columns that changed (most: their documents and confidence)
    changed: dict[tuple[str, ...], list[ConsolidatedEntity]] = defaultdict(list)
    for i in sorted(set(new_e) & set(old_e)):
        cols = tuple(c for c in ENT_FIELDS if _differs(new_e[i][c], old_e[i][c]))  # type: ignore[literal-required]
        if cols:
            changed[cols].append(new_e[i])
    g.add_entities(added)
    for cols, ents_of in sorted(changed.items()):
        g.update_entities(ents_of, cols)
    held_any = bool(old_e or old_m or old_r)
    steps = Steps(
        step,
        held=len(gone) + len(added) + sum(map(len, changed.values())),
        limit=ROWS_PER_STEP_HELD if held_any else ROWS_PER_STEP,
    )
    steps.commit()

    present = set(new_e)
    outside = sorted({eid_of(k) for a, b, _ in rels for k in (a, b)} - present)
    if outside:
        present |= g.existing_entities(outside)

    # mentions: (chunk or note id, entity id) → confidence
    want_m = {(xid, eid_of(k)): c for (xid, k), c in mentions.items() if eid_of(k) in present}
    held_m = {k: c for k, c in old_m.items() if k[1] not in gone}
    drop_m: dict[str, list[str]] = defaultdict(list)
    for (xid, e), c in held_m.items():
        if want_m.get((xid, e)) != c:
            drop_m[e].append(xid)
    g.delete_mentions(drop_m)
    steps.wrote(sum(map(len, drop_m.values())))
    # chunks first, then notes (a chunk id has a "#", a note id has none)
    by_kind: dict[bool, tuple[list[str], list[str], list[float]]] = {}
    for (xid, e), c in sorted(want_m.items()):
        if held_m.get((xid, e)) == c:
            continue
        cols3 = by_kind.setdefault("#" not in xid, ([], [], []))
        cols3[0].append(xid)
        cols3[1].append(e)
        cols3[2].append(c)
    for notes, (xs, es, cs) in sorted(by_kind.items()):
        g.add_mentions(xs, es, cs, notes=notes, steps=steps)
    steps.commit()

    # relationships: (from id, to id, type) → properties
    want_r: dict[tuple[str, str, str], RelationshipProps] = {}
    for (a, b, t), v in rels.items():
        ea, eb = eid_of(a), eid_of(b)
        if ea in present and eb in present:
            want_r[(ea, eb, t)] = v
    held_r = {k: v for k, v in old_r.items() if k[0] not in gone and k[1] not in gone}
    # a relationship whose properties changed is deleted and created anew: setting them in
    # place makes Kùzu keep a copy of every touched vector of every column until the commit
    # (a large load changes most relationships: hundreds of MB, then a full buffer pool)
    drop_r = {k for k in held_r if k not in want_r or held_r[k] is None}
    for key, held in held_r.items():
        if held is None or key in drop_r:
            continue
        want = want_r[key]
        if _differs(rel_docs_text(want["docs"]), held["docs"]) or any(
            _differs(want[c], held[c])  # type: ignore[literal-required]
            for c in REL_FIELDS
            if c != "docs"
        ):
            drop_r.add(key)
    dropped = sorted(drop_r)
    for part in steps.pieces(len(dropped)):
        g.delete_relationships(dropped[part])
    g.add_relationships(sorted(k for k in want_r if k in drop_r or k not in held_r), want_r, steps)


def _differs(new: Any, old: Any) -> bool:
    if isinstance(new, float) or isinstance(old, float):
        return old is None or new is None or abs(float(new) - float(old)) > 1e-12
    return (new if new is not None else "") != (old if old is not None else "")
