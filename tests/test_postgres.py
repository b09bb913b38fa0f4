"""The PostgreSQL graph against the Kùzu graph: the same folder's files, loaded into each,
answer the graph layer's questions alike (ids, records, search results, cite objects), and
row-level security keeps a database role to its stack."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from helpers.graph import QUESTIONS, drift, members
from helpers.pg import with_database
from helpers.run import run_ok, until

from openkl.errors import OkError, QueryRefused
from openkl.files import notes as notes_mod
from openkl.files.folder import Folder
from openkl.graph.entities import EntityStore
from openkl.graph.indexing import embedder, open_graph
from openkl.graph.postgres import TABLES, PgGraph, grant_stack_reader
from openkl.graph.protocol import GraphStore
from openkl.graph.search import search
from openkl.knowledge import lineage, links
from openkl.sync.indexer import embed_all, note_row, scan_docs
from openkl.sync.pg_sync import publish

pytestmark = pytest.mark.postgres

NOTE = """---
id: {id}
ts: 2026-01-0{n}T10:00:00Z
tags: [graphs]
topics: [design]
derived_from: [{src}]
---
{body}
"""


def load_files(folder: Folder, g: PgGraph) -> None:
    """The folder's documents, notes, `[[…]]` links and lineage, from its files."""
    publish(folder, g)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Folder:
    """The example documents and three notes: one linking another, one derived from a
    document, indexed in Kùzu by `ok`."""
    from helpers.run import EXAMPLES

    root = tmp_path_factory.mktemp("pgkf") / "kf"
    assert run_ok("init", str(root)).code == 0
    assert run_ok("--root", str(root), "store", "ingest", str(EXAMPLES)).code == 0
    f = Folder(root)
    doc = sorted(scan_docs(f)[0])[0]
    days = f.by_date_dir / "2026-01"
    days.mkdir(parents=True, exist_ok=True)
    bodies = [
        ("01", "# Write-ahead logs\nA log is written before the pages. See [[Kuzu graphs]].", doc),
        ("02", "# Kuzu graphs\nKùzu is an embedded graph database with Cypher.", doc),
        ("03", "# Gene editing\nCRISPR cuts DNA at a chosen place.", ""),
    ]
    for n, body, src in bodies:
        nid = f"202601{n}-100000-aaaa{n}"
        (days / f"{nid}.md").write_text(NOTE.format(id=nid, n=int(n), src=src, body=body))
    # a note that replaces the third, distilled from the first, and one already expired
    newer = NOTE.format(
        id="20260104-100000-aaaa04", n=4, src="20260101-100000-aaaa01", body="Cas9 edits genes."
    ).replace("topics:", "supersedes: [20260103-100000-aaaa03]\ntopics:")
    (days / "20260104-100000-aaaa04.md").write_text(newer)
    gone = NOTE.format(id="20260105-100000-aaaa05", n=5, src="", body="A passing thought.")
    (days / "20260105-100000-aaaa05.md").write_text(
        gone.replace("topics:", "expires: 2026-01-06T00:00:00Z\ntopics:")
    )
    r = run_ok("--root", str(root), "sync")
    assert r.code == 0, r.err
    return f


@pytest.fixture(scope="module")
def graphs(folder: Folder, pg_uri: str) -> Iterator[dict[str, GraphStore]]:
    """The folder's Kùzu graph and the same files loaded into PostgreSQL."""
    emb = embedder(folder)
    with PgGraph.open(pg_uri, stack="kf", write=True, dim=emb.dim) as w:
        load_files(folder, w)
    with (
        open_graph(folder) as kz,
        PgGraph.open(pg_uri, stack="kf", write=False, embedder_identity=emb.identity) as pg,
    ):
        yield {"kuzu": kz, "postgresql": pg.as_store()}


def both(graphs: dict[str, GraphStore], ask: Callable[[GraphStore], Any]) -> None:
    kz, pg = ask(graphs["kuzu"]), ask(graphs["postgresql"])
    assert kz, "the question has no answer on Kùzu: it would not compare anything"
    assert pg == kz


@pytest.mark.parametrize("name", sorted(QUESTIONS))
def test_the_backends_answer_alike(graphs: dict[str, GraphStore], name: str) -> None:
    both(graphs, QUESTIONS[name])


@pytest.mark.parametrize(
    "query", ["how does a write-ahead log survive a crash", "gene editing with CRISPR"]
)
def test_vector_search_gives_the_same_cite_objects(
    folder: Folder, graphs: dict[str, GraphStore], query: str
) -> None:
    both(graphs, lambda g: search(folder, g, query, k=5, mode="vector", embedder=embedder(folder)))


@pytest.mark.parametrize(
    ("query", "doc"),
    [
        ("write-ahead logging durability", "write-ahead-logging"),
        ("CRISPR gene editing", "crispr"),
        ("Ada Lovelace analytical engine", "ada-lovelace"),
    ],
)
def test_keyword_and_hybrid_search_find_the_same_document_first(
    folder: Folder, graphs: dict[str, GraphStore], query: str, doc: str
) -> None:
    for mode in ("fts", "hybrid"):
        tops = {
            n: search(folder, g, query, k=3, mode=mode, embedder=embedder(folder))
            for n, g in graphs.items()
        }
        for name, hits in tops.items():
            assert hits, f"{name} found nothing for {query!r} ({mode})"
            assert doc in hits[0]["path"], (name, mode, hits[0]["path"])
        # the same cite object; the score is each ranking's own (BM25, ts_rank_cd)
        first = {n: {k: v for k, v in hits[0].items() if k != "score"} for n, hits in tops.items()}
        assert first["postgresql"] == first["kuzu"]


def test_full_text_matches_any_word_and_skips_old_chunks(graphs: dict[str, GraphStore]) -> None:
    pg = graphs["postgresql"]
    one = {i for i, _ in pg.fts("Chunk", "CRISPR", 50)}
    other = {i for i, _ in pg.fts("Chunk", "Lovelace", 50)}
    either = {i for i, _ in pg.fts("Chunk", "CRISPR Lovelace", 50)}
    assert one and other and either == one | other
    assert pg.fts("MemoryNote", "CRISPR", 5)[0][0] == "20260103-100000-aaaa03"


def test_vector_search_through_the_hnsw_index_returns_every_candidate_asked_for(
    pg_server: str,
) -> None:
    """An HNSW scan stops at `hnsw.ef_search` rows (40 by default) before old chunks are
    filtered out; search asks for 50 candidates and more. Through the index, with three in
    four rows filtered out, `vector` still returns the k nearest current chunks, in the
    order of an exact scan."""
    import numpy as np

    rng = np.random.default_rng(7)
    n, dim, k = 1200, 16, 120
    vecs = rng.normal(size=(n, dim)).astype("float32")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    docs = [
        {"id": f"d{i:04d}", "path": f"d{i:04d}.ok.md", "sha256": "", "title": "", "source": "{}"}
        | {"created_at": "", "chars": 1, "current": True}
        for i in range(n)
    ]
    chunks = [
        {"id": f"d{i:04d}#char0-1", "doc_id": f"d{i:04d}", "text": "x", "start": 0, "end": 1}
        | {"ord": 0, "current": i % 4 == 0}  # three in four are old chunks
        for i in range(n)
    ]
    q = rng.normal(size=dim).astype("float32")
    q /= np.linalg.norm(q)
    sims = vecs @ q
    want = [chunks[i]["id"] for i in np.argsort(-sims) if chunks[i]["current"]][:k]
    with psycopg.connect(pg_server, autocommit=True) as conn:  # its own vector size
        conn.execute("DROP DATABASE IF EXISTS t_postgres_hnsw")
        conn.execute("CREATE DATABASE t_postgres_hnsw")
    uri = with_database(pg_server, "t_postgres_hnsw")
    with PgGraph.open(uri, stack="hnsw", write=True, dim=dim) as g:
        with g.transaction():
            g.destroy()
            g.add_docs(docs, chunks, vecs)  # type: ignore[arg-type]
        # the index, as the planner takes it on a larger stack (bench/backends.py: SciFact's
        # 10,090 chunks); on 1,200 of 16 numbers a scan and a sort are cheaper
        for plan in ("seqscan", "bitmapscan", "sort"):
            g._run(f"SET enable_{plan} = off")
        got = g.vector("Chunk", q, k)
        plan = g._run(
            "EXPLAIN SELECT id FROM chunks WHERE stack = %(st)s AND current"
            " ORDER BY vec <=> %(q)s, id LIMIT 120",
            {"q": q},
        )
    assert "chunks_vec" in json.dumps(plan), plan  # it went through the index
    assert [i for i, _ in got] == want
    assert [round(s, 5) for _, s in got] == [round(float(sims[int(i[1:5])]), 5) for i in want]


def test_sync_after_an_edit_matches_a_fresh_load(folder: Folder, pg_uri: str) -> None:
    """Replace an edited note in the PostgreSQL graph as `ok sync` does, and compare with a
    stack loaded afresh from the edited files."""
    emb = embedder(folder)
    note = next(iter(notes_mod.scan(folder)[0].values()))
    assert note.path is not None
    before = note.path.read_text()
    try:
        with PgGraph.open(pg_uri, stack="edits", write=True, dim=emb.dim) as g:
            load_files(folder, g)
            note.path.write_text(before.replace("\n# ", "\n# Edited: ", 1))
            edited = notes_mod.read_note(note.path, folder)
            with g.transaction():
                g.remove_note(edited.id)
                index_notes_without_entities(folder, g, edited)
                links.relink(g.as_store())
            after = {n: q(g) for n, q in QUESTIONS.items()} | {"fts": ranked(g)}
        with PgGraph.open(pg_uri, stack="fresh", write=True, dim=emb.dim) as g:
            load_files(folder, g)
            fresh = {n: q(g) for n, q in QUESTIONS.items()} | {"fts": ranked(g)}
    finally:
        note.path.write_text(before)  # the other tests compare with Kùzu's copy
    assert "Edited: " in g_text(after["notes_by_id"], edited.id)
    assert after == fresh


def test_a_removed_document_leaves_the_full_text_ranking_of_a_build_without_it(
    folder: Folder,
    pg_uri: str,
) -> None:
    """Its postings go, and the row count and mean length that BM25 uses are counted again."""
    emb = embedder(folder)
    with PgGraph.open(pg_uri, stack="removed", write=True, dim=emb.dim) as g:
        load_files(folder, g)
        before = ranked(g)
        gone = before["Chunk"][0][0]
        doc = next(d for d in g.docs() if gone in {c["id"] for c in g.current_chunks_of([d])})
        path = folder.root / g.docs()[doc]["path"]
        with g.transaction():
            g.remove_doc(doc)
        after = ranked(g)
    assert gone not in dict(after["Chunk"])
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    try:
        with PgGraph.open(pg_uri, stack="without", write=True, dim=emb.dim) as g:
            load_files(folder, g)
            want = ranked(g)
    finally:
        aside.rename(path)
    assert after == want and after != before


def test_each_row_is_written_once_with_its_length_in_tokens(
    folder: Folder,
    pg_uri: str,
) -> None:
    """A row's BM25 length is its tsvector's count of positions, set by its INSERT: no row
    is updated after it (an update writes the row again, its vector into HNSW again)."""
    emb = embedder(folder)
    with PgGraph.open(pg_uri, stack="lengths", write=True, dim=emb.dim) as g:
        load_files(folder, g)
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for table in ("chunks", "notes"):
            rows, wrong = conn.execute(
                f"SELECT count(*), count(*) FILTER (WHERE dl IS DISTINCT FROM (SELECT"
                f" coalesce(sum(array_length(positions, 1)), 0) FROM unnest(tsv)) OR dl = 0)"
                f" FROM {table} WHERE stack = 'lengths'"
            ).fetchone()
            assert rows > 0 and wrong == 0, table

            def counted(table: str = table) -> Any:
                # the writer's statistics reach the view once its session has ended
                row = conn.execute(
                    f"SELECT n_tup_ins >= (SELECT count(*) FROM {table}), n_tup_upd"
                    " FROM pg_stat_user_tables WHERE relname = %s",
                    (table,),
                ).fetchone()
                return row if row and row[0] else None

            assert until(counted)[1] == 0, f"rows of {table} were updated"


FTS_Q = "gene editing graph database log pages CRISPR retrieval"


def ranked(g: PgGraph) -> dict[str, list[tuple[str, float]]]:
    """BM25 rankings of both tables, scores to six places."""
    return {t: [(i, round(s, 6)) for i, s in g.fts(t, FTS_Q, 50)] for t in ("Chunk", "MemoryNote")}


def index_notes_without_entities(folder: Folder, g: PgGraph, note: notes_mod.Note) -> None:
    row = note_row(folder, note)
    g.add_notes([row], embed_all(embedder(folder), [row["text"]]))
    links.record(g.as_store(), [note])
    lineage.link_derived(g.as_store(), [note])


def g_text(rows: dict[str, Any], note_id: str) -> str:
    return str(rows[note_id]["text"])


def test_pg_graph_keeps_to_the_protocol_but_for_entities() -> None:
    """Every member of `GraphStore` outside `EntityStore` exists with the same parameters;
    the entity part is not built yet."""
    entity = set(members(EntityStore))
    found = [
        d
        for d in drift(GraphStore, PgGraph, PgGraph(None, "s", False))
        if d.split(":")[0] not in entity
    ]
    assert not found, "PgGraph and GraphStore differ:\n" + "\n".join(found)


def test_cypher_is_refused_with_a_way_out(graphs: dict[str, GraphStore]) -> None:
    with pytest.raises(QueryRefused, match="Kùzu") as e:
        graphs["postgresql"].cypher("MATCH (n) RETURN n")
    assert e.value.hint


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("mysql://localhost/db", "not a PostgreSQL connection string"),
        ("postgresql://nobody@127.0.0.1:1/none", "cannot connect to PostgreSQL"),
    ],
)
def test_bad_connection_strings_say_what_is_wrong(uri: str, says: str) -> None:
    with pytest.raises(OkError, match=says) as e, PgGraph.open(uri, stack="s", write=False):
        pass
    assert e.value.hint


def test_an_unbuilt_stack_tells_how_to_build_it(pg_uri: str) -> None:
    with PgGraph.open(pg_uri, stack="built", write=True, dim=4):
        pass  # the database has the tables, this stack has no rows
    with (
        pytest.raises(OkError, match="no index") as e,
        PgGraph.open(pg_uri, stack="nothing-here", write=False),
    ):
        pass
    assert "ok index" in (e.value.hint or "")


def test_a_graph_of_the_older_schema_loses_its_unused_full_text_indexes(
    pg_uri: str,
) -> None:
    """Schema 2 kept a GIN index of each tsvector, which no query reads (BM25 ranks from
    `postings`), and a key of the postings that a query could not read them from alone;
    opening such a database for writing drops those and makes the covering index."""
    with PgGraph.open(pg_uri, stack="upgraded", write=True, dim=4):
        pass
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for table in ("chunks", "notes"):
            conn.execute(f"CREATE INDEX {table}_tsv ON {table} USING gin (tsv)")
        conn.execute("DROP INDEX postings_terms")
        conn.execute("ALTER TABLE postings ADD PRIMARY KEY (stack, tbl, lexeme, id)")
        conn.execute("COMMENT ON TABLE meta IS 'openkl graph schema 2'")
    with PgGraph.open(pg_uri, stack="upgraded", write=True, dim=4):
        pass
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes")}
    assert not {"chunks_tsv", "notes_tsv", "postings_pkey"} & names
    assert {"chunks_vec", "notes_vec", "postings_id", "postings_terms", "chunks_doc"} <= names


def test_a_role_of_one_stack_sees_no_row_of_another(
    graphs: dict[str, GraphStore],
    pg_uri: str,
) -> None:
    """Row-level security at the SQL level: a role that is not a superuser, in a session set
    to stack B, selects from every table and gets nothing of stack A ("kf")."""
    counts = graphs["kuzu"].counts()
    assert counts["Doc"] and counts["MemoryNote"]
    grant_stack_reader(pg_uri, "reader_b", "pw")
    with PgGraph.open(pg_uri, stack="b", write=True, dim=4) as b:
        b.set_meta("marker", "b")
    base, _, query = pg_uri.partition("?")
    uri = base.replace("postgres:@", "reader_b:pw@", 1) + ("?" + query if query else "")
    with psycopg.connect(uri) as conn:
        assert not conn.execute(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchone()[0]
        conn.execute("SET openkl.stack = 'b'")
        for t in TABLES:
            stacks = {r[0] for r in conn.execute(f"SELECT stack FROM {t}")}
            assert stacks <= {"b"}, t
        assert conn.execute("SELECT value FROM meta WHERE key = 'marker'").fetchone() == ("b",)
        conn.execute("SET openkl.stack = 'kf'")
        assert conn.execute("SELECT count(*) FROM docs").fetchone() == (counts["Doc"],)
        conn.execute("RESET openkl.stack")
        for t in TABLES:
            assert conn.execute(f"SELECT count(*) FROM {t}").fetchone() == (0,), t


def test_ok_index_and_search_with_a_postgresql_backend(
    folder: Folder,
    graphs: dict[str, GraphStore],
    pg_uri: str,
) -> None:
    """`ok index --backend` builds the stack from the files; `ok search --backend` and the
    graph.backend setting read it, with the same cite objects as Kùzu's vector search."""
    root = str(folder.root)
    r = run_ok("--root", root, "index", "--backend", pg_uri, "--json")
    assert r.code == 0, r.err
    counts = graphs["kuzu"].counts()
    assert r.json() == {
        "stack": "kf",
        "docs": counts["Doc"],
        "chunks": counts["Chunk"],
        "notes": counts["MemoryNote"],
        "problems": [],
        "unreadable": [],
    }
    q = ("search", "how does a write-ahead log survive a crash", "--mode", "vector", "--json")
    kuzu = run_ok("--root", root, *q)
    pg = run_ok("--root", root, *q, "--backend", pg_uri)
    assert kuzu.code == pg.code == 0, pg.err
    assert pg.json() == kuzu.json() and kuzu.json()
    assert run_ok("--root", root, "config", "set", "graph.backend", pg_uri).code == 0
    try:
        by_setting = run_ok("--root", root, *q)
        assert by_setting.json() == kuzu.json()
        # --backend overrides the setting: a database without pgvector is a clear error
        bad = run_ok("--root", root, *q, "--backend", with_database(pg_uri, "postgres"))
        assert bad.code != 0 and "no pgvector extension" in bad.err
        assert "CREATE EXTENSION vector" in bad.err and bad.err.count("\n") == 1
    finally:
        assert run_ok("--root", root, "config", "unset", "graph.backend").code == 0


def test_ok_index_backend_refuses_a_bad_connection_string(folder: Folder) -> None:
    r = run_ok("--root", str(folder.root), "index", "--backend", "mysql://localhost/db")
    assert r.code != 0
    assert "not a PostgreSQL connection string" in r.err and "postgresql://" in r.err
    assert "Traceback" not in r.err


def test_a_read_only_server_refuses_writes_in_one_line(
    folder: Folder,
    pg_server: str,
) -> None:
    """A replica (here: a database whose transactions are read-only) used for writing."""
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS replica")
        conn.execute("CREATE DATABASE replica")
        conn.execute("ALTER DATABASE replica SET default_transaction_read_only = on")
    r = run_ok(
        "--root", str(folder.root), "index", "--backend", with_database(pg_server, "replica")
    )
    assert r.code != 0 and "read-only" in r.err and "primary" in r.err, r.err
    assert r.err.count("\n") == 1


def test_a_lost_connection_is_one_clear_error(
    graphs: dict[str, GraphStore],
    pg_uri: str,
    pg_server: str,
) -> None:
    with PgGraph.open(pg_uri, stack="kf", write=False) as g:
        assert g.docs()
        with psycopg.connect(pg_server, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (g.conn.info.backend_pid,))
        with pytest.raises(OkError, match="lost the connection") as e:
            g.docs()
        assert "nothing was half written" in (e.value.hint or "")
    assert graphs["postgresql"].docs() == graphs["kuzu"].docs()  # other sessions go on
