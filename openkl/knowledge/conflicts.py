"""Conflicts: statements about the same entity, in different notes or documents, that
disagree (`ok mem conflicts`).

Each entity's evidence (the notes, and with `--in store|all` the passages, naming it) is
split into sentences, and sentences naming the entity are compared in pairs across
different sources. Without an LLM two signals flag a pair:

- **number**: the sentences say the same thing about the entity (most of their words
  agree) but give different numbers or dates: "the survey covers 12 transects" against
  "the survey covers 14 transects";
- **negation**: the same statement, once negated: "Kelpwatch uses divers" against
  "Kelpwatch does not use divers".

With an LLM configured, the pairs that share enough words go to the model, which says
whether they contradict and why. Every pair comes with a citation of each side.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..entities.queries import evidence_of_many, list_entities
from ..errors import OkError
from ..files.folder import Folder
from ..graph.protocol import GraphStore
from ..records import Cite, Conflict
from ..text.llm import ChatClient, LLMError
from ..text.statements import WORD, Facts, contradiction, facts, overlap, sentences
from .citations import Files, make

EVIDENCE = 200  # passages read per entity
PER_ENTITY = 60  # sentences compared per entity (pairs grow with its square)
NEAR = 0.3  # … to go to the LLM as a candidate
LLM_PAIRS = 50  # pairs sent to the LLM at most, per run


@dataclass(frozen=True)
class _Said:
    """One sentence naming an entity."""

    cite: Cite  # the passage it is in
    start: int
    end: int
    text: str
    facts: Facts  # its content words less the entity's names, negation, numbers and dates

    @property
    def owner(self) -> str:
        return self.cite["doc_id"]


def _sentences(c: Cite, names: set[str], named: re.Pattern[str]) -> Iterator[_Said]:
    """The sentences of a passage naming the entity (`named`; `names`: its names' words)."""
    for s, e, text in sentences(c["quote"], base=int(c["loc"]["start"])):
        if named.search(text):
            yield _Said(c, s, e, " ".join(text.split()), facts(text, names))


SYSTEM = (
    "You check a knowledge base for contradictions. Given two statements about the same "
    'entity, answer only JSON: {"conflict": true or false, "reason": "<one short sentence>"}. '
    "They conflict only when both cannot be true at once; different facts are no conflict."
)


def find(
    folder: Folder,
    g: GraphStore,
    *,
    scope: str = "memory",
    llm: ChatClient | None = None,
    min_confidence: float = 0.0,
) -> list[Conflict]:
    """Pairs of statements about one entity, from different sources, that disagree."""
    ents = list_entities(g, min_confidence=min_confidence)
    ents.sort(key=lambda e: (e["name"].lower(), e["id"]))
    files = Files(folder)
    out: list[Conflict] = []
    seen: set[tuple[str, str]] = set()
    asked = 0
    for i in range(0, len(ents), 256):
        batch = ents[i : i + 256]
        evidence = evidence_of_many(folder, g, [e["id"] for e in batch], EVIDENCE)
        for e in batch:
            cites = [
                c
                for c in evidence[e["id"]]
                if scope == "all" or (c["type"] == "memory") == (scope == "memory")
            ]
            if len({c["doc_id"] for c in cites}) < 2:
                continue
            names = sorted({e["name"], *e["aliases"]}, key=len, reverse=True)
            named = re.compile(
                r"(?<!\w)(?:" + "|".join(re.escape(n) for n in names) + r")(?!\w)", re.IGNORECASE
            )
            words = {w.lower() for n in names for w in WORD.findall(n)}
            said = [s for c in cites for s in _sentences(c, words, named)][:PER_ENTITY]
            for x in range(len(said)):
                for y in range(x + 1, len(said)):
                    a, b = said[x], said[y]
                    if a.owner == b.owner:
                        continue
                    ka, kb = f"{a.owner}:{a.start}", f"{b.owner}:{b.start}"
                    key = (ka, kb) if ka < kb else (kb, ka)
                    if key in seen:
                        continue  # the same two sentences, through another entity
                    got = contradiction(a.facts, b.facts)
                    if (
                        got is None
                        and llm is not None
                        and asked < LLM_PAIRS
                        and overlap(a.facts.words, b.facts.words) >= NEAR
                    ):
                        asked += 1
                        got = _ask(llm, e["name"], a, b)
                    if got is None:
                        continue
                    pair = _conflict(folder, files, e["name"], got, a, b)
                    if pair is not None:
                        seen.add(key)
                        out.append(pair)
    return out


def _ask(llm: ChatClient, entity: str, a: _Said, b: _Said) -> tuple[str, str] | None:
    try:
        text = llm.chat(
            [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Entity: {entity}\nA: {a.text}\nB: {b.text}"},
            ],
            json_mode=True,
            max_tokens=200,
        )
        reply = json.loads(text)
    except (LLMError, ValueError):
        return None  # the model gave no verdict: the pair is not flagged
    if isinstance(reply, dict) and reply.get("conflict") is True:
        return "llm", str(reply.get("reason") or "the model says they contradict")
    return None


def _conflict(
    folder: Folder, files: Files, entity: str, got: tuple[str, str], a: _Said, b: _Said
) -> Conflict | None:
    sides = []
    for s in (a, b):
        owner = s.cite["doc_id"] if s.cite["type"] == "chunk" else s.cite["id"]
        try:
            sides.append(make(folder, f"{owner}#char{s.start}-{s.end}", files=files))
        except OkError:
            return None  # a file changed under the graph: the next sync redoes it
    kind, reason = got
    return {"entity": entity, "kind": kind, "reason": reason, "a": sides[0], "b": sides[1]}
