"""Rewrite the outputs shown in examples/agents.md by running its commands again.

    uv run python examples/update_guide.py

Runs every command of the guide's ```sh blocks in order, in a fresh folder with the clock
pinned (as tests/test_agents_guide.py does), and replaces each shown output with what the
command prints now. Review the diff before committing it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "examples" / "agents.md"


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ok-guide-"))
    bindir = Path(sys.executable).parent
    env = {
        **os.environ,
        "OK_ROOT": str(tmp / "kb"),
        "OK_NOW": "2026-11-30T12:37:34Z",
        "OK_NO_PROGRESS": "1",
        "OK_NO_DAEMON": "1",  # no resident process outlives the script in its temp folder
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
    }

    def run(cmd: str) -> list[str]:
        r = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if r.returncode:
            raise SystemExit(f"failed: {cmd}\n{r.stderr}")
        # the guide names its folder /tmp/guide/kb, as tests/test_agents_guide.py shows it
        out = r.stdout.replace(str(tmp / "kb"), "/tmp/guide/kb").split("\n")
        while out and not out[-1].strip():
            out.pop()
        return out

    lines = GUIDE.read_text(encoding="utf-8").split("\n")
    res: list[str] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```sh"):
            res.append(lines[i])
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        block = lines[i + 1 : end]
        res.append(lines[i])
        if not any(x.startswith("$ ") for x in block):  # setup lines: run, show as they are
            for x in block:
                if x.strip():
                    run(x.split("  #")[0].strip())
            res += block
        else:
            k = 0
            while k < len(block):
                res.append(block[k])
                cmd, k = block[k], k + 1
                old: list[str] = []
                while k < len(block) and not block[k].startswith("$ "):
                    old.append(block[k])
                    k += 1
                blanks = 0
                while old and not old[-1].strip():
                    old.pop()
                    blanks += 1
                new = run(cmd[2:])
                res += (new if old else []) + [""] * blanks
        res.append(lines[end])
        i = end + 1
    GUIDE.write_text("\n".join(res), encoding="utf-8")


if __name__ == "__main__":
    main()
