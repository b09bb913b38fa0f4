"""examples/demo.sh: the command lines it shows can be pasted back into a shell."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from helpers.run import OK_BIN, REPO


def _sections(out: str) -> list[tuple[str, str]]:
    """The demo's output as (command line shown, what followed it) pairs."""
    parts = re.split(r"^\$ (.*)$", out, flags=re.M)
    return [(parts[i], parts[i + 1].strip("\n")) for i in range(1, len(parts) - 1, 2)]


@pytest.mark.timeout(900)  # the demo, then each of its reads again: an `ok` process each
def test_demo_command_lines_paste_back(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(OK_BIN).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("OK_ROOT", None)
    demo = subprocess.run(
        ["bash", str(REPO / "examples/demo.sh"), str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stderr
    assert "\033[" not in demo.stdout  # not a terminal: no colour codes in the way
    sections = _sections(demo.stdout)
    lines = [line for line, _ in sections]
    assert lines[0] == "export OK_ROOT=" + shlex.quote(str(tmp_path / "demo" / "kb"))
    # the words of each shown line are the arguments the demo ran
    note = next(line for line in lines if line.startswith("ok mem add "))
    assert shlex.split(note) == [
        "ok",
        "mem",
        "add",
        "Kùzu allows one writer at a time; open it per call.",
        "--tags",
        "kuzu,concurrency",
    ]
    # pasted into a shell, the lines that only read print what the demo printed
    reads = sections[lines.index(note) + 1 :]
    assert len(reads) >= 6 and any("|" in line for line, _ in reads)
    for line, printed in reads:
        again = subprocess.run(
            ["bash", "-c", f"set -o pipefail\n{lines[0]}\n{line}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert again.returncode == 0, (line, again.stderr)
        if line != "ok status":
            assert again.stdout.strip("\n") == printed, line
        else:  # the demo's closing words follow the status
            assert printed.startswith(again.stdout.strip("\n")), line
