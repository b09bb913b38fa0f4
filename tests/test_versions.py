"""One source, one lineage: a new version of a stored source supersedes the old one, however
the source is named, and storing an older version never rewrites the history."""

from __future__ import annotations

from pathlib import Path

from helpers.run import run_ok


def _current(kf: Path) -> list[dict]:
    r = run_ok("store", "list", "--json")
    assert r.code == 0, r.err
    return r.json()


def _doc_hits(query: str) -> set[str]:
    r = run_ok("search", query, "--in", "store", "--mode", "fts", "--json")
    assert r.code == 0, r.err
    return {h["id"].split("#")[0] for h in r.json()}


def test_one_file_keeps_one_lineage_whatever_path_names_it(kf: Path, tmp_path: Path) -> None:
    d4 = tmp_path / "d4"
    d4.mkdir()
    a = d4 / "a.md"
    a.write_text("# Moorings\n\nVersion zero: ropes of hemp.\n")
    (tmp_path / "link").symlink_to(d4)
    r = run_ok("store", "ingest", "d4", "--json")
    assert r.code == 0, r.err
    ids = [r.json()["added"][0]["id"]]
    path = r.json()["added"][0]["path"]
    forms = ["d4/a.md", str(a), "./d4/../d4/a.md", "link/a.md", "link", "d4"]
    for n, form in enumerate(forms, 1):
        a.write_text(f"# Moorings\n\nVersion {n}: ropes of nylon number {n}.\n")
        r = run_ok("store", "ingest", form, "--json")
        assert r.code == 0, r.err
        [added] = r.json()["added"]
        assert added["supersedes"] == ids[-1], form
        assert added["path"] == path, form
        ids.append(added["id"])
        assert [d["id"] for d in _current(kf)] == [added["id"]], form
    # only the newest text is searchable; the history holds every version, newest first
    assert _doc_hits("ropes") == {ids[-1]}
    hist = run_ok("store", "history", ids[-1], "--json").json()
    assert [h["id"] for h in hist] == ids[::-1]
    lineage = run_ok(
        "graph", "lineage", ids[-1], "--direction", "up", "--depth", "10", "--json"
    ).json()
    assert {e["to"] for e in lineage["edges"] if e["rel"] == "SUPERSEDES"} == set(ids[:-1])
    # the same content again, by yet another name: nothing new
    r = run_ok("store", "ingest", str(a), "--json")
    assert r.json()["added"] == [] and [u["id"] for u in r.json()["unchanged"]] == [ids[-1]]
    st = run_ok("status", "--json")
    assert st.code == 0 and st.json()["in_sync"] is True


def test_a_disambiguated_source_keeps_its_own_lineage(kf: Path, tmp_path: Path) -> None:
    d5 = tmp_path / "d5"
    d5.mkdir()
    (d5 / "a.md").write_text("# Anchors\n\nAnchors hold the boat.\n")
    (d5 / "a.txt").write_text("Chains rust in salt water.\n")
    r = run_ok("store", "ingest", "d5", "--json")
    assert r.code == 0, r.err
    txt = next(x for x in r.json()["added"] if x["origin"].endswith("a.txt"))
    (d5 / "a.txt").write_text("Chains rust in salt water unless galvanized.\n")
    r = run_ok("store", "ingest", "d5/a.txt", "--json")
    [added] = r.json()["added"]
    assert added["supersedes"] == txt["id"] and added["path"] == txt["path"]
    assert len(_current(kf)) == 2
