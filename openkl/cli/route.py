"""The `ok` entry point: when an `ok serve` owns the folder, the command runs there.

This module imports only the standard library, so that a routed command costs a Python
start and a socket round trip, not the import of the CLI, the graph or the model. The
server (openkl.server.route) runs the command with this process's stdin, stdout and
stderr, arguments, working directory and environment, and answers with its exit code, so
output and exit codes are those of the command run here. With no server, or
`OK_NO_ROUTE=1`, the command runs in this process as always."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType

from .argv import OWN_C, OWN_ROOT, command_at

HELLO = b"OK1\n"
# commands that never go to a server: they make a folder, run one, or touch no graph
# (`ok serve keys …` does go: the server holds the folder's writer lock)
_LOCAL = {"init", "serve", "completion"}


def main() -> None:
    """Console entry point."""
    code = forward(sys.argv[1:])
    if code is None:
        from .app import main as here

        here()
        return
    raise SystemExit(code)


def forward(argv: list[str]) -> int | None:
    """Run `argv` on the server that owns its folder and return the exit code; None when
    no server owns it (the caller then runs the command itself)."""
    if os.environ.get("OK_NO_ROUTE") == "1":
        return None
    socket_file = served_socket(argv)
    if socket_file is None:
        return None
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(socket_file)
    except OSError:
        return None  # gone: the command, run here, cleans up what the server left
    with conn:
        return _call(conn, argv)


def served_socket(argv: list[str]) -> str | None:
    """The routing socket of the server that owns every folder `argv` works on, or None."""
    at = command_at(argv)
    if at is None or (argv[at] in _LOCAL and not _is_keys(argv, at)):
        return None
    if any(a in ("--help", "-h") for a in _before_dashdash(argv)):
        return None
    sockets: set[str] = set()
    for root in _roots(argv, at):
        record = _claim(root)
        where = None if record is None else record.get("socket")
        if not isinstance(where, str):
            return None
        sockets.add(where)
    return sockets.pop() if len(sockets) == 1 else None


def _is_keys(argv: list[str], at: int) -> bool:
    return argv[at] == "serve" and "keys" in argv[at + 1 :]


def _before_dashdash(argv: list[str]) -> list[str]:
    return argv[: argv.index("--")] if "--" in argv else argv


def _roots(argv: list[str], at: int) -> list[Path | None]:
    """The folders the command works on, as `ok` itself finds them: the last --root/-C
    (before or after the subcommand), else $OK_ROOT, else the nearest parent with .ok/.
    `ok mcp`'s own --root options each name one."""
    cmd = argv[at]
    given: list[str] = []
    own: list[str] = []
    args = _before_dashdash(argv)
    i = 0
    while i < len(args):
        a = args[i]
        mine = cmd in OWN_ROOT and i > at
        if a.startswith("--root="):
            (own if mine else given).append(a.split("=", 1)[1])
        elif (a == "--root" or (a == "-C" and not (cmd in OWN_C and i > at))) and i + 1 < len(args):
            (own if mine and a == "--root" else given).append(args[i + 1])
            i += 1
        i += 1
    if own:
        return [_find(o) for o in own]
    return [_find(given[-1] if given else os.environ.get("OK_ROOT") or None)]


def _find(given: str | None) -> Path | None:
    try:
        if given:
            root = Path(given).expanduser().resolve()
            return root if (root / ".ok").is_dir() else None
        here = Path.cwd().resolve()
    except OSError:
        return None
    for d in (here, *here.parents):
        if (d / ".ok").is_dir():
            return d
    return None


def _claim(root: Path | None) -> dict[str, object] | None:
    if root is None:
        return None
    try:
        record = json.loads((root / ".ok" / "serve.json").read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _call(conn: socket.socket, argv: list[str]) -> int:
    fds: list[int] = []
    opened: list[int] = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:  # a closed stream reads as empty and writes nowhere, as here
            opened.append(os.open(os.devnull, os.O_RDWR))
            fds.append(opened[-1])
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = "/"
    request = {
        "argv": argv,
        "cwd": cwd,
        "env": dict(os.environ),
        "encoding": getattr(sys.stdout, "encoding", None) or "utf-8",
    }
    try:
        socket.send_fds(conn, [HELLO], fds)
        conn.sendall(json.dumps(request).encode() + b"\n")
    except OSError:
        return _lost()
    finally:
        for fd in opened:
            os.close(fd)

    def tell(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"signal": signum}).encode() + b"\n")
        if signum != signal.SIGINT:  # the command is interrupted; this process ends as told
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, tell)
    reply = b""
    while not reply.endswith(b"\n"):
        try:
            more = conn.recv(4096)
        except InterruptedError:
            continue
        except OSError:
            more = b""
        if not more:
            return _lost()
        reply += more
    try:
        answer = json.loads(reply)
    except ValueError:
        return _lost()
    if "exit" not in answer:
        print(f"Error: ok serve could not run the command: {answer.get('error')}", file=sys.stderr)
        return 1
    return int(answer["exit"])


def _lost() -> int:
    print(
        "Error: the `ok serve` that owns this folder stopped before the command finished "
        "(hint: run `ok status`; rerun the command once the server is back, or without it)",
        file=sys.stderr,
    )
    return 1
