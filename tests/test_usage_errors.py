"""Counts and limits out of range are usage errors (exit 2, one line naming the option),
not silently read as "all" or passed on to fail deeper down."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
from conftest import run_ok


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
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, 0)
        pid = os.fork()
        if pid == 0:  # the child holds the lock until killed
            fcntl.flock(fd, fcntl.LOCK_EX)
            while True:
                os.pause()
        try:
            import time

            for _ in range(100):  # until the child has it
                try:
                    fcntl.flock(os.open(lock, os.O_RDWR), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    break
                time.sleep(0.05)
            r = run_ok("doctor", "--json")
            [check] = [c for c in r.json() if c["check"] == "lock"]
            assert "pid None" not in check["detail"]
            assert "another process" in check["detail"]
        finally:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    finally:
        os.close(fd)
