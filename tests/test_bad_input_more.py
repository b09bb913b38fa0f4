"""More bad input: each gets one clear line and a non-zero exit, and writes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.run import run_cli, run_ok


def _files(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and ".ok" not in p.relative_to(root).parts[:1]
    }


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["store", "ingest", ""], "an empty path was given"),
        (["trigger", "add", "x", "-e", "tides", "--timeout", "nan"], "timeout nan"),
        (["trigger", "add", "x", "-e", "tides", "--timeout", "1e400"], "timeout inf"),
        (["trigger", "add", "x", "-e", "tides", "--timeout", "-1"], "timeout -1"),
        (
            ["graph", "cypher", "RETURN $x AS x", "-p", "x=99999999999999999999999999"],
            "does not fit in a 64-bit integer",
        ),
    ],
)
def test_refused_with_one_line(example_ro: Path, args: list[str], says: str) -> None:
    before = _files(example_ro)
    r = run_ok(*args, cwd=example_ro)
    assert r.code in (1, 2), r
    assert says in r.err and "unexpected" not in r.err, r.err
    assert _files(example_ro) == before


def test_a_note_that_is_not_utf8_is_refused(example_kf: Path) -> None:
    """Bytes that are not UTF-8 on the command line reach Python as lone surrogates."""
    before = _files(example_kf)
    r = run_cli("mem", "add", os.fsdecode(b"\xff\xfe notes"), env={"OK_ROOT": str(example_kf)})
    assert r.code == 2 and "not valid UTF-8" in r.err and "unexpected" not in r.err, r.err
    assert _files(example_kf) == before
