"""`--where KEY=VALUE`: filters on any frontmatter key, in search, `mem list`, MCP and HTTP."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import call, fail, serve
from helpers.run import run_ok
from helpers.serve import Server

from openkl.errors import UsageError
from openkl.files.where import parse

META = {
    "owner": "Alice",
    "tags": ["sea", "ops"],
    "reviewed": dt.date(2026, 3, 1),
    "ts": "2026-03-01T10:00:00Z",
    "pages": 12,
    "draft": False,
    "source": {"lang": "en"},
    "blank": "",
}


@pytest.mark.parametrize(
    "spec,holds",
    [
        ("owner=alice", True),  # text compares case aside
        ("owner=bob", False),
        ("owner!=bob", True),
        ("tags=ops", True),  # a list contains it
        ("tags=x", False),
        ("tags!=x", True),
        ("tags!=ops", False),
        ("reviewed=2026-03-01", True),
        ("reviewed<=2026-03-01", True),  # a date is its whole day
        ("reviewed<2026-03-01", False),
        ("reviewed>2026-02-28", True),
        ("reviewed>=2026-03-02", False),
        ("ts=2026-03-01", True),
        ("ts>2026-03-01T09:00:00Z", True),
        ("ts>2026-03-01T11:00:00Z", False),
        ("ts<7d", True),  # a span: that long before now
        ("pages>=12", True),
        ("pages>9", True),  # numbers, not text ("12" < "9")
        ("pages<9", False),
        ("draft=false", True),
        ("draft=true", False),
        ("source.lang=en", True),
        ("owner", True),
        ("missing", False),
        ("missing=x", False),
        ("missing!=x", True),
        ("missing=", True),
        ("blank=", True),
        ("blank!=", False),
        ("owner!=", True),
    ],
)
def test_a_condition_holds_or_not(spec: str, holds: bool) -> None:
    assert parse(spec).holds(META) is holds


@pytest.mark.parametrize(
    "spec,said",
    [
        ("=alice", "is not a frontmatter key"),
        ("the owner=alice", "is not a frontmatter key"),
        ("owner!alice", "no operator after 'owner'"),
        ("reviewed>=", ">= needs a value"),
    ],
)
def test_a_bad_condition_says_how_to_write_one(spec: str, said: str) -> None:
    with pytest.raises(UsageError, match=said) as e:
        parse(spec)
    assert "KEY=VALUE" in (e.value.hint or "")


DOCS = {
    "tides.md": "---\ntitle: Tides\nowner: alice\nreviewed: 2026-03-01\nlevel: 2\n"
    "tags: [sea, ops]\n---\n# Tides\n\nA tide gauge records the sea level every six minutes.\n",
    "waves.md": "---\ntitle: Waves\nowner: bob\nreviewed: 2025-11-20\nlevel: 10\n"
    "tags: [sea]\n---\n# Waves\n\nWaves carry energy along the sea surface.\n",
    "currents.md": "# Currents\n\nOcean currents move sea water around the globe.\n",
}


def _note(root: Path, nid: str, extra: str, body: str) -> None:
    path = root / "memories/by_date/2026-02/10" / f"{nid}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nid: {nid}\nts: 2026-02-10T09:00:00Z\n{extra}---\n{body}\n")


@pytest.fixture
def sea(kf: Path) -> Path:
    src = kf.parent / "src"
    src.mkdir()
    for name, text in DOCS.items():
        (src / name).write_text(text)
    assert run_ok("store", "ingest", str(src)).code == 0
    _note(kf, "m-20260210-aaaa", "owner: alice\nstatus: open\n", "The sea wall needs a survey.")
    _note(kf, "m-20260210-bbbb", "owner: carol\nstatus: done\n", "The sea lock was repaired.")
    assert run_ok("sync").code == 0
    return kf


def _paths(r: Any) -> list[str]:
    assert r.code == 0, r.err
    return sorted(Path(h["path"]).stem.split(".")[0] for h in r.json())


def test_search_and_mem_list_filter_on_any_frontmatter_key(sea: Path) -> None:
    every = _paths(run_ok("search", "sea", "--json"))
    assert every == ["currents", "m-20260210-aaaa", "m-20260210-bbbb", "tides", "waves"]
    assert _paths(run_ok("search", "sea", "--where", "owner=alice", "--json")) == [
        "m-20260210-aaaa",
        "tides",
    ]
    # repeated: all must hold; a date compares as a date, a number as a number
    got = run_ok("search", "sea", "--where", "owner=alice", "--where", "reviewed<=2026-03-01")
    assert got.code == 0 and "tides" in got.out and "m-20260210" not in got.out
    assert _paths(run_ok("search", "sea", "--where", "reviewed<2026-01-01", "--json")) == ["waves"]
    assert _paths(run_ok("search", "sea", "--where", "level>5", "--json")) == ["waves"]
    assert _paths(run_ok("search", "sea", "--where", "tags=ops", "--json")) == ["tides"]
    # a key a file lacks: only != holds
    assert _paths(run_ok("search", "sea", "--where", "owner!=alice", "--json")) == [
        "currents",
        "m-20260210-bbbb",
        "waves",
    ]
    assert _paths(run_ok("store", "search", "sea", "--where", "owner", "--json")) == [
        "tides",
        "waves",
    ]
    assert _paths(run_ok("mem", "search", "sea", "--where", "status=done", "--json")) == [
        "m-20260210-bbbb"
    ]
    # nothing within the filters: exit 1; a bad condition: exit 2, one line
    r = run_ok("search", "sea", "--where", "owner=dave")
    assert r.code == 1 and r.out == ""
    r = run_ok("search", "sea", "--where", "owner")
    assert r.code == 0
    r = run_ok("search", "sea", "--where", "reviewed>")
    assert r.code == 2 and r.err.count("\n") == 1 and "--where 'reviewed>'" in r.err
    # mem list
    r = run_ok("mem", "list", "--where", "owner=alice", "--json")
    assert [n["id"] for n in r.json()] == ["m-20260210-aaaa"]
    r = run_ok("mem", "list", "--where", "status!=open", "--where", "ts>=2026-02-10", "--json")
    assert [n["id"] for n in r.json()] == ["m-20260210-bbbb"]
    assert run_ok("mem", "list", "--where", "ts<2026-02-10", "--json").json() == []
    r = run_ok("mem", "list", "--where", "a b=c")
    assert r.code == 2 and "is not a frontmatter key" in r.err


@pytest.mark.server
def test_mcp_search_takes_where(sea: Path) -> None:
    async def go(c: Any) -> dict[str, Any]:
        a = await call(c, "search", query="sea", where=["owner=alice"])
        b = await call(c, "store_search", query="sea", where=["reviewed<2026-01-01"])
        m = await call(c, "mem_search", query="sea", where=["status=open"])
        err = await fail(c, "search", query="sea", where=["=x"])
        return {"a": a, "b": b, "m": m, "err": err}

    got = serve([sea], go)
    assert sorted(Path(h["path"]).name for h in got["a"]["results"]) == [
        "m-20260210-aaaa.md",
        "tides.ok.md",
    ]
    assert [Path(h["path"]).name for h in got["b"]["results"]] == ["waves.ok.md"]
    assert [h["id"] for h in got["m"]["results"]] == ["m-20260210-aaaa"]
    assert "is not a frontmatter key" in got["err"]


@pytest.mark.server
def test_http_search_and_notes_take_where(sea: Path) -> None:
    s = Server(sea)
    try:
        v1 = f"/v1/{s.stack}"
        r = s.http.get(f"{v1}/search", params=[("q", "sea"), ("where", "owner=alice")])
        assert r.status_code == 200, r.text
        assert sorted(Path(h["path"]).name for h in r.json()["hits"]) == [
            "m-20260210-aaaa.md",
            "tides.ok.md",
        ]
        r = s.http.get(
            f"{v1}/search",
            params=[("q", "sea"), ("where", "owner=alice"), ("where", "tags=ops")],
        )
        assert [Path(h["path"]).name for h in r.json()["hits"]] == ["tides.ok.md"]
        r = s.http.get(f"{v1}/notes", params={"where": "owner=carol"})
        assert [n["id"] for n in r.json()] == ["m-20260210-bbbb"]
        for path in ("search?q=sea&where=level%3E", "notes?where=%3Dx"):
            r = s.http.get(f"{v1}/{path}")
            assert r.status_code == 400 and "where" in r.json()["error"], r.text
    finally:
        s.stop()
    assert json.loads(run_ok("status", "--json").out)["in_sync"]
