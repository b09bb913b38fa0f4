"""Walking directories for `ok store ingest` and MCP `store_ingest`: symlinks that lead out
are not followed (CLI: unless --follow; MCP: never out of the folder), loops end, and file
names that are not UTF-8 are reported instead of breaking the batch and every later sync."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import call, serve
from helpers.run import run_ok

SECRET = "top secret: the launch codes are 0000"
PASSWD = Path("/etc/passwd")
# climbs to / from any depth, then down to /etc/passwd: the kind of link nobody spots
CLIMB = "../" * 40 + "etc/passwd"


def _normalized_text(root: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace") for p in (root / "store" / "normalized").rglob("*.ok.md")
    )


def _skipped(rep: dict[str, Any]) -> dict[str, str]:
    return {Path(s["path"]).name: s["reason"] for s in rep["skipped"]}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """src/docs (to ingest) and src/outside, with every kind of link between them."""
    src = tmp_path / "src"
    docs, outside = src / "docs", src / "outside"
    (docs / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET + "\n")
    (docs / "real.md").write_text("# Real\n\nA document about write-ahead logs.\n")
    (docs / "sub" / "inner.md").write_text("# Inner\n\nCheckpoints bound recovery time.\n")
    (docs / "same.md").symlink_to("real.md")  # a file link inside: fine
    (docs / "alias").symlink_to("sub")  # a dir link inside: its files come once
    (docs / "secret.md").symlink_to(outside / "secret.md")
    (docs / "passwd.md").symlink_to(CLIMB)
    (docs / "outdir").symlink_to(outside, target_is_directory=True)
    (docs / "loop").symlink_to("..", target_is_directory=True)  # holds docs/ itself
    (docs / "self").symlink_to("self")
    (docs / "broken.md").symlink_to("nowhere.md")
    return docs


def test_walk_skips_and_reports_links_out_of_the_directory(kf: Path, tree: Path) -> None:
    (tree / "config.md").symlink_to(kf / ".ok" / "config.yml")
    r = run_ok("store", "ingest", str(tree), "--json")
    assert r.code == 0, r.err  # a link out passed over, as rg does: a warning, not a failure
    rep = r.json()
    added = sorted(a["path"] for a in rep["added"])
    assert added == ["store/normalized/docs/real.ok.md", "store/normalized/docs/sub/inner.ok.md"]
    # the origin is the file a link resolves to: one file, one lineage
    assert [u["origin"] for u in rep["unchanged"]] == [str((tree / "same.md").resolve())]
    skipped = _skipped(rep)
    for name in ("secret.md", "passwd.md", "outdir", "loop"):
        assert "outside" in skipped[name] and "--follow" in skipped[name], (name, skipped)
    assert "leads nowhere" in skipped["self"] and "leads nowhere" in skipped["broken.md"]
    assert "own files" in skipped["config.md"]
    assert "alias" not in skipped and "same.md" not in skipped
    assert "skipped" in r.err and "--follow" in r.err
    text = _normalized_text(kf)
    assert SECRET not in text and "root:" not in text
    assert not list((kf / "store" / "sources").rglob("secret*"))
    assert "default_extractor" not in text and "lock_timeout" not in text


def test_follow_takes_links_out_and_ends_loops(kf: Path, tree: Path) -> None:
    r = run_ok("store", "ingest", "--follow", str(tree), "--json")
    rep = r.json()
    origins = {a["origin"] for a in rep["added"] + rep["unchanged"]}
    assert str((tree / "secret.md").resolve()) in origins
    assert str((tree / "outdir" / "secret.md").resolve()) in origins
    # the loop back to src/ reaches outside/ once more, but never docs/ again
    assert not any("/loop/docs/" in o for o in origins), origins
    skipped = _skipped(rep)
    assert set(skipped) == {"self", "broken.md"} | (
        {"passwd.md"} if not PASSWD.exists() else set()
    ), skipped
    assert SECRET in _normalized_text(kf)
    if PASSWD.exists():
        assert str((tree / "passwd.md").resolve()) in origins


@pytest.mark.server
def test_mcp_ingest_of_a_directory_never_leaves_the_folder(
    example_kf: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / "deeper").mkdir(parents=True)
    (outside / "secret.md").write_text(SECRET + "\n")
    (outside / "deeper" / "more.md").write_text(SECRET + " (deeper)\n")
    (example_kf / "citations" / "pw.json").symlink_to("/etc/passwd")
    src = example_kf / "store" / "sources"
    (src / "passwd.md").symlink_to(CLIMB)
    (src / "leak.md").symlink_to(outside / "secret.md")
    (src / "leakdir").symlink_to(outside, target_is_directory=True)
    (src / "root").symlink_to("../..", target_is_directory=True)  # the folder root: a loop
    (src / "state.md").symlink_to("../../.ok/config.yml")
    (example_kf / "notes").mkdir()
    (example_kf / "notes" / "kept.md").write_text("# Kept\n\nLinked from inside, fine.\n")
    (src / "kept.md").symlink_to("../../notes/kept.md")  # elsewhere inside: followed
    (src / os.fsdecode(b"odd\xffname.md")).write_text("# Odd\n\nA name that is not UTF-8.\n")

    async def go(c: Any) -> None:
        # the folder's own directories are never sources: citations/ alone leaves nothing
        r = await c.call_tool("store_ingest", {"paths": ["citations"]})
        assert r.is_error and "nothing but the folder's own files" in r.content[0].text
        for paths in (["."], ["store/sources"]):
            rep = await call(c, "store_ingest", paths=paths)
            for s in rep["skipped"]:
                assert (
                    "/etc/passwd" in s["reason"]
                    or str(outside) in s["reason"]
                    or "own files" in s["reason"]
                    or "not valid UTF-8" in s["reason"]
                ), s
            names = {Path(s["path"]).name for s in rep["skipped"]}
            if paths == ["store/sources"]:
                assert {
                    "passwd.md",
                    "leak.md",
                    "leakdir",
                    "state.md",
                    "odd\\xffname.md",
                } <= names, names
                assert any("outside the knowledge folder" in s["reason"] for s in rep["skipped"])
                done = {a["origin"] for a in rep["added"] + rep["unchanged"]}
                assert str((src / "kept.md").resolve()) in done
            if paths == ["."]:
                assert {"citations", "memories", "normalized"} <= names, names
        assert not (await call(c, "sh_grep", pattern="launch codes|root:x:0"))["results"]
        hits = (await call(c, "search", query="launch codes secret", k=10))["results"]
        assert all(SECRET not in h["quote"] for h in hits)
        listing = json.dumps(await call(c, "fs_list", path="store/normalized"))
        assert "pw.json" not in listing and "leak" not in listing
        rows = {r["name"]: r for r in (await call(c, "fs_list", path="store/sources"))["results"]}
        assert "not valid UTF-8" in rows["odd\\xffname.md"]["problem"]
        assert rows["leak.md"]["type"] == "link-outside" and rows["kept.md"]["type"] == "link"
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert "follow" not in tools["store_ingest"].input_schema["properties"]

    serve([example_kf], go)
    text = _normalized_text(example_kf)
    assert SECRET not in text and "root:x:0" not in text
    for p in (example_kf / "store" / "sources").rglob("*"):
        if p.is_file() and not p.is_symlink():
            assert SECRET not in p.read_text(errors="replace")


BAD = os.fsdecode(b"bad\xffname.md")  # a name that is not UTF-8, as Python sees it


def test_a_name_that_is_not_utf8_is_skipped_and_the_rest_ingested(kf: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nA fine name.\n")
    (docs / BAD).write_text("# Bad\n\nThe content is fine, the name is not.\n")
    (docs / os.fsdecode(b"dir\xfe")).mkdir()
    (docs / os.fsdecode(b"dir\xfe") / "inner.md").write_text("# Inner\n\nHidden by its dir.\n")
    r = run_ok("store", "ingest", str(docs), "--json")
    assert r.code == 0, r.err
    rep = r.json()
    assert [a["path"] for a in rep["added"]] == ["store/normalized/docs/good.ok.md"]
    reasons = {s["path"]: s["reason"] for s in rep["skipped"]}
    assert set(reasons) == {f"{docs}/bad\\xffname.md", f"{docs}/dir\\xfe"}, reasons
    assert all("not valid UTF-8" in x and "rename" in x for x in reasons.values())
    # named directly: the same, not a crash
    r = run_ok("store", "ingest", str(docs / BAD), "--json")
    assert r.code == 2 and "not valid UTF-8" in r.json()["skipped"][0]["reason"]
    for cmd in (["sync", "--json"], ["status", "--json"], ["store", "list", "--json"]):
        r = run_ok(*cmd)
        assert r.code == 0, (cmd, r.err)
    assert run_ok("status", "--json").json()["in_sync"] is True


def test_sync_reports_hand_placed_names_that_are_not_utf8(kf: Path) -> None:
    norm = kf / "store" / "normalized"
    (norm / os.fsdecode(b"hand\xff.ok.md")).write_text("# Hand placed\n\nzebra crossing\n")
    day = kf / "memories" / "by_date" / "2026-12" / "01"
    day.mkdir(parents=True)
    (day / os.fsdecode(b"m-20261201-ab\xffc.md")).write_text(
        "---\nid: m-20261201-abcd\n---\nzebra note\n"
    )
    (kf / "memories" / os.fsdecode(b"loose\xfe.md")).write_text("zebra loose\n")
    assert run_ok("mem", "add", "A zebra note with a fine name").code == 0
    for _ in range(2):  # and again: nothing sticks (exit 3 says files were left out)
        r = run_ok("sync", "--json")
        assert r.code == 3 and "2 files not indexed as written" in r.err, r.err
        problems = {p["path"]: p["problem"] for p in r.json()["problems"]}
        assert set(problems) == {
            "store/normalized/hand\\xff.ok.md",
            "memories/by_date/2026-12/01/m-20261201-ab\\xffc.md",
        }, problems
        assert all("not valid UTF-8" in p for p in problems.values())
        assert "not valid UTF-8" in r.err
    st = run_ok("status", "--json")
    assert st.code == 1 and st.json()["in_sync"] is True
    for extra in ([], ["--no-rg"]):
        r = run_ok("grep", "zebra", "--json", *extra)
        assert r.code == 0, r.err
        paths = {h["path"] for h in r.json()}
        assert "memories/by_date/2026-12/01/m-20261201-ab\\xffc.md" in paths, paths
    assert run_ok("search", "zebra", "--json").code == 0
