"""`ok mem conflicts`: statements about one entity that disagree, each side cited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.openai_stub import chat_server
from helpers.run import run_ok


def _add(text: str, now: str, *more: str) -> str:
    import os

    old = os.environ.get("OK_NOW")
    os.environ["OK_NOW"] = now
    try:
        r = run_ok("mem", "add", text, "--json", *more)
    finally:
        if old is None:
            del os.environ["OK_NOW"]
        else:
            os.environ["OK_NOW"] = old
    assert r.code == 0, r.err
    return str(r.json()["id"])


def test_a_changed_number_or_a_negation_is_no_duplicate(kf: Path) -> None:
    _add("The Benlow cluster runs 12 worker nodes.", "2026-11-01T10:00:00Z")
    r = run_ok("mem", "add", "The Benlow cluster runs 12 worker nodes!")
    assert r.code == 2 and "duplicate of m-" in r.err
    # these say something else: an update to supersede with, or a conflict to list
    _add("The Benlow cluster runs 20 worker nodes.", "2026-11-02T10:00:00Z")
    _add("The Benlow cluster does not run 12 worker nodes.", "2026-11-03T10:00:00Z")


@pytest.fixture
def notes(kf: Path) -> Path:
    _add("The Benlow cluster runs 12 worker nodes.", "2026-11-01T10:00:00Z")
    _add("The Benlow cluster runs 20 worker nodes.", "2026-11-02T10:00:00Z")
    _add("Pellucid uses PostgreSQL for its metadata store.", "2026-11-03T10:00:00Z")
    _add("Pellucid does not use PostgreSQL for its metadata store.", "2026-11-04T10:00:00Z")
    # different facts about one entity: no conflict
    _add("The Selwyn database holds 2 million rows.", "2026-11-05T10:00:00Z")
    _add("The Selwyn database is backed up every night.", "2026-11-06T10:00:00Z")
    return kf


def _files(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in (root / "memories").rglob("*.md")}


def test_numbers_and_negations_that_disagree_are_listed_with_both_sides(notes: Path) -> None:
    before = _files(notes)
    r = run_ok("mem", "conflicts", "--json")
    assert r.code == 0, r.err
    found = r.json()
    got = {(c["kind"], frozenset((c["a"]["quote"], c["b"]["quote"]))) for c in found}
    assert got == {
        (
            "number",
            frozenset(
                (
                    "The Benlow cluster runs 12 worker nodes.",
                    "The Benlow cluster runs 20 worker nodes.",
                )
            ),
        ),
        (
            "negation",
            frozenset(
                (
                    "Pellucid uses PostgreSQL for its metadata store.",
                    "Pellucid does not use PostgreSQL for its metadata store.",
                )
            ),
        ),
    }, found
    benlow = next(c for c in found if c["kind"] == "number")
    assert "Benlow" in benlow["entity"]
    assert "12" in benlow["reason"] and "20" in benlow["reason"]
    for side in ("a", "b"):
        c = benlow[side]
        text = (notes / c["path"]).read_text(encoding="utf-8")
        assert text[c["loc"]["start"] : c["loc"]["end"]] == c["quote"]
    plain = run_ok("mem", "conflicts")
    assert plain.code == 0 and f"{benlow['entity']} — number: 12 against 20" in plain.out
    assert _files(notes) == before  # it only reads


def test_passages_of_documents_take_part_with_in_all(notes: Path) -> None:
    (notes / "ops.md").write_text(
        "# Operations\n\nThe Benlow cluster runs 16 worker nodes since the upgrade.\n",
        encoding="utf-8",
    )
    assert run_ok("store", "ingest", str(notes / "ops.md")).code == 0
    memory_only = run_ok("mem", "conflicts", "--json").json()
    assert all(c["a"]["type"] == c["b"]["type"] == "memory" for c in memory_only)
    both = run_ok("mem", "conflicts", "--in", "all", "--json").json()
    kinds = {(c["a"]["type"], c["b"]["type"]) for c in both if "Benlow" in c["entity"]}
    assert any("chunk" in k for k in kinds), both


def test_an_llm_judges_pairs_the_signals_miss(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _add("The Calder service is written in Go.", "2026-11-07T10:00:00Z")
    # alike enough to be refused as a copy of the first
    _add(
        "The Calder service is written entirely in Rust.",
        "2026-11-08T10:00:00Z",
        "--allow-duplicate",
    )
    assert not any("Calder" in c["entity"] for c in run_ok("mem", "conflicts", "--json").json())
    reply = json.dumps({"conflict": True, "reason": "Go and Rust cannot both be the language"})
    monkeypatch.setenv("OK_LLM_MODEL", "stub-model")
    with chat_server([reply]) as stub:
        monkeypatch.setenv("OK_LLM_BASE_URL", stub.url)
        found = run_ok("mem", "conflicts", "--json").json()
        asked = [r["messages"][1]["content"] for r in stub.requests]
        offline = run_ok("mem", "conflicts", "--json", "--no-llm").json()
    calder = [c for c in found if "Calder" in c["entity"]]
    assert calder and calder[0]["kind"] == "llm", found
    assert calder[0]["reason"] == "Go and Rust cannot both be the language"
    assert any("Calder" in a and "written in Go" in a for a in asked)
    assert not any("Calder" in c["entity"] for c in offline)


def test_an_unknown_scope_is_one_clear_line(notes: Path) -> None:
    r = run_ok("mem", "conflicts", "--in", "everything")
    assert r.code == 2 and "unknown scope 'everything'" in r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
