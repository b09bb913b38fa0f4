"""`ok grep` as rg: whole words, context lines, files and counts, colour; and MCP `sh_grep`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import call, fail, serve
from helpers.run import run_ok
from helpers.terminal import on_tty

A = "store/normalized/a.ok.md"
B = "store/normalized/b.ok.md"
BOTH = ([], ["--no-rg"])  # ripgrep, and the pure-Python matcher: the same answers


@pytest.fixture
def docs(kf: Path) -> Path:
    norm = kf / "store" / "normalized"
    norm.mkdir(parents=True, exist_ok=True)
    (norm / "a.ok.md").write_text(
        "# Notes\n\none\nAda two\nthree\nfour\nfive\nsix Ada Adams\nseven\nAda\n"
    )
    (norm / "b.ok.md").write_text("x\nAdams only\nAda\n")
    return kf


@pytest.mark.parametrize("rg", BOTH)
def test_word_regexp_matches_whole_words(docs: Path, rg: list[str]) -> None:
    r = run_ok("grep", "Adam", *rg)
    assert r.code == 0 and r.out.count("\n") == 2, r.out  # inside "Adams"
    r = run_ok("grep", "-w", "Adam", *rg)
    assert r.code == 1 and r.out == ""
    r = run_ok("grep", "--word-regexp", "Ada", "--in", "store", *rg)
    assert r.out == f"{A}:4:Ada two\n{A}:8:six Ada Adams\n{A}:10:Ada\n{B}:3:Ada\n"


@pytest.mark.parametrize("rg", BOTH)
def test_context_lines_print_as_rg_prints_them(docs: Path, rg: list[str]) -> None:
    r = run_ok("grep", "-w", "Ada", "-C", "1", *rg)
    assert r.code == 0, r.err
    assert r.out == (
        f"{A}-3-one\n{A}:4:Ada two\n{A}-5-three\n--\n"
        f"{A}-7-five\n{A}:8:six Ada Adams\n{A}-9-seven\n{A}:10:Ada\n--\n"
        f"{B}-2-Adams only\n{B}:3:Ada\n"
    )
    assert run_ok("grep", "-w", "Ada", "--context", "1", *rg).out == r.out
    # -A and -B each win over -C for their side
    r = run_ok("grep", "-w", "Ada", "-C", "3", "-B", "0", "-A", "1", "--in", "store", *rg)
    assert r.out == (
        f"{A}:4:Ada two\n{A}-5-three\n--\n{A}:8:six Ada Adams\n{A}-9-seven\n{A}:10:Ada\n--\n"
        f"{B}:3:Ada\n"
    )
    r = run_ok("grep", "two", "--before-context", "2", *rg)
    assert r.out == f"{A}-2-\n{A}-3-one\n{A}:4:Ada two\n"
    r = run_ok("grep", "two", "--after-context", "1", *rg)
    assert r.out == f"{A}:4:Ada two\n{A}-5-three\n"
    assert run_ok("grep", "two", "-C", "-1", *rg).code == 2


@pytest.mark.parametrize("rg", BOTH)
def test_context_in_json_is_before_and_after_per_match(docs: Path, rg: list[str]) -> None:
    plain = run_ok("grep", "-w", "Ada", "--json", *rg).json()
    assert all("before" not in h and "after" not in h for h in plain)  # shape as it was
    hits = run_ok("grep", "-w", "Ada", "-C", "1", "--json", *rg).json()
    assert [{k: h[k] for k in ("path", "line", "column", "text", "match")} for h in hits] == plain
    assert hits[0]["before"] == [{"line": 3, "text": "one"}]
    assert hits[0]["after"] == [{"line": 5, "text": "three"}]
    # a neighbouring match is context too; the file's end cuts the list short
    assert hits[1]["after"] == [{"line": 9, "text": "seven"}]
    assert hits[2]["before"] == [{"line": 9, "text": "seven"}] and hits[2]["after"] == []
    r = run_ok("grep", "Ada two", "-B", "2", "--json", *rg)
    assert r.json()[0]["before"] == [{"line": 2, "text": ""}, {"line": 3, "text": "one"}]
    assert r.json()[0]["after"] == []


@pytest.mark.parametrize("rg", BOTH)
def test_files_with_matches_and_counts(docs: Path, rg: list[str]) -> None:
    r = run_ok("grep", "-l", "Ada", *rg)
    assert r.code == 0 and r.out == f"{A}\n{B}\n"
    assert run_ok("grep", "--files-with-matches", "two", *rg).out == f"{A}\n"
    assert run_ok("grep", "-l", "Ada", "--json", *rg).json() == [A, B]
    r = run_ok("grep", "-c", "-w", "Ada", *rg)
    assert r.code == 0 and r.out == f"{A}:3\n{B}:1\n"
    assert run_ok("grep", "--count", "Ada", "--json", *rg).json() == {A: 3, B: 2}
    # --max caps the files named, not the counts
    assert run_ok("grep", "-c", "Ada", "--max", "1", "--json", *rg).json() == {A: 3}
    for flag in ("-l", "-c"):
        r = run_ok("grep", flag, "no-such-word", *rg)
        assert r.code == 1 and r.out == ""
        r = run_ok("grep", flag, "no-such-word", "--json", *rg)
        assert r.code == 1 and r.json() in ([], {})
    r = run_ok("grep", "-l", "-c", "Ada", *rg)
    assert r.code == 2 and "-l and -c do not combine" in r.err


def test_matches_are_coloured_on_a_terminal_only(docs: Path, monkeypatch: Any) -> None:
    r = run_ok("grep", "-w", "Ada", "--in", "store")
    assert r.code == 0 and "\x1b[" not in r.out  # a pipe: plain
    red = "\x1b[1;31mAda\x1b[0m"
    r = run_ok("grep", "-w", "Ada", "--color", "always", "-A", "1")
    assert f"\x1b[35m{A}\x1b[0m:\x1b[32m8\x1b[0m:six {red} Adams\n" in r.out
    assert f"\x1b[35m{A}\x1b[0m-\x1b[32m9\x1b[0m-seven\n" in r.out
    assert run_ok("--color", "always", "grep", "-w", "Ada").out.count(red) == 4
    r = run_ok("grep", "-l", "Ada", "--color", "always")
    assert r.out == f"\x1b[35m{A}\x1b[0m\n\x1b[35m{B}\x1b[0m\n"
    r = run_ok("grep", "-c", "two", "--color", "always")
    assert r.out == f"\x1b[35m{A}\x1b[0m:1\n"
    r = run_ok("grep", "Ada", "--color", "sometimes")
    assert r.code == 2 and "auto, always, never" in r.err

    env = {"OK_ROOT": str(docs)}
    tty = on_tty("grep", "-w", "Ada", "--in", "store", env=env)
    assert red.encode() in tty
    for plain in (
        on_tty("grep", "-w", "Ada", env={**env, "NO_COLOR": "1"}),
        on_tty("grep", "-w", "Ada", "--color", "never", env=env),
    ):
        assert b"six Ada Adams" in plain and b"\x1b[" not in plain


def test_dash_c_after_grep_is_context_and_root_still_moves(
    docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openkl.cli.root import hoist_root

    assert hoist_root(["grep", "x", "-C", "2"]) == ["grep", "x", "-C", "2"]
    assert hoist_root(["-C", "d", "grep", "x", "-C", "2"]) == ["-C", "d", "grep", "x", "-C", "2"]
    assert hoist_root(["grep", "x", "-C", "2", "--root", "d"]) == [
        "--root",
        "d",
        "grep",
        "x",
        "-C",
        "2",
    ]
    monkeypatch.delenv("OK_ROOT")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    want = f"{B}-2-Adams only\n{B}:3:Ada\n"
    for args in (
        ("grep", "Ada$", "-C", "1", "--in", "store", "--root", str(docs)),
        ("-C", str(docs), "grep", "Ada$", "-C", "1", "--in", "store"),
        ("grep", "Ada$", f"--root={docs}", "-B1"),
    ):
        r = run_ok(*args, cwd=elsewhere)
        assert r.code == 0, r.err
        assert r.out.endswith(want), r.out


@pytest.mark.server
def test_mcp_sh_grep_words_context_files_and_counts(docs: Path) -> None:
    async def go(c: Any) -> None:
        plain = (await call(c, "sh_grep", pattern="Adam"))["results"]
        assert len(plain) == 2 and all("before" not in m for m in plain)  # defaults as before
        assert not (await call(c, "sh_grep", pattern="Adam", word=True))["results"]
        ctx = (await call(c, "sh_grep", pattern="two", context=1))["results"]
        assert ctx[0]["before"] == [{"line": 3, "text": "one"}]
        assert ctx[0]["after"] == [{"line": 5, "text": "three"}]
        one = (await call(c, "sh_grep", pattern="two", context=2, before=0))["results"][0]
        assert one["before"] == [] and len(one["after"]) == 2
        files = await call(c, "sh_grep", pattern="Ada", files_with_matches=True)
        assert files["files"] == [A, B] and "results" not in files
        counts = await call(c, "sh_grep", pattern="Ada", word=True, count=True)
        assert counts["counts"] == {A: 3, B: 1}
        capped = await call(c, "sh_grep", pattern="Ada", count=True, max_count=1)
        assert capped["counts"] == {A: 3} and capped["truncated"] is True
        err = await fail(c, "sh_grep", pattern="Ada", count=True, files_with_matches=True)
        assert "do not combine" in err
        err = await fail(c, "sh_grep", pattern="Ada", context=1000)
        assert "less than or equal to 20" in err

    serve([docs], go)


@pytest.mark.parametrize("rg", BOTH)
def test_links_out_of_the_folder_are_not_read(docs: Path, tmp_path: Path, rg: list[str]) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("before\nlaunch codes\nafter\n")
    norm = docs / "store" / "normalized"
    (norm / "leak.ok.md").symlink_to(outside / "secret.md")
    (norm / "leakdir").symlink_to(outside, target_is_directory=True)
    for extra in ([], ["-C", "2"], ["-l"], ["-c"], ["-C", "1", "--json"]):
        r = run_ok("grep", "launch codes|before", *extra, *rg)
        assert r.code == 1 and r.err == "", r.err
        assert "launch" not in r.out and "before" not in r.out
