"""`ok ask`: answer a question from the folder, every claim marked [N] with its cite object.

Retrieval is the hybrid search of `ok search`. With an LLM configured (any OpenAI-compatible
endpoint), the passages are numbered and the model answers from them only, marking what it
uses; markers that name no passage are dropped, so every [N] left maps to a citation. Without
an LLM the answer is extractive: the retrieved passages are split into sentences (for a
question, a short fragment such as a list item joins its sentence), each
sentence is scored against the question (embedding similarity, word overlap and the rank of
its passage; for a question, also whether it holds the kind of thing asked for: a name for
who, a date for when, a number for how many, an option for which option), and the best
one or two are quoted, a long one cut to the clauses that answer, each cited by its exact
character span.

Either way the answer says plainly when the folder does not hold enough to answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UsageError
from ..files.folder import Folder
from ..graph import indexing
from ..graph.protocol import GraphStore
from ..graph.search import Filters, Found, Recency, find
from ..records import Answer, AnswerBody, Cite
from ..text.llm import ChatPair, LLMError
from ..text.statements import contradiction, facts, sentences, stem
from .citations import Files, make

INSUFFICIENT = "The knowledge folder does not hold enough to answer this."
# said when retrieval found no passage at all: the search's floor (search.min_score) held
NO_GOOD_MATCH = "There is no good match: no passage in it is near the question."
MARKER = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
PASSAGE_CHARS = 1600

SYSTEM_PROMPT = """\
You answer questions using only the numbered passages from the user's knowledge folder.
Rules:
- Use only facts stated in the passages. No outside knowledge, no guesses.
- After every sentence that states a fact, cite the passage(s) it comes from as [N] \
(for example [2] or [1][3]). Cite only passage numbers that exist.
- If the passages do not answer the question, reply with a single line that starts with \
"INSUFFICIENT:" and says what is missing. If they answer only part of it, answer that part \
and say what is missing.
- If passages contradict each other on what is asked, say so and cite each side.
- Be concise: a few sentences, no preamble."""

# weights of the extractive sentence score, tuned on 300 SciFact train claims
# (bench/ask_eval.py --tune): word overlap adds nothing once similarity and rank are in
W_SIM, W_LEX, W_RANK = 0.7, 0.0, 0.3
# for a question (who, when, how many … ?), set on the dev half of bench/gold/qa
# (bench/qa_tune.py): the question's words count, each by how few of the retrieved
# sentences hold it (a word every sentence has tells none apart), and again, less the words
# of the passage's title, by how few of the passage's own sentences hold it (Q_DOC); the
# similarity is to the question less the title's words (what it asks of its subject); and
# holding the kind of thing it asks for counts (`answer_type`). A sentence with fewer than
# NEW_WORDS content words that neither the question nor the title has (a heading, a name
# alone) loses up to Q_BARE
Q_SIM, Q_LEX, Q_RANK, Q_TYPE, Q_DOC = 0.5, 1.5, 0.5, 1.0, 0.4
Q_BARE, NEW_WORDS = 0.6, 2
SENTENCE_HITS = 5  # sentences come from this many best passages
ASK_PER_DOC = 3  # of which one document may give this many (its answer is often not in its best)
MAX_CANDIDATES = 40  # and at most this many are embedded
MIN_SIMILARITY = 0.3  # below this best sentence similarity the folder "does not say"
MAX_SENTENCES = 2  # an extractive answer quotes at most this many sentences
NEAR_BEST = 0.9  # and a sentence after the first only when it scores this near the best
MAX_WORDS = 30  # and the sentences together have at most this many words
# for a question (set on the dev half of bench/gold/qa): a second sentence when it scores
# this near the best and the two together stay this short
Q_NEAR_BEST, Q_MAX_WORDS = 0.8, 20
SHORT_CHARS = 20  # a fragment shorter than this is no sentence of its own
UNIT_WORDS = 40  # but joins a neighbour while the two have at most this many words
TRIM_WORDS = 40  # a longer sentence is cut to its clauses that answer the question
# an answer whose passages disagree (`statements.contradiction`) says so, and its
# confidence is this much of what it would be
DISAGREE_FACTOR = 0.5
DISAGREE = "The sources disagree ({reason})."
UNCITED = "the model's answer cites no passage: nothing in it is checked against the folder"

_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "being",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "may",
        "might",
        "more",
        "most",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "should",
        "so",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)


def _words(text: str) -> set[str]:
    return {
        stem(w)[:6] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 1
    }


_WH = re.compile(
    r"^\s*(?:(?:for|in|at|on|by|from|to|with|under|of|through|during|after|before)\s+)?"
    r"(?P<w>who|whom|whose|when|where|how\s+(?:many|much|long|old)|"
    r"(?:in\s+)?(?:what|which)\s+(?:year|date|month|day|century|decade)|what|which|how|why)\b",
    re.I,
)
_NAME = re.compile(
    r"\b[A-Z][\w'’-]*(?:\s+(?:[A-Z][\w'’-]*|de|De|van|von|of))*\s+[A-Z][\w'’-]+|\b[A-Z]\w*\d\w*"
)
_YEAR = re.compile(
    r"\b(?:1[0-9]{3}|20[0-9]{2})s?\b|\b(?:January|February|March|April|May|June|July|"
    r"August|September|October|November|December)\b"
)
_NUMBER = re.compile(
    r"(?<![-\w])\d[\d,.]*\b|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"hundred|thousand|million|billion|single|dozen)\b",
    re.I,
)
# a command-line option, an identifier, a path, an environment variable, a call
_CODE = re.compile(
    r"(?<![\w-])(?:--?[A-Za-z][\w-]*(?:=\S+)?|\.?/[\w./-]+|[A-Za-z]\w*_\w+|[A-Z][A-Z0-9]{2,}\b"
    r"|`[^`\n]+`|\w+\(\d?\))"
)
_PLACE = re.compile(r"\b(?:in|at|into|to|from|next to|inside|near)\s+(?:the\s+|a\s+)?[A-Za-z]")


# what a "what/which NOUN" question asks for, by the nouns that follow its first word
_NOUN_TYPES = {
    "date": "year date month day century decade",
    "number": "version rate intake dose range level number percentage proportion speed size "
    "amount age count concentration duration weight temperature length frequency price "
    "ratio fraction share score value percent",
    "code": "option argument flag variable directive script command setting parameter macro "
    "switch key field",
    "person": "author person company organisation organization university institution "
    "scientist researcher",
}
_NOUN_KIND = {n: k for k, nouns in _NOUN_TYPES.items() for n in nouns.split()}
_HEAD = re.compile(r"^\s*(?:\w+\s+)?(?:what|which)\s+((?:[\w'’.-]+\s+){0,3}[\w'’.-]+)", re.I)


# who wrote or signs a text: a name with a mail address (a README's signature, a note's
# byline) counts this much more
_AUTHORED = re.compile(r"\b(?:wrote|written|writes|signs?|signed|authored|author)\b", re.I)
_SIGNED = re.compile(r"[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*)+\s*<[^<>@\s]+@[^<>\s]+>")
SIGNED = 1.0


def answer_type(question: str) -> str | None:
    """What a question asks for: person (who, which company), date (when, what year),
    number (how many, which version), place (where), code (which option or variable),
    expansion (what does ABC stand for); None for other what/which/how/why questions or a
    statement (a claim)."""
    m = _WH.match(question)
    if not m:
        return None
    w = " ".join(m.group("w").lower().split())
    if w in ("who", "whom", "whose"):
        return "person"
    if w == "when" or w.split()[-1] in ("year", "date", "month", "day", "century", "decade"):
        return "date"
    if w.startswith("how ") and w != "how":
        return "number"
    if w == "where":
        return "place"
    if _EXPANDS.search(question) and _acronym(question):
        return "expansion"
    head = _HEAD.match(question)
    if head and w in ("what", "which"):
        for word in head.group(1).lower().split():
            kind = _NOUN_KIND.get(word.rstrip("s")) or _NOUN_KIND.get(word)
            if kind:
                return kind
    return None


def is_question(text: str) -> bool:
    return text.rstrip().endswith("?") or _WH.match(text) is not None


def holds_type(
    sentence: str, kind: str | None, question: str, asked: set[str] | None = None
) -> float:
    """1 when `sentence` holds a thing of the kind asked for that the question does not
    name itself (a name for who, a year for when …), else 0. `asked`: the question's
    `_words`, when the caller has them."""
    if kind is None:
        return 0.0
    asked = _words(question) if asked is None else asked
    if kind == "person":  # another's full name (not "Ada Lovelace Day" for Ada Lovelace);
        # half for a capitalized word inside the sentence
        if any(not _words(f) & asked for f in _NAME.findall(sentence)):
            return 1.0
        capitals = re.findall(r"(?<=[a-z,;:]\s)[A-Z][a-z]+", sentence)
        return 0.5 if any(not _words(c) & asked for c in capitals) else 0.0
    if kind == "date":
        return float(any(_words(f) - asked for f in _YEAR.findall(sentence)))
    if kind == "number":
        return _number(sentence, question)
    if kind == "expansion":
        return float(_spells(sentence, _acronym(question)))
    if kind == "code":
        return float(any(f.lower() not in question.lower() for f in _CODE.findall(sentence)))
    return float(bool(_PLACE.search(sentence)))


_EXPANDS = re.compile(r"\bstands?\s+for\b|\bshort\s+for\b|\babbreviat", re.I)
_SMALL = frozenset(["of", "for", "the", "and", "a", "an", "in", "on", "to"])


def _acronym(question: str) -> str:
    """The letters of the first acronym in `question` ("US-SOMO" → "ussomo"), or ""."""
    for tok in re.findall(r"[\w-]+", question):
        if sum(ch.isupper() for ch in tok) >= 2 and not tok.isdigit():
            return "".join(ch for ch in tok.lower() if ch.isalpha())
    return ""


def _spells(sentence: str, letters: str) -> bool:
    """Whether `sentence` has a run of words whose initials spell `letters` in order, from
    its first (each word may stand for more: "UltraScan solution modeler" for US-SOMO)."""
    if len(letters) < 2:
        return False
    words = [w for w in re.findall(r"[A-Za-z][\w'-]*", sentence) if w.lower() not in _SMALL]
    need = min(3, len(letters))
    for i, w in enumerate(words):
        if w[0].lower() != letters[0]:
            continue
        at, run = 1, 1
        for nxt in words[i + 1 :]:
            found = letters.find(nxt[0].lower(), at)
            if found < 0:
                break
            at, run = found + 1, run + 1
        if run >= need:
            return True
    return False


_COUNTED = re.compile(r"\bhow\s+(many|long|much|old)\s+(\w+)?", re.I)
_TIME = re.compile(
    r"^(?:second|minute|hour|day|week|month|year|decade|century|ms|s|h|min|yr)s?$", re.I
)


def _number(sentence: str, question: str) -> float:
    """1 when `sentence` gives a number the question does not, followed by what is counted
    ("205 … cases" for "how many cases", "13 weeks" for "how long"); half for any other
    number it gives."""
    asked = question.lower()
    found = [m for m in _NUMBER.finditer(sentence) if m.group(0).lower() not in asked]
    if not found:
        return 0.0
    m = _COUNTED.search(question)
    if m is None or (m.group(1).lower() != "long" and not m.group(2)):
        return 1.0
    for f in found:
        after = re.findall(r"[A-Za-z]+", sentence[f.end() : f.end() + 40])[:3]
        if m.group(1).lower() == "long":
            if any(_TIME.match(w) for w in after):
                return 1.0
        elif any(stem(w.lower())[:5] == stem(m.group(2).lower())[:5] for w in after):
            return 1.0
    return 0.5


def confidence(sim: float) -> tuple[float, str]:
    """Map a cosine similarity of the evidence to the question to 0..1 and HIGH/MEDIUM/LOW."""
    return _labelled(float(min(1.0, max(0.0, (sim - 0.2) / 0.6))))


def _labelled(c: float) -> tuple[float, str]:
    return round(c, 3), "HIGH" if c >= 0.66 else "MEDIUM" if c >= 0.33 else "LOW"


def ask(
    folder: Folder,
    g: GraphStore,
    question: str,
    *,
    k: int | None = None,
    scope: str = "all",
    llm: Any = None,
    on_token: Callable[[str], None] | None = None,
    embedder: Any = None,
    max_sentences: int = MAX_SENTENCES,
    remember: bool = False,
) -> Answer:
    """Answer `question`: {question, answer, citations (each with `n`), confidence,
    confidence_label, insufficient, mode, model, retrieved}.

    Citations are made by `citations.make`, so `ok cite verify` checks them; `remember`
    keeps them where `ok cite open ID` finds them. Callers that may wait on an LLM should
    call `retrieve` with the graph open and `answer` after closing it, as the CLI does."""
    found = retrieve(folder, g, question, k=k, scope=scope, embedder=embedder)
    return answer(
        folder,
        question,
        found.hits,
        llm=llm,
        on_token=on_token,
        embedder=embedder,
        max_sentences=max_sentences,
        remember=remember,
        warning=found.warning,
    )


def retrieve(
    folder: Folder,
    g: GraphStore,
    question: str,
    *,
    k: int | None = None,
    scope: str = "all",
    embedder: Any = None,
    include_superseded: bool = False,
    recency: Recency | None = None,
) -> Found:
    """The passages an answer may use (the hybrid search of `ok search`, none when the best
    is under its floor, search.min_score), and what it read of a long question; `k`
    defaults to the `ask.k` setting. Expired notes are left out, and so are superseded
    ones unless `include_superseded`."""
    k = folder.setting("ask.k") if k is None else k
    if not question.strip():
        raise UsageError("the question is empty", "ask something")
    return find(
        folder,
        g,
        question,
        k=k,
        scope=scope,
        embedder=embedder or indexing.embedder(folder),
        per_doc=max(folder.setting("search.per_doc"), ASK_PER_DOC),
        min_score=folder.setting("search.min_score"),
        filters=Filters(include_superseded=include_superseded),
        recency=recency,
        tail_floor=folder.setting("search.tail_floor"),
    )


def answer(
    folder: Folder,
    question: str,
    hits: list[Cite],
    *,
    llm: Any = None,
    on_token: Callable[[str], None] | None = None,
    embedder: Any = None,
    max_sentences: int = MAX_SENTENCES,
    remember: bool = False,
    warning: str | None = None,
    best: float | None = None,
) -> Answer:
    """Answer from retrieved passages; needs the files, not the graph. `warning` (what
    retrieval left of a long question unread) goes with the answer. `llm` is an endpoint
    (`LLMConfig`) or a chat pair (`ChatPair`): its fallback model answers when `best`, the
    best passage's cosine similarity, is under the pair's floor, or when the chat model
    fails."""
    emb = embedder or indexing.embedder(folder)
    qvec = emb.embed_query(question[: emb.reads(question)])
    if isinstance(llm, ChatPair):
        out = _paired_answer(folder, question, hits, qvec, emb, llm, on_token, best)
    elif llm is not None:
        out = _llm_answer(folder, question, hits, qvec, emb, llm, on_token)
    else:
        out = _extractive(folder, question, hits, qvec, emb, max_sentences)
    if remember:
        from .citations import remember as keep

        for c in out["citations"]:
            kept = c.copy()
            kept.pop("n", None)
            keep(folder, kept)
    done: Answer = {"question": question, **out, "retrieved": len(hits)}
    said = [w for w in (warning, UNCITED if out.get("ungrounded") else None) if w]
    if said:
        done["warning"] = "; ".join(said)
    return done


def _insufficient(mode: str, model: str | None, no_match: bool = False) -> AnswerBody:
    return {
        "answer": INSUFFICIENT + (f" {NO_GOOD_MATCH}" if no_match else ""),
        "citations": [],
        "confidence": 0.0,
        "confidence_label": "LOW",
        "insufficient": True,
        "mode": mode,
        "model": model,
    }


# -- extractive --------------------------------------------------------------------------
@dataclass
class Candidate:
    """A sentence of a retrieved passage with the signals that score it."""

    hit: int  # index into the hits
    start: int
    end: int
    text: str
    lex: float  # share of the question's content words it holds (for a question, each
    # weighted by its inverse frequency among the retrieved sentences)
    prior: float  # its passage's search score, relative to the best passage
    sim: float = 0.0  # cosine similarity to the question
    kind: float = 0.0  # holds the kind of thing the question asks for (holds_type)
    question: bool = False  # scored as an answer to a question, not as a claim's evidence
    bare: float = 0.0  # 1 when it says nothing the question and its passage's title do not
    doclex: float = 0.0  # like lex, for the question's words less its passage's title,
    # weighted by how few of its passage's sentences hold each
    focus: float = 0.0  # cosine similarity to the question less its passage's title

    @property
    def score(self) -> float:
        if self.question:
            return (
                Q_SIM * self.focus
                + Q_LEX * self.lex
                + Q_DOC * self.doclex
                + Q_RANK * self.prior
                + Q_TYPE * self.kind
                - Q_BARE * self.bare
            )
        return W_SIM * self.sim + W_LEX * self.lex + W_RANK * self.prior


def candidates(
    question: str,
    hits: list[Cite],
    qvec: np.ndarray,
    emb: Any,
    max_hits: int = SENTENCE_HITS,
    max_cands: int = MAX_CANDIDATES,
) -> list[Candidate]:
    """Sentences of the best `max_hits` passages, best first. Only the `max_cands` most
    promising by words and rank are embedded: embedding is what an answer costs."""
    qwords = _words(question)
    asking = is_question(question)
    kind = answer_type(question)
    top = max(float(h.get("score") or 0.0) for h in hits) or 1.0
    said = [
        (i, float(h.get("score") or 0.0) / top, s, e, sent, _words(sent))
        for i, h in enumerate(hits[:max_hits])
        for s, e, sent in _units(h["quote"], int(h["loc"]["start"]), asking)
    ]
    weight = dict.fromkeys(qwords, 1.0)
    if asking:  # inverse frequency among these sentences
        n = len(said)
        weight = {w: math.log(1 + n / (1 + sum(w in x[5] for x in said))) for w in qwords}
    total = sum(weight.values()) or 1.0
    out: list[Candidate] = []
    titles = [_words(str(h.get("title") or "")) for h in hits[:max_hits]]
    inner = [
        _detail_weights(qwords - t, [x[5] for x in said if x[0] == i]) for i, t in enumerate(titles)
    ]
    for i, prior, s, e, sent, words in said:
        lex = sum(weight[w] for w in qwords & words) / total
        typed = holds_type(sent, kind, question, qwords) if asking else 0.0
        if kind == "person" and _AUTHORED.search(question) and _SIGNED.search(sent):
            typed += SIGNED
        new = len(words - qwords - titles[i])
        bare = max(0.0, 1 - new / NEW_WORDS) if asking else 0.0
        dw = inner[i]
        doclex = sum(dw[w] for w in dw.keys() & words) / (sum(dw.values()) or 1.0)
        out.append(
            Candidate(
                i, s, e, sent, lex, prior, kind=typed, question=asking, bare=bare, doclex=doclex
            )
        )
    out.sort(key=lambda c: -(c.lex + c.prior + c.kind))
    out = out[:max_cands]
    if out:
        vecs = emb.embed([c.text for c in out])
        for c, sim in zip(out, vecs @ qvec, strict=True):
            c.sim = c.focus = float(sim)
        if asking:
            _focus(question, out, vecs, [str(h.get("title") or "") for h in hits], emb)
    out.sort(key=lambda c: (-c.score, c.hit, c.start))
    return out


_HEADING = re.compile(r"^[ \t]*[#|]", re.M)
# the label of a structured abstract's section, left out of the sentence it starts
_SECTIONS = (
    "BACKGROUND|CONTEXT|OBJECTIVES?|PURPOSE|AIMS?|DESIGN|SETTING|PARTICIPANTS|METHODS?"
    "|INTERVENTIONS?|MEASUREMENTS|RESULTS|FINDINGS|INTERPRETATION|CONCLUSIONS?|FUNDING"
)
_LABEL = re.compile(rf"(?:{_SECTIONS})(?:\s+AND\s+(?:{_SECTIONS}))?\s+(?=[A-Z][a-z])")


def _units(text: str, base: int, asking: bool) -> list[tuple[int, int, str]]:
    """A passage's sentences (`statements.sentences`); for a question, each short fragment
    (a list item, an option, a label) is joined to the sentence before it, or at a unit's
    start to the one after it, while the two have at most `UNIT_WORDS` words."""
    if not asking:
        return sentences(text, base)
    out: list[tuple[int, int, str]] = []
    waiting: int | None = None  # the start of a short fragment no sentence took yet
    for s, e, sent in sentences(text, base, min_chars=1):
        if len(sent) >= SHORT_CHARS:
            label = _LABEL.match(sent)
            s += label.end() if label and waiting is None else 0
            start = s if waiting is None else waiting
            if waiting is not None and len(text[waiting - base : e - base].split()) > UNIT_WORDS:
                start = s
            out.append((start, e, text[start - base : e - base]))
            waiting = None
        elif (
            out
            and len(text[out[-1][0] - base : e - base].split()) <= UNIT_WORDS
            and not _HEADING.search(text[out[-1][1] - base : s - base])
        ):
            out[-1] = (out[-1][0], e, text[out[-1][0] - base : e - base])
        elif waiting is None:
            waiting = s
    return out


def _detail_weights(asked: set[str], said: list[set[str]]) -> dict[str, float]:
    """The question's words less its passage's title, each weighted by how few of the
    passage's own sentences hold it: what tells its sentences apart."""
    n = len(said)
    return {w: math.log(1 + n / (1 + sum(w in x for x in said))) for w in asked}


def _focus(
    question: str, cands: list[Candidate], vecs: np.ndarray, titles: list[str], emb: Any
) -> None:
    """Set each candidate's `focus`: its similarity to the question less the words of its
    passage's title (what the question asks of its subject, not the subject)."""
    stripped: dict[str, np.ndarray] = {}
    for c, vec in zip(cands, vecs, strict=True):
        title = _words(titles[c.hit])
        kept = " ".join(w for w in question.split() if not (_words(w) and _words(w) <= title))
        if not title or kept == question.strip() or not _words(kept):
            continue
        if kept not in stripped:
            stripped[kept] = emb.embed_query(kept)
        c.focus = float(vec @ stripped[kept])


def _extractive(
    folder: Folder,
    question: str,
    hits: list[Cite],
    qvec: np.ndarray,
    emb: Any,
    max_sentences: int,
) -> AnswerBody:
    cands = candidates(question, hits, qvec, emb) if hits else []
    if not cands:
        return _insufficient("extractive", None, no_match=not hits)
    near, most = NEAR_BEST, MAX_WORDS
    if is_question(question):
        _trim(cands[: max_sentences * 4], question)
        near, most = Q_NEAR_BEST, Q_MAX_WORDS
    best = cands[0]
    chosen = [best]
    for cand in cands[1:]:
        if (
            len(chosen) >= max_sentences
            or cand.score < near * best.score
            or cand.sim < MIN_SIMILARITY
        ):
            break
        if sum(len(c.text.split()) for c in (*chosen, cand)) > most:
            continue  # a second sentence only while the answer stays short
        if any(
            hits[c.hit]["doc_id"] == hits[cand.hit]["doc_id"] and c.start == cand.start
            for c in chosen
        ):
            continue  # the same sentence seen through two overlapping chunks
        chosen.append(cand)
    insufficient = best.sim < MIN_SIMILARITY
    if insufficient:
        chosen = [best]
    other = None if insufficient else _disagreement(best, cands, hits)
    if other is not None:  # both sides, cited, and nothing else
        chosen = [best, other[0]]
    files = Files(folder)
    cites = []
    parts = []
    for n, c in enumerate(chosen, 1):
        cite = make(folder, f"{hits[c.hit]['doc_id']}#char{c.start}-{c.end}", files=files)
        cite["n"] = n
        cites.append(cite)
        parts.append(f"{_flat(unmarked(cite['quote']))} [{n}]")
    answer = " ".join(parts)
    if insufficient:
        answer = f"{INSUFFICIENT} The closest passage: {answer}"
    conf, label = confidence(float(np.mean([c.sim for c in chosen])))
    if insufficient:
        conf, label = min(conf, 0.2), "LOW"
    out: AnswerBody = {
        "answer": answer,
        "citations": cites,
        "confidence": conf,
        "confidence_label": label,
        "insufficient": insufficient,
        "mode": "extractive",
        "model": None,
    }
    if other is not None:
        _disagreeing(out, other[1], other[2], [1, 2], DISAGREE.format(reason=other[2]))
    return out


_CLAUSE = re.compile(r"(?<=[,;:])\s+|\s+(?=\()|\s+(?:-|–|—)\s+")


def _trim(cands: list[Candidate], question: str) -> None:
    """Cut each long sentence down to its run of clauses, at most `TRIM_WORDS` words, that
    best answers `question`: the thing asked for (`holds_type`) and most of its words."""
    kind = answer_type(question)
    asked = _words(question)
    for c in cands:
        if len(c.text.split()) <= TRIM_WORDS:
            continue
        cuts = [0, *(m.end() for m in _CLAUSE.finditer(c.text)), len(c.text)]
        pieces = [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
        best: tuple[float, int, int] | None = None
        for i in range(len(pieces)):
            for j in range(i, len(pieces)):
                a, b = pieces[i][0], pieces[j][1]
                text = c.text[a:b].rstrip(" ,;:")
                if len(text.split()) > TRIM_WORDS:
                    break
                score = (
                    2 * holds_type(text, kind, question, asked)
                    + len(_words(text) & asked)
                    + len(text) / 1000
                )
                if best is None or score > best[0]:
                    best = (score, a, a + len(text))
        if best is None:
            continue
        _, a, b = best
        c.text, c.start, c.end = c.text[a:b], c.start + a, c.start + b


def _disagreement(
    best: Candidate, cands: list[Candidate], hits: list[Cite]
) -> tuple[Candidate, str, str] | None:
    """A sentence of another source, near the question, that says what `best` says and
    disagrees with it (`statements.contradiction`), with the kind and reason; None when
    no such sentence was retrieved."""
    mine = facts(best.text)
    owner = hits[best.hit]["doc_id"]
    for c in cands:
        if c.sim < MIN_SIMILARITY or hits[c.hit]["doc_id"] == owner:
            continue
        got = contradiction(mine, facts(c.text))
        if got is not None:
            return c, *got
    return None


def _disagreeing(out: AnswerBody, kind: str, reason: str, sides: list[int], say: str) -> None:
    """Say in `out` that its sources disagree: `say` first in the answer, the sides in
    `conflicts`, and a lower confidence."""
    out["answer"] = f"{say} {out['answer']}"
    out["conflicts"] = [{"kind": kind, "reason": reason, "citations": sides}]
    out["confidence"], out["confidence_label"] = _labelled(out["confidence"] * DISAGREE_FACTOR)


def _flat(text: str) -> str:
    return " ".join(text.split())


def unmarked(text: str) -> str:
    """`text` without [N] markers of its own (a distilled note cites its sources that way;
    in an answer or a prompt they would read as the answer's own citations)."""
    return keep_markers(text, set())


# -- with an LLM ---------------------------------------------------------------------------
def passages_prompt(hits: list[Cite]) -> str:
    """The retrieved passages, numbered from 1, as the model sees them."""
    blocks = []
    for n, h in enumerate(hits, 1):
        head = h.get("title") or h["path"]
        quote = unmarked(h["quote"])
        text = quote if len(quote) <= PASSAGE_CHARS else quote[:PASSAGE_CHARS] + "…"
        blocks.append(f"[{n}] ({head} — {h['path']})\n{text.strip()}")
    return "\n\n".join(blocks)


def markers(text: str) -> list[int]:
    """Passage numbers cited in `text`, in order of first appearance."""
    seen: list[int] = []
    for m in MARKER.finditer(text):
        for part in re.split(r"[,;]", m.group(1)):
            n = int(part)
            if n not in seen:
                seen.append(n)
    return seen


def keep_markers(text: str, valid: set[int]) -> str:
    """Drop [N] markers that name no passage (so every marker left maps to a citation)."""

    def fix(m: re.Match[str]) -> str:
        nums = [p.strip() for p in re.split(r"[,;]", m.group(1)) if int(p) in valid]
        return f"[{', '.join(nums)}]" if nums else ""

    return re.sub(r"[ \t]+([.,;:])(?=\s|$)", r"\1", MARKER.sub(fix, text)).strip()


def _paired_answer(
    folder: Folder,
    question: str,
    hits: list[Cite],
    qvec: np.ndarray,
    emb: Any,
    pair: ChatPair,
    on_token: Callable[[str], None] | None,
    best: float | None,
) -> AnswerBody:
    """The chat model's answer, or the fallback's when the evidence is weak or the chat
    model fails (then `fallback` says why)."""
    cfg, why = pair.pick(best)
    try:
        out = _llm_answer(folder, question, hits, qvec, emb, cfg, on_token)
    except LLMError as e:
        if pair.fallback is None or cfg is pair.fallback:
            raise
        cfg, why = pair.fallback, f"{pair.fast.model} failed: {e.message}"
        out = _llm_answer(folder, question, hits, qvec, emb, cfg, on_token)
    if why:
        out["fallback"] = why
    return out


def _llm_answer(
    folder: Folder,
    question: str,
    hits: list[Cite],
    qvec: np.ndarray,
    emb: Any,
    cfg: Any,
    on_token: Callable[[str], None] | None,
) -> AnswerBody:
    from ..text.llm import ChatClient

    if not hits:
        return _insufficient("llm", cfg.label, no_match=True)
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": f"Passages:\n\n{passages_prompt(hits)}\n\nQuestion: {question}",
        },
    ]
    client = ChatClient(cfg)
    text = client.chat(messages, stream=on_token is not None, on_token=on_token).strip()
    if text.upper().startswith("INSUFFICIENT"):
        reason = text.split(":", 1)[1].strip() if ":" in text else ""
        short = _insufficient("llm", cfg.label)
        short["answer"] = f"{INSUFFICIENT} {reason}".strip()
        return short
    valid = set(range(1, len(hits) + 1))
    cited = [n for n in markers(text) if n in valid]
    answer = keep_markers(text, valid)
    files = Files(folder)
    cites = []
    for n in sorted(cited):
        cite = make(folder, hits[n - 1]["id"], files=files)
        cite["n"] = n
        cites.append(cite)
    if cites:
        vecs = emb.embed([c["quote"] for c in cites])
        conf, label = confidence(float(np.mean(vecs @ qvec)))
    else:
        conf, label = 0.0, "LOW"  # an answer that cites nothing is not grounded
    out: AnswerBody = {
        "answer": answer,
        "citations": cites,
        "confidence": conf,
        "confidence_label": label,
        "insufficient": False,
        "mode": "llm",
        "model": cfg.label,
    }
    if not cites:
        out["ungrounded"] = True
        return out
    other = _passages_disagree(question, hits, set(cited))
    if other is not None:  # the other side is cited too
        n, m, kind, reason = other
        if m not in cited:
            cite = make(folder, hits[m - 1]["id"], files=files)
            cite["n"] = m
            cites.append(cite)
            cites.sort(key=lambda c: c["n"])
        say = DISAGREE.format(reason=f"{reason}: [{n}] against [{m}]")
        _disagreeing(out, kind, reason, [n, m], say)
    return out


def _passages_disagree(
    question: str, hits: list[Cite], cited: set[int]
) -> tuple[int, int, str, str] | None:
    """(n, m, kind, reason): a statement of cited passage `n` and one of passage `m`, of
    another source, that say the same thing about what is asked and disagree; None when no
    retrieved passages do."""
    asked = _words(question)
    said = [
        (n, h["doc_id"], facts(text))
        for n, h in enumerate(hits, 1)
        for _, _, text in sentences(h["quote"])
        if asked & _words(text)
    ]
    for n, owner, mine in said:
        if n not in cited:
            continue
        for m, other, theirs in said:
            got = contradiction(mine, theirs) if other != owner else None
            if got is not None:
                return n, m, *got
    return None
