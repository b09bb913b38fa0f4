"""Keeping memory clean: near-duplicate notes, found before one is written and merged
afterwards; notes that are expired (`expires:`, set by `--ttl`) or superseded by another
(`supersedes:`), which leave search and ask.

Two notes are duplicates when their vectors' cosine similarity reaches
`mem.duplicate_similarity` or their texts' similarity (case and spacing aside) reaches
`mem.duplicate_text`, unless they give different numbers or dates or one negates the
other (`conflicts.disagree`): such a note updates or contradicts the other, which
`--supersedes` and `ok mem conflicts` are for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import Duplicate, UsageError
from ..files import notes as notes_mod
from ..files.folder import Folder, iso, parse_span, utcnow
from ..graph.indexing import embedder
from ..text.statements import disagree
from .citations import similarity

TTL_FORMS = "use a number and a unit: 12h, 30d or 2w"


def expires_after(ttl: str) -> str:
    """When a note given `--ttl` expires (UTC ISO): now plus the span (h, d or w)."""
    try:
        span = parse_span(ttl) if ttl.strip()[-1:] in ("h", "d", "w") else None
        when = utcnow() + span if span is not None else None
    except OverflowError:
        raise UsageError(f"--ttl {ttl!r} is too long", TTL_FORMS) from None
    if span is None or when is None or span.total_seconds() <= 0:
        raise UsageError(f"--ttl {ttl!r} is not a span of time", TTL_FORMS)
    return iso(when)


def expired(note: notes_mod.Note, now: str) -> bool:
    when = note.extra.get("expires")
    return bool(when) and str(when) <= now


def live_notes(folder: Folder) -> list[notes_mod.Note]:
    """The notes search shows by default: neither expired nor superseded, oldest first."""
    found = notes_mod.scan(folder)[0]
    now = iso(utcnow())
    gone = notes_mod.supersession(found).hidden
    live = [n for n in found.values() if n.id not in gone and not expired(n, now)]
    return sorted(live, key=lambda n: (n.ts, n.id))


@dataclass(frozen=True)
class Thresholds:
    vector: float
    text: float

    @classmethod
    def of(cls, folder: Folder) -> Thresholds:
        return cls(folder.setting("mem.duplicate_similarity"), folder.setting("mem.duplicate_text"))


def _plain(text: str) -> str:
    return " ".join(text.lower().split())


def text_similarity(a: str, b: str) -> float:
    """How alike two notes' texts are (0-1), case and spacing aside."""
    a, b = _plain(a), _plain(b)
    if not a or not b:
        return 0.0
    return similarity(a, b)


def _alike(a: str, b: str, cosine: float, t: Thresholds) -> bool:
    if disagree(a, b):
        return False  # a changed number or a negation: an update or a conflict, not a copy
    if cosine >= t.vector:
        return True
    pa, pb = _plain(a), _plain(b)
    # the ratio is at most 2·shorter/(both), so most pairs need no comparison
    if 2 * min(len(pa), len(pb)) < t.text * (len(pa) + len(pb)):
        return False
    return text_similarity(a, b) >= t.text


def _vectors(folder: Folder, texts: list[str]) -> np.ndarray:
    return embedder(folder).embed(texts)  # notes' vectors come from the cache


def duplicate_of(
    folder: Folder, text: str, ignore: frozenset[str] = frozenset()
) -> notes_mod.Note | None:
    """The live note that `text` duplicates (the most similar one), if any; the notes in
    `ignore` (those it supersedes) are not compared."""
    live = [n for n in live_notes(folder) if n.id not in ignore]
    if not live:
        return None
    vecs = _vectors(folder, [text] + [n.body for n in live])
    cosines = vecs[1:] @ vecs[0]
    t = Thresholds.of(folder)
    best: tuple[float, notes_mod.Note] | None = None
    for n, cos in zip(live, cosines, strict=True):
        if _alike(text, n.body, float(cos), t):
            score = max(float(cos), text_similarity(text, n.body))
            if best is None or score > best[0]:
                best = (score, n)
    return best[1] if best else None


def refuse_duplicate(folder: Folder, text: str, ignore: frozenset[str] = frozenset()) -> None:
    """A `Duplicate` error naming the note that `text` duplicates, if there is one."""
    dup = duplicate_of(folder, text, ignore)
    if dup is not None:
        raise Duplicate(
            f"this note is a duplicate of {dup.id}",
            f"see it with `ok mem show {dup.id}`; add anyway with --allow-duplicate",
            dup.id,
        )


@dataclass
class Cluster:
    """Near-duplicate notes: the oldest (`keep`) absorbs the others."""

    keep: notes_mod.Note
    absorbed: list[notes_mod.Note] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"keep": self.keep.id, "merged_from": [n.id for n in self.absorbed]}


def clusters(folder: Folder) -> list[Cluster]:
    """Groups of near-duplicate live notes (linked pairs, taken transitively), oldest
    first."""
    live = live_notes(folder)
    if len(live) < 2:
        return []
    vecs = _vectors(folder, [n.body for n in live])
    cos = vecs @ vecs.T
    t = Thresholds.of(folder)
    parent = list(range(len(live)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(live)):
        for j in range(i + 1, len(live)):
            if root(i) != root(j) and _alike(live[i].body, live[j].body, float(cos[i, j]), t):
                parent[max(root(i), root(j))] = min(root(i), root(j))
    groups: dict[int, Cluster] = {}
    for i, n in enumerate(live):
        r = root(i)
        if r == i:
            groups[i] = Cluster(n)
        else:
            groups[r].absorbed.append(n)
    return [c for c in groups.values() if c.absorbed]


def _union(*lists: Any) -> list[Any]:
    out: list[Any] = []
    for values in lists:
        for v in values if isinstance(values, list) else [values]:
            if v not in out:
                out.append(v)
    return out


def merged(c: Cluster) -> notes_mod.Note:
    """The kept note of a cluster with everything the others carried: tags, topics, every
    list in their frontmatter (citations, sources), and `merged_from`, the absorbed ids."""
    keep = c.keep
    extra = dict(keep.extra)
    for n in c.absorbed:
        for k, v in n.extra.items():
            if k in ("merged_from", "updated"):
                continue
            if k not in extra:
                extra[k] = v
            elif isinstance(v, list) or isinstance(extra[k], list):
                extra[k] = _union(extra[k], v)
    absorbed = [n.id for n in c.absorbed]
    extra["merged_from"] = _union(
        keep.extra.get("merged_from") or [],
        *[(n.extra.get("merged_from") or []) for n in c.absorbed],
        absorbed,
    )
    return notes_mod.Note(
        id=keep.id,
        ts=keep.ts,
        body=keep.body,
        tags=_union(keep.tags, *[n.tags for n in c.absorbed]),
        topics=_union(keep.topics, *[n.topics for n in c.absorbed]),
        extra=extra,
        path=keep.path,
    )
