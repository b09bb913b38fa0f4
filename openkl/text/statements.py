"""Statements: a passage's sentences, their content words, the numbers and dates they give,
and whether two sentences that say the same thing disagree (a different number or date, or
one negated). `ok mem conflicts` compares the statements about an entity this way, and
`ok ask` the statements an answer draws on."""

from __future__ import annotations

import re
from dataclasses import dataclass

# a unit runs to a blank line or to a line that starts a heading, list item or table row
_UNIT = re.compile(r"\S(?:.|\n(?![ \t]*\n)(?![ \t]*(?:[#|>*+-]|\d+[.)])\s))*")
# no sentence ends at a name's initial: "J.R. Bell", "Robert D. Hilliard", "Kogge, P. M."
_INITIALS = "".join(
    [r"(?<!\b[A-Z]\.[A-Z]\.)(?<![A-Z], [A-Z]\.)(?<![a-z], [A-Z]\.)"]
    + [rf"(?<!\b[A-Z][a-z]{{{n}}} [A-Z]\.)" for n in range(1, 12)]
)
_BOUND = re.compile(
    r"(?<=[.!?])(?<!\b[A-Z][a-z]\.)(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bal\.)"
    + _INITIALS
    + r"(?<=[^\s])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])"
)


_LEAD = re.compile(r"(?:\s|[*>+-]+(?=\s|$))*")


def stem(word: str) -> str:
    """`worked`, `works`, `working` → `work`: enough for words to meet across forms."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def sentences(text: str, base: int = 0, min_chars: int = 20) -> list[tuple[int, int, str]]:
    """Sentences of `text` as (start, end, sentence), offsets shifted by `base`.

    Paragraphs may be hard-wrapped; a blank line, a heading, a list item or a table row
    starts a new unit. Headings and table rules are not sentences; short fragments are
    skipped.
    """
    out = []
    for u in _UNIT.finditer(text):
        us, ue = u.start(), u.end()
        unit = text[us:ue]
        if unit.lstrip().startswith(("#", "|")):
            continue
        pos = 0
        for piece in [*_BOUND.split(unit)]:
            i = unit.find(piece, pos)
            pos = i + len(piece)
            # white space and list or quote marks (a mark before a letter is an option's:
            # "-Wall", "--disable-nls")
            lead = len(_LEAD.match(piece)[0])  # type: ignore[index]
            lead += len(re.match(r"(\d+[.)]\s+)?", piece[lead:]).group(0))  # type: ignore[union-attr]
            frag = piece[lead:].rstrip()
            if len(frag) < min_chars or not re.search(r"[A-Za-z]{3}", frag):
                continue
            s0 = us + i + lead
            out.append((base + s0, base + s0 + len(frag), frag))
    return out


_NEGATION = {"not", "no", "never", "none", "cannot", "without", "neither", "nor", "nothing"}
_STOP = {
    "the", "a", "an", "and", "or", "of", "in", "on", "at", "to", "for", "by", "with", "from",
    "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these",
    "those", "as", "has", "have", "had", "do", "does", "did", "will", "would", "can", "could",
    "should", "may", "might", "also", "than", "then", "there", "their", "they", "them", "he",
    "she", "his", "her", "we", "our", "you", "your", "which", "who", "whom", "what", "when",
    "where", "about", "into", "over", "after", "before", "each", "every", "all", "any", "so",
}  # fmt: skip
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_VALUE = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b"  # ISO dates
    rf"|\b\d{{1,2}}\s+(?:{_MONTHS})\s+\d{{4}}\b|\b(?:{_MONTHS})\s+\d{{1,2}},?\s+\d{{4}}\b"
    r"|\b\d+(?:[.,]\d+)*\s?%?",
    re.IGNORECASE,
)
# a word: letters first, then letters, digits, apostrophes or hyphens
WORD = re.compile(r"[^\W\d_](?:[\w'’-]*\w)?")
SAME = 0.6  # share of content words two sentences must have in common to say the same


def values(text: str) -> frozenset[str]:
    """The numbers and dates a text gives, normalized ("1,200" is "1200")."""
    return frozenset(
        " ".join(m.group(0).lower().replace(",", "").split()) for m in _VALUE.finditer(text)
    )


@dataclass(frozen=True)
class Facts:
    """What a sentence says, for comparing it with another."""

    words: frozenset[str]  # content words (stemmed, less names, stop words and negations)
    negated: bool
    values: frozenset[str]  # the numbers and dates it gives


def facts(text: str, names: set[str] | frozenset[str] = frozenset()) -> Facts:
    """A sentence's `Facts`; `names` (lower-cased words) are left out of its words, so that
    two statements about one entity are compared on what they say of it."""
    raw = [w.lower() for w in WORD.findall(_VALUE.sub(" ", text))]
    negated = any(w in _NEGATION or w.endswith("n't") for w in raw)
    words = frozenset(
        stem(w) for w in raw if w not in _STOP and w not in _NEGATION and w not in names
    )
    return Facts(words, negated, values(text))


def disagree(a: str, b: str) -> bool:
    """Whether two texts give different numbers or dates, or one negates and the other
    does not: then they are no duplicates, however alike their words."""
    fa, fb = facts(a), facts(b)
    return fa.values != fb.values or fa.negated != fb.negated


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """The share of words two sets have in common (Jaccard)."""
    return len(a & b) / len(a | b) if a or b else 0.0


def contradiction(a: Facts, b: Facts) -> tuple[str, str] | None:
    """(kind, reason) when two statements say the same thing (at least `SAME` of their
    content words agree) and disagree: different numbers or dates ("number"), or one
    negated and the other not ("negation")."""
    if overlap(a.words, b.words) < SAME:
        return None
    if a.values and b.values and not (a.values & b.values):
        return "number", f"{', '.join(sorted(a.values))} against {', '.join(sorted(b.values))}"
    if a.negated != b.negated and a.values == b.values:
        return "negation", "the same statement, once negated"
    return None
