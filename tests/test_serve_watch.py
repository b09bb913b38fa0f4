"""The watch of `ok serve` survives what the folder throws at it: a file name that is not
UTF-8 (which watchfiles cannot carry), a sync that fails, a symlink out of the folder. It
logs and counts each failure, tries again after a pause, and `/ready` says so meanwhile."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from helpers.run import run_cli, until
from helpers.serve import Server, hand_written_note, watch_bursts


def _failures(h: httpx.Client) -> dict[str, float]:
    """The watch's failures by stage, from /metrics."""
    out: dict[str, float] = {}
    for line in h.get("/metrics").text.splitlines():
        if line.startswith("ok_watch_failures_total{"):
            stage = line.split('stage="', 1)[1].split('"', 1)[0]
            out[stage] = out.get(stage, 0) + float(line.rsplit(" ", 1)[1])
    return out


def _found(s: Server, query: str, nid: str) -> bool:
    r = s.http.get(f"/v1/{s.stack}/search", params={"q": query, "k": 1, "scope": "mem"})
    hits = r.json()["hits"]
    return bool(hits) and hits[0]["id"] == nid


def _watching(s: Server) -> None:
    """Wait until the server's watch is set up: it sees a write of the server's own."""
    r = s.http.post(f"/v1/{s.stack}/notes", json={"text": "Grebes dive for minnows."})
    assert r.status_code == 201, r.text
    until(lambda: watch_bursts(s.http).get("own", 0) >= 1)


@pytest.mark.server
def test_the_watch_survives_names_that_are_not_utf8(example_kf: Path) -> None:
    s = Server(example_kf)
    try:
        _watching(s)
        # a note in a new directory: once it is found, the directory is watched too
        day = hand_written_note(
            example_kf, "m-20260105-kelp", "Kelp forests shelter otters."
        ).parent
        until(lambda: _found(s, "kelp forests otters", "m-20260105-kelp"))
        # a file watchfiles cannot name, in the same burst as a good note
        bad = os.fsencode(day) + b"/bad\xffname.md"
        with open(bad, "wb") as fh:
            fh.write(b"---\nid: m-20260105-badn\n---\nA name that is not UTF-8.\n")
        hand_written_note(example_kf, "m-20260105-otte", "Sea otters crack urchins on rocks.")
        until(lambda: _found(s, "otters crack urchins rocks", "m-20260105-otte"))
        assert _failures(s.http).get("watch", 0) >= 1
        until(lambda: s.http.get("/ready").status_code == 200)
        st = s.http.get(f"/v1/{s.stack}/status").json()
        assert any("not valid UTF-8" in p["problem"] for p in st["problems"]), st
        assert st["watch"]["failing"] is None, st["watch"]
        # a directory it cannot name stops the system's watch from being set up at all:
        # the watch polls the files instead, and goes on
        os.mkdir(os.fsencode(day.parent) + b"/\xfe")
        hand_written_note(example_kf, "m-20260105-seal", "Harbour seals haul out at low tide.")
        until(lambda: _found(s, "harbour seals haul out", "m-20260105-seal"))
        until(lambda: s.http.get("/ready").status_code == 200)
        assert _failures(s.http).get("watch", 0) >= 2
    finally:
        assert s.stop() == 0
    log = s.log.read_text()
    assert '"event": "watch.failed", "stage": "watch"' in log, log[-3000:]


@pytest.mark.server
def test_ready_says_when_a_stack_s_syncs_fail_until_they_recover(example_kf: Path) -> None:
    s = Server(example_kf)
    try:
        _watching(s)
        mapping = example_kf / ".ok" / "mapping.jsonl"
        good = mapping.read_text()
        mapping.write_text("{not json\n" + good)
        hand_written_note(example_kf, "m-20260105-tern", "Arctic terns migrate pole to pole.")

        def failing() -> dict | None:
            r = s.http.get("/ready")
            return r.json() if r.status_code == 503 else None

        body = until(failing)
        assert body["failing"][s.stack]["failing"] == "sync", body
        assert "mapping.jsonl line 1 is not valid JSON" in body["error"], body
        assert body["failing"][s.stack]["failures"] >= 1 and "hint" in body
        assert _failures(s.http).get("sync", 0) >= 1
        # `ok status`, run in the server, says so too
        r = run_cli("status", cwd=example_kf)
        assert r.code == 1 and "watch: sync failing since" in r.out, (r.out, r.err)
        assert "watch of this folder is failing" in r.err
        assert not _found(s, "arctic terns migrate", "m-20260105-tern")
        # fixed by hand: the next try (no change needed to trigger it) syncs
        mapping.write_text(good)
        until(lambda: s.http.get("/ready").status_code == 200)
        assert _found(s, "arctic terns migrate", "m-20260105-tern")
        assert s.http.get(f"/v1/{s.stack}/status").json()["in_sync"]
    finally:
        assert s.stop() == 0


@pytest.mark.server
def test_a_symlink_out_of_the_folder_stops_neither_serve_nor_its_watch(
    example_kf: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "s.ok.md").write_text("# Secret\n\nThe launch codes are 0000.\n")
    (out / "n.md").write_text("---\nid: m-20260105-lnko\n---\nThe launch codes are 0000.\n")
    (example_kf / "store/normalized/s.ok.md").symlink_to(out / "s.ok.md")
    s = Server(example_kf)  # it starts
    try:
        _watching(s)
        link = example_kf / "memories/by_date/2026-01/05/n.md"
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(out / "n.md")
        hand_written_note(example_kf, "m-20260105-puff", "Puffins nest in burrows.")
        until(lambda: _found(s, "puffins nest burrows", "m-20260105-puff"))
        st = s.http.get(f"/v1/{s.stack}/status").json()
        paths = {p["path"] for p in st["problems"]}
        assert {"store/normalized/s.ok.md", "memories/by_date/2026-01/05/n.md"} <= paths, st
        assert s.http.get("/ready").status_code == 200
        hits = s.http.get(f"/v1/{s.stack}/search", params={"q": "launch codes"}).json()["hits"]
        assert all("launch codes" not in h["quote"] for h in hits)
        assert _failures(s.http) == {}
    finally:
        assert s.stop() == 0
