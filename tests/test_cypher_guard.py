"""User Cypher stays inside the graph: no files, other databases or extensions, whatever
the flags; writes only with --write. Driven through the CLI and a read-only MCP server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import call, fail, serve
from helpers.run import run_ok

CSV = "(file_format='csv', header=false, delim=':')"
PASSWD = f"'/etc/passwd' {CSV}"

# `{out}` is a path in the test's own directory: nothing may appear under it
HOSTILE: list[str | tuple[str, dict[str, str]]] = [
    # reading files
    f"LOAD FROM {PASSWD} RETURN * LIMIT 2",
    f"load from {PASSWD} return *",
    f"LoAd FrOm {PASSWD} ReTuRn *",
    f"LOAD WITH HEADERS (a STRING, b STRING) FROM {PASSWD} RETURN *",
    f"MATCH (d:Doc) WITH d LOAD FROM {PASSWD} RETURN d.id LIMIT 1",
    f"UNWIND [1] AS x LOAD FROM {PASSWD} RETURN *",
    (f"LOAD FROM $f {CSV} RETURN *", {"f": "/etc/passwd"}),
    "CALL READ_CSV_SERIAL('/etc/passwd') RETURN *",
    "call read_csv_parallel('/etc/passwd') return *",
    "CALL read_parquet('/etc/passwd') RETURN *",
    "CALL read_npy('/etc/passwd') RETURN *",
    "CALL json_scan('/etc/passwd') RETURN *",
    "CALL `read_csv_serial`('/etc/passwd') RETURN *",
    "OPTIONAL MATCH (d:Doc) WITH d CALL read_csv_serial('/etc/passwd') RETURN *",
    "CALL file_info() RETURN *",
    "CALL current_setting('home_directory') RETURN *",
    f"CREATE NODE TABLE Leak AS LOAD FROM {PASSWD} RETURN *",
    f"COPY Topic FROM {PASSWD}",
    "CALL CREATE_FTS_INDEX('Doc', 'leak', ['title'], stopwords := '/etc/passwd')",
    # writing files
    "COPY (RETURN 'x' AS l) TO '{out}.csv' (header=false)",
    "copy (return 'x' as l) to '{out}.csv'",
    "CoPy (MATCH (d:Doc) RETURN d.title) TO '{out}.parquet'",
    ("COPY (RETURN $v AS l) TO '{out}.csv'", {"v": "x"}),
    "EXPORT DATABASE '{out}'",
    "export database '{out}' (format='csv')",
    "IMPORT DATABASE '{out}'",
    "EXPLAIN COPY (RETURN 1 AS l) TO '{out}.csv'",
    "PROFILE EXPORT DATABASE '{out}'",
    # extensions and other databases
    "INSTALL httpfs",
    "install json",
    "FORCE INSTALL json",
    "UNINSTALL json",
    "UPDATE json",
    "LOAD EXTENSION json",
    "load json",
    "ATTACH '{out}.kz' AS o (dbtype kuzu)",
    "attach '{out}.duckdb' as d (dbtype duckdb)",
    "DETACH o",
    "USE o",
    "CALL threads=1",
    # several statements
    f"CALL show_tables() RETURN name; LOAD FROM {PASSWD} RETURN *",
    "RETURN 1; COPY (RETURN 'x' AS l) TO '{out}.csv'",
    "MATCH (d:Doc) RETURN d.id;EXPORT DATABASE '{out}'",
    "RETURN 'it\\'s'; COPY (RETURN 'x' AS l) TO '{out}.csv'",
    "RETURN \"a;b\" ; EXPORT DATABASE '{out}'",
    "RETURN 1 /* ; */ ; INSTALL httpfs",
    # keywords next to comments, comments that do not end where they seem to
    f"/* harmless */ LOAD FROM {PASSWD} RETURN *",
    f"MATCH (d:Doc) // only reading\nWITH d LOAD FROM {PASSWD} RETURN d.id",
    "COPY/* x */(RETURN 'x' AS l) TO '{out}.csv'",
    f"LO/**/AD FROM {PASSWD} RETURN *",
    "RETURN 1 // c\rCOPY (RETURN 'x' AS l) TO '{out}.csv'",
    "RETURN 1 /* a */ AS x; EXPORT DATABASE '{out}' /* */",
    "RETURN 1 AS x /* never closed COPY (RETURN 1) TO '{out}.csv'",
    "RETURN 'never closed ; EXPORT DATABASE '{out}'",
    # Unicode look-alikes and invisible characters
    f"ＬＯＡＤ FROM {PASSWD} RETURN *",
    f"L\u041eAD FROM {PASSWD} RETURN *",  # Cyrillic O
    "\u0421OPY (RETURN 'x' AS l) TO '{out}.csv'",  # Cyrillic S
    f"LO\u200bAD FROM {PASSWD} RETURN *",
    "RETURN 1\uff1b EXPORT DATABASE '{out}'",  # fullwidth semicolon
    f"MATCH (d:Doc)\u00a0WITH d LOAD FROM {PASSWD} RETURN d.id",
]


def _query(case: str | tuple[str, dict[str, str]], out: Path) -> tuple[str, list[str]]:
    q, params = case if isinstance(case, tuple) else (case, {})
    args = [a for k, v in params.items() for a in ("-p", f"{k}={v}")]
    return q.replace("{out}", str(out)), args


def _leaked(text: str) -> bool:
    first = Path("/etc/passwd").read_text().splitlines()[0]
    return any(part in text for part in (first, first.replace(":", "\t"), "nologin"))


def _topics() -> int:
    r = run_ok("graph", "cypher", "MATCH (t:Topic) RETURN count(t) AS n", "--json")
    return int(r.json()[0]["n"])


def test_the_corpus_is_big_enough() -> None:
    assert len(HOSTILE) >= 40


@pytest.mark.parametrize("write", [False, True], ids=["read", "write"])
@pytest.mark.parametrize("case", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_query_is_refused(example_kf: Path, tmp_path: Path, case: Any, write: bool) -> None:
    out = tmp_path / "leak"
    q, args = _query(case, out)
    before = _topics()
    r = run_ok("graph", "cypher", q, *args, *(["--write"] if write else []))
    assert r.code == 2, (r.out, r.err)
    assert r.err.startswith("Error: Cypher refused: ") and "(hint: " in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1
    assert r.out == "" and not _leaked(r.err)
    assert not list(tmp_path.glob("leak*"))
    assert not list((example_kf / ".ok" / "kuzu").glob("leak*"))
    assert _topics() == before


BENIGN: list[tuple[str, dict[str, str], Any]] = [
    ("MATCH (d:Doc) WHERE d.title = 'COPY TO' RETURN d.id AS id", {}, []),
    (
        "MATCH (d:Doc) WHERE d.title <> \"LOAD FROM '/etc/passwd'\" RETURN count(*) AS n",
        {},
        [{"n": 5}],
    ),
    ("MATCH (d:Doc) RETURN count(d) AS `EXPORT DATABASE`", {}, [{"EXPORT DATABASE": 5}]),
    (
        "MATCH (d:Doc) // COPY (RETURN 1) TO '/tmp/x'; INSTALL httpfs\nRETURN count(d) AS n",
        {},
        [{"n": 5}],
    ),
    (
        "MATCH (d:Doc) /* LOAD FROM '/etc/passwd'; ATTACH 'x' */ RETURN count(d) AS n",
        {},
        [{"n": 5}],
    ),
    ("MATCH (d:Doc) RETURN count(d) AS n;", {}, [{"n": 5}]),
    ("match (d:Doc) return count(d) as n", {}, [{"n": 5}]),
    ("OPTIONAL MATCH (d:Doc {id: 'none'}) RETURN d.id AS id", {}, [{"id": None}]),
    (
        "UNWIND ['INSTALL', 'ATTACH', 'USE'] AS w RETURN w",
        {},
        [{"w": "INSTALL"}, {"w": "ATTACH"}, {"w": "USE"}],
    ),
    ("WITH 'it\\'s; COPY' AS s RETURN s", {}, [{"s": "it's; COPY"}]),
    ("RETURN 'Kùzu – ＬＯＡＤ 日本' AS s", {}, [{"s": "Kùzu – ＬＯＡＤ 日本"}]),
    ("RETURN $load AS v", {"load": "/etc/hostname"}, [{"v": "/etc/hostname"}]),
    (
        "MATCH (d:Doc) WHERE d.title CONTAINS $t RETURN d.title AS t",
        {"t": "Ada"},
        [{"t": "Ada Lovelace and the Analytical Engine"}],
    ),
    ("CALL show_tables() WITH name WHERE name = 'Doc' RETURN name", {}, [{"name": "Doc"}]),
    ("CALL table_info('Topic') RETURN name ORDER BY name", {}, [{"name": "id"}, {"name": "name"}]),
    (
        "MATCH (m:MemoryNote) WHERE m.text CONTAINS 'one writer' RETURN count(m) AS n",
        {},
        [{"n": 1}],
    ),
    ("RETURN EXISTS { MATCH (d:Doc) } AS e", {}, [{"e": True}]),
]


@pytest.mark.parametrize(("query", "params", "expected"), BENIGN, ids=range(len(BENIGN)))
def test_benign_read_runs(
    example_ro: Path, query: str, params: dict[str, str], expected: Any
) -> None:
    args = [a for k, v in params.items() for a in ("-p", f"{k}={v}")]
    r = run_ok("graph", "cypher", query, *args, "--json")
    assert r.code == 0, r.err
    assert r.json() == expected


@pytest.mark.parametrize(
    "query",
    [
        "CREATE (:Topic {id: 'copy-to', name: 'COPY TO'})",
        "MATCH (d:Doc) WITH d LIMIT 1 CREATE (:Topic {id: 'x', name: 'x'})",
        "MERGE (t:Topic {id: 'x'}) SET t.name = 'LOAD FROM'",
        "MATCH (t:Topic {id: 'design'}) DETACH DELETE t",
    ],
)
def test_writes_need_write(example_kf: Path, query: str) -> None:
    before = _topics()
    r = run_ok("graph", "cypher", query)
    assert r.code == 2 and "read-only" in r.err and "--write" in r.err
    assert _topics() == before
    r = run_ok("graph", "cypher", query, "--write")
    assert r.code == 0, r.err
    assert _topics() != before


def test_graph_writes_with_write(example_kf: Path) -> None:
    r = run_ok(
        "graph", "cypher", "CREATE (:Topic {id: 'copy', name: 'EXPORT; INSTALL'})", "--write"
    )
    assert r.code == 0, r.err
    r = run_ok(
        "graph",
        "cypher",
        "MATCH (t:Topic {id: 'copy'}) SET t.name = $n RETURN t.name AS n",
        "-p",
        "n=LOAD FROM",
        "--write",
        "--json",
    )
    assert r.json() == [{"n": "LOAD FROM"}]
    r = run_ok("graph", "cypher", "MATCH (t:Topic {id: 'copy'}) DELETE t", "--write")
    assert r.code == 0, r.err
    r = run_ok("graph", "cypher", "MATCH (t:Topic {id: 'copy'}) RETURN count(t) AS n", "--json")
    assert r.json() == [{"n": 0}]


@pytest.mark.parametrize(
    "query", ["BEGIN TRANSACTION", "CHECKPOINT", "COMMIT", "EXPLAIN MATCH (d:Doc) RETURN d"]
)
def test_other_statements_are_not_on_the_allow_list(example_kf: Path, query: str) -> None:
    for extra in ([], ["--write"]):
        r = run_ok("graph", "cypher", query, *extra)
        assert r.code == 2 and "Cypher refused: a query may not start with" in r.err, r.err


def test_empty_query_is_bad_input(example_ro: Path) -> None:
    r = run_ok("graph", "cypher", "// nothing but a comment")
    assert r.code == 2 and r.err.startswith("Error: the query is empty (hint: ")


@pytest.mark.server
def test_read_only_mcp_server_refuses_files(example_kf: Path, tmp_path: Path) -> None:
    out = tmp_path / "leak"

    async def go(c: Any) -> None:
        for q, params in [
            (f"LOAD FROM {PASSWD} RETURN * LIMIT 2", None),
            (f"LOAD FROM $f {CSV} RETURN *", {"f": "/etc/passwd"}),
            ("CALL read_csv_serial('/etc/passwd') RETURN *", None),
            (f"COPY (RETURN 'x' AS l) TO '{out}.csv' (header=false)", None),
            (f"EXPORT DATABASE '{out}'", None),
            ("INSTALL httpfs", None),
            (f"ATTACH '{out}.kz' AS o (dbtype kuzu)", None),
            (f"RETURN 1; COPY (RETURN 'x' AS l) TO '{out}.csv'", None),
            (f"ＣＯＰＹ (RETURN 'x' AS l) TO '{out}.csv'", None),
        ]:
            err = await fail(c, "graph_cypher", query=q, **({"params": params} if params else {}))
            assert "Cypher refused: " in err and "hint: " in err, err
            assert not _leaked(err)
        err = await fail(c, "graph_cypher", query="CREATE (:Topic {id: 'x', name: 'x'})")
        assert "read-only" in err
        rows = await call(
            c, "graph_cypher", query="MATCH (d:Doc) WHERE d.title <> 'COPY TO' RETURN count(*) AS n"
        )
        assert rows["results"] == [{"n": 5}]

    serve([example_kf], go, "--read-only")
    assert not list(tmp_path.glob("leak*"))


@pytest.mark.server
def test_mcp_server_refuses_files_without_read_only(example_kf: Path, tmp_path: Path) -> None:
    out = tmp_path / "leak"

    async def go(c: Any) -> None:
        for q in (
            f"COPY (RETURN 'x' AS l) TO '{out}.csv'",
            f"EXPORT DATABASE '{out}'",
            f"load from {PASSWD} return *",
        ):
            err = await fail(c, "graph_cypher", query=q)
            assert "Cypher refused: " in err and not _leaked(err), err

    serve([example_kf], go)
    assert not list(tmp_path.glob("leak*"))


def test_unaliased_columns_get_the_query_text_as_headers(example_ro: Path) -> None:
    q = (
        "MATCH (d:Doc) RETURN count(*), lower(d.title) AS low, size(d.title) > 2, "
        "d.title + ', x' ORDER BY low LIMIT 1"
    )
    r = run_ok("graph", "cypher", q)
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].split("\t") == [
        "count(*)",
        "low",
        "size(d.title) > 2",
        "d.title + ', x'",
    ]
    # JSON keeps the engine's column names, as before
    keys = list(run_ok("graph", "cypher", q, "--json").json()[0])
    assert keys[0] == "COUNT_STAR()" and keys[1] == "low"
    # RETURN * has nothing to name the columns by: the engine's names stay
    r = run_ok("graph", "cypher", "MATCH (d:Doc) RETURN * LIMIT 1")
    assert r.code == 0 and r.out.splitlines()[0] == "d"
