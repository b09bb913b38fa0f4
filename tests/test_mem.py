"""Memory notes: the files are the notes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from helpers.run import run_ok


def _note_file(kf: Path, nid: str) -> Path:
    return next(kf.glob(f"memories/by_date/*/*/{nid}.md"))


def test_add_list_show_update_delete(kf: Path) -> None:
    r = run_ok(
        "mem",
        "add",
        "Use atomic renames for state files",
        "--tags",
        "io,safety",
        "--topics",
        "storage",
        "--json",
    )
    assert r.code == 0, r.err
    note = r.json()
    nid = note["id"]
    assert note["tags"] == ["io", "safety"] and note["topics"] == ["storage"]
    path = _note_file(kf, nid)
    text = path.read_text()
    assert text.startswith("---\nid: " + nid) and "Use atomic renames" in text
    day = note["ts"][:10]
    assert path.parent == kf / "memories/by_date" / day[:7] / day[8:10]

    r = run_ok("mem", "add", "-", "--tags", "io", input="from stdin\nsecond line\n")
    assert r.code == 0, r.err
    nid2 = r.out.strip()

    listed = run_ok("mem", "list", "--json").json()
    assert {n["id"] for n in listed} == {nid, nid2}
    assert [n["id"] for n in run_ok("mem", "list", "--tag", "safety", "--json").json()] == [nid]

    shown = run_ok("mem", "show", nid2, "--json").json()
    assert shown["text"] == "from stdin\nsecond line"

    r = run_ok(
        "mem", "update", nid, "--text", "Use atomic renames and fsync", "--add-tag", "fs", "--json"
    )
    assert r.code == 0, r.err
    assert r.json()["tags"] == ["io", "safety", "fs"]
    hits = run_ok("search", "fsync", "--in", "mem", "--mode", "fts", "--json").json()
    assert [h["id"] for h in hits] == [nid]

    assert run_ok("mem", "delete", nid).code == 0
    assert not path.exists()
    assert run_ok("search", "fsync", "--in", "mem", "--mode", "fts", "--json").json() == []
    r = run_ok("mem", "show", nid)
    assert r.code == 2 and "is archived" in r.err and f"ok mem restore {nid}" in r.err


def test_empty_note_is_refused(kf: Path) -> None:
    r = run_ok("mem", "add", "   ")
    assert r.code == 2 and "empty" in r.err
    assert not list(kf.glob("memories/by_date/**/*.md"))


def test_topics_symlinks(kf: Path) -> None:
    nid = run_ok("mem", "add", "graph note", "--tags", "Graph DB", "--topics", "kuzu").out.strip()
    r = run_ok("mem", "topics", "--json")
    assert r.json() == {"graph-db": 1, "kuzu": 1}
    link = kf / "memories/topics/kuzu" / f"{nid}.md"
    assert link.is_symlink() and not os.path.isabs(os.readlink(link))
    assert link.read_text() == _note_file(kf, nid).read_text()


def test_hand_written_and_edited_notes_are_picked_up_by_sync(kf: Path) -> None:
    d = kf / "memories/by_date/2026-01/05"
    d.mkdir(parents=True)
    (d / "m-20260105-abcd.md").write_text(
        "---\nid: m-20260105-abcd\nts: 2026-01-05T10:00:00Z\ntags: [pulled]\n---\n"
        "Notes arriving by git pull are indexed by sync.\n"
    )
    r = run_ok("sync", "--json")
    assert r.code == 0, r.err
    assert r.json()["notes_added"] == ["m-20260105-abcd"]
    hits = run_ok("search", "git pull", "--in", "mem", "--json").json()
    assert hits[0]["id"] == "m-20260105-abcd" and hits[0]["tags"] == ["pulled"]
    # edit by hand
    p = d / "m-20260105-abcd.md"
    p.write_text(p.read_text().replace("git pull", "rsync from a laptop"))
    assert run_ok("sync", "--json").json()["notes_updated"] == ["m-20260105-abcd"]
    hits = run_ok("search", "rsync laptop", "--in", "mem", "--mode", "fts", "--json").json()
    assert hits and hits[0]["id"] == "m-20260105-abcd"


def test_broken_frontmatter_is_reported_and_kept(kf: Path) -> None:
    good = run_ok("mem", "add", "a healthy note").out.strip()
    d = kf / "memories/by_date/2026-02/01"
    d.mkdir(parents=True)
    bad = d / "m-20260201-bad1.md"
    bad.write_text("---\nid: m-20260201-bad1\ntags: [unclosed\n---\nbody\n")
    unclosed = d / "m-20260201-bad2.md"
    unclosed.write_text("---\nid: m-20260201-bad2\nbody without a closing line\n")
    latin = d / "m-20260201-bad3.md"
    latin.write_bytes(b"---\nid: m-20260201-bad3\n---\ncaf\xe9\n")
    r = run_ok("sync", "--json")
    assert r.code == 3 and "Error: 3 files not indexed as written" in r.err
    problems = {Path(p["path"]).name: p["problem"] for p in r.json()["problems"]}
    assert "broken YAML frontmatter" in problems["m-20260201-bad1.md"]
    assert "not closed" in problems["m-20260201-bad2.md"]
    assert "not valid UTF-8" in problems["m-20260201-bad3.md"]
    assert "warning:" in r.err
    assert bad.exists() and unclosed.exists() and latin.exists()
    ids = [n["id"] for n in run_ok("mem", "list", "--json").json()]
    assert ids == [good]


def _topic_view(kf: Path) -> dict[str, list[str]]:
    """The links under memories/topics/, by topic; fails if any of them dangles."""
    out: dict[str, list[str]] = {}
    for link in sorted((kf / "memories/topics").glob("*/*")):
        assert link.is_symlink() and link.exists(), f"{link} dangles"
        out.setdefault(link.parent.name, []).append(link.stem)
    return out


def test_topic_links_follow_add_update_delete_and_sync(kf: Path) -> None:
    # no `ok mem topics` anywhere here: every write keeps the view current
    a = run_ok("mem", "add", "first", "--topics", "kuzu", "--tags", "db").out.strip()
    b = run_ok("mem", "add", "second", "--topics", "kuzu").out.strip()
    assert _topic_view(kf) == {"db": [a], "kuzu": sorted([a, b])}
    assert run_ok("mem", "update", a, "--topics", "storage", "--tags", "db").code == 0
    assert _topic_view(kf) == {"db": [a], "kuzu": [b], "storage": [a]}
    assert run_ok("mem", "delete", a).code == 0
    assert _topic_view(kf) == {"kuzu": [b]}
    # notes arriving by hand (a git pull) or taken away show up after sync
    d = kf / "memories/by_date/2026-01/05"
    d.mkdir(parents=True)
    (d / "m-20260105-abcd.md").write_text(
        "---\nid: m-20260105-abcd\nts: 2026-01-05T10:00:00Z\ntopics: [pulled]\n---\nFrom git.\n"
    )
    _note_file(kf, b).unlink()
    assert run_ok("sync").code == 0
    assert _topic_view(kf) == {"pulled": ["m-20260105-abcd"]}
    # a fresh clone has no topics folder at all (it is ignored by git)
    shutil.rmtree(kf / "memories/topics")
    assert run_ok("sync").code == 0
    assert _topic_view(kf) == {"pulled": ["m-20260105-abcd"]}
