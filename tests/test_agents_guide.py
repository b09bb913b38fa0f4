"""examples/agents.md shows real commands with their real output: run them and compare."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers.run import OK_BIN, REPO

GUIDE = REPO / "examples" / "agents.md"
NOTE_ID = re.compile(r"m-\d{8}-[a-z0-9]{4}")  # random by design
SHOWN_ROOT = "/tmp/guide/kb"  # the folder as the guide names it


def guide_steps(text: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for every `$ ` line of the ```sh blocks; the lines of
    a block without `$ ` are setup commands, with no expected output (None-like: [])."""
    steps: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M):
        lines = block.rstrip("\n").split("\n")
        if not any(line.startswith("$ ") for line in lines):
            steps += [(line.split("  #")[0].strip(), []) for line in lines if line.strip()]
            continue
        for line in lines:
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
    return [(cmd, _trim(out)) for cmd, out in steps]


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


@pytest.mark.timeout(900)  # every command of the guide, one `ok` process each
def test_every_command_prints_what_the_guide_shows(tmp_path: Path) -> None:
    steps = guide_steps(GUIDE.read_text(encoding="utf-8"))
    assert len(steps) >= 15
    env = {
        **os.environ,
        "OK_ROOT": str(tmp_path / "kb"),
        "OK_NOW": "2026-11-30T12:37:34Z",
        "PATH": f"{Path(OK_BIN).parent}{os.pathsep}{os.environ['PATH']}",
    }
    for cmd, expected in steps:
        r = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, (cmd, r.stderr)
        if expected:
            # the guide's folder is /tmp/guide/kb (absolute paths show it): this run's differs
            got = _trim(r.stdout.replace(str(tmp_path / "kb"), SHOWN_ROOT).split("\n"))
            assert [NOTE_ID.sub("m-ID", x) for x in got] == [
                NOTE_ID.sub("m-ID", x) for x in expected
            ], f"{cmd}  (if the new output is right: uv run python examples/update_guide.py)"
