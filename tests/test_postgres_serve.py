"""The PostgreSQL backend behind `ok sync --backend` and `ok serve --backend`: incremental
sync equal to a fresh build, the same answers over HTTP as from Kùzu, one writer per
stack across processes, row-level security on the server's connections, and each
failure mode a clear error that loses nothing. A real PostgreSQL (tests/helpers/pg.py), real
`ok serve` processes (uvicorn) called over httpx."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from helpers.graph import QUESTIONS, entity_state
from helpers.pg import with_database
from helpers.run import OK_BIN, run_cli, run_ok, until
from helpers.serve import Server, mcp_http

from openkl.files.crash import CRASH_EXIT
from openkl.files.folder import Folder, stack_name
from openkl.graph.postgres import TABLES, PgGraph
from openkl.server.backend import Backend
from openkl.sync.pg_sync import PENDING

pytestmark = [pytest.mark.postgres, pytest.mark.server]

QUERIES = [
    "how does a write-ahead log survive a crash",
    "CRISPR gene editing",
    "Ada Lovelace analytical engine",
    "a lighthouse keeper's night",
]


def database(server: str, name: str) -> str:
    """A new, empty database `name` on the test server."""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_database(server, name)


def ok_in(root: Path, *args: str) -> Any:
    r = run_ok("--root", str(root), *args)
    assert r.code == 0, (args, r.err)
    return r


def searches(root: Path, uri: str) -> dict[str, Any]:
    """`ok search --json` of every query and mode, read from the stack at `uri`."""
    out = {}
    for q in QUERIES:
        for mode in ("hybrid", "vector", "fts"):
            args = ("search", q, "-k", "5", "--mode", mode, "--min-score", "0", "--json")
            r = run_ok("--root", str(root), *args, "--backend", uri)
            assert r.code == (0 if r.json() else 1), (args, r.err)  # nothing found exits 1
            out[f"{mode}:{q}"] = r.json()
    return out


def answers(root: Path, uri: str) -> dict[str, Any]:
    """The graph layer's answers (test_postgres.QUESTIONS, and the entity graph's of
    test_postgres_entities) for the folder's stack at `uri`."""
    with PgGraph.open(uri, stack=stack_name(Folder(root)), write=False) as g:
        return {n: q(g.as_store()) for n, q in QUESTIONS.items()} | entity_state(g.as_store())


def xmin(uri: str, stack: str, table: str, row_id: str) -> str:
    """The transaction that last wrote a row: unchanged means not rewritten."""
    with psycopg.connect(uri) as conn:
        got = conn.execute(
            f"SELECT xmin::text FROM {table} WHERE stack = %s AND id = %s", (stack, row_id)
        ).fetchone()
    assert got, (table, row_id)
    return str(got[0])


def note_file(root: Path, text: str, *extra: str) -> str:
    return str(ok_in(root, "mem", "add", text, *extra, "--allow-duplicate", "--json").json()["id"])


def test_an_incremental_sync_writes_only_what_changed_and_equals_a_fresh_build(
    example_kf: Path,
    pg_server: str,
) -> None:
    root = example_kf
    synced, fresh = database(pg_server, "inc_synced"), database(pg_server, "inc_fresh")
    keep = note_file(root, "# Pages\nA page is written after the log. See [[Lighthouses]].")
    edit = note_file(root, "# Lighthouses\nA keeper lights the lamp at dusk.", "--topics", "sea")
    gone = note_file(root, "# Passing\nA thought about CRISPR that goes.", "--topics", "gone")
    docs = {d["path"]: d for d in ok_in(root, "store", "list", "--json").json()}
    first = ok_in(root, "sync", "--backend", synced, "--json").json()
    assert first["docs_added"] and first["chunks_added"] > 0 and not first["rebuilt"]
    stack = stack_name(Folder(root))
    untouched = next(d["id"] for p, d in docs.items() if "lovelace" in p)
    before = {"doc": xmin(synced, stack, "docs", untouched)}
    before["note"] = xmin(synced, stack, "notes", keep)

    # a document edited in place, one added, one removed; a note edited, one added, one removed
    edited = next(p for p in docs if "write-ahead" in p)
    path = root / edited
    path.write_text(path.read_text() + "\nA checkpoint bounds the log replayed after a crash.\n")
    (root / "tide.md").write_text("# Tides\nThe moon pulls the sea twice a day.\n")
    ok_in(root, "store", "ingest", str(root / "tide.md"))
    removed = next(d["id"] for p, d in docs.items() if "crispr" in p)
    ok_in(root, "store", "remove", removed)
    ok_in(root, "mem", "update", edit, "--text", "# Lighthouses\nThe keeper trims the wick.")
    added = note_file(root, "# Tides\nSpring tides follow [[Lighthouses]] and the moon.")
    ok_in(root, "mem", "delete", gone)
    ok_in(root, "sync")  # the folder's own index records the edit as a new version

    rep = ok_in(root, "sync", "--backend", synced, "--json").json()
    assert not rep["rebuilt"] and rep["changed"]
    assert removed in rep["docs_removed"] and len(rep["docs_added"]) == 2  # the edit, the new
    assert (rep["notes_added"], rep["notes_updated"], rep["notes_removed"]) == (
        [added],
        [edit],
        [gone],
    )
    # what did not change was not written again
    assert xmin(synced, stack, "docs", untouched) == before["doc"]
    assert xmin(synced, stack, "notes", keep) == before["note"]

    ok_in(root, "index", "--backend", fresh)
    assert searches(root, synced) == searches(root, fresh)
    got, want = answers(root, synced), answers(root, fresh)
    assert got == want
    assert "gone" not in json.dumps(got["counts"]) and got["all_links"]
    again = ok_in(root, "sync", "--backend", synced, "--json").json()
    assert not again["changed"]


def http_answers(s: Server) -> dict[str, Any]:
    """What a server answers over HTTP and MCP for the same questions."""
    h, v1 = s.http, f"/v1/{s.stack}"
    out: dict[str, Any] = {}
    for q in QUERIES:
        for mode in ("hybrid", "vector", "fts"):
            r = h.get(f"{v1}/search", params={"q": q, "k": 5, "mode": mode, "explain": True})
            assert r.status_code == 200, r.text
            out[f"search:{mode}:{q}"] = r.json()
        r = h.post(f"{v1}/ask", json={"question": q, "llm": False})
        assert r.status_code == 200, r.text
        out[f"ask:{q}"] = r.json()
    out["notes"] = h.get(f"{v1}/notes").json()
    out["documents"] = h.get(f"{v1}/documents").json()
    first = out["search:vector:" + QUERIES[0]]["hits"][0]
    out["lineage"] = h.get(f"{v1}/lineage/{first['doc_id']}").json()
    out["cite"] = h.post(f"{v1}/citations", json={"items": [first["id"]]}).json()
    out["verify"] = h.post(f"{v1}/citations/verify", json={"items": [first]}).json()

    async def mcp_search(client: Any) -> Any:
        hit = await client.call_tool("search", {"query": QUERIES[1], "k": 3})
        return json.loads(hit.content[0].text)

    out["mcp"] = mcp_http(s.url, mcp_search)
    return out | entity_answers(s)


def entity_answers(s: Server) -> dict[str, Any]:
    """What a server answers over HTTP and MCP about the entity graph."""
    h, aks, q = s.http, "/aks/v1", {"domain": s.stack}

    def get(path: str, **params: Any) -> Any:
        r = h.get(path, params={**q, **params})
        assert r.status_code == 200, (path, r.text)
        return r.json()

    out: dict[str, Any] = {"entities": get(f"{aks}/entities", limit=10_000)}
    top = [e["name"] for e in out["entities"][:4]]
    out["stack"] = h.get(f"{aks}/stacks/{s.stack}").json()
    for name in top:
        out[f"entity:{name}"] = get(f"{aks}/entities/{name}")
        out[f"traverse:{name}"] = get(f"{aks}/traverse", start=name, depth=2)
        out[f"page:{name}"] = get(f"{aks}/pages/{name}")
        out[f"neighbourhood:{name}"] = get(f"/v1/{s.stack}/neighbourhood", entity=name, depth=2)
    out["traverse:typed"] = get(f"{aks}/traverse", start=top[0], depth=3, rel="related_to")
    out["neighbourhood:query"] = get(f"/v1/{s.stack}/neighbourhood", query=QUERIES[1])
    for query in QUERIES[:2]:
        r = h.post(f"{aks}/context", json={"query": query, "domain": s.stack})
        assert r.status_code == 200, r.text
        out[f"context:{query}"] = r.json()
    out["bundle"] = get(f"{aks}/export", min_confidence=0.3)
    zipped = h.get(f"{aks}/pages", params=q)
    assert zipped.status_code == 200, zipped.text
    with zipfile.ZipFile(io.BytesIO(zipped.content)) as zf:
        out["pages"] = {n: zf.read(n).decode() for n in sorted(zf.namelist())}

    async def mcp_entities(client: Any) -> Any:
        said = {}
        for tool, args in (
            ("entities", {"limit": 20}),
            ("entities", {"name": top[0]}),
            ("traverse", {"name": top[1], "depth": 2}),
            ("context", {"query": QUERIES[0]}),
            ("list_stacks", {}),
        ):
            r = await client.call_tool(tool, args)
            assert not r.is_error, r.content[0].text
            said[f"{tool}:{sorted(args.items())}"] = json.loads(r.content[0].text)
        return said

    out["mcp:entities"] = mcp_http(s.url, mcp_entities)
    return out


def comparable(answers: dict[str, Any]) -> dict[str, Any]:
    """The answers with what differs by design left out: BM25's scores are each ranking's
    own (the order is the same), cosine similarities are float32 on PostgreSQL, and a
    citation made now says when."""

    def clean(v: Any, ranked: bool) -> Any:
        if isinstance(v, dict):
            made_now = str(v.get("id", "")).startswith("c-")
            return {
                k: clean(x, ranked)
                for k, x in v.items()
                if not (ranked and k in ("score", "signals", "best_score"))
                and not (made_now and k == "created_at")
                and k not in ("generated_at", "compiled_at", "cached")
            }
        if isinstance(v, list):
            return [clean(x, ranked) for x in v]
        return round(v, 5) if isinstance(v, float) else v

    return {k: clean(v, not k.startswith("search:vector")) for k, v in answers.items()}


def test_the_server_answers_over_http_from_postgresql_as_from_kuzu(
    example_kf: Path,
    pg_server: str,
) -> None:
    uri = database(pg_server, "serve_both")
    note = note_file(example_kf, "# Logs\nA log record is written before the page; see [[Kuzu]].")
    kz = Server(example_kf)
    try:
        kuzu = http_answers(kz)
    finally:
        assert kz.stop() == 0
    pg = Server(example_kf, "--backend", uri)
    try:
        assert "backend.open" in pg.log.read_text()
        assert comparable(http_answers(pg)) == comparable(kuzu)
        h, v1 = pg.http, f"/v1/{pg.stack}"
        # it is PostgreSQL that answers the entity routes: an entity taken out there is gone
        listed = h.get("/aks/v1/entities", params={"limit": 5}).json()
        ent = listed[0]
        with psycopg.connect(uri, autocommit=True) as admin:
            admin.execute("DELETE FROM entities WHERE id = %s", (ent["id"],))
        assert h.get(f"/aks/v1/entities/{ent['id']}").status_code == 404
        assert ent["id"] not in [e["id"] for e in h.get("/aks/v1/entities").json()]
        walk = h.get("/aks/v1/traverse", params={"start": listed[1]["id"], "depth": 1}).json()
        assert ent["id"] not in json.dumps(walk)

        async def mcp_entity(client: Any) -> Any:
            return await client.call_tool("entities", {"name": ent["id"]})

        assert mcp_http(pg.url, mcp_entity).is_error  # the MCP tools read PostgreSQL too
        # … and a row taken out there is gone from search …
        with psycopg.connect(uri, autocommit=True) as admin:
            admin.execute("DELETE FROM notes WHERE id = %s", (note,))
        found = h.get(
            f"{v1}/search", params={"q": "log record written before the page", "scope": "mem"}
        )
        assert note not in [x["id"] for x in found.json()["hits"]]
        # … and a sync brings it back from the files, as every write does
        assert h.post(f"{v1}/sync").status_code == 200
        found = h.get(
            f"{v1}/search", params={"q": "log record written before the page", "scope": "mem"}
        )
        assert found.json()["hits"][0]["id"] == note
        r = h.post(f"{v1}/notes", json={"text": "Tide tables come from the harmonic constants."})
        assert r.status_code == 201, r.text
        found = h.get(f"{v1}/search", params={"q": "harmonic constants of the tide", "k": 1})
        assert found.json()["hits"][0]["id"] == r.json()["id"]
        with psycopg.connect(uri) as admin:
            row = admin.execute("SELECT count(*) FROM notes WHERE id = %s", (r.json()["id"],))
            assert row.fetchone() == (1,)
    finally:
        assert pg.stop() == 0


def test_a_note_written_over_mcp_is_in_postgresql_when_the_tool_returns(
    example_kf: Path,
    pg_server: str,
) -> None:
    """No watcher: the MCP tool's own write syncs the stack before it answers."""
    uri = database(pg_server, "mcp_write")
    s = Server(example_kf, "--backend", uri, env={"OK_SERVE_WATCH": "false"})

    async def add(client: Any) -> Any:
        r = await client.call_tool("mem_add", {"text": "Sextants measure the sun's height."})
        assert not r.is_error, r.content[0].text
        return json.loads(r.content[0].text)

    try:
        note = mcp_http(s.url, add)
        with psycopg.connect(uri) as admin:
            row = admin.execute("SELECT count(*) FROM notes WHERE id = %s", (note["id"],))
            assert row.fetchone() == (1,)
        hits = s.http.get(f"/v1/{s.stack}/search", params={"q": "sextant sun height", "k": 1})
        assert hits.json()["hits"][0]["id"] == note["id"]
    finally:
        assert s.stop() == 0


def test_one_writer_per_stack_across_processes(
    example_kf: Path,
    tmp_path: Path,
    pg_server: str,
) -> None:
    """A second server, `ok index --backend` or `ok sync --backend` on the same stack (here
    the same folder copied elsewhere, as on another machine) waits for the writer, then
    says who it is in one line; once the writer stops, a waiting one goes on."""
    uri = database(pg_server, "one_writer")
    other = tmp_path / "elsewhere" / example_kf.name
    shutil.copytree(example_kf, other, symlinks=True)
    a = Server(example_kf, "--backend", uri)
    try:
        quick = {"OK_LOCK_TIMEOUT": "1", "OK_NO_ROUTE": "1"}
        for args in (
            ("serve", "--backend", uri, "--port", "0"),
            ("index", "--backend", uri),
            ("sync", "--backend", uri),
        ):
            r = run_cli("--root", str(other), *args, env=quick, timeout=120)
            assert r.code != 0, (args, r.out)
            assert "is being written by ok serve" in r.err and f"pid {a.proc.pid} on " in r.err
            assert r.err.count("\n") == 1 and "Traceback" not in r.err, r.err
        waiting = subprocess.Popen(
            [OK_BIN, "--root", str(other), "sync", "--backend", uri, "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "OK_LOCK_TIMEOUT": "120", "OK_NO_PROGRESS": "1"},
        )
        # it waits for the writer …
        mine = f"% (pid {waiting.pid} on %"
        with psycopg.connect(uri, autocommit=True) as admin:

            def connected() -> bool:
                seen = "SELECT 1 FROM pg_stat_activity WHERE application_name LIKE %s"
                return waiting.poll() is not None or bool(admin.execute(seen, (mine,)).fetchone())

            until(connected)
        assert waiting.poll() is None, waiting.communicate()
    finally:
        assert a.stop() == 0
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err  # … and writes once the server has stopped
    assert json.loads(out)["stack"] == stack_name(Folder(other))


def role_database(server: str, name: str, role: str) -> str:
    """A database owned by a new login `role` that is not a superuser, with pgvector (which
    only a superuser may create); the URI connects as that role."""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')
        conn.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD 'pw'")
        conn.execute(f'CREATE DATABASE "{name}" OWNER "{role}"')
    uri = with_database(server, name)
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    return as_role(uri, role, "pw")


def as_role(uri: str, role: str, password: str) -> str:
    base, _, query = uri.partition("?")
    return base.replace("postgres:@", f"{role}:{password}@", 1) + ("?" + query if query else "")


def test_the_server_s_reads_see_no_other_stack_even_without_a_stack_filter(
    example_kf: Path,
    tmp_path: Path,
    pg_server: str,
) -> None:
    """The server's read connections name the caller's stack with SET LOCAL in each
    transaction: with a role that is not a superuser, row-level security then keeps a raw
    query that forgot the stack filter to that stack, and between reads to nothing."""
    uri = role_database(pg_server, "rls_serve", "okserver")
    b = tmp_path / "b" / "neighbours"
    ok_in(b.parent, "init", str(b))
    ok_in(b, "mem", "add", "Stack B's secret: the lighthouse key is under the mat.")
    ok_in(b, "sync", "--backend", uri)
    ok_in(example_kf, "sync", "--backend", uri)
    a_name, b_name = stack_name(Folder(example_kf)), stack_name(Folder(b))
    assert a_name != b_name
    with psycopg.connect(with_database(pg_server, "rls_serve")) as admin:  # a superuser
        assert admin.execute("SELECT count(*) FROM notes WHERE stack = %s", (b_name,)).fetchone()[0]
    backend = Backend(Folder(example_kf), uri)  # what `ok serve --backend` reads with
    try:
        assert backend.readers.bypasses_rls() is False
        with backend.readers.reading(a_name) as g:
            for t in TABLES:
                stacks = {r["stack"] for r in g.conn.execute(f"SELECT stack FROM {t}")}
                assert stacks <= {a_name}, t
            n = g.conn.execute("SELECT count(*) AS n FROM docs").fetchone()["n"]
            assert n == len(ok_in(example_kf, "store", "list", "--json").json())
            asked = g.conn.execute("SELECT count(*) AS n FROM notes WHERE stack = %s", (b_name,))
            assert asked.fetchone()["n"] == 0
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                g.conn.execute("DELETE FROM notes")  # a read cannot write, either
        idle = backend.readers._idle[0]  # between reads: no stack, no rows
        assert idle.execute("SELECT count(*) AS n FROM notes").fetchone()["n"] == 0
    finally:
        backend.close()
    s = Server(example_kf, "--backend", uri)
    try:
        said = s.log.read_text()
        assert '"row_level_security": true' in said, said
        hits = s.http.get(f"/v1/{s.stack}/search", params={"q": "lighthouse key mat"}).json()
        assert all(h["path"].startswith(("store/", "memories/")) for h in hits["hits"])
        assert "secret" not in json.dumps(hits)
    finally:
        assert s.stop() == 0


@pytest.fixture
def wrong_password(pg_server: str) -> Iterator[str]:
    """A role that must give its password (scram) over the socket: a URI with a wrong one."""
    with psycopg.connect(pg_server, autocommit=True) as conn:
        hba = Path(conn.execute("SHOW hba_file").fetchone()[0])
        conn.execute("DROP ROLE IF EXISTS pwuser")
        conn.execute("CREATE ROLE pwuser LOGIN PASSWORD 'right'")
        before = hba.read_text()
        hba.write_text("local all pwuser scram-sha-256\n" + before)
        conn.execute("SELECT pg_reload_conf()")
        try:
            yield as_role(pg_server, "pwuser", "wrong")
        finally:
            hba.write_text(before)
            conn.execute("SELECT pg_reload_conf()")


BAD_BACKENDS = {
    "syntax": ("postgresql://postgres@/db?nosuchoption=1", "not a valid PostgreSQL connection"),
    "scheme": ("mysql://localhost/db", "not a PostgreSQL connection string"),
    "refused": ("postgresql://postgres@127.0.0.1:1/db", "cannot connect to PostgreSQL"),
    "password": ("", "password authentication failed"),
    "no pgvector": ("", "has no pgvector extension, and nopg cannot create it"),
}


@pytest.mark.parametrize("case", sorted(BAD_BACKENDS))
def test_a_bad_backend_stops_the_server_in_one_line_and_loses_nothing(
    example_kf: Path,
    pg_server: str,
    wrong_password: str,
    case: str,
) -> None:
    uri, says = BAD_BACKENDS[case]
    if case == "password":
        uri = wrong_password
    elif case == "no pgvector":  # a database of its own user, without the extension
        uri = role_database(pg_server, "no_vector", "nopg")
        with psycopg.connect(with_database(pg_server, "no_vector"), autocommit=True) as conn:
            conn.execute("DROP EXTENSION vector")
    before = ok_in(example_kf, "search", "write-ahead log", "--json").json()
    r = run_cli("--root", str(example_kf), "serve", "--backend", uri, "--port", "0", timeout=120)
    assert r.code != 0 and says in r.err, r.err
    assert r.err.count("\n") == 1 and "Traceback" not in r.err, r.err
    if case == "no pgvector":
        assert "CREATE EXTENSION vector" in r.err
    # the folder is as it was: not claimed, its index answers the same
    assert not (example_kf / ".ok" / "serve.json").exists()
    assert ok_in(example_kf, "search", "write-ahead log", "--json").json() == before


def test_a_connection_lost_mid_query_is_a_503_and_the_next_request_works(
    example_kf: Path,
    pg_server: str,
) -> None:
    uri = database(pg_server, "lost_serve")
    s = Server(example_kf, "--backend", uri)
    h, v1 = s.http, f"/v1/{s.stack}"
    q = {"q": "write-ahead log", "k": 3}
    try:
        want = h.get(f"{v1}/search", params=q).json()
        with psycopg.connect(uri, autocommit=True) as admin:
            # hold the search in the middle of its query, then end its session
            admin.execute("BEGIN")
            admin.execute("LOCK TABLE chunks, notes IN ACCESS EXCLUSIVE MODE")
            got: list[httpx.Response] = []
            t = threading.Thread(target=lambda: got.append(h.get(f"{v1}/search", params=q)))
            t.start()
            waiting = "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            waiting += " AND application_name LIKE 'ok serve % reads%'"
            pid = until(lambda: admin.execute(waiting).fetchone(), seconds=60, every=0.1)[0]
            with psycopg.connect(uri, autocommit=True) as killer:
                killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
            t.join(60)
            admin.execute("ROLLBACK")
        r = got[0]
        assert r.status_code == 503, r.text
        body = r.json()
        assert body["error"].startswith("lost the connection to PostgreSQL")
        assert "\n" not in body["error"] and "nothing was half written" in body["hint"]
        assert h.get(f"{v1}/search", params=q).json() == want  # a new connection serves on
    finally:
        assert s.stop() == 0


def test_writes_to_a_read_only_database_are_kept_in_the_folder_and_said(
    example_kf: Path,
    pg_server: str,
) -> None:
    """A server on a replica (here: a database whose transactions are read-only) serves
    reads; a write is kept in the folder, the response says PostgreSQL was not updated,
    and a sync once the database takes writes again brings it in."""
    uri = database(pg_server, "ro_serve")
    ok_in(example_kf, "sync", "--backend", uri)
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("ALTER DATABASE ro_serve SET default_transaction_read_only = on")
    s = Server(example_kf, "--backend", uri)
    h, v1 = s.http, f"/v1/{s.stack}"
    try:
        assert '"read_only": true' in s.log.read_text()
        assert h.get(f"{v1}/search", params={"q": "CRISPR"}).json()["hits"]
        r = h.post(f"{v1}/notes", json={"text": "Replicas take no writes; the primary does."})
        assert r.status_code == 503, r.text
        assert "saved in the folder" in r.json()["error"] and "read-only" in r.json()["error"]
        notes = h.get(f"{v1}/notes").json()
        assert any("Replicas take no writes" in n["text"] for n in notes)  # nothing lost
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute("ALTER DATABASE ro_serve RESET default_transaction_read_only")
        assert h.post(f"{v1}/sync").status_code == 200
        hits = h.get(f"{v1}/search", params={"q": "replicas take no writes", "k": 1}).json()
        assert "Replicas take no writes" in hits["hits"][0]["quote"]
    finally:
        assert s.stop() == 0


TIDES = [
    "# Tides {n}\n\nThe moon pulls the sea, and the tide rises twice a day at port {n}.\n",
    "# Harbour {n}\n\nA harbour master reads the tide tables before ships come in at {n}.\n",
    "# Gauges {n}\n\nA tide gauge at station {n} records the sea level every six minutes.\n",
]


@pytest.mark.crash
@pytest.mark.parametrize(
    ("point", "committed"),
    [
        ("graph.docs-loaded:4", 0),  # in the first batch of new documents, before its commit
        ("graph.docs-loaded:5", 1),  # one batch committed, the next one loaded
        ("graph.notes-loaded:2", 3),  # every document committed, notes and links not yet
    ],
)
def test_a_server_killed_during_a_sync_leaves_a_stack_the_next_sync_completes(
    example_kf: Path,
    pg_server: str,
    point: str,
    committed: int,
) -> None:
    """kill -9 (a crash point: os._exit) of `ok serve --backend` in its sync after a write:
    the next start's sync completes it, and the stack equals a fresh build. The server's
    own Kùzu sync passes each point first (three documents, one note), then PostgreSQL's
    (one document per batch)."""
    uri, fresh = database(pg_server, "crash_synced"), database(pg_server, "crash_fresh")
    root = example_kf
    ok_in(root, "sync", "--backend", uri)
    env = {"OK_GRAPH_COMMIT_CHUNKS": "1", "OK_SERVE_WATCH": "false"}
    s = Server(root, "--backend", uri, env={**env, "OK_CRASH_AT": point})
    try:
        hand = root / "store" / "normalized" / "hand"
        hand.mkdir(parents=True)
        for i, text in enumerate(TIDES):
            (hand / f"tide-{i}.ok.md").write_text(text.format(n=i))
        note = root / "memories" / "by_date" / "2026-01" / "05" / "20260105-100000-tide01.md"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(
            "---\nid: 20260105-100000-tide01\nts: 2026-01-05T10:00:00Z\n---\n"
            "# Tide notes\nSpring tides follow the full moon; see [[Tides 1]].\n"
        )
        with pytest.raises(httpx.TransportError):
            s.http.post(f"/v1/{s.stack}/sync")
        assert s.proc.wait(timeout=60) == CRASH_EXIT, s.log.read_text()
    finally:
        s.stop()
    with PgGraph.open(uri, stack=stack_name(Folder(root)), write=False) as g:
        assert g.meta().get(PENDING) == "1"  # cut off part way …
        new = [d for d in g.docs().values() if d["path"].startswith("store/normalized/hand/")]
        assert len(new) == committed  # … with whole batches of documents committed
    again = Server(root, "--backend", uri, env=env)
    try:
        assert '"event": "backend.synced"' in again.log.read_text()
        hits = again.http.get(f"/v1/{again.stack}/search", params={"q": "tide gauge station"})
        assert any("tide-2" in h["path"] for h in hits.json()["hits"])
    finally:
        assert again.stop() == 0
    with PgGraph.open(uri, stack=stack_name(Folder(root)), write=False) as g:
        assert PENDING not in g.meta()
    ok_in(root, "index", "--backend", fresh)
    assert answers(root, uri) == answers(root, fresh)
    assert searches(root, uri) == searches(root, fresh)
