"""Split normalized text into chunks sized in model tokens, cut at natural boundaries.

A chunk is a character span `[start, end)` of the text: the chunk id is
`<docID>#char<start>-<end>`, so a span always points back into the file. Cut points are
chosen from markdown headings, blank lines, sentence ends and finally whitespace, in that
order of preference; never inside a word.
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


def chunk_text(text: str, tokenizer: Any, max_tokens: int = 256, overlap: int = 64) -> list[Chunk]:
    """Chunks of at most ~`max_tokens` tokens with ~`overlap` tokens shared between neighbours."""
    if not text.strip():
        return []
    budget = max(16, max_tokens - 2)  # room for [CLS]/[SEP]
    enc = tokenizer.encode(text, add_special_tokens=False)
    offsets = [o for o in enc.offsets if o[1] > o[0]]
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
            end_char = _best_cut(cuts, cut_pos, min_end, hard_end)
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
            cand = _best_cut(cuts, cut_pos, lo, offsets[next_first - 1][0] if next_first < n else lo,
                             prefer_early=True)
            back = max(first_tok + 1, bisect.bisect_left(tok_starts, cand))
        first_tok = min(back, next_first) if overlap else next_first
    return chunks


def _best_cut(cuts: list[tuple[int, int]], cut_pos: list[int], lo: int, hi: int,
              prefer_early: bool = False) -> int:
    """The strongest boundary in [lo, hi]; the latest (or earliest) of equal strength."""
    i, j = bisect.bisect_left(cut_pos, lo), bisect.bisect_right(cut_pos, hi)
    best: tuple[int, int] | None = None
    for pos, strength in cuts[i:j]:
        key = (strength, -pos if prefer_early else pos)
        if best is None or key > (best[1], -best[0] if prefer_early else best[0]):
            best = (pos, strength)
    return best[0] if best else hi


def _strip(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e
