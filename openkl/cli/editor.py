"""The user's text editor, as `git commit` runs it: `$VISUAL`, else `$EDITOR`, else `vi`,
through the shell so that `EDITOR="code --wait"` works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..errors import OkError
from ..files.streams import fd_of
from .output import waiting


def command() -> str:
    """The editor command line to run."""
    for var in ("VISUAL", "EDITOR"):
        value = os.environ.get(var, "").strip()
        if value:
            return value
    return "vi"


# GUI editors of the VS Code family take `--goto file:line`; the rest (vi, vim, nvim, nano,
# emacs, micro, kak, helix …) take `+LINE file`
_GOTO_EDITORS = {"code", "code-insiders", "codium", "vscodium", "cursor", "windsurf"}


def file_args(cmd: str, path: str, line: int | None = None) -> list[str]:
    """The arguments that open `path` in the editor `cmd`, at `line` when given."""
    if line is None:
        return [path]
    import shlex

    try:
        first = shlex.split(cmd)[0]
    except (ValueError, IndexError):
        first = cmd
    if os.path.basename(first).removesuffix(".exe") in _GOTO_EDITORS:
        return ["--goto", f"{path}:{line}"]
    return [f"+{line}", path]


def edit(path: Path, saved: str | None = "nothing was saved", line: int | None = None) -> None:
    """Open `path` in the editor (at `line` when given) and wait for it; an editor that
    fails (or cannot be started) is an `OkError` that says `saved`: what became of the
    text."""
    cmd = command()
    tail = f"; {saved}" if saved else ""
    sys.stdout.flush()
    sys.stderr.flush()
    # `id=$(ok mem add)`: the editor draws on the terminal, not into the captured output
    fds = [fd_of(s) for s in (sys.stdin, sys.stdout, sys.stderr)]
    tty = [fd is not None and os.isatty(fd) for fd in fds]
    out = fds[2] if not tty[1] and tty[2] and tty[0] else fds[1]
    args = file_args(cmd, str(path), line)
    try:
        # like git: the command is shell text and the file its argument
        with waiting():  # the person writes: not the command's time
            code = subprocess.call(
                ["/bin/sh", "-c", f'{cmd} "$@"', cmd, *args],
                stdin=fds[0],
                stdout=out,
                stderr=fds[2],
                env=dict(os.environ),
            )
    except OSError as e:
        raise OkError(f"cannot run the editor `{cmd}`: {e}{tail}", _HINT) from e
    if code == 127:
        raise OkError(f"the editor `{cmd}` was not found{tail}", _HINT)
    if code != 0:
        raise OkError(
            f"the editor `{cmd}` exited with status {code}{tail}",
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
    with waiting():
        answer = sys.stdin.readline()
    return answer != "" and answer.strip().lower() in ("", "y", "yes")
