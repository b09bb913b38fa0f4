"""Clean memory: near-duplicate notes refused when written and merged afterwards (through
the CLI, the MCP client and `ok serve`), archived notes brought back, nothing lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import call, fail, serve
from helpers.run import run_ok
from helpers.serve import Server


def _add(*args: str, now: str) -> Any:
    """`ok mem add … --json` at the pinned time `now` (each note its own id and date)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OK_NOW", now)
        return run_ok("mem", "add", *args, "--json")


def _note_files(kf: Path, under: str = "by_date") -> set[str]:
    return {p.stem for p in kf.glob(f"memories/{under}/*/*/*.md")}


def test_an_exact_or_near_duplicate_is_refused_and_nothing_is_written(kf: Path) -> None:
    first = _add("The staging server is called heron.", "--tags", "infra", now="2026-03-01")
    assert first.code == 0, first.err
    nid = first.json()["id"]
    for again in (
        "The staging server is called heron.",  # the same
        "the staging  server is called Heron",  # case, spacing and a full stop
        "The staging server is named heron.",  # near: text and meaning
    ):
        r = _add(again, now="2026-03-02")
        assert r.code == 2, (again, r.out)
        assert f"duplicate of {nid}" in r.err and "--allow-duplicate" in r.err, r.err
        assert len(r.err.strip().splitlines()) == 1, r.err
    assert _note_files(kf) == {nid}
    other = _add("The production database runs on Postgres 16.", now="2026-03-03")
    assert other.code == 0, other.err
    forced = _add("The staging server is called heron.", "--allow-duplicate", now="2026-03-04")
    assert forced.code == 0, forced.err
    assert _note_files(kf) == {nid, other.json()["id"], forced.json()["id"]}


def test_bad_text_gets_its_own_error_before_the_duplicate_check(kf: Path) -> None:
    assert _add("A note about tides.", now="2026-03-01").code == 0
    r = run_ok("mem", "add", "-", input=b"A note about tides \xff\xfe.")
    assert r.code == 2 and "not valid UTF-8" in r.err and "duplicate" not in r.err, r.err
    r = run_ok("mem", "add", "   ")
    assert r.code == 2 and "empty" in r.err, r.err


def test_the_thresholds_come_from_the_config(kf: Path) -> None:
    assert _add("The staging server is called heron.", now="2026-03-01").code == 0
    assert run_ok("config", "set", "mem.duplicate_similarity", "1").code == 0
    assert run_ok("config", "set", "mem.duplicate_text", "1").code == 0
    near = _add("The staging server is named heron.", now="2026-03-02")
    assert near.code == 0, near.err  # no longer near enough
    exact = _add("The staging server is called heron.", now="2026-03-03")
    assert exact.code == 2 and "duplicate of" in exact.err, exact.err


def test_dedupe_merges_clusters_keeping_everything_and_restore_brings_notes_back(
    kf: Path,
) -> None:
    ids = []
    for i, (text, tags, topics) in enumerate(
        [
            ("Deploys go out on Tuesdays after the standup.", "ops", "release"),
            ("Deploys go out on tuesdays, after the stand-up.", "process", "calendar"),
            ("Deploys go out on Tuesdays after standup.", "ops,weekly", ""),
            ("The office coffee machine is descaled monthly.", "office", ""),
        ]
    ):
        args = [text, "--allow-duplicate", "--tags", tags]
        if topics:
            args += ["--topics", topics]
        r = _add(*args, now=f"2026-03-0{i + 1}T09:00:00Z")
        assert r.code == 0, r.err
        ids.append(r.json()["id"])
    # a citation in the frontmatter of an absorbed note must survive the merge
    absorbed_file = next(kf.glob(f"memories/by_date/*/*/{ids[1]}.md"))
    text = absorbed_file.read_text()
    absorbed_file.write_text(text.replace(f"id: {ids[1]}\n", f"id: {ids[1]}\ncites: [doc-1#0]\n"))
    assert run_ok("sync").code == 0

    dry = run_ok("mem", "dedupe", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    assert dry.json() == {
        "dry_run": True,
        "clusters": [{"keep": ids[0], "merged_from": [ids[1], ids[2]]}],
    }
    assert _note_files(kf) == set(ids)  # a dry run changes nothing

    r = run_ok("mem", "dedupe")
    assert r.code == 0, r.err
    assert r.out.strip() == f"merged {ids[1]}, {ids[2]} into {ids[0]}"
    assert _note_files(kf) == {ids[0], ids[3]}
    assert _note_files(kf, "archive") == {ids[1], ids[2]}
    kept = run_ok("mem", "show", ids[0], "--json").json()
    assert kept["tags"] == ["ops", "process", "weekly"]
    assert kept["topics"] == ["release", "calendar"]
    assert kept["cites"] == ["doc-1#0"]
    assert kept["merged_from"] == [ids[1], ids[2]]
    # the absorbed notes leave search, the kept one stays
    hits = run_ok("search", "deploys tuesdays", "--in", "mem", "--mode", "fts", "--json").json()
    assert [h["id"] for h in hits] == [ids[0]]
    # topic links point at live notes only: the kept one, under its new labels too
    assert {p.stem for p in kf.glob("memories/topics/*/*.md")} == {ids[0], ids[3]}
    assert (kf / "memories/topics/process" / f"{ids[0]}.md").is_symlink()

    # nothing is lost: every absorbed note comes back as it was written
    for nid in (ids[1], ids[2]):
        back = run_ok("mem", "restore", nid, "--json")
        assert back.code == 0, back.err
        note = back.json()
        assert note["id"] == nid and "archived" not in note and "archived_reason" not in note
    assert _note_files(kf) == set(ids) and _note_files(kf, "archive") == set()
    restored = run_ok("mem", "show", ids[1], "--json").json()
    assert restored["text"] == "Deploys go out on tuesdays, after the stand-up."
    assert restored["tags"] == ["process"] and restored["cites"] == ["doc-1#0"]
    hits = run_ok("search", "deploys tuesdays", "--in", "mem", "--mode", "fts", "--json").json()
    assert {h["id"] for h in hits} == set(ids[:3])
    assert run_ok("mem", "dedupe", "--dry-run", "--json").json()["clusters"] != []


def test_dedupe_with_nothing_to_merge_and_restore_of_an_unknown_id(kf: Path) -> None:
    assert _add("Only one note here.", now="2026-03-01").code == 0
    r = run_ok("mem", "dedupe")
    assert r.code == 0 and r.out.strip() == "no duplicate notes", r.err
    r = run_ok("mem", "restore", "m-20260301-zzzz")
    assert r.code == 2 and "no archived note" in r.err and "memories/archive" in r.err, r.err


@pytest.mark.server
def test_mcp_mem_add_answers_duplicate_of(kf: Path) -> None:
    async def go(c: Any) -> None:
        first = await call(c, "mem_add", text="The staging server is called heron.")
        msg = await fail(c, "mem_add", text="The staging server is called heron.")
        assert f"duplicate of {first['id']}" in msg and "allow_duplicate" in msg, msg
        again = await call(
            c, "mem_add", text="The staging server is called heron.", allow_duplicate=True
        )
        assert again["id"] != first["id"]

    serve([kf], go, env={"OK_NOW": "2026-03-01T10:00:00Z"})
    assert len(_note_files(kf)) == 2


@pytest.mark.server
def test_http_note_create_answers_409_with_the_duplicate(kf: Path) -> None:
    s = Server(kf, env={"OK_SERVE_RATE_LIMIT": "0", "OK_SERVE_REFRESH_EVERY": "0"})
    try:
        url = f"/v1/{s.stack}/notes"
        r = s.http.post(url, json={"text": "Spring tides follow the full moon."})
        assert r.status_code == 201, r.text
        nid = r.json()["id"]
        r = s.http.post(url, json={"text": "Spring tides follow the full moon"})
        assert r.status_code == 409, r.text
        body = r.json()
        assert body["duplicate_of"] == nid and f"duplicate of {nid}" in body["error"], body
        r = s.http.post(
            url, json={"text": "Spring tides follow the full moon", "allow_duplicate": True}
        )
        assert r.status_code == 201, r.text
        # a replacement over HTTP: the old note leaves search unless asked for
        r = s.http.post(
            url,
            json={"text": "Neap tides follow the half moon.", "supersedes": [nid], "ttl": "2w"},
        )
        assert r.status_code == 201, r.text
        newer = r.json()
        assert newer["supersedes"] == [nid] and newer["expires"] > newer["ts"]
        search = f"/v1/{s.stack}/search"
        q = {"q": "tides moon", "scope": "mem", "mode": "fts", "k": 10}
        ids = {h["id"] for h in s.http.get(search, params=q).json()["hits"]}
        assert nid not in ids and newer["id"] in ids, ids
        ids = {
            h["id"]
            for h in s.http.get(search, params={**q, "include_superseded": "true"}).json()["hits"]
        }
        assert nid in ids, ids
        r = s.http.get(search, params={**q, "recency": "ever"})
        assert r.status_code == 400 and "half-life" in r.json()["error"], r.text
        r = s.http.post(url, json={"text": "Tide note with a bad life.", "ttl": "a while"})
        assert r.status_code == 400 and "--ttl" in r.json()["error"], r.text
    finally:
        s.stop()


def _ids(*args: str, now: str | None = None) -> list[str]:
    with pytest.MonkeyPatch.context() as mp:
        if now:
            mp.setenv("OK_NOW", now)
        r = run_ok(*args, "--json")
    assert r.code == (0 if r.json() else 1), r.err  # nothing found exits 1, as rg does
    return [h["id"] for h in r.json()]


def test_a_superseded_note_leaves_search_and_ask_and_stays_in_lineage(kf: Path) -> None:
    old = _add("Deploys go out on Tuesdays.", now="2026-03-01T09:00:00Z").json()["id"]
    # a replacement may look much like what it replaces: not a duplicate of it
    new = _add(
        "Deploys go out on Wednesdays.", "--supersedes", old, now="2026-03-02T09:00:00Z"
    ).json()
    assert new["supersedes"] == [old]
    assert _ids("search", "deploys", "--in", "mem", "--mode", "fts") == [new["id"]]
    assert _ids("mem", "search", "deploys", "--mode", "fts") == [new["id"]]
    both = _ids("search", "deploys", "--in", "mem", "--mode", "fts", "--include-superseded")
    assert set(both) == {old, new["id"]}
    answer = run_ok("ask", "when do deploys go out?", "--in", "mem", "--json").json()
    assert [c["doc_id"] for c in answer["citations"]] == [new["id"]], answer
    assert answer["retrieved"] == 1 and "Tuesdays" not in answer["answer"], answer
    answer = run_ok(
        "ask", "when do deploys go out?", "--in", "mem", "--include-superseded", "--json"
    ).json()
    assert answer["retrieved"] == 2, answer
    up = run_ok("graph", "lineage", new["id"], "--json").json()
    assert {"from": new["id"], "rel": "SUPERSEDES", "to": old} in up["edges"]
    down = run_ok("graph", "lineage", old, "--json").json()
    assert {"from": old, "rel": "SUPERSEDED_BY", "to": new["id"]} in down["edges"]
    # the edge survives the old note being edited (re-indexed) and a rebuild
    assert run_ok("mem", "update", old, "--add-tag", "history").code == 0
    assert _ids("search", "deploys", "--in", "mem", "--mode", "fts") == [new["id"]]
    assert run_ok("index", "--rebuild").code == 0
    assert _ids("search", "deploys", "--in", "mem", "--mode", "fts") == [new["id"]]
    r = run_ok("mem", "add", "Something else entirely.", "--supersedes", "m-20990101-none")
    assert r.code == 2 and "no memory note" in r.err, r.err


def test_supersedes_in_frontmatter_and_note_to_note_derived_from(kf: Path) -> None:
    old = _add("The build cache lives on the NAS.", now="2026-03-01T09:00:00Z").json()["id"]
    d = kf / "memories/by_date/2026-03/05"
    d.mkdir(parents=True)
    (d / "m-20260305-hand.md").write_text(
        f"---\nid: m-20260305-hand\nts: 2026-03-05T09:00:00Z\nsupersedes: {old}\n"
        f"derived_from: [{old}]\n---\nThe build cache moved to object storage.\n"
    )
    assert run_ok("sync").code == 0
    assert _ids("search", "build cache", "--in", "mem", "--mode", "fts") == ["m-20260305-hand"]
    edges = run_ok("graph", "lineage", "m-20260305-hand", "--json").json()["edges"]
    assert {"from": "m-20260305-hand", "rel": "SUPERSEDES", "to": old} in edges
    assert {"from": "m-20260305-hand", "rel": "DERIVED_FROM", "to": old} in edges
    rows = run_ok(
        "graph",
        "cypher",
        "MATCH (a:MemoryNote)-[:DERIVED_FROM]->(b:MemoryNote) RETURN a.id AS a, b.id AS b",
        "--json",
    ).json()
    assert rows == [{"a": "m-20260305-hand", "b": old}]


def test_expired_notes_leave_search_and_gc_archives_them_without_loss(kf: Path) -> None:
    brief = _add(
        "The VPN password rotates on Fridays.", "--ttl", "2d", now="2026-03-01T09:00:00Z"
    ).json()
    assert brief["expires"] == "2026-03-03T09:00:00Z"
    d = kf / "memories/by_date/2026-03/01"
    (d / "m-20260301-date.md").write_text(
        "---\nid: m-20260301-date\nts: 2026-03-01T10:00:00Z\nexpires: 2026-03-10\n---\n"
        "The parking garage is closed for repairs.\n"
    )
    assert run_ok("sync").code == 0
    q = ("search", "VPN password parking garage", "--in", "mem", "--mode", "fts")
    assert set(_ids(*q, now="2026-03-02T00:00:00Z")) == {brief["id"], "m-20260301-date"}
    assert _ids(*q, now="2026-03-05T00:00:00Z") == ["m-20260301-date"]
    assert _ids(*q, now="2026-03-11T00:00:00Z") == []

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OK_NOW", "2026-03-05T00:00:00Z")
        dry = run_ok("mem", "gc", "--dry-run", "--json")
        assert dry.json() == {
            "dry_run": True,
            "archived": [{"id": brief["id"], "expires": "2026-03-03T09:00:00Z"}],
        }
        assert brief["id"] in _note_files(kf)
        r = run_ok("mem", "gc")
        assert r.code == 0 and r.out.strip().startswith(f"archived {brief['id']}"), r.err
    assert _note_files(kf) == {"m-20260301-date"}
    archived = next(kf.glob(f"memories/archive/*/*/{brief['id']}.md")).read_text()
    assert "The VPN password rotates on Fridays." in archived
    assert "expires: '2026-03-03T09:00:00Z'" in archived or "expires: 2026-03-03" in archived
    assert "archived_reason: expired" in archived
    back = run_ok("mem", "restore", brief["id"], "--json")
    assert back.code == 0 and back.json()["text"] == "The VPN password rotates on Fridays."


def test_bad_ttl_and_expires_get_one_clear_line(kf: Path) -> None:
    for bad in ("3y", "0d", "soon", "-2d"):
        r = run_ok("mem", "add", f"A note that lasts {bad}.", "--ttl", bad)
        assert r.code == 2 and "--ttl" in r.err and "12h, 30d or 2w" in r.err, (bad, r.err)
        assert len(r.err.strip().splitlines()) == 1, r.err
    assert _note_files(kf) == set()
    d = kf / "memories/by_date/2026-03/01"
    d.mkdir(parents=True)
    (d / "m-20260301-badx.md").write_text(
        "---\nid: m-20260301-badx\nexpires: next week\n---\nA note.\n"
    )
    r = run_ok("sync")
    assert "`expires: next week` is not a date" in r.err, r.err


@pytest.mark.server
def test_mcp_mem_add_supersedes_and_ttl(kf: Path) -> None:
    async def go(c: Any) -> None:
        old = await call(c, "mem_add", text="The on-call phone is the black one.")
        new = await call(
            c, "mem_add", text="The on-call phone is the red one.", supersedes=[old["id"]]
        )
        hits = await call(c, "mem_search", query="on-call phone")
        assert [h["id"] for h in hits["results"]] == [new["id"]]
        hits = await call(c, "search", query="on-call phone", include_superseded=True)
        assert {h["id"] for h in hits["results"]} >= {old["id"], new["id"]}
        short = await call(c, "mem_add", text="Lunch is at noon today.", ttl="12h")
        assert short["expires"] == "2026-03-01T22:00:00Z"
        msg = await fail(c, "mem_add", text="Another note.", ttl="forever")
        assert "--ttl" in msg or "ttl" in msg

    serve([kf], go, env={"OK_NOW": "2026-03-01T10:00:00Z"})
