"""The entity graph on both backends: a folder's Kùzu graph, built by `ok`, and the same
files published into PostgreSQL by `ok index --backend`, answer every entity question alike
(listings, an entity by name, relationships, traverse, context, pages, the AKS export,
lineage), and row-level security keeps a database role out of every other stack's rows."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from helpers.graph import ENTITY_QUESTIONS, drift, entity_state, held_rels, top_entities
from helpers.run import EXAMPLES, REPO, run_ok

from openkl.entities import queries
from openkl.entities.consolidation import min_confidence
from openkl.errors import NotFound, QueryRefused
from openkl.files import mapping
from openkl.files.folder import Folder
from openkl.graph.indexing import embedder, open_graph, stack_name
from openkl.graph.postgres import TABLES, PgGraph, grant_stack_reader
from openkl.graph.protocol import GraphStore
from openkl.knowledge import aks, context, lineage, pages
from openkl.sync.indexer import scan_docs

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


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Folder:
    """The example documents, notes that name entities of theirs (one derived from a
    document, one from another note), and an imported AKS bundle (canonical entities):
    indexed in Kùzu by `ok`."""
    root = tmp_path_factory.mktemp("pgent") / "kf"
    assert run_ok("init", str(root)).code == 0
    assert run_ok("--root", str(root), "store", "ingest", str(EXAMPLES)).code == 0
    f = Folder(root)
    days = f.by_date_dir / "2026-01"
    days.mkdir(parents=True, exist_ok=True)
    first = sorted(scan_docs(f)[0])[0]
    # a document edited after its ingest: an old version superseded by a new one
    edited = root.parent / "edited.md"
    edited.write_text("# Edited\nSQLite keeps a write-ahead log.\n")
    assert run_ok("--root", str(root), "store", "ingest", str(edited)).code == 0
    edited.write_text("# Edited\nSQLite keeps a write-ahead log, and PostgreSQL does too.\n")
    r = run_ok("--root", str(root), "store", "ingest", str(edited))
    assert r.code == 0, r.err
    bodies = [
        (
            "01",
            "# Write-ahead logging\nWrite-ahead logging (WAL) makes SQLite and PostgreSQL"
            " durable: Ada Lovelace would approve. See [[Kuzu graphs]].",
            first,
        ),
        ("02", "# Kuzu graphs\nKùzu is an embedded graph database, like SQLite for graphs.", ""),
        ("03", "# Gene editing\nCRISPR lets Jennifer Doudna cut DNA at a chosen place.", ""),
    ]
    for n, body, src in bodies:
        nid = f"m-202601{n}-bb{n}"
        (days / f"{nid}.md").write_text(NOTE.format(id=nid, n=int(n), src=src, body=body))
    distilled = NOTE.format(
        id="m-20260104-bb04", n=4, src="m-20260103-bb03", body="CRISPR edits DNA."
    )
    (days / "m-20260104-bb04.md").write_text(distilled)
    # lineage the graph holds only in part: a note derived from a span that is no chunk of
    # its own (the walk also names its document, from the file) and from a chunk of the
    # edited document's old version; a note derived from it that supersedes another
    old = next(e for e in mapping.load(f).values() if not e.get("current", True))
    spans = f"{first}#char3-40, {old['id']}#char0-20"
    (days / "m-20260105-bb05.md").write_text(
        NOTE.format(id="m-20260105-bb05", n=5, src=spans, body="Logs come before pages.")
    )
    later = NOTE.format(id="m-20260106-bb06", n=6, src="m-20260105-bb05", body="Logs first.")
    (days / "m-20260106-bb06.md").write_text(
        later.replace("topics:", "supersedes: [m-20260104-bb04]\ntopics:")
    )
    assert run_ok("--root", str(root), "sync").code == 0
    # a bundle of a few of its entities, marked verified: canonical contributions
    r = run_ok(
        "--root", str(root), "graph", "export", "--format", "aks", "--max-entities", "4",
        "--out", "-",
    )  # fmt: skip
    assert r.code == 0, r.err
    bundle = json.loads(r.out)
    bundle["domain"] = "team"
    for e in bundle["entities"]:
        e["source"] = {**e.get("source", {}), "verified": True, "source_kind": "manual"}
    path = root.parent / "team.aks.json"
    path.write_text(json.dumps(bundle))
    r = run_ok("--root", str(root), "bundle", "import", str(path))
    assert r.code == 0, r.err
    r = run_ok("--root", str(root), "sync")
    assert r.code == 0, r.err
    return f


@pytest.fixture(scope="module")
def graphs(folder: Folder, pg_uri: str) -> Iterator[dict[str, GraphStore]]:
    """The folder's Kùzu graph and its stack in PostgreSQL, built by `ok index --backend`."""
    r = run_ok("--root", str(folder.root), "index", "--backend", pg_uri, "--json")
    assert r.code == 0, r.err
    emb = embedder(folder)
    with (
        open_graph(folder) as kz,
        PgGraph.open(
            pg_uri, stack=stack_name(folder), write=False, embedder_identity=emb.identity
        ) as pg,
    ):
        yield {"kuzu": kz, "postgresql": pg.as_store()}


def both(graphs: dict[str, GraphStore], ask: Callable[[GraphStore], Any]) -> Any:
    kz, pg = ask(graphs["kuzu"]), ask(graphs["postgresql"])
    assert kz, "the question has no answer on Kùzu: it would not compare anything"
    assert pg == kz
    return kz


def test_the_stack_holds_the_entities_kuzu_holds(graphs: dict[str, GraphStore]) -> None:
    """Ids, names, types, confidences, aliases, documents, mentions with their confidence,
    relationships with their evidence: every row consolidation wrote."""
    ents = both(graphs, lambda g: g.export_entities())
    assert len(ents) > 20
    assert any(e["verified"] and e["source_kind"] != "document" for e in ents)
    assert any(e["aliases"] for e in ents)
    both(graphs, lambda g: g.held_entities(sorted(g.entity_ids()))[0])
    both(graphs, lambda g: g.held_entities(sorted(g.entity_ids()))[1])
    rels = both(graphs, lambda g: g.export_relationships())
    assert {r["type"] for r in rels} - {"related_to"}, "only co-occurrence: a weak check"
    both(graphs, lambda g: sorted(g.entity_ids()))
    both(graphs, lambda g: sorted(g.canonical_entity_ids()))
    both(graphs, lambda g: g.counts())
    both(graphs, lambda g: g.relationship_types())
    both(graphs, lambda g: g.incomplete() == {"docs": [], "notes": []})
    both(graphs, lambda g: sorted(g.extraction_index(), key=lambda r: r["id"]))
    both(
        graphs, lambda g: {k: g.meta().get(k) for k in ("entities.extractor", "entities.canonical")}
    )


def test_relationships_are_held_alike(graphs: dict[str, GraphStore]) -> None:
    held = both(graphs, held_rels)
    assert all(held.values()), "a relationship held twice"
    assert any(r["evidence"] for r in held.values())


@pytest.mark.parametrize("name", sorted(ENTITY_QUESTIONS))
def test_the_backends_answer_entity_questions_alike(
    graphs: dict[str, GraphStore], name: str
) -> None:
    both(graphs, ENTITY_QUESTIONS[name])


# -- the features, run on each backend ------------------------------------------------------
def test_listing_with_type_and_confidence_filters(graphs: dict[str, GraphStore]) -> None:
    for kw in ({}, {"type": "Person"}, {"min_confidence": 0.7}, {"type": "concept", "limit": 5}):
        both(graphs, lambda g, kw=kw: queries.list_entities(g, **kw))  # type: ignore[misc]
    people = queries.list_entities(graphs["postgresql"], type="person")
    assert people and all(p["type"] == "Person" for p in people)


@pytest.mark.parametrize("name", ["SQLite", "sqlite", "CRISPR", "Ada Lovelace", "WAL"])
def test_an_entity_by_name(folder: Folder, graphs: dict[str, GraphStore], name: str) -> None:
    both(graphs, lambda g: queries.entity_detail(folder, g, name, cites=3))


def test_an_unknown_name_suggests_the_same_near_names(graphs: dict[str, GraphStore]) -> None:
    said = {}
    for n, g in graphs.items():
        with pytest.raises(NotFound) as e:
            queries.find_entity(g, "sqlit")
        said[n] = (e.value.message, e.value.hint)
    assert said["postgresql"] == said["kuzu"] and "SQLite" in (said["kuzu"][1] or "")


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_traverse(graphs: dict[str, GraphStore], depth: int) -> None:
    walks = [
        both(graphs, lambda g, e=e: queries.traverse(g, e, depth=depth, min_confidence=0.3))
        for e in top_entities(graphs["kuzu"], 4)
    ]
    assert max(len(w["steps"]) for w in walks) > depth, "a walk that goes nowhere tests little"
    assert any(s["depth"] == depth for w in walks for s in w["steps"])


def test_traverse_by_type_and_with_a_limit(graphs: dict[str, GraphStore]) -> None:
    start = top_entities(graphs["kuzu"], 1)[0]
    types = graphs["kuzu"].relationship_types()
    for rel in types[:3]:
        both(graphs, lambda g, r=rel: queries.traverse(g, start, depth=3, rel=r) or True)
    cut = both(graphs, lambda g: queries.traverse(g, start, depth=3, limit=4))
    assert cut["truncated"] and len(cut["steps"]) == 4


def test_context(
    folder: Folder, graphs: dict[str, GraphStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entities and relationships a question touches. Its passages come from a real
    search on each backend, in vector mode: the full-text scores of the two backends differ
    (Kùzu's BM25 and the tsvector one), so hybrid search may order passages differently."""
    import functools

    from openkl.graph import search

    monkeypatch.setattr(search, "find", functools.partial(search.find, mode="vector"))
    emb = embedder(folder)
    for q in ("how does write-ahead logging keep SQLite durable", "CRISPR gene editing"):
        got = both(
            graphs, lambda g, q=q: context.context(folder, g, q, use_llm=False, embedder=emb)
        )
        assert got["entities"] and got["relationships"] and got["sources"]


def test_pages(folder: Folder, graphs: dict[str, GraphStore]) -> None:
    """An entity's page and every page, rendered from each backend (the page cache is
    keyed by the graph's version of the entity, so it must not serve one to the other)."""
    cache = folder.ok_dir / "cache" / "pages"
    out = {}
    for n, g in graphs.items():
        shutil.rmtree(cache, ignore_errors=True)
        one = pages.page(folder, g, "SQLite", force=True)
        del one["generated_at"]  # type: ignore[misc]
        every = list(pages.all_pages(folder, g, min_confidence(folder), force=True))
        out[n] = (one, every)
    assert out["kuzu"][1] and out["postgresql"] == out["kuzu"]
    assert queries.graph_version(graphs["kuzu"], "sqlite") == queries.graph_version(
        graphs["postgresql"], "sqlite"
    )


def test_aks_export_validates_and_matches(folder: Folder, graphs: dict[str, GraphStore]) -> None:
    from jsonschema import Draft202012Validator

    # the shared schema beside the checkout, else the copy openkl bundles (test_aks.py
    # checks that the two are equal)
    shared = [p / "shared" / "aks" / "SCHEMA.json" for p in REPO.parents]
    schema = json.loads(next((p for p in shared if p.exists()), aks.SCHEMA_PATH).read_text())
    for kw in ({}, {"min_confidence": 0.6, "max_entities": 10}, {"verified_only": True}):
        made = {n: aks.export(folder, g, **kw) for n, g in graphs.items()}  # type: ignore[arg-type]
        for b in made.values():
            Draft202012Validator(schema).validate(b)
        assert made["kuzu"]["entities"]
        assert _bundle(made["postgresql"]) == _bundle(made["kuzu"])


def _bundle(b: Any) -> Any:
    """A bundle without the time it was made."""
    return {k: v for k, v in b.items() if k != "compiled_at"}


@pytest.mark.parametrize("direction", ["up", "down", "both"])
def test_lineage(folder: Folder, graphs: dict[str, GraphStore], direction: str) -> None:
    """From every note, every document (old versions too) and chunks of each document, at
    several depths: the same nodes, depths, predecessors and edges, in the same order. On
    PostgreSQL each walk is one recursive query (two when it goes up from a note to another
    whose file names sources: it runs again with them), not a lookup per node."""
    kz, pg = graphs["kuzu"], graphs["postgresql"]
    starts = sorted(kz.notes()) + sorted(kz.docs())
    for d in sorted(kz.docs()):
        starts += sorted(c["id"] for c in kz.current_chunks_of([d]))[:2]
    walks = {}
    for s in starts:
        for depth in (1, 3, 8):
            walks[(s, depth)] = both(
                graphs,
                lambda g, s=s, d=depth: lineage.lineage(folder, g, s, depth=d, direction=direction),
            )
            pg.trace = []
            lineage.lineage(folder, pg, s, depth=depth, direction=direction)
            walked = sum("WITH RECURSIVE walk" in q for q in pg.trace)
            assert 1 <= walked <= 2 and len(pg.trace) <= walked + 4, (s, pg.trace)
            pg.trace = None
    assert max(len(w["nodes"]) for w in walks.values()) >= 4
    assert max(n["depth"] for w in walks.values() for n in w["nodes"]) >= 2 + (direction != "down")
    if direction != "down":
        # the span's document comes from the file: one hop from the note, not two
        up = walks[("m-20260105-bb05", 1)]
        assert any(n["rel"] == "DERIVED_FROM" and n["kind"] == "doc" for n in up["nodes"])
        assert any(not n.get("current", True) for w in walks.values() for n in w["nodes"])


def test_the_pg_graph_keeps_to_the_whole_protocol() -> None:
    found = drift(GraphStore, PgGraph, PgGraph(None, "s", False))
    assert not found, "PgGraph and GraphStore differ:\n" + "\n".join(found)


def test_cypher_says_what_to_use_instead(folder: Folder, pg_uri: str) -> None:
    with (
        PgGraph.open(pg_uri, stack=stack_name(folder), write=False) as g,
        pytest.raises(QueryRefused) as e,
    ):
        g.cypher("MATCH (e:Entity) RETURN e.name")
    assert "Kùzu" in e.value.message and "ok index" in (e.value.hint or "")


# -- row-level security ------------------------------------------------------------------------
def test_a_role_of_one_stack_gets_nothing_of_another_from_any_table(
    folder: Folder,
    graphs: dict[str, GraphStore],
    pg_uri: str,
) -> None:
    """Two stacks with rows in every table: a role that is not a superuser, its session set
    to one stack, selects from every table and gets its own rows only, and with no stack
    set, nothing at all."""
    mine = stack_name(folder)
    other = "b-" + mine
    counts: dict[str, dict[str, int]] = {}
    with psycopg.connect(pg_uri, autocommit=True) as admin:
        # stack B: a copy of every row of stack A
        for t in TABLES:
            cols = [
                r[0]
                for r in admin.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
                    " AND column_name <> 'stack' AND is_generated = 'NEVER'",
                    (t,),
                )
            ]
            listed = ", ".join(cols)
            admin.execute(f"DELETE FROM {t} WHERE stack = %s", (other,))
            admin.execute(
                f"INSERT INTO {t} (stack, {listed}) SELECT %s, {listed} FROM {t} WHERE stack = %s",
                (other, mine),
            )
        for st in (mine, other):
            counts[st] = {
                t: admin.execute(f"SELECT count(*) FROM {t} WHERE stack = %s", (st,)).fetchone()[0]
                for t in TABLES
            }
    empty = sorted(t for t, n in counts[mine].items() if not n)
    assert not empty, f"tables without a row in stack A test nothing: {empty}"
    assert counts[other] == counts[mine]
    grant_stack_reader(pg_uri, "reader_ent", "pw")
    base, _, query = pg_uri.partition("?")
    uri = base.replace("postgres:@", "reader_ent:pw@", 1) + ("?" + query if query else "")
    with psycopg.connect(uri) as conn:
        assert not conn.execute(
            "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()[0]
        for st in (mine, other):
            conn.execute("SELECT set_config('openkl.stack', %s, false)", (st,))
            for t in TABLES:
                rows = conn.execute(f"SELECT stack FROM {t}").fetchall()
                assert {r[0] for r in rows} == {st} and len(rows) == counts[st][t], (st, t)
            # a filter on the other stack's name does not get past the policy
            gone = other if st == mine else mine
            for t in TABLES:
                got = conn.execute(f"SELECT count(*) FROM {t} WHERE stack = %s", (gone,))
                assert got.fetchone() == (0,), (st, t)
        conn.execute("RESET openkl.stack")
        for t in TABLES:
            assert conn.execute(f"SELECT count(*) FROM {t}").fetchone() == (0,), t


def test_sync_after_edits_matches_a_fresh_build(folder: Folder, pg_uri: str) -> None:
    """Edit a note, and take a document out and load it again, in a stack as `ok sync`
    does (the consolidation writer deletes, updates and adds entities, mentions and
    relationships), then compare with a stack published afresh from the edited files."""
    from openkl.files import notes as notes_mod
    from openkl.knowledge import links
    from openkl.sync.indexer import index_docs, index_notes, remove_from_graph
    from openkl.sync.pg_sync import publish

    emb = embedder(folder)
    note = notes_mod.find(folder, "m-20260102-bb02")
    assert note.path is not None
    before = note.path.read_text()
    found = scan_docs(folder)[0]
    doc = sorted(found)[-1]

    def answers(g: GraphStore) -> dict[str, Any]:
        return {n: q(g) for n, q in ENTITY_QUESTIONS.items()} | {"held": held_rels(g)}

    try:
        with PgGraph.open(pg_uri, stack="edits", write=True, dim=emb.dim) as g, g.transaction():
            publish(folder, g)
            kept = answers(g)
            note.path.write_text(before.replace("like SQLite", "unlike Neo4j, like DuckDB"))
            edited = notes_mod.read_note(note.path, folder)
            remove_from_graph(folder, g, [doc], [edited.id])
            index_notes(folder, g, [edited])
            index_docs(folder, g, [(doc, found[doc])])
            links.relink(g)
            after = answers(g)
        with PgGraph.open(pg_uri, stack="fresh", write=True, dim=emb.dim) as g, g.transaction():
            publish(folder, g)
            fresh = answers(g)
    finally:
        note.path.write_text(before)  # the other tests compare with Kùzu's copy
    assert after != kept, "the edits changed nothing: the comparison would test nothing"
    assert "duckdb" in {e["id"] for e in after["entities"]}
    assert after == fresh


def _entity_rows(uri: str, stack: str) -> dict[str, tuple[Any, str]]:
    """Each entity row of `stack` with the transaction that last wrote it."""
    with psycopg.connect(uri) as conn:
        rows = conn.execute(
            "SELECT e.*, xmin::text AS x FROM entities e WHERE stack = %s", (stack,)
        ).fetchall()
        names = [d.name for d in conn.execute("SELECT * FROM entities LIMIT 0").description]
    return {r[names.index("id")]: (r[: len(names)], r[-1]) for r in rows}


def test_ok_sync_backend_after_edits_keeps_the_entities_of_a_fresh_build_and_of_kuzu(
    folder: Folder,
    tmp_path: Any,
    pg_uri: str,
) -> None:
    """`ok sync --backend` after a document is edited in place, one added and one removed,
    a note edited, one added and one removed, and a bundle imported: the stack's entities,
    mentions, relationships and extractions equal a stack published afresh from the edited
    files and Kùzu's after `ok sync`; no entity whose row is unchanged is written again."""
    root = tmp_path / "kf-edited"
    shutil.copytree(folder.root, root, symlinks=True)
    assert run_ok("--root", str(root), "config", "set", "domain", "kf-edited").code == 0
    f = Folder(root)
    stack = stack_name(f)
    assert stack == "kf-edited"  # not the stack the other tests read
    first = run_ok("--root", str(root), "sync", "--backend", pg_uri, "--json")
    assert first.code == 0, first.err
    assert first.json()["docs_added"] and "canonical" in first.json()["reconsolidated"], first.out
    before = _entity_rows(pg_uri, stack)

    def ok(*args: str) -> Any:
        r = run_ok("--root", str(root), *args)
        assert r.code == 0, (args, r.err)
        return r

    docs = {d["path"]: d["id"] for d in ok("store", "list", "--json").json()}
    edited = root / next(p for p in docs if "write-ahead" in p)
    edited.write_text(edited.read_text() + "\nGrace Hopper wrote the first compiler, A-0.\n")
    (tmp_path / "tide.md").write_text("# Tides\nThe Moon and the Sun pull the sea at Brest.\n")
    ok("store", "ingest", str(tmp_path / "tide.md"))
    removed = next(d for p, d in docs.items() if "crispr" in p)
    ok("store", "remove", removed)
    ok("mem", "update", "m-20260102-bb02", "--text", "# Kuzu\nKùzu is like DuckDB for graphs.")
    added = ok("mem", "add", "Barbara Liskov named the substitution principle.", "--json")
    ok("mem", "delete", "m-20260103-bb03")
    bundle = ok(
        "graph", "export", "--format", "aks", "--max-entities", "6", "--out", "-"
    ).json()  # fmt: skip
    bundle["domain"] = "second"
    for e in bundle["entities"]:
        e["source"] = {**e.get("source", {}), "verified": True, "source_kind": "manual"}
    (tmp_path / "second.aks.json").write_text(json.dumps(bundle))
    ok("bundle", "import", str(tmp_path / "second.aks.json"))
    ok("sync")  # Kùzu: the edit becomes a new version

    rep = ok("sync", "--backend", pg_uri, "--json").json()
    assert removed in rep["docs_removed"] and len(rep["docs_added"]) == 2
    assert rep["notes_added"] == [added.json()["id"]]
    assert rep["notes_updated"] == ["m-20260102-bb02"]
    assert rep["notes_removed"] == ["m-20260103-bb03"]
    assert rep["reconsolidated"] == ["canonical"] and not rep["incomplete"]
    emb = embedder(f)
    with PgGraph.open(pg_uri, stack=stack, write=False, embedder_identity=emb.identity) as g:
        synced = entity_state(g.as_store())
    with PgGraph.open(pg_uri, stack=stack + "-fresh", write=True, dim=emb.dim) as g:
        from openkl.sync.pg_sync import publish

        with g.transaction():
            publish(f, g)
        fresh = entity_state(g.as_store())
    with open_graph(f) as kz:
        kuzu = entity_state(kz)
    ids = {e["id"] for e in synced["export"]}
    assert {"grace-hopper", "barbara-liskov", "duckdb"} <= ids, "the edits named no new entity"
    assert synced == fresh
    assert synced == kuzu

    after = _entity_rows(pg_uri, stack)
    kept = [i for i in before.keys() & after.keys() if before[i][0] == after[i][0]]
    assert len(kept) > len(after) // 2, "most entities should be untouched by the edits"
    assert all(before[i][1] == after[i][1] for i in kept), "an unchanged entity was rewritten"
    assert any(before[i][1] != after[i][1] for i in before.keys() & after.keys())
    again = ok("sync", "--backend", pg_uri, "--json").json()
    assert not again["changed"]

    # a document whose extractions are missing (as a stack an older `ok sync --backend`
    # wrote has them) is loaded again, and its entities are back
    now = {d["id"] for d in ok("store", "list", "--json").json()}
    doc = sorted(now & set(docs.values()))[0]  # one the edits left alone
    with psycopg.connect(pg_uri, autocommit=True) as admin:
        admin.execute("DELETE FROM extractions WHERE stack = %s AND owner = %s", (stack, doc))
    mended = ok("sync", "--backend", pg_uri, "--json").json()
    assert mended["incomplete"] == [doc] and mended["docs_added"] == [doc]
    with PgGraph.open(pg_uri, stack=stack, write=False, embedder_identity=emb.identity) as g:
        assert entity_state(g.as_store()) == fresh
