"""Words with digits in the keyword index: numbers, versions, gene names, hex ids and codes
are found by `ok search` on Kùzu and on PostgreSQL alike, whether the query writes a
compound as the text does ("IL-6") or without its hyphen ("IL6")."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_ok
from helpers.pg import pg_server, pg_uri  # noqa: F401  (fixtures)

from openkl.graph import digit_terms, fts_query, fts_text

DOCS = {
    "release": "The release build 7781 failed on the mirror after the upgrade.",
    "genes": "The p53 protein, CD4+ T cells and IL-6 respond to H1N1 infection in mice.",
    "client": "We moved to Python 3.12 and client v2.1.0; the deploy key is zq13944f5b57.",
    "gardens": "Herons came back to the gardens in 2019, and build 7780 shipped the map.",
    "plain": "Plain words about the release, the build and the client upgrade.",
}

# a query, and the one document it must find
FOUND = [
    ("7781", "release"),
    ("7780", "gardens"),
    ("p53", "genes"),
    ("CD4+", "genes"),
    ("H1N1", "genes"),
    ("IL6", "genes"),
    ("IL-6", "genes"),
    ("3.12", "client"),
    ("v2.1.0", "client"),
    ("zq13944f5b57", "client"),
    ("2019", "gardens"),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("digits")
    src = base / "src"
    src.mkdir()
    for name, text in DOCS.items():
        (src / f"{name}.txt").write_text(text + "\n")
    root = base / "kf"
    assert run_ok("init", str(root)).code == 0
    r = run_ok("--root", str(root), "store", "ingest", str(src))
    assert r.code == 0, r.err
    return root


def found(root: Path, query: str, *backend: str) -> list[str]:
    """The documents `ok search --mode fts` finds for `query`, best first."""
    r = run_ok("--root", str(root), "search", query, "--mode", "fts", "--json", *backend)
    assert r.code in (0, 1), r.err
    return [Path(h["path"]).name.split(".")[0] for h in (r.json() if r.code == 0 else [])]


@pytest.mark.parametrize(("query", "doc"), FOUND)
def test_kuzu_finds_words_with_digits(folder: Path, query: str, doc: str) -> None:
    assert found(folder, query) == [doc]


def test_postgresql_finds_the_same(folder: Path, pg_uri: str) -> None:  # noqa: F811
    r = run_ok("--root", str(folder), "index", "--backend", pg_uri)
    assert r.code == 0, r.err
    for query, doc in FOUND:
        assert found(folder, query, "--backend", pg_uri) == [doc], query


def test_a_word_with_digits_still_matches_its_letters(folder: Path) -> None:
    # "IL-6" is "il" to the tokenizer as well as its code: "IL" alone still finds it
    assert found(folder, "IL") == ["genes"]
    # and words without digits rank as before: both documents that say "upgrade"
    assert sorted(found(folder, "upgrade")) == ["plain", "release"]


def test_digit_terms_join_a_part_that_starts_with_a_digit() -> None:
    assert digit_terms("IL-6") == digit_terms("il6") == ["il6"]
    assert digit_terms("Rad53-dependent") == ["rad53"]
    assert digit_terms("miR-142-5p") == ["mir1425p"]
    assert digit_terms("3.12") == ["3.12"]
    assert digit_terms("7-day-old") == ["7"]
    assert digit_terms("well-known") == []


def test_codes_are_letters_and_the_query_asks_for_them_once() -> None:
    text = fts_text("build 7781 and 7781 again, p53")
    codes = text.split()[-3:]
    assert all(c.isalpha() and c.islower() for c in codes)
    assert codes[0] == codes[1] != codes[2]
    asked = fts_query("7781 p53 7781").split()
    assert asked[-2:] == [codes[0], codes[2]]
    # the CJK rewrite stays, and full-width digits are the same number
    assert fts_text("７７８１") == fts_text("7781")
    assert fts_text("绿茶") == "绿茶 绿 茶"
