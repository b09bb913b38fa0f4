"""`path:N` is a line wherever a person reads it, as in grep, rg and editors: search, cite
make/list/verify/open and ask print `path:L` or `path:L1-L2`, and `ok open` takes either.
JSON keeps the characters in `loc`."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.run import run_ok

WHERE = re.compile(r"^(?P<path>[^\t:]+):(?P<first>\d+)(?:-(?P<last>\d+))?$")


def _lines(root: Path, path: str, first: int, last: int) -> str:
    return "\n".join((root / path).read_text().splitlines()[first - 1 : last])


def _check(root: Path, where: str, quote: str) -> tuple[int, int]:
    """`where` is path:L or path:L1-L2, and those lines hold the quote."""
    m = WHERE.match(where)
    assert m, where
    first = int(m["first"])
    last = int(m["last"] or first)
    assert last > first or m["last"] is None, where  # one line is written path:L
    text = " ".join(_lines(root, m["path"], first, last).split())
    assert " ".join(quote.split()) in text, (where, quote[:60])
    return first, last


def test_search_cite_and_ask_print_lines(example_kf: Path) -> None:
    hits = run_ok("search", "write-ahead logging", "--json", "-k", "2").json()
    plain = run_ok("search", "write-ahead logging", "-k", "2")
    assert plain.code == 0, plain.err
    for h, line in zip(hits, plain.out.splitlines(), strict=True):
        assert h["loc"]["kind"] == "char"  # JSON keeps characters
        where = line.split("\t")[3]
        assert where.startswith(h["path"] + ":"), where
        _check(example_kf, where, h["quote"])

    chunk = hits[0]
    made = run_ok("cite", "make", chunk["id"], "--persist")
    assert made.code == 0, made.err
    cid, where, _ = made.out.strip().split("\t")
    span = _check(example_kf, where, chunk["quote"])
    listed = run_ok("cite", "list").out.strip().split("\t")
    assert listed[:2] == [cid, where]
    verified = run_ok("cite", "verify", cid)
    assert verified.out.split("\n")[0].split("\t") == ["verified", cid, where]
    opened = run_ok("cite", "open", cid)
    assert opened.code == 0 and f"  {where}  " in opened.err, opened.err
    # and what it printed opens there
    shown = run_ok("open", where, cwd=example_kf)
    assert shown.code == 0, shown.err
    head, _, body = shown.out.partition("\n")
    assert head == where
    assert body.rstrip("\n") == _lines(example_kf, chunk["path"], *span)

    # a note's lines are its file's, frontmatter included
    note = run_ok("search", "one writer at a time", "--in", "mem", "-k", "1")
    where = note.out.split("\t")[3]
    _check(example_kf, where, "Kùzu keeps one writer at a time")
    assert int(WHERE.match(where)["first"]) > 3  # type: ignore[index]

    answer = run_ok("ask", "what does write-ahead logging do?", "--no-llm")
    assert answer.code == 0, answer.err
    sources = [x for x in answer.out.splitlines() if re.match(r"\[\d+\] ", x)]
    assert sources
    full = run_ok("ask", "what does write-ahead logging do?", "--no-llm", "--json").json()
    for line, c in zip(sources, full["citations"], strict=True):
        _check(example_kf, line.split()[1], c["quote"])


def test_verify_of_a_moved_quote_prints_its_new_lines(example_kf: Path) -> None:
    hit = run_ok("search", "Analytical Engine", "--json", "-k", "1").json()[0]
    cid = run_ok("cite", "make", hit["id"], "--persist").out.split("\t")[0]
    p = example_kf / hit["path"]
    p.write_text("# Preface\n\nTwo new lines first.\n\n" + p.read_text())
    r = run_ok("cite", "verify", cid)
    status, got, where = r.out.split("\n")[0].split("\t")[:3]
    assert (status, got) == ("moved", cid)
    _check(example_kf, where, hit["quote"])


def test_open_takes_a_line_and_a_range(example_kf: Path) -> None:
    rel = "store/normalized/docs/write-ahead-logging.ok.md"
    lines = (example_kf / rel).read_text().splitlines()
    r = run_ok("open", f"{rel}:2", cwd=example_kf)
    assert r.out == f"{rel}:2\n{lines[1]}\n"
    r = run_ok("open", f"{rel}:1-3", cwd=example_kf)
    assert r.out == f"{rel}:1-3\n" + "\n".join(lines[:3]) + "\n"
    r = run_ok("open", f"{rel}:3-1", cwd=example_kf)
    assert r.code == 2 and r.err.startswith("Error: ") and r.err.count("\n") == 1
