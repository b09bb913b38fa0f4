"""Files that a `git pull`, a careless edit or a hostile hand put into a folder: ids that
would name a file elsewhere, symlinks out of the folder, the folder ingested into itself,
notes that supersede each other, an expired note restored.

Each is reported and skipped (sync, status, doctor) or refused (a request), and nothing
outside the folder is read, written or deleted, nothing inside it lost.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.run import run_ok

NOTE = "---\nid: {id}\nts: {ts}\n{more}---\n{body}\n"


def _note(
    kf: Path, rel: str, nid: str, body: str, ts: str = "2026-01-05T10:00:00Z", more: str = ""
) -> Path:
    p = kf / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(NOTE.format(id=nid, ts=ts, more=more, body=body))
    return p


def _tree(top: Path, but: Path | None = None) -> dict[str, bytes]:
    """Every file under `top` but those under `but` (symlinks as their target's name), to
    see that nothing outside a folder changed."""
    out: dict[str, bytes] = {}
    for p in sorted(top.rglob("*")):
        if but is not None and (p == but or but in p.parents):
            continue
        if p.is_symlink():
            out[str(p.relative_to(top))] = str(p.readlink()).encode()
        elif p.is_file():
            out[str(p.relative_to(top))] = p.read_bytes()
    return out


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1 and "(hint: " in lines[0], err
    return lines[0]


def _search_ids(query: str, *more: str) -> list[str]:
    r = run_ok("search", query, "--mode", "fts", "--json", "--min-score", "0", *more)
    assert r.code in (0, 1) and (r.code == 1) == (r.json() == []), r.err  # 1: nothing found
    return [h["id"] for h in r.json()]


# -- ids that would name a file elsewhere ----------------------------------------------------
CLIMB = "m-20250101-abcd/../../../../outside/x"


def test_restore_refuses_an_archived_note_whose_id_climbs_out(kf: Path, tmp_path: Path) -> None:
    archived = _note(
        kf,
        "memories/archive/2025-01/01/m-20250101-abcd.md",
        CLIMB,
        "A note whose id leads out of the folder.",
        ts="2025-01-01T00:00:00Z",
        more="archived: 2025-02-01T00:00:00Z\narchived_reason: expired\n",
    )
    before = _tree(tmp_path, kf)
    r = run_ok("mem", "restore", "m-20250101")
    assert r.code == 2, r.out
    line = _one_error_line(r.err)
    assert "is not a valid note id" in line and "memories/archive/" in line, line
    # nothing written outside, and the archived copy is still there
    assert _tree(tmp_path, kf) == before
    assert archived.is_file()


def test_a_note_whose_id_names_no_file_of_its_own_is_reported_and_skipped(kf: Path) -> None:
    good = _note(
        kf,
        "memories/by_date/2026-01/05/m-20260105-good.md",
        "m-20260105-good",
        "Herons nest by the weir.",
    )
    bad = _note(
        kf,
        "memories/by_date/2026-01/05/m-20260105-bad1.md",
        "../../../escape",
        "Bitterns boom in the reeds.",
    )
    r = run_ok("sync", "--json")
    assert r.code == 3, r.err
    rep = r.json()
    assert rep["notes_added"] == ["m-20260105-good"]
    [p] = rep["problems"]
    assert (
        p["path"] == "memories/by_date/2026-01/05/m-20260105-bad1.md" and p["kind"] == "unreadable"
    )
    assert "is not a valid note id" in p["problem"], p
    st = run_ok("status", "--json")
    assert st.code == 1 and [x["path"] for x in st.json()["problems"]] == [p["path"]]
    assert _search_ids("herons weir bitterns reeds", "--in", "mem") == ["m-20260105-good"]
    assert good.is_file() and bad.is_file()
    listed = run_ok("mem", "list", "--json")
    assert [n["id"] for n in listed.json()] == ["m-20260105-good"]
    assert "m-20260105-bad1.md: " in listed.err and "not a valid note id" in listed.err


def test_a_cite_object_whose_id_climbs_out_is_refused(example_kf: Path, tmp_path: Path) -> None:
    r = run_ok(
        "cite",
        "make",
        "store/normalized/docs/write-ahead-logging.ok.md",
        "--lines",
        "3-4",
        "--json",
    )
    assert r.code == 0, r.err
    [cite] = r.json()
    before = _tree(tmp_path, example_kf / ".ok")
    for bad in ("../../../evil", "c-0123/../../x", "c-0123456789abcdef\n"):
        obj = {**cite, "id": bad}
        for args in (["cite", "make", "-", "--persist"], ["cite", "make", "-"]):
            r = run_ok(*args, input=json.dumps(obj))
            assert r.code == 2, (bad, args, r.out)
            assert "is not a valid citation id" in _one_error_line(r.err)
    assert _tree(tmp_path, example_kf / ".ok") == before
    # where the first would have gone, persisted and remembered
    assert not (tmp_path.parent / "evil.json").exists() and not (example_kf / "evil.json").exists()


def test_a_citation_file_holding_another_id_is_reported_and_gc_removes_nothing_else(
    example_kf: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text("{}\n")
    r = run_ok(
        "cite",
        "make",
        "store/normalized/docs/write-ahead-logging.ok.md",
        "--lines",
        "3-4",
        "--persist",
        "--json",
    )
    assert r.code == 0, r.err
    [cite] = r.json()
    kept = example_kf / "citations" / f"{cite['id']}.json"
    data = json.loads(kept.read_text())
    # a copy under another name whose id points at a file outside: an ephemeral citation
    # whose document is gone would be removed by gc, by its id
    data |= {
        "id": "../../victim",
        "retention_class": "ephemeral",
        "doc_id": "0" * 16,
        "sha256": "0" * 64,
    }
    odd = example_kf / "citations" / "c-00000000000000aa.json"
    odd.write_text(json.dumps(data))
    r = run_ok("cite", "list", "--json")
    assert r.code in (0, 1), r.err
    assert odd.name in r.err or odd.name in r.out, (r.out, r.err)
    r = run_ok("cite", "gc", "--json")
    assert victim.is_file() and odd.is_file() and kept.is_file(), r.out + r.err


def test_backfeed_ids_from_files_and_requests_never_name_a_file_out(
    kf: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "c2.json"
    outside.write_text(
        json.dumps(
            {"id": "bf-0000000000aa", "status": "pending", "entities": [], "relationships": []}
        )
    )
    d = kf / "aks" / "backfeed"
    d.mkdir(parents=True)
    item = {
        "id": "../../../fy-bf",
        "status": "pending",
        "entities": [{"name": "Heron", "type": "animal"}],
        "relationships": [],
        "content": "",
        "origin": "direct",
    }
    (d / "bf-000000000000.json").write_text(json.dumps(item))
    before = _tree(tmp_path, kf / ".ok")
    r = run_ok("backfeed", "reject", "bf-000000000000", "--reason", "no")
    assert r.code == 2 and "no backfeed item" in _one_error_line(r.err), r.out
    r = run_ok("backfeed", "show", "../../../c2")
    assert r.code == 2 and "no backfeed item" in _one_error_line(r.err), r.out
    assert _tree(tmp_path, kf / ".ok") == before
    r = run_ok("sync", "--json")
    assert r.code == 3
    [p] = r.json()["problems"]
    assert (
        p["path"] == "aks/backfeed/bf-000000000000.json" and "not bf-000000000000" in p["problem"]
    )


def test_mapping_lines_whose_paths_lead_out_are_reported_kept_and_never_followed(
    example_kf: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.ok.md"
    secret.write_text("# Secret\n\nThe launch codes are 0000.\n")
    source = tmp_path / "source.md"
    source.write_text("the original\n")
    bad = [
        {"id": "ab" * 8, "path": "../secret.ok.md", "current": True},
        {"id": "cd" * 8, "path": "store/normalized/docs/x.ok.md", "current": True,
         "source": {"path": "store/sources/../../source.md"}},
        {"id": "../../x", "path": "store/normalized/docs/y.ok.md", "current": True},
    ]  # fmt: skip
    mapping = example_kf / ".ok" / "mapping.jsonl"
    with mapping.open("a") as fh:
        for e in bad:
            fh.write(json.dumps(e) + "\n")
    before = _tree(tmp_path, example_kf)
    for ref in ("ab" * 8, "cd" * 8):
        for args in (["store", "show", ref], ["store", "remove", ref]):
            r = run_ok(*args)
            assert r.code == 2 and "no document matches" in _one_error_line(r.err), (args, r.out)
    r = run_ok("sync", "--json")
    assert r.code == 3, r.err
    problems = [p for p in r.json()["problems"] if p["path"] == ".ok/mapping.jsonl"]
    assert len(problems) == 3 and all("left out and kept" in p["problem"] for p in problems)
    assert "is not a path inside the folder" in problems[0]["problem"]
    # the lines stay as written, for the user to fix; nothing outside was touched
    lines = mapping.read_text().splitlines()
    assert all(json.dumps(e) in lines for e in bad)
    assert _tree(tmp_path, example_kf) == before
    assert "launch codes" not in run_ok("search", "launch codes", "--json").out
    assert run_ok("status", "--json").code == 1


# -- symlinks out of the folder -----------------------------------------------------------------
SECRET = "The launch codes are 0000."


def test_symlinks_out_of_the_folder_are_reported_and_skipped_wherever_it_is_walked(
    example_kf: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "s.ok.md").write_text(f"# Secret\n\n{SECRET}\n")
    (out / "n.md").write_text(f"---\nid: m-20260105-lnko\n---\n{SECRET}\n")
    (out / "c.json").write_text("{}")
    (out / "e.jsonl").write_text(
        json.dumps({"ts": "2026-01-01T00:00:00Z", "type": "mem_added", "note": "x"}) + "\n"
    )
    root = example_kf
    links = {
        "store/normalized/s.ok.md": out / "s.ok.md",
        "memories/by_date/2026-01/05/n.md": out / "n.md",
        "memories/by_date/2026-02": out,
        "citations/c-00000000000000ab.json": out / "c.json",
        "events/2026-01.jsonl": out / "e.jsonl",
        "aks/backfeed/bf-0000000000ab.json": out / "c.json",
        "triggers/t.yml": out / "c.json",
    }
    for rel, target in links.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).symlink_to(target)
    walked = {
        "store/normalized/s.ok.md",
        "memories/by_date/2026-01/05/n.md",
        "memories/by_date/2026-02",
    }
    before = _tree(out)
    r = run_ok("sync", "--json")
    assert r.code == 3 and "unexpected" not in r.err, r.err
    probs = {p["path"]: p for p in r.json()["problems"]}
    assert walked | {"aks/backfeed/bf-0000000000ab.json"} <= set(probs), probs
    for rel in walked:
        assert "leads out of the knowledge folder" in probs[rel]["problem"], probs[rel]
    st = run_ok("status", "--json")
    assert st.code == 1 and "unexpected" not in st.err, st.err
    assert walked <= {p["path"] for p in st.json()["problems"]}
    r = run_ok("mem", "list", "--json")
    assert r.code == 0 and "unexpected" not in r.err, r.err
    assert "memories/by_date/2026-01/05/n.md: a symlink that leads out" in r.err
    r = run_ok("cite", "list", "--json")
    assert "unexpected" not in r.err, r.err
    r = run_ok("events", "--json")
    assert r.code == 0 and "unexpected" not in r.err, r.err
    assert all(e.get("note") != "x" for e in r.json())
    r = run_ok("trigger", "list", "--json")
    assert "unexpected" not in r.err, r.err
    checks = {c["detail"] for c in run_ok("doctor", "--json").json() if c["check"] == "file"}
    assert any(d.startswith("store/normalized/s.ok.md: a symlink") for d in checks), checks
    assert _search_ids("launch codes") == []
    assert _tree(out) == before


def test_logs_that_are_symlinks_out_of_the_folder_are_never_written_through(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OK_NOW", "2026-03-01T09:00:00Z")
    victim = tmp_path / "bashrc"
    victim.write_text("export PATH=/usr/bin\n")
    (kf / "events").mkdir(exist_ok=True)
    (kf / "events" / "2026-03.jsonl").symlink_to(victim)
    r = run_ok("mem", "add", "Avocets sweep the mud for shrimp.")
    assert r.code == 2 and "leads out of the knowledge folder" in _one_error_line(r.err)
    (kf / "events" / "2026-03.jsonl").unlink()
    mapping = kf / ".ok" / "mapping.jsonl"
    mapping.unlink()
    mapping.symlink_to(victim)
    doc = tmp_path / "doc.md"
    doc.write_text("# Doc\n\nA document.\n")
    r = run_ok("store", "ingest", str(doc))
    assert r.code == 2 and "leads out of the knowledge folder" in _one_error_line(r.err)
    assert victim.read_text() == "export PATH=/usr/bin\n"


# -- the folder ingested into itself ---------------------------------------------------------------
def _graph(root: Path) -> dict[str, Any]:
    """What the derived graph holds, to compare a live graph with a rebuild."""
    out: dict[str, Any] = {}
    for name, cypher in {
        "docs": "MATCH (d:Doc) RETURN d.id AS id, d.current AS c, d.path AS p ORDER BY id",
        "chunks": "MATCH (c:Chunk) RETURN c.id AS id, c.current AS c ORDER BY id",
        "notes": "MATCH (m:MemoryNote) RETURN m.id AS id ORDER BY id",
        "versions": "MATCH (a:Doc)-[:SUPERSEDES]->(b:Doc) RETURN a.id AS x, b.id AS y ORDER BY x, y",
    }.items():
        r = run_ok("--root", str(root), "graph", "cypher", cypher, "--json")
        assert r.code == 0, r.err
        out[name] = r.json()
    return out


def _rebuilt(root: Path, where: Path) -> dict[str, Any]:
    shutil.copytree(root, where, symlinks=True)
    for d in (where / ".ok").glob("kuzu*"):
        shutil.rmtree(d)
    r = run_ok("--root", str(where), "index", "--rebuild")
    assert r.code == 0, r.err
    return _graph(where)


def test_ingesting_the_folder_itself_skips_its_own_files(example_kf: Path, tmp_path: Path) -> None:
    root = example_kf
    assert run_ok("mem", "add", "Kelp forests shelter sea otters.").code == 0
    # nothing but the folder's own files: refused with one clear line
    r = run_ok("store", "ingest", ".", cwd=root)
    assert r.code == 2 and "nothing but the folder's own files" in _one_error_line(r.err)
    # a directory of the user's own beside them is a source
    (root / "mine").mkdir()
    (root / "mine" / "tides.md").write_text("# Tides\n\nSpring tides follow the full moon.\n")
    for _ in range(2):  # the second time, the first one's events and copies are there too
        r = run_ok("store", "ingest", ".", "--json", cwd=root)
        assert r.code == 0, r.err  # the folder's own directories are skipped, and said so
        rep = r.json()
        added = [a["path"] for a in rep["added"]]
        assert added in ([], ["store/normalized/example/mine/tides.ok.md"]), added
        reasons = {Path(s["path"]).name: s["reason"] for s in rep["skipped"]}
        for d in ("memories", "citations", "events", "sources", "normalized"):
            assert "never a source" in reasons[d], reasons
    made = {
        p.relative_to(root).as_posix() for p in (root / "store/normalized/example").rglob("*.md")
    }
    assert made == {"store/normalized/example/mine/tides.ok.md"}, made
    st = run_ok("status", "--json")
    assert st.code == 0 and st.json()["in_sync"], st.out
    doctor = {c["check"]: c for c in run_ok("doctor", "--json").json()}
    assert doctor["index"]["ok"], doctor["index"]
    assert _graph(root) == _rebuilt(root, tmp_path / "rebuilt")


def test_two_texts_of_one_document_in_one_ingest_keep_the_first(kf: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nThe first text.\n")
    assert run_ok("store", "ingest", str(src)).code == 0
    (src / "a.md").write_text("# A\n\nThe second text.\n")
    # the original as it is now, and the folder's copy of it as it was
    r = run_ok("store", "ingest", str(src / "a.md"), str(kf / "store/sources/src/a.md"), "--json")
    assert r.code == 0, r.err
    rep = r.json()
    assert len(rep["added"]) == 1 and "second text" in (kf / rep["added"][0]["path"]).read_text()
    [skip] = rep["skipped"]
    assert "another text of the same document" in skip["reason"], skip
    assert run_ok("status", "--json").json()["in_sync"]
    assert _graph(kf) == _rebuilt(kf, tmp_path / "rebuilt")


# -- notes that supersede each other ---------------------------------------------------------------
def test_a_supersede_cycle_is_reported_and_the_newer_note_stays_visible(kf: Path) -> None:
    older = _note(kf, "memories/by_date/2026-01/05/m-20260105-oldr.md", "m-20260105-oldr",
                  "Deploys go out on Tuesdays.", ts="2026-01-05T10:00:00Z")  # fmt: skip
    _note(kf, "memories/by_date/2026-01/06/m-20260106-newr.md", "m-20260106-newr",
          "Deploys go out on Wednesdays.", ts="2026-01-06T10:00:00Z",
          more="supersedes: [m-20260105-oldr]\n")  # fmt: skip
    assert run_ok("sync").code == 0
    assert _search_ids("deploys", "--in", "mem") == ["m-20260106-newr"]
    # a hand edit makes the older one supersede the newer
    older.write_text(older.read_text().replace("ts:", "supersedes: [m-20260106-newr]\nts:"))
    r = run_ok("sync", "--json")
    assert r.code == 3, r.err
    [p] = r.json()["problems"]
    assert (
        p["kind"] == "supersede_cycle"
        and p["path"] == "memories/by_date/2026-01/05/m-20260105-oldr.md"
    )
    assert "m-20260105-oldr -> m-20260106-newr -> m-20260105-oldr" in p["problem"], p
    assert "closes a cycle" in r.err
    assert _search_ids("deploys", "--in", "mem") == ["m-20260106-newr"]
    assert set(_search_ids("deploys", "--in", "mem", "--include-superseded")) == {
        "m-20260105-oldr",
        "m-20260106-newr",
    }
    st = run_ok("status")
    assert st.code == 1 and "closes a cycle" in st.out
    checks = [c for c in run_ok("doctor", "--json").json() if c["check"] == "file"]
    assert any("closes a cycle" in c["detail"] for c in checks), checks
    assert run_ok("index", "--rebuild").code == 3  # the same report, the same answer
    assert _search_ids("deploys", "--in", "mem") == ["m-20260106-newr"]


@pytest.mark.postgres
def test_both_backends_keep_the_newest_note_of_a_supersede_cycle(kf: Path, pg_uri: str) -> None:
    from openkl.files.folder import Folder
    from openkl.graph.indexing import embedder, open_graph
    from openkl.graph.postgres import PgGraph

    for n, other in ((5, 6), (6, 5)):
        _note(kf, f"memories/by_date/2026-01/0{n}/m-2026010{n}-cyc{n}.md", f"m-2026010{n}-cyc{n}",
              f"Note {n} of a cycle.", ts=f"2026-01-0{n}T10:00:00Z",
              more=f"supersedes: [m-2026010{other}-cyc{other}]\n")  # fmt: skip
    _note(kf, "memories/by_date/2026-01/07/m-20260107-cyc7.md", "m-20260107-cyc7", "Note 7.",
          ts="2026-01-07T10:00:00Z", more="supersedes: [m-20260105-cyc5]\n")  # fmt: skip
    assert run_ok("sync").code == 3  # the cycle is reported
    r = run_ok("index", "--backend", pg_uri)
    assert r.code == 3 and "closes a cycle" in r.err, r.err  # reported there too, and published
    assert "3 notes" in r.out, r.out
    f = Folder(kf)
    with open_graph(f) as g:
        kuzu = g.hidden_notes("2026-02-01T00:00:00Z")
    with PgGraph.open(
        pg_uri, stack=kf.name, write=False, embedder_identity=embedder(f).identity
    ) as pg:
        postgres = pg.as_store().hidden_notes("2026-02-01T00:00:00Z")
    assert kuzu == postgres == {"m-20260105-cyc5"}


# -- an expired note restored -------------------------------------------------------------------
def _at(now: str, *args: str, input: str | None = None) -> Any:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OK_NOW", now)
        return run_ok(*args, input=input)


def test_restoring_an_expired_note_clears_its_expiry_or_sets_a_new_one(kf: Path) -> None:
    r = _at(
        "2026-03-01T09:00:00Z",
        "mem",
        "add",
        "The VPN password rotates on Fridays.",
        "--ttl",
        "2d",
        "--json",
    )
    nid = r.json()["id"]
    later = "2026-03-05T00:00:00Z"
    assert _at(later, "mem", "gc").code == 0
    r = _at(later, "mem", "restore", nid, "--json")
    assert r.code == 0, r.err
    back = r.json()
    assert back["expiry"] == {"action": "cleared", "was": "2026-03-03T09:00:00Z", "expires": None}
    assert "expires" not in back and "its expiry is cleared" in r.err, r.err
    assert nid in [
        h["id"] for h in _at(later, "search", "VPN password", "--mode", "fts", "--json").json()
    ]
    assert _at(later, "mem", "gc", "--json").json()["archived"] == []
    # archived once more (by hand, as it was), and restored with a new lease of life
    path = next(kf.glob(f"memories/by_date/*/*/{nid}.md"))
    path.write_text(path.read_text().replace("ts:", "expires: 2026-03-03T09:00:00Z\nts:"))
    assert _at(later, "sync").code == 0 and _at(later, "mem", "gc").code == 0
    r = _at(later, "mem", "restore", nid, "--ttl", "7d", "--json")
    assert r.code == 0, r.err
    assert r.json()["expiry"] == {
        "action": "set",
        "was": "2026-03-03T09:00:00Z",
        "expires": "2026-03-12T00:00:00Z",
    }
    assert r.json()["expires"] == "2026-03-12T00:00:00Z" and "--ttl 7d" in r.err
    assert nid in [
        h["id"] for h in _at(later, "search", "VPN password", "--mode", "fts", "--json").json()
    ]
    r = _at(later, "mem", "restore", "m-20260301", "--ttl", "soon")
    assert r.code == 2 and "--ttl" in _one_error_line(r.err)
