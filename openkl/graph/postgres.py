"""The derived graph in PostgreSQL with pgvector: the second implementation of
`GraphStore`, for folders that outgrow one machine. The only module that imports psycopg.

One database holds many stacks (a server's folders): every table has a `stack` column,
every query names it, and row-level security keeps a session to the stack in its
`openkl.stack` setting, so the boundary holds for raw SQL too (for roles that are not
superusers; see `grant_stack_reader`). Ids, records and rankings follow `Graph` (Kùzu):
the same rows give the same ids and the same shapes. Full text is BM25 computed in SQL over a
tsvector of `fts_text`; vectors are pgvector with an HNSW index (cosine).

The entity part of `GraphStore` (`EntityStore`) is `pg_entities.PgEntities`, mixed in.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import BadInput, IndexMismatch, LockBusy, OkError, QueryRefused
from ..records import (
    ChunkInput,
    ChunkNode,
    ChunkRow,
    ChunkVector,
    DocIndexed,
    DocInput,
    DocNode,
    DocSummary,
    LineageEdge,
    LineageWalk,
    LinkEdge,
    LinkEnd,
    NoteIndexed,
    NoteNode,
    NoteRefsRow,
    NoteRow,
    NoteSummary,
    NoteTime,
    NoteVector,
    WalkedNode,
    supersession,
)
from . import check_stamps, chunk_fts, fts_query, fts_text, pg_entities, write_stamps
from .base import Atomic
from .link_queries import first_line
from .sandbox import QueryLimits

if TYPE_CHECKING:
    from .protocol import GraphStore

# the stack of a row: filled from the session's setting, so inserts need not name it
_STACK = "stack text NOT NULL DEFAULT current_setting('openkl.stack')"
# the text search configuration of the tsvector columns and of the queries
FTS_CONFIG = "english"
# how much a posting adds to BM25 (k1 0.9, b 0.4) but for its lexeme's idf, with the mean
# row length taken as 100 lexemes: the order in which a query reads a lexeme's postings
IMPACT = "tf::real / (tf + 0.54 + 0.0036 * dl)"
# a query term's postings read in that order, at most: its best ones, whatever the table's
# size (a term with fewer is read whole, and ranks exactly as a scan of all would)
SCAN_PER_TERM = 4000
# the best candidates the bounded scan finds, scored again over every query term
RESCORE = 300


def schema(dim: int) -> list[str]:
    """DDL for the graph's tables (each with `stack`), their indexes and policies."""
    tables = {
        "meta": "key text, value text, PRIMARY KEY (stack, key)",
        "docs": "id text, path text, sha256 text, title text, source text, created_at text,"
        " chars bigint, current boolean, PRIMARY KEY (stack, id)",
        "chunks": f"id text, doc_id text, text text, fts text, span_start bigint,"
        f" span_end bigint, ord bigint, current boolean, vec vector({dim}), dl integer,"
        f" tsv tsvector GENERATED ALWAYS AS (to_tsvector('{FTS_CONFIG}', fts)) STORED,"
        f" PRIMARY KEY (stack, id)",
        "notes": f"id text, path text, sha256 text, text text, fts text, ts text,"
        f" tags text[], topics text[], body_start bigint, body_end bigint, vec vector({dim}),"
        f" dl integer, expires text, supersedes text[], derived_notes text[],"
        f" tsv tsvector GENERATED ALWAYS AS (to_tsvector('{FTS_CONFIG}', fts)) STORED,"
        f" PRIMARY KEY (stack, id)",
        "topics": "id text, PRIMARY KEY (stack, id)",
        "note_topics": "note text, topic text, PRIMARY KEY (stack, note, topic)",
        # a newer document version supersedes an older one
        "versions": "new_id text, old_id text, drift double precision, ts text,"
        " PRIMARY KEY (stack, new_id, old_id)",
        # a note derived from a chunk, a whole document or another note (`DERIVED_FROM`:
        # kind chunk, doc, note), or superseding another note (`SUPERSEDES`: kind supersedes)
        "lineage": "note text, target text, kind text, PRIMARY KEY (stack, note, kind, target)",
        # `[[…]]` links in notes (`LINKS_TO`) and each note's titles and links
        "links": "src text, kind text, dst text, text text, heading text, alias text, line bigint",
        "note_refs": "id text, titles text, links text, PRIMARY KEY (stack, id)",
        # full text: each row's lexemes with their frequency, for BM25 (`fts`); `dl` is the
        # row's length and `current` its chunk's, copied so a query reads this table alone
        # (its key is the covering index `postings_terms` below)
        "postings": "tbl text, lexeme text, id text, tf integer, dl integer, current boolean",
        # each lexeme's document frequency among a table's postings, kept by every write
        # that adds or removes postings, so that BM25 need not count them at query time
        "lexemes": "tbl text, lexeme text, df integer, PRIMARY KEY (stack, tbl, lexeme)",
    } | pg_entities.tables()
    out = ["CREATE EXTENSION IF NOT EXISTS vector"]
    for name, cols in tables.items():
        out += [
            f"CREATE TABLE IF NOT EXISTS {name} ({_STACK}, {cols})",
            f"ALTER TABLE {name} ENABLE ROW LEVEL SECURITY",
            # the tables' owner too (a server that made them): only superusers pass
            f"ALTER TABLE {name} FORCE ROW LEVEL SECURITY",
            f"DROP POLICY IF EXISTS by_stack ON {name}",
            f"CREATE POLICY by_stack ON {name}"
            f" USING (stack = current_setting('openkl.stack', true))"
            f" WITH CHECK (stack = current_setting('openkl.stack', true))",
        ]
    for table in ("chunks", "notes"):
        out += [
            f"CREATE INDEX IF NOT EXISTS {table}_vec ON {table} USING hnsw (vec vector_cosine_ops)",
            # full text is ranked from `postings`: an index of the tsvector would only cost
            # every write its upkeep (graphs of schema 2 had one)
            f"DROP INDEX IF EXISTS {table}_tsv",
        ]
    out += [
        "CREATE INDEX IF NOT EXISTS chunks_doc ON chunks (stack, doc_id)",
        "CREATE INDEX IF NOT EXISTS postings_id ON postings (stack, tbl, id)",
        # a query reads a lexeme's postings from this index alone (an index-only scan),
        # never from the table's pages, where they lie scattered (graphs of schema 2 had a
        # key without the INCLUDE, whose every posting cost a page read)
        "ALTER TABLE postings DROP CONSTRAINT IF EXISTS postings_pkey",
        "CREATE UNIQUE INDEX IF NOT EXISTS postings_terms ON postings (stack, tbl, lexeme, id)"
        " INCLUDE (tf, dl, current)",
        # a lexeme's current postings, those that add most to BM25 first: a query reads the
        # first `SCAN_PER_TERM` of each of its lexemes, not all of them (`fts`)
        f"CREATE INDEX IF NOT EXISTS postings_impact ON postings (stack, tbl, lexeme,"
        f" ({IMPACT}) DESC) INCLUDE (id, tf, dl) WHERE current",
        "CREATE INDEX IF NOT EXISTS links_src ON links (stack, src)",
        "CREATE INDEX IF NOT EXISTS links_dst ON links (stack, dst)",
        # the lineage walk's steps down: what names a target, what superseded a version
        "CREATE INDEX IF NOT EXISTS lineage_target ON lineage (stack, target)",
        "CREATE INDEX IF NOT EXISTS versions_old ON versions (stack, old_id)",
        *pg_entities.indexes(),
    ]
    return out


# on the meta table once the schema is complete (bump it when `schema` changes: every
# statement of `schema` is run again, and each makes only what is missing)
_SCHEMA_MARK = "openkl graph schema 4"

# The next nodes of a frontier entry f (kind, id, way), as `graph/lineage._neighbours`
# finds them one query at a time; `up`/`down` are the way's, `rn`/`rr` the notes' refs.
_NEIGHBOURS = """
SELECT 'SUPERSEDED_BY', 'doc', v.new_id FROM versions v WHERE f.kind = 'doc'
  AND f.way IN ('newer', 'down', 'both') AND v.stack = %(st)s AND v.old_id = f.id
UNION ALL SELECT 'SUPERSEDED_BY', 'doc', v.new_id FROM versions v JOIN docs d
  ON d.stack = v.stack AND d.id = v.old_id WHERE f.kind = 'doc' AND f.way = 'up'
  AND v.stack = %(st)s AND v.old_id = f.id AND NOT d.current
UNION ALL SELECT 'LINKS_TO', l.kind, l.dst FROM links l WHERE f.kind = 'memory'
  AND l.stack = %(st)s AND l.src = f.id
  AND EXISTS (SELECT 1 FROM notes m WHERE m.stack = l.stack AND m.id = l.src)
UNION ALL SELECT 'LINKED_FROM', 'memory', l.src FROM links l WHERE (f.kind = 'memory'
  OR f.kind = 'doc' AND f.way <> 'newer') AND l.stack = %(st)s AND l.dst = f.id
  AND EXISTS (SELECT 1 FROM notes m WHERE m.stack = l.stack AND m.id = l.src)
UNION ALL SELECT 'DERIVED_FROM', CASE x.kind WHEN 'note' THEN 'memory' ELSE x.kind END,
  x.target FROM lineage x WHERE f.kind = 'memory' AND f.way IN ('up', 'both')
  AND x.stack = %(st)s AND x.note = f.id AND x.kind IN ('chunk', 'doc', 'note')
UNION ALL SELECT 'DERIVED_FROM', s.kind, s.id FROM unnest(%(rn)s::text[], %(rr)s::text[])
  AS r(note, ref) CROSS JOIN LATERAL (SELECT CASE WHEN strpos(r.ref, '#') > 0
  AND EXISTS (SELECT 1 FROM chunks c WHERE c.stack = %(st)s AND c.id = r.ref)
  THEN 'chunk' ELSE 'doc' END AS kind) k CROSS JOIN LATERAL (SELECT k.kind,
  CASE k.kind WHEN 'chunk' THEN r.ref ELSE split_part(r.ref, '#', 1) END AS id) s
  WHERE f.kind = 'memory' AND f.way IN ('up', 'both') AND r.note = f.id
  AND (k.kind = 'chunk' OR EXISTS (SELECT 1 FROM docs d WHERE d.stack = %(st)s
  AND d.id = s.id))
UNION ALL SELECT 'SUPERSEDES', 'memory', x.target FROM lineage x WHERE f.kind = 'memory'
  AND f.way IN ('up', 'both') AND x.stack = %(st)s AND x.note = f.id
  AND x.kind = 'supersedes'
UNION ALL SELECT CASE x.kind WHEN 'supersedes' THEN 'SUPERSEDED_BY' ELSE 'DERIVED_BY' END,
  'memory', x.note FROM lineage x WHERE f.kind = 'memory' AND f.way IN ('down', 'both')
  AND x.stack = %(st)s AND x.target = f.id AND x.kind IN ('supersedes', 'note')
UNION ALL SELECT 'PART_OF', 'doc', d.id FROM chunks c JOIN docs d ON d.stack = c.stack
  AND d.id = c.doc_id WHERE f.kind = 'chunk' AND f.way IN ('up', 'both')
  AND c.stack = %(st)s AND c.id = f.id
UNION ALL SELECT 'DERIVED_BY', 'memory', x.note FROM lineage x WHERE f.kind = 'chunk'
  AND f.way IN ('down', 'both') AND x.stack = %(st)s AND x.target = f.id
  AND x.kind = 'chunk'
UNION ALL SELECT 'SUPERSEDES', 'doc', v.old_id FROM versions v WHERE f.kind = 'doc'
  AND f.way IN ('up', 'both') AND v.stack = %(st)s AND v.new_id = f.id
UNION ALL SELECT 'DERIVED_BY', 'memory', x.note FROM lineage x WHERE f.kind = 'doc'
  AND f.way IN ('down', 'both') AND x.stack = %(st)s AND x.target = f.id
  AND x.kind = 'doc'
UNION ALL SELECT 'DERIVED_BY', 'memory', x.note FROM chunks c JOIN lineage x
  ON x.stack = c.stack AND x.target = c.id AND x.kind = 'chunk' WHERE f.kind = 'doc'
  AND f.way IN ('down', 'both') AND c.stack = %(st)s AND c.doc_id = f.id
"""

# A lineage walk, one row per level: the frontier it goes on from (fk, fi, fw: kinds, ids
# and ways, in the order reached), the edges it walked and the nodes it reached first.
_LINEAGE_WALK = f"""
WITH RECURSIVE walk(level, fk, fi, fw, seen, edges, nodes) AS (
  SELECT 0, ARRAY[%(kind)s::text], ARRAY[%(id)s::text], ARRAY[%(way)s::text],
    ARRAY[%(kind)s || ':' || %(id)s], '[]'::jsonb, '[]'::jsonb
  UNION ALL
  SELECT w.level + 1, s.fk, s.fi, s.fw, w.seen || s.keys, s.edges, s.nodes
  FROM walk w CROSS JOIN LATERAL (
    WITH f AS (SELECT * FROM unnest(w.fk, w.fi, w.fw) WITH ORDINALITY AS f(kind, id, way, o)),
    nb AS (SELECT DISTINCT f.o, f.id AS src, f.way, n.rel, n.kind, n.id
      FROM f CROSS JOIN LATERAL ({_NEIGHBOURS}) AS n(rel, kind, id)),
    ranked AS (SELECT nb.*, row_number() OVER (ORDER BY o, rel COLLATE "C",
      kind COLLATE "C", id COLLATE "C") AS r FROM nb),
    fresh AS (SELECT DISTINCT ON (kind, id) * FROM ranked
      WHERE NOT (kind || ':' || id) = ANY(w.seen) ORDER BY kind, id, r),
    walked AS (SELECT *, CASE WHEN rel = 'SUPERSEDED_BY' AND way IN ('up', 'newer')
      THEN 'newer' WHEN rel IN ('DERIVED_FROM', 'PART_OF', 'SUPERSEDES') THEN 'up'
      ELSE 'down' END AS next FROM fresh WHERE rel NOT IN ('LINKS_TO', 'LINKED_FROM'))
    SELECT coalesce((SELECT array_agg(kind ORDER BY r) FROM walked), '{{}}') AS fk,
      coalesce((SELECT array_agg(id ORDER BY r) FROM walked), '{{}}') AS fi,
      coalesce((SELECT array_agg(next ORDER BY r) FROM walked), '{{}}') AS fw,
      coalesce((SELECT array_agg(kind || ':' || id) FROM fresh), '{{}}') AS keys,
      coalesce((SELECT jsonb_agg(jsonb_build_array(src, rel, id) ORDER BY r) FROM ranked),
        '[]') AS edges,
      coalesce((SELECT jsonb_agg(jsonb_build_object('kind', x.kind, 'id', x.id,
        'via', x.src, 'rel', x.rel, 'row', CASE
          WHEN m.id IS NOT NULL THEN jsonb_build_object('path', m.path, 'text', m.text)
          WHEN c.id IS NOT NULL THEN jsonb_build_object('doc', c.doc_id,
            'current', c.current, 'text', c.text)
          WHEN d.id IS NOT NULL THEN jsonb_build_object('path', d.path, 'title', d.title,
            'current', d.current) END) ORDER BY x.r)
        FROM fresh x
        LEFT JOIN notes m ON x.kind = 'memory' AND m.stack = %(st)s AND m.id = x.id
        LEFT JOIN chunks c ON x.kind = 'chunk' AND c.stack = %(st)s AND c.id = x.id
        LEFT JOIN docs d ON x.kind NOT IN ('memory', 'chunk') AND d.stack = %(st)s
          AND d.id = x.id), '[]') AS nodes
  ) s
  WHERE w.level < %(depth)s AND cardinality(w.fk) > 0
)
SELECT level, fk, fi, fw, edges, nodes FROM walk ORDER BY level
"""

TABLES = [
    "meta",
    "docs",
    "chunks",
    "notes",
    "topics",
    "note_topics",
    "entities",
    "extractions",
    "mentions",
    "relationships",
    "versions",
    "lineage",
    "links",
    "note_refs",
    "postings",
    "lexemes",
]
# this module's own layout, stamped beside the shared schema version: a stack built by an
# older layout is rebuilt, not read wrong (3: the entity graph is published)
PG_LAYOUT = "3"
# a row's length in tokens (`dl`, for BM25) as it is inserted, from the same text as its
# `tsv`: set later, by an UPDATE, every row would be written twice, and its vector put in
# the HNSW index twice
_LENGTH = (
    f"(SELECT coalesce(sum(array_length(u.positions, 1)), 0)"
    f" FROM unnest(to_tsvector('{FTS_CONFIG}', %s)) u)"
)
# the parts of a BM25 query: its lexemes (`q`), the table's row count and mean length
# (`n`), and what a posting `p` adds, given its lexeme's document frequency
_QUERY_LEXEMES = f"q AS (SELECT DISTINCT lexeme FROM unnest(to_tsvector('{FTS_CONFIG}', %(q)s)))"
_TABLE_STATS = (
    "n AS (SELECT split_part(value, ' ', 1)::float AS n,"
    " greatest(split_part(value, ' ', 2)::float, 1) AS avgdl FROM meta"
    " WHERE stack = %(st)s AND key = %(key)s)"
)


def _bm25(df: str) -> str:
    return (
        f"ln(1 + (n.n - {df} + 0.5) / ({df} + 0.5)) * p.tf * (%(k1)s + 1)"
        " / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.dl / n.avgdl))"
    )


_ANALYZE_AFTER = 1000  # rows loaded at once after which the tables are analyzed

_TABLE_OF = {"Chunk": "chunks", "MemoryNote": "notes"}


def _table(label: str) -> str:
    if label not in _TABLE_OF:
        raise BadInput(f"no such table {label!r}", "use Chunk or MemoryNote")
    return _TABLE_OF[label]


def _connect(uri: str, who: str | None = None) -> Any:
    """A connection (autocommit, rows as dicts); `who` is its application_name, which
    `PgGraph.lock_stack` shows to a writer that finds the stack taken."""
    if not re.match(r"postgres(ql)?://", uri):
        raise BadInput(
            f"not a PostgreSQL connection string: {uri!r}",
            "give one like postgresql://user:password@host:5432/database",
        )
    try:
        import pgvector.psycopg  # noqa: F401
        import psycopg
        from psycopg.rows import dict_row
    except ImportError as e:
        raise OkError(
            "PostgreSQL support is not installed",
            "install it with `pip install 'openkl[postgresql]'`",
        ) from e
    try:
        return psycopg.connect(
            uri,
            autocommit=True,
            row_factory=dict_row,
            application_name=(who or f"ok pid {os.getpid()}")[:63],
            connect_timeout=10,
        )
    except psycopg.ProgrammingError as e:  # the string itself: an unknown option, bad syntax
        raise BadInput(
            f"not a valid PostgreSQL connection string: {_first_line(e)}",
            "give one like postgresql://user:password@host:5432/database",
        ) from e
    except psycopg.Error as e:
        raise Unavailable(
            f"cannot connect to PostgreSQL: {_first_line(e)}",
            "check the host, port, user, password and database in the connection string",
        ) from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


@contextlib.contextmanager
def _said() -> Iterator[None]:
    """PostgreSQL's failures as one clear `OkError` each."""
    import psycopg

    try:
        yield
    except psycopg.errors.QueryCanceled as e:
        raise OkError("the query took too long and was stopped") from e
    except psycopg.errors.ReadOnlySqlTransaction as e:
        raise ReadOnly(
            "the database is read-only (a replica?)",
            "point the writer at the primary server",
        ) from e
    except psycopg.OperationalError as e:
        raise Unavailable(
            f"lost the connection to PostgreSQL: {_first_line(e)}",
            "check the server, then run the command again (nothing was half written)",
        ) from e


class Unavailable(OkError):
    """PostgreSQL cannot be reached, or the connection was lost (a 503 over HTTP)."""

    http_status = 503


class ReadOnly(OkError):
    """A write went to a read-only database, such as a replica (a 503 over HTTP)."""

    http_status = 503


def _register_vector(conn: Any) -> None:
    from pgvector.psycopg import register_vector

    try:
        register_vector(conn)
    except Exception as e:  # psycopg.ProgrammingError: type "vector" not found
        raise OkError(
            "the database has no pgvector extension",
            "install pgvector on the server and run `CREATE EXTENSION vector` as its owner",
        ) from e


def grant_stack_reader(uri: str, role: str, password: str) -> None:
    """Create a login role that may read every table; row-level security then shows it the
    rows of the stack its session names (`SET openkl.stack = …`) and nothing else."""
    conn = _connect(uri)
    try:
        from psycopg import sql

        ident = sql.Identifier(role)
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(ident, sql.Literal(password))
        )
        conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(ident))
    finally:
        conn.close()


def _lock_key(stack: str) -> tuple[int, int]:
    """The two int4 keys of a stack's advisory lock: openkl's, and the stack's."""
    b = zlib.crc32(stack.encode("utf-8"))
    return _LOCK_CLASS, b - (1 << 32) if b >= 1 << 31 else b


_LOCK_CLASS = 0x6F6B  # "ok"


def who_am_i(what: str) -> str:
    """A connection's application_name: what runs, its pid and its host."""
    return f"{what} (pid {os.getpid()} on {socket.gethostname()})"


def _floats(vec: Any) -> list[float]:
    """A stored vector as Kùzu returns one: a list of floats."""
    return [float(x) for x in vec.to_list()]


class Readers:
    """A server's connections for reading one database, kept open between requests.

    Each read is one read-only transaction that names its stack with SET LOCAL: row-level
    security keeps it to that stack (for a user that is neither a superuser nor BYPASSRLS),
    even for SQL that forgot the stack filter, and between reads a connection names no
    stack and sees no row."""

    def __init__(self, uri: str, who: str, keep: int = 8) -> None:
        self.uri, self.who, self.keep = uri, who, keep
        self._idle: list[Any] = []
        self._lock = threading.Lock()

    def _open(self) -> Any:
        conn = _connect(self.uri, self.who)
        try:
            _register_vector(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _begin(self, conn: Any, stack: str, timeout: float | None) -> None:
        ms = str(max(1, int(timeout * 1000))) if timeout else "0"
        with _said():
            conn.execute("BEGIN READ ONLY")
            conn.execute(
                "SELECT set_config('openkl.stack', %s, true),"
                " set_config('statement_timeout', %s, true)",
                (stack, ms),
            )

    def _start(self, stack: str, timeout: float | None) -> Any:
        """A connection in a read of `stack`: an idle one, or a new one when there is none
        or the idle one was lost meanwhile (nothing was asked of it yet, so trying another
        is safe)."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is not None:
            try:
                self._begin(conn, stack, timeout)
                return conn
            except OkError:
                conn.close()
        conn = self._open()
        try:
            self._begin(conn, stack, timeout)
        except BaseException:
            conn.close()
            raise
        return conn

    @contextlib.contextmanager
    def reading(self, stack: str, timeout: float | None = None) -> Iterator[PgGraph]:
        """`stack`'s graph for one read; its queries are stopped after `timeout` seconds."""
        conn = self._start(stack, timeout)
        g = PgGraph(conn, stack, False)
        g._in_tx = True  # a `transaction()` inside joins this one
        try:
            yield g
        finally:
            g._in_tx = False
            try:
                with _said():
                    conn.execute("ROLLBACK")
            except OkError:
                conn.close()
            self._give(conn)

    def _give(self, conn: Any) -> None:
        if conn.closed or conn.broken:
            return
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(conn)
                return
        conn.close()

    def bypasses_rls(self) -> bool:
        """Whether this user passes row-level security (a superuser, or BYPASSRLS): then
        only the queries' own stack filters keep stacks apart."""
        conn = self._open()
        try:
            with _said():
                row = conn.execute(
                    "SELECT rolsuper OR rolbypassrls AS b FROM pg_roles"
                    " WHERE rolname = current_user"
                ).fetchone()
        finally:
            conn.close()
        return bool(row and row["b"])

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class PgGraph(pg_entities.PgEntities, Atomic):
    """An open connection to one stack's graph in PostgreSQL."""

    def __init__(self, conn: Any, stack: str, writable: bool) -> None:
        self.conn = conn
        self.stack = stack
        self.writable = writable
        self.trace: list[str] | None = None
        self._in_tx = False
        self._stale_stats: set[str] = set()  # tables whose BM25 statistics need recounting
        self._df_ready: set[str] = set()  # tables whose document frequencies `lexemes` keeps

    # -- opening ----------------------------------------------------------------------
    @classmethod
    @contextlib.contextmanager
    def open(
        cls,
        uri: str,
        *,
        stack: str,
        write: bool,
        dim: int | None = None,
        embedder_identity: str | None = None,
        check: bool = True,
        who: str | None = None,
        lock: float | None = None,
    ) -> Iterator[PgGraph]:
        """Open `stack` in the database at `uri`. A writer creates the schema on first use.
        `who` names the connection (its application_name) to other writers; with `lock`, a
        writer first becomes the stack's one writer, waiting up to `lock` seconds."""
        conn = _connect(uri, who)
        try:
            with _said():
                conn.execute("SELECT set_config('openkl.stack', %s, false)", (stack,))
            g = cls(conn, stack, write)
            if write and lock is not None:
                g.lock_stack(lock)
            if write and dim:
                g._ensure_schema(dim, embedder_identity)
            _register_vector(conn)
            if check:
                g._check(embedder_identity)
            yield g
        finally:
            conn.close()

    @property
    def closed(self) -> bool:
        """The connection is gone (closed, or lost)."""
        return bool(self.conn.closed or self.conn.broken)

    def writes(self) -> bool:
        """Whether this session may write (not a replica, nor read-only by default)."""
        rows = self._run("SELECT current_setting('transaction_read_only') AS ro")
        return rows[0]["ro"] != "on"

    # -- one writer per stack ---------------------------------------------------------
    def lock_stack(self, timeout: float) -> None:
        """Become the stack's one writer, across processes and machines: a session-level
        advisory lock on this connection, held until it closes. Waits up to `timeout`
        seconds for another writer, then says who it is."""
        deadline = time.monotonic() + timeout
        a, b = _lock_key(self.stack)
        while True:
            got = self._run("SELECT pg_try_advisory_lock(%(a)s, %(b)s) AS got", {"a": a, "b": b})
            if got[0]["got"]:
                return
            if time.monotonic() >= deadline:
                raise LockBusy(
                    f"stack {self.stack!r} is being written by {self.stack_writer() or 'another writer'}",
                    "one writer per stack: wait for it to finish or stop it, or raise lock_timeout",
                )
            time.sleep(0.2)

    def stack_writer(self) -> str | None:
        """Who holds this stack's writer lock: its application name, pid, host and since."""
        a, b = _lock_key(self.stack)
        rows = self._run(
            "SELECT s.application_name AS app, s.pid, s.client_addr::text AS addr,"
            " to_char(s.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS since"
            " FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.classid::bigint = %(a)s"
            " AND l.objid::bigint = %(b)s AND l.objsubid = 2",
            {"a": a & 0xFFFFFFFF, "b": b & 0xFFFFFFFF},
        )
        if not rows:
            return None
        r = rows[0]
        where = f" from {r['addr']}" if r["addr"] else ""
        return f"{r['app'] or 'a session'} (backend {r['pid']}{where}, since {r['since']})"

    def _ensure_schema(self, dim: int, embedder_identity: str | None) -> None:
        with self.transaction():
            # one writer creates the schema; others wait here for it
            self._run("SELECT pg_advisory_xact_lock(hashtext('openkl.schema'))")
            # made already: no DDL, whose table locks would queue the readers of every stack
            done = self._run("SELECT obj_description(to_regclass('meta'), 'pg_class') AS d")
            if done[0]["d"] != _SCHEMA_MARK:
                self._create_schema(dim)
        if not self.meta():
            self.stamp(dim, embedder_identity)

    def _create_schema(self, dim: int) -> None:
        self._ensure_vector()
        try:
            for ddl in [*schema(dim)[1:], f"COMMENT ON TABLE meta IS '{_SCHEMA_MARK}'"]:
                self._run(ddl)
        except OkError:
            raise  # a read-only server, a lost connection: said by `_run`
        except Exception as e:  # psycopg.errors.InsufficientPrivilege, …
            raise OkError(
                f"cannot create the graph's tables: {_first_line(e)}",
                "connect as a user that may create tables in this database",
            ) from e

    def _ensure_vector(self) -> None:
        """The pgvector extension, created if this user may; else a clear refusal."""
        if self._run("SELECT 1 FROM pg_extension WHERE extname = 'vector'"):
            return
        db = self._run("SELECT current_database() AS d, current_user AS u")[0]
        try:
            self._run(schema(0)[0])
        except OkError:
            raise
        except Exception as e:  # not installed on the server, or not ours to create
            raise OkError(
                f"the database {db['d']} has no pgvector extension, and {db['u']} cannot"
                f" create it: {_first_line(e)}",
                f"as a superuser, run CREATE EXTENSION vector in {db['d']} (pgvector must be"
                " installed on the server)",
            ) from e

    def stamp(self, dim: int, embedder_identity: str | None) -> None:
        """Record the schema version, the embedder and the vectors' dimension."""
        write_stamps(self.set_meta, dim, embedder_identity)
        self.set_meta("pg_layout", PG_LAYOUT)

    def _check(self, embedder_identity: str | None) -> None:
        meta = self.meta()
        if not meta:
            if self.writable:
                return
            raise OkError(
                f"stack {self.stack!r} has no index in this database",
                "run `ok index --backend <connection string>` to build it",
            )
        rebuild = "run `ok index --rebuild --backend <uri>`"
        check_stamps(meta, embedder_identity, rebuild)
        if meta.get("pg_layout") != PG_LAYOUT:
            raise IndexMismatch(
                f"stack {self.stack!r} has table layout {meta.get('pg_layout')}, this ok needs "
                f"{PG_LAYOUT}",
                rebuild,
            )

    def as_store(self) -> GraphStore:
        """This graph as a `GraphStore`."""
        return self

    def destroy(self) -> None:
        """Delete every row of this stack (the files stay)."""
        with self.transaction():
            for t in TABLES:
                self._run(f"DELETE FROM {t} WHERE stack = %(st)s")
            self._df_ready.clear()

    # -- generic ----------------------------------------------------------------------
    def _run(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run SQL with `%(st)s` bound to this stack; rows as dicts."""
        if self.trace is not None:
            self.trace.append(sql)
        with _said():
            cur = self.conn.execute(sql, {"st": self.stack, **(params or {})})
            return cur.fetchall() if cur.description else []

    def _ids(self, sql: str, params: dict[str, Any] | None = None) -> list[str]:
        return [r["id"] for r in self._run(sql, params)]

    def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        if self.trace is not None:
            self.trace.append(sql)
        with _said(), self.conn.cursor() as cur:
            cur.executemany(sql, rows)

    def cypher(
        self,
        query: str,
        params: dict[str, Any] | None = None,
        limits: QueryLimits | None = None,
    ) -> list[dict[str, Any]]:
        raise QueryRefused(
            "Cypher runs on the Kùzu graph only; this folder's graph is in PostgreSQL",
            "query PostgreSQL with SQL, or run `ok index` without --backend for a local graph",
        )

    def set_timeout(self, seconds: float) -> None:
        self._run(f"SET statement_timeout = {max(1, int(seconds * 1000))}")

    def meta(self) -> dict[str, str]:
        import psycopg

        try:
            rows = self._run("SELECT key, value FROM meta WHERE stack = %(st)s")
        except psycopg.errors.UndefinedTable:
            return {}
        return {r["key"]: r["value"] for r in rows}

    def set_meta(self, key: str, value: str) -> None:
        self._run(
            "INSERT INTO meta (key, value) VALUES (%(k)s, %(v)s)"
            " ON CONFLICT (stack, key) DO UPDATE SET value = excluded.value",
            {"k": key, "v": value},
        )

    def unset_meta(self, key: str) -> None:
        self._run("DELETE FROM meta WHERE stack = %(st)s AND key = %(k)s", {"k": key})

    def prune_topics(self) -> None:
        """Drop the topics no note has any more (a fresh build has only those in use)."""
        self._run(
            "DELETE FROM topics t WHERE t.stack = %(st)s AND NOT EXISTS (SELECT 1 FROM"
            " note_topics n WHERE n.stack = t.stack AND n.topic = t.id)"
        )

    # -- transactions -----------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside happen together or not at all; a nested block joins the outer."""
        with self._atomic(self._begin, self._rollback, self._commit):
            yield

    def _rollback(self) -> None:
        self._df_ready.clear()  # it may have been learnt from what the rollback undoes
        self.conn.execute("ROLLBACK")

    def _begin(self) -> None:
        with _said():
            self.conn.execute("BEGIN")

    def _commit(self) -> None:
        import psycopg

        try:
            for table in sorted(self._stale_stats):
                self._count_terms(table)
            self._stale_stats.clear()
            self.conn.execute("COMMIT")
        except psycopg.Error as e:
            with contextlib.suppress(Exception):
                self._rollback()
            kind = Unavailable if isinstance(e, psycopg.OperationalError) else OkError
            raise kind(
                f"commit failed: {_first_line(e)}", "run the sync again: nothing was half written"
            ) from e

    def commit_and_continue(self) -> None:
        if not self._in_tx:
            return
        try:
            self._commit()
        except OkError:
            self._in_tx = False
            raise
        self._begin()

    # -- documents and chunks ---------------------------------------------------------
    def add_docs(self, docs: list[DocInput], chunks: list[ChunkInput], vecs: Any) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO docs (id, path, sha256, title, source, created_at, chars, current)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (d["id"], d["path"], d["sha256"], d["title"], d["source"])
                    + (d["created_at"], d["chars"], d["current"])
                    for d in docs
                ],
            )
            self._many(
                "INSERT INTO chunks (id, doc_id, text, fts, span_start, span_end, ord, current,"
                f" vec, dl) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, {_LENGTH})",
                [
                    (c["id"], c["doc_id"], c["text"], f, c["start"], c["end"], c["ord"])
                    + (c.get("current", True), vecs[i].astype("float32"), f)
                    for i, c in enumerate(chunks)
                    for f in (chunk_fts(c),)  # the indexed text, once per row
                ],
            )
            if chunks:
                self._index_terms("chunks", [c["id"] for c in chunks])

    def remove_doc(self, doc_id: str) -> None:
        with self.transaction():
            chunks = self._ids(
                "SELECT id FROM chunks WHERE stack = %(st)s AND doc_id = %(d)s", {"d": doc_id}
            )
            gone = {"ids": [*chunks, doc_id]}
            self._run("DELETE FROM mentions WHERE stack = %(st)s AND owner = ANY(%(ids)s)", gone)
            self._run("DELETE FROM lineage WHERE stack = %(st)s AND target = ANY(%(ids)s)", gone)
            self._run(
                "DELETE FROM versions WHERE stack = %(st)s AND (new_id = %(d)s OR old_id = %(d)s)",
                {"d": doc_id},
            )
            self._run(
                "DELETE FROM links WHERE stack = %(st)s AND kind = 'doc' AND dst = %(d)s",
                {"d": doc_id},
            )
            self._drop_postings("chunks", chunks)
            self._stale_stats.add("chunks")
            self._run("DELETE FROM chunks WHERE stack = %(st)s AND doc_id = %(d)s", {"d": doc_id})
            self._run("DELETE FROM docs WHERE stack = %(st)s AND id = %(d)s", {"d": doc_id})

    def set_doc_path(self, doc_id: str, path: str) -> None:
        self._run(
            "UPDATE docs SET path = %(p)s WHERE stack = %(st)s AND id = %(d)s",
            {"d": doc_id, "p": path},
        )

    def docs(self) -> dict[str, DocIndexed]:
        rows = self._run("SELECT id, path, sha256, current FROM docs WHERE stack = %(st)s")
        return {r["id"]: r for r in rows}  # type: ignore[misc]

    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, ChunkRow]:
        if not ids:
            return {}
        rows = self._run(
            'SELECT c.id, c.doc_id, c.text, c.span_start AS "start", c.span_end AS "end",'
            " d.path, d.sha256, d.source, d.created_at, d.title FROM chunks c"
            " JOIN docs d ON d.stack = c.stack AND d.id = c.doc_id"
            " WHERE c.stack = %(st)s AND c.id = ANY(%(ids)s)",
            {"ids": list(ids)},
        )
        return {r["id"]: r for r in rows}  # type: ignore[misc]

    def doc_paths(self, doc_ids: Sequence[str]) -> dict[str, str]:
        rows = self._run(
            "SELECT id, path FROM docs WHERE stack = %(st)s AND id = ANY(%(ids)s)",
            {"ids": list(doc_ids)},
        )
        return {r["id"]: r["path"] for r in rows}

    def current_chunks_of(self, doc_ids: Sequence[str]) -> list[ChunkVector]:
        rows = self._run(
            "SELECT id, doc_id AS doc, text, vec FROM chunks"
            " WHERE stack = %(st)s AND doc_id = ANY(%(ids)s) AND current",
            {"ids": list(doc_ids)},
        )
        return [{**r, "vec": _floats(r["vec"])} for r in rows]  # type: ignore[typeddict-item]

    def doc_summaries(self) -> list[DocSummary]:
        return self._run(  # type: ignore[return-value]
            "SELECT id, path, title, sha256 AS sha, created_at FROM docs WHERE stack = %(st)s"
        )

    # -- memory notes -----------------------------------------------------------------
    def add_notes(self, notes: list[NoteRow], vecs: Any) -> None:
        if not notes:
            return
        with self.transaction():
            self._many(
                "INSERT INTO notes (id, path, sha256, text, fts, ts, tags, topics, body_start,"
                " body_end, vec, expires, supersedes, derived_notes, dl)"
                f" VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, {_LENGTH})",
                [
                    (n["id"], n["path"], n["sha256"], n["text"], f, n["ts"])
                    + (list(n["tags"]), list(n["topics"]), n["body_start"], n["body_end"])
                    + (vecs[i].astype("float32"), n.get("expires", ""))
                    + (list(n.get("supersedes", [])), list(n.get("derived_notes", [])), f)
                    for i, n in enumerate(notes)
                    for f in (fts_text(n["text"]),)  # the indexed text, once per row
                ],
            )
            self._index_terms("notes", [n["id"] for n in notes])
            pairs = sorted({(n["id"], t) for n in notes for t in n["topics"]})
            self._many(
                "INSERT INTO topics (id) VALUES (%s) ON CONFLICT DO NOTHING",
                [(t,) for t in sorted({t for _, t in pairs})],
            )
            self._many(
                "INSERT INTO note_topics (note, topic) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                pairs,
            )

    def remove_note(self, note_id: str) -> None:
        with self.transaction():
            one = {"n": note_id}
            self._run("DELETE FROM note_topics WHERE stack = %(st)s AND note = %(n)s", one)
            self._run(
                "DELETE FROM lineage WHERE stack = %(st)s AND (note = %(n)s"
                " OR (kind IN ('note', 'supersedes') AND target = %(n)s))",
                one,
            )
            self._run("DELETE FROM mentions WHERE stack = %(st)s AND owner = %(n)s", one)
            self._run(
                "DELETE FROM links WHERE stack = %(st)s"
                " AND (src = %(n)s OR (kind = 'memory' AND dst = %(n)s))",
                one,
            )
            self._drop_postings("notes", [note_id])
            self._stale_stats.add("notes")
            self._run("DELETE FROM notes WHERE stack = %(st)s AND id = %(n)s", one)

    def notes(self) -> dict[str, NoteIndexed]:
        rows = self._run("SELECT id, path, sha256 FROM notes WHERE stack = %(st)s")
        return {r["id"]: r for r in rows}  # type: ignore[misc]

    def notes_by_id(self, ids: Sequence[str]) -> dict[str, NoteRow]:
        if not ids:
            return {}
        rows = self._run(
            "SELECT id, path, sha256, text, ts, tags, topics, body_start, body_end FROM notes"
            " WHERE stack = %(st)s AND id = ANY(%(ids)s)",
            {"ids": list(ids)},
        )
        return {r["id"]: r for r in rows}  # type: ignore[misc]

    def notes_with_vectors(self, note_ids: Sequence[str]) -> list[NoteVector]:
        rows = self._run(
            "SELECT id, path, sha256 AS sha, text, vec FROM notes"
            " WHERE stack = %(st)s AND id = ANY(%(ids)s)",
            {"ids": list(note_ids)},
        )
        return [{**r, "vec": _floats(r["vec"])} for r in rows]  # type: ignore[typeddict-item]

    def note_summaries(self) -> list[NoteSummary]:
        return self._run(  # type: ignore[return-value]
            "SELECT id, path, sha256 AS sha, ts FROM notes WHERE stack = %(st)s"
        )

    # -- retrieval --------------------------------------------------------------------
    def fts(
        self, table: str, query: str, k: int, k1: float = 0.9, b: float = 0.4
    ) -> list[tuple[str, float]]:
        """BM25 over the table's postings: [(id, score)] best first.

        `ts_rank_cd` ranks SciFact at half Kùzu's BM25 (bench/backends.py), so the score is
        BM25's: a lexeme's positions in the row's tsvector are its frequency, `dl` the row's
        length, document frequencies are kept in `lexemes` and the row count and mean
        length in `meta` by every write. Any word of the query may match, as with Kùzu.

        It stops early: of each query lexeme it reads at most `SCAN_PER_TERM` current
        postings, those adding most first (`postings_impact`), sums what they add per row,
        and scores the best `RESCORE` rows (at least 4k) again over every query lexeme.
        A lexeme in fewer rows is read whole, so a table where no query lexeme is in more
        ranks exactly as a scan of every posting would. A stack whose document frequencies
        are not kept yet (made by an older openkl, until its next write) is scanned whole."""
        name = _table(table)
        args = {"q": fts_query(query), "t": name, "key": f"bm25.{name}", "k": k, "k1": k1, "b": b}
        if not self._df_kept(name):
            return self._fts_scan(args)
        bm25 = _bm25("l.df")
        rows = self._run(
            f"WITH {_QUERY_LEXEMES},"
            f" l AS (SELECT l.lexeme, l.df FROM lexemes l JOIN q USING (lexeme)"
            f" WHERE l.stack = %(st)s AND l.tbl = %(t)s AND l.df > 0),"
            f" {_TABLE_STATS},"
            f" p AS (SELECT l.lexeme, s.id, s.tf, s.dl FROM l CROSS JOIN LATERAL"
            f" (SELECT p.id, p.tf, p.dl FROM postings p WHERE p.stack = %(st)s"
            f" AND p.tbl = %(t)s AND p.lexeme = l.lexeme AND p.current"
            f" ORDER BY ({IMPACT}) DESC LIMIT %(scan)s) s),"
            f" c AS (SELECT p.id FROM p JOIN l USING (lexeme), n GROUP BY p.id"
            f" ORDER BY sum({bm25}) DESC, p.id LIMIT %(r)s),"
            f" e AS (SELECT p.id, p.lexeme, p.tf, p.dl FROM c JOIN l ON true"
            f" JOIN postings p ON p.stack = %(st)s AND p.tbl = %(t)s AND p.lexeme = l.lexeme"
            f" AND p.id = c.id)"
            f" SELECT p.id, sum({bm25}) AS score FROM e p JOIN l USING (lexeme), n"
            f" GROUP BY p.id ORDER BY score DESC, p.id LIMIT %(k)s",
            {**args, "scan": SCAN_PER_TERM, "r": max(RESCORE, 4 * k)},
        )
        return [(r["id"], float(r["score"])) for r in rows]

    def _fts_scan(self, args: dict[str, Any]) -> list[tuple[str, float]]:
        """BM25 from every posting of the query's lexemes, counting their frequencies."""
        rows = self._run(
            f"WITH {_QUERY_LEXEMES},"
            f" p AS (SELECT p.id, p.lexeme, p.tf, p.dl, p.current FROM postings p"
            f" JOIN q ON p.lexeme = q.lexeme WHERE p.stack = %(st)s AND p.tbl = %(t)s),"
            f" df AS (SELECT lexeme, count(*) AS df FROM p GROUP BY lexeme),"
            f" {_TABLE_STATS}"
            f" SELECT p.id, sum({_bm25('df.df')}) AS score"
            f" FROM p JOIN df USING (lexeme), n WHERE p.current"
            f" GROUP BY p.id ORDER BY score DESC, p.id LIMIT %(k)s",
            args,
        )
        return [(r["id"], float(r["score"])) for r in rows]

    def _df_kept(self, table: str) -> bool:
        """Whether `lexemes` holds the table's document frequencies (meta `df.<table>`)."""
        if table in self._df_ready:
            return True
        if self._run(
            "SELECT 1 FROM meta WHERE stack = %(st)s AND key = %(k)s", {"k": f"df.{table}"}
        ):
            self._df_ready.add(table)
            return True
        return False

    def _keep_df(self, table: str) -> None:
        """Count the table's document frequencies into `lexemes` once (a stack an older
        openkl made has none), so that the writes after keep them; in the caller's
        transaction."""
        if self._df_kept(table):
            return
        self._run("DELETE FROM lexemes WHERE stack = %(st)s AND tbl = %(t)s", {"t": table})
        self._run(
            "INSERT INTO lexemes (tbl, lexeme, df) SELECT %(t)s, lexeme, count(*)"
            " FROM postings WHERE stack = %(st)s AND tbl = %(t)s GROUP BY lexeme",
            {"t": table},
        )
        self._run(
            "INSERT INTO meta (key, value) VALUES (%(k)s, '1')"
            " ON CONFLICT (stack, key) DO UPDATE SET value = excluded.value",
            {"k": f"df.{table}"},
        )

    def _drop_postings(self, table: str, ids: list[str]) -> None:
        """Delete the postings of the rows `ids`, and their share of the document
        frequencies."""
        self._keep_df(table)
        self._run(
            "WITH d AS (DELETE FROM postings WHERE stack = %(st)s AND tbl = %(t)s"
            " AND id = ANY(%(ids)s) RETURNING lexeme),"
            " c AS (SELECT lexeme, count(*) AS n FROM d GROUP BY lexeme)"
            " UPDATE lexemes l SET df = l.df - c.n FROM c"
            " WHERE l.stack = %(st)s AND l.tbl = %(t)s AND l.lexeme = c.lexeme",
            {"t": table, "ids": ids},
        )

    def _index_terms(self, table: str, ids: list[str]) -> None:
        """The postings of the new rows `ids`, for BM25 (`fts`), found by primary key: a
        load of many batches costs each batch its own rows, not a scan of the table."""
        current = "c.current" if table == "chunks" else "true"
        # postings a row of the same id left (deleted by hand, outside `remove_*`) give way
        self._drop_postings(table, ids)
        self._run(
            f"WITH i AS (INSERT INTO postings (tbl, lexeme, id, tf, dl, current)"
            f" SELECT %(t)s, u.lexeme, c.id, array_length(u.positions, 1), c.dl, {current}"
            f" FROM {table} c, unnest(c.tsv) u WHERE c.stack = %(st)s AND c.id = ANY(%(ids)s)"
            f" RETURNING lexeme)"
            f" INSERT INTO lexemes (tbl, lexeme, df) SELECT %(t)s, lexeme, count(*) FROM i"
            f" GROUP BY lexeme ON CONFLICT (stack, tbl, lexeme)"
            f" DO UPDATE SET df = lexemes.df + excluded.df",
            {"t": table, "ids": ids},
        )
        self._stale_stats.add(table)
        if len(ids) >= _ANALYZE_AFTER:
            # a large load: fresh planner statistics, or the first queries scan whole tables
            self._run(f"ANALYZE {table}")
            self._run("ANALYZE postings")
            self._run("ANALYZE lexemes")

    def _count_terms(self, table: str) -> None:
        """Keep the table's row count and mean length in `meta` (key `bm25.<table>`)."""
        self._run(
            f"INSERT INTO meta (key, value) SELECT %(key)s, count(*) || ' ' || coalesce(avg(dl), 0)"
            f" FROM {table} WHERE stack = %(st)s"
            f" ON CONFLICT (stack, key) DO UPDATE SET value = excluded.value",
            {"key": f"bm25.{table}"},
        )

    def vector(self, table: str, qvec: Sequence[float], k: int) -> list[tuple[str, float]]:
        """Cosine similarity through the HNSW index: [(id, score)] best first.

        An HNSW scan returns at most `hnsw.ef_search` rows (40 by default), fewer than the
        candidates a search asks for (50 and up), and fewer still when rows of other stacks
        or old chunks are filtered out after it: so the scan's list is as long as Kùzu's
        (`max(200, 2k + 10)`, at most pgvector's 1000), and it goes on (iterative scan, in
        order of distance, from pgvector 0.8) until `k` rows pass the filter."""
        import numpy as np

        name = _table(table)
        where = " AND current" if name == "chunks" else ""
        with self.transaction():  # the settings hold for this transaction only
            self._run(
                "SELECT set_config('hnsw.ef_search', %(ef)s, true), CASE WHEN (SELECT"
                " string_to_array(split_part(extversion, '-', 1), '.')::int[] >= '{0,8}'"
                " FROM pg_extension WHERE extname = 'vector')"  # iterative scans: 0.8
                " THEN set_config('hnsw.iterative_scan', 'strict_order', true) END",
                {"ef": str(min(1000, max(200, 2 * k + 10)))},
            )
            rows = self._run(
                f"SELECT id, 1 - (vec <=> %(q)s) AS s FROM {name} WHERE stack = %(st)s{where}"
                f" ORDER BY vec <=> %(q)s, id LIMIT %(k)s",
                {"q": np.asarray(qvec, dtype="float32"), "k": k},
            )
        return [(r["id"], float(r["s"])) for r in rows]

    def vectors(self, table: str, ids: Sequence[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        rows = self._run(
            f"SELECT id, vec FROM {_table(table)} WHERE stack = %(st)s AND id = ANY(%(ids)s)",
            {"ids": list(ids)},
        )
        return {r["id"]: _floats(r["vec"]) for r in rows}

    # -- versions ---------------------------------------------------------------------
    def version_links(self) -> list[tuple[str, str]]:
        rows = self._run("SELECT new_id, old_id FROM versions WHERE stack = %(st)s")
        return [(r["new_id"], r["old_id"]) for r in rows]

    def add_old_version(
        self, doc_id: str, path: str, sha256: str, title: str, source: str, created_at: str
    ) -> None:
        self._run(
            "INSERT INTO docs (id, path, sha256, title, source, created_at, chars, current)"
            " VALUES (%(id)s, %(p)s, %(s)s, %(t)s, %(src)s, %(c)s, 0, false)",
            {"id": doc_id, "p": path, "s": sha256, "t": title, "src": source, "c": created_at},
        )

    def retire_doc(self, doc_id: str) -> None:
        self._run(
            "UPDATE docs SET current = false WHERE stack = %(st)s AND id = %(d)s", {"d": doc_id}
        )

    def link_version(self, new_id: str, old_id: str, drift: float, ts: str) -> None:
        # both documents must exist, as with Kùzu's MATCH
        self._run(
            "INSERT INTO versions (new_id, old_id, drift, ts)"
            " SELECT %(n)s, %(o)s, %(dr)s, %(ts)s WHERE (SELECT count(*) FROM docs"
            " WHERE stack = %(st)s AND id IN (%(n)s, %(o)s)) = 2 ON CONFLICT DO NOTHING",
            {"n": new_id, "o": old_id, "dr": drift, "ts": ts},
        )

    # -- lineage ----------------------------------------------------------------------
    def lineage_note(self, note_id: str) -> NoteNode | None:
        rows = self._run(
            "SELECT path, text FROM notes WHERE stack = %(st)s AND id = %(id)s", {"id": note_id}
        )
        return rows[0] if rows else None  # type: ignore[return-value]

    def lineage_chunk(self, chunk_id: str) -> ChunkNode | None:
        rows = self._run(
            "SELECT doc_id AS doc, current, text FROM chunks WHERE stack = %(st)s AND id = %(id)s",
            {"id": chunk_id},
        )
        return rows[0] if rows else None  # type: ignore[return-value]

    def lineage_doc(self, doc_id: str) -> DocNode | None:
        rows = self._run(
            "SELECT path, title, current FROM docs WHERE stack = %(st)s AND id = %(id)s",
            {"id": doc_id},
        )
        return rows[0] if rows else None  # type: ignore[return-value]

    def lineage_walk(
        self,
        kind: str,
        node_id: str,
        direction: str,
        depth: int,
        refs: Callable[[str], Sequence[str]],
    ) -> LineageWalk:
        """The walk of `graph/lineage.py` in one recursive CTE (`_LINEAGE_WALK`): each
        iteration is a level, and carries the frontier (kind, id, direction, in the order
        reached) and every node reached so far, so a node is reached once, first by the
        lowest level and then by its predecessor's order and the sorted (rel, kind, id).

        What a note's file says it was derived from (`refs`) is passed in for the notes
        the walk goes up from; when it reaches one more such note, it runs again with that
        note's refs too (rarely: notes derived from, or superseding, notes with refs)."""
        known: dict[str, list[str]] = {}
        if kind == "memory" and direction in ("up", "both"):
            known[node_id] = list(refs(node_id))
        while True:
            levels = self._run(
                _LINEAGE_WALK,
                {
                    "kind": kind,
                    "id": node_id,
                    "way": direction,
                    "depth": depth,
                    "rn": [n for n, rs in known.items() for _ in rs],
                    "rr": [r for rs in known.values() for r in rs],
                },
            )
            # the notes the walk went up from (every level's frontier but the last)
            up = {
                i
                for lv in levels
                if lv["level"] < depth
                for k, i, w in zip(lv["fk"], lv["fi"], lv["fw"], strict=True)
                if k == "memory" and w in ("up", "both")
            }
            more = {n: list(refs(n)) for n in sorted(up - set(known))}
            known |= more
            if not any(more.values()):
                break
        nodes: list[WalkedNode] = []
        edges: list[LineageEdge] = []
        for lv in levels:
            edges += [{"from": a, "rel": r, "to": b} for a, r, b in lv["edges"]]
            for n in lv["nodes"]:
                row = n.pop("row")
                if row is not None and "current" in row:
                    row["current"] = bool(row["current"])
                nodes.append({**n, "depth": lv["level"], "row": row})  # type: ignore[typeddict-item]
        return {"nodes": nodes, "edges": edges}

    def newer_versions(self, doc_id: str) -> list[str]:
        return self._ids(
            "SELECT new_id AS id FROM versions WHERE stack = %(st)s AND old_id = %(d)s",
            {"d": doc_id},
        )

    def newer_versions_if_retired(self, doc_id: str) -> list[str]:
        return self._ids(
            "SELECT v.new_id AS id FROM versions v JOIN docs d ON d.stack = v.stack"
            " AND d.id = v.old_id WHERE v.stack = %(st)s AND v.old_id = %(d)s AND NOT d.current",
            {"d": doc_id},
        )

    def older_versions(self, doc_id: str) -> list[str]:
        return self._ids(
            "SELECT old_id AS id FROM versions WHERE stack = %(st)s AND new_id = %(d)s",
            {"d": doc_id},
        )

    def _derived(self, where: str, params: dict[str, Any]) -> list[str]:
        return self._ids(
            f"SELECT DISTINCT note AS id FROM lineage WHERE stack = %(st)s AND {where}", params
        )

    def note_source_chunks(self, note_id: str) -> list[str]:
        return self._ids(
            "SELECT target AS id FROM lineage WHERE stack = %(st)s AND note = %(n)s"
            " AND kind = 'chunk'",
            {"n": note_id},
        )

    def note_source_docs(self, note_id: str) -> list[str]:
        return self._ids(
            "SELECT target AS id FROM lineage WHERE stack = %(st)s AND note = %(n)s"
            " AND kind = 'doc'",
            {"n": note_id},
        )

    def docs_of_chunk(self, chunk_id: str) -> list[str]:
        return self._ids(
            "SELECT d.id FROM chunks c JOIN docs d ON d.stack = c.stack AND d.id = c.doc_id"
            " WHERE c.stack = %(st)s AND c.id = %(c)s",
            {"c": chunk_id},
        )

    def notes_derived_from_chunk(self, chunk_id: str) -> list[str]:
        return self._derived("kind = 'chunk' AND target = %(t)s", {"t": chunk_id})

    def notes_derived_from_doc(self, doc_id: str) -> list[str]:
        return self._derived("kind = 'doc' AND target = %(t)s", {"t": doc_id})

    def notes_derived_from_doc_chunks(self, doc_id: str) -> list[str]:
        return self._derived(
            "kind = 'chunk' AND target IN (SELECT id FROM chunks WHERE stack = %(st)s"
            " AND doc_id = %(t)s)",
            {"t": doc_id},
        )

    def notes_derived_from_docs(self, doc_ids: Sequence[str]) -> list[str]:
        return sorted(
            self._derived(
                "((kind = 'doc' AND target = ANY(%(ids)s)) OR (kind = 'chunk' AND target IN"
                " (SELECT id FROM chunks WHERE stack = %(st)s AND doc_id = ANY(%(ids)s))))",
                {"ids": list(doc_ids)},
            )
        )

    def unlink_derived(self, note_ids: Sequence[str]) -> None:
        self._run(
            "DELETE FROM lineage WHERE stack = %(st)s AND note = ANY(%(ids)s)"
            " AND kind <> 'supersedes'",
            {"ids": list(note_ids)},
        )

    # -- note to note: SUPERSEDES and DERIVED_FROM from the lists on a note ------------
    def link_note_refs(self) -> None:
        for column, kind in (("supersedes", "supersedes"), ("derived_notes", "note")):
            self._run(
                f"INSERT INTO lineage (note, target, kind) SELECT n.id, r.target, '{kind}'"
                f" FROM notes n CROSS JOIN LATERAL unnest(n.{column}) AS r(target)"
                " WHERE n.stack = %(st)s AND r.target <> n.id AND EXISTS (SELECT 1 FROM notes o"
                " WHERE o.stack = n.stack AND o.id = r.target) ON CONFLICT DO NOTHING"
            )

    def _note_ends(self, kind: str, note_id: str, forward: bool) -> list[str]:
        mine, other = ("note", "target") if forward else ("target", "note")
        return sorted(
            self._ids(
                f"SELECT {other} AS id FROM lineage WHERE stack = %(st)s AND kind = %(k)s"
                f" AND {mine} = %(n)s",
                {"k": kind, "n": note_id},
            )
        )

    def older_notes(self, note_id: str) -> list[str]:
        return self._note_ends("supersedes", note_id, True)

    def newer_notes(self, note_id: str) -> list[str]:
        return self._note_ends("supersedes", note_id, False)

    def note_source_notes(self, note_id: str) -> list[str]:
        return self._note_ends("note", note_id, True)

    def notes_derived_from_note(self, note_id: str) -> list[str]:
        return self._note_ends("note", note_id, False)

    def hidden_notes(self, now: str, superseded: bool = True) -> set[str]:
        ids = set(
            self._ids(
                "SELECT id FROM notes WHERE stack = %(st)s AND expires <> ''"
                " AND expires <= %(now)s",
                {"now": now},
            )
        )
        if superseded:
            rows = self._run(
                "SELECT l.note AS n, a.ts AS nts, l.target AS m, b.ts AS mts FROM lineage l"
                " JOIN notes a ON a.stack = l.stack AND a.id = l.note"
                " JOIN notes b ON b.stack = l.stack AND b.id = l.target"
                " WHERE l.stack = %(st)s AND l.kind = 'supersedes'"
            )
            ts = {r["n"]: r["nts"] or "" for r in rows} | {r["m"]: r["mts"] or "" for r in rows}
            ids |= supersession(((r["n"], r["m"]) for r in rows), ts).hidden
        return ids

    def has_chunk(self, chunk_id: str) -> bool:
        return bool(
            self._run("SELECT 1 FROM chunks WHERE stack = %(st)s AND id = %(c)s", {"c": chunk_id})
        )

    def chunks_overlapping(self, doc_id: str, start: int, end: int) -> list[str]:
        return self._ids(
            "SELECT id FROM chunks WHERE stack = %(st)s AND doc_id = %(d)s"
            " AND span_start < %(e)s AND span_end > %(s)s",
            {"d": doc_id, "s": start, "e": end},
        )

    def _link_derived(self, note_id: str, kind: str, table: str, target: str) -> None:
        # kept once, and only between a note and a target the graph holds
        self._run(
            f"INSERT INTO lineage (note, target, kind) SELECT %(n)s, %(t)s, %(k)s"
            f" WHERE EXISTS (SELECT 1 FROM notes WHERE stack = %(st)s AND id = %(n)s)"
            f" AND EXISTS (SELECT 1 FROM {table} WHERE stack = %(st)s AND id = %(t)s)"
            f" ON CONFLICT DO NOTHING",
            {"n": note_id, "t": target, "k": kind},
        )

    def link_note_to_chunk(self, note_id: str, chunk_id: str) -> None:
        self._link_derived(note_id, "chunk", "chunks", chunk_id)

    def link_note_to_doc(self, note_id: str, doc_id: str) -> None:
        self._link_derived(note_id, "doc", "docs", doc_id)

    # -- links between notes ----------------------------------------------------------
    def _edges(self, where: str, ids: Sequence[str] | None) -> list[LinkEdge]:
        rows = self._run(
            "SELECT l.src, l.kind, l.dst, l.text, l.heading, l.alias, l.line FROM links l"
            " WHERE l.stack = %(st)s AND EXISTS (SELECT 1 FROM notes m WHERE m.stack = l.stack"
            f" AND m.id = l.src){where} ORDER BY l.kind DESC, l.src, l.line, l.dst",
            {"ids": list(ids or [])},
        )
        return rows  # type: ignore[return-value]

    def all_links(self) -> list[LinkEdge]:
        return self._edges("", None)

    def links_from(self, note_ids: Sequence[str]) -> list[LinkEdge]:
        return self._edges(" AND l.src = ANY(%(ids)s)", note_ids)

    def links_to(self, ids: Sequence[str]) -> list[LinkEdge]:
        return self._edges(" AND l.dst = ANY(%(ids)s)", ids)

    def unlink_notes(self, note_ids: Sequence[str]) -> None:
        self._run(
            "DELETE FROM links WHERE stack = %(st)s AND src = ANY(%(ids)s)",
            {"ids": list(note_ids)},
        )

    def add_links(self, links: Sequence[LinkEdge]) -> None:
        self._many(
            "INSERT INTO links (src, kind, dst, text, heading, alias, line)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [
                (r["src"], r["kind"], r["dst"], r["text"], r["heading"], r["alias"], int(r["line"]))
                for r in links
            ],
        )

    def set_note_refs(self, rows: Sequence[NoteRefsRow]) -> None:
        if not rows:
            return
        with self.transaction():
            self.forget_note_refs([r["id"] for r in rows])
            self._many(
                "INSERT INTO note_refs (id, titles, links) VALUES (%s, %s, %s)",
                [(r["id"], r["titles"], r["links"]) for r in rows],
            )

    def forget_note_refs(self, note_ids: Sequence[str]) -> None:
        self._run(
            "DELETE FROM note_refs WHERE stack = %(st)s AND id = ANY(%(ids)s)",
            {"ids": list(note_ids)},
        )

    def note_refs(self) -> list[NoteRefsRow]:
        return self._run("SELECT id, titles, links FROM note_refs WHERE stack = %(st)s")  # type: ignore[return-value]

    def note_times(self) -> list[NoteTime]:
        return self._run("SELECT id, ts FROM notes WHERE stack = %(st)s")  # type: ignore[return-value]

    def doc_titles(self) -> dict[str, str]:
        rows = self._run("SELECT id, title FROM docs WHERE stack = %(st)s AND current")
        return {r["id"]: r["title"] or "" for r in rows}

    def link_ends(self, note_ids: Sequence[str], doc_ids: Sequence[str]) -> dict[str, LinkEnd]:
        out: dict[str, LinkEnd] = {}
        for r in self._run(
            "SELECT id, path, text FROM notes WHERE stack = %(st)s AND id = ANY(%(ids)s)",
            {"ids": list(note_ids)},
        ):
            out[r["id"]] = {
                "kind": "memory",
                "id": r["id"],
                "path": r["path"],
                "title": first_line(r["text"]),
            }
        for r in self._run(
            "SELECT id, path, title FROM docs WHERE stack = %(st)s AND id = ANY(%(ids)s)",
            {"ids": list(doc_ids)},
        ):
            out[r["id"]] = {
                "kind": "doc",
                "id": r["id"],
                "path": r["path"] or "",
                "title": r["title"] or "",
            }
        return out

    # -- health and bookkeeping -------------------------------------------------------
    def incomplete(self) -> dict[str, list[str]]:
        """Current documents with text but no chunks, and documents and notes with a chunk
        or note that has no entity extraction (see `Graph.incomplete`)."""
        docs = self._ids(
            "SELECT d.id FROM docs d WHERE d.stack = %(st)s AND d.current AND (d.chars > 0"
            " AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.stack = d.stack AND c.doc_id = d.id)"
            " OR EXISTS (SELECT 1 FROM chunks c WHERE c.stack = d.stack AND c.doc_id = d.id"
            " AND NOT EXISTS (SELECT 1 FROM extractions x WHERE x.stack = c.stack"
            " AND x.id = c.id))) ORDER BY d.id"
        )
        notes = self._ids(
            "SELECT m.id FROM notes m WHERE m.stack = %(st)s AND NOT EXISTS (SELECT 1 FROM"
            " extractions x WHERE x.stack = m.stack AND x.id = m.id) ORDER BY m.id"
        )
        return {"docs": docs, "notes": notes}

    def room_needed(self, chunks: int, rewrite: bool = True) -> int:
        return 0  # the server's disk, not this machine's

    def counts(self) -> dict[str, int]:
        tables = {"Doc": "docs", "Chunk": "chunks", "MemoryNote": "notes"}
        tables |= {"Entity": "entities", "Topic": "topics"}
        return {
            label: int(self._run(f"SELECT count(*) AS c FROM {t} WHERE stack = %(st)s")[0]["c"])
            for label, t in tables.items()
        }
