"""The keyword index beside the graph (`.ok/keyword/`, Tantivy): it finds what Kùzu's FTS
found, follows every write, is rebuilt from the graph when it is missing, stale or behind
(a writer killed between the two commits), and Cypher keeps QUERY_FTS_INDEX behind
`graph.kuzu_fts`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.crash import ok_at
from helpers.run import run_cli, run_ok

from openkl.files.crash import CRASH_EXIT
from openkl.files.folder import Folder
from openkl.graph import fts_query, keyword
from openkl.graph.indexing import open_graph

QUERIES = ["Lovelace analytical engine", "write-ahead log checkpoint", "graph", "quokka ferry"]


def _searches(root: Path) -> dict[str, Any]:
    out = {}
    for q in QUERIES:
        for mode in ("fts", "hybrid"):
            r = run_ok(
                "--root", str(root), "search", q, "--mode", mode, "-k", "8", "--json",
                "--min-score", "0",
            )  # fmt: skip
            assert r.code == 0 or "no match" in r.err, r.err
            hits = r.json() if r.code == 0 else []
            out[f"{mode}:{q}"] = [(h["id"], round(h["score"], 6)) for h in hits]
    return out


def _stamp(root: Path) -> dict[str, Any]:
    return json.loads((root / ".ok" / "keyword" / keyword.STAMP).read_text())


def test_the_keyword_index_matches_what_kuzu_fts_matched(example_kf: Path) -> None:
    """Every word of the example documents, asked alone, finds the same chunks in the
    keyword index as in Kùzu's own FTS index: the same splitting, stop words and stems."""
    ok_at(example_kf, "config", "set", "graph.kuzu_fts", "true")
    ok_at(example_kf, "sync")
    folder = Folder(example_kf)
    with open_graph(folder, write=False) as g:
        texts = [r["t"] for r in g.query("MATCH (c:Chunk) RETURN c.fts AS t")]
        words = sorted({w for t in texts for w in t.split()})[:400]
        assert len(words) > 200
        differ = []
        for w in words:
            kuzu = {
                r["id"]
                for r in g.query(
                    "CALL QUERY_FTS_INDEX('Chunk', 'chunk_fts', $q, top := 1000) "
                    "RETURN node.id AS id",
                    {"q": fts_query(w)},
                )
            }
            ours = {i for i, _ in g.fts("Chunk", w, 1000)}
            if kuzu != ours:
                differ.append((w, len(kuzu), len(ours)))
        assert not differ
        # and ranks as Kùzu's BM25 (k1 0.9, b 0.4) did: the same order, scores in proportion
        for q in QUERIES + ["engine log", "graph search index durability"]:
            kuzu_hits = g.query(
                "CALL QUERY_FTS_INDEX('Chunk', 'chunk_fts', $q, K := 0.9, B := 0.4, top := 20) "
                "RETURN node.id AS id, score ORDER BY score DESC, id",
                {"q": fts_query(q)},
            )
            ours_hits = g.fts("Chunk", q, 20)
            assert [r["id"] for r in kuzu_hits] == [i for i, _ in ours_hits], q
            ratios = [s / r["score"] for r, (_, s) in zip(kuzu_hits, ours_hits, strict=True)]
            assert not ratios or max(ratios) - min(ratios) < 1e-3 * max(ratios), q
        assert sum(1 for q in QUERIES if g.fts("Chunk", q, 5)) >= 3


def test_deleting_the_keyword_index_loses_nothing(example_kf: Path) -> None:
    before = _searches(example_kf)
    assert any(before[f"fts:{q}"] for q in QUERIES)
    shutil.rmtree(example_kf / ".ok" / "keyword")
    assert _searches(example_kf) == before
    assert (example_kf / ".ok" / "keyword").is_dir()


def test_an_index_of_another_analyzer_or_graph_is_rebuilt(example_kf: Path) -> None:
    before = _searches(example_kf)
    stamp = _stamp(example_kf)
    graph_id, gen, _ = stamp["stamp"].split(":")
    for wrong in (f"{graph_id}:{gen}:0", f"another:{gen}:{keyword.ANALYZER_VERSION}"):
        (example_kf / ".ok" / "keyword" / keyword.STAMP).write_text(
            json.dumps({**stamp, "stamp": wrong, "docs": 0})
        )
        assert _searches(example_kf) == before
        assert _stamp(example_kf)["stamp"] == stamp["stamp"]


def test_writes_are_applied_as_they_commit(example_kf: Path) -> None:
    """A note added is found at once; the index grows by it without a rebuild, and its
    scores are those of an index made afresh."""
    gen = int(_stamp(example_kf)["stamp"].split(":")[1])
    docs = _stamp(example_kf)["docs"]
    r = ok_at(example_kf, "mem", "add", "Quokkas smile at the Rottnest ferry in 7781.")
    note = r.out.strip().splitlines()[-1]
    assert re.fullmatch(r"m-[\w-]+", note)
    stamp = _stamp(example_kf)
    assert int(stamp["stamp"].split(":")[1]) == gen + 1
    assert stamp["docs"] == docs + 1 and stamp["deleted"] == 0
    hits = ok_at(example_kf, "search", "quokka 7781", "--mode", "fts", "--json").json()
    assert hits and hits[0]["id"] == note
    incremental = _searches(example_kf)
    shutil.rmtree(example_kf / ".ok" / "keyword")
    assert _searches(example_kf) == incremental
    ok_at(example_kf, "mem", "delete", note, "--yes")
    gone = run_ok("--root", str(example_kf), "search", "quokka", "--mode", "fts", "--json")
    assert gone.code != 0 and "no match" in gone.err


def test_deletes_in_a_large_index_are_applied_in_place(
    example_kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above `EXACT_BELOW` documents a delete is applied in place (no rebuild) until the
    deleted documents reach `DELETED_SHARE` of the index; either way they are gone."""
    monkeypatch.setattr(keyword, "EXACT_BELOW", 0)
    monkeypatch.setattr(keyword, "DELETED_SHARE", 1.0)
    docs = _stamp(example_kf)["docs"]
    hits = ok_at(example_kf, "search", "Lovelace", "--mode", "fts", "--json").json()
    path = hits[0]["path"]
    ok_at(example_kf, "store", "remove", path.removeprefix("store/normalized/"))
    stamp = _stamp(example_kf)
    assert stamp["deleted"] > 0 and stamp["docs"] == docs - stamp["deleted"]
    after = run_ok("--root", str(example_kf), "search", "Lovelace", "--mode", "fts", "--json")
    assert after.code != 0 and "no match" in after.err
    monkeypatch.setattr(keyword, "DELETED_SHARE", 0.0)
    ok_at(example_kf, "mem", "add", "Deleted documents are purged by a rebuild.")
    assert _stamp(example_kf)["deleted"] == 0


@pytest.mark.crash
def test_a_writer_killed_between_the_two_commits_leaves_nothing_lost(
    example_kf: Path, tmp_path: Path
) -> None:
    """Killed after the graph's commit, before the keyword index's: the next search
    rebuilds the index from the graph and finds the note, as an index made afresh does."""
    r = run_cli(
        "--root",
        str(example_kf),
        "mem",
        "add",
        "Quokkas smile at the Rottnest ferry.",
        env={"OK_CRASH_AT": "graph.committed"},
    )
    assert r.code == CRASH_EXIT, r.err
    hits = ok_at(example_kf, "search", "quokka", "--mode", "fts", "--json").json()
    assert len(hits) == 1 and hits[0]["id"].startswith("m-")
    after = _searches(example_kf)
    fresh = tmp_path / "fresh"
    shutil.copytree(example_kf, fresh, symlinks=True)
    shutil.rmtree(fresh / ".ok" / "keyword")
    assert _searches(fresh) == after


def test_cypher_keyword_queries_need_the_setting(example_kf: Path) -> None:
    q = "CALL QUERY_FTS_INDEX('Chunk', 'chunk_fts', 'Babbage') RETURN count(*) > 0 AS hit"
    r = run_ok("--root", str(example_kf), "graph", "cypher", q)
    assert r.code != 0
    assert len(r.err.strip().splitlines()) <= 2 and "graph.kuzu_fts" in r.err, r.err
    ok_at(example_kf, "config", "set", "graph.kuzu_fts", "true")
    ok_at(example_kf, "sync")
    assert ok_at(example_kf, "graph", "cypher", q, "--json").json() == [{"hit": True}]
    ok_at(example_kf, "config", "set", "graph.kuzu_fts", "false")
    ok_at(example_kf, "sync")
    r = run_ok("--root", str(example_kf), "graph", "cypher", q)
    assert r.code != 0 and "graph.kuzu_fts" in r.err


def test_an_index_made_inside_a_transaction_that_rolls_back_is_not_trusted(
    example_kf: Path,
) -> None:
    """A writer that searches with uncommitted changes and a missing index makes one of
    rows that may never be committed: a rollback leaves it to be made again."""
    folder = Folder(example_kf)
    with (
        folder.write_lock("test"),
        pytest.raises(RuntimeError),
        open_graph(folder, write=True) as g,
    ):
        note = sorted(g.notes())[0]
        text = g.notes_by_id([note])[note]["text"]
        g.remove_note(note)
        shutil.rmtree(example_kf / ".ok" / "keyword")
        assert note not in {i for i, _ in g.fts("MemoryNote", text, 5)}
        raise RuntimeError("rolled back")
    hits = ok_at(example_kf, "search", text, "--mode", "fts", "--json").json()
    assert note in {h["id"] for h in hits}
