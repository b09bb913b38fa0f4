"""One spelling per idea: every command's options, read from the command tree, are checked
against the vocabulary in openkl/cli/vocabulary.py (printed in docs/commands.md). A new
option that spells a known idea differently, or takes a known spelling for something
else, fails here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from helpers.run import run_ok

from openkl.cli.root import app
from openkl.cli.vocabulary import BY_NAME, IDEAS, LIST_COMMANDS

BY_DEST = {d: i for i in IDEAS for d in i.dests}
RESERVED: dict[str, set[str]] = {}
for _i in IDEAS:
    for _f in _i.flags + _i.aliases:
        RESERVED.setdefault(_f, set()).update(_i.dests)
# options of their own: the folders `ok serve` and `ok mcp` serve, the key's folder
OWN = {("serve", "roots"), ("mcp", "roots"), ("serve keys add", "root")}
OWN |= {("serve keys list", "root"), ("serve keys revoke", "root")}


def _commands() -> Iterator[tuple[str, Any]]:
    root = typer.main.get_command(app)

    def walk(cmd: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        ctx = cmd.context_class(cmd, info_name=" ".join(path) or "ok")
        names = cmd.list_commands(ctx) if hasattr(cmd, "list_commands") else []
        for n in names:
            yield from walk(cmd.get_command(ctx, n), [*path, n])
        if path and (not names or path == ["serve"]):
            yield " ".join(path), cmd

    yield from walk(root, [])


COMMANDS = dict(_commands())


def _options(cmd: Any) -> list[Any]:
    return [p for p in cmd.params if p.param_type_name == "option"]


def _spellings(p: Any) -> set[str]:
    return set(p.opts) | set(p.secondary_opts)


def test_the_tree_is_walked() -> None:
    assert len(COMMANDS) > 60 and "mem delete" in COMMANDS and "graph cypher" in COMMANDS


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_idea_is_spelt_one_way(name: str) -> None:
    cmd = COMMANDS[name]
    seen: dict[str, str] = {}
    problems = []
    for p in _options(cmd):
        if (name.split(" ")[0], p.name) in OWN or (name, p.name) in OWN:
            continue
        for s in _spellings(p):
            if s in seen:
                problems.append(f"{s} is both --{seen[s]} and --{p.name}")
            seen[s] = p.name
        idea = BY_DEST.get(p.name)
        if idea is None:
            taken = {s: RESERVED[s] for s in _spellings(p) if s in RESERVED}
            problems += [
                f"{p.name} is spelt {s}, which stands for {'/'.join(sorted(d))} "
                "(rename it, or add the idea to openkl/cli/vocabulary.py)"
                for s, d in taken.items()
            ]
            continue
        got = _spellings(p)
        missing = set(idea.flags) - got
        extra = got - set(idea.flags) - set(idea.aliases)
        if missing or extra:
            problems.append(
                f"{p.name} ({idea.name}) is spelt {sorted(got)}; the vocabulary says "
                f"{list(idea.flags)}"
            )
        if idea.metavar and p.metavar not in (None, idea.metavar) and not p.is_flag:
            problems.append(f"{p.name} shows {p.metavar}; the vocabulary says {idea.metavar}")
        for other in idea.requires:
            if not any(q.name in BY_NAME[other].dests for q in _options(cmd)):
                problems.append(f"{p.name} ({idea.name}) comes with {BY_NAME[other].flags}")
    assert not problems, f"ok {name}: " + "; ".join(problems)


@pytest.mark.parametrize("name", LIST_COMMANDS)
def test_list_like_commands_take_format(name: str) -> None:
    dests = {p.name for p in _options(COMMANDS[name])}
    assert {"fmt", "csv", "tsv", "json_"} <= dests, name


def test_scope_says_memory_too(example_kf: Path) -> None:
    """`--in memory` is `--in mem`, wherever --in is taken."""
    with_scope = [n for n, c in COMMANDS.items() if any(p.name == "scope" for p in _options(c))]
    assert {"search", "grep", "ask", "mem conflicts", "trigger add", "distill run"} <= set(
        with_scope
    )
    a = run_ok("search", "one writer", "--in", "mem", "--json").json()
    b = run_ok("search", "one writer", "--in", "memory", "--json").json()
    assert a == b and a and {h["type"] for h in a} == {"memory"}
    assert run_ok("grep", "writer", "--in", "memory").code == 0
    assert run_ok("ask", "how many writers at a time?", "--in", "memory", "--no-llm").code == 0
    assert run_ok("mem", "conflicts", "--in", "mem").code == 0
    r = run_ok("trigger", "add", "w", "-e", "writers", "--in", "memory", "--json")
    assert r.code == 0 and r.json()["scope"] == "mem", r.err
    r = run_ok("search", "x", "--in", "notes")
    assert r.code == 2 and "all, mem, store" in r.err


def test_every_limit_takes_k_n_and_limit(example_kf: Path) -> None:
    for args in (["search", "writer"], ["mem", "list"], ["graph", "entities"], ["events"]):
        got = [len(run_ok(*args, flag, "1", "--json").json()) for flag in ("-k", "-n", "--limit")]
        assert got == [1, 1, 1], args
    r = run_ok("context", "writer", "-n", "2", "--json")
    assert r.code in (0, 1), r.err


def test_the_same_records_in_each_format(example_kf: Path) -> None:
    rows = run_ok("graph", "cypher", "MATCH (d:Doc) RETURN d.title AS t ORDER BY t", "--json")
    titles = [r["t"] for r in rows.json()]
    csv = run_ok("graph", "cypher", "MATCH (d:Doc) RETURN d.title AS t ORDER BY t", "--csv")
    assert csv.code == 0 and csv.out.splitlines()[0] == "t"
    assert len(csv.out.splitlines()) == len(titles) + 1
    tsv = run_ok("graph", "cypher", "MATCH (d:Doc) RETURN d.title AS t ORDER BY t", "--tsv")
    assert tsv.out.splitlines() == ["t", *titles]
    jl = run_ok("graph", "cypher", "MATCH (d:Doc) RETURN d.title AS t", "--format", "jsonl")
    assert len(jl.out.splitlines()) == len(titles)
    r = run_ok("graph", "cypher", "MATCH (d:Doc) RETURN d.title", "--csv", "--tsv")
    assert r.code == 2 and r.err.count("\n") == 1
    # one object: one row
    one = run_ok("ask", "what is write-ahead logging?", "--no-llm", "--format", "csv")
    assert one.code == 0, one.err
    import csv as csv_mod

    [row] = list(csv_mod.DictReader(one.out.splitlines(keepends=True)))
    assert row["answer"] and row["citations"].startswith("[")
    ctx = run_ok("context", "write-ahead logging", "--tsv")
    assert ctx.code == 0 and ctx.out.splitlines()[0].split("\t")[0] == "query", ctx.out[:200]


def test_grep_speaks_rg(example_kf: Path) -> None:
    every = run_ok("grep", "Lovelace", "--json").json()
    assert every
    r = run_ok("grep", "Lovelace", "-g", "*.html.ok.md", "--json")
    assert r.code == 0 and {h["path"] for h in r.json()} == {
        h["path"] for h in every if h["path"].endswith(".html.ok.md")
    }
    r = run_ok("grep", "Lovelace", "-g", "*.txt.ok.md")
    assert r.code == 1 and r.out == ""
    only = run_ok("grep", "Love[a-z]+", "-o")
    assert only.code == 0 and {x.split(":", 2)[2] for x in only.out.splitlines()} <= {
        "Lovelace",
        "Loves",
    }
    inv = run_ok("grep", "e", "-v", "--in", "mem")
    assert inv.code in (0, 1)
    for line in inv.out.splitlines():
        assert "e" not in line.split(":", 2)[2]
    both = run_ok("grep", "Babbage", "-v", "-c")
    assert both.code == 0 and all(int(x.rsplit(":", 1)[1]) > 0 for x in both.out.splitlines())
    assert len(run_ok("grep", "Babbage", "--max", "1", "--json").json()) == 1


def test_mem_list_and_events_take_since_and_until(example_kf: Path) -> None:
    assert len(run_ok("mem", "list", "--since", "1d", "--json").json()) == 1
    assert run_ok("mem", "list", "--until", "2000-01-01", "--json").json() == []
    assert run_ok("mem", "list", "--since", "2000-01-01", "--until", "2999-01-01").code == 0
    assert run_ok("events", "--until", "2000-01-01", "--json").json() == []
    assert run_ok("events", "--since", "2000-01-01", "--json").json()
    r = run_ok("mem", "list", "--since", "someday")
    assert r.code == 2 and r.err.count("\n") == 1


def test_cite_open_takes_context_as_grep_does(example_kf: Path) -> None:
    from openkl.cli.root import hoist_root

    assert hoist_root(["cite", "open", "c-1", "-C", "2"]) == ["cite", "open", "c-1", "-C", "2"]
    assert hoist_root(["cite", "list", "-C", "d"]) == ["-C", "d", "cite", "list"]  # --root there
    hit = run_ok("search", "write-ahead logging", "--json", "-k", "1").json()[0]["id"]
    one = run_ok("cite", "open", hit, "-C", "0", "--json").json()
    more = run_ok("cite", "open", hit, "--context", "3", "--json").json()
    assert len(more["text"]) > len(one["text"])
