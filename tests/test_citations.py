"""Citations: make, verify (every status, with real file edits), open, list, gc, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.run import run_cli, run_ok

DOC = """# Tidal power

Tidal power converts the energy of the tides into electricity.

The Rance station in Brittany opened in 1966 and was for decades the largest tidal plant in
the world, with a capacity of 240 megawatts.

Barrages hold water behind a dam at high tide and release it through turbines as the tide
falls, so output follows the lunar cycle rather than the weather.
"""
QUOTE = "The Rance station in Brittany opened in 1966"
OTHER = """# Glaciers

Glaciers carve U-shaped valleys. Moraines mark where the ice stood longest.
"""


@pytest.fixture(scope="session")
def _tidal_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("tidal")
    src = base / "src"
    src.mkdir()
    (src / "tidal.md").write_text(DOC)
    (src / "glaciers.md").write_text(OTHER)
    assert run_ok("init", str(base / "kf")).code == 0
    r = run_ok("--root", str(base / "kf"), "store", "ingest", str(src))
    assert r.code == 0, r.err
    return base


@pytest.fixture
def tidal(_tidal_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A folder holding two ingested docs (tidal, glaciers), copied from a template."""
    base = tmp_path / "tidal"
    shutil.copytree(_tidal_template, base, symlinks=True)
    root = base / "kf"
    monkeypatch.setenv("OK_ROOT", str(root))
    [entry] = [
        e
        for e in map(json.loads, (root / ".ok/mapping.jsonl").read_text().splitlines())
        if e["path"].endswith("/tidal.ok.md")
    ]
    return {
        "root": root,
        "src": base / "src",
        "doc": root / entry["path"],
        "rel": entry["path"],
        "id": entry["id"],
    }


def _cite_quote(t: dict, quote: str = QUOTE, persist: bool = True) -> dict:
    text = t["doc"].read_text()
    s = text.index(quote)
    args = ["cite", "make", f"{t['id']}#char{s}-{s + len(quote)}", "--json"]
    r = run_ok(*args, *(["--persist"] if persist else []))
    assert r.code == 0, r.err
    [cite] = r.json()
    return cite


def _verify(*args: str, input: str | None = None) -> tuple[int, list[dict]]:
    r = run_ok("cite", "verify", *args, "--json", input=input)
    assert r.out, r.err
    return r.code, r.json()


def _state(root: Path) -> dict[str, bytes]:
    """Every file under the folder except the derived graph, for nothing-written checks."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".ok/kuzu" not in p.as_posix() and p.name != "lock":
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


# -- making -----------------------------------------------------------------------------------
def test_make_from_search_hit_is_deterministic(example_kf: Path) -> None:
    hits = run_ok("search", "who wrote the first computer program", "--json", "-k", "1").json()
    hit = hits[0]
    r = run_ok("cite", "make", hit["id"], "--json")
    assert r.code == 0, r.err
    [c] = r.json()
    assert c["id"].startswith("c-") and len(c["id"]) == 18
    assert c["type"] == "chunk" and c["ref"] == hit["id"]
    assert (
        c["doc_id"],
        c["path"],
        c["sha256"],
        c["loc"],
        c["quote"],
        c["context"],
        c["source"],
    ) == (
        hit["doc_id"],
        hit["path"],
        hit["sha256"],
        hit["loc"],
        hit["quote"],
        hit["context"],
        hit["source"],
    )
    assert run_ok("cite", "make", hit["id"], "--json").json()[0]["id"] == c["id"]
    # transient: printed and cached, not persisted; open finds it through the cache
    assert not list((example_kf / "citations").glob("*.json"))
    r = run_ok("cite", "open", c["id"])
    assert r.code == 0, r.err
    assert ">>> " + hit["quote"] + " <<<" in r.out


def test_make_from_lines_chars_and_memory(tidal: dict) -> None:
    r = run_ok("cite", "make", tidal["rel"], "--lines", "5-6", "--json")
    assert r.code == 0, r.err
    [c] = r.json()
    lines = tidal["doc"].read_text().splitlines()
    assert c["quote"] == "\n".join(lines[4:6])
    assert (
        c["type"] == "chunk"
        and c["ref"] == f"{tidal['id']}#char{c['loc']['start']}-{c['loc']['end']}"
    )
    r = run_ok("cite", "make", tidal["rel"], "--chars", "2-13", "--json")
    assert r.json()[0]["quote"] == "Tidal power"
    r = run_ok("cite", "make", tidal["id"], "--json")
    whole = r.json()[0]
    assert whole["type"] == "doc" and whole["quote"] == tidal["doc"].read_text().strip()
    nid = run_ok("mem", "add", "Check the Rance barrage numbers before the talk.").out.strip()
    r = run_ok("cite", "make", nid, "--json")
    assert r.code == 0, r.err
    [m] = r.json()
    assert m["type"] == "memory" and m["doc_id"] == nid
    assert m["quote"] == "Check the Rance barrage numbers before the talk."
    note = (tidal["root"] / m["path"]).read_text()
    assert note[m["loc"]["start"] : m["loc"]["end"]] == m["quote"]


# -- every status, with real edits -----------------------------------------------------------
def test_untouched_is_verified(tidal: dict) -> None:
    c = _cite_quote(tidal)
    code, [res] = _verify(c["id"])
    assert code == 0
    assert res["status"] == "verified" and res["changes"] == [] and res["similarity"] == 1.0
    assert res["found"]["loc"] == c["loc"]
    # a cite-object file works as well as an id; so does a JSON-lines file of them
    code, [res] = _verify(str(tidal["root"] / "citations" / f"{c['id']}.json"))
    assert code == 0 and res["status"] == "verified" and res["persisted"]
    lines = tidal["root"].parent / "cites.jsonl"
    lines.write_text(json.dumps(c) + "\n" + json.dumps(c) + "\n")
    code, results = _verify(str(lines))
    assert code == 0 and [x["status"] for x in results] == ["verified", "verified"]


def test_text_inserted_before_is_moved_with_exact_span(tidal: dict) -> None:
    c = _cite_quote(tidal)
    doc = tidal["doc"]
    doc.write_text(
        doc.read_text().replace(
            "# Tidal power\n", "# Tidal power\n\nA new lead paragraph, written later.\n", 1
        )
    )
    code, [res] = _verify(c["id"])
    assert code == 0
    assert res["status"] == "moved" and "span" in res["changes"]
    s, e = res["found"]["loc"]["start"], res["found"]["loc"]["end"]
    assert doc.read_text()[s:e] == QUOTE and s > c["loc"]["start"]


def test_renamed_file_is_moved(tidal: dict) -> None:
    c = _cite_quote(tidal)
    new = tidal["doc"].with_name("rance.ok.md")
    tidal["doc"].rename(new)
    code, [res] = _verify(c["id"])  # before `ok sync`: found by content hash
    assert code == 0 and res["status"] == "moved" and res["changes"] == ["path"]
    assert res["found"]["path"].endswith("rance.ok.md")
    assert run_ok("sync").code == 0
    code, [res] = _verify(c["id"])  # after: the mapping knows the new path
    assert code == 0 and res["status"] == "moved" and res["found"]["doc_id"] == tidal["id"]


def test_lightly_edited_paragraph_is_changed(tidal: dict) -> None:
    c = _cite_quote(
        tidal,
        "The Rance station in Brittany opened in 1966 and was for decades "
        "the largest tidal plant in\nthe world",
    )
    doc = tidal["doc"]
    doc.write_text(
        doc.read_text()
        .replace("opened in 1966", "was opened in 1966")
        .replace("largest tidal plant", "biggest tidal plant")
    )
    code, [res] = _verify(c["id"])
    assert code == 1
    assert res["status"] == "changed"
    assert 0.8 < res["similarity"] < 1.0
    s, e = res["found"]["loc"]["start"], res["found"]["loc"]["end"]
    assert doc.read_text()[s:e] == res["found"]["quote"]
    assert res["found"]["quote"].startswith("The Rance station in Brittany was opened")
    assert res["found"]["quote"].endswith("the world")
    assert any("'largest' -> 'biggest'" in d for d in res["diagnostics"])


def test_deleted_quote_is_missing(tidal: dict) -> None:
    c = _cite_quote(tidal)
    doc = tidal["doc"]
    text = doc.read_text()
    start = text.index("The Rance")
    end = text.index("Barrages")
    doc.write_text(text[:start] + text[end:])
    code, [res] = _verify(c["id"])
    assert code == 1
    assert res["status"] == "missing" and res["reason"] == "quote_gone"
    assert res["found"] is None


def test_deleted_document_is_missing_and_orphaned(tidal: dict) -> None:
    c = _cite_quote(tidal)
    assert run_ok("store", "remove", tidal["id"]).code == 0
    code, [res] = _verify(c["id"])
    assert code == 1 and res["status"] == "missing" and res["reason"] == "document_gone"
    r = run_ok("cite", "gc", "--dry-run", "--json")
    assert r.json()["orphaned"] == [c["id"]]
    assert (tidal["root"] / "citations" / f"{c['id']}.json").exists()
    r = run_ok("cite", "gc", "--json")
    assert r.json()["orphaned"] == [c["id"]]
    assert not (tidal["root"] / "citations" / f"{c['id']}.json").exists()


def test_reingested_new_version_follows_supersedes(tidal: dict) -> None:
    kept = _cite_quote(tidal)
    edited = _cite_quote(tidal, "with a capacity of 240 megawatts")
    src = tidal["src"] / "tidal.md"
    src.write_text(
        DOC.replace("# Tidal power\n", "# Tidal power\n\nRevised edition.\n").replace(
            "240 megawatts", "240 MW"
        )
    )
    r = run_ok("store", "ingest", str(tidal["src"]), "--json")
    assert r.code == 0, r.err
    new_id = r.json()["added"][0]["id"]
    assert r.json()["added"][0]["supersedes"] == tidal["id"]
    code, results = _verify(kept["id"], edited["id"])
    assert code == 1
    moved, changed = results
    assert moved["status"] == "moved" and "version" in moved["changes"]
    assert moved["found"]["doc_id"] == new_id
    assert any(f"superseded by {new_id}" in d for d in moved["diagnostics"])
    assert changed["status"] == "changed" and changed["found"]["doc_id"] == new_id
    assert changed["found"]["quote"] == "with a capacity of 240 MW"
    # the old text is kept, so the citation says where the exact quote still is
    assert changed["archived"]["path"] == f".ok/versions/{tidal['id']}.ok.md"
    # and the graph links the versions
    q = run_ok(
        "graph",
        "cypher",
        "MATCH (n:Doc)-[:SUPERSEDES]->(o:Doc) RETURN n.id AS n, o.id AS o",
        "--json",
    )
    assert q.code == 0, q.err
    assert {"n": new_id, "o": tidal["id"]} in q.json()


def test_hand_edit_then_sync_records_the_supersede_link(tidal: dict) -> None:
    c = _cite_quote(tidal)
    doc = tidal["doc"]
    doc.write_text("Preface added by hand.\n\n" + doc.read_text())
    r = run_ok("sync", "--json")
    assert r.code == 0, r.err
    entries = {
        json.loads(x)["id"]: json.loads(x)
        for x in (tidal["root"] / ".ok/mapping.jsonl").read_text().splitlines()
    }
    old = entries[tidal["id"]]
    assert old["current"] is False and old["text_kept"] is False
    new_id = old["superseded_by"]
    assert entries[new_id]["supersedes"] == tidal["id"]
    assert entries[new_id]["source"] == {"path": "store/sources/src/tidal.md"}
    assert entries[new_id]["path"] == tidal["rel"]
    code, [res] = _verify(c["id"])
    assert code == 0 and res["status"] == "moved" and res["found"]["doc_id"] == new_id
    assert any(f"superseded by {new_id}" in d for d in res["diagnostics"])
    q = run_ok(
        "graph",
        "cypher",
        "MATCH (n:Doc)-[:SUPERSEDES]->(o:Doc) RETURN n.id AS n, o.id AS o, o.current AS cur",
        "--json",
    )
    assert {"n": new_id, "o": tidal["id"], "cur": False} in q.json()


def test_memory_citation_survives_note_edits(kf: Path) -> None:
    nid = run_ok("mem", "add", "Flock beats pid files. Use it for the writer lock.").out.strip()
    [c] = run_ok("cite", "make", nid, "--json", "--persist").json()
    r = run_ok("mem", "update", nid, "--add-tag", "locking")
    assert r.code == 0, r.err
    code, [res] = _verify(c["id"])
    assert code == 0 and res["status"] == "moved" and "version" in res["changes"]
    r = run_ok("mem", "update", nid, "--text", "Flock beats pid files. Use it for every lock.")
    code, [res] = _verify(c["id"])
    assert code == 1 and res["status"] == "changed" and res["found"]["doc_id"] == nid
    assert run_ok("mem", "delete", nid).code == 0
    code, [res] = _verify(c["id"])
    assert res["status"] == "missing" and res["reason"] == "note_gone"


# -- the pipeline --------------------------------------------------------------------------------
def test_pipeline_search_make_edit_verify_update_open(example_kf: Path) -> None:
    r = run_ok("search", "Kùzu one read-write opener", "--in", "store", "--json", "-k", "3")
    assert r.code == 0, r.err
    ids = "\n".join(h["id"] for h in r.json()) + "\n"  # jq -r '.[].id'
    r = run_ok("cite", "make", "-", "--persist", "--tags", "review", "--json", input=ids)
    assert r.code == 0, r.err
    cites = r.json()
    assert len(cites) == 3 and all(c["tags"] == ["review"] for c in cites)
    files = {c["id"]: example_kf / "citations" / f"{c['id']}.json" for c in cites}
    assert all(p.exists() for p in files.values())
    # edit: insert a paragraph at the top of every cited doc, rename one of them
    for path in {c["path"] for c in cites}:
        p = example_kf / path
        p.write_text("An editor's note, added later.\n\n" + p.read_text())
    renamed = example_kf / cites[0]["path"]
    renamed.rename(renamed.with_name("renamed.ok.md"))
    before = {i: p.read_text() for i, p in files.items()}
    r = run_ok(
        "cite", "verify", "-", "--update", "--json", input="\n".join(json.dumps(c) for c in cites)
    )  # JSON lines in
    assert r.code == 0, r.err
    results = r.json()
    assert [x["status"] for x in results] == ["moved"] * 3
    assert all(x["updated"] for x in results)
    for x in results:
        stored = json.loads(files[x["id"]].read_text())
        assert stored != json.loads(before[x["id"]])
        assert stored["loc"] == x["found"]["loc"] and stored["path"] == x["found"]["path"]
        assert stored["history"][-1]["from"]["loc"] != stored["loc"]
        text = (example_kf / stored["path"]).read_text()
        assert text[stored["loc"]["start"] : stored["loc"]["end"]] == stored["quote"]
    assert json.loads(files[cites[0]["id"]].read_text())["path"].endswith("renamed.ok.md")
    # after the update every citation is plainly verified
    r = run_ok("cite", "verify", "--all", "--json")
    assert r.code == 0 and {x["status"] for x in r.json()} == {"verified"}
    # open, through the real executable, piped: markers around the quote
    first = json.loads(files[cites[1]["id"]].read_text())
    r = run_cli("cite", "open", first["id"], "--context", "0", env={"OK_ROOT": str(example_kf)})
    assert r.code == 0, r.err
    assert ">>> " + first["quote"] + " <<<" in r.out
    assert f"{first['id']}" in r.err and "(verified)" in r.err
    r = run_ok("cite", "open", first["id"], "--json", "--context", "1")
    p = r.json()
    assert p["text"][p["highlight"]["start"] : p["highlight"]["end"]] == first["quote"]
    assert p["lines"]["start"] >= 1 and p["status"] == "verified"


def test_search_hits_pipe_straight_into_verify(example_kf: Path) -> None:
    r = run_ok("search", "gene editing", "--json", "-k", "2")
    code, results = _verify("-", input=r.out)  # a pretty-printed JSON array
    assert code == 0 and {x["status"] for x in results} == {"verified"}
    r = run_ok("cite", "make", "-", "--json", input=r.out)  # hits are cited as they are now
    assert r.code == 0 and all(c["id"].startswith("c-") for c in r.json())


def test_a_cite_object_s_id_never_becomes_a_path(example_kf: Path) -> None:
    hit = run_ok("search", "gene editing", "--json", "-k", "1").json()[0]
    before = sorted(p for p in example_kf.parent.rglob("*") if ".ok" not in p.parts)
    for cid in ("c-../../../escaped", "../escaped", "c-0123456789abcdef/../../x", "/tmp/x"):
        for persist in (["--persist"], []):
            r = run_ok("cite", "make", "-", *persist, input=json.dumps({**hit, "id": cid}))
            assert r.code == 2 and "not a valid citation id" in r.err, (cid, r.out, r.err)
    after = sorted(p for p in example_kf.parent.rglob("*") if ".ok" not in p.parts)
    assert after == before


def test_plain_search_and_verify_output_pipe_in(example_kf: Path) -> None:
    # vector mode: three hits however weak (hybrid leaves out weak vector-only ones)
    q = ("search", "gene editing", "-k", "3", "--mode", "vector")
    plain = run_ok(*q).out  # rank, score, id, path + snippet
    hits = run_ok(*q, "--json").json()
    r = run_ok("cite", "make", "-", "--persist", input=plain)
    assert r.code == 0, r.err
    made = [line.split("\t")[0] for line in r.out.splitlines()]
    assert len(made) == len(hits) == 3
    r = run_ok("cite", "verify", "--all")  # status, id, where + tab-indented diagnostics
    assert r.code == 0
    r = run_ok("cite", "verify", "-", "--json", input=r.out)
    assert r.code == 0, r.err
    assert sorted(x["id"] for x in r.json()) == sorted(made)


# -- list, open, gc --------------------------------------------------------------------------
def test_list_filters_and_status(tidal: dict) -> None:
    a = _cite_quote(tidal)
    run_ok("cite", "make", a["id"], "--persist", "--tags", "energy")
    b = _cite_quote(tidal, "Barrages hold water behind a dam")
    r = run_ok("cite", "list", "--json")
    assert {c["id"] for c in r.json()} == {a["id"], b["id"]}
    r = run_ok("cite", "list", "--tag", "energy", "--json")
    assert [c["id"] for c in r.json()] == [a["id"]]
    other = run_ok(
        "cite", "make", "store/normalized/src/glaciers.ok.md", "--lines", "3", "--persist", "--json"
    ).json()[0]
    r = run_ok("cite", "list", "--doc", tidal["id"][:8], "--json")
    assert {c["id"] for c in r.json()} == {a["id"], b["id"]}
    r = run_ok("cite", "list", "--doc", "glaciers", "--json")
    assert [c["id"] for c in r.json()] == [other["id"]]
    doc = tidal["doc"]
    doc.write_text(doc.read_text().replace("Barrages hold water", "Barrages keep water"))
    r = run_ok("cite", "list", "--status", "changed", "--json")
    assert [c["id"] for c in r.json()] == [b["id"]]
    r = run_ok("cite", "list")
    assert r.out.splitlines()[0].split("\t")[0] in {a["id"], b["id"], other["id"]}
    # plain list output pipes into verify
    r = run_ok("cite", "verify", "-", input=r.out)
    assert r.code == 1 and "changed\t" + b["id"] in r.out


def test_open_missing_shows_the_recorded_quote(tidal: dict) -> None:
    c = _cite_quote(tidal)
    tidal["doc"].write_text(OTHER)
    r = run_ok("cite", "open", c["id"])
    assert r.code == 1
    assert ">>> " + QUOTE + " <<<" in r.out and "missing" in r.err


def test_gc_transient_keep_and_ephemeral(tidal: dict) -> None:
    t = _cite_quote(tidal, "Tidal power converts", persist=False)
    keep = _cite_quote(tidal, "release it through turbines")
    run_ok("cite", "make", keep["id"], "--persist", "--retention-class", "keep")
    r = run_ok(
        "cite",
        "make",
        tidal["rel"],
        "--lines",
        "3",
        "--persist",
        "--retention-class",
        "ephemeral",
        "--json",
    )
    eph = r.json()[0]
    assert eph["retention_class"] == "ephemeral"
    tidal["doc"].write_text(OTHER)  # everything cited is gone from the text
    before = _state(tidal["root"])
    r = run_ok("cite", "gc", "--dry-run", "--json")
    assert r.code == 0, r.err
    rep = r.json()
    assert rep["transient"] == [t["id"]] and rep["expired"] == [eph["id"]]
    assert rep["orphaned"] == [] and rep["kept"] == 1
    assert _state(tidal["root"]) == before
    rep = run_ok("cite", "gc", "--json").json()
    assert not (tidal["root"] / ".ok/cache/citations" / f"{t['id']}.json").exists()
    left = {p.stem for p in (tidal["root"] / "citations").glob("*.json")}
    assert left == {keep["id"]}
    assert run_ok("cite", "open", t["id"]).code == 2


# -- bad input: one line, non-zero exit, nothing written ---------------------------------------------
@pytest.mark.parametrize(
    "args,stdin,needle",
    [
        (("cite", "make", "c-0000000000000000"), None, "no citation with id c-0000000000000000"),
        (
            ("cite", "make", "c-0000"),
            None,
            "no citation with id c-0000 (hint: list citations with `ok cite list`",
        ),
        (("cite", "make", "0123456789abcdef#char0-10"), None, "no document with id"),
        (("cite", "make", "m-20200101-zzzz"), None, "no memory note with id"),
        (("cite", "make", "{doc}#char0-999999"), None, "out of range"),
        (("cite", "make", "{doc}#char50-40"), None, "out of range"),
        (("cite", "make", "{rel}", "--lines", "8-99"), None, "past the end"),
        (("cite", "make", "{rel}", "--chars", "0-99999"), None, "out of range"),
        (("cite", "make", "{rel}", "--lines", "x"), None, "not a range"),
        (("cite", "make", "/etc/hostname"), None, "outside the knowledge folder"),
        (("cite", "make", "../outside.ok.md"), None, "outside the knowledge folder"),
        (("cite", "make", "{doc}#char0"), None, "not a valid chunk id"),
        (("cite", "make", "-", "--persist"), "{doc}#char0-5\n{{not json\n", "not valid JSON"),
        (("cite", "make", "-", "--persist"), "{doc}#char0-5\nhello there\n", "neither an id"),
        (
            ("cite", "verify", "-", "--update"),
            '{{"quote": "x", "path": "{rel}", "sha256": "ab", "loc": {{"start": 0}}}}',
            "`loc`",
        ),
        (("cite", "verify", "-", "--update"), "[1, 2", "not valid JSON"),
        (
            ("cite", "verify", "-", "--update"),
            '{{"type": "chunk", "path": "../../etc/passwd", "sha256": "ab", "quote": "root", '
            '"loc": {{"kind": "char", "start": 0, "end": 4}}}}',
            "outside the knowledge folder",
        ),
        (("cite", "verify", "c-0000000000000000", "--update"), None, "no citation"),
        (
            ("cite", "verify", "c-0000"),
            None,
            "no citation with id c-0000 (hint: list citations with `ok cite list`",
        ),
        (("cite", "verify", "m-0000"), None, "no memory note with id m-0000"),
        (("cite", "verify"), None, "nothing to verify"),
        (("cite", "open", "c-0000000000000000"), None, "no citation"),
        (("cite", "open", "c-0000"), None, "no citation with id c-0000"),
        (("cite", "list", "--status", "lost"), None, "unknown status"),
    ],
)
def test_bad_input(tidal: dict, args: tuple, stdin: str | None, needle: str) -> None:
    moved = _cite_quote(tidal)  # a persisted citation an --update would rewrite
    if args[1] == "verify":
        doc = tidal["doc"]
        doc.write_text("Shifted.\n" + doc.read_text())
    fill = {"doc": tidal["id"], "rel": tidal["rel"]}
    args = tuple(a.format(**fill) for a in args)
    stdin = stdin.format(**fill) if stdin is not None else None
    # a good item first: it must not be written when a later one is bad
    if args[:3] == ("cite", "verify", "-") and stdin is not None:
        stdin = json.dumps({**moved, "id": moved["id"]}) + "\n" + stdin
    before = _state(tidal["root"])
    r = run_ok(*args, input=stdin)
    assert r.code != 0
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:"), r.err
    assert needle in lines[0]
    assert r.out == ""
    assert _state(tidal["root"]) == before


@pytest.mark.parametrize("cmd", ["make", "verify"])
@pytest.mark.parametrize("stdin", ["", "[]", "\n\n"])
def test_an_empty_pipe_is_an_error_not_a_pass(tidal: dict, cmd: str, stdin: str) -> None:
    r = run_ok("cite", cmd, "-", input=stdin)
    assert r.code == 2 and r.out == ""
    assert r.err.startswith("Error: nothing to") and "held no ids" in r.err


def test_verify_all_with_no_citations_says_so(tidal: dict) -> None:
    r = run_ok("cite", "verify", "--all", "--json")
    assert r.code == 0 and r.json() == [] and "no persisted citations" in r.err


def test_chunk_id_of_a_doc_changed_since_indexing(tidal: dict) -> None:
    tidal["doc"].write_text("Rewritten by hand.\n")
    r = run_ok("cite", "make", f"{tidal['id']}#char0-5")
    assert r.code == 2 and "changed on disk since it was indexed" in r.err
    assert "run `ok sync`" in r.err


def test_chunk_id_of_a_version_replaced_by_a_hand_edit(tidal: dict) -> None:
    tidal["doc"].write_text("Rewritten by hand.\n")
    assert run_ok("sync").code == 0  # the old text was never kept: nothing to cite from
    [new] = [
        e["id"]
        for e in map(json.loads, (tidal["root"] / ".ok/mapping.jsonl").read_text().splitlines())
        if e.get("current", True) and e["path"] == tidal["rel"]
    ]
    r = run_ok("cite", "make", f"{tidal['id']}#char0-5")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert f"replaced by {new}" in r.err and "not kept" in r.err
    assert f"ok cite make {new}" in r.err and "ok sync" not in r.err


def test_corrupt_citation_file_is_reported(tidal: dict) -> None:
    c = _cite_quote(tidal)
    p = tidal["root"] / "citations" / f"{c['id']}.json"
    p.write_text("{ not json")
    r = run_ok("cite", "verify", c["id"])
    assert r.code == 2 and r.err.startswith("Error:") and "not valid JSON" in r.err
    r = run_ok("cite", "list", "--json")
    assert r.code == 0 and r.json() == [] and "not valid JSON" in r.err
