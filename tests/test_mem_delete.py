"""`ok mem delete` archives a note (`ok mem restore` brings it back) and deletes it for good
only with --purge; a prefix of an id deletes nothing unless confirmed at a terminal. Over
HTTP, DELETE /v1/STACK/notes/ID does the same, with `?purge=true`."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest
from helpers.run import OK_BIN, run_ok
from helpers.serve import Server


def _add(text: str) -> str:
    r = run_ok("mem", "add", text, "--tags", "harbour")
    assert r.code == 0, r.err
    return r.out.strip()


def _found(query: str) -> list[str]:
    r = run_ok("search", query, "--in", "mem", "--mode", "fts", "--json")
    return [h["id"] for h in r.json()]


def test_delete_archives_and_restore_brings_the_note_back(kf: Path) -> None:
    nid = _add("The harbour pilot boards at the red buoy.")
    live = next((kf / "memories" / "by_date").rglob(f"{nid}.md"))
    r = run_ok("mem", "delete", nid, "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["deleted"] == nid and d["purged"] is False
    archived = kf / d["archived"]
    assert archived.is_file() and archived.parent.parent.parent.name == "archive"
    assert not live.exists()
    assert _found("pilot buoy") == []
    assert run_ok("mem", "show", nid).code != 0
    # plain output says where it went and how to get it back
    nid2 = _add("Tugs push the tanker off the quay.")
    r = run_ok("mem", "delete", nid2)
    assert r.code == 0 and f"ok mem restore {nid2}" in r.out + r.err

    r = run_ok("mem", "restore", nid)
    assert r.code == 0, r.err
    assert live.is_file() and not archived.exists()
    assert _found("pilot buoy") == [nid]


def test_purge_deletes_for_good(kf: Path) -> None:
    nid = _add("The lock keeper opens the gates at high water.")
    r = run_ok("mem", "delete", nid, "--purge", "--json")
    assert r.code == 0, r.err
    assert r.json() == {"deleted": nid, "purged": True, "archived": None}
    assert not list((kf / "memories").rglob(f"{nid}.md"))
    assert _found("lock keeper gates") == []
    r = run_ok("mem", "restore", nid)
    assert r.code != 0 and "no archived note" in r.err
    # an archived note can be purged too
    other = _add("Dredgers keep the channel deep.")
    assert run_ok("mem", "delete", other).code == 0
    r = run_ok("mem", "delete", other)
    assert r.code != 0 and f"ok mem delete --purge {other}" in r.err
    assert run_ok("mem", "delete", other, "--purge").code == 0
    assert not list((kf / "memories").rglob(f"{other}.md"))


def test_a_prefix_deletes_nothing_without_a_confirmation(kf: Path) -> None:
    nid = _add("Fog horns sound every thirty seconds.")
    prefix = nid[:-2]
    r = run_ok("mem", "delete", prefix)  # no terminal to ask at
    assert r.code == 2, r.err
    assert r.err.count("\n") == 1 and nid in r.err and "--yes" in r.err
    assert _found("fog horns") == [nid]
    r = run_ok("mem", "delete", prefix, "--yes", "--json")
    assert r.code == 0 and r.json()["deleted"] == nid
    assert _found("fog horns") == []


def _at_terminal(args: list[str], answer: bytes, env: dict[str, str]) -> tuple[int, str]:
    """Run `ok` with a terminal as stdin, stdout and stderr; answer its question."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [OK_BIN, *args], stdin=follower, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    seen = b""
    answered = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        if not answered and b"[y/N]" in seen:
            os.write(leader, answer)
            answered = True
        if proc.poll() is not None and not ready:
            break
    code = proc.wait(timeout=60)
    os.close(leader)
    return code, seen.decode(errors="replace")


def test_a_prefix_is_confirmed_at_a_terminal(kf: Path) -> None:
    nid = _add("Pilots climb a rope ladder.")
    env = {**os.environ, "OK_ROOT": str(kf), "NO_COLOR": "1"}
    code, seen = _at_terminal(["mem", "delete", nid[:-1]], b"n\n", env)
    assert code == 1 and nid in seen and "Pilots climb a rope ladder." in seen, seen
    assert _found("rope ladder") == [nid]
    code, seen = _at_terminal(["mem", "delete", nid[:-1]], b"y\n", env)
    assert code == 0, seen
    assert _found("rope ladder") == []
    assert run_ok("mem", "restore", nid).code == 0


@pytest.mark.server
def test_http_delete_archives_and_purges(kf: Path) -> None:
    kept = _add("The breakwater shelters the inner harbour.")
    gone = _add("Bollards hold the mooring lines.")
    s = Server(kf)
    try:
        v1 = f"/v1/{s.stack}/notes"
        r = s.http.delete(f"{v1}/{kept[:-2]}")
        assert r.status_code == 400 and "full id" in r.json()["error"], r.text
        r = s.http.delete(f"{v1}/{kept}")
        assert r.status_code == 200, r.text
        assert r.json()["deleted"] == kept and r.json()["purged"] is False
        assert (kf / r.json()["archived"]).is_file()
        r = s.http.delete(f"{v1}/{gone}", params={"purge": "true"})
        assert r.status_code == 200 and r.json()["purged"] is True, r.text
        assert s.http.get(f"{v1}/{kept}").status_code == 404
    finally:
        assert s.stop() == 0
    assert not list((kf / "memories").rglob(f"{gone}.md"))
    assert run_ok("mem", "restore", kept).code == 0
