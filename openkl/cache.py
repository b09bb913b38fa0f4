"""Derived caches in SQLite under `.ok/cache/`: safe with concurrent readers and one writer,
and disposable (deleting them only costs recomputation)."""

from __future__ import annotations

import sqlite3
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
