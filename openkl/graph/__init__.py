"""The derived graph in embedded Kùzu. This is the only module that imports kuzu.

Everything here can be rebuilt from the folder's files (`ok index --rebuild`). The schema
version and the embedder identity are stamped in a `Meta` table; a mismatch is an
`IndexMismatch` that tells the user to rebuild.
"""

from __future__ import annotations

import contextlib
import importlib.util  # noqa: F401  (kuzu's query preparation needs importlib.util loaded)
import os
import re
import shutil
import threading
import time
import unicodedata
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import (
    BadInput,
    GraphUnrecoverable,
    IndexMismatch,
    LockBusy,
    OkError,
    QueryRefused,
    ReadOnlyViolation,
)
from ..records import ChunkInput, ChunkRow, DocIndexed, DocInput, NoteIndexed, NoteRow
from ..text.chunking import keyword_text
from . import keyword, sandbox
from .base import Atomic
from .documents import DocumentQueries
from .entities import ENTITY_COLS as ENTITY_COLS
from .entities import EntityQueries
from .entity_writes import rel_docs as rel_docs
from .entity_writes import rel_docs_text as rel_docs_text
from .lineage_queries import LineageQueries
from .link_queries import LinkQueries
from .sandbox import QueryLimits as QueryLimits
from .versions import VersionQueries

SCHEMA_VERSION = "9"
DB_FILE = "graph.kz"


def schema(dim: int) -> list[str]:
    """DDL for the graph. Bump SCHEMA_VERSION whenever this changes."""
    return [
        "CREATE NODE TABLE IF NOT EXISTS Meta(key STRING PRIMARY KEY, value STRING)",
        "CREATE NODE TABLE IF NOT EXISTS Doc(id STRING PRIMARY KEY, path STRING, sha256 STRING,"
        " title STRING, source STRING, created_at STRING, chars INT64, current BOOLEAN)",
        f"CREATE NODE TABLE IF NOT EXISTS Chunk(id STRING PRIMARY KEY, doc_id STRING, text STRING,"
        f" fts STRING, span_start INT64, span_end INT64, ord INT64, current BOOLEAN, vec FLOAT[{dim}])",
        f"CREATE NODE TABLE IF NOT EXISTS MemoryNote(id STRING PRIMARY KEY, path STRING,"
        f" sha256 STRING, text STRING, fts STRING, ts STRING, tags STRING[], topics STRING[],"
        f" body_start INT64, body_end INT64, vec FLOAT[{dim}], expires STRING,"
        f" supersedes STRING[], derived_notes STRING[])",
        "CREATE NODE TABLE IF NOT EXISTS Entity(id STRING PRIMARY KEY, name STRING, type STRING,"
        " description STRING, confidence DOUBLE, aliases STRING[], docs STRING[],"
        " verified BOOLEAN, source_kind STRING, canonical BOOLEAN, ext_id STRING, extra STRING)",
        # per chunk/note entity extraction results, consolidated into Entity and RELATED
        "CREATE NODE TABLE IF NOT EXISTS Extraction(id STRING PRIMARY KEY, owner STRING,"
        " base INT64, keys STRING[], aliases STRING[], data STRING)",
        "CREATE NODE TABLE IF NOT EXISTS Topic(id STRING PRIMARY KEY, name STRING)",
        "CREATE REL TABLE IF NOT EXISTS HAS_CHUNK(FROM Doc TO Chunk)",
        "CREATE REL TABLE IF NOT EXISTS MENTIONS(FROM Chunk TO Entity, FROM MemoryNote TO Entity,"
        " confidence DOUBLE)",
        # note to note (schema version 7): a note distilled from another, and one that
        # replaces another; both also held as lists on MemoryNote, as its file has them
        "CREATE REL TABLE IF NOT EXISTS DERIVED_FROM(FROM MemoryNote TO Chunk,"
        " FROM MemoryNote TO Doc, FROM MemoryNote TO MemoryNote)",
        "CREATE REL TABLE IF NOT EXISTS HAS_TOPIC(FROM MemoryNote TO Topic)",
        # `docs` is a JSON list: a list column on a relationship table makes Kùzu rewrite
        # the whole column at every checkpoint that follows a change to the table
        "CREATE REL TABLE IF NOT EXISTS RELATED(FROM Entity TO Entity, type STRING,"
        " confidence DOUBLE, evidence STRING, docs STRING, verified BOOLEAN,"
        " source_kind STRING, description STRING, ext_id STRING, extra STRING)",
        "CREATE REL TABLE IF NOT EXISTS SUPERSEDES(FROM Doc TO Doc, FROM MemoryNote TO"
        " MemoryNote, drift DOUBLE, ts STRING)",
        # `[[…]]` links in notes (schema version 6): each note's titles and links (JSON
        # lists, as its file has them), and the edges they resolve to
        "CREATE NODE TABLE IF NOT EXISTS NoteRefs(id STRING PRIMARY KEY, titles STRING,"
        " links STRING)",
        "CREATE REL TABLE IF NOT EXISTS LINKS_TO(FROM MemoryNote TO MemoryNote,"
        " FROM MemoryNote TO Doc, text STRING, heading STRING, alias STRING, line INT64)",
    ]


def table_names() -> list[str]:
    """The graph's tables, node tables first, as the schema creates them."""
    return [m.group(2) for m in map(_TABLE.match, schema(1)) if m]


_TABLE = re.compile(r"CREATE (NODE|REL) TABLE IF NOT EXISTS (\w+)")
# the OpenKL RFC's names for relationships the schema names otherwise
_TABLE_ALIASES = {"memmentions": "MENTIONS", "relatedto": "RELATED"}


def query_failed(text: str) -> OkError:
    """A query the engine refused, as one line; a table it does not know (`HasTopic` for
    HAS_TOPIC, as the RFC writes them) names the one meant, and the tables there are."""
    first = text.splitlines()[0] if text else text
    if re.search(r"doesn't have an index with name (chunk|note)_fts", first):
        return NO_KUZU_FTS
    m = re.search(r"Table (\w+) does not exist", first)
    if m is None:
        return OkError(f"query failed: {first}")
    name = m.group(1)
    tables = [t for t in table_names() if t not in ("Meta", "Extraction", "NoteRefs")]
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    meant = next((t for t in tables if re.sub(r"[^a-z0-9]", "", t.lower()) == key), None)
    meant = meant or _TABLE_ALIASES.get(key)
    return QueryRefused(
        f"the graph has no table {name}",
        (f"did you mean `{meant}`? " if meant else "") + "its tables: " + ", ".join(tables),
    )


# BM25 runs over `fts` (in the keyword index, `graph/keyword.py`, and in Kùzu's own FTS index
# when `graph.kuzu_fts` keeps it for Cypher), a copy of the text made for Kùzu's FTS
# tokenizer, which splits on spaces only: every run of whitespace becomes one space (else "and\ndurability" would be
# one token), and Chinese, Japanese and Korean, written without spaces between words, become
# overlapping character bigrams (and single characters). Queries go through `fts_query`.
FTS_INDEXES = (("Chunk", "chunk_fts", "fts"), ("MemoryNote", "note_fts", "fts"))
# what a Cypher query that asks Kùzu's FTS index is told when the graph keeps none
NO_KUZU_FTS = QueryRefused(
    "the graph keeps no full-text index for Cypher (QUERY_FTS_INDEX): `ok search` uses the "
    "keyword index beside it",
    "set graph.kuzu_fts to true (`ok config set graph.kuzu_fts true`), then run `ok sync`",
)
# disk a loaded chunk may take: ~19 KB in the graph at 10k-30k chunks (text, its FTS copy
# and postings, vector, extraction, its share of entities and edges), more while the
# commits of one load rewrite what the previous ones wrote
BYTES_PER_NEW_CHUNK = 48 << 10
# and what one commit's checkpoint writes whatever its size: a few pages of each column of
# every table it touches (~12 MB for the first documents of a graph)
BYTES_PER_COMMIT = 16 << 20
# HNSW over Chunk.vec, from `search.hnsw_min_chunks` chunks: named `chunk_vec`, or
# `chunk_vec_<n>` when made again after a drop (Kùzu 0.11 never frees a dropped index's name)
CHUNK_VECTOR_INDEX = "chunk_vec"
# what Kùzu says making an index under the name of one dropped in an earlier open
_DROPPED_INDEX = ("already exists", "is not loaded yet")
# the open databases (kuzu.Database) that dropped a vector index: Kùzu leaves half an index
# behind any CREATE on them, so none is made until the database is opened anew (a
# server's resident database is one for all its writers)
_DROPPED_A_VECTOR_INDEX: weakref.WeakSet[Any] = weakref.WeakSet()

# Han (with radicals, iteration marks and extensions A to I, compatibility ideographs),
# Bopomofo, Hiragana and Katakana (with half-width forms and the kana supplements), Hangul
# (syllables, jamo and half-width forms). Punctuation of these scripts is not in it.
_CJK_LETTERS = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c"
    "\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3105-\u312f\u3131-\u318f\u31a0-\u31bf"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
    "\uff66-\uffdc\U0001b000-\U0001b16f\U00020000-\U000323af"
)
# a stretch to rewrite: CJK letters, CJK punctuation (U+3000-303F) and the full-width and
# half-width forms (U+FF00-FFEF), whose Latin letters and digits NFKC makes ASCII
_CJK_STRETCH = re.compile(f"[{_CJK_LETTERS}\u3000-\u303f\uff00-\uffef]+")
# inside a stretch (after NFKC): a run of CJK letters, or a word of other letters or digits;
# what is neither (punctuation, symbols) becomes a space
_WORD_OR_CJK = re.compile(f"([{_CJK_LETTERS}]+)|[^\\W{_CJK_LETTERS}]+")


def _grams(run: str, unigrams: bool) -> str:
    if len(run) == 1:
        return run
    pairs = " ".join(run[i : i + 2] for i in range(len(run) - 1))
    return pairs + " " + " ".join(run) if unigrams else pairs


def _cjk(text: str, unigrams: bool) -> str:
    def tokens(stretch: re.Match[str]) -> str:
        out = []
        for m in _WORD_OR_CJK.finditer(unicodedata.normalize("NFKC", stretch[0])):
            out.append(_grams(m[1], unigrams) if m[1] else m[0])
        return " " + " ".join(out) + " "

    if _CJK_STRETCH.search(text):
        text = _CJK_STRETCH.sub(tokens, text)
    return " ".join(text.split())


# Words with digits. Kùzu's FTS tokenizer drops digits and punctuation before it indexes
# (its ignore pattern is fixed on the query side), so "7781" is no word at all, "p53" is
# "p" and "zq13944f5b57" is "zq". So each word with a digit also enters the FTS text as a
# code of letters alone (`digit_code`), in the index and in the query alike, beside the word
# itself: "IL-6" still matches "IL" as before, and the code matches "IL-6" exactly.
# A word: letters and digits, joined by hyphens or dots ("IL-6", "3.12", "v2.1.0").
WORD = re.compile(r"[^\W_]+(?:[-.][^\W_]+)*")
_DIGIT = re.compile(r"\d")
_NIBBLES = "abcdefghijklmnop"
# a longer "word" is a blob (base64, a hash pasted whole), not a term anyone types
MAX_CODED = 64


def digit_terms(word: str) -> list[str]:
    """The terms with digits that `word` (one match of `WORD`) stands for, lower-cased: its
    parts between hyphens, a part that starts with a digit joined to the one before
    ("IL-6" and "IL6" are "il6", "Rad53-dependent" is "rad53", "miR-142-5p" is
    "mir1425p"); dots stay ("3.12"). Parts without a digit are no term."""
    groups: list[str] = []
    for part in word.lower().split("-"):
        if groups and part[:1].isdigit():
            groups[-1] += part
        else:
            groups.append(part)
    return [t for t in groups if _DIGIT.search(t) and len(t) <= MAX_CODED]


def digit_code(term: str) -> str:
    """`term` as letters only, one to one: "qq", its UTF-8 bytes as pairs of letters a-p,
    and "q" (no English word starts with "qq", and no stemmer takes a final "q" off)."""
    return "qq" + "".join(_NIBBLES[b >> 4] + _NIBBLES[b & 15] for b in term.encode()) + "q"


def digit_codes(text: str) -> list[str]:
    """The codes of the terms with digits in `text`, in order, repeated as often as they
    occur (BM25 counts them)."""
    if not _DIGIT.search(text):
        return []
    return [
        digit_code(t) for m in WORD.finditer(text) if _DIGIT.search(m[0]) for t in digit_terms(m[0])
    ]


def _with_codes(text: str, codes: list[str]) -> str:
    return f"{text} {' '.join(codes)}" if codes else text


def fts_text(text: str) -> str:
    """The text as the FTS index holds it: each run of CJK letters as its overlapping pairs
    and its single characters, so that a one-character query finds it too, and each word
    with digits followed by its codes (`digit_codes`). Other text only has its whitespace
    collapsed."""
    out = _cjk(text, unigrams=True)
    return _with_codes(out, digit_codes(out))


def chunk_fts(chunk: ChunkInput) -> str:
    """A chunk's text as the FTS index holds it: `fts_text` of its keyword text, its
    contextual header before it (`chunking.keyword_text`)."""
    return fts_text(keyword_text(chunk["text"], chunk.get("header", "")))


def fts_query(query: str) -> str:
    """A query as the FTS index is asked: like `fts_text`, but a CJK run of two or more
    characters as its pairs only, so that a word is matched as a whole, not as any of its
    characters; each code once."""
    out = _cjk(query, unigrams=False)
    return _with_codes(out, list(dict.fromkeys(digit_codes(out))))


# -- the guard for Cypher from users (CLI and MCP) ---------------------------------------
# Kùzu runs whatever it parses, read-only database or not: LOAD FROM reads any file, COPY TO
# and EXPORT DATABASE write anywhere, INSTALL reaches the network. Its Python API does not
# say whether a prepared statement is read-only, so a small lexer decides, on an allow-list:
# what a query may start with and which table functions it may CALL. The lexer follows
# Kùzu's grammar for strings, backtick names and comments, so a keyword inside a literal
# is data and a keyword hidden by a comment is not missed.

_READ_STARTS = frozenset({"MATCH", "OPTIONAL", "RETURN", "WITH", "UNWIND", "CALL"})
_WRITE_STARTS = frozenset(
    {"CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "DROP", "ALTER", "COMMENT"}
)
_WRITES = frozenset({"CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "DROP", "ALTER"})
# clauses that reach files, databases or extensions outside the folder's graph
_OUTSIDE = frozenset(
    {"LOAD", "COPY", "EXPORT", "IMPORT", "INSTALL", "UNINSTALL", "UPDATE", "FORCE", "ATTACH", "USE"}
)
# table functions that scan files; only reachable through CALL or LOAD FROM, both refused,
# named here so the refusal says why
_FILE_FUNCTIONS = frozenset(
    {"READ_CSV_SERIAL", "READ_CSV_PARALLEL", "READ_PARQUET", "READ_NPY", "READ_PANDAS", "JSON_SCAN"}
)
# table functions that only read the graph or its catalog; CREATE_FTS_INDEX is not here
# (its stopwords option reads a file) and neither is `CALL name = value` (settings)
CALLABLE = frozenset(
    {
        "SHOW_TABLES",
        "TABLE_INFO",
        "SHOW_INDEXES",
        "SHOW_FUNCTIONS",
        "SHOW_SEQUENCES",
        "SHOW_CONNECTION",
        "DB_VERSION",
        "CATALOG_VERSION",
        "QUERY_FTS_INDEX",
        "QUERY_VECTOR_INDEX",
    }
)

_FILES_HINT = "query the graph with MATCH … RETURN; files enter the folder through store ingest"


def write_stamps(set_meta: Callable[[str, str], None], dim: int, embedder: str | None) -> None:
    """Stamp a new index: the schema version, the embedder and the vectors' dimension."""
    set_meta("schema_version", SCHEMA_VERSION)
    if embedder:
        set_meta("embedder", embedder)
    set_meta("dim", str(dim))


def check_stamps(meta: dict[str, str], embedder_identity: str | None, rebuild: str) -> None:
    """Refuse an index of another schema version or embedder (`rebuild`: how to fix it)."""
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise IndexMismatch(
            f"the index has schema version {meta.get('schema_version')}, this ok needs "
            f"{SCHEMA_VERSION}",
            rebuild,
        )
    if embedder_identity and meta.get("embedder") and meta["embedder"] != embedder_identity:
        raise IndexMismatch(
            f"the index was built with embedder {meta['embedder']}, the folder is set to "
            f"{embedder_identity}",
            rebuild,
        )


def _refused(what: str, hint: str) -> QueryRefused:
    return QueryRefused(f"Cypher refused: {what}", hint)


def _lex(query: str) -> list[list[tuple[str, str]]]:
    """Split Cypher into statements of (kind, text) tokens: word (upper-cased), param,
    punct, and literal / name (without their text) for strings and backtick names.

    Comments are dropped. Anything outside them that is not ASCII is refused: a look-alike
    letter must not pass for a name or keyword.
    """
    statements: list[list[tuple[str, str]]] = [[]]
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c in "'\"":
            j = i + 1
            while j < n and query[j] != c:
                j += 2 if query[j] == "\\" else 1
            if j >= n:
                raise _refused("an unterminated string literal", f"close the {c} quote")
            statements[-1].append(("literal", ""))
            i = j + 1
        elif c == "`":
            j = query.find("`", i + 1)
            while j != -1 and query[j + 1 : j + 2] == "`":  # `` inside a name is one backtick
                j = query.find("`", j + 2)
            if j == -1:
                raise _refused("an unterminated `name`", "close the backtick")
            statements[-1].append(("name", ""))
            i = j + 1
        elif query.startswith("/*", i):
            # as Kùzu's lexer: a `*` that does not close the comment takes the next character
            j = i + 2
            while j < n and not query.startswith("*/", j):
                j += 2 if query[j] == "*" else 1
            if j >= n:
                raise _refused("an unterminated /* comment", "close it with */")
            i = j + 2
        elif query.startswith("//", i):
            # ends at CR too: a lone CR does not end Kùzu's comment, so what follows is checked
            while i < n and query[i] not in "\r\n":
                i += 1
        elif c == ";":
            statements.append([])
            i += 1
        elif c.isascii() and (c.isalpha() or c == "_"):
            j = i
            while j < n and query[j].isascii() and (query[j].isalnum() or query[j] == "_"):
                j += 1
            kind = "param" if i and query[i - 1] == "$" else "word"
            statements[-1].append((kind, query[i:j].upper()))
            i = j
        elif c in " \t\n\r\f\v":
            i += 1
        elif not c.isascii():
            raise _refused(
                f"the character {c!r} (U+{ord(c):04X}) outside a string literal",
                "write Cypher in ASCII; other text goes in quotes or backticks",
            )
        else:
            statements[-1].append(("punct", c))
            i += 1
    return [s for s in statements if s]


def check_cypher(query: str, *, write: bool = False) -> None:
    """Refuse a user's Cypher unless it is one statement that stays inside the graph.

    Without `write` it must only read (ReadOnlyViolation otherwise). With or without it,
    anything that reaches files, other databases or extensions is a QueryRefused.
    """
    statements = _lex(query)
    if not statements:
        raise BadInput(
            "the query is empty", "pass a Cypher query such as `MATCH (d:Doc) RETURN d.title`"
        )
    if len(statements) > 1:
        raise _refused(
            "several statements (one is run at a time)",
            "remove the `;` between them and run each on its own",
        )
    tokens = statements[0]
    for idx, (kind, text) in enumerate(tokens):
        if kind != "word":
            continue
        after = tokens[idx + 1 : idx + 3]
        if text in _OUTSIDE or text in _FILE_FUNCTIONS:
            raise _refused(f"{text} reaches files, other databases or extensions", _FILES_HINT)
        if text == "DETACH" and after[:1] != [("word", "DELETE")]:
            raise _refused("DETACH, other than DETACH DELETE, detaches a database", _FILES_HINT)
        if text == "CALL":
            name = after[0][1] if after and after[0][0] == "word" else ""
            if name not in CALLABLE or after[1:] != [("punct", "(")]:
                raise _refused(
                    f"CALL {name.lower() or '…'}; only catalog and index functions "
                    f"may be called ({', '.join(sorted(CALLABLE)).lower()})",
                    "use MATCH … RETURN for anything else",
                )
    kind, first = tokens[0]
    if kind != "word" or first not in _READ_STARTS | _WRITE_STARTS:
        raise _refused(
            f"a query may not start with {first}",
            "start with MATCH, OPTIONAL MATCH, RETURN, WITH, UNWIND or CALL "
            "(CREATE, MERGE, SET, DELETE … with --write)",
        )
    if not write and (
        first in _WRITE_STARTS or any(k == "word" and t in _WRITES for k, t in tokens)
    ):
        raise ReadOnlyViolation(
            "this query writes to the graph, which is opened read-only",
            "pass --write if you really mean to change the graph",
        )


def _log_pending(db_path: Path) -> bool:
    try:
        return db_path.with_name(db_path.name + ".wal").stat().st_size > 0
    except FileNotFoundError:
        return False


_REPLAY = """
import sys
from pathlib import Path
from openkl.graph import Graph
try:
    with Graph.open(Path(sys.argv[1]), write=True, check=False, timeout=0.5,
                    buffer_pool_mb=int(sys.argv[2]), probe=False):
        pass
except Exception:
    sys.exit(3)
"""


def resident_pool_mb() -> int:
    """The page buffer of a database a server keeps open: a quarter of the machine's
    memory, from 1 to 16 GiB. Kùzu reserves it as address space and fills it as it reads;
    a pool too small for a large write beside many readers fails the write ("the buffer
    pool is full"), and Kùzu 0.11 can then crash a reader whose page it could not get."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    except (OSError, ValueError):
        total = 4096
    return max(1024, min(16384, total // 4))


def _commit_failed(e: Exception, resident: bool) -> OkError:
    said = str(e).splitlines()[0]
    if "buffer pool is full" in said.lower():
        where = "serve.buffer_pool_mb" if resident else "graph.buffer_pool_mb"
        return OkError(
            f"commit failed: {said}",
            f"give Kùzu more memory ({where} in .ok/config.yml), then run `ok sync`",
        )
    return OkError(f"commit failed: {said}", "run `ok sync`")


def _replay_in_child(kuzu_dir: Path, buffer_pool_mb: int) -> int:
    """Replay a killed writer's log in a child process: Kùzu 0.11 can crash the process
    that replays some logs, and then every later open would crash too. The exit code: 0
    replayed (and marked, see `_mark_replayed`), 3 busy or failed, negative when the engine
    died on it."""
    import subprocess
    import sys

    try:
        return subprocess.run(
            [sys.executable, "-c", _REPLAY, str(kuzu_dir), str(buffer_pool_mb)],
            capture_output=True,
            timeout=600,
        ).returncode
    except (OSError, subprocess.TimeoutExpired):
        return 3


def _is_lock_error(e: Exception) -> bool:
    msg = str(e).lower()
    return "lock" in msg and ("could not set" in msg or "set lock" in msg or "locked" in msg)


class _Resident:
    """A database a long-running process keeps open (`ok serve`): every `Graph.open` of its
    directory in this process gets a new connection on it instead of opening the files.

    Opens take a shared lease; `paused` (a rebuild swapping directories) waits for them to
    end, closes the database, and opens the new one after.
    """

    def __init__(self, kuzu_dir: Path, buffer_pool_mb: int) -> None:
        self.kuzu_dir = kuzu_dir
        self.buffer_pool_mb = buffer_pool_mb or resident_pool_mb()
        self._cond = threading.Condition()
        self._leases = 0
        self._paused = False
        self.db: Any = None
        # what readers may keep between requests: it holds while no writer's connection is
        # open and `generation` (one more after each writer and reopening) is the same
        self.generation = 0
        self._writers = 0
        self._memo: dict[str, tuple[int, Any]] = {}
        self._idle: list[_Pooled] = []  # readers' connections between requests
        self._share = threading.Lock()
        self._lock_fd: int | None = None  # see `sharing`
        self._open()

    def reader(self) -> _Pooled:
        """A connection for a reader (holding a lease), from those kept, or a new one."""
        import kuzu

        with self._cond:
            if self._idle:
                p = self._idle.pop()
                if p.generation != self.generation:
                    p.statements.clear()  # prepared against a graph that has changed since
                    p.generation = self.generation
                return p
            gen = self.generation
        return _Pooled(kuzu.Connection(self.db), gen)

    def give_back(self, p: _Pooled) -> None:
        """A reader is done with `p`: keep it for the next one."""
        with contextlib.suppress(Exception):
            p.conn.set_query_timeout(0)
            with self._cond:
                if len(self._idle) < _POOL_MAX and not self._paused:
                    self._idle.append(p)
                    return
        with contextlib.suppress(Exception):
            p.conn.close()

    def _drop_idle(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
        for p in idle:
            with contextlib.suppress(Exception):
                p.conn.close()

    @contextlib.contextmanager
    def writer(self) -> Iterator[None]:
        """Around a writer's connection: what readers keep is not used while it is open, and
        is stale once it closes."""
        with self._cond:
            self._writers += 1
        try:
            yield
        finally:
            with self._cond:
                self._writers -= 1
                self.generation += 1

    def _stable(self) -> int | None:
        """The generation, when no writer is open (else None: nothing kept may be used)."""
        with self._cond:
            return None if self._writers else self.generation

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """`compute()`, kept until the graph changes."""
        gen = self._stable()
        if gen is None:
            return compute()
        got = self._memo.get(key)
        if got is not None and got[0] == gen:
            return got[1]
        value = compute()
        with self._cond:
            if self._writers == 0 and self.generation == gen:
                self._memo[key] = (gen, value)
        return value

    def _open(self) -> None:
        import kuzu

        path = self.kuzu_dir / DB_FILE
        # checkpoints wait for every open transaction, so they run between requests
        # (`checkpoint`), not at each commit
        self.db = kuzu.Database(
            str(path), buffer_pool_size=self.buffer_pool_mb << 20, auto_checkpoint=False
        )

    @contextlib.contextmanager
    def lease(self) -> Iterator[Any]:
        with self._cond:
            while self._paused:
                self._cond.wait()
            self._leases += 1
        try:
            yield self.db
        finally:
            with self._cond:
                self._leases -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def _exclusive(self, own: int = 0) -> Iterator[None]:
        """No other connection open while inside: new ones wait, open ones are waited for
        (`own`: the caller's own open connections)."""
        with self._cond:
            while self._paused:
                self._cond.wait()
            self._paused = True
            while self._leases > own:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._paused = False
                self._cond.notify_all()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Closed inside the block (its directory can be swapped), open again after."""
        with self._exclusive():
            self.close()
            try:
                yield
            finally:
                with self._cond:
                    self.generation += 1
                self._open()

    def committing(self) -> contextlib.AbstractContextManager[None]:
        """Around a writer's COMMIT: Kùzu checkpoints a commit that bulk-loaded rows, and a
        checkpoint waits for every other transaction, so readers pause for it."""
        return self._exclusive(own=1)

    def checkpoint(self) -> None:
        """Move committed work from the log into the database files."""
        import kuzu

        with self._exclusive():
            conn = kuzu.Connection(self.db)
            try:
                conn.execute("CHECKPOINT")
            except RuntimeError:
                pass  # the log stays; the next checkpoint or open replays it
            finally:
                conn.close()

    @contextlib.contextmanager
    def sharing(self) -> Iterator[None]:
        """While a query worker (`sandbox`) opens the database read-only beside this
        process: this process's lock on the file is shared, and exclusive again once the
        worker has let go of its own, so that other processes still cannot open it.

        Kùzu holds a POSIX lock on the file, which belongs to the process, not to its
        descriptor: a lock set through a descriptor of our own converts it. That descriptor
        stays open while the database is, as closing any descriptor of the file would end
        the process's lock on it."""
        import fcntl

        with self._share:
            if self._lock_fd is None:
                self._lock_fd = os.open(self.kuzu_dir / DB_FILE, os.O_RDWR)
            fcntl.lockf(self._lock_fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            try:
                yield
            finally:
                # fails only while another process has it open too (a worker killed before
                # it let go): shared until the next time, which still keeps writers out
                with contextlib.suppress(OSError):
                    fcntl.lockf(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def close(self) -> None:
        self._drop_idle()
        if self.db is not None:
            with contextlib.suppress(Exception):
                self.db.close()
            self.db = None
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None


class _Pooled:
    """A reader's connection kept between requests, with the statements prepared on it."""

    def __init__(self, conn: Any, generation: int) -> None:
        self.conn, self.generation = conn, generation
        self.statements: dict[tuple[Any, ...], Any] = {}


_POOL_MAX = 64  # idle reader connections kept per resident database
_KEYED_GROUP = 32  # ids looked up by primary key in one query (see `Graph.by_key`)
_KEYED_MAX = 256  # more ids than this: one scan of the table instead
_STATEMENTS_MAX = 256  # prepared statements kept per connection


def _prepare(conn: Any, cypher: str, params: dict[str, Any] | None) -> Any:
    """A prepared statement of `cypher`, to be executed many times with other `params`.

    The one call of a private Kùzu API, kept here. `Connection.prepare` is the same call
    with a DeprecationWarning: Kùzu 0.11 would have the query text passed to every
    `execute`, which prepares it again each time, and that costs more than some of our
    queries take. `_prepare` makes the same statement without the warning, and `execute`
    takes it as it is. Check it on every upgrade of `kuzu`."""
    return conn._prepare(cypher, params)


def _statement_key(cypher: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    """What a prepared statement is kept under: the query and its parameters' types (None:
    not kept, for a parameter whose type a value does not show, such as an empty list)."""
    kinds: list[tuple[str, str]] = []
    for name, value in params.items():
        if isinstance(value, list):
            if not value or value[0] is None:
                return None
            kinds.append((name, "list:" + type(value[0]).__name__))
        elif value is None or isinstance(value, dict):
            return None
        else:
            kinds.append((name, type(value).__name__))
    return (cypher, *kinds)


_residents: dict[Path, _Resident] = {}
_residents_lock = threading.Lock()


class Graph(Atomic, EntityQueries, DocumentQueries, LineageQueries, LinkQueries, VersionQueries):
    """An open connection to the folder's graph (read-only unless opened for writing)."""

    def __init__(self, db: Any, conn: Any, path: Path, writable: bool) -> None:
        self._db = db
        self.conn = conn
        self.path = path
        self.writable = writable
        self.trace: list[str] | None = None  # when a list, every query is appended to it
        self._in_tx = False  # inside `transaction()`: nested blocks join the outer one
        self._resident = False  # a connection on a database this process keeps open
        self._res: _Resident | None = None  # that database, for a reader (what it keeps)
        self._statements: dict[tuple[Any, ...], Any] | None = None  # a kept connection's
        self._commit_guard: Callable[[], contextlib.AbstractContextManager[None]] = (
            contextlib.nullcontext
        )
        # the keyword index (`keyword`): the changes of the open transaction, the stamps
        # before and after its commit, and the stamp this connection has seen it at
        self._kw_ops: list[keyword.Op] = []
        self._kw_bump: tuple[str, str] | None = None
        self._kw_seen: str | None = None
        self.keyword_dir = keyword.keyword_dir(path.parent)

    # -- opening ----------------------------------------------------------------
    @classmethod
    @contextlib.contextmanager
    def open(
        cls,
        kuzu_dir: Path,
        *,
        write: bool,
        embedder_identity: str | None = None,
        dim: int | None = None,
        timeout: float = 30.0,
        check: bool = True,
        buffer_pool_mb: int = 512,
        recover: Callable[[], bool] | None = None,
        probe: bool = True,
        kuzu_fts: bool = False,
    ) -> Iterator[Graph]:
        """Open the graph. Writers must already hold the folder's writer lock.

        A writer creates the schema on first use, and builds Kùzu's own full-text indexes
        (for Cypher's QUERY_FTS_INDEX) when `kuzu_fts`, else drops them. Both wait up to
        `timeout` seconds for another process's Kùzu lock, then raise `LockBusy`.
        """
        import kuzu

        res = cls._resident_of(kuzu_dir)
        if res is not None:
            if not write:
                with res.lease() as db:
                    p = res.reader()
                    g = cls(db, p.conn, kuzu_dir / DB_FILE, False)
                    g._resident, g._res, g._statements = True, res, p.statements
                    g._commit_guard = res.committing
                    try:
                        g._ready(dim, embedder_identity, check, kuzu_fts)
                        yield g
                    except BaseException:
                        with contextlib.suppress(Exception):
                            p.conn.close()  # whatever state it was left in goes with it
                        raise
                    res.give_back(p)
                return
            with res.lease() as db, res.writer():
                conn = kuzu.Connection(db)
                g = cls(db, conn, kuzu_dir / DB_FILE, write)
                g._resident = True
                g._statements = {}  # a write asks the same few things of many entities
                g._commit_guard = res.committing
                try:
                    g._ready(dim, embedder_identity, check, kuzu_fts)
                    yield g
                finally:
                    with contextlib.suppress(Exception):
                        conn.close()
            if write:
                res.checkpoint()
            return
        path = kuzu_dir / DB_FILE
        if not write and not path.exists():
            raise OkError("the folder has no index yet", "run `ok sync` to build it")
        kuzu_dir.mkdir(parents=True, exist_ok=True)
        if probe and _log_pending(path) and _replay_in_child(kuzu_dir, buffer_pool_mb) < 0:
            raise GraphUnrecoverable(
                "the graph cannot be opened: the graph engine crashes replaying the log of a "
                "writer that was killed",
                "run `ok sync`, which rebuilds the index from the files",
            )
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        while True:
            # committed work still in the log: opening read-write replays it
            replaying = write and _log_pending(path)
            try:
                # Kùzu's default pool is 80% of RAM, which costs ~20 ms per open; every
                # command (and every MCP call) opens the graph, so keep it modest
                db = kuzu.Database(
                    str(path), read_only=not write, buffer_pool_size=buffer_pool_mb << 20
                )
                break
            except RuntimeError as e:
                # a writer that is closing (or was killed) leaves a write-ahead log that
                # only a read-write opener can replay: transient while it closes, and
                # repaired by the next writer (`ok sync`) if it was killed
                replay = "replay" in str(e).lower()
                if not (_is_lock_error(e) or replay):
                    raise OkError(
                        f"cannot open the graph at {path}: {e}".splitlines()[0],
                        "run `ok index --rebuild` to recreate it from the files",
                    ) from e
                # no writer after a grace period: it was killed mid-checkpoint; `recover`
                # replays the log as a brief writer, if no one else is writing
                if replay and recover and time.monotonic() - started > 1.0 and recover():
                    recover = None
                    continue
                if time.monotonic() >= deadline:
                    if replay:
                        raise OkError(
                            "the graph has an unfinished write that a reader cannot replay",
                            "run `ok sync`, which completes it",
                        ) from e
                    raise LockBusy(
                        "the graph is in use by another process",
                        "wait for the other `ok` command to finish",
                    ) from e
                time.sleep(0.1)
        conn = kuzu.Connection(db)
        g = cls(db, conn, path, write)
        if replaying:
            g._mark_replayed()
        try:
            g._ready(dim, embedder_identity, check, kuzu_fts)
            yield g
        finally:
            with contextlib.suppress(Exception):
                conn.close()
            with contextlib.suppress(Exception):
                db.close()

    def _ready(
        self, dim: int | None, embedder_identity: str | None, check: bool, kuzu_fts: bool = False
    ) -> None:
        """A writer creates the schema on first use; `check` compares it with this ok's."""
        if self.writable and dim:
            self._ensure_schema(dim, embedder_identity)
            self._keep_kuzu_fts(kuzu_fts)
        if check:
            self._check(embedder_identity)

    @staticmethod
    @contextlib.contextmanager
    def resident(kuzu_dir: Path, buffer_pool_mb: int = 0) -> Iterator[None]:
        """Keep the database at `kuzu_dir` open read-write in this process until the block
        ends; meanwhile every `Graph.open` of it here is a new connection (no file lock to
        wait for, no open to pay). Writers still hold the folder's writer lock."""
        key = kuzu_dir.resolve()
        with _residents_lock:
            if key in _residents:
                raise OkError(f"the graph at {kuzu_dir} is already kept open by this process")
            _residents[key] = _Resident(key, buffer_pool_mb)
        try:
            yield
        finally:
            with _residents_lock:
                res = _residents.pop(key)
            with res.paused():  # waits for open connections to finish
                pass
            res.close()

    @staticmethod
    def is_resident(kuzu_dir: Path) -> bool:
        """This process keeps the database at `kuzu_dir` open (see `resident`)."""
        return Graph._resident_of(kuzu_dir) is not None

    @staticmethod
    def _resident_of(kuzu_dir: Path) -> _Resident | None:
        if not _residents:
            return None
        return _residents.get(kuzu_dir.resolve())

    @staticmethod
    def log_pending(kuzu_dir: Path) -> bool:
        """Committed work waits in the log (a writer is closing, or was killed)."""
        return _log_pending(kuzu_dir / DB_FILE)

    def _mark_replayed(self) -> None:
        """Kùzu 0.11 can replay a killed writer's log wrongly (relationships lost, part of a
        transaction applied): say so in Meta, so that `ok status` is not "in sync" and
        `ok sync` rebuilds the index from the files."""
        with contextlib.suppress(OkError):  # a database whose schema never got written
            self.set_meta("replayed", "1")

    @staticmethod
    def destroy(kuzu_dir: Path) -> None:
        """Delete the derived database and its keyword index (the files stay)."""
        if kuzu_dir.exists():
            shutil.rmtree(kuzu_dir)
        keyword.destroy(keyword.keyword_dir(kuzu_dir))

    # A rebuild writes a new database beside the live one and swaps it in with two renames,
    # so a killed rebuild leaves the old index working. `READY` marks a finished new one.
    @staticmethod
    def rebuild_dir(kuzu_dir: Path) -> Path:
        return kuzu_dir.with_name(kuzu_dir.name + ".rebuild")

    @staticmethod
    def _old_dir(kuzu_dir: Path) -> Path:
        return kuzu_dir.with_name(kuzu_dir.name + ".old")

    @classmethod
    def start_rebuild(cls, kuzu_dir: Path) -> Path:
        """An empty directory for a new database (a killed rebuild's leftovers go)."""
        new = cls.rebuild_dir(kuzu_dir)
        cls.destroy(new)
        new.mkdir(parents=True)
        return new

    @classmethod
    def swap_in(cls, kuzu_dir: Path) -> None:
        """Make the finished rebuild the live database."""
        from ..files import crash

        new = cls.rebuild_dir(kuzu_dir)
        (new / "READY").touch()
        crash.point("rebuild.built")
        res = cls._resident_of(kuzu_dir)
        # a resident database closes while its directory is swapped, and opens the new one
        with res.paused() if res is not None else contextlib.nullcontext():
            old = cls._old_dir(kuzu_dir)
            cls.destroy(old)
            if kuzu_dir.exists():
                kuzu_dir.rename(old)
            crash.point("rebuild.swapping")
            cls.finish_swap(kuzu_dir)

    @classmethod
    def finish_swap(cls, kuzu_dir: Path, writer: bool = True) -> None:
        """Complete a swap that a killed rebuild left half done; writers also drop the
        leftovers of rebuilds that never finished."""
        new = cls.rebuild_dir(kuzu_dir)
        if (new / "READY").exists():
            if kuzu_dir.exists():
                if not writer:
                    return  # the swap is a writer's to finish; the old index still serves
                old = cls._old_dir(kuzu_dir)
                cls.destroy(old)
                kuzu_dir.rename(old)
            with contextlib.suppress(FileNotFoundError):  # another process finished it
                new.rename(kuzu_dir)
                (kuzu_dir / "READY").unlink()
                # the rebuild's keyword index with it (a stamp that differs rebuilds it)
                kw, kw_new = keyword.keyword_dir(kuzu_dir), keyword.keyword_dir(new)
                keyword.destroy(kw)
                if kw_new.exists():
                    kw_new.rename(kw)
                kw_new.with_name(kw_new.name + ".lock").unlink(missing_ok=True)
        if writer:
            cls.destroy(cls._old_dir(kuzu_dir))
            if new.exists() and not (new / "READY").exists():
                cls.destroy(new)

    def _ensure_schema(self, dim: int, embedder_identity: str | None) -> None:
        tables = {r["name"] for r in self.query("CALL show_tables() RETURN name")}
        if "Meta" in tables:
            return
        for ddl in schema(dim):
            self.conn.execute(ddl)
        write_stamps(self.set_meta, dim, embedder_identity)
        self.set_meta("graph_id", uuid.uuid4().hex)

    def _keep_kuzu_fts(self, keep: bool) -> None:
        """Build Kùzu's full-text indexes if `keep` and they are missing, drop them if not
        (`graph.kuzu_fts`): `ok search` asks the keyword index, Cypher asks these."""
        rows = self.query("CALL SHOW_INDEXES() RETURN *")
        have = {tuple(r.values())[1] for r in rows if tuple(r.values())[2] == "FTS"}
        for table, name, col in FTS_INDEXES:
            if keep and name not in have:
                self.conn.execute(
                    f"CALL CREATE_FTS_INDEX('{table}', '{name}', ['{col}'], stemmer := 'porter')"
                )
            elif not keep and name in have:
                self.conn.execute(f"CALL DROP_FTS_INDEX('{table}', '{name}')")

    def _check(self, embedder_identity: str | None) -> None:
        meta = self._res.memo("meta", self.meta) if self._res is not None else self.meta()
        if not meta:
            if self.writable:
                return
            raise OkError("the index is empty or unfinished", "run `ok index`")
        check_stamps(meta, embedder_identity, "run `ok index --rebuild`")

    # -- generic ----------------------------------------------------------------
    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run Cypher and return rows as dicts."""
        if self.trace is not None:
            self.trace.append(" ".join(cypher.split()))
        try:
            key = (
                _statement_key(cypher, params) if self._statements is not None and params else None
            )
            if key is not None and self._statements is not None:
                stmt = self._statements.get(key)
                if stmt is None:
                    stmt = _prepare(self.conn, cypher, params)
                    if stmt.is_success():
                        if len(self._statements) >= _STATEMENTS_MAX:
                            self._statements.clear()  # users' own queries come and go
                        self._statements[key] = stmt
                res = self.conn.execute(stmt, params)
            else:
                res = self.conn.execute(cypher, params or {})
        except RuntimeError as e:
            msg = str(e)
            if "read-only" in msg.lower() or "read only" in msg.lower():
                raise ReadOnlyViolation(
                    "this query writes to the graph, which is opened read-only",
                    "pass --write if you really mean to change the graph",
                ) from e
            raise query_failed(msg) from e
        results = res if isinstance(res, list) else [res]
        out: list[dict[str, Any]] = []
        for r in results:
            cols = r.get_column_names()
            while r.has_next():
                out.append(dict(zip(cols, r.get_next(), strict=True)))
        return out

    def columns(self, cypher: str, params: dict[str, Any] | None = None) -> dict[str, list[Any]]:
        """Run Cypher and return its columns (name → values): for large results, several
        times faster than `query`'s rows."""
        if self.trace is not None:
            self.trace.append(" ".join(cypher.split()))
        try:
            res = self.conn.execute(cypher, params or {})
            tbl = res.get_as_arrow(100_000)
        except RuntimeError as e:
            raise OkError(f"query failed: {str(e).splitlines()[0]}") from e
        return {name: tbl.column(name).to_pylist() for name in tbl.column_names}

    def cypher(
        self,
        query: str,
        params: dict[str, Any] | None = None,
        limits: QueryLimits | None = None,
    ) -> list[dict[str, Any]]:
        """Run a user's Cypher once `check_cypher` lets it through; writes only on a graph
        opened for writing. A read with `limits` runs in a worker process held to them
        (`sandbox`): time, memory and output."""
        check_cypher(query, write=self.writable)
        if limits is None or self.writable:
            return self.query(query, params)
        res = self._res
        try:
            return sandbox.run(
                self.path,
                query,
                params or {},
                limits,
                opening=res.sharing if res is not None else contextlib.nullcontext,
            )
        except OkError as e:
            if type(e) is OkError and e.message.startswith("query failed: "):
                raise query_failed(e.message.removeprefix("query failed: ")) from e
            raise

    def set_timeout(self, seconds: float) -> None:
        """Abort any query of this connection that runs longer than `seconds`."""
        self.conn.set_query_timeout(max(1, int(seconds * 1000)))

    def meta(self) -> dict[str, str]:
        try:
            return {
                r["k"]: r["v"] for r in self.query("MATCH (m:Meta) RETURN m.key AS k, m.value AS v")
            }
        except OkError:
            return {}

    def set_meta(self, key: str, value: str) -> None:
        self.query("MERGE (m:Meta {key: $k}) SET m.value = $v", {"k": key, "v": value})

    @property
    def dim(self) -> int:
        return int(self.meta().get("dim", "0"))

    def copy_rows(
        self,
        table: str,
        rows: dict[str, Sequence[Any]],
        types: dict[str, Any] | None = None,
        rel_from_to: tuple[str, str] | None = None,
    ) -> None:
        """Bulk-load rows (column name → values, in schema order) with COPY FROM pyarrow."""
        import pyarrow as pa

        first = next(iter(rows.values()), [])
        if not len(first):
            return
        arrays = {k: pa.array(v, type=(types or {}).get(k)) for k, v in rows.items()}
        tbl = pa.table(arrays)
        opts = f" (from='{rel_from_to[0]}', to='{rel_from_to[1]}')" if rel_from_to else ""
        try:
            self.conn.execute(f"COPY {table} FROM $t{opts}", {"t": tbl})
        except RuntimeError as e:
            raise OkError(
                f"bulk load into {table} failed: {str(e).splitlines()[0]}",
                "run `ok index --rebuild`",
            ) from e

    def update_rows(
        self, table: str, rows: dict[str, Sequence[Any]], types: dict[str, Any] | None = None
    ) -> None:
        """Set the columns of existing nodes, found by their `id` (column name → values)."""
        sets = ", ".join(f"n.`{c}` = `{c}`" for c in rows if c != "id")
        self.load_rows(f"MATCH (n:{table} {{id: `id`}}) SET {sets}", rows, types)

    def load_rows(
        self, cypher: str, rows: dict[str, Sequence[Any]], types: dict[str, Any] | None = None
    ) -> None:
        """Run `cypher` once for many rows (`LOAD FROM` them: column name → values, each
        column a variable of the statement). One statement instead of one per row: Kùzu
        plans and runs each statement at a cost of milliseconds."""
        import pyarrow as pa

        first = next(iter(rows.values()), [])
        if not len(first):
            return
        tbl = pa.table({k: pa.array(v, type=(types or {}).get(k)) for k, v in rows.items()})
        statement = f"LOAD FROM $t {cypher}"
        if self.trace is not None:
            self.trace.append(" ".join(statement.split()))
        try:
            self.conn.execute(statement, {"t": tbl})
        except RuntimeError as e:
            raise OkError(f"query failed: {str(e).splitlines()[0]}") from e

    # -- transactions -------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside happen together or not at all; a nested block joins the outer.

        A process killed inside (or an error, a full disk) leaves the graph as it was before:
        Kùzu keeps uncommitted changes out of its write-ahead log, so recovery discards them.
        """
        with self._atomic(
            lambda: self.conn.execute("BEGIN TRANSACTION"),
            self._rollback,
            self._commit,
            self._after_commit,
        ):
            yield

    def _rollback(self) -> None:
        self._kw_ops, self._kw_bump = [], None
        self.conn.execute("ROLLBACK")

    def _commit(self) -> None:
        try:
            self._kw_bump = self._bump_keyword()
            with self._commit_guard():
                self.conn.execute("COMMIT")
        except (RuntimeError, OkError) as e:
            self._kw_ops, self._kw_bump = [], None
            with contextlib.suppress(Exception):
                self.conn.execute("ROLLBACK")
            if isinstance(e, OkError):
                raise
            raise _commit_failed(e, self._resident) from e

    def _after_commit(self) -> None:
        # checkpoint now, so committed work rarely waits in the log for a replay (a
        # resident database checkpoints once the writer's connection is closed)
        if not self._resident:
            self._checkpoint()
        self._keyword_commit()

    # -- the keyword index ---------------------------------------------------------
    def _keyword_stamp(self, meta: dict[str, str]) -> str:
        return keyword.stamp_of(meta.get("graph_id", ""), int(meta.get("keyword_generation") or 0))

    def _bump_keyword(self) -> tuple[str, str] | None:
        """Inside the transaction, before its commit: when it changed rows the keyword index
        holds, count one more keyword generation; the stamps before and after."""
        if not self._kw_ops:
            return None
        meta = self.meta()
        before = self._keyword_stamp(meta)
        if not meta.get("graph_id"):  # a graph made before the keyword index
            self.set_meta("graph_id", uuid.uuid4().hex)
        gen = int(meta.get("keyword_generation") or 0) + 1
        self.set_meta("keyword_generation", str(gen))
        return before, self._keyword_stamp(self.meta())

    def _keyword_commit(self) -> None:
        """After the graph's commit: the same changes in the keyword index."""
        bump, ops = self._kw_bump, self._kw_ops
        self._kw_ops, self._kw_bump = [], None
        if bump is not None:
            keyword.update(self.keyword_dir, bump[0], bump[1], ops, self._keyword_rows)
            self._kw_seen = bump[1]

    def _keyword_rows(self) -> Iterator[keyword.Row]:
        """What the keyword index holds, read from the graph: every current chunk and note,
        in id order."""
        chunks = self.columns(
            "MATCH (c:Chunk) WHERE c.current RETURN c.id AS id, c.doc_id AS doc, c.fts AS fts"
            " ORDER BY id"
        )
        for i, d, t in zip(chunks["id"], chunks["doc"], chunks["fts"], strict=True):
            yield ("Chunk", i, d, t or "")
        notes = self.columns("MATCH (m:MemoryNote) RETURN m.id AS id, m.fts AS fts ORDER BY id")
        for i, t in zip(notes["id"], notes["fts"], strict=True):
            yield ("MemoryNote", i, "", t or "")

    def _keyword_ready(self) -> str:
        """The keyword index's stamp, once it is the graph's (rebuilt from it if not)."""
        if self._kw_seen is not None and self._res is None:
            return self._kw_seen  # no other writer can change the graph while it is open
        meta = self._res.memo("meta", self.meta) if self._res is not None else self.meta()
        want = self._keyword_stamp(meta)
        if self.writable and self._kw_ops:
            # rows this transaction has not committed yet: an index made of them is no
            # generation's, and whoever looks next (the commit, or a reader after a
            # rollback) makes it again
            want += ":uncommitted"
        if self._kw_seen != want:
            if self.writable or self._res is None:
                keyword.ensure(self.keyword_dir, want, lambda: list(self._keyword_rows()))
            else:
                # a reader of a resident database: its rows and stamp from one snapshot
                with self._read_snapshot():
                    want = self._keyword_stamp(self.meta())
                    keyword.ensure(self.keyword_dir, want, lambda: list(self._keyword_rows()))
            self._kw_seen = want
        return want

    @contextlib.contextmanager
    def _read_snapshot(self) -> Iterator[None]:
        self.conn.execute("BEGIN TRANSACTION READ ONLY")
        try:
            yield
        finally:
            with contextlib.suppress(RuntimeError):
                self.conn.execute("COMMIT")

    def _checkpoint(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.conn.execute("CHECKPOINT")

    def commit_and_continue(self) -> None:
        """Commit what the open transaction holds so far and start the next one."""
        if not self._in_tx:
            return
        try:
            self._kw_bump = self._bump_keyword()
            self.conn.execute("COMMIT")
        except (RuntimeError, OkError) as e:
            self._in_tx = False
            self._kw_ops, self._kw_bump = [], None
            with contextlib.suppress(Exception):
                self.conn.execute("ROLLBACK")
            if isinstance(e, OkError):
                raise
            raise _commit_failed(e, self._resident) from e
        with contextlib.suppress(RuntimeError):
            self.conn.execute("CHECKPOINT")
        self.conn.execute("BEGIN TRANSACTION")
        self._keyword_commit()

    # -- documents and chunks --------------------------------------------------
    def add_docs(self, docs: list[DocInput], chunks: list[ChunkInput], vecs: Any) -> None:
        """Insert documents with their chunks and vectors in bulk, in one transaction."""
        with self.transaction():
            self._add_docs(docs, chunks, vecs)

    def _add_docs(self, docs: list[DocInput], chunks: list[ChunkInput], vecs: Any) -> None:
        import pyarrow as pa

        if docs:
            self.copy_rows(
                "Doc",
                {
                    k: [d[k] for d in docs]
                    for k in (
                        "id",
                        "path",
                        "sha256",
                        "title",
                        "source",
                        "created_at",
                        "chars",
                        "current",
                    )
                },
            )
        if chunks:
            dim = vecs.shape[1]
            flat = pa.array(vecs.reshape(-1).astype("float32"), type=pa.float32())
            vec_arr = pa.FixedSizeListArray.from_arrays(flat, dim)
            fts = [chunk_fts(c) for c in chunks]
            self._kw_ops += [
                ("add", "Chunk", c["id"], c["doc_id"], t)
                for c, t in zip(chunks, fts, strict=True)
                if c.get("current", True)
            ]
            self.copy_rows(
                "Chunk",
                {
                    "id": [c["id"] for c in chunks],
                    "doc_id": [c["doc_id"] for c in chunks],
                    "text": [c["text"] for c in chunks],
                    "fts": fts,
                    "span_start": [c["start"] for c in chunks],
                    "span_end": [c["end"] for c in chunks],
                    "ord": [c["ord"] for c in chunks],
                    "current": [c.get("current", True) for c in chunks],
                    "vec": vec_arr,
                },
                types={"span_start": pa.int64(), "span_end": pa.int64(), "ord": pa.int64()},
            )
            self.copy_rows(
                "HAS_CHUNK",
                {"from": [c["doc_id"] for c in chunks], "to": [c["id"] for c in chunks]},
            )

    def remove_doc(self, doc_id: str) -> None:
        with self.transaction():
            self.query(
                "MATCH (d:Doc {id: $id})-[:HAS_CHUNK]->(c:Chunk) DETACH DELETE c", {"id": doc_id}
            )
            self.query("MATCH (d:Doc {id: $id}) DETACH DELETE d", {"id": doc_id})
            self._kw_ops.append(("doc", doc_id))

    def set_doc_path(self, doc_id: str, path: str) -> None:
        self.query("MATCH (d:Doc {id: $id}) SET d.path = $p", {"id": doc_id, "p": path})

    def docs(self) -> dict[str, DocIndexed]:
        rows = self.query(
            "MATCH (d:Doc) RETURN d.id AS id, d.path AS path, d.sha256 AS sha256,"
            " d.current AS current"
        )
        return {r["id"]: r for r in rows}  # type: ignore[misc]

    # -- memory notes ------------------------------------------------------------
    def add_notes(self, notes: list[NoteRow], vecs: Any) -> None:
        """Insert notes with their vectors and topics, in one transaction."""
        if notes:
            with self.transaction():
                self._add_notes(notes, vecs)

    def _add_notes(self, notes: list[NoteRow], vecs: Any) -> None:
        import pyarrow as pa

        dim = vecs.shape[1]
        flat = pa.array(vecs.reshape(-1).astype("float32"), type=pa.float32())
        fts = [fts_text(n["text"]) for n in notes]
        self._kw_ops += [
            ("add", "MemoryNote", n["id"], "", t) for n, t in zip(notes, fts, strict=True)
        ]
        self.copy_rows(
            "MemoryNote",
            {
                "id": [n["id"] for n in notes],
                "path": [n["path"] for n in notes],
                "sha256": [n["sha256"] for n in notes],
                "text": [n["text"] for n in notes],
                "fts": fts,
                "ts": [n["ts"] for n in notes],
                "tags": [list(n["tags"]) for n in notes],
                "topics": [list(n["topics"]) for n in notes],
                "body_start": [n["body_start"] for n in notes],
                "body_end": [n["body_end"] for n in notes],
                "vec": pa.FixedSizeListArray.from_arrays(flat, dim),
                "expires": [n.get("expires", "") for n in notes],
                "supersedes": [list(n.get("supersedes", [])) for n in notes],
                "derived_notes": [list(n.get("derived_notes", [])) for n in notes],
            },
            types={
                "tags": pa.list_(pa.string()),
                "topics": pa.list_(pa.string()),
                "supersedes": pa.list_(pa.string()),
                "derived_notes": pa.list_(pa.string()),
                "body_start": pa.int64(),
                "body_end": pa.int64(),
            },
        )
        topic_rows = sorted({t for n in notes for t in n["topics"]})
        for t in topic_rows:
            self.query("MERGE (t:Topic {id: $id}) SET t.name = $id", {"id": t})
        for n in notes:
            for t in n["topics"]:
                self.query(
                    "MATCH (m:MemoryNote {id: $m}), (t:Topic {id: $t}) MERGE (m)-[:HAS_TOPIC]->(t)",
                    {"m": n["id"], "t": t},
                )

    def remove_note(self, note_id: str) -> None:
        with self.transaction():
            self.query("MATCH (m:MemoryNote {id: $id}) DETACH DELETE m", {"id": note_id})
            self._kw_ops.append(("del", "MemoryNote", note_id))

    def notes(self) -> dict[str, NoteIndexed]:
        rows = self.query(
            "MATCH (m:MemoryNote) RETURN m.id AS id, m.path AS path, m.sha256 AS sha256"
        )
        return {r["id"]: r for r in rows}  # type: ignore[misc]

    # -- retrieval ---------------------------------------------------------------
    def fts(
        self, table: str, query: str, k: int, k1: float = 0.9, b: float = 0.4
    ) -> list[tuple[str, float]]:
        """BM25 over a table's rows in the keyword index (`keyword`): [(id, score)] best
        first, ties in id order. The query goes through `fts_query`, the counterpart of
        `fts_text`, which made the indexed text. The index scores at Tantivy's k1 1.2 and
        b 0.75; `k1` and `b` are the PostgreSQL backend's."""
        if self._none_in(table):
            return []
        q = fts_query(query)
        stamp = self._keyword_ready()
        if self.trace is not None:
            self.trace.append(f"keyword index {table}: {q} (top {k})")
        return keyword.search(self.keyword_dir, stamp, table, q, k)

    def _none_in(self, table: str) -> bool:
        """A reader of a resident database knows, without a query, that `table` is empty."""
        if self._res is None:
            return False
        count = f"MATCH (n:{table}) RETURN count(n) AS c"
        return self._res.memo(f"count:{table}", lambda: int(self.query(count)[0]["c"])) == 0

    def hidden_notes(self, now: str, superseded: bool = True) -> set[str]:
        if self._none_in("MemoryNote"):
            return set()
        return super().hidden_notes(now, superseded)

    def vector(self, table: str, qvec: Sequence[float], k: int) -> list[tuple[str, float]]:
        """Cosine similarity (vectors are normalized): [(id, score)] best first. Chunks go
        through the HNSW index when `fit_vector_index` built one, else an exact scan."""
        if self._none_in(table):
            return []
        name = self._vector_index() if table == "Chunk" else None
        if name:
            hits = self._vector_hnsw(name, qvec, k)
            if hits is not None:
                return hits
        return self.vector_scan(table, qvec, k)

    def vector_scan(self, table: str, qvec: Sequence[float], k: int) -> list[tuple[str, float]]:
        """The exact cosine scan: every row's similarity, the best `k`."""
        dim = len(qvec)
        where = " WHERE n.current" if table == "Chunk" else ""
        rows = self.query(
            f"MATCH (n:{table}){where} WITH n, array_cosine_similarity(n.vec, "
            f"CAST($q AS FLOAT[{dim}])) AS s RETURN n.id AS id, s ORDER BY s DESC, id LIMIT $k",
            {"q": [float(x) for x in qvec], "k": k},
        )
        return [(r["id"], float(r["s"])) for r in rows]

    def _vector_indexes(self) -> list[str]:
        """The names of every vector index there is on Chunk (one, or none)."""
        rows = self.query("CALL SHOW_INDEXES() RETURN table_name AS t, index_name AS name")
        return [
            r["name"]
            for r in rows
            if r["t"] == "Chunk"
            and (r["name"] == CHUNK_VECTOR_INDEX or r["name"].startswith(CHUNK_VECTOR_INDEX + "_"))
        ]

    def _vector_index(self) -> str:
        """The name of the chunks' HNSW index, or "" without one."""

        def look() -> str:
            names = self._vector_indexes()
            return names[0] if names else ""

        return str(self._res.memo("hnsw", look) if self._res is not None else look())

    def _vector_hnsw(
        self, name: str, qvec: Sequence[float], k: int
    ) -> list[tuple[str, float]] | None:
        """The `k` nearest current chunks by the HNSW index `name`, or None when superseded
        chunks crowd them out of what the index returned (the caller then scans exactly)."""
        fetch = k * 2 + 10
        rows = self.query(
            f"CALL QUERY_VECTOR_INDEX('Chunk', '{name}', "
            "$q, $n, efs := $efs) "
            "WITH node, distance RETURN node.id AS id, node.current AS current, distance",
            {"q": [float(x) for x in qvec], "n": fetch, "efs": max(200, fetch)},
        )
        hits = sorted(
            ((r["id"], 1.0 - float(r["distance"])) for r in rows if r["current"]),
            key=lambda h: (-h[1], h[0]),
        )
        if len(hits) < k and len(rows) == fetch:
            return None
        return hits[:k]

    def fit_vector_index(self, min_chunks: int) -> bool:
        """Build the chunks' HNSW index once they number `min_chunks` or more; with 0,
        drop it (and never build one). Runs outside a transaction (Kùzu builds the index in
        its own); returns whether the index exists afterwards. Stored vectors are never SET
        in place (the index forbids it): a changed chunk is a new row and the old one is
        deleted or marked not current, which the index follows.

        An index stays when the chunks fall below `min_chunks` again: it answers as well
        at any size, and Kùzu 0.11 cannot make one again under a dropped one's name (nor,
        until the database is opened anew, under any name). A rebuilt index therefore gets
        a name of its own, and on a database that dropped one none is made until it is
        opened anew (a server's, which all its writers share, at its next start). Any
        other failure is raised."""
        names = self._vector_indexes()
        if min_chunks <= 0:
            for name in names:
                self.query(f"CALL DROP_VECTOR_INDEX('Chunk', '{name}')")
                _DROPPED_A_VECTOR_INDEX.add(self._db)
            return False
        if names:
            return True
        n = int(self.query("MATCH (c:Chunk) RETURN count(c) AS n")[0]["n"])
        if n < min_chunks or self._db in _DROPPED_A_VECTOR_INDEX:
            return False
        for name in (CHUNK_VECTOR_INDEX, f"{CHUNK_VECTOR_INDEX}_{time.time_ns():x}"):
            try:
                self.query(
                    f"CALL CREATE_VECTOR_INDEX('Chunk', '{name}', 'vec', metric := 'cosine')"
                )
            except OkError as e:
                if any(m in str(e) for m in _DROPPED_INDEX):
                    continue  # the name of a dropped index
                raise
            return True
        return False

    def by_key(
        self, label: str, ids: Sequence[str], ret: str, key: str = "id"
    ) -> list[dict[str, Any]]:
        """The rows `RETURN {ret}` gives for the nodes `n` of `label` with these ids, one per
        node found (`key`: the column that holds `n.id`). Kùzu answers `UNWIND $ids AS i
        MATCH (n {id: i})` by scanning the whole table, so a few ids are looked up by their
        primary key instead, in groups of one UNION ALL query each (padded to a power of
        two, so that few statements are prepared); many ids, one scan."""
        ids = list(dict.fromkeys(ids))
        if len(ids) > _KEYED_MAX:
            return self.query(
                f"UNWIND $ids AS i MATCH (n:{label} {{id: i}}) RETURN {ret}", {"ids": ids}
            )
        rows: dict[Any, dict[str, Any]] = {}
        for at in range(0, len(ids), _KEYED_GROUP):
            group = ids[at : at + _KEYED_GROUP]
            size = 1 << (len(group) - 1).bit_length()
            group += [group[-1]] * (size - len(group))
            cypher = " UNION ALL ".join(
                f"MATCH (n:{label} {{id: $i{j}}}) RETURN {ret}" for j in range(size)
            )
            for r in self.query(cypher, {f"i{j}": i for j, i in enumerate(group)}):
                rows.setdefault(r[key], r)
        return list(rows.values())

    def chunks_by_id(self, ids: Sequence[str]) -> dict[str, ChunkRow]:
        """Chunk rows with their document's fields, by chunk id."""
        if not ids:
            return {}
        # two primary-key lookups are several times faster than one join over HAS_CHUNK
        rows = self.by_key(
            "Chunk",
            ids,
            "n.id AS id, n.doc_id AS doc_id, n.text AS text, n.span_start AS `start`,"
            " n.span_end AS `end`",
        )
        docs = {
            d["doc_id"]: d
            for d in self.by_key(
                "Doc",
                sorted({r["doc_id"] for r in rows}),
                "n.id AS doc_id, n.path AS path, n.sha256 AS sha256, n.source AS source,"
                " n.created_at AS created_at, n.title AS title",
                key="doc_id",
            )
        }
        return {r["id"]: {**r, **docs[r["doc_id"]]} for r in rows if r["doc_id"] in docs}  # type: ignore[typeddict-item]

    def vectors(self, table: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors of chunks or notes, by id."""
        if not ids:
            return {}
        rows = self.by_key(table, ids, "n.id AS id, n.vec AS vec")
        return {r["id"]: r["vec"] for r in rows}

    def notes_by_id(self, ids: Sequence[str]) -> dict[str, NoteRow]:
        if not ids:
            return {}
        rows = self.by_key(
            "MemoryNote",
            ids,
            "n.id AS id, n.path AS path, n.sha256 AS sha256, n.text AS text, n.ts AS ts,"
            " n.tags AS tags, n.topics AS topics, n.body_start AS body_start,"
            " n.body_end AS body_end",
        )
        return {r["id"]: r for r in rows}  # type: ignore[misc]

    def incomplete(self) -> dict[str, list[str]]:
        """Documents and notes whose derived parts are missing: a current document with text
        but no chunks, a chunk or note without its entity extraction. Writes are
        transactional, so this finds damage from outside (a lost page, a hand-run
        `--write` query), which `ok sync` repairs by indexing them again."""
        empty = [
            r["id"]
            for r in self.query(
                "MATCH (d:Doc) WHERE d.current AND d.chars > 0 AND NOT EXISTS "
                "{ MATCH (d)-[:HAS_CHUNK]->(:Chunk) } RETURN d.id AS id"
            )
        ]
        extracted = {r["id"] for r in self.query("MATCH (x:Extraction) RETURN x.id AS id")}
        docs = {
            r["d"]
            for r in self.query(
                "MATCH (d:Doc)-[:HAS_CHUNK]->(c:Chunk) WHERE d.current RETURN d.id AS d, c.id AS c"
            )
            if r["c"] not in extracted
        }
        notes = [
            r["id"]
            for r in self.query("MATCH (m:MemoryNote) RETURN m.id AS id")
            if r["id"] not in extracted
        ]
        return {"docs": sorted(docs | set(empty)), "notes": sorted(notes)}

    def room_needed(self, chunks: int, rewrite: bool = True) -> int:
        """Bytes of disk that loading `chunks` more chunks may take: their rows and, with
        `rewrite`, the checkpoint that follows a commit, which writes every table it
        appended to anew (Kùzu rewrites a table's last group of 131,072 rows whole) before
        the old pages are free, and at least a few pages per column; less what is free
        inside the file, which Kùzu reuses."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return chunks * BYTES_PER_NEW_CHUNK
        rows = self.query("CALL fsm_info() RETURN sum(num_pages) AS n")
        inside = int(rows[0]["n"] or 0) * 4096 if rows else 0
        if not rewrite:
            return max(0, chunks * BYTES_PER_NEW_CHUNK - inside)
        live = max(0, size - inside)
        return max(0, chunks * BYTES_PER_NEW_CHUNK + live + BYTES_PER_COMMIT - inside)

    def counts(self) -> dict[str, int]:
        out = {}
        for t in ("Doc", "Chunk", "MemoryNote", "Entity", "Topic"):
            out[t] = int(self.query(f"MATCH (n:{t}) RETURN count(n) AS c")[0]["c"])
        return out


if TYPE_CHECKING:
    from .lineage_queries import WalkSteps
    from .protocol import GraphStore

    def _keeps_to_the_protocol(g: Graph) -> GraphStore:
        return g  # mypy checks that Graph implements every GraphStore member

    def _walks_by_steps(g: Graph) -> WalkSteps:
        return g  # and every step of the lineage walk
