"""The LLM extractor: typed entities and relationships from any OpenAI-compatible endpoint.

Used when `entities.extractor: llm` (and `llm.*` is configured). Each chunk is one chat call
asking for JSON; the reply is validated, retried once when invalid (`ChatClient.chat_json`),
and cached by chunk hash + prompt version + model. A chunk whose call fails falls back to
the local extractor with a warning, so indexing never stops on a flaky endpoint.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ..files.folder import Folder
from ..text.llm import model_of
from .local import key_of

PROMPT_VERSION = "llm-1"
MAX_CHARS = 6000

SYSTEM = (
    "You extract a knowledge graph from a passage. Reply with JSON only, shaped as "
    '{"entities": [{"name": str, "type": str, "description": str, "confidence": 0..1}], '
    '"relationships": [{"from": str, "to": str, "type": str, "confidence": 0..1}]}. '
    "Entities are the people, organizations, places, concepts, systems, code identifiers and "
    "references a careful reader would list; use short canonical names. Types: Person, "
    "Organization, Place, Concept, Process, System, Code, Reference, Event, Artifact. "
    "Relationship types are snake_case verbs (uses, causes, part_of, created, is_a, …); "
    "both ends must be entity names from your list."
)


def extractor_id(folder: Folder) -> str:
    return f"{PROMPT_VERSION}:{model_of(folder, 'extract') or 'none'}"


def validate(data: Any) -> dict[str, Any]:
    """Check and normalize an LLM reply into the extraction result shape."""
    if not isinstance(data, dict):
        raise ValueError("the reply is not a JSON object")
    ents, rels = data.get("entities", []), data.get("relationships", [])
    if not isinstance(ents, list) or not isinstance(rels, list):
        raise ValueError("entities and relationships must be arrays")
    m, d, names = [], {}, {}
    for i, e in enumerate(ents):
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise ValueError(f"entities[{i}] needs a name")
        k = key_of(e["name"])
        if not k:
            continue
        c = e.get("confidence", 0.8)
        c = float(c) if isinstance(c, (int, float)) and not isinstance(c, bool) else 0.8
        c = min(max(c, 0.0), 0.95)
        typ = str(e.get("type") or "Concept")[:40]
        names[k] = e["name"]
        m.append([k, " ".join(e["name"].split()), typ, round(c, 4), i, i, 1])
        if isinstance(e.get("description"), str) and e["description"].strip():
            d[k] = [e["description"].strip()[:400], c, i]
    r = []
    for i, x in enumerate(rels):
        if not isinstance(x, dict) or not all(
            isinstance(x.get(f), str) for f in ("from", "to", "type")
        ):
            raise ValueError(f"relationships[{i}] needs from, to and type")
        a, b = key_of(x["from"]), key_of(x["to"])
        if a not in names or b not in names or a == b:
            continue  # dangling ends are dropped
        c = x.get("confidence", 0.7)
        c = float(c) if isinstance(c, (int, float)) and not isinstance(c, bool) else 0.7
        typ = "_".join(x["type"].lower().split())[:40] or "related_to"
        r.append([a, b, typ, round(min(max(c, 0.0), 0.95), 4), 0])
    return {"m": m, "r": sorted(r), "a": [], "d": d}


def extract_many(folder: Folder, todo: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """[(cache key, text)] → [(cache key, result JSON)]; failures fall back to local results.

    Fallback results are returned but not cached under the LLM key, so a later run retries.
    """
    from ..text.llm import ChatClient, LLMError, config_from
    from . import local as entity_local

    out: list[tuple[str, str]] = []
    client = None
    failed = 0
    last = ""
    try:
        cfg = config_from(folder, role="extract")
        assert cfg is not None
        client = ChatClient(cfg)
    except LLMError as e:
        last = str(e)
    for key, text in todo:
        res = None
        if client is not None:
            try:
                res = client.chat_json(
                    [
                        {"role": "system", "content": SYSTEM},
                        {"role": "user", "content": text[:MAX_CHARS]},
                    ],
                    validate,
                )
            except LLMError as e:
                failed += 1
                last = str(e)
        if res is None:
            local = entity_local.extract(text).as_json()
            out.append(("fallback:" + key, json.dumps(local, ensure_ascii=False)))
        else:
            out.append((key, json.dumps(res, ensure_ascii=False)))
    if client is None or failed:
        n = len(todo) if client is None else failed
        print(
            f"warning: LLM entity extraction failed for {n} chunk(s), used the local "
            f"extractor instead ({last})",
            file=sys.stderr,
        )
    return out
