"""The entity gold sets of bench/gold/entities hold together, and the scorer's name folding
and heading test do what bench/gold/entities/README.md says."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import entity_gold  # noqa: E402

GOLD = BENCH / "gold" / "entities"
TYPES = {
    "Person",
    "Organization",
    "Place",
    "Event",
    "Work",
    "Software",
    "Method",
    "Chemical",
    "GeneProtein",
    "Disease",
    "Organism",
    "Anatomy",
    "Concept",
}
RELATIONS = {
    "is_a",
    "part_of",
    "located_in",
    "member_of",
    "created",
    "uses",
    "causes",
    "inhibits",
    "regulates",
    "associated_with",
    "replaces",
    "related_to",
}


@pytest.mark.parametrize("kind", entity_gold.KINDS)
def test_every_document_is_labelled_and_split_once(kind: str) -> None:
    split = json.loads((GOLD / "split.json").read_text())[kind]
    gold = {k for k in json.loads((GOLD / kind / "gold.json").read_text()) if k[0] != "_"}
    docs = {p.name for p in (GOLD / kind / "docs").iterdir()}
    assert not set(split["dev"]) & set(split["test"])
    assert set(split["dev"]) | set(split["test"]) == docs == gold
    assert len(docs) >= 20 and abs(len(split["dev"]) - len(split["test"])) <= 1


@pytest.mark.parametrize("kind", entity_gold.KINDS)
def test_labels_follow_the_guide(kind: str) -> None:
    gold = json.loads((GOLD / kind / "gold.json").read_text())
    for name, d in gold.items():
        if name.startswith("_"):
            continue
        text = " ".join((GOLD / kind / "docs" / name).read_text().split())
        names = [e["name"] for e in d["entities"]]
        assert len(names) == len(set(names)), name
        assert {e["type"] for e in d["entities"]} <= TYPES, name
        assert len(d["relations"]) == len(d["evidence"]), name
        for (a, t, b), ev in zip(d["relations"], d["evidence"], strict=True):
            assert a in names and b in names and t in RELATIONS, (name, a, t, b)
            assert ev in text, (name, ev)
        # a required name is never also an acceptable extra
        required = {
            entity_gold.norm(x) for e in d["entities"] for x in [e["name"], *e.get("aliases", [])]
        }
        assert not required & {entity_gold.norm(x) for x in d["acceptable"]}, name


def test_names_fold_case_hyphens_plurals_and_articles() -> None:
    n = entity_gold.norm
    assert n("T cells") == n("T-cell") == n("t cell")
    assert n("the Debian Project's") == n("Debian Project")
    assert n("mRNAs") == n("mRNA") and n("viruses") == n("virus") and n("analyses") == n("analysis")
    assert n("HTTPS") != n("HTTP") and n("C++") != n("C") and n("causes") == n("cause")


def test_headings_are_section_labels_in_capitals_or_the_documents_own() -> None:
    h = entity_gold.is_heading
    assert h("RESULTS We", set()) and h("DESIGN", set()) and h("METHODS AND FINDING We", set())
    assert not h("findings", set()) and not h("CI", set()) and not h("HNSCC", set())
    assert h("Building", {"building"}) and h("Prerequisites We", {"prerequisite"})
