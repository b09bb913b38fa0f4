"""Links between notes: `[[note-id]]` and `[[Title]]` in notes become LINKS_TO edges."""

from __future__ import annotations

from pathlib import Path

from helpers.run import run_ok


def _write(kf: Path, nid: str, body: str, title: str | None = None, day: str = "01") -> Path:
    p = kf / "memories" / "by_date" / "2026-11" / day / f"{nid}.md"
    p.parent.mkdir(parents=True, exist_ok=True)
    fm = f"id: {nid}\nts: 2026-11-{day}T10:00:00Z\n" + (f"title: {title}\n" if title else "")
    p.write_text(f"---\n{fm}---\n{body}\n", encoding="utf-8")
    return p


def _links() -> list[tuple[str, str, str, int]]:
    r = run_ok(
        "graph",
        "cypher",
        "MATCH (m:MemoryNote)-[r:LINKS_TO]->(t) RETURN m.id AS a, t.id AS b, r.text AS text,"
        " r.line AS line ORDER BY a, line, b",
        "--json",
    )
    assert r.code == 0, r.err
    return [(x["a"], x["b"], x["text"], x["line"]) for x in r.json()]


def _sync() -> None:
    r = run_ok("sync")
    assert r.code == 0, r.err


def test_links_by_id_title_alias_heading_and_not_in_code(kf: Path) -> None:
    _write(kf, "m-20261101-aaaa", "# Write-ahead logging\n\nThe log comes first.", day="01")
    _write(kf, "m-20261102-bbbb", "Checkpoints.", title="Checkpoint  Policy", day="02")
    _write(
        kf,
        "m-20261103-cccc",
        "See [[m-20261101-aaaa]] and [[write-ahead LOGGING|the WAL]].\n"
        "Also [[checkpoint policy#When]].\n"
        "```\n[[m-20261102-bbbb]] in a fence\n```\n"
        "Inline `[[m-20261102-bbbb]]` is code, [[Nowhere]] is broken.",
        day="03",
    )
    _sync()
    # lines count from the top of the file: three frontmatter lines and two `---`
    assert _links() == [
        ("m-20261103-cccc", "m-20261101-aaaa", "m-20261101-aaaa", 5),
        ("m-20261103-cccc", "m-20261101-aaaa", "write-ahead LOGGING", 5),
        ("m-20261103-cccc", "m-20261102-bbbb", "checkpoint policy", 6),
    ]
    r = run_ok(
        "graph",
        "cypher",
        "MATCH ()-[r:LINKS_TO]->() WHERE r.text = 'checkpoint policy' RETURN r.heading AS h",
        "--json",
    )
    assert r.json() == [{"h": "When"}]

    # a file without frontmatter (its name is its id), linked by path as Obsidian writes it
    plain = kf / "memories/by_date/2026-11/04/Storage Engines.md"
    plain.parent.mkdir(parents=True)
    plain.write_text("B-trees, LSM trees.\n~~~\n[[m-20261101-aaaa]]\n~~~\n")
    _write(kf, "m-20261105-eeee", "Read [[notes/storage ENGINES.md]].", day="05")
    _sync()
    assert ("m-20261105-eeee", "Storage Engines", "notes/storage ENGINES.md", 5) in _links()
    assert [x for x in _links() if x[0] == "Storage Engines"] == []

    # from scratch, the same edges
    before = _links()
    assert run_ok("index", "--rebuild").code == 0
    assert _links() == before


def test_sync_updates_links_when_notes_change(kf: Path) -> None:
    a = _write(kf, "m-20261101-aaaa", "Links to [[Storage Engines]] and [[m-20261102-bbbb]].")
    b = _write(kf, "m-20261102-bbbb", "# Recovery\n\nNo links.", day="02")
    _sync()
    assert _links() == [("m-20261101-aaaa", "m-20261102-bbbb", "m-20261102-bbbb", 5)]

    # a note with the missing title appears: the broken link is resolved
    _write(kf, "m-20261103-cccc", "# Storage engines\n\nB-trees and LSM trees.", day="03")
    _sync()
    assert _links() == [
        ("m-20261101-aaaa", "m-20261102-bbbb", "m-20261102-bbbb", 5),
        ("m-20261101-aaaa", "m-20261103-cccc", "Storage Engines", 5),
    ]

    # the linked note is edited (re-indexed): the links into it stay
    b.write_text(b.read_text().replace("No links.", "Points back to [[m-20261101-aaaa]]."))
    _sync()
    assert ("m-20261101-aaaa", "m-20261102-bbbb", "m-20261102-bbbb", 5) in _links()
    assert ("m-20261102-bbbb", "m-20261101-aaaa", "m-20261101-aaaa", 7) in _links()

    # the linking note is edited: its outgoing links follow
    a.write_text(a.read_text().replace(" and [[m-20261102-bbbb]]", ""))
    _sync()
    assert [x for x in _links() if x[0] == "m-20261101-aaaa"] == [
        ("m-20261101-aaaa", "m-20261103-cccc", "Storage Engines", 5)
    ]

    # the title is renamed away: the link is broken again
    c = next(kf.glob("memories/by_date/*/*/m-20261103-cccc.md"))
    c.write_text(c.read_text().replace("# Storage engines", "# Engines"))
    _sync()
    assert [x for x in _links() if x[0] == "m-20261101-aaaa"] == []


def test_mem_add_and_delete_update_links(kf: Path) -> None:
    _write(kf, "m-20261101-aaaa", "Waiting for [[Compaction]].")
    _sync()
    assert _links() == []
    r = run_ok("mem", "add", "# Compaction\n\nMerging sorted runs.")
    assert r.code == 0, r.err
    nid = r.out.strip()
    assert _links() == [("m-20261101-aaaa", nid, "Compaction", 5)]
    # its heading changes: the link matches nothing now
    assert run_ok("mem", "update", nid, "--text", "# Merging\n\nSorted runs.").code == 0
    assert _links() == []
    assert run_ok("mem", "update", nid, "--text", "# Compaction\n\nAgain.").code == 0
    assert _links() == [("m-20261101-aaaa", nid, "Compaction", 5)]
    assert run_ok("mem", "delete", nid).code == 0
    assert _links() == []


def _three(kf: Path) -> None:
    """a -> b (by title), b -> c (by id), a -> doc (by title), one broken link in c."""
    _write(kf, "m-20261101-aaaa", "# Alpha\n\nSee [[Beta]] and [[Write-Ahead Logging]].")
    _write(kf, "m-20261102-bbbb", "# Beta\n\nOn to [[m-20261103-cccc|gamma]].", day="02")
    _write(kf, "m-20261103-cccc", "# Gamma\n\nNothing at [[Delta]].", day="03")
    _sync()


def test_traverse_from_a_note_follows_links_both_ways(example_kf: Path) -> None:
    _three(example_kf)
    r = run_ok("graph", "traverse", "m-20261102-bbbb", "--depth", "1", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["start"]["id"] == "m-20261102-bbbb" and d["start"]["type"] == "note"
    got = {(s["id"], s["via"]["direction"], s["kind"]) for s in d["steps"]}
    assert got == {("m-20261103-cccc", "out", "memory"), ("m-20261101-aaaa", "in", "memory")}
    # by title, two hops: on through Alpha to the document it links to
    r = run_ok("graph", "traverse", "[[gamma]]", "--depth", "3", "--json")
    assert r.code == 0, r.err
    steps = {s["id"]: s for s in r.json()["steps"]}
    assert steps["m-20261102-bbbb"]["depth"] == 1
    assert steps["m-20261101-aaaa"]["path"] == ["Gamma", "Beta", "Alpha"]
    doc = [s for s in steps.values() if s["kind"] == "doc"]
    assert len(doc) == 1 and doc[0]["entity"].lower().startswith("write-ahead logging")
    assert doc[0]["via"]["evidence"] == "line 7: [[Write-Ahead Logging]]"
    r = run_ok("graph", "traverse", "m-20261102-bbbb", "--depth", "1")
    assert "-LINKS_TO-> Gamma" in r.out and "<-LINKS_TO- Alpha" in r.out
    r = run_ok("graph", "traverse", "m-20261102-bbbb", "--rel", "works_with")
    assert r.code == 2 and "LINKS_TO" in r.err
    r = run_ok("graph", "traverse", "[[Epsilon]]")
    assert r.code == 2 and "[[Epsilon]] matches no note" in r.err


def test_lineage_and_context_show_links(example_kf: Path) -> None:
    _three(example_kf)
    r = run_ok("graph", "lineage", "m-20261102-bbbb", "--json")
    assert r.code == 0, r.err
    rels = {(n["rel"], n["id"]) for n in r.json()["nodes"]}
    assert rels == {("LINKS_TO", "m-20261103-cccc"), ("LINKED_FROM", "m-20261101-aaaa")}

    r = run_ok("context", "Beta: on to gamma", "-k", "1", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert [s["id"] for s in d["sources"]] == ["m-20261102-bbbb"]
    linked = {(n["id"], n["via"], n["direction"], n["title"]) for n in d["linked_notes"]}
    assert linked == {
        ("m-20261103-cccc", "m-20261102-bbbb", "out", "Gamma"),
        ("m-20261101-aaaa", "m-20261102-bbbb", "in", "Alpha"),
    }
    r = run_ok("context", "Beta: on to gamma", "-k", "1")
    assert "m-20261102-bbbb -> m-20261103-cccc  Gamma" in r.out


def test_mem_show_lists_links_and_backlinks(example_kf: Path) -> None:
    _three(example_kf)
    r = run_ok("mem", "show", "m-20261102-bbbb", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["links"] == [
        {
            "target": "m-20261103-cccc",
            "heading": "",
            "alias": "gamma",
            "line": 7,
            "to": {
                "kind": "memory",
                "id": "m-20261103-cccc",
                "path": "memories/by_date/2026-11/03/m-20261103-cccc.md",
                "title": "Gamma",
            },
        }
    ]
    assert d["backlinks"] == [
        {
            "from": "m-20261101-aaaa",
            "path": "memories/by_date/2026-11/01/m-20261101-aaaa.md",
            "title": "Alpha",
            "line": 7,
            "target": "Beta",
        }
    ]
    r = run_ok("mem", "show", "m-20261103-cccc")
    assert "line 7: [[Delta]] -> (matches no note)" in r.out
    assert "m-20261102-bbbb  Beta  (line 7)" in r.out


def test_doctor_reports_broken_links(example_kf: Path) -> None:
    r = run_ok("doctor", "--json")
    assert r.code == 0, r.out
    _three(example_kf)
    r = run_ok("doctor", "--json")
    assert r.code == 1
    broken = [c for c in r.json() if c["check"] == "link"]
    path = "memories/by_date/2026-11/03/m-20261103-cccc.md"
    assert broken == [
        {
            "check": "link",
            "ok": False,
            "detail": f"{path}:7: [[Delta]] matches no note",
            "fix": broken[0]["fix"],
            "path": path,
            "line": 7,
            "link": "Delta",
        }
    ]
    assert f"FAIL link: {path}:7: [[Delta]] matches no note" in run_ok("doctor").out
    _write(example_kf, "m-20261104-dddd", "Delta.", title="delta", day="04")
    r = run_ok("doctor", "--json")  # resolved from the files, before any sync
    assert [c for c in r.json() if c["check"] == "link"] == []
    _sync()
    assert run_ok("doctor").code == 0


def test_an_index_from_before_links_is_rebuilt(example_kf: Path) -> None:
    _three(example_kf)
    # the graph as the previous schema had it: no LINKS_TO or NoteRefs table, version 5
    for q in (
        "DROP TABLE LINKS_TO",
        "DROP TABLE NoteRefs",
        "MATCH (m:Meta {key: 'schema_version'}) SET m.value = '5'",
    ):
        r = run_ok("graph", "cypher", q, "--write")
        assert r.code == 0, r.err
    r = run_ok("sync")
    assert r.code == 2 and "schema version 5" in r.err and "ok index --rebuild" in r.err
    r = run_ok("index", "--rebuild")
    assert r.code == 0, r.err
    assert run_ok("status", "--json").json()["in_sync"] is True
    assert ("m-20261102-bbbb", "m-20261103-cccc", "m-20261103-cccc", 7) in _links()
    assert run_ok("sync").code == 0


def test_links_to_documents_follow_ingest_edit_and_remove(kf: Path, tmp_path: Path) -> None:
    _write(kf, "m-20261101-aaaa", "Background in [[Crash Recovery Notes]].")
    _sync()
    assert _links() == []
    src = tmp_path / "recovery.md"
    src.write_text("# Crash Recovery Notes\n\nReplay the log, then checkpoint.\n")
    r = run_ok("store", "ingest", str(src), "--json")
    assert r.code == 0, r.err
    first = r.json()["added"][0]["id"]
    assert _links() == [("m-20261101-aaaa", first, "Crash Recovery Notes", 5)]
    # an edited document is a new version: the link follows the title to it
    src.write_text("# Crash Recovery Notes\n\nReplay the log, then checkpoint twice.\n")
    r = run_ok("store", "ingest", str(src), "--json")
    assert r.code == 0, r.err
    second = r.json()["added"][0]["id"]
    assert second != first
    assert _links() == [("m-20261101-aaaa", second, "Crash Recovery Notes", 5)]
    assert run_ok("store", "remove", second).code == 0
    assert _links() == []
    assert "[[Crash Recovery Notes]] matches no note" in run_ok("doctor").out
