"""`ok serve` killed (kill -9, or a crash point) or stopped (SIGTERM, SIGINT) in the middle
of a write: the next `ok` command, run with no server, repairs the folder; nothing the
server acknowledged is lost; a stop finishes the write and exits 0; a restart works.

Each server is a real `ok serve` subprocess in its own process group, over a real folder.
A crash is `OK_CRASH_AT=<point>[:<n>]` in the server's environment (openkl/files/crash.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.crash import NOW, fresh_rebuild, note_ids, provenance, snapshot
from helpers.run import OK_BIN, run_cli, run_ok, until
from helpers.serve import Server, hand_written_note

from openkl.files.crash import CRASH_EXIT

pytestmark = [pytest.mark.server, pytest.mark.crash]

ACKED_NOTE = "The harbour pilot boards at the red buoy."
NOTE = "Kelp forests shelter sea otters from the winter storms."
ACKED_DOC = b"# Lighthouses\n\nLighthouse keepers tended the lamp at night with Fresnel lenses.\n"
DOC = b"# Tide gauges\n\nA tide gauge records the sea level every six minutes.\n"

# the n-th pass: an acknowledged write of the other kind passes the shared points first
NOTE_POINTS = {
    "note.written": "note.written",
    "graph.notes-loaded": "graph.notes-loaded",
    "entities.extracted": "entities.extracted:2",
    "entities.consolidated": "entities.consolidated:2",
    "graph.before-commit": "graph.before-commit:2",
    "graph.committed": "graph.committed:2",
}
DOC_POINTS = {
    "ingest.source-written": "ingest.source-written",
    "ingest.journaled": "ingest.journaled",
    "ingest.normalized-written": "ingest.normalized-written",
    "ingest.mapping-saved": "ingest.mapping-saved",
    "ingest.events-written": "ingest.events-written",
    "graph.docs-loaded": "graph.docs-loaded",
    "entities.extracted": "entities.extracted:2",
    "entities.consolidated": "entities.consolidated:2",
    "graph.before-commit": "graph.before-commit:2",
    "graph.committed": "graph.committed:2",
}
DEFAULT = {
    ("note", "note.written"),
    ("note", "graph.before-commit"),
    ("doc", "ingest.journaled"),
    ("doc", "ingest.normalized-written"),
    ("doc", "graph.docs-loaded"),
    ("doc", "graph.committed"),
}
CASES = [
    pytest.param(
        kind,
        point,
        id=f"{kind}-{point}",
        marks=() if (kind, point) in DEFAULT else pytest.mark.slow,
    )
    for kind, points in (("note", NOTE_POINTS), ("doc", DOC_POINTS))
    for point in points
]


def _add_note(s: Server, text: str) -> httpx.Response:
    return s.http.post(f"/v1/{s.stack}/notes", json={"text": text})


def _add_doc(s: Server, name: str, data: bytes) -> httpx.Response:
    return s.http.post(f"/v1/{s.stack}/documents", params={"name": name}, content=data)


def _dead(s: Server) -> int:
    """The exit code of the server, which ends within a bounded time (generous: the write
    under way finishes first, on a machine that may be loaded)."""
    return s.proc.wait(timeout=180)


def _found(root: Path, query: str, where: str) -> list[dict[str, Any]]:
    r = run_ok("--root", str(root), "search", query, "-k", "3", "--in", where, "--json")
    assert r.code == 0, r.err
    return list(r.json())


def _note_state(root: Path, text: str) -> str | None:
    """The id of the note holding `text`, checked to be whole (a file, searchable), or None
    when there is none (and nothing of it)."""
    files = [p for p in (root / "memories").rglob("m-*.md") if text in p.read_text()]
    if not files:
        assert not [h for h in _found(root, text, "mem") if text in h["quote"]]
        return None
    (path,) = files
    hits = _found(root, text, "mem")
    assert hits and hits[0]["id"] == path.stem, (path, hits)
    return path.stem


def _doc_state(root: Path, name: str, text: str) -> str | None:
    """The id of the document uploaded as `name`, checked to be whole (original, normalized
    text, provenance in .ok/mapping.jsonl, searchable), or None when nothing of it is left."""
    stem = Path(name).stem
    entries = [
        (d, e)
        for d, e in provenance(root).items()
        if Path((e["source"] or {}).get("path") or e["path"]).name == name
    ]
    normalized = list((root / "store" / "normalized").rglob(f"{stem}*.ok.md"))
    if not entries:
        assert not normalized, normalized  # no text without provenance
        return None
    ((did, e),) = entries
    assert e["current"] and e["source"] and (root / e["source"]["path"]).is_file(), e
    assert (root / e["path"]).is_file(), e
    hits = _found(root, text, "store")
    assert hits and hits[0]["doc_id"] == did, hits
    return did


def _repaired(root: Path, work: Path) -> None:
    """What the first command after the server finds, and what `ok sync` makes of it: an
    honest status, then the state a fresh rebuild of the same files gives."""
    status = run_ok("--root", str(root), "status", "--json").json()
    assert status["server"] is None, status  # the killed server's claim is seen to be stale
    assert not (root / ".ok" / "serve.json").exists()
    reference = fresh_rebuild(root, work / "reference")
    if status["in_sync"]:
        assert snapshot(root) == reference
    assert run_ok("--root", str(root), "sync").code == 0
    assert run_ok("--root", str(root), "status", "--json").json()["in_sync"]
    assert snapshot(root) == reference


@pytest.mark.parametrize(("kind", "point"), CASES)
def test_a_server_killed_at_a_crash_point_leaves_a_folder_the_next_command_repairs(
    example_kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, point: str
) -> None:
    monkeypatch.setenv("OK_NOW", NOW)  # the server's clock too: the states compared are equal
    spec = (NOTE_POINTS if kind == "note" else DOC_POINTS)[point]
    # a note written by hand: the start-up sync indexes it, passing the points (paused) on
    # its way, so that the crash comes in the request it is meant for
    hand_written_note(example_kf, "m-20260105-hand", "Sea urchins graze the kelp.")
    notes_before = note_ids(example_kf)
    s = Server(example_kf, env={"OK_CRASH_AT": spec, "OK_SERVE_WATCH": "0"})
    # one write of the other kind, acknowledged before the crash
    acked = _add_doc(s, "lighthouses.md", ACKED_DOC) if kind == "note" else _add_note(s, ACKED_NOTE)
    assert acked.status_code == 201, acked.text
    with pytest.raises(httpx.TransportError):
        _add_note(s, NOTE) if kind == "note" else _add_doc(s, "tides.md", DOC)
    assert _dead(s) == CRASH_EXIT, s.log.read_text()
    s.http.close()
    assert (example_kf / ".ok" / "serve.json").exists()  # the killed server's claim stays
    _repaired(example_kf, tmp_path)
    # nothing acknowledged is lost, and what was under way is whole or gone
    assert notes_before <= note_ids(example_kf)
    assert _note_state(example_kf, "Sea urchins graze the kelp.") == "m-20260105-hand"
    if kind == "note":
        assert _doc_state(example_kf, "lighthouses.md", "Lighthouse keepers Fresnel lenses")
        _note_state(example_kf, NOTE)
    else:
        assert _note_state(example_kf, ACKED_NOTE)
        _doc_state(example_kf, "tides.md", "tide gauge sea level six minutes")


def _lock_says(root: Path, what: str) -> bool:
    try:
        return what in (root / ".ok" / "lock").read_text()
    except OSError:
        return False


def _long_document(n: int = 120) -> bytes:
    """A document long enough that its ingest is still writing when a signal comes."""
    paras = [
        f"Paragraph {i}: the harbour master logs ship {i} at berth {i % 17} with "
        f"{i * 3} tonnes of cargo, checked against the tide table of day {i % 29}."
        for i in range(n)
    ]
    return ("# Harbour log\n\n" + "\n\n".join(paras) + "\n").encode()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_during_a_write_finishes_it_and_exits_0(example_kf: Path, sig: int) -> None:
    s = Server(example_kf)
    got: dict[str, Any] = {}

    def upload() -> None:
        try:
            got["r"] = _add_doc(s, "harbour.md", _long_document())
        except httpx.TransportError as e:
            got["error"] = e

    t = threading.Thread(target=upload)
    t.start()
    until(lambda: _lock_says(example_kf, "ok serve store ingest") or not t.is_alive())
    assert t.is_alive(), f"the upload ended before it was seen writing: {got}"
    asked = time.monotonic()
    os.killpg(s.proc.pid, sig)
    assert _dead(s) == 0, s.log.read_text()
    took = time.monotonic() - asked
    t.join(timeout=60)
    assert not t.is_alive()
    # a stop lets the write under way finish, and answers it
    assert "r" in got and got["r"].status_code == 201, (got, s.log.read_text())
    assert took < 180, took
    assert not (example_kf / ".ok" / "serve.json").exists()
    assert run_ok("status", "--json").json()["in_sync"]
    assert _doc_state(example_kf, "harbour.md", "harbour master logs ship berth cargo")


def test_a_stop_during_the_start_up_sync_ends_it_cleanly(example_kf: Path) -> None:
    day = example_kf / "memories" / "by_date" / "2026-01" / "05"
    day.mkdir(parents=True, exist_ok=True)
    for i in range(60):  # written by hand: the server's start-up sync indexes them
        (day / f"m-20260105-h{i:03d}.md").write_text(
            f"---\nid: m-20260105-h{i:03d}\nts: 2026-01-05T10:00:00Z\n---\n"
            f"Hand note {i}: the ferry to island {i} leaves at {i % 24} o'clock.\n"
        )
    log = example_kf.parent / "serve-start.log"
    proc = subprocess.Popen(
        [OK_BIN, "serve", "--root", str(example_kf), "--port", "0"],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "OK_NO_PROGRESS": "1"},
    )
    try:
        until(lambda: _lock_says(example_kf, "ok serve start") or proc.poll() is not None)
        assert proc.poll() is None, log.read_text()
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=180) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert "serving" not in log.read_text()  # it stopped before serving
    assert not (example_kf / ".ok" / "serve.json").exists()
    assert not (example_kf / ".ok" / "serve.sock").exists()
    assert run_ok("status", "--json").json()["in_sync"]
    assert len(_found(example_kf, "ferry to island leaves", "mem")) == 3


def test_a_restart_after_kill_9_cleans_the_stale_claim_even_when_its_pid_is_reused(
    example_kf: Path,
) -> None:
    # no watcher: its sync after the server's own write could be what the kill cuts off
    assert run_ok("--root", str(example_kf), "config", "set", "serve.watch", "false").code == 0
    s = Server(example_kf)
    assert _add_note(s, ACKED_NOTE).status_code == 201
    until(lambda: not _lock_says(example_kf, "pid"))  # the write has ended
    claim_path = example_kf / ".ok" / "serve.json"
    claim = json.loads(claim_path.read_text())
    assert claim["pid"] == s.proc.pid and claim["boot_id"] and claim["started"]
    sock = Path(claim["socket"])
    os.killpg(s.proc.pid, signal.SIGKILL)
    s.proc.wait(timeout=60)
    s.http.close()
    assert claim_path.exists() and sock.exists()  # what a killed server leaves
    # another process now has the recorded pid (here: a claim rewritten to name it), and
    # its command line even says "serve"
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", "serve"], start_new_session=True
    )
    try:
        claim_path.write_text(json.dumps({**claim, "pid": other.pid}) + "\n")
        r = run_cli("status", "--json", cwd=example_kf)  # no server answers the socket
        assert r.code == 0, r.err
        assert r.json()["server"] is None and r.json()["in_sync"], r.out
        assert not claim_path.exists() and not sock.exists()
        assert other.poll() is None  # the other process is left alone
    finally:
        other.kill()
        other.wait(timeout=30)
    # a restart serves the folder, keeps what was acknowledged, and routes commands again
    s = Server(example_kf)
    try:
        assert json.loads(claim_path.read_text())["pid"] == s.proc.pid
        r = run_cli("mem", "list", "--json", cwd=example_kf)
        assert r.code == 0 and any(ACKED_NOTE in n["text"] for n in r.json()), r.out
    finally:
        assert s.stop() == 0
    assert not claim_path.exists() and not sock.exists()


def test_a_claim_left_by_a_killed_server_without_restart_is_cleaned_by_any_command(
    example_kf: Path,
) -> None:
    """The claim and the socket of a killed server, whose pid nobody has: any command
    (here a routed-looking `ok search`) runs alone and removes both."""
    s = Server(example_kf)
    sock = Path(json.loads((example_kf / ".ok" / "serve.json").read_text())["socket"])
    os.killpg(s.proc.pid, signal.SIGKILL)
    s.proc.wait(timeout=60)
    s.http.close()
    r = run_cli("search", "gene editing", "-k", "1", cwd=example_kf)
    assert r.code == 0, r.err
    assert not (example_kf / ".ok" / "serve.json").exists() and not sock.exists()


def test_a_stop_interrupts_a_routed_command_waiting_for_the_writer_lock(
    example_kf: Path,
) -> None:
    """A routed `ok mem add` waits (up to a long lock timeout) while an HTTP upload writes;
    SIGTERM lets the upload finish and ends the wait at once: the command exits as
    interrupted, writes nothing, and the server exits 0 without waiting for the timeout."""
    s = Server(example_kf)
    got: dict[str, Any] = {}

    def upload() -> None:
        got["r"] = _add_doc(s, "harbour.md", _long_document(400))

    t = threading.Thread(target=upload)
    t.start()
    until(lambda: _lock_says(example_kf, "ok serve store ingest") or not t.is_alive())
    assert t.is_alive(), f"the upload ended before it was seen writing: {got}"
    text = "A routed note that waits for the writer lock."
    said = example_kf.parent / "routed.err"
    routed = subprocess.Popen(
        [OK_BIN, "mem", "add", text],
        cwd=example_kf,
        stdout=subprocess.DEVNULL,
        stderr=said.open("w"),
        env={**os.environ, "OK_LOCK_TIMEOUT": "600", "OK_NO_PROGRESS": "1"},
    )
    try:
        # said after a second of waiting
        until(
            lambda: "waiting for the writer lock" in said.read_text() or routed.poll() is not None
        )
        assert routed.poll() is None, said.read_text()
        asked = time.monotonic()
        os.killpg(s.proc.pid, signal.SIGTERM)
        # interrupted as Ctrl-C interrupts a command run alone: exit 130
        assert routed.wait(timeout=120) == 130, said.read_text()
        assert _dead(s) == 0, s.log.read_text()
        assert time.monotonic() - asked < 300  # not the lock's 600 s
    finally:
        if routed.poll() is None:
            routed.kill()
            routed.wait(timeout=30)
    t.join(timeout=120)
    assert got["r"].status_code == 201, got
    assert _note_state(example_kf, text) is None
    assert run_ok("status", "--json").json()["in_sync"]
    assert _doc_state(example_kf, "harbour.md", "harbour master logs ship berth cargo")
