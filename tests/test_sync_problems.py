"""Files `ok sync` cannot follow as written: notes reusing an id, unreadable notes and docs.

They are reported by `sync` and `status` (non-zero exit), and never push knowledge that is
already indexed out of search.
"""

from __future__ import annotations

from pathlib import Path

from helpers.run import run_ok

ORIGINAL = (
    "---\nid: m-20260105-abcd\nts: 2026-01-05T10:00:00Z\ntags: [birds]\n---\n"
    "Herons nest in the alder trees by the weir.\n"
)


def _write(kf: Path, rel: str, text: str | bytes) -> Path:
    p = kf / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def _search_ids(query: str, where: str = "mem") -> list[str]:
    r = run_ok("search", query, "--in", where, "--mode", "fts", "--json")
    assert r.code in (0, 1), r.err  # 1: no hit (`[]`), as rg
    return [h["id"] for h in r.json()]


def test_a_copied_note_id_keeps_the_original_and_reports_the_copy(kf: Path) -> None:
    orig_rel = "memories/by_date/2026-01/05/m-20260105-abcd.md"
    _write(kf, orig_rel, ORIGINAL)
    assert run_ok("sync").code == 0
    # a new file made by copying the note: same id, sorts before the original
    copy_rel = "memories/by_date/2026-01/05/a-copy.md"
    _write(
        kf,
        copy_rel,
        ORIGINAL.replace(
            "Herons nest in the alder trees by the weir.", "Kingfishers dive from the footbridge."
        ),
    )
    r = run_ok("sync", "--json")
    assert r.code == 3
    rep = r.json()
    assert rep["notes_removed"] == [] and rep["notes_updated"] == [] and not rep["changed"]
    dup = [p for p in rep["problems"] if p["kind"] == "duplicate_id"]
    assert dup == [
        {
            "path": copy_rel,
            "kind": "duplicate_id",
            "problem": f"duplicate id m-20260105-abcd already used by {orig_rel}; give it a new id",
        }
    ]
    assert f"{copy_rel}: duplicate id m-20260105-abcd already used by {orig_rel}" in r.err
    assert r.err.strip().splitlines()[-1].startswith("Error: 1 file not indexed as written")
    assert _search_ids("herons alder") == ["m-20260105-abcd"]
    assert _search_ids("kingfishers footbridge") == []
    listed = run_ok("mem", "list", "--json")
    assert [(n["id"], n["path"]) for n in listed.json()] == [("m-20260105-abcd", orig_rel)]
    assert "give it a new id" in listed.err
    st = run_ok("status", "--json")
    assert st.code == 1 and st.json()["in_sync"] is True
    assert [p["path"] for p in st.json()["problems"]] == [copy_rel]
    plain = run_ok("status")
    assert plain.code == 1 and f"problem: {copy_rel}: duplicate id" in plain.out
    # the copy with a fresh id is an ordinary new note
    p = kf / copy_rel
    p.write_text(p.read_text().replace("m-20260105-abcd", "m-20260105-wxyz"))
    r = run_ok("sync", "--json")
    assert r.code == 0, r.err
    assert r.json()["notes_added"] == ["m-20260105-wxyz"] and r.json()["problems"] == []


def test_without_an_index_the_oldest_note_keeps_the_id(kf: Path) -> None:
    # never indexed: the older ts wins, whatever the paths
    _write(
        kf,
        "memories/by_date/2026-01/05/m-20260105-abcd.md",
        ORIGINAL.replace("2026-01-05T10:00:00Z", "2026-01-07T10:00:00Z"),
    )
    older = "memories/by_date/2026-01/06/zz-older.md"
    _write(kf, older, ORIGINAL.replace("Herons nest", "Older herons nest"))
    listed = run_ok("mem", "list", "--json").json()
    assert [n["path"] for n in listed] == [older]
    r = run_ok("index", "--rebuild", "--json")
    assert r.code == 3
    assert r.json()["notes_added"] == ["m-20260105-abcd"]
    assert run_ok("mem", "show", "m-20260105-abcd", "--json").code == 0
    hits = run_ok("search", "herons", "--in", "mem", "--json").json()
    assert [h["path"] for h in hits] == [older]


def test_a_yaml_typo_keeps_the_last_indexed_note_and_is_reported(kf: Path) -> None:
    rel = "memories/by_date/2026-01/05/m-20260105-abcd.md"
    p = _write(kf, rel, ORIGINAL)
    assert run_ok("sync").code == 0
    p.write_text(
        ORIGINAL.replace("tags: [birds]", "tags: [birds, unclosed").replace("Herons", "Grey herons")
    )
    r = run_ok("sync")
    assert r.code == 3
    assert "removed" not in r.out and "1 unreadable" in r.out
    assert f"warning: {rel}: " in r.err and "broken YAML frontmatter" in r.err
    assert "its last indexed version (m-20260105-abcd) stays searchable" in r.err
    assert _search_ids("herons alder") == ["m-20260105-abcd"]
    st = run_ok("status", "--json")
    assert st.code == 1
    d = st.json()
    assert d["unreadable"] == [rel] and d["stale"] == {}
    [prob] = d["problems"]
    assert prob["kind"] == "unreadable" and prob["kept"] == "m-20260105-abcd"
    assert "broken YAML frontmatter" in prob["problem"]
    plain = run_ok("status")
    assert plain.code == 1 and "in sync; 1 unreadable" in plain.out
    assert f"problem: {rel}: " in plain.out and "broken YAML" in plain.out
    assert plain.err.startswith("Error: 1 file not indexed as written")
    # fixed: the edit is picked up and everything is clean again
    p.write_text(ORIGINAL.replace("Herons", "Grey herons"))
    r = run_ok("sync", "--json")
    assert r.code == 0 and r.json()["notes_updated"] == ["m-20260105-abcd"]
    st = run_ok("status", "--json")
    assert st.code == 0 and st.json()["problems"] == [] and st.json()["unreadable"] == []


def test_an_invalid_utf8_doc_keeps_its_indexed_version(kf: Path, tmp_path: Path) -> None:
    src = tmp_path / "tides.md"
    src.write_text("# Tides\n\nThe harbour floods at the spring tide.\n")
    r = run_ok("store", "ingest", str(src), "--json")
    assert r.code == 0, r.err
    added = r.json()["added"][0]
    norm = kf / added["path"]
    norm.write_bytes(norm.read_bytes().replace(b"floods", b"fl\xffods"))
    r = run_ok("sync", "--json")
    assert r.code == 3
    rep = r.json()
    assert rep["docs_removed"] == [] and rep["unreadable"] == [added["path"]]
    assert rep["problems"][0]["kept"] == added["id"]
    assert "not valid UTF-8" in rep["problems"][0]["problem"]
    hits = run_ok("search", "harbour spring tide", "--in", "store", "--json").json()
    assert hits and {h["id"].split("#")[0] for h in hits} == {added["id"]}
    docs = run_ok("store", "list", "--json").json()
    assert [d["id"] for d in docs] == [added["id"]]
    st = run_ok("status", "--json")
    assert st.code == 1 and st.json()["unreadable"] == [added["path"]]
