"""Derived caches in SQLite under `.ok/cache/`: safe with concurrent readers and one writer,
and disposable (deleting them only costs recomputation)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path


class SqliteCache:
    """A lazily opened SQLite database in WAL mode, with the table `ddl` creates."""

    ddl = ""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            if self.ddl:
                self._db.execute(self.ddl)
        return self._db


class ExtractionCache(SqliteCache):
    """Extraction results by (extractor id, sha256 of the text)."""

    ddl = "CREATE TABLE IF NOT EXISTS ext (key TEXT PRIMARY KEY, data TEXT)"

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        keys = list(keys)
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            q = f"SELECT key, data FROM ext WHERE key IN ({','.join('?' * len(part))})"
            out.update(dict(self.db.execute(q, part)))
        return out

    def put_many(self, items: Iterable[tuple[str, str]]) -> None:
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO ext VALUES (?, ?)", list(items))

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
