"""Contextual chunk headers: each chunk of a document is indexed for keywords with its
document's title and the headings above it, so a chunk deep in a guide is found by words
that only its title or its section's heading says, on Kùzu and on PostgreSQL alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_ok
from helpers.pg import pg_server, pg_uri  # noqa: F401  (fixtures)

from openkl.text.chunking import context_header, heading_path, heading_paths, keyword_text

FILLER = (
    "The operator reads the checklist aloud, confirms each step with the second operator,"
    " and writes the time of every step into the shared log before going on. "
)


def guide() -> str:
    """A guide long enough for several chunks: its title and section headings are the only
    places that name the tool (Quillfeather) and the sections' subjects."""
    return (
        "# Quillfeather operations guide\n\n"
        + FILLER * 12
        + "\n\n## Rollback procedure\n\n"
        + FILLER * 10
        + "Then the warm spare takes the traffic.\n\n"
        + "## Capacity planning\n\n"
        + FILLER * 10
        + "Then the spreadsheet is archived.\n"
    )


# as long as a section of the guide, so that length does not decide between them
OTHER = (
    "# Field notes\n\n"
    + FILLER * 6
    + "The warm spare took the traffic after the spreadsheet was archived.\n"
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("headers")
    src = base / "src"
    src.mkdir()
    (src / "guide.md").write_text(guide())
    (src / "notes.md").write_text(OTHER)
    root = base / "kf"
    assert run_ok("init", str(root)).code == 0
    r = run_ok("--root", str(root), "store", "ingest", str(src))
    assert r.code == 0, r.err
    return root


def chunks(root: Path) -> list[dict]:
    r = run_ok(
        "--root",
        str(root),
        "graph",
        "cypher",
        "MATCH (c:Chunk) WHERE c.current RETURN c.text AS text, c.fts AS fts, c.ord AS ord"
        " ORDER BY c.doc_id, c.ord",
        "--json",
    )
    assert r.code == 0, r.err
    return r.json()


def found(root: Path, query: str, *backend: str) -> list[str]:
    """The quotes of the chunks `ok search --mode fts` finds, best first."""
    r = run_ok(
        "--root", str(root), "search", query, "--mode", "fts", "--per-doc", "5", "--json", *backend
    )
    assert r.code in (0, 1), r.err
    return [h["quote"] for h in (r.json() if r.code == 0 else [])]


def test_heading_paths_read_at_once_equal_heading_path_at_each_start() -> None:
    text = "# A\n\nx\n\n## B\n\ny\n\n### C\n\nz\n\n## D\n\nw\n\n# E\n\nv\n"
    starts = [0, 3, 6, 10, 13, 20, 24, 30, 35, 41, len(text), 2]
    assert heading_paths(text, starts) == [heading_path(text, s) for s in starts]
    assert heading_path(text, text.index("z")) == ["A", "B", "C"]
    assert heading_path(text, text.index("w")) == ["A", "D"]


def test_a_header_names_the_title_and_the_headings_the_chunk_does_not_start_with() -> None:
    assert context_header("Guide", ["Guide", "Rollback"], "Then the spare.") == "Guide > Rollback"
    # the first chunk starts with its title: not said twice
    assert context_header("Guide", ["Guide"], "# Guide\n\nIntro") == ""
    assert context_header("Guide", ["Guide", "Rollback"], "## Rollback\n\nSteps") == "Guide"
    # a title cut short from a long first line, and white space, do not make it differ
    long = "Dual regulation of miRNA biogenesis generates\ntarget specificity in synthesis"
    assert context_header("Dual regulation of miRNA biogenesis…", [], long) == ""
    assert context_header("Dual regulation of mRNA…", [], long) == "Dual regulation of mRNA…"
    assert keyword_text("Body", "") == "Body"
    assert keyword_text("Body", "Guide > Rollback").endswith("Body")
    assert "Guide > Rollback" in keyword_text("Body", "Guide > Rollback")


def test_each_chunk_s_keyword_text_starts_with_its_header(folder: Path) -> None:
    rows = [c for c in chunks(folder) if "Quillfeather" in c["fts"]]
    assert len(rows) >= 3, rows  # the guide is in several chunks, each names the tool
    for c in rows[1:]:
        assert "Quillfeather" not in c["text"]  # only its header says so
        assert c["fts"].startswith("Quillfeather operations guide")
        assert c["fts"].endswith(" ".join(c["text"].split()))
    rollback = next(c for c in rows if "warm spare" in c["text"])
    assert "Rollback procedure" in rollback["fts"]
    assert "Capacity planning" not in rollback["fts"]


def test_words_only_the_title_and_heading_say_find_the_chunk(folder: Path) -> None:
    # both documents say "warm spare"; the guide's chunk about it is under its title
    hits = found(folder, "quillfeather warm spare")
    assert "warm spare takes" in hits[0], hits
    hits = found(folder, "capacity planning spreadsheet archived")
    assert "spreadsheet is archived" in hits[0], hits
    # the note without the header words still comes after for its own words
    assert any("took the traffic" in h for h in found(folder, "warm spare traffic"))


def test_postgresql_indexes_the_same_text(folder: Path, pg_uri: str) -> None:  # noqa: F811
    r = run_ok("--root", str(folder), "index", "--backend", pg_uri)
    assert r.code == 0, r.err
    for query in ("quillfeather warm spare", "capacity planning spreadsheet archived"):
        pg = found(folder, query, "--backend", pg_uri)
        assert pg[0] == found(folder, query)[0], json.dumps(pg)
