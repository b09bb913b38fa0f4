"""Distillation: turning passages into memory notes that say where they came from.

`create` writes a note whose frontmatter lists its citations (`citations:`, the cite ids in
the order the body's [N] markers use) and the chunks or docs they quote (`derived_from:`), so
the graph gets `DERIVED_FROM` edges on every rebuild. `run` does the whole loop with the
configured LLM: search → one of the prompts below over the numbered passages → a note citing
the passages the model used.

The prompts are ours, kept short and strict: use only the material, mark the source of
every line, say nothing rather than guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BadInput, NotFound, UsageError
from ..files import notes as notes_mod
from ..files.folder import Folder
from ..graph import indexing
from ..records import Cite, DistillRun
from ..sync import indexer

_RULES = """\
Rules:
- Use only what the material says. Do not add outside knowledge or guesses.
- When the material is numbered passages ([1], [2], …), end every line with the number(s)
  of the passage(s) it rests on, like [2] or [1][3].
- If the material holds nothing for this task, reply with the single line: NOTHING
- No preamble and no closing remarks; output only the result."""


@dataclass(frozen=True)
class Prompt:
    name: str
    title: str
    description: str
    task: str
    output: str

    def text(self) -> str:
        """The full instructions (what `ok distill get-prompt` prints)."""
        return f"{self.task}\n\n{_RULES}\n\nOutput format:\n{self.output}\n"

    def render(self, material: str) -> str:
        """The instructions followed by the material to work on."""
        body = material.strip() or "(paste the material here)"
        return f"{self.text()}\nMaterial:\n\n{body}\n"


PROMPTS: dict[str, Prompt] = {
    p.name: p
    for p in (
        Prompt(
            "extract-facts",
            "Extract facts",
            "Atomic, checkable facts stated in the material, one per line, each cited.",
            "Extract the facts the material states: one self-contained claim per line, specific "
            "enough to check later (names, numbers, dates, conditions), with no pronouns that need "
            "the surrounding text to make sense. Merge duplicates; keep qualifiers such as "
            '"in mice" or "since 2019".',
            "- <fact> [N]\n- <fact> [N]",
        ),
        Prompt(
            "identify-patterns",
            "Identify patterns",
            "Recurring themes, trends or tensions across several passages.",
            "Identify patterns that recur across the material: themes that several passages share, "
            "trends, repeated causes and effects, and places where passages disagree. A pattern "
            "needs support from at least two passages; name them all.",
            "- **<pattern>**: <one or two sentences> [N][M]",
        ),
        Prompt(
            "summarize-insights",
            "Summarize insights",
            "A short summary of what matters in the material and why.",
            "Summarize the material for someone who will not read it: what it establishes, what "
            "follows from it, and what stays open. Prefer the non-obvious over the obvious.",
            "A title line, then 3-7 bullet points:\n# <title>\n- <insight> [N]",
        ),
        Prompt(
            "extract-relationships",
            "Extract relationships",
            "Typed relationships between named things (X --type--> Y), each cited.",
            "Extract relationships between the named things in the material (people, "
            "organizations, methods, systems, genes, places, concepts). Use short lowercase verb "
            "types such as uses, part_of, causes, inhibits, created_by, located_in, depends_on. "
            "Only relationships the material states; give a confidence from 0 to 1.",
            "- <subject> --<type>--> <object> (confidence <0-1>) [N]",
        ),
        Prompt(
            "extract-entities",
            "Extract entities",
            "Named entities with a type and a one-line description, each cited.",
            "Extract the named entities in the material: people, organizations, places, products, "
            "software, methods, chemicals, genes, diseases, concepts with a proper name. Use the "
            "most complete name as written; list other spellings as aliases.",
            "- <name> (<type>): <one-line description> [N]\n  aliases: <a>, <b> (only if any)",
        ),
        Prompt(
            "memory-synthesis",
            "Memory synthesis",
            "One durable memory note that merges what the material says about a subject.",
            "Write one memory note that a future reader (or agent) can rely on without the "
            "sources: what is known about the subject, the key facts with their conditions, how "
            "the pieces relate, and what is uncertain or contradicted. Keep it under 200 words.",
            "A first line that states the subject, then short paragraphs or bullets, every "
            "sentence cited [N].",
        ),
    )
}


def get_prompt(name: str) -> Prompt:
    if name not in PROMPTS:
        raise NotFound(f"no distillation prompt named {name!r}", "one of: " + ", ".join(PROMPTS))
    return PROMPTS[name]


def list_prompts() -> list[dict[str, str]]:
    return [
        {"name": p.name, "title": p.title, "description": p.description} for p in PROMPTS.values()
    ]


# -- cites -------------------------------------------------------------------------------
def _owner(cite: Cite) -> str:
    """What a citation points at in the graph: the chunk (or span) it names, else its doc."""
    ref = str(cite.get("ref") or "")
    return ref if "#char" in ref and not ref.startswith("m-") else str(cite["doc_id"])


# -- create / run ------------------------------------------------------------------------
def create(
    folder: Folder,
    text: str,
    cite_ids: Sequence[str | Mapping[str, Any]],
    *,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    extra: dict[str, Any] | None = None,
    via: str | None = None,
) -> tuple[notes_mod.Note, list[Cite]]:
    """Write a distilled memory citing `cite_ids` (ids or cite objects) and index it. The
    caller holds the writer lock. Returns the note and the cite objects, in the order of its
    [N] markers.

    Nothing is written unless every citation is checked against the files first (a quote
    that moved is cited where it is now; one that changed or is gone is refused) and the
    text cites them: a text of one claim without a marker rests on every citation given,
    and one of several claims none of which carries an [N] marker is refused."""
    from ..knowledge import citations as cit

    if not cite_ids:
        raise UsageError(
            "a distilled memory needs at least one citation",
            "pass the ids of the passages it rests on (from `ok search --json`)",
        )
    if not text.strip():
        raise BadInput("the memory's text is empty", "pass the distilled text")
    v = cit.Verifier(folder)
    cites = [  # all, before writing
        cit.resolve(folder, ref.strip() if isinstance(ref, str) else ref, v.files)
        for ref in cite_ids
    ]
    used = markers_in(text)
    if not used:
        text = _resting_on_all(text, len(cites))
        used = markers_in(text)
    for n in used:
        if not 1 <= n <= len(cites):
            raise BadInput(
                f"the text cites [{n}] but {len(cites)} citation(s) were given",
                "[N] refers to the N-th CITE_ID",
            )
    checked = [_checked(v, c, n) for n, c in enumerate(cites, 1)]
    cites = [cit.persist(folder, _citation(c), moved=moved) for c, moved in checked]
    meta = {
        "kind": "distilled",
        "citations": [c["id"] for c in cites],
        "derived_from": list(dict.fromkeys(_owner(c) for c in cites)),
        **(extra or {}),
    }
    note = notes_mod.add(folder, text, tags, topics, extra=meta)
    indexer.index_note(folder, note)
    assert note.path is not None
    folder.log_op(
        "distill.create",
        ids=[note.id],
        path=folder.rel(note.path),
        citations=meta["citations"],
        **({"via": via} if via else {}),
    )
    return note, cites


def _citation(cite: Cite) -> Cite:
    """A cite object given as a search hit (its id the passage's) under a citation id, so it
    can be kept under citations/; the hit's id stays as its `ref`."""
    from ..knowledge import citations as cit

    if cit.CITE_ID.match(cite["id"]):
        return cite
    loc = cite["loc"]
    return {
        **cite,
        "id": cit.cite_id(cite["doc_id"], loc["start"], loc["end"]),
        "ref": cite.get("ref") or cite["id"],
    }


def _checked(v: Any, cite: Cite, n: int) -> tuple[Cite, bool]:
    """`cite` as the files hold it now, and whether it moved: verified as it is, moved to
    where its quote is now, or refused (changed, missing)."""
    from ..knowledge import citations as cit

    res = v.verify(cite)
    if res["status"] == "verified":
        return cite, False
    if res["status"] == "moved":
        return cit.updated(cite, res, v.files), True
    said = res["diagnostics"][0] if res["diagnostics"] else "its quote is not in the files"
    raise BadInput(
        f"citation [{n}] ({cite['id']}) does not verify: it is {res['status']} ({said})",
        "search again and cite the passage as the files hold it now",
    )


# where one claim ends: a sentence's end, or a semicolon between two claims
_CLAIM_END = re.compile(r"(?<=[.!?;])\s+")


def _resting_on_all(text: str, n: int) -> str:
    """A text of one claim and no [N] marker rests on every citation given: the markers are
    written at its end. Several claims with none are refused: which rests on what is unsaid."""
    claims = [c for c in _CLAIM_END.split(text.strip()) if re.search(r"\w", c)]
    if len(claims) > 1:
        raise BadInput(
            f"the text makes {len(claims)} claims and none cites its sources: "
            "no claim carries an [N] marker",
            "end each claim with the number of the citation it rests on: [1] for the first",
        )
    body = text.rstrip()
    stop = body[-1] if body[-1] in ".!?" else ""
    return body[: len(body) - len(stop)] + " " + "".join(f"[{i}]" for i in range(1, n + 1)) + stop


def markers_in(text: str) -> list[int]:
    from ..knowledge.ask import markers

    return markers(text)


def run(
    folder: Folder,
    prompt: str,
    query: str,
    *,
    llm: Any,
    k: int = 8,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    scope: str = "all",
    on_token: Callable[[str], None] | None = None,
) -> DistillRun:
    """search → prompt over the numbered passages → a memory citing what the model used.

    The writer lock is taken only to write the note, not while the model thinks. Returns
    {note, citations, prompt, query, model}; `note` is None when the model found nothing.
    """
    from ..graph.search import search
    from ..knowledge.ask import keep_markers, markers, passages_prompt
    from ..text.llm import ChatClient

    p = get_prompt(prompt)
    with indexing.open_graph(folder) as g:
        hits = search(folder, g, query, k=k, scope=scope, embedder=indexing.embedder(folder))
    if not hits:
        return _run(p.name, query, llm.label, None, [], "the search found nothing")
    material = passages_prompt(hits)
    messages = [
        {"role": "system", "content": p.text()},
        {"role": "user", "content": f"Subject: {query}\n\nMaterial:\n\n{material}"},
    ]
    text = ChatClient(llm).chat(messages, stream=on_token is not None, on_token=on_token).strip()
    if not text or text.upper().startswith("NOTHING"):
        return _run(p.name, query, llm.label, None, [], "the model found nothing")
    valid = set(range(1, len(hits) + 1))
    used = [n for n in markers(text) if n in valid]
    if not used:  # a note whose claims cite nothing is not written
        return _run(p.name, query, llm.label, None, [], "the model cited none of the passages")
    # renumber so that [i] in the note is its i-th citation
    renum = {old: i for i, old in enumerate(used, 1)}
    body = re.sub(
        r"\[(\d+(?:\s*[,;]\s*\d+)*)\]",
        lambda m: "".join(
            f"[{renum[int(x)]}]" for x in re.split(r"[,;]", m.group(1)) if int(x) in renum
        ),
        keep_markers(text, valid),
    )
    ids = [hits[n - 1]["id"] for n in used]
    with folder.write_lock("ok distill run"):
        note, cites = create(
            folder,
            body,
            ids,
            tags=tags,
            topics=topics,
            extra={"prompt": p.name, "query": query, "model": llm.model},
        )
    numbered: list[Cite] = [{**c, "n": i} for i, c in enumerate(cites, 1)]
    return _run(p.name, query, llm.label, dict(note.as_dict(folder)), numbered)


def _run(
    prompt: str,
    query: str,
    model: str,
    note: dict[str, Any] | None,
    citations: list[Cite],
    reason: str | None = None,
) -> DistillRun:
    out: DistillRun = {
        "prompt": prompt,
        "query": query,
        "model": model,
        "note": note,
        "citations": citations,
    }
    if reason is not None:
        out["reason"] = reason
    return out
