"""The event log: append-only files, filters, the CLI and `--follow`."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers.run import OK_BIN, run_cli, run_ok

from openkl.errors import UsageError
from openkl.files import events
from openkl.files.folder import Folder


def test_emit_appends_lines_in_month_files(kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = Folder(kf)
    monkeypatch.setenv("OK_NOW", "2026-01-31T23:59:00Z")
    a = events.emit(f, "ingested", doc="aaaa1111", path="store/normalized/a.ok.md", drift=None)
    monkeypatch.setenv("OK_NOW", "2026-02-01T00:01:00Z")
    b, c = events.emit_many(
        f,
        [
            ("drifted", {"doc": "bbbb2222", "drift": 0.3}),
            ("mem_added", {"note": "m-20260201-abcd"}),
        ],
    )
    jan = (kf / "events/2026-01.jsonl").read_text().splitlines()
    feb = (kf / "events/2026-02.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in jan] == [a]
    assert [json.loads(x) for x in feb] == [b, c]
    assert "drift" not in a and a["id"].startswith("ev-20260131235900-")
    assert a["ts"] == "2026-01-31T23:59:00Z" and b["type"] == "drifted"
    # appending never rewrites what is there
    before = (kf / "events/2026-02.jsonl").read_bytes()
    events.emit(f, "removed", doc="bbbb2222")
    assert (kf / "events/2026-02.jsonl").read_bytes().startswith(before)
    # a torn last line (a crash mid-write) is skipped, the rest still reads
    with open(kf / "events/2026-02.jsonl", "a") as fh:
        fh.write('{"id": "ev-torn", "ts": "2026-02-0')
    assert [e["type"] for e in events.read(f)] == ["ingested", "drifted", "mem_added", "removed"]
    assert not (kf / ".gitignore").read_text().count("events")  # versioned with the folder


def test_filters(kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = Folder(kf)
    for day, typ, fields in [
        ("01", "ingested", {"doc": "aaaa1111"}),
        ("05", "drifted", {"doc": "bbbb2222", "previous": "aaaa1111"}),
        ("09", "trigger_fired", {"trigger": "t", "item": "cccc3333#char0-9", "doc": "cccc3333"}),
    ]:
        monkeypatch.setenv("OK_NOW", f"2026-03-{day}T12:00:00Z")
        events.emit(f, typ, **fields)
    assert [e["type"] for e in events.read(f, since="2026-03-05T00:00:00Z")] == [
        "drifted",
        "trigger_fired",
    ]
    assert [e["type"] for e in events.read(f, types=["ingested", "drifted"])] == [
        "ingested",
        "drifted",
    ]
    assert [e["type"] for e in events.read(f, doc="aaaa")] == ["ingested", "drifted"]
    assert [e["type"] for e in events.read(f, limit=1)] == ["trigger_fired"]
    monkeypatch.setenv("OK_NOW", "2026-03-09T18:00:00Z")
    assert events.parse_since("1d") == "2026-03-08T18:00:00Z"
    assert events.parse_since("2026-03-02") == "2026-03-02T00:00:00Z"
    with pytest.raises(UsageError):
        events.parse_since("last tuesday")
    r = run_ok("events", "--since", "2d", "--type", "trigger_fired,drifted", "--json")
    assert r.code == 0 and [e["type"] for e in r.json()] == ["trigger_fired"]
    r = run_ok("events", "--doc", "bbbb2222")
    assert r.code == 0 and r.out.startswith("2026-03-05T12:00:00Z\tdrifted\tbbbb2222")
    r = run_ok("events", "--since", "someday")
    assert r.code == 2 and "neither a date nor a span" in r.err


def test_write_commands_emit_events(kf: Path, tmp_path: Path) -> None:
    nid = run_ok("mem", "add", "Buoys mark the channel").out.strip()
    assert run_ok("mem", "update", nid, "--text", "Red buoys mark the channel").code == 0
    doc = tmp_path / "pier.md"
    doc.write_text("# Pier\n\nThe pier is 300 m long.\n")
    did = run_ok("store", "ingest", str(doc), "--json").json()["added"][0]["id"]
    assert run_ok("store", "remove", did).code == 0
    assert run_ok("mem", "delete", nid).code == 0
    evs = run_ok("events", "--json").json()
    assert [(e["type"], e.get("note") or e.get("doc")) for e in evs] == [
        ("mem_added", nid),
        ("mem_updated", nid),
        ("ingested", did),
        ("removed", did),
        ("mem_archived", nid),
    ]
    assert evs[2]["source"] == {"path": "store/sources/pier.md"}


def test_follow_prints_new_events(kf: Path) -> None:
    events.emit(Folder(kf), "ingested", doc="old00000")
    events.emit(Folder(kf), "mem_added", note="m-20260101-old0")
    proc = subprocess.Popen(
        [
            OK_BIN,
            "--root",
            str(kf),
            "events",
            "--follow",
            "--json",
            "--type",
            "mem_added",
            "--timeout",
            "300",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()

    def printed(wait: float = 120) -> dict | None:
        try:
            line = lines.get(timeout=wait)
        except queue.Empty:
            return None
        assert line is not None, f"--follow ended: {proc.wait(timeout=120)}"
        return json.loads(line)

    try:
        # the log so far, filtered; following starts right after it
        first = printed()
        assert first is not None and first["note"] == "m-20260101-old0"
        # an event appended as it starts may fall before it: mark until a mark comes through
        deadline = time.monotonic() + 120
        n = 0
        while (got := printed(0.5)) is None:
            assert time.monotonic() < deadline, "--follow printed no new event within 120 s"
            events.emit(Folder(kf), "mem_added", note=f"mark{n}")
            n += 1
        assert got["note"].startswith("mark")
        events.emit(Folder(kf), "removed", doc="zzzz")
        events.emit(Folder(kf), "mem_added", note="m-20260101-fol1")
        new = []
        while not new or new[-1] == "mark":
            ev = printed()
            assert ev is not None, f"not printed within 120 s: {new}"
            new.append("mark" if ev["note"].startswith("mark") else (ev["type"], ev["note"]))
        assert [e for e in new if e != "mark"] == [("mem_added", "m-20260101-fol1")]
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C ends the follow
        code = proc.wait(timeout=120)
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    assert lines.get(timeout=60) is None  # nothing more came
    # --timeout ends it, too
    r = run_cli("--root", str(kf), "events", "--follow", "--type", "nothing", "--timeout", "1")
    assert r.code == 0 and r.out == "", r.err
