"""The command reference in docs/commands.md is generated from --help and must be current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_command_reference_is_current() -> None:
    r = subprocess.run(
        [sys.executable, str(REPO / "docs" / "gen_commands.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr


def test_every_command_has_help_text() -> None:
    text = (REPO / "docs" / "commands.md").read_text()
    sections = text.split("\n### ")[1:] + text.split("\n#### ")[1:]
    assert len(sections) > 40
    for sec in sections:
        usage_block = sec.split("```")[1]
        lines = [x for x in usage_block.splitlines() if x.strip()]
        assert len(lines) >= 3, sec[:80]  # usage, a description, options
