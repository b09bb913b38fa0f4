"""`ok context QUERY`: hybrid retrieval → the entity subgraph that answers it.

Stage 1 finds passages (the hybrid search of `ok search`). Stage 2 picks the entities that
matter: with an LLM configured, it is asked which of the candidate entities are relevant
(names it returns are checked against the graph); otherwise a deterministic ranking scores
entities by how strongly the retrieved passages mention them and how well their names match
the query. The answer is compiled structure — entities, their relationships, the source
passages — with the reasoning and a HIGH/MEDIUM/LOW confidence.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from ..entities.consolidation import min_confidence
from ..entities.local import STOP, key_of
from ..entities.queries import _entity_view
from ..files.folder import Folder
from ..graph.protocol import GraphStore
from ..records import (
    Cite,
    Context,
    ContextEntity,
    ContextLink,
    ContextRelationship,
    ContextSource,
    ContextSupport,
    Entity,
)
from ..text.llm import configured

PROMPT_VERSION = "context-1"


def _query_terms(query: str) -> list[str]:
    words = key_of(query).split()
    return [w for w in words if w not in STOP and len(w) >= 3]


def context(
    folder: Folder,
    g: GraphStore,
    query: str,
    *,
    k: int = 8,
    max_entities: int = 12,
    min_conf: float | None = None,
    use_llm: bool | None = None,
    embedder: Any = None,
) -> Context:
    """The entity subgraph relevant to `query` (see module doc). Read-only."""
    from ..errors import UsageError
    from ..graph.search import find

    if not query.strip():
        raise UsageError("the query is empty", "ask something, e.g. `ok context 'what is WAL?'`")
    floor = min_confidence(folder) if min_conf is None else min_conf
    warnings: list[str] = []
    if embedder is None:
        from ..graph.indexing import embedder as embedder_of

        embedder = embedder_of(folder)
    found = find(
        folder,
        g,
        query,
        k=k,
        per_doc=2,
        embedder=embedder,
        min_score=folder.setting("search.min_score"),
        tail_floor=folder.setting("search.tail_floor"),
    )
    hits = found.hits
    sup = support(query, hits, embedder)
    if found.warning:
        warnings.append(found.warning)
    scores: dict[str, float] = defaultdict(float)
    why: dict[str, list[str]] = defaultdict(list)
    if hits:
        ids = [h["id"] for h in hits]
        rank = {h["id"]: h for h in hits}
        for r in g.mentions_in(ids, floor):
            h = rank[r["x"]]
            w = (1.0 / h["rank"]) * float(r["c"])
            scores[r["e"]] += w
            label = h.get("title") or h["path"]
            if label not in why[r["e"]]:
                why[r["e"]].append(label)
    terms = _query_terms(query)
    named: set[str] = set()
    for t in terms:
        for eid in g.entities_named_by(t, floor):
            scores[eid] += 0.5
            named.add(eid)
    if not scores:
        return _answer(
            query,
            [],
            [],
            hits,
            "No good match: no passage is near the query, and it names no entity."
            if found.no_good_match
            else "No passages or entity names matched the query.",
            sup,
            "ranked",
            warnings,
            _linked(g, hits),
        )
    ent_rows = g.entities_by_id(list(scores))
    ranked = sorted(scores, key=lambda e: (-(scores[e] * (0.5 + ent_rows[e]["confidence"])), e))
    method = "ranked"
    reasoning = ""
    llm_conf = None
    want_llm = use_llm if use_llm is not None else configured(folder, "chat")
    if want_llm:
        try:
            chosen, reasoning, llm_conf = _ask_llm(folder, g, query, hits, ranked[:40], ent_rows)
            if chosen:
                ranked = chosen
                method = "llm"
        except Exception as e:  # noqa: BLE001 - the ranking below always works
            warnings.append(f"LLM unavailable, used the deterministic ranking: {e}")
    top = ranked[:max_entities]
    ents: list[ContextEntity] = []
    for eid in top:
        row: ContextEntity = {
            **_entity_view(ent_rows[eid]),
            "score": round(scores.get(eid, 0.0), 4),
            "why": (["named in the query"] if eid in named else [])
            + [f"mentioned in {w}" for w in why.get(eid, [])[:3]],
        }
        ents.append(row)
    sel = [e["id"] for e in ents]
    rels = g.relationships_among(sel, floor)
    if method == "ranked":
        reasoning = _reasoning(ents, hits, named)
    elif llm_conf:  # the model's own word on its choice; the label is the evidence's
        reasoning = f"{reasoning} (the model's confidence: {llm_conf})".strip()
    return _answer(query, ents, rels, hits, reasoning, sup, method, warnings, _linked(g, hits))


def _linked(g: GraphStore, hits: list[Cite]) -> list[ContextLink]:
    """The notes the source notes link to, and those that link to them (`[[…]]`)."""
    notes = [h["id"] for h in hits if h["type"] == "memory"]
    if not notes:
        return []
    found: list[tuple[str, str, str, int]] = [
        (e["dst"], e["src"], "out", e["line"]) for e in g.links_from(notes) if e["kind"] == "memory"
    ]
    found += [(e["src"], e["dst"], "in", e["line"]) for e in g.links_to(notes)]
    seen = set(notes)
    keep = []
    for other, via, direction, line in found:
        if other not in seen:
            seen.add(other)
            keep.append((other, via, direction, line))
    ends = g.link_ends([k[0] for k in keep], [])
    return [
        {
            "id": other,
            "path": ends[other]["path"],
            "title": ends[other]["title"],
            "via": via,
            "direction": direction,
            "line": line,
        }
        for other, via, direction, line in keep
        if other in ends
    ]


SUPPORT_HITS = 3  # passages whose sentences are weighed against the query
SUPPORT_SENTENCES = 24  # of those, the ones most like the query by words are embedded

# score = logistic(a·similarity + b·coverage + c·typed + d), fitted on the dev questions of
# bench/gold/qa by bench/context_calibration.py --fit: the score is the share of dev
# questions whose first sources held the answer, given that support. HIGH from 0.9 (on dev,
# 95 % of them were right), MEDIUM from 0.7 (82 %); below, LOW (56 %)
CALIBRATION = {
    "similarity": 2.852,
    "coverage": 6.143,
    "typed": 3.294,
    "bias": -6.579,
    "high": 0.9,
    "medium": 0.7,
}


def support(query: str, hits: list[Cite], embedder: Any) -> ContextSupport:
    """How well the best passages answer `query`: the best sentence's cosine similarity to
    it, and the largest share of its words one sentence holds."""
    from .ask import _words, answer_type, holds_type, sentences

    qwords = _words(query)
    sents = [s for h in hits[:SUPPORT_HITS] for _, _, s in sentences(h["quote"])]
    if not sents or not qwords:
        return {"similarity": 0.0, "coverage": 0.0, "typed": 0.0}
    covered = [len(qwords & _words(s)) / len(qwords) for s in sents]
    order = sorted(range(len(sents)), key=lambda i: -covered[i])[:SUPPORT_SENTENCES]
    qvec = embedder.embed_query(query[: embedder.reads(query)])
    sims = embedder.embed([sents[i] for i in order]) @ qvec
    kind = answer_type(query)
    typed = 1.0 if kind is None else max(holds_type(sents[i], kind, query, qwords) for i in order)
    return {
        "similarity": round(float(max(sims)), 4),
        "coverage": round(max(covered), 4),
        "typed": typed,
    }


def calibrated(sup: ContextSupport) -> tuple[float, str]:
    """The 0..1 score of the support and its label (see `CALIBRATION`)."""
    k = CALIBRATION
    z = (
        k["similarity"] * sup["similarity"]
        + k["coverage"] * sup["coverage"]
        + k["typed"] * sup["typed"]
        + k["bias"]
    )
    p = 1.0 / (1.0 + math.exp(-z))
    return round(p, 3), "HIGH" if p >= k["high"] else "MEDIUM" if p >= k["medium"] else "LOW"


def _reasoning(ents: list[ContextEntity], hits: list[Cite], named: set[str]) -> str:
    if not ents:
        return "No entity in the graph is mentioned by the passages that match the query."
    parts = [f"{len(hits)} passage(s) matched the query"]
    if hits:
        parts[0] += " (best: " + (hits[0].get("title") or hits[0]["path"]) + ")"
    n = [e["name"] for e in ents if e["id"] in named]
    if n:
        parts.append("the query names " + ", ".join(n[:5]))
    parts.append(
        "entities are ranked by how strongly those passages mention them: "
        + ", ".join(e["name"] for e in ents[:5])
    )
    return "; ".join(parts) + "."


def _answer(
    query: str,
    ents: list[ContextEntity],
    rels: list[ContextRelationship],
    hits: list[Cite],
    reasoning: str,
    sup: ContextSupport,
    method: str,
    warnings: list[str],
    linked: list[ContextLink],
) -> Context:
    score, label = calibrated(sup)
    return {
        "query": query,
        "entities": ents,
        "relationships": rels,
        "sources": [_source(h) for h in hits],
        "linked_notes": linked,
        "reasoning": reasoning,
        "confidence": label,
        "confidence_score": score,
        "support": sup,
        "method": method,
        "warnings": warnings,
    }


def _source(h: Cite) -> ContextSource:
    src: ContextSource = {
        "type": h["type"],
        "id": h["id"],
        "path": h["path"],
        "title": h["title"],
        "loc": h["loc"],
        "quote": h["quote"],
    }
    if "score" in h:
        src["score"] = h["score"]
    return src


def _ask_llm(
    folder: Folder,
    g: GraphStore,
    query: str,
    hits: list[Cite],
    candidates: list[str],
    rows: dict[str, Entity],
) -> tuple[list[str], str, str | None]:
    from ..text.llm import ChatClient, LLMError, config_from

    cfg = config_from(folder, role="chat")
    assert cfg is not None
    catalog = {rows[e]["name"]: e for e in candidates}
    passages = "\n\n".join(f"[{i + 1}] {h['quote'][:800]}" for i, h in enumerate(hits[:6]))
    msgs = [
        {
            "role": "system",
            "content": "You select entities from a knowledge graph that are "
            'relevant to a question. Answer with JSON only: {"entities": [names from the list], '
            '"reasoning": "one or two sentences", "confidence": "HIGH|MEDIUM|LOW"}.',
        },
        {
            "role": "user",
            "content": f"Question: {query}\n\nPassages:\n{passages}\n\n"
            f"Known entities:\n" + "\n".join(f"- {n}" for n in catalog),
        },
    ]

    def check(data: Any) -> tuple[list[str], str, str | None]:
        if not isinstance(data, dict) or not isinstance(data.get("entities"), list):
            raise ValueError('expected {"entities": [...]}')
        chosen = []
        for n in data["entities"]:
            if isinstance(n, str) and n in catalog and catalog[n] not in chosen:
                chosen.append(catalog[n])
        conf = data.get("confidence")
        conf = conf if conf in ("HIGH", "MEDIUM", "LOW") else None
        return chosen, str(data.get("reasoning") or ""), conf

    try:
        return ChatClient(cfg).chat_json(msgs, check)
    except LLMError:
        raise
    except (ValueError, TypeError) as e:  # pragma: no cover - chat_json wraps these
        raise LLMError(f"the LLM returned invalid JSON: {e}") from e
