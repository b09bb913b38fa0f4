"""A folder's stack in PostgreSQL follows the files as the Kùzu graph does, and belongs to
one folder: a note whose frontmatter breaks keeps its last synced version and is reported
(exit 3, as `ok sync`); another folder with the same `domain` is refused, in one line,
unless it takes the stack over on purpose. A real PostgreSQL (tests/helpers/pg.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.pg import with_database
from helpers.run import run_cli, run_ok

from openkl.errors import StackTaken
from openkl.files.folder import Folder
from openkl.server.backend import Backend

pytestmark = pytest.mark.postgres

NOTE = "memories/by_date/2026-01/05/m-20260105-abcd.md"
ORIGINAL = (
    "---\nid: m-20260105-abcd\nts: 2026-01-05T10:00:00Z\ntags: [birds]\n---\n"
    "Herons nest in the alder trees by the weir.\n"
)


@pytest.fixture
def pg_uri(pg_server: str, request: pytest.FixtureRequest) -> str:
    """A new, empty database for this test: its stack is its folder's alone."""
    import psycopg

    name = "owner_" + request.node.name.removeprefix("test_")[:40]
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_database(pg_server, name)


def ok_at(root: Path, *args: str) -> Any:
    return run_ok("--root", str(root), *args)


def hits(root: Path, query: str, *backend: str) -> list[str]:
    """The ids `ok search` finds (exit 1 and `[]` when none)."""
    r = ok_at(root, "search", query, "--mode", "fts", "--json", *backend)
    assert r.code in (0, 1), r.err
    return sorted(h["id"] for h in r.json())


def folder_with_note(where: Path, domain: str, text: str) -> Path:
    assert run_ok("init", str(where), "--domain", domain).code == 0
    p = where / NOTE.replace("abcd", domain[-4:].rjust(4, "0"))
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text.replace("abcd", domain[-4:].rjust(4, "0")))
    return where


def test_a_broken_note_keeps_its_last_version_in_postgresql_as_in_kuzu(
    kf: Path,
    pg_uri: str,
) -> None:
    note = kf / NOTE
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text(ORIGINAL)
    assert ok_at(kf, "sync").code == 0
    assert ok_at(kf, "sync", "--backend", pg_uri).code == 0
    backend = ("--backend", pg_uri)
    assert hits(kf, "herons alder", *backend) == hits(kf, "herons alder") == ["m-20260105-abcd"]

    note.write_text(
        ORIGINAL.replace("tags: [birds]", "tags: [birds, unclosed").replace("Herons", "Grey herons")
    )
    kuzu = ok_at(kf, "sync", "--json")
    pg = ok_at(kf, "sync", "--backend", pg_uri, "--json")
    assert kuzu.code == pg.code == 3, pg.err
    assert pg.json()["notes_removed"] == kuzu.json()["notes_removed"] == []
    assert pg.json()["unreadable"] == kuzu.json()["unreadable"] == [NOTE]
    [problem] = pg.json()["problems"]
    assert problem == kuzu.json()["problems"][0]
    assert problem["kept"] == "m-20260105-abcd" and "broken YAML" in problem["problem"]
    assert f"warning: {NOTE}: " in pg.err and "stays searchable" in pg.err
    assert "1 file not indexed as written" in pg.err
    # the last good version answers from both, as before the edit
    assert hits(kf, "herons alder", *backend) == hits(kf, "herons alder") == ["m-20260105-abcd"]
    plain = ok_at(kf, "sync", "--backend", pg_uri)
    assert plain.code == 3 and "1 unreadable" in plain.out

    note.write_text(ORIGINAL.replace("Herons", "Grey herons"))  # fixed
    pg = ok_at(kf, "sync", "--backend", pg_uri, "--json")
    assert pg.code == 0 and pg.json()["notes_updated"] == ["m-20260105-abcd"]
    assert pg.json()["problems"] == []
    assert ok_at(kf, "sync").code == 0
    assert hits(kf, "grey herons", *backend) == hits(kf, "grey herons") == ["m-20260105-abcd"]


def test_a_folder_with_a_broken_note_is_published_without_it_and_says_so(
    kf: Path,
    pg_uri: str,
) -> None:
    note = kf / NOTE
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text(ORIGINAL.replace("tags: [birds]", "tags: [birds, unclosed"))
    r = ok_at(kf, "index", "--backend", pg_uri, "--json")
    assert r.code == 3 and r.json()["unreadable"] == [NOTE], r.err
    assert "unreadable, not indexed" in r.err


def test_another_folder_with_the_same_domain_is_refused_unless_it_takes_over(
    tmp_path: Path,
    pg_uri: str,
) -> None:
    home = folder_with_note(tmp_path / "a" / "notes", "shared-0a01", ORIGINAL)
    other = folder_with_note(
        tmp_path / "b" / "notes", "shared-0a01", ORIGINAL.replace("Herons", "Otters")
    )
    assert ok_at(home, "sync", "--backend", pg_uri).code == 0
    mine = hits(home, "herons", "--backend", pg_uri)
    assert mine and hits(home, "otters", "--backend", pg_uri) == []

    for cmd in (("sync",), ("index",)):
        r = ok_at(other, *cmd, "--backend", pg_uri)
        assert r.code == 2, (cmd, r.err)
        assert r.err.count("\n") == 1 and "Traceback" not in r.err, r.err
        assert (
            "stack 'shared-0a01' holds the rows of another folder" in r.err and str(home) in r.err
        )
        assert str(other) in r.err and "--take-over" in r.err
    # nothing of the other folder was written
    assert hits(home, "herons", "--backend", pg_uri) == mine
    assert hits(home, "otters", "--backend", pg_uri) == []
    # the same folder again, moved or not, is welcome
    again = ok_at(home, "sync", "--backend", pg_uri, "--json")
    assert again.code == 0 and not again.json()["changed"] and not again.json()["taken_over"]

    took = ok_at(other, "sync", "--backend", pg_uri, "--take-over", "--json")
    assert took.code == 0, took.err
    assert str(home) in took.json()["taken_over"] and took.json()["changed"]
    assert "held the rows of" in took.err
    assert hits(home, "otters", "--backend", pg_uri) == ["m-20260105-0a01"]
    assert hits(home, "herons", "--backend", pg_uri) == []
    assert ok_at(other, "sync", "--backend", pg_uri, "--json").json()["taken_over"] is None

    # now the first folder is the stranger: its server is refused at start in one line …
    r = run_cli("--root", str(home), "serve", "--backend", pg_uri, "--port", "0", timeout=120)
    assert r.code == 2 and "--take-over" in r.err, r.err
    assert r.err.count("\n") == 1 and "Traceback" not in r.err, r.err
    assert not (home / ".ok" / "serve.json").exists()
    backend = Backend(Folder(home), pg_uri)
    try:
        with pytest.raises(StackTaken):
            backend.open()
    finally:
        backend.close()
    assert hits(home, "otters", "--backend", pg_uri) == ["m-20260105-0a01"]
    # … and takes the stack back when told to
    backend = Backend(Folder(home), pg_uri, take_over=True)
    try:
        synced = backend.open()
        assert synced is not None and str(other) in str(synced.taken_over)
    finally:
        backend.close()
    assert hits(home, "herons", "--backend", pg_uri) == ["m-20260105-0a01"]
    assert ok_at(other, "index", "--backend", pg_uri).code == 2
    # the same domain, two folders: each made its own id (a copy would share it)
    assert Folder(home).identity() != Folder(other).identity()


def test_take_over_goes_with_a_backend(kf: Path) -> None:
    for cmd in ("sync", "index"):
        r = ok_at(kf, cmd, "--take-over")
        assert r.code == 2 and "--take-over goes with --backend" in r.err


def test_a_folder_id_that_is_not_one_is_said(kf: Path, pg_uri: str) -> None:
    f = Folder(kf)
    made = f.identity()
    assert len(made) == 32 and f.identity() == made
    (kf / ".ok" / "folder_id").write_text("../../etc\n")
    r = ok_at(kf, "sync", "--backend", pg_uri)
    assert r.code == 2 and ".ok/folder_id does not hold a folder id" in r.err, r.err
