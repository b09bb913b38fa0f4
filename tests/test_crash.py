"""Every writing command killed at every named crash point ends, after the next ordinary
command, equal to a fresh rebuild from the same files, with nothing lost and an honest status.

A crash is `OK_CRASH_AT=<point>[:<n>]` (see openkl/files/crash.py): the process ends with
`os._exit`, as `kill -9` would end it, at the n-th pass through the point.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.crash import (
    NOW,
    fresh_rebuild,
    note_ids,
    ok_at,
    provenance,
    snapshot,
)
from helpers.run import EXAMPLES, OK_BIN, REPO, run_cli, run_ok

from openkl.files.crash import CRASH_EXIT, POINTS


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five documents (ingested from a directory that is gone afterwards, so refresh reads the
    stored originals) and two notes."""
    base = tmp_path_factory.mktemp("crash")
    src = base / "docs"
    shutil.copytree(EXAMPLES, src)
    root = base / "kf"
    old = os.environ.get("OK_NOW")
    os.environ["OK_NOW"] = NOW
    try:
        assert run_ok("init", str(root)).code == 0
        ok_at(root, "store", "ingest", str(src))
        ok_at(
            root,
            "mem",
            "add",
            "The writer lock is an flock, so a killed writer frees it.",
            "--tags",
            "kuzu",
        )
        ok_at(
            root,
            "mem",
            "add",
            "Lighthouse keepers kept logs of ships passing at night.",
            "--topics",
            "sea",
        )
    finally:
        if old is None:
            os.environ.pop("OK_NOW", None)
        else:
            os.environ["OK_NOW"] = old
    shutil.rmtree(src)
    return root


# -- the commands ------------------------------------------------------------------------
# each prepares a copy of the template and returns the `ok` arguments to run


def _ingest(root: Path, work: Path) -> list[str]:
    d = work / "docs"
    d.mkdir()
    (d / "lighthouses.md").write_text(
        "# Lighthouses\n\nLighthouse keepers tended the lamp at "
        "night. Fresnel lenses focus the beam.\n"
    )
    (d / "tides.txt").write_text(
        "Tides follow the Moon. Spring tides come at new and full "
        "moon; neap tides at the quarters.\n"
    )
    # a new version of a document already in the folder (same source name)
    wal = (EXAMPLES / "write-ahead-logging.md").read_text()
    (d / "write-ahead-logging.md").write_text(wal + "\n\nCheckpoints bound the log's length.\n")
    return ["store", "ingest", str(d)]


def _ingest_batched(root: Path, work: Path) -> list[str]:
    """A load large enough to commit in batches (here: one per document), whose entities
    are consolidated once at the end."""
    import yaml

    cfg = root / ".ok" / "config.yml"
    conf = yaml.safe_load(cfg.read_text()) or {}
    conf.setdefault("graph", {})["commit_chunks"] = 1
    cfg.write_text(yaml.safe_dump(conf))
    return _ingest(root, work)


def _mem_add(root: Path, work: Path) -> list[str]:
    return [
        "mem",
        "add",
        "Ada Lovelace wrote about the Analytical Engine in 1843.",
        "--tags",
        "history",
    ]


def _first_note(root: Path) -> str:
    return sorted(note_ids(root))[0]


def _mem_update(root: Path, work: Path) -> list[str]:
    return [
        "mem",
        "update",
        _first_note(root),
        "--text",
        "The writer lock is an flock held by Grace Hopper's process.",
    ]


def _mem_delete(root: Path, work: Path) -> list[str]:
    return ["mem", "delete", "--purge", _first_note(root)]


def _sync(root: Path, work: Path) -> list[str]:
    norm = root / "store" / "normalized" / "docs"
    (norm / "crispr-gene-editing.ok.md").unlink()  # deleted by hand
    kuzu = norm / "kuzu-embedded-graphs.ok.md"  # edited in place
    kuzu.write_text(kuzu.read_text() + "\n\nKùzu was written at the University of Waterloo.\n")
    note = next((root / "memories" / "by_date").rglob(f"{_first_note(root)}.md"))
    note.write_text(note.read_text().replace("killed writer", "killed writer (Linus Torvalds)"))
    hand = note.parent / "m-20261130-hand.md"
    hand.write_text(
        "---\nid: m-20261130-hand\nts: '2026-11-30T12:00:00Z'\ntags: []\n---\n"
        "Written by hand: Marie Curie measured radioactivity.\n"
    )
    return ["sync"]


def _rebuild(root: Path, work: Path) -> list[str]:
    return ["index", "--rebuild"]


def _refresh(root: Path, work: Path) -> list[str]:
    orig = root / "store" / "sources" / "docs" / "retrieval-augmented-generation.md"
    orig.write_text(orig.read_text() + "\n\nRetrieval cites its sources, like a lighthouse log.\n")
    return ["refresh", "--all"]


def _remove(root: Path, work: Path) -> list[str]:
    return ["store", "remove", "docs/ada-lovelace.html.ok.md"]


COMMANDS: dict[str, tuple[Callable[[Path, Path], list[str]], list[str]]] = {
    "ingest": (
        _ingest,
        [
            "ingest.source-written",
            "ingest.source-written:3",
            "ingest.version-kept",
            "ingest.journaled",
            "ingest.journaled:2",
            "ingest.normalized-written",
            "ingest.normalized-written:3",
            "ingest.mapping-saved",
            "ingest.events-written",
            "graph.removed",
            "graph.docs-loaded",
            "entities.extracted",
            "entities.consolidated",
            "graph.before-commit",
            "graph.committed",
        ],
    ),
    "ingest-batched": (
        _ingest_batched,
        [
            "graph.docs-loaded:2",
            "entities.extracted:3",
            "entities.consolidated",
            "graph.before-commit",
            "graph.committed",
        ],
    ),
    "mem-add": (
        _mem_add,
        [
            "note.written",
            "graph.notes-loaded",
            "entities.extracted",
            "entities.consolidated",
            "graph.before-commit",
            "graph.committed",
            "keyword.committed",
        ],
    ),
    "mem-update": (
        _mem_update,
        [
            "note.written",
            "graph.removed",
            "graph.notes-loaded",
            "entities.consolidated",
            "graph.before-commit",
        ],
    ),
    "mem-delete": (
        _mem_delete,
        ["note.deleted", "graph.removed", "graph.before-commit", "graph.committed"],
    ),
    "sync": (
        _sync,
        [
            "sync.mapping-saved",
            "graph.removed",
            "graph.docs-loaded",
            "graph.notes-loaded",
            "entities.extracted",
            "entities.consolidated",
            "entities.consolidated:2",
            "graph.before-commit:2",
            "graph.committed:2",
        ],
    ),
    "rebuild": (
        _rebuild,
        [
            "sync.mapping-saved",
            "graph.docs-loaded",
            "entities.consolidated",
            "rebuild.loading",
            "graph.before-commit:2",
            "rebuild.built",
            "rebuild.swapping",
        ],
    ),
    "refresh": (
        _refresh,
        [
            "refresh.fetched",
            "ingest.version-kept",
            "ingest.journaled",
            "ingest.normalized-written",
            "ingest.mapping-saved",
            "graph.docs-loaded",
            "graph.before-commit",
        ],
    ),
    "remove": (_remove, ["graph.removed", "entities.consolidated", "graph.before-commit"]),
}
CASES = [(cmd, pt) for cmd, (_, pts) in COMMANDS.items() for pt in pts]
# the default suite kills each command at a few points and reaches every point at least
# once; `-m slow` runs every command at every point
DEFAULT = {
    ("ingest", "ingest.source-written"),
    ("ingest", "ingest.version-kept"),
    ("ingest", "ingest.journaled:2"),
    ("ingest", "ingest.normalized-written"),
    ("ingest", "ingest.mapping-saved"),
    ("ingest", "ingest.events-written"),
    ("ingest", "graph.docs-loaded"),
    ("ingest", "entities.extracted"),
    ("ingest", "graph.committed"),
    ("ingest-batched", "graph.docs-loaded:2"),
    ("ingest-batched", "entities.consolidated"),
    ("mem-add", "note.written"),
    ("mem-add", "entities.consolidated"),
    ("mem-add", "keyword.committed"),
    ("mem-update", "graph.removed"),
    ("mem-delete", "note.deleted"),
    ("mem-delete", "graph.before-commit"),
    ("mem-delete", "graph.committed"),
    ("sync", "sync.mapping-saved"),
    ("sync", "graph.notes-loaded"),
    ("sync", "graph.before-commit:2"),
    ("rebuild", "rebuild.built"),
    ("refresh", "refresh.fetched"),
    ("refresh", "ingest.normalized-written"),
    ("remove", "graph.removed"),
}
PARAMS = [
    pytest.param(cmd, pt, id=f"{cmd}-{pt}", marks=() if (cmd, pt) in DEFAULT else pytest.mark.slow)
    for cmd, pt in CASES
]


def test_every_point_is_named_and_covered() -> None:
    """The code passes only listed points, and the crash test reaches each one."""
    used = set()
    for p in (REPO / "openkl").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "point"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "crash"
            ):
                arg = node.args[0]
                assert isinstance(arg, ast.Constant), f"{p}: crash points are named literally"
                used.add(arg.value)
    assert used == set(POINTS)
    assert {pt.partition(":")[0] for _, pt in CASES} == set(POINTS)
    # rebuild.loading and rebuild.swapping have a test of their own below
    assert set(CASES) >= DEFAULT
    assert {pt.partition(":")[0] for _, pt in DEFAULT} | {
        "rebuild.loading",
        "rebuild.swapping",
    } == set(POINTS)


_uninterrupted: dict[str, dict[str, Any]] = {}


def _normalize_origins(prov: dict[str, Any], work: Path) -> dict[str, Any]:
    return {
        d: {**e, "origin": (e["origin"] or "").replace(str(work), "<work>")}
        for d, e in prov.items()
    }


def _prepare(template: Path, work: Path, cmd: str) -> tuple[Path, list[str]]:
    root = work / "kf"
    shutil.copytree(template, root, symlinks=True)
    return root, COMMANDS[cmd][0](root, work)


def _without_crash(template: Path, tmp: Path, cmd: str) -> dict[str, Any]:
    """The mapping the command writes when nothing goes wrong."""
    if cmd not in _uninterrupted:
        work = tmp / f"clean-{cmd}"
        work.mkdir()
        root, args = _prepare(template, work, cmd)
        ok_at(root, *args)
        _uninterrupted[cmd] = _normalize_origins(provenance(root), work)
    return _uninterrupted[cmd]


@pytest.mark.crash
@pytest.mark.parametrize(("cmd", "point"), PARAMS)
def test_crash_then_next_command_equals_rebuild(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cmd: str, point: str
) -> None:
    monkeypatch.setenv("OK_NOW", NOW)
    work = tmp_path / "work"
    work.mkdir()
    root, args = _prepare(template, work, cmd)
    before = note_ids(root)
    r = run_cli("--root", str(root), *args, env={"OK_CRASH_AT": point, "OK_NOW": NOW})
    assert r.code == CRASH_EXIT, f"the crash point was not reached: exit {r.code}\n{r.err}"
    status = run_ok("--root", str(root), "status", "--json").json()
    reference = fresh_rebuild(root, tmp_path / "reference")
    if status.get("in_sync"):  # an honest status: in sync means equal to a rebuild
        assert snapshot(root) == reference
    ok_at(root, "sync")
    after = run_ok("--root", str(root), "status", "--json").json()
    assert after["in_sync"], after
    assert snapshot(root) == reference
    # nothing lost: every note is still there (but the one being deleted), and every
    # document the command wrote carries the provenance an uninterrupted run records
    lost = before - note_ids(root) - ({_first_note_of(before)} if cmd == "mem-delete" else set())
    assert not lost
    clean = _without_crash(template, tmp_path, cmd)
    got = _normalize_origins(provenance(root), work)
    for did, e in got.items():
        if did in clean and e["current"] and clean[did]["current"]:
            assert e == clean[did], did


def _first_note_of(ids: set[str]) -> str:
    return sorted(ids)[0]


@pytest.mark.crash
def test_killed_rebuild_leaves_the_old_index_serving(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a rebuild is unfinished (or was killed), readers use the old index."""
    monkeypatch.setenv("OK_NOW", NOW)
    root = tmp_path / "kf"
    shutil.copytree(template, root, symlinks=True)
    want = snapshot(root)
    r = run_cli(
        "--root",
        str(root),
        "index",
        "--rebuild",
        env={"OK_CRASH_AT": "rebuild.loading", "OK_NOW": NOW},
    )
    assert r.code == CRASH_EXIT
    assert (root / ".ok" / "kuzu.rebuild").exists()
    assert snapshot(root) == want  # a reader, with the unfinished rebuild beside it
    assert run_ok("--root", str(root), "status", "--json").json()["in_sync"]
    ok_at(root, "sync")  # the next writer clears the leftovers
    assert not (root / ".ok" / "kuzu.rebuild").exists()
    # killed between the two renames: the finished rebuild is taken up by the next command
    r = run_cli(
        "--root",
        str(root),
        "index",
        "--rebuild",
        env={"OK_CRASH_AT": "rebuild.swapping", "OK_NOW": NOW},
    )
    assert r.code == CRASH_EXIT
    assert not (root / ".ok" / "kuzu").exists()
    assert snapshot(root) == want


def test_ingest_repairs_provenance_that_a_crash_lost(template: Path, tmp_path: Path) -> None:
    """A folder damaged before provenance was journaled: sync adopted a normalized file with
    no source; ingesting the same file again records where it came from."""
    root = tmp_path / "kf"
    shutil.copytree(template, root, symlinks=True)
    src = tmp_path / "in" / "lighthouses.md"
    src.parent.mkdir()
    src.write_text("# Lighthouses\n\nKeepers trimmed the wick at dusk.\n")
    ok_at(root, "store", "ingest", str(src))
    mapping = root / ".ok" / "mapping.jsonl"
    lines = [json.loads(x) for x in mapping.read_text().splitlines()]
    for e in lines:
        if e.get("origin") == str(src):
            for k in ("origin", "media_type", "title", "meta"):
                e.pop(k, None)
            e["source"] = {"path": e["path"]}
    mapping.write_text("".join(json.dumps(e) + "\n" for e in lines))
    ok_at(root, "store", "ingest", str(src))
    entry = next(e for e in provenance(root).values() if e["origin"] == str(src))
    assert entry["source"] == {"path": "store/sources/lighthouses.md"}
    assert entry["title"] == "Lighthouses"


def test_torn_mapping_append_is_ignored_and_cut(template: Path, tmp_path: Path) -> None:
    """A journal line cut short by a crash or a full disk is not an error, and the next
    append starts on a fresh line."""
    root = tmp_path / "kf"
    shutil.copytree(template, root, symlinks=True)
    mapping = root / ".ok" / "mapping.jsonl"
    whole = mapping.read_text()
    mapping.write_text(whole + '{"id": "0123456789abcdef", "path": "store/norm')
    assert ok_at(root, "store", "list", "--json").json()
    src = tmp_path / "tides.txt"
    src.write_text("Tides follow the Moon.\n")
    ok_at(root, "store", "ingest", str(src))
    assert all(json.loads(x) for x in mapping.read_text().splitlines())
    assert run_ok("--root", str(root), "status", "--json").json()["in_sync"]


def test_sync_reindexes_a_document_whose_entities_are_missing(example_kf: Path) -> None:
    """Derived parts lost from outside (a hand-run `--write` query) show in status, and sync
    indexes that document again."""
    doc = run_ok("store", "list", "--json").json()[0]["id"]
    r = run_ok(
        "graph", "cypher", "--write", f"MATCH (x:Extraction) WHERE x.owner = '{doc}' DELETE x"
    )
    assert r.code == 0, r.err
    st = run_ok("status", "--json").json()
    assert not st["in_sync"] and st["stale"]["incomplete"] == [doc]
    assert run_ok("doctor").code == 1
    assert run_ok("sync").code == 0
    assert run_ok("status", "--json").json()["in_sync"]


@pytest.mark.crash
@pytest.mark.slow
def test_kill_9_at_random_moments_of_ingest_then_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timing-based version: the process group of a long ingest is killed at random
    moments; each time `ok sync` brings the folder to what a rebuild gives."""
    import random

    monkeypatch.setenv("OK_NOW", NOW)
    rng = random.Random(7)
    src = tmp_path / "docs"
    src.mkdir()
    words = (EXAMPLES / "retrieval-augmented-generation.md").read_text().split()
    for i in range(150):
        rng.shuffle(words)
        (src / f"doc{i:03d}.md").write_text(f"# Document {i}\n\n" + " ".join(words[:120]) + "\n")
    root = tmp_path / "kf"
    assert run_ok("init", str(root)).code == 0
    for attempt, delay in enumerate((0.8, 1.2, 1.6, 2.4, 3.5)):
        proc = subprocess.Popen(
            [OK_BIN, "--root", str(root), "store", "ingest", str(src)],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "OK_NOW": NOW},
        )
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        st = run_ok("--root", str(root), "status", "--json").json()
        reference = fresh_rebuild(root, tmp_path / f"ref{attempt}")
        if st.get("in_sync"):
            assert snapshot(root) == reference
        ok_at(root, "sync")
        assert snapshot(root) == reference
        for e in provenance(root).values():
            if e["current"]:
                assert e["origin"] and e["origin"].startswith(str(src)), e


@pytest.mark.crash
def test_kill_while_a_commit_writes_its_log(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer killed just after its commit began writing the log. Kùzu 0.11 can crash
    the process that replays such a log (and then every later open), or apply part of the
    transaction: no command may crash on it, status must not say in sync, and `ok sync`
    rebuilds the index from the files."""
    monkeypatch.setenv("OK_NOW", NOW)
    root = tmp_path / "kf"
    shutil.copytree(template, root, symlinks=True)
    d = tmp_path / "docs"
    d.mkdir()
    html = (EXAMPLES / "ada-lovelace.html").read_text()
    (d / "ada-lovelace.html").write_text(
        html.replace("Analytical Engine", "Analytical Engine (a mechanical computer)")
    )
    wal = root / ".ok" / "kuzu" / "graph.kz.wal"
    proc = subprocess.Popen(
        [OK_BIN, "--root", str(root), "store", "ingest", str(d)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "OK_NOW": NOW},
    )
    deadline = time.monotonic() + 120
    while proc.poll() is None and not wal.exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    st = run_cli("--root", str(root), "status", "--json")
    assert st.code in (0, 1), st  # never a crash (a negative code is a signal)
    assert "Traceback" not in st.err
    reference = fresh_rebuild(root, tmp_path / "reference")
    if st.json().get("in_sync"):
        assert snapshot(root) == reference
    r = run_cli("--root", str(root), "sync")
    assert r.code == 0, r.err
    assert run_cli("--root", str(root), "status", "--json").json()["in_sync"]
    assert snapshot(root) == reference


@pytest.mark.crash
def test_a_load_cut_off_between_batches_is_seen_and_consolidated(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches commit their documents and extractions; the entities come at the end. A kill
    in between leaves committed documents whose entities are missing, which status names
    and sync makes."""
    monkeypatch.setenv("OK_NOW", NOW)
    work = tmp_path / "work"
    work.mkdir()
    root, args = _prepare(template, work, "ingest-batched")
    r = run_cli(
        "--root", str(root), *args, env={"OK_CRASH_AT": "graph.docs-loaded:3", "OK_NOW": NOW}
    )
    assert r.code == CRASH_EXIT
    status = run_ok("--root", str(root), "status", "--json").json()
    assert not status["in_sync"]
    assert "entities" in status["stale"]["incomplete"]
    plain = run_ok("--root", str(root), "status").out
    assert "entities not consolidated after a cut-off load" in plain
    # the documents of the committed batches are searchable already
    hits = ok_at(root, "search", "Fresnel lenses lighthouse", "-k", "3", "--json").json()
    assert any("lighthouses" in h["path"] for h in hits)
    r = ok_at(root, "sync")
    assert "entities of a cut-off load consolidated" in r.out
    assert run_ok("--root", str(root), "status", "--json").json()["in_sync"]
    assert snapshot(root) == fresh_rebuild(root, tmp_path / "reference")


@pytest.mark.crash
def test_an_ingest_cut_off_after_its_original_is_reported_and_finished(
    template: Path, tmp_path: Path
) -> None:
    """Killed after the original was copied and before its document was written: the copy
    is named by the mapping, sync says the ingest was cut off (not that a document was
    deleted), and ingesting the file again finishes it with its provenance."""
    root = tmp_path / "kf"
    shutil.copytree(template, root, symlinks=True)
    src = tmp_path / "in" / "beacons.md"
    src.parent.mkdir()
    src.write_text("# Beacons\n\nBeacon fires warned ships off the reef.\n")
    r = run_cli(
        "--root", str(root), "store", "ingest", str(src),
        env={"OK_CRASH_AT": "ingest.source-written"},
    )  # fmt: skip
    assert r.code == CRASH_EXIT
    orig = "store/sources/beacons.md"
    assert (root / orig).exists()
    assert any(e["source"] == {"path": orig} for e in provenance(root).values())
    r = run_ok("--root", str(root), "sync", "--json")
    assert r.code == 0, r.err
    rep = r.json()
    assert rep["sources_unfinished"] == [orig] and rep["sources_kept"] == []
    assert f"`ok store ingest {orig}` finishes it" in r.err
    ok_at(root, "store", "ingest", str(src))
    entry = next(e for e in provenance(root).values() if e["source"] == {"path": orig})
    assert entry["origin"] == str(src) and entry["title"] == "Beacons"
    assert run_ok("--root", str(root), "status", "--json").json()["in_sync"]
