"""Keyword search on PostgreSQL stops early: a query reads at most `SCAN_PER_TERM` postings
of each of its lexemes, in the order of what they add to BM25, from document frequencies
that every write keeps in `lexemes`; the rows it returns carry their exact BM25 score, and
where no query lexeme has more postings than that the ranking is the full scan's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.run import run_ok

from openkl.files.folder import Folder
from openkl.graph import postgres
from openkl.graph.indexing import embedder
from openkl.graph.postgres import PgGraph
from openkl.sync.pg_sync import publish, sync

pytestmark = pytest.mark.postgres

WORDS = ["harbour", "pilot", "tide", "anchor", "crane", "ledger", "cargo", "berth"]
QUERIES = ["harbour pilot", "tide anchor crane", "cargo ledger berth harbour", "pilot"]


def _note(root: Path, n: int) -> None:
    # note n: a few of the words, some more than once, of lengths that differ
    words = [WORDS[(n * 3 + i) % len(WORDS)] for i in range(1 + n % 5)]
    body = " ".join(words + [WORDS[n % len(WORDS)]] * (n % 3) + ["filler"] * (n % 7))
    d = root / "memories" / "by_date" / "2026-01"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"m-2026010{n % 9 + 1}-n{n:03d}.md").write_text(
        f"---\nid: m-2026010{n % 9 + 1}-n{n:03d}\nts: 2026-01-01T10:00:00Z\n---\n{body}\n"
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Folder:
    root = tmp_path_factory.mktemp("pgkw") / "kf"
    assert run_ok("init", str(root)).code == 0
    for n in range(60):
        _note(root, n)
    return Folder(root)


@pytest.fixture(scope="module")
def stack(folder: Folder, pg_uri: str) -> Iterator[str]:
    with PgGraph.open(pg_uri, stack="kw", write=True, dim=embedder(folder).dim) as w:
        publish(folder, w)
    yield pg_uri


def _df_kept(g: PgGraph) -> dict[str, int]:
    return {r["lexeme"]: r["df"] for r in g._run(
        "SELECT lexeme, df FROM lexemes WHERE stack = %(st)s AND tbl = 'notes' AND df > 0"
    )}  # fmt: skip


def _df_counted(g: PgGraph) -> dict[str, int]:
    return {r["lexeme"]: r["n"] for r in g._run(
        "SELECT lexeme, count(*) AS n FROM postings WHERE stack = %(st)s AND tbl = 'notes'"
        " GROUP BY lexeme"
    )}  # fmt: skip


def test_document_frequencies_follow_every_write(folder: Folder, stack: str) -> None:
    with PgGraph.open(stack, stack="kw", write=True) as g:
        assert _df_kept(g) == _df_counted(g) and _df_kept(g)["harbour"] > 10
        # edit one note, delete another, add a third: the frequencies move with them
        notes = sorted(folder.by_date_dir.rglob("*.md"))
        notes[0].write_text(notes[0].read_text().replace("harbour", "lighthouse"))
        notes[1].unlink()
        _note(folder.root, 99)
        sync(folder, g)
        assert _df_kept(g) == _df_counted(g)
        assert _df_kept(g)["lighthous"] >= 1


def test_a_bounded_scan_ranks_as_the_full_scan_where_it_reads_everything(stack: str) -> None:
    with PgGraph.open(stack, stack="kw", write=False) as g:
        assert g._df_kept("notes")
        for q in QUERIES:
            args = {"q": q, "t": "notes", "key": "bm25.notes", "k": 10, "k1": 0.9, "b": 0.4}
            full = g._fts_scan(args)
            assert full and g.fts("MemoryNote", q, 10) == full, q


def test_a_tight_bound_still_scores_what_it_returns_exactly(
    stack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two postings per lexeme: far fewer than the lexemes have, so the candidates differ
    # from the full scan's; each row returned still has its full BM25 score
    monkeypatch.setattr(postgres, "SCAN_PER_TERM", 2)
    with PgGraph.open(stack, stack="kw", write=False) as g:
        for q in QUERIES:
            args = {"q": q, "t": "notes", "key": "bm25.notes", "k": 1000, "k1": 0.9, "b": 0.4}
            exact = dict(g._fts_scan(args))
            got = g.fts("MemoryNote", q, 5)
            assert got, q
            for rid, score in got:
                assert score == pytest.approx(exact[rid]), (q, rid)
            # the best row of a one-word query is among its best postings by impact
            if " " not in q:
                assert got[0][1] == pytest.approx(max(exact.values()))


def test_a_stack_without_kept_frequencies_is_scanned_then_counted_on_its_next_write(
    folder: Folder, stack: str
) -> None:
    with PgGraph.open(stack, stack="kw", write=True) as g, g.transaction():
        # as a stack an older openkl made: no `lexemes` rows, no mark
        g._run("DELETE FROM lexemes WHERE stack = %(st)s")
        g.unset_meta("df.notes")
        g.unset_meta("df.chunks")
    with PgGraph.open(stack, stack="kw", write=False) as g:
        assert not g._df_kept("notes")
        assert g.fts("MemoryNote", "harbour pilot", 5)  # the full scan answers
    _note(folder.root, 123)
    with PgGraph.open(stack, stack="kw", write=True) as g:
        sync(folder, g)
        assert g._df_kept("notes") and _df_kept(g) == _df_counted(g)
