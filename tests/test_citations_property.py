"""Property: edits away from a quote never lose it, and the reported span holds it exactly.

Random documents, a random quote, random inserts/deletes/replacements before and after it;
the edited text is either written in place (no sync) or ingested as a new version of the
same source (mapping `superseded_by`). Everything runs on real files in a fresh folder.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openkl.collect.store import Candidate, ingest
from openkl.files.folder import Folder
from openkl.knowledge import citations as cit
from openkl.text.normalize import normalize_text

WORDS = [
    "tide",
    "moon",
    "river",
    "delta",
    "basin",
    "flow",
    "salt",
    "marsh",
    "dune",
    "reef",
    "the",
    "a",
    "of",
    "and",
    "in",
    "stone",
    "wave",
    "ice",
    "fjord",
    "shore",
    "kelp",
]
SEPS = [" ", " ", " ", "\n", "\n\n", ", ", ". "]

word = st.sampled_from(WORDS)
sep = st.sampled_from(SEPS)


@st.composite
def passages(draw: st.DrawFn, min_words: int = 1, max_words: int = 60) -> str:
    ws = draw(st.lists(word, min_size=min_words, max_size=max_words))
    out = ws[0] if ws else ""
    for w in ws[1:]:
        out += draw(sep) + w
    return out


@st.composite
def edits(draw: st.DrawFn) -> list[tuple[str, float, float, str]]:
    """(op, where, how much, inserted text) with positions as fractions of the region."""
    return draw(
        st.lists(
            st.tuples(
                st.sampled_from(["insert", "delete", "replace"]),
                st.floats(0, 1),
                st.floats(0, 1),
                passages(1, 8),
            ),
            max_size=4,
        )
    )


def apply(region: str, ops: list[tuple[str, float, float, str]]) -> str:
    for op, where, size, text in ops:
        i = int(where * len(region))
        j = min(len(region), i + int(size * (len(region) - i)))
        if op == "insert":
            region = region[:i] + " " + text + " " + region[i:]
        elif op == "delete":
            region = region[:i] + region[j:]
        else:
            region = region[:i] + text + region[j:]
    return region


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    before=passages(0, 80),
    quote=passages(1, 25),
    after=passages(0, 80),
    edits_before=edits(),
    edits_after=edits(),
    as_version=st.booleans(),
)
def test_edits_away_from_the_quote_never_lose_it(
    before: str, quote: str, after: str, edits_before: list, edits_after: list, as_version: bool
) -> None:
    doc = normalize_text("# Notes\n\n" + before + " " + quote + " " + after + " end.")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Folder.init(Path(tmp) / "kf")
        src = {"path": "store/sources/notes.md"}
        ingest(
            folder,
            [Candidate(data=doc.encode(), rel="notes.md", origin="test", source=src)],
            index=False,
        )
        path = folder.normalized_dir / "notes.ok.md"
        text = path.read_text()
        s = text.index(" " + quote + " ") + 1
        cite = cit.make(folder, folder.rel(path), chars=f"{s}-{s + len(quote)}")
        assert cite["quote"] == quote

        new = apply(text[:s], edits_before) + quote + apply(text[s + len(quote) :], edits_after)
        if as_version:
            # re-ingest the same source: a new version linked by superseded_by
            ingest(
                folder,
                [Candidate(data=new.encode(), rel="notes.md", origin="test", source=src)],
                index=False,
            )
            new = path.read_text()  # normalized, as the store keeps it
        else:
            path.write_text(new)  # edited in place, not synced
        assert quote in new

        [res] = cit.verify_many(folder, [cite])
        assert res["status"] in ("verified", "moved"), res
        s2, e2 = res["found"]["loc"]["start"], res["found"]["loc"]["end"]
        current = (folder.root / res["found"]["path"]).read_text()
        assert current[s2:e2] == quote
        if res["status"] == "verified":
            assert current == text and (s2, e2) == (s, s + len(quote))
