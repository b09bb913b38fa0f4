"""Links between notes: `[[note-id]]` and `[[Title]]` in notes become LINKS_TO edges."""

from __future__ import annotations

from pathlib import Path

from conftest import run_ok


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
    assert run_ok("mem", "delete", nid).code == 0
    assert _links() == []
