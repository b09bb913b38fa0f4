"""The reading-comprehension question set (bench/gold/qa): every gold span is in its
document, the split is by document, and spans match as whole words."""

from __future__ import annotations

import json
import sys
from collections import Counter

from helpers.run import REPO

GOLD = REPO / "bench" / "gold" / "qa"
sys.path.insert(0, str(GOLD))

import check  # noqa: E402


def _texts() -> dict[str, str]:
    return {
        p.relative_to(check.DOCS).as_posix(): p.read_text()
        for p in check.DOCS.rglob("*")
        if p.is_file()
    }


def test_every_gold_span_occurs_in_its_document_and_splits_follow_the_documents() -> None:
    split = json.loads(check.SPLIT.read_text())["split"]
    assert check.problems(check.load(), _texts(), split) == []


def test_the_set_is_large_enough_to_report_a_share() -> None:
    qs = check.load()
    kinds = Counter(q["kind"] for q in qs)
    assert len(qs) >= 300 and all(kinds[k] >= 100 for k in ("scifact", "techdocs", "encyclopedic"))
    assert sum(q["split"] == "test" for q in qs) >= 150
    unanswerable = sum(not q["answerable"] for q in qs)
    assert 0.07 <= unanswerable / len(qs) <= 0.15
    docs = Counter(d.split("/")[0] for d in _texts())
    assert all(n >= 20 for n in docs.values()) and len(docs) == 3


def test_a_span_matches_as_whole_words_case_space_and_markers_aside() -> None:
    assert check.holds("Mice on the GO surface grew faster [1].", "go surface")
    assert check.holds("made by\n  Ken   Iverson [2] at Harvard", "ken iverson at harvard")
    assert not check.holds("a good result", "GO")
    assert not check.holds("in 1970s", "1970")
    assert check.holds("use the `--fresh` option", "--fresh")
    assert not check.holds("anything", "")
