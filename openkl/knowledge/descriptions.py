"""Entity descriptions: one sentence saying what an entity is, cited to where it is said.

Every entity that its evidence (the chunks and notes naming it) describes gets one. With
`entities.describer: llm` and an LLM configured, the model writes it from the evidence and
cites the passage it used; otherwise it is the best describing sentence of the evidence,
taken verbatim, best kind first:

1. "X is a …", "X (…) was …", "X refers to/means/stands for/is defined as …";
2. the first sentence of a section (or a document) titled with X's name;
3. "X, a …", "the cytokine X", "X, also known as Y", "a … called X", "X, which …",
   "X (a …)", "X: a …" (a glossary line), "cytokines such as X";
4. the first sentence naming X under a heading that names X;
5. "long form (X)" for an entity named by its abbreviation.

When no sentence says what X is, the entity gets a mention instead: a sentence that only
names it (`MENTIONS`, the kinds readers judged a description of the entity less than half
the time), best kind first: what X does ("X provides …") or its role ("X is required for
…", "X can …"); X as the subject of its sentence; the first sentence of a paragraph naming
X at least twice (`paragraph`); else a sentence naming X outside parentheses and lists: one
placing it ("X (LCS) at MIT") first, then one naming it near its start, then the rest, a
study's procedure ("We …", "Using …") last (`context`). Surfaces show a mention as where
the entity is named (`mention`), never as what it is (`description`): `split`.
Without the LLM describer, a description the entity already has (written by the entity
extractor, or carried in by an AKS bundle) is kept, cited to the passage saying it word for
word, else to the entity's strongest evidence. Descriptions are cached like pages, by the
entity's graph version, so one is recomputed exactly when its entity, relationships or
documents change.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from ..entities.queries import EntityReader
from ..errors import OkError
from ..files.folder import Folder, atomic_write
from ..graph.protocol import GraphStore
from ..records import Cite, Description, DescriptionCite, EntityDetail
from ..text.llm import ChatClient, config_from, model_of
from ..text.statements import sentences
from .ask import markers, passages_prompt, unmarked
from .citations import Files, make

METHOD = "14"  # bump when how a description is chosen changes, so cached ones are redone
EVIDENCE = 20  # passages read per entity
WIDTH = 400  # a longer sentence is no description

_COPULA = (
    r"(?:is defined as|are defined as|stands for|is short for|is an abbreviation (?:of|for)|"
    r"is|was|are|were|refers to|means|denotes|describes)"
)
_HEADING = re.compile(
    r"^(?:#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*|([^\n]{1,80})\n[ \t]*(?:={3,}|-{3,}|~{3,})[ \t]*)$",
    re.MULTILINE,
)
# not a sentence to describe with: a heading rule, a badge or link row, a bare reference
_NOT_PROSE = re.compile(r"={3,}|-{4,}|~{3,}|\[!\[|\]\(https?:|^\W*\[\d+\]")


# the kinds of sentence that only name an entity: a mention, not a description
MENTIONS = frozenset({"does", "role", "subject", "paragraph", "context"})


def split(d: Description | None) -> tuple[Description | None, Description | None]:
    """(description, mention) of what `describe` found: a sentence of a kind in `MENTIONS`
    is the mention, any other the description; the other is None."""
    if d is None:
        return None, None
    return (None, d) if d["method"] in MENTIONS else (d, None)


def _cache_path(folder: Folder, eid: str) -> Path:
    h = hashlib.sha256(eid.encode()).hexdigest()[:20]
    return folder.cache_dir / "descriptions" / f"{h}.json"


def describe(
    folder: Folder, g: GraphStore, ids: list[str], by: str | None = None
) -> dict[str, Description | None]:
    """The description of each entity (None when its evidence says nothing defining), from
    the cache when the entity's graph version is unchanged. `by` (`local` or `llm`) says who
    describes, for this call (default: entities.describer)."""
    if not ids:
        return {}
    reader = EntityReader(g, ids)
    return describe_with(
        folder, reader, ids, lambda stale: reader.details(folder, stale, EVIDENCE), by
    )


def describe_with(
    folder: Folder,
    reader: EntityReader,
    ids: list[str],
    details: Callable[[list[str]], Mapping[str, EntityDetail]],
    by: str | None = None,
) -> dict[str, Description | None]:
    """`describe` for entities `reader` has read; `details(ids)` gives the details (with
    `EVIDENCE` passages) of those not cached."""
    out: dict[str, Description | None] = {}
    stale: dict[str, str] = {}
    method = describer(folder, by)
    for eid in ids:
        version = f"{reader.version(eid)}:{method}"
        try:
            cached = json.loads(_cache_path(folder, eid).read_text(encoding="utf-8"))
            if cached.get("version") == version:
                out[eid] = cached["description"]
                continue
        except (OSError, ValueError, KeyError):
            pass
        stale[eid] = version
    if stale:
        got = details(list(stale))
        files = Files(folder)
        llm = _llm(folder) if method.startswith("llm") else None
        for eid, version in stale.items():
            d = describe_detail(folder, got[eid], files, llm)
            # a cache: losing it costs a recomputation, so it is not synced to disk
            atomic_write(
                _cache_path(folder, eid),
                json.dumps({"version": version, "description": d}, ensure_ascii=False),
                durable=False,
            )
            out[eid] = d
    return {eid: out[eid] for eid in ids}


def describer(folder: Folder, by: str | None = None) -> str:
    """Who describes entities, and how (`by`, else entities.describer): part of the cache
    keys of descriptions and pages."""
    if (by or folder.setting("entities.describer")) == "llm":
        return f"llm:{model_of(folder, 'extract') or 'none'}:{METHOD}"
    return f"local:{METHOD}"


def _llm(folder: Folder) -> ChatClient:
    cfg = config_from(folder, required=True, role="extract")
    assert cfg is not None  # required: an unconfigured LLM raised
    return ChatClient(cfg)


def describe_detail(
    folder: Folder, d: EntityDetail, files: Files, llm: ChatClient | None = None
) -> Description | None:
    """The description of one entity from its detail (its evidence in `mentions`)."""
    evidence = d["mentions"]
    if not evidence:
        return None
    if llm is not None:
        got = _from_llm(folder, d, llm, files)
        if got is not None:
            return got
    if d["description"]:
        said, span = _where_said(d["description"], evidence)
        cite = _cite(folder, said, files, span)
        return {"text": d["description"], "method": "compiled", "cite": cite} if cite else None
    return extract(folder, d["name"], d["aliases"], evidence, files)


def _where_said(text: str, evidence: list[Cite]) -> tuple[Cite, tuple[int, int] | None]:
    """The passage saying `text` word for word and its span there; else the strongest
    passage, whole."""
    for c in evidence:
        i = c["quote"].find(text)
        if i >= 0:
            base = int(c["loc"]["start"])
            return c, (base + i, base + i + len(text))
    return evidence[0], None


def _cite(
    folder: Folder, c: Cite, files: Files, span: tuple[int, int] | None = None
) -> DescriptionCite | None:
    """The citation a description carries: of the passage `c`, or of a span of its file."""
    owner = c["doc_id"] if c["type"] == "chunk" else c["id"]
    ref = f"{owner}#char{span[0]}-{span[1]}" if span else c["id"]
    try:
        got = make(folder, ref, files=files)
    except OkError:
        return None  # the file changed under the graph: the next sync redoes it
    return _short(got)


def _short(c: Cite) -> DescriptionCite:
    return {
        "id": c["id"],
        "ref": c.get("ref", c["id"]),
        "doc_id": c["doc_id"],
        "path": c["path"],
        "loc": c["loc"],
        "quote": c["quote"],
    }


# what follows a copula when it states a passing fact, not what the thing is: a participle
# ("was detected", "is licensed"), a negation or an adverb of degree
_NOT_DEFINING = re.compile(
    r"(?:not|also|then|still|now|often|usually|significantly|highly|more|less|most|"
    r"available|able|present|absent|associated|\w+ed|shown|seen|found|made|done|given|taken|"
    r"run|held|kept|set|written|known(?!\s+as))\b",
    re.IGNORECASE,
)
# a third-person present verb after the name: what it does in general ("Tk provides …"),
# not an event ("arrived on Tuesday")
_DOES = r"(?:[a-z]+(?:s|es)|has|contains|consists)"
_NOT_DOES = re.compile(r"(?:was|has|is|this|its|as|us|plus|thus|less|across|pass|class)$")


# a word of the lowercase noun phrase before a name: not a preposition, conjunction,
# determiner or -ing form ("a consortium including MIT", "the fix for CVE-…")
_NOUN = (
    r"(?!(?:the|and|for|from|with|into|onto|that|this|these|those|which|including|between|"
    r"among|about|after|before|under|over|its|their|his|her|our|than|like|via|per)\b)"
    r"(?![a-z-]+ing\b)[a-z][a-z-]{2,}"
)


def _patterns(alt: str, named_well: bool) -> list[tuple[str, re.Pattern[str]]]:
    """The defining patterns for names `alt`, best first. `named_well`: the entity has a
    capitalised or symbol name, so "the oncogene Dvl1" can introduce it."""
    lead = r"^(?:the |an? )?"
    paren = r"(?:\s*\([^)]{0,80}\))?"
    begins = r"(?<![\w-])"  # the name starts here: not inside a longer word (Cas9 in CRISPR-Cas9)
    # an appositive: a short noun phrase, not a clause with its own verb
    phrase = (
        r"(?:(?!\b(?:is|are|was|were|has|have|had|will|would|can|could|may|might|must|should|"
        r"be)\b)[^,.;]){3,80}"
    )
    called = r"(?:also |commonly |often |now |later |formerly |hereafter |henceforth )?(?:known as|called|termed|named|dubbed|referred to as|abbreviated(?: as)?)"
    out = [
        (
            "defining",
            re.compile(
                rf"{lead}(?:{alt}){paren},?\s+{_COPULA}\s+(?!{_NOT_DEFINING.pattern})",
                re.IGNORECASE,
            ),
        ),
        ("apposition", re.compile(rf"{lead}(?:{alt}){paren},\s+(?:an?|the)\s(?=[a-z]){phrase},")),
        (
            "copula",
            re.compile(rf"{begins}(?:{alt}){paren}\s+{_COPULA}\s+(?:an?|the)\s", re.IGNORECASE),
        ),
        (
            "apposition",
            re.compile(rf"{begins}(?:{alt}){paren},\s+(?:an?|the)\s(?=[a-z]){phrase}[,.;]"),
        ),
        # "X, also known as Y", "a … known as X", "Y (hereafter X)"
        (
            "known as",
            re.compile(
                rf"{begins}(?:(?:{alt}),?\s+{called}\s|{called}\s+[\"'“‘]?(?:the |an? )?(?:{alt})(?!\w))",
                re.IGNORECASE,
            ),
        ),
        ("relative", re.compile(rf"{begins}(?:{alt}){paren},\s+(?:which|who)\s")),
        # "X (a …)": a parenthesis saying what it is
        ("apposition", re.compile(rf"{begins}(?:{alt})\s*\((?:an?|the)\s[^)]{{3,80}}\)")),
    ]
    if named_well:
        # "the transcription factor NF-κB", "the hacker Jon Postel": one to three lowercase
        # nouns right before the name (no adjective first), the name ending the phrase
        out.append(
            (
                "apposition",
                re.compile(
                    r"\b(?:the|an?)\s+(?![a-z-]+(?:ed|ing|ous|ive|ique|ic|ful|less|able|ible|ary|"
                    r"er|est|ly)\b)(?!(?:same|first|last|other|new|present|current|main|"
                    r"following|above|two|three|four|five|whole|entire|original|old|big|"
                    r"small|large|good|bad|high|low|full|real|true|late|early|mid)\b)"
                    rf"(?:{_NOUN}\s+){{1,3}}(?:{alt})(?![\w-])"
                    r"(?=\s*[,.;:)]|\s+(?:is|was|are|were|has|had|and|or|in|on|of|to|from|"
                    r"with|by|for|that|which|who)\b)"
                ),
            )
        )
    # a kind named with its members: "cytokines such as IL-6 and TNF", "TNF and other
    # cytokines"
    out.append(
        (
            "kind of",
            re.compile(
                r"\b[a-z][a-z-]{2,}s,?\s+(?:such as|including|e\.g\.,?|especially|notably)\s+"
                rf"(?:[^.;:()]{{0,80}}?(?:,\s*|\s(?:and|or)\s+))?(?:the\s+)?(?:{alt})(?![\w-])"
                rf"|{begins}(?:{alt})(?:\s*,\s*[^,.;:()]{{1,40}}){{0,4}},?\s+(?:and|or)\s+"
                r"(?:many\s+|several\s+|some\s+)?other\s+[a-z]"
                # "a more general tool like sudo"
                rf"|\b(?:an?|the)\s+(?:[a-z-]+\s+){{0,3}}[a-z-]{{3,}}\s+(?:like|such as)\s+"
                rf"(?:the\s+)?(?:{alt})(?![\w-])"
            ),
        )
    )
    # a glossary line: "cmake The cross-platform build system", "datrie - a trie library"
    out.append(("glossary", re.compile(rf"^(?:{alt})\s*(?:[:–—-]\s*|\s)(?:A|An|The|a|an)\s+[a-z]")))
    # an apposition running into a clause: "X, an efficient indexing method in which …"
    out.append(
        (
            "apposition",
            re.compile(
                rf"{begins}(?:{alt}){paren},\s+(?:an?|the)\s(?=[a-z]){phrase}?\s(?:that|which|"
                r"who|whose|where|in which|used|for|of|with|from|in|on|by|to|based)\b"
            ),
        )
    )
    # what it does: "Tk provides …", "The survey counts urchins …"
    out.append(("does", re.compile(rf"{lead}(?:{alt}){paren}\s+(?:\w+ly\s+)?{_DOES}\b")))
    # its role, said of it as the subject: "Dvl3 is required for …", "SNAP can …"
    out.append(
        (
            "role",
            re.compile(
                rf"{_OPENER}(?:{alt}){paren}\s+(?:\w+ly\s+)?(?:(?:is|are)\s+(?:\w+ly\s+)?"
                r"(?:required|involved|essential|important|critical|crucial|necessary|"
                r"responsible|needed|used|implicated|expressed|thought|believed|considered|"
                r"known|present|found|located|common|rare|associated|linked|related|capable|"
                r"one|part|available|designed|intended|based|written|maintained|distributed|"
                r"installed|licensed|provided)\b|(?:has|have)\s+been\s|(?:can|may|could|might|"
                r"must|will|should|does|do)\s+(?!not\b)\w+|(?:plays?|acts?|serves?|functions?|"
                r"allows?|enables?|lets?|supports?|prevents?|regulates?|controls?|mediates?|"
                r"encodes?|binds?|causes?|remains?|appears?|became|becomes?|began|became)\b)",
                re.IGNORECASE,
            ),
        )
    )
    # the subject of its sentence, a verb after it: "OpenSSH contains support for …"
    out.append(
        (
            "subject",
            re.compile(
                rf"(?i:{_OPENER})(?i:{alt}){paren}\s+(?!(?:and|or|of|in|on|at|to|for|with|by|"
                r"from|as|than|that|which|who|the|a|an)\b)[a-z]{2,}\b"
            ),
        )
    )
    return out


# a sentence's opening before its subject: a linking adverb, an article
_OPENER = (
    r"^(?:(?:thus|however|moreover|furthermore|in addition|here|therefore|importantly|"
    r"notably|additionally|finally|similarly|consequently|indeed|in contrast|in particular|"
    r"today|now|originally|currently),?\s+)?(?:the |an? )?"
)


def _long_form(name: str, names: list[str]) -> re.Pattern[str] | None:
    """The span "long form (SHORT)" or "SHORT (long form)" for an entity named by its short
    form: what the abbreviation stands for (for the long form it says nothing)."""
    if " " in name or len(name) > 12:
        return None
    shorts = [n for n in names if " " not in n and len(n) <= 12]
    longs = [n for n in names if " " in n or len(n) > 12]
    if not shorts or not longs:
        return None
    s = "|".join(re.escape(n) for n in shorts)
    long_ = "|".join(re.escape(n) for n in longs)
    return re.compile(
        rf"(?<![\w-])(?:(?:{long_})\s*\(\s*(?:{s})\s*\)|(?:{s})\s*\(\s*(?:{long_})\s*\))",
        re.IGNORECASE,
    )


# a section label or a glossary's category tag a sentence opens with ("BACKGROUND …",
# "<company> …"): not part of the description
_LABEL = re.compile(
    r"^(?:<[a-z][\w ,-]{1,30}>\s+|(?:BACKGROUND|RESULTS?|METHODS?|CONCLUSIONS?|OBJECTIVES?|"
    r"PURPOSE|DESIGN|SETTING|PARTICIPANTS|INTRODUCTION|AIMS?|FINDINGS|INTERPRETATION|CONTEXT|"
    r"IMPORTANCE|SUMMARY|RATIONALE|SIGNIFICANCE|ABSTRACT|METHODOLOGY|PATIENTS|SUBJECTS|"
    r"MATERIALS AND METHODS|PRINCIPAL FINDINGS|MAIN OUTCOME MEASURES?|MEASUREMENTS|"
    r"INTERVENTIONS?|EXPOSURES?|DESCRIPTION|NAME|SYNOPSIS|OVERVIEW)\b:?\s+(?=\S))"
)
# a document's title: a short first line followed by a blank line (after at most one short
# line more, its index key: "Alan Turing\nTuring, Alan\n\n…")
_TITLE_LINE = re.compile(r"([^\n#][^\n]{0,59})\n(?:[^\n]{1,40}\n)?[ \t]*\n")


def _key(text: str) -> str:
    """A name or heading compared loosely: case, punctuation and spacing aside."""
    return " ".join(re.sub(r"[^\w]+", " ", text.casefold()).split())


class _Best:
    """The best candidate sentence so far: the lowest (rank, passage order, length)."""

    def __init__(self) -> None:
        self.key: tuple[int, int, int] | None = None
        self.at: tuple[Cite, int, int, str] | None = None

    def offer(self, rank: float, order: int, c: Cite, s: int, e: int, kind: str) -> None:
        key = (int(rank * 4), order, e - s)
        if self.key is None or key < self.key:
            self.key, self.at = key, (c, s, e, kind)


def extract(
    folder: Folder, name: str, aliases: list[str], evidence: list[Cite], files: Files
) -> Description | None:
    """The best describing sentence of the evidence, cited to its exact span."""
    names = sorted({n for n in (name, *aliases) if n.strip()}, key=len, reverse=True)
    if not names:
        return None
    alt = "|".join(re.escape(n) for n in names)
    named_well = any(re.search(r"[A-Z0-9]", n) for n in names)
    patterns = _patterns(alt, named_well)
    heading = next(i for i, (k, _) in enumerate(patterns) if k == "does")  # before "does"
    last = len(patterns)
    long_form = _long_form(name, names)
    named = re.compile(rf"(?<!\w)(?:{alt})(?!\w)", re.IGNORECASE)
    keys = {_key(n) for n in names}
    best, weak = _Best(), _Best()  # a description; a mention, kept only without one
    for order, c in enumerate(evidence):
        doc = _Layout(files, c)
        seen: set[int] = set()  # sections whose first sentence naming the entity was seen
        opened: set[int] = set()  # sections whose first sentence was seen
        for s, e, sent in sentences(c["quote"], base=int(c["loc"]["start"])):
            if m := _LABEL.match(sent):
                s, sent = s + m.end(), sent[m.end() :]
            flat = " ".join(sent.split())
            at = doc.section(s)
            if len(flat) > WIDTH or _NOT_PROSE.search(sent) or (at >= 0 and doc.starts[at] == s):
                continue  # too long, not prose, or the heading itself
            if at >= 0 and at not in opened:
                opened.add(at)
                if _key(doc.sections[at][1]) in keys:
                    # the first sentence of a section (or document) titled with the name
                    best.offer(0.5, order, c, s, e, "heading")
            if not named.search(flat):
                continue
            rank: float | None = next(
                (i for i, (_, p) in enumerate(patterns) if p.search(flat) and _verb_ok(p, flat)),
                None,
            )
            kind = patterns[int(rank)][0] if rank is not None else ""
            if at >= 0 and at not in seen:
                seen.add(at)
                if (rank is None or rank >= heading) and named.search(doc.sections[at][1]):
                    rank, kind = heading - 0.5, "heading"
            if (rank is None or kind in MENTIONS) and long_form and (m := long_form.search(sent)):
                best.offer(last, order, c, s + m.start(), s + m.end(), "long form")
                continue  # the span "long form (SHORT)" itself
            if rank is None and doc.opens_paragraph_on(s, named):
                rank, kind = last + 1, "paragraph"  # the first sentence of a paragraph about it
            if rank is None:
                rank, kind = _context(flat, named, last + 2), "context"
            if rank is not None:
                (weak if kind in MENTIONS else best).offer(rank, order, c, s, e, kind)
    found = best.at or weak.at
    if found is None:
        return None
    c, s, e, kind = found
    cite = _cite(folder, c, files, (s, e))
    if cite is None:
        return None
    return {"text": " ".join(cite["quote"].split()), "method": kind, "cite": cite}


def _context(flat: str, named: re.Pattern[str], rank: float) -> float | None:
    """The rank of a sentence that only names the entity: better the nearer its start the
    name is; None when the name is only in parentheses, in a list or in a question."""
    hits = [m for m in named.finditer(flat) if not _in_parens(flat, m.start())]
    if not hits or flat.endswith("?") or _CODE.search(flat) or len(flat.split()) < 5:
        return None
    m = hits[0]
    around = flat[max(0, m.start() - 3) : m.end() + 3]
    if flat.count(",") >= 3 and "," in around:
        return None  # one item of a list
    if _PLACED.match(flat, m.end()):
        return rank  # where it is, or what its abbreviation is: "X (LCS) at MIT"
    if _PROCEDURE.match(flat):
        return rank + 0.75  # what a study did, not what the thing is
    return rank + (0.25 if m.start() <= len(flat) // 3 else 0.5)


_PROCEDURE = re.compile(
    r"(?:here\s+)?(?:we|our|to investigate|to determine|to assess|to test|using|in this)\b",
    re.IGNORECASE,
)


# after a name: where it is ("… at the Naval Postgraduate School at Monterey") or its
# abbreviation
_PLACED = re.compile(r"\s*(?:\([A-Z][\w-]{1,10}\)\s*)?(?:,\s*)?(?:at|in|of)\s+(?:the\s+)?[A-Z]")


_CODE = re.compile(r"`|\./|://|\$ |[{}]|^\(\d+\)")


def _in_parens(text: str, i: int) -> bool:
    return text.count("(", 0, i) > text.count(")", 0, i)


class _Layout:
    """The headings and paragraphs of a passage's file."""

    def __init__(self, files: Files, c: Cite) -> None:
        got = files.read(c["path"], "memory" if c["type"] == "memory" else "doc")
        self.text = got.text if got is not None else ""
        self.sections = _sections(self.text)
        self.starts = [h for h, _ in self.sections]
        self.paras = [m.start() for m in re.finditer(r"(?:^|\n[ \t]*\n)\s*\S", self.text)]

    def section(self, at: int) -> int:
        return bisect.bisect_right(self.starts, at) - 1

    def opens_paragraph_on(self, at: int, named: re.Pattern[str]) -> bool:
        """The sentence at `at` opens its paragraph, which names the entity at least twice."""
        i = bisect.bisect_right(self.paras, at) - 1
        if i < 0:
            return False
        start = self.paras[i]
        end = self.paras[i + 1] if i + 1 < len(self.paras) else len(self.text)
        head = self.text[start:at]
        if head.strip() and not _LABEL.match(head.strip() + " x"):
            return False
        return len(named.findall(self.text[start:end])) >= 2


def _verb_ok(p: re.Pattern[str], flat: str) -> bool:
    """For the "does" pattern, the word after the name is a present verb, not a plural noun
    or "was"; every other pattern stands as matched."""
    if _DOES not in p.pattern:
        return True
    m = p.search(flat)
    assert m is not None
    word = m.group(0).split()[-1]
    return not _NOT_DOES.search(word)


def _sections(text: str) -> list[tuple[int, str]]:
    """The headings of a file as (offset, heading text), in order; a short first line
    standing alone is the document's title, a heading at 0."""
    out = [(m.start(), m.group(1) or m.group(2)) for m in _HEADING.finditer(text)]
    title = _TITLE_LINE.match(text)
    if title and (not out or out[0][0]):
        out.insert(0, (0, title.group(1).strip().rstrip(".")))
    return out


SYSTEM = (
    "You write the description of an entity for a knowledge base: one sentence saying what "
    "it is, using only the numbered passages. End the sentence with the marker [N] of the "
    "passage it comes from. If the passages do not say what it is, answer NONE."
)


def _from_llm(folder: Folder, d: EntityDetail, llm: ChatClient, files: Files) -> Description | None:
    evidence = d["mentions"][:8]
    text = llm.chat(
        [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": f"Passages:\n\n{passages_prompt(evidence)}\n\n"
                f"Entity: {d['name']} ({d['type']})",
            },
        ],
        max_tokens=200,
    ).strip()
    cited = [n for n in markers(text) if 1 <= n <= len(evidence)]
    if not cited or text.upper().startswith("NONE"):
        return None  # an uncited description is not kept
    cite = _cite(folder, evidence[cited[0] - 1], files)
    if cite is None:
        return None
    return {"text": " ".join(unmarked(text).split()), "method": "llm", "cite": cite}
