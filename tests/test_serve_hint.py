"""A command that took over a second without `ok serve` says once, on a terminal, how to
make it fast; never into a pipe, and not when hints.serve is off."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from helpers.run import OK_BIN
from helpers.terminal import at_terminal

HINT = "`ok serve` keeps them loaded"


def _papers(where: Path, n: int) -> Path:
    """Enough text that embedding it takes a while on any machine."""
    where.mkdir(parents=True)
    for i in range(n):
        (where / f"paper-{i}.md").write_text(
            f"# Harbour study {i}\n\n"
            + "\n\n".join(
                f"Section {j} of study {i}: tides, pilots, buoys and breakwaters shape how "
                f"harbour {i} handles ship number {j} at high water and at low water."
                for j in range(60)
            )
            + "\n"
        )
    return where


def test_a_slow_command_says_once_how_to_be_fast(example_kf: Path, tmp_path: Path) -> None:
    env = {**os.environ, "OK_ROOT": str(example_kf), "NO_COLOR": "1"}
    stamp = example_kf / ".ok" / "cache" / "serve-hint"
    code, seen = at_terminal(["store", "ingest", str(_papers(tmp_path / "a", 6))], env)
    assert code == 0, seen
    assert seen.count(HINT) == 1 and "hints.serve false" in seen, seen
    assert stamp.exists()
    # said once: the next slow command is quiet
    code, seen = at_terminal(["store", "ingest", str(_papers(tmp_path / "b", 6))], env)
    assert code == 0 and HINT not in seen, seen
    # never into a pipe
    stamp.unlink()
    piped = subprocess.run(
        [OK_BIN, "store", "ingest", str(_papers(tmp_path / "c", 6))],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert piped.returncode == 0 and HINT not in piped.stderr and not stamp.exists()
    # and not at all when the setting is off
    code, seen = at_terminal(
        ["store", "ingest", str(_papers(tmp_path / "d", 6))], {**env, "OK_HINTS_SERVE": "false"}
    )
    assert code == 0 and HINT not in seen and not stamp.exists(), seen
