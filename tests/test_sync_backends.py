"""Every sync case, run against both backends: `ok sync` (the Kùzu graph) and
`ok sync --backend` (the folder's stack in a real PostgreSQL) plan with the same step and
must report the same thing and answer the same searches afterwards.

Each case writes the folder's files by hand (an editor, `git pull`), so that only a sync
brings them into the graph, and asserts one expected report and one set of hits, whichever
backend the test runs with.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers.pg import with_database
from helpers.run import Result, run_ok

from openkl.files.folder import Folder, stack_name
from openkl.graph.indexing import open_graph
from openkl.graph.postgres import PgGraph
from openkl.sync.plan import STACK_ONLY

NOTE = "memories/by_date/2026-01/05/m-20260105-abcd.md"
NOTE_ID = "m-20260105-abcd"
PILOT = (
    f"---\nid: {NOTE_ID}\nts: 2026-01-05T10:00:00Z\ntags: [boats]\n---\n"
    "The harbour pilot boards at the breakwater.\n"
)
DOC = "store/normalized/docs/tides.ok.md"
TIDES = "# Tides\n\nThe harbour pilot waits for the spring tide at Brest.\n"

EMPTY: dict[str, Any] = {
    "docs_added": [],
    "docs_removed": [],
    "docs_moved": [],
    "notes_added": [],
    "notes_updated": [],
    "notes_removed": [],
    "chunks_added": 0,
    "problems": [],
    "rebuilt": False,
    "incomplete": [],
    "docs_missing": [],
    "docs_unlinked": [],
    "recovered": [],
    "sources_kept": [],
    "sources_unfinished": [],
    "changed": False,
    "unreadable": [],
}


def without_problems(rep: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rep.items() if k != "problems"}


def doc_id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class Backend:
    """One backend of the folder `root`: `args` select it on the command line."""

    name: str
    root: Path
    args: tuple[str, ...] = ()

    def sync(self, code: int = 0) -> dict[str, Any]:
        """`ok sync --json` (to this backend): the report, without the parts only a stack
        in PostgreSQL has (checked here)."""
        r = run_ok("sync", "--json", *self.args)
        assert r.code == code, r.err
        rep = r.json()
        if self.args:
            assert rep["stack"] == stack_name(Folder(self.root)) and not rep["taken_over"]
        assert not set(STACK_ONLY) & set(rep) or self.args
        return {k: v for k, v in rep.items() if k not in STACK_ONLY}

    def run(self, *args: str) -> Result:
        return run_ok(*args, *self.args)

    def hits(self, query: str) -> list[tuple[str, str]]:
        """(id, path) of every full-text hit, documents by their id."""
        r = run_ok("search", query, "--mode", "fts", "--json", *self.args)
        assert r.code in (0, 1), r.err  # 1: no hit
        return sorted((h["id"].split("#")[0], h["path"]) for h in r.json())

    def version_links(self) -> list[tuple[str, str]]:
        """(newer, older) of every SUPERSEDES edge the backend holds."""
        f = Folder(self.root)
        if not self.args:
            with open_graph(f, write=False) as g:
                return sorted(g.version_links())
        with PgGraph.open(self.args[1], stack=stack_name(f), write=False) as pg:
            return sorted(pg.as_store().version_links())


@pytest.fixture(params=["kuzu", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, kf: Path) -> Backend:
    if request.param == "kuzu":
        return Backend("kuzu", kf)
    server = request.getfixturevalue("pg_server")
    name = "sync_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return Backend("postgresql", kf, ("--backend", with_database(server, name)))


def write(root: Path, rel: str, text: str | bytes) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


def started(b: Backend) -> None:
    """The pilot's note and the tides document, written by hand and synced."""
    write(b.root, NOTE, PILOT)
    write(b.root, DOC, TIDES)
    rep = b.sync()
    assert rep["docs_added"] == [doc_id(TIDES)] and rep["notes_added"] == [NOTE_ID]
    assert rep["chunks_added"] == 1 and rep["changed"] and rep["problems"] == []
    assert b.hits("harbour pilot") == [(doc_id(TIDES), DOC), (NOTE_ID, NOTE)]


def test_an_edit_of_a_note_and_of_a_document_in_place(backend: Backend) -> None:
    started(backend)
    write(backend.root, NOTE, PILOT.replace("breakwater", "lighthouse"))
    newer = TIDES.replace("Brest", "Cherbourg")
    write(backend.root, DOC, newer)
    rep = backend.sync()
    assert rep == EMPTY | {
        "docs_added": [doc_id(newer)],
        "docs_removed": [doc_id(TIDES)],
        "notes_updated": [NOTE_ID],
        "chunks_added": 1,
        "changed": True,
    }
    assert backend.hits("lighthouse") == [(NOTE_ID, NOTE)]
    assert backend.hits("breakwater") == []
    assert backend.hits("cherbourg") == [(doc_id(newer), DOC)]
    assert backend.hits("brest") == []
    # the edit in place made the new text the next version of the old
    assert backend.version_links() == [(doc_id(newer), doc_id(TIDES))]
    assert backend.sync() == EMPTY


def test_a_rename_keeps_the_ids_and_moves_the_hits(backend: Backend) -> None:
    started(backend)
    note_to = "memories/by_date/2026-01/06/pilot.md"
    doc_to = "store/normalized/docs/sea/tides.ok.md"
    write(backend.root, note_to, PILOT)
    write(backend.root, doc_to, TIDES)
    (backend.root / NOTE).unlink()
    (backend.root / DOC).unlink()
    rep = backend.sync()
    assert rep == EMPTY | {
        "docs_moved": [{"id": doc_id(TIDES), "from": DOC, "to": doc_to}],
        "notes_updated": [NOTE_ID],
        "changed": True,
    }
    assert backend.hits("harbour pilot") == [(doc_id(TIDES), doc_to), (NOTE_ID, note_to)]
    assert backend.sync() == EMPTY


def test_deleted_files_leave_search(backend: Backend) -> None:
    started(backend)
    (backend.root / NOTE).unlink()
    (backend.root / DOC).unlink()
    rep = backend.sync()
    assert rep == EMPTY | {
        "docs_removed": [doc_id(TIDES)],
        "notes_removed": [NOTE_ID],
        "changed": True,
    }
    assert backend.hits("harbour pilot") == []
    assert backend.sync() == EMPTY


def test_a_note_with_broken_frontmatter_keeps_its_last_good_version(backend: Backend) -> None:
    started(backend)
    write(
        backend.root,
        NOTE,
        PILOT.replace("tags: [boats]", "tags: [boats, unclosed").replace("pilot", "pilots"),
    )
    r = backend.run("sync", "--json")
    assert r.code == 3, r.err  # partly done: the rest is synced, this file is not
    rep = {k: v for k, v in r.json().items() if k not in STACK_ONLY}
    [problem] = rep.pop("problems")
    assert rep == without_problems(EMPTY | {"unreadable": [NOTE]})
    assert problem["kind"] == "unreadable" and problem["kept"] == NOTE_ID
    assert problem["path"] == NOTE and "broken YAML frontmatter" in problem["problem"]
    assert f"warning: {NOTE}: " in r.err and "stays searchable" in r.err
    assert "1 file not indexed as written" in r.err
    # the last good version still answers: two hits, as before the typo
    assert backend.hits("harbour pilot") == [(doc_id(TIDES), DOC), (NOTE_ID, NOTE)]
    write(backend.root, NOTE, PILOT.replace("breakwater", "lighthouse"))  # fixed
    rep = backend.sync()
    assert rep == EMPTY | {"notes_updated": [NOTE_ID], "changed": True}
    assert backend.hits("lighthouse") == [(NOTE_ID, NOTE)]


def test_unreadable_files_keep_their_indexed_versions(backend: Backend) -> None:
    started(backend)
    write(backend.root, DOC, TIDES.replace("spring", "spr\xffing").encode("latin-1"))
    write(backend.root, NOTE, PILOT.replace("boards", "bo\xe9rds").encode("latin-1"))
    r = backend.run("sync", "--json")
    assert r.code == 3, r.err
    rep = {k: v for k, v in r.json().items() if k not in STACK_ONLY}
    problems = {p["path"]: p for p in rep.pop("problems")}
    assert rep == without_problems(EMPTY | {"unreadable": [DOC, NOTE]})
    assert problems[DOC]["kept"] == doc_id(TIDES) and problems[NOTE]["kept"] == NOTE_ID
    assert all(p["kind"] == "unreadable" for p in problems.values())
    assert backend.hits("harbour pilot") == [(doc_id(TIDES), DOC), (NOTE_ID, NOTE)]


def test_symlinks_inside_the_folder_and_out_of_it(backend: Backend, tmp_path: Path) -> None:
    started(backend)
    out = tmp_path / "outside"
    out.mkdir()
    secret = "The launch codes are kept in the harbour office."
    (out / "n.md").write_text(f"---\nid: m-20260106-lnko\n---\n{secret}\n")
    (out / "s.ok.md").write_text(f"# Secret\n\n{secret}\n")
    escaping = {
        "memories/by_date/2026-01/06/n.md": out / "n.md",
        "store/normalized/docs/s.ok.md": out / "s.ok.md",
    }
    # inside: a second name for the tides document (after it: the first name is indexed)
    inside = "store/normalized/docs/wave.ok.md"
    for rel, target in escaping.items():
        (backend.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (backend.root / rel).symlink_to(target)
    (backend.root / inside).symlink_to(backend.root / DOC)
    r = backend.run("sync", "--json")
    assert r.code == 3, r.err
    rep = {k: v for k, v in r.json().items() if k not in STACK_ONLY}
    problems = {p["path"]: p for p in rep.pop("problems")}
    # the link inside is read as the file it names: that content is indexed once
    assert set(problems) == {*escaping, DOC}
    assert problems[DOC]["kind"] == "same_content" and "indexed once" in problems[DOC]["problem"]
    for rel in escaping:
        assert problems[rel]["kind"] == "unreadable"
        assert "leads out of the knowledge folder" in problems[rel]["problem"]
    # documents first, then notes
    unreadable = ["store/normalized/docs/s.ok.md", "memories/by_date/2026-01/06/n.md"]
    assert rep == without_problems(EMPTY | {"unreadable": unreadable})
    assert backend.hits("launch codes") == []
    assert backend.hits("harbour pilot") == [(doc_id(TIDES), DOC), (NOTE_ID, NOTE)]


def test_a_chain_of_edits_in_place_is_a_chain_of_versions(backend: Backend) -> None:
    started(backend)
    texts = [TIDES]
    for port in ("Cherbourg", "Dieppe"):
        texts.append(TIDES.replace("Brest", port))
        write(backend.root, DOC, texts[-1])
        rep = backend.sync()
        assert rep == EMPTY | {
            "docs_added": [doc_id(texts[-1])],
            "docs_removed": [doc_id(texts[-2])],
            "chunks_added": 1,
            "changed": True,
        }
    ids = [doc_id(t) for t in texts]
    assert backend.version_links() == sorted([(ids[1], ids[0]), (ids[2], ids[1])])
    assert backend.hits("harbour pilot") == [(ids[2], DOC), (NOTE_ID, NOTE)]
    assert backend.hits("brest") == backend.hits("cherbourg") == []
    # back to the first text: that version is current again, the others stay its history
    write(backend.root, DOC, TIDES)
    rep = backend.sync()
    assert rep["docs_added"] == [ids[0]] and rep["docs_removed"] == [ids[2]]
    assert backend.hits("harbour pilot") == [(ids[0], DOC), (NOTE_ID, NOTE)]
    assert backend.sync() == EMPTY


def test_a_note_that_supersedes_another_replaces_it_in_search(backend: Backend) -> None:
    started(backend)
    newer = "memories/by_date/2026-01/07/m-20260107-efgh.md"
    write(
        backend.root,
        newer,
        PILOT.replace(NOTE_ID, "m-20260107-efgh")
        .replace("2026-01-05", "2026-01-07")
        .replace("tags: [boats]", f"tags: [boats]\nsupersedes: [{NOTE_ID}]")
        .replace("breakwater", "outer breakwater"),
    )
    rep = backend.sync()
    assert rep == EMPTY | {"notes_added": ["m-20260107-efgh"], "changed": True}
    assert backend.hits("harbour pilot") == [(doc_id(TIDES), DOC), ("m-20260107-efgh", newer)]
    # a claim back closes a cycle: reported, and the older note is not brought back
    write(
        backend.root,
        NOTE,
        PILOT.replace("tags: [boats]", "tags: [boats]\nsupersedes: [m-20260107-efgh]"),
    )
    r = backend.run("sync", "--json")
    rep = {k: v for k, v in r.json().items() if k not in STACK_ONLY}
    problems = rep.pop("problems")
    assert problems and all("supersedes" in p["problem"] for p in problems), problems
    assert rep["notes_updated"] == [NOTE_ID]
    assert backend.hits("harbour pilot") == [(doc_id(TIDES), DOC), ("m-20260107-efgh", newer)]
