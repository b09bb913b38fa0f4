"""Split normalized text into chunks sized in model tokens, cut at natural boundaries.

A chunk is a character span `[start, end)` of the text: the chunk id is
`<docID>#char<start>-<end>`, so a span always points back into the file. Cut points are
chosen from markdown headings, blank lines, sentence ends and finally whitespace, in that
order of preference; inside a word only when a run of text has no boundary at all.

A run without boundaries (a 5 MB line of base64, a minified file) must still come out in
chunks the model can read. Most of it is sized by its real tokens; what the tokenizer calls
one token but spans more than `LONG_TOKEN` characters (WordPiece turns a longer word into a
single `[UNK]`), or skips entirely (control characters), is counted in stand-in tokens of
`PIECE` characters.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

_HEADING = re.compile(r"\n(?=#{1,6} )")
_PARA = re.compile(r"\n[ \t]*\n")
_SENT = re.compile(r"(?<=[.!?;:])[\"')\]]*\s+")
_SPACE = re.compile(r"\s+")
_PUNCT = re.compile(r"[^\w\s]|_")  # where tokenizers split a word without whitespace

LONG_TOKEN = 100  # characters; WordPiece's longest word before it gives up with [UNK]
PIECE = 4  # characters per stand-in token inside such a run (English averages ~4.5)
SEGMENT = 20_000  # long texts are tokenized in pieces about this size, split at whitespace
WHOLE = 200_000  # texts up to this size are tokenized in one call


@dataclass(frozen=True)
class Chunk:
    start: int
    end: int
    text: str

    def chunk_id(self, doc_id: str) -> str:
        return f"{doc_id}#char{self.start}-{self.end}"


def _boundaries(text: str) -> list[tuple[int, int]]:
    """Candidate cut positions with a strength (3 heading, 2 paragraph, 1 sentence, 0 space)."""
    cuts: dict[int, int] = {}
    for strength, rx in ((0, _SPACE), (1, _SENT), (2, _PARA), (3, _HEADING)):
        for m in rx.finditer(text):
            pos = m.end() if strength < 3 else m.start() + 1
            cuts[pos] = max(cuts.get(pos, -1), strength)
    return sorted(cuts.items())


def chunk_text(
    text: str, tokenizer: Any, max_tokens: int = 256, overlap: int = 64, start: int = 0
) -> list[Chunk]:
    """Chunks of at most ~`max_tokens` tokens with ~`overlap` tokens shared between neighbours.

    With `start`, only `text[start:]` is chunked (a document's body after its frontmatter);
    the spans still count from the beginning of `text`.
    """
    if start:
        return [
            Chunk(c.start + start, c.end + start, c.text)
            for c in chunk_text(text[start:], tokenizer, max_tokens, overlap)
        ]
    if not text.strip():
        return []
    budget = max(16, max_tokens - 2)  # room for [CLS]/[SEP]
    offsets = _split_long(text, _token_spans(text, tokenizer))
    if len(offsets) <= budget:
        s, e = _strip(text, 0, len(text))
        return [Chunk(s, e, text[s:e])]
    tok_starts = [o[0] for o in offsets]
    cuts = _boundaries(text)
    cut_pos = [c for c, _ in cuts]
    chunks: list[Chunk] = []
    first_tok = 0
    n = len(offsets)
    while first_tok < n:
        last_tok = min(n, first_tok + budget)  # exclusive
        start_char = offsets[first_tok][0]
        if last_tok >= n:
            end_char = len(text)
        else:
            hard_end = offsets[last_tok][0]  # start of the first token that does not fit
            min_end = offsets[first_tok + max(1, budget // 2)][0]
            end_char = _best_cut(text, cuts, cut_pos, min_end, hard_end)
        s, e = _strip(text, start_char, end_char)
        if e > s:
            chunks.append(Chunk(s, e, text[s:e]))
        if end_char >= len(text):
            break
        next_first = bisect.bisect_left(tok_starts, end_char)
        # step back by `overlap` tokens, to a boundary where possible
        back = max(first_tok + 1, next_first - overlap)
        if overlap and back < next_first:
            lo = offsets[back][0]
            hi = offsets[next_first - 1][0] if next_first < n else lo
            cand = _best_cut(text, cuts, cut_pos, lo, hi, prefer_early=True)
            back = max(first_tok + 1, bisect.bisect_left(tok_starts, cand))
        first_tok = min(back, next_first) if overlap else next_first
    return chunks


def _token_spans(text: str, tokenizer: Any) -> list[tuple[int, int]]:
    """Character spans of the text's tokens, in order (empty ones left out).

    One long string is slow to tokenize and cannot use more than one core, so a long text
    goes in whitespace-separated segments, one batch. Tokenizers split words at whitespace,
    so the spans are the same as from one call; only a cut forced inside a run without
    whitespace can differ at that cut.
    """
    if len(text) <= WHOLE:
        enc = tokenizer.encode(text, add_special_tokens=False)
        return [o for o in enc.offsets if o[1] > o[0]]
    starts = [0]
    while starts[-1] + SEGMENT < len(text):
        p = starts[-1] + SEGMENT
        m = _SPACE.search(text, p, p + SEGMENT // 10) or _PUNCT.search(text, p, p + SEGMENT // 10)
        starts.append(m.end() if m and m.end() < len(text) else p)
    bounds = list(zip(starts, [*starts[1:], len(text)], strict=True))
    encs = tokenizer.encode_batch([text[a:b] for a, b in bounds], add_special_tokens=False)
    return [
        (a + s, a + e)
        for (a, _), enc in zip(bounds, encs, strict=True)
        for s, e in enc.offsets
        if e > s
    ]


def _split_long(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` with every token longer than `LONG_TOKEN` characters, and every stretch of
    non-space text the tokenizer skipped, cut into stand-in tokens of `PIECE` characters.

    Inside a long token the first and last stand-ins are `LONG_TOKEN + 1` characters: a
    chunk cut there leaves pieces of the word that are still too long for WordPiece, so
    they stay one `[UNK]` each when the chunk is embedded and the count stays an upper
    bound. Text without such runs keeps its spans exactly (and its chunk ids).
    """
    ends = [(0, 0), *spans]
    todo = [
        i
        for i, ((_, pe), (s, e)) in enumerate(zip(ends, [*spans, (len(text),) * 2], strict=True))
        if e - s > LONG_TOKEN or s - pe > LONG_TOKEN
    ]
    if not todo:
        return spans
    out: list[tuple[int, int]] = []
    edge = LONG_TOKEN + 1
    done = 0
    for i in todo:
        out += spans[done:i]
        prev = ends[i][1]
        s, e = spans[i] if i < len(spans) else (len(text), len(text))
        if s - prev > LONG_TOKEN and not text[prev:s].isspace():
            out += [(a, min(a + PIECE, s)) for a in range(prev, s, PIECE)]
        if e - s >= 2 * edge:
            cuts = [s, *range(s + edge, e - edge + 1, PIECE)]
            out += list(zip(cuts, [*cuts[1:], e], strict=True))
        elif e > s:
            out.append((s, e))
        done = i + 1
    out += spans[done:]
    return out


def _best_cut(
    text: str,
    cuts: list[tuple[int, int]],
    cut_pos: list[int],
    lo: int,
    hi: int,
    prefer_early: bool = False,
) -> int:
    """The strongest boundary in [lo, hi]; the latest (or earliest) of equal strength.

    Without one, `hi`; but when `hi` is inside a word, the last punctuation in [lo, hi]
    instead, because a chunk cut mid-word tokenizes differently from how it was counted.
    """
    i, j = bisect.bisect_left(cut_pos, lo), bisect.bisect_right(cut_pos, hi)
    best: tuple[int, int] | None = None
    for pos, strength in cuts[i:j]:
        key = (strength, -pos if prefer_early else pos)
        if best is None or key > (best[1], -best[0] if prefer_early else best[0]):
            best = (pos, strength)
    if best:
        return best[0]
    if 0 < hi < len(text) and text[hi - 1].isalnum() and text[hi].isalnum():
        last = None
        for m in _PUNCT.finditer(text, lo, hi):
            last = m
        if last is not None:
            return last.end()
    return hi


def _strip(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


_HEADING_LINE = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def heading_path(text: str, start: int) -> list[str]:
    """The markdown headings in force at `start`: for each level, the last heading above
    it, outer first (a heading of a level ends those below it)."""
    path: dict[int, str] = {}
    for m in _HEADING_LINE.finditer(text, 0, start):
        level = len(m[1])
        path = {k: v for k, v in path.items() if k < level}
        path[level] = m[2].strip()
    return [path[k] for k in sorted(path)]


def heading_paths(text: str, starts: list[int]) -> list[list[str]]:
    """`heading_path` at each of `starts` (in any order), reading the headings once."""
    order = sorted(range(len(starts)), key=lambda i: starts[i])
    out: list[list[str]] = [[] for _ in starts]
    path: dict[int, str] = {}
    pos = 0
    for i in order:
        for m in _HEADING_LINE.finditer(text, pos, starts[i]):
            level = len(m[1])
            path = {k: v for k, v in path.items() if k < level}
            path[level] = m[2].strip()
        # a heading the start cuts through is read whole by the next start
        pos = max(pos, text.rfind("\n", 0, starts[i]) + 1)
        out[i] = [path[k] for k in sorted(path)]
    return out


def context_header(title: str, headings: list[str], text: str) -> str:
    """What a chunk is part of, for its embedding and keyword text (a contextual header):
    its document's title and the headings above it, joined by " > "; what the chunk's own
    text already starts with is left out (a document's first chunk starts with its title,
    which may be cut short with "…"), white space and case aside."""
    head = " ".join(text.lstrip("# \t\n")[:400].split()).casefold()
    parts = [p for p in dict.fromkeys([title.strip(), *headings]) if p]
    parts = [p for p in parts if not head.startswith(_plain(p))]
    return " > ".join(parts)


def _plain(part: str) -> str:
    return " ".join(part.removesuffix("…").split()).casefold()


def with_header(text: str, header: str) -> str:
    """A chunk's text after its header (`bench/ranking.py` embeds it so, as a variant)."""
    return f"{header}\n\n{text}" if header else text


# how many times a chunk's header is written before its text for BM25 (`keyword_text`)
HEADER_TIMES = 1


def keyword_text(text: str, header: str) -> str:
    """A chunk's text as the keyword index reads it: its header `HEADER_TIMES` times, then
    the text. The header's words count as the chunk's own, and more than once they weigh
    as a title field would."""
    return "\n".join([header] * HEADER_TIMES + [text]) if header else text
