"""MCP tools given absurd arguments answer with one specific line and change nothing.

One `ok mcp` server (a real client over stdio) takes the whole corpus; each case is then
checked on its own.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import serve

LONG = "a" * 5000
DEEP = "/".join(["a"] * 2000)
WIDE = "b" * 300  # one name longer than NAME_MAX
HUGE = 10**15


@dataclass
class Case:
    id: str
    tool: str  # a tool name, or "resource" (then `args["uri"]`)
    args: dict[str, Any]
    expect: str  # a piece of the error message
    also: list[str] = field(default_factory=list)


CORPUS = [
    Case("fs_list-long", "fs_list", {"path": LONG}, "`path` is 5000 characters long"),
    Case("fs_list-deep", "fs_list", {"path": DEEP}, "2000 directories deep"),
    Case("fs_list-wide", "fs_list", {"path": WIDE}, "names are at most 255"),
    Case("fs_list-nul", "fs_list", {"path": "memories\x00/x"}, "NUL byte"),
    Case("fs_read-long", "fs_read", {"path": LONG}, "`path` is 5000 characters long"),
    Case("fs_read-long-bytes", "fs_read", {"path": "é" * 2100}, "4200 bytes long"),
    Case("fs_read-deep", "fs_read", {"path": DEEP + "/x.md"}, "directories deep"),
    Case("fs_read-nul", "fs_read", {"path": ".gitignore\x00"}, "NUL byte"),
    Case(
        "fs_read-offset-huge",
        "fs_read",
        {"path": ".gitignore", "offset": HUGE},
        "past the end of .gitignore",
        ["offset from 0 to"],
    ),
    Case(
        "fs_read-offset-2**63", "fs_read", {"path": ".gitignore", "offset": 2**63}, "past the end"
    ),
    Case(
        "fs_read-offset-negative",
        "fs_read",
        {"path": ".gitignore", "offset": -1},
        "`offset`: Input should be greater than or equal to 0",
    ),
    Case(
        "fs_read-max-bytes-zero",
        "fs_read",
        {"path": ".gitignore", "max_bytes": 0},
        "`max_bytes`: Input should be greater than or equal to 1",
    ),
    Case(
        "store_ingest-long",
        "store_ingest",
        {"paths": [LONG]},
        "5000 characters long",
        ["`paths[0]`"],
    ),
    Case("store_ingest-deep", "store_ingest", {"paths": [DEEP]}, "directories deep"),
    Case("store_ingest-wide", "store_ingest", {"paths": [WIDE]}, "names are at most 255"),
    Case("store_ingest-nul", "store_ingest", {"paths": ["store\x00"]}, "NUL byte"),
    Case(
        "store_ingest-name-nul",
        "store_ingest",
        {"text": "hello", "name": "a\x00.md"},
        "`name` contains a NUL byte",
    ),
    Case(
        "store_ingest-name-long",
        "store_ingest",
        {"text": "hello", "name": WIDE + ".md"},
        "--name is 303 bytes long",
    ),
    Case(
        "store_ingest-name-huge",
        "store_ingest",
        {"text": "hello", "name": LONG},
        "`name` is 5000 characters long",
    ),
    Case(
        "store_ingest-name-path",
        "store_ingest",
        {"text": "hello", "name": "../x.md"},
        "must be a plain file name",
    ),
    Case("cite_make-long", "cite_make", {"refs": [LONG]}, "5000 characters long"),
    Case("cite_make-deep", "cite_make", {"refs": [DEEP]}, "directories deep"),
    Case("cite_make-wide", "cite_make", {"refs": [WIDE]}, "names are at most 255"),
    Case("cite_make-nul", "cite_make", {"refs": ["memories/\x00"]}, "NUL byte"),
    Case(
        "cite_make-chars-huge",
        "cite_make",
        {"refs": ["store/normalized/docs/write-ahead-logging.ok.md"], "chars": f"0-{HUGE}"},
        "out of range",
    ),
    Case(
        "cite_make-lines-huge",
        "cite_make",
        {"refs": ["store/normalized/docs/write-ahead-logging.ok.md"], "lines": f"1-{HUGE}"},
        "past the end",
    ),
    Case("cite_verify-long", "cite_verify", {"items": [LONG]}, "5000 characters long"),
    Case("cite_verify-deep", "cite_verify", {"items": [DEEP]}, "directories deep"),
    Case("cite_verify-nul", "cite_verify", {"items": ["c-\x00"]}, "NUL byte"),
    Case(
        "cite_verify-object-nul",
        "cite_verify",
        {"items": [{"path": "a\x00", "quote": "x"}]},
        "`items[0].path` contains a NUL",
    ),
    Case("entities-long", "entities", {"name": LONG}, "`name` is 5000 characters long"),
    Case("entities-nul", "entities", {"name": "SQLite\x00"}, "NUL byte"),
    Case(
        "entities-limit-negative",
        "entities",
        {"limit": -1},
        "`limit`: Input should be greater than or equal to 1",
    ),
    Case(
        "entities-confidence",
        "entities",
        {"min_confidence": 5},
        "`min_confidence`: Input should be less than or equal to 1",
    ),
    Case("traverse-long", "traverse", {"name": LONG}, "`name` is 5000 characters long"),
    Case("traverse-nul", "traverse", {"name": "\x00"}, "NUL byte"),
    Case(
        "traverse-depth-huge",
        "traverse",
        {"name": "SQLite", "depth": HUGE},
        "`depth`: Input should be less than or equal to 4",
    ),
    Case(
        "search-k-negative",
        "search",
        {"query": "x", "k": -3},
        "`k`: Input should be greater than or equal to 1",
    ),
    Case("search-nul", "search", {"query": "lock\x00"}, "NUL byte"),
    Case("sh_grep-nul", "sh_grep", {"pattern": "a\x00b"}, "NUL byte"),
    Case(
        "sh_grep-max-negative",
        "sh_grep",
        {"pattern": "x", "max_count": -1},
        "greater than or equal to 1",
    ),
    Case("stack-long", "search", {"query": "x", "stack": LONG}, "`stack` is 5000 characters long"),
    Case("resource-doc-long", "resource", {"uri": f"ok://kf/doc/{LONG}"}, "5000 characters long"),
    Case(
        "resource-doc-unknown",
        "resource",
        {"uri": "ok://kf/doc/0123456789abcdef"},
        "no document matches",
    ),
    Case(
        "resource-memory-deep",
        "resource",
        {"uri": f"ok://kf/memory/{DEEP}.md"},
        "unknown resource ok://kf/memory/a/a/",
    ),
    Case(
        "resource-memory-escaped",
        "resource",
        {"uri": "ok://kf/memory/..%2F..%2Fx.md"},
        "unknown resource",
    ),
    Case(
        "resource-memory-unknown",
        "resource",
        {"uri": "ok://kf/memory/m-20261301-zzzz"},
        "no memory note with id m-20261301-zzzz",
    ),
    Case("resource-stack-unknown", "resource", {"uri": "ok://nope/doc/x"}, "no stack named"),
]


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file of the folder but the graph and the lock, with size and mtime."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        # the graph, the lock and the embedding cache (the server warms up on start)
        if rel.startswith((".ok/kuzu", ".ok/lock", ".ok/cache/embeddings")) or not p.is_file():
            continue
        st = p.stat()
        out[rel] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def answers(
    _example_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, tuple[bool, str]], dict[str, Any], dict[str, Any]]:
    root = tmp_path_factory.mktemp("hostile") / "kf"
    shutil.copytree(_example_template, root, symlinks=True)
    before = _snapshot(root)

    async def go(c: Any) -> dict[str, tuple[bool, str]]:
        got = {}
        for case in CORPUS:
            if case.tool == "resource":
                try:
                    res = await c.read_resource(case.args["uri"])
                    got[case.id] = (False, res.contents[0].text[:200])
                except Exception as e:
                    got[case.id] = (True, str(e))
                continue
            r = await c.call_tool(case.tool, case.args)
            got[case.id] = (bool(r.is_error), r.content[0].text if r.content else "")
        return got

    env = {"OK_NO_PROGRESS": "1", "OK_ROOT": str(root)}
    got = serve(
        [root],
        go,
        env={k: v for k, v in {**os.environ, **env}.items() if not k.startswith("OK_") or k in env},
    )
    return got, before, _snapshot(root)


@pytest.mark.server
@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_hostile_argument_gets_one_clear_line(case: Case, answers: Any) -> None:
    got, _, _ = answers
    is_error, text = got[case.id]
    assert is_error, text
    assert text.strip() and case.expect in text, text[:400]
    for piece in case.also:
        assert piece in text, text[:400]
    # one line, and not the caller's 5,000 characters repeated back
    assert "\n" not in text.strip() and len(text) < 600, text[:400]
    if case.tool != "resource":
        assert (
            text.startswith(f"Error executing tool {case.tool}: ")
            and len(text) > len(f"Error executing tool {case.tool}: ") + 10
        )


@pytest.mark.server
def test_hostile_arguments_write_nothing(answers: Any) -> None:
    _, before, after = answers
    assert after == before


def test_long_prose_and_long_quotes_are_fine() -> None:
    from openkl.errors import BadInput
    from openkl.mcp.tools import check_args

    whole_doc = {
        "type": "doc",
        "path": "store/normalized/x.ok.md",
        "quote": "word " * 5000,
        "context": {"pre": "", "post": ""},
    }
    check_args({"items": [whole_doc], "query": "q" * 10000, "text": "t" * 100000})
    with pytest.raises(BadInput, match=r"`items\[1\]\.path` contains a NUL"):
        check_args({"items": [whole_doc, {**whole_doc, "path": "x\x00"}]})
    with pytest.raises(BadInput, match=r"`refs\[0\]` is 5000 characters long"):
        check_args({"refs": [LONG]})
