"""Search: modes, scopes, filters, explain, dedup, output shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.run import run_ok


def test_modes_and_explain(example_ro: Path) -> None:
    for mode in ("hybrid", "fts", "vector"):
        hits = run_ok(
            "search", "reciprocal rank fusion", "--mode", mode, "--json", "--explain"
        ).json()
        assert "retrieval-augmented" in hits[0]["path"], mode
        sig = hits[0]["signals"]
        if mode == "hybrid":
            assert set(sig) == {"fts", "vector"}
        else:
            assert set(sig) == {mode}
        for s in sig.values():
            assert s["rank"] >= 1 and isinstance(s["score"], float)
        assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
        assert all(a["score"] >= b["score"] for a, b in zip(hits, hits[1:], strict=False))


def test_one_hit_per_document_unless_asked(example_ro: Path) -> None:
    hits = run_ok("search", "Kùzu database", "--json", "-k", "10").json()
    docs = [h["doc_id"] for h in hits]
    assert len(docs) == len(set(docs))
    many = run_ok("search", "Kùzu database", "--json", "-k", "10", "--per-doc", "3").json()
    assert len(many) > len(hits) or len(many) == 10


def test_scopes_and_filters(example_kf: Path) -> None:
    mem = run_ok("search", "writer", "--in", "mem", "--json").json()
    assert mem and all(h["type"] == "memory" for h in mem)
    store = run_ok("search", "writer", "--in", "store", "--json").json()
    assert store and all(h["type"] == "chunk" for h in store)
    tagged = run_ok("search", "writer", "--tag", "kuzu", "--json").json()
    assert [h["type"] for h in tagged] == ["memory"]
    assert run_ok("search", "writer", "--tag", "nope", "--json").json() == []
    assert run_ok("search", "writer", "--topic", "design", "--json").json()
    paths = run_ok("search", "writer", "--path", "*write-ahead*", "--json").json()
    assert paths and all("write-ahead" in h["path"] for h in paths)
    assert run_ok("search", "writer", "--since", "2999-01-01", "--json").json() == []


def test_counts_and_dates_are_validated(example_kf: Path) -> None:
    """Out-of-range counts and unreadable dates are usage errors saying what is accepted,
    not an engine error or an empty result."""
    bad = [
        (["-k", "99999999999999999999"], "-k must be between 1 and 1000"),
        (["-k", "0"], "-k must be between 1 and 1000"),
        (["--per-doc", "-5"], "--per-doc must be between 1 and 1000"),
        (["--since", "notadate"], "--since 'notadate' is neither a date nor a span"),
        (["--until", "2026-13-45"], "--until '2026-13-45' is neither a date nor a span"),
        (["--since", "2026-02-01", "--until", "2026-01-01"], "is later than --until"),
    ]
    for args in (["search", "writer"], ["mem", "search", "writer"]):
        for extra, message in bad:
            if args[0] == "mem" and extra[0] == "--per-doc":
                continue
            r = run_ok(*args, *extra)
            assert r.code == 2, (args, extra, r.err)
            assert r.err.startswith("Error: ") and message in r.err, r.err
            assert len(r.err.strip().splitlines()) == 1 and not r.out
            if "date" in message:
                assert "7d" in r.err and "2026-01-31" in r.err


def test_since_and_until_take_the_events_forms(
    example_kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--since 7d`, `24h`, dates and times, as `ok events --since` takes them; a bare
    `--until` date includes that day."""
    note = run_ok("search", "writer", "--in", "mem", "--json").json()[0]
    day = note["created_at"][:10]
    for args in (
        ["--since", "7d"],
        ["--since", "24h"],
        ["--since", day],
        ["--until", day],
        ["--since", note["created_at"], "--until", note["created_at"]],
    ):
        hits = run_ok("search", "writer", "--in", "mem", "--json", *args).json()
        assert [h["id"] for h in hits] == [note["id"]], args
        hits = run_ok("mem", "search", "writer", "--json", *args).json()
        assert [h["id"] for h in hits] == [note["id"]], args
    monkeypatch.setenv("OK_NOW", "2999-01-01T00:00:00Z")
    assert run_ok("search", "writer", "--since", "7d", "--json").json() == []
    assert run_ok("search", "writer", "--until", "2000-01-01", "--json").json() == []


def test_plain_output_and_bad_arguments(example_ro: Path) -> None:
    r = run_ok("search", "Lovelace", "-k", "2")
    assert r.code == 0
    first = r.out.splitlines()[0].split("\t")
    assert first[0] == "1" and "#char" in first[2]
    r = run_ok("search", "x", "--mode", "magic")
    assert r.code == 2 and "unknown mode" in r.err
    r = run_ok("search", "   ")
    assert r.code == 2 and "empty" in r.err
    r = run_ok("search", "-", "--json", input="Babbage analytical engine\n")
    assert "ada-lovelace" in r.json()[0]["path"]


def test_show_query_prints_cypher_to_stderr(example_ro: Path) -> None:
    r = run_ok("search", "Lovelace", "--show-query", "--json")
    assert r.code == 0 and "keyword index Chunk: lovelace" in r.err
    assert "array_cosine_similarity" in r.err
    assert r.json()


def test_grep_with_rg_and_fallback(example_ro: Path) -> None:
    a = run_ok("grep", "Babbage", "--json").json()
    b = run_ok("grep", "Babbage", "--json", "--no-rg").json()
    assert a == b and a and all("ada-lovelace" in h["path"] for h in a)
    assert a[0]["match"] == "Babbage"
    assert run_ok("grep", "babbage", "-i", "--in", "store", "--json").json() == a
    r = run_ok("grep", "no-such-word-anywhere")
    assert r.code == 1 and r.out == ""
    r = run_ok("grep", "(unclosed")
    assert r.code == 2 and "invalid pattern" in r.err
    # --max counts matches as ripgrep's -m does: 0 prints none (and exits 1, like no match)
    for rg in ([], ["--no-rg"]):
        assert len(run_ok("grep", "Babbage", "--max", "1", "--json", *rg).json()) == 1
        r = run_ok("grep", "Babbage", "--max", "0", *rg)
        assert r.code == 1 and r.out == ""


def test_snippet_centres_on_the_query_words() -> None:
    from openkl.graph.search import snippet

    text = (
        "Filler sentence about nothing in particular. " * 20
        + "The first computer program computed Bernoulli numbers. "
        + "More filler follows here. " * 20
    )
    s = snippet(text, "first computer program", 120)
    assert "first computer program" in s
    assert s.startswith("…") and s.endswith("…") and len(s) <= 122
    assert snippet("short text", "anything") == "short text"
    assert snippet(text, "", 50).startswith("Filler sentence")


def test_diverse_prefers_hits_that_differ(kf: Path, tmp_path: Path) -> None:
    src = tmp_path / "dupes"
    src.mkdir()
    base = (
        "Tide pools form on rocky shores when the sea retreats at low tide, leaving "
        "water trapped among the rocks where anemones, crabs and snails live."
    )
    for i, tail in enumerate(["", " Sea stars too.", " Limpets cling on.", " Barnacles feed."]):
        (src / f"pool{i}.md").write_text(f"# Tide pools {i}\n\n{base}{tail}\n")
    (src / "zonation.md").write_text(
        "# Zonation\n\nRocky shores are divided into zones by how long each stays under water "
        "between high tide and low tide; each zone hosts different species.\n"
    )
    assert run_ok("store", "ingest", str(src)).code == 0
    plain = run_ok("search", "rocky shore tide pools", "-k", "3", "--json").json()
    diverse = run_ok("search", "rocky shore tide pools", "-k", "3", "--json", "--diverse").json()
    assert all("pool" in h["path"] for h in plain)
    assert any("zonation" in h["path"] for h in diverse)
    assert diverse[0]["id"] == plain[0]["id"]  # the best hit stays first
    # a query nothing is near: MMR still runs over the nearest passages (without the
    # floor, which would withhold them)
    r = run_ok("search", "x", "--diverse", "--json", "--min-score", "0")
    assert r.code == 0 and r.json()


def test_words_after_line_breaks_are_found_by_keyword_search(kf: Path, tmp_path: Path) -> None:
    doc = tmp_path / "wal.md"
    doc.write_text(
        "# Logs\n\nA log gives atomicity and\ndurability.\tTabs\tseparate\r\nwords too.\n"
    )
    assert run_ok("store", "ingest", str(doc)).code == 0
    for word in ("durability", "tabs", "separate", "words", "logs"):
        hits = run_ok("search", word, "--mode", "fts", "--json").json()
        assert hits and hits[0]["path"].endswith("wal.ok.md"), word
    run_ok("mem", "add", "first line\nsecond-line zebrafish")
    hits = run_ok("search", "zebrafish", "--mode", "fts", "--in", "mem", "--json").json()
    assert hits and hits[0]["type"] == "memory"


def test_search_warns_when_files_changed_behind_its_back(example_kf: Path) -> None:
    import os
    import time

    r = run_ok("search", "Lovelace", "--json")
    assert r.code == 0 and "ok sync" not in r.err
    note = next(example_kf.glob("memories/by_date/*/*/*.md"))
    later = time.time() + 5
    os.utime(note, (later, later))  # as an editor saving the file would
    r = run_ok("search", "Lovelace", "--json")
    assert r.code == 0 and r.json()
    assert "files changed since the index was last updated; run `ok sync`" in r.err
    assert run_ok("sync").code == 0
    os.utime(note, (later - 3600, later - 3600))
    assert "ok sync" not in run_ok("search", "Lovelace", "--json").err


def test_a_query_longer_than_the_cap_is_one_clear_line(example_kf: Path) -> None:
    """Past the ceiling (no signal would read more than a sliver) a query is refused in one
    line; a long query short of it is answered (tests/test_long_queries.py)."""
    from openkl.graph.search import MAX_QUERY

    at_cap = ("gene editing " * MAX_QUERY)[:MAX_QUERY]
    assert run_ok("search", "-", "-k", "1", input=at_cap).code == 0
    r = run_ok("search", "-", "-k", "1", input=at_cap + "x")
    assert r.code == 2 and f"the query is {MAX_QUERY + 1:,} characters long" in r.err
    assert len(r.err.strip().splitlines()) == 1
    r = run_ok("ask", "-", input=at_cap + "x")
    assert r.code == 2 and "characters long" in r.err
