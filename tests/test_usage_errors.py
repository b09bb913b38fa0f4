"""Counts and limits out of range are usage errors (exit 2, one line naming the option),
not silently read as "all" or passed on to fail deeper down."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.run import run_ok


@pytest.mark.parametrize(
    "args",
    [
        ("mem", "list", "-n", "-1"),
        ("events", "-n", "-1"),
        ("graph", "entities", "-n", "-1"),
        ("graph", "export", "--max-entities", "0", "-o", "-"),
    ],
)
def test_negative_or_zero_counts_are_refused(kf: Path, args: tuple[str, ...]) -> None:
    r = run_ok(*args)
    assert r.code == 2, (r.out, r.err)
    assert ("--limit" in r.err or "--max-entities" in r.err) and "greater than or equal" in r.err
    assert "Traceback" not in r.err


def test_zero_still_means_all(example_kf: Path) -> None:
    assert len(run_ok("mem", "list", "-n", "0", "--json").json()) >= 1


def test_doctor_names_a_lock_holder_that_has_not_said_who_it_is(kf: Path) -> None:
    """A holder that has the lock but has not written its pid yet (or never does)."""
    lock = kf / ".ok" / "lock"
    lock.write_text("")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time\n"
            "f = open(sys.argv[1], 'r+')\n"
            "fcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(120)\n",
            str(lock),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        r = run_ok("doctor", "--json")
        [check] = [c for c in r.json() if c["check"] == "lock"]
        assert "pid None" not in check["detail"]
        assert "another process" in check["detail"]
    finally:
        holder.kill()
        holder.wait()
