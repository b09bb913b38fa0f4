"""The user's text editor, as `git commit` runs it: `$VISUAL`, else `$EDITOR`, else `vi`,
through the shell so that `EDITOR="code --wait"` works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..errors import OkError


def command() -> str:
    """The editor command line to run."""
    for var in ("VISUAL", "EDITOR"):
        value = os.environ.get(var, "").strip()
        if value:
            return value
    return "vi"


def edit(path: Path, saved: str = "nothing was saved") -> None:
    """Open `path` in the editor and wait for it; an editor that fails (or cannot be
    started) is an `OkError` that says `saved`: what became of the text."""
    cmd = command()
    sys.stdout.flush()
    sys.stderr.flush()
    # `id=$(ok mem add)`: the editor draws on the terminal, not into the captured output
    out = 2 if not os.isatty(1) and os.isatty(2) and os.isatty(0) else None
    try:
        # like git: the command is shell text and the file its first argument
        code = subprocess.call(["/bin/sh", "-c", f'{cmd} "$@"', cmd, str(path)], stdout=out)
    except OSError as e:
        raise OkError(f"cannot run the editor `{cmd}`: {e}; {saved}", _HINT) from e
    if code == 127:
        raise OkError(f"the editor `{cmd}` was not found; {saved}", _HINT)
    if code != 0:
        raise OkError(
            f"the editor `{cmd}` exited with status {code}; {saved}",
            "an editor that fails aborts, as in git: save and quit it normally to go on",
        )


_HINT = "set $VISUAL or $EDITOR to an editor that works, e.g. `export EDITOR=nano`"


def shown(path: Path) -> str:
    """`path` as the user can type it here: relative to the working directory when inside
    it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def interactive() -> bool:
    """Whether a person is at the terminal to answer a question."""
    return sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()


def again(problem: str) -> bool:
    """Say `problem` and ask whether to open the editor again (yes unless told no), as
    `crontab -e` does; never asks when nobody is at the terminal."""
    if not interactive():
        return False
    print(f"Error: {problem}", file=sys.stderr)
    print("Edit again? [Y/n] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    return answer != "" and answer.strip().lower() in ("", "y", "yes")
