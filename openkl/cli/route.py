"""The `ok` entry point: when an `ok serve` owns the folder, the command runs there.

This module imports only the standard library, so that a routed command costs a Python
start and a socket round trip, not the import of the CLI, the graph or the model. When no
server owns the folder, most commands first start the folder's resident process
(openkl.cli.spawn: an `ok serve` without HTTP that exits when idle; OK_NO_DAEMON=1 or
`serve.auto: false` turns that off) and run in it. The
server (openkl.server.command_socket) runs the command with this process's stdin, stdout and
stderr, arguments, working directory and the variables of its environment the command may
read (`environment`), and answers with its exit code, so output and exit codes are those
of the command run here. With no server, or `OK_NO_ROUTE=1`, the command runs in this
process as always.

Nothing is sent before the server is known to be this user's own live `ok serve` of the
folder (`openkl.files.routing`: the claim's process, its socket in a private directory, the
kernel's peer credentials, then the server's own word on the folders it serves). When any
of that fails the command runs here, where it is told, in one line, if the folder is
served after all."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import NamedTuple

from ..files import routing
from . import spawn
from .argv import OWN_ROOT, command_at, own_c

HELLO = b"OK1\n"
GREETING_MAX = 1 << 20
REACH_WITHIN = 60.0  # seconds a command tries to reach the resident process it started

# the variables a routed command receives, whatever it is: what the command, its editor,
# its pager and its web requests read (the rest of the environment stays in this process)
SENT = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TZ", "LANG", "LANGUAGE",
        "TERM", "COLORTERM", "TERM_PROGRAM", "NO_COLOR", "FORCE_COLOR", "CLICOLOR",
        "CLICOLOR_FORCE", "COLUMNS", "LINES", "EDITOR", "VISUAL", "PAGER", "LESS",
        "DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "VSCODE_IPC_HOOK_CLI",
        "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
        "http_proxy", "https_proxy", "all_proxy", "no_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
    }
)  # fmt: skip
SENT_PREFIXES = ("OK_", "LC_", "XDG_")
# the model's key (llm.api_key_env: a name ending in _API_KEY) goes with every command but
# these, which never ask a model
NO_MODEL = {
    ("search",), ("grep",), ("open",), ("status",), ("events",), ("doctor",),
    ("mem", "list"), ("mem", "show"), ("mem", "search"), ("mem", "topics"),
    ("store", "list"), ("store", "show"), ("store", "history"),
    ("graph", "cypher"), ("graph", "lineage"), ("graph", "entities"), ("graph", "entity"),
    ("graph", "traverse"), ("graph", "export"), ("trigger", "list"), ("trigger", "test"),
    ("cite", "list"), ("config",), ("backfeed", "queue"), ("backfeed", "show"),
    ("bundle", "validate"), ("distill", "prompts"), ("distill", "get-prompt"), ("serve",),
}  # fmt: skip
KEY_SUFFIX = "_API_KEY"
# git's, ssh's and AWS's variables (credentials among them) go with what may fetch a
# repository or S3 objects
FETCHES = {("store", "repo"), ("store", "s3"), ("refresh",), ("mcp",)}
FETCH_VARS = frozenset({"SSH_AUTH_SOCK"})
FETCH_PREFIXES = ("GIT_", "AWS_")
# commands that never go to a server: they make a folder, run one, or touch no graph
# (`ok serve keys …` does go: the server holds the folder's writer lock)
_LOCAL = {"init", "serve", "completion", "daemon"}
# commands that, when no server owns their folder, start its resident process (cli.spawn) and
# run in it: not these, which open no graph (a resident process would only cost memory) or
# run until stopped
_NO_START = _LOCAL | {"grep", "config", "open", "mcp"}


def main() -> None:
    """Console entry point."""
    if sys.argv[1:] == ["--version"]:  # what scripts ask first: no CLI to load for it
        from importlib.metadata import version

        print(f"ok {version('openkl')}")
        return
    argv = sys.argv[1:]
    code = forward(argv)
    try:
        if code is None and _started(argv):
            code = _forward_started(argv)
    except KeyboardInterrupt:  # while waiting for the resident process, which starts on
        print("Interrupted.", file=sys.stderr)
        raise SystemExit(130) from None
    if code is None:
        from .root import main as here

        here()
        return
    raise SystemExit(code)


def forward(argv: list[str]) -> int | None:
    """Run `argv` on the server that owns its folder and return the exit code; None when
    no server of ours owns it (the caller then runs the command itself)."""
    if os.environ.get("OK_NO_ROUTE") == "1":
        return None
    conn = connect(served(argv))
    if conn is None:
        return None  # none, gone, or not ours: the command, run here, says what it finds
    with conn:
        return _call(conn, argv)


def _forward_started(argv: list[str]) -> int | None:
    """`forward` to the resident process just started for the folder: it owns the folder,
    yet on a busy machine its first connection may not be taken at once; tried again
    while it owns the folder, for up to REACH_WITHIN seconds."""
    import time  # only on this path

    deadline = time.monotonic() + REACH_WITHIN
    pause = 0.05
    while True:
        code = forward(argv)
        if code is not None or time.monotonic() >= deadline:
            return code
        roots = _roots(argv, command_at(argv) or 0)
        if len(roots) != 1 or roots[0] is None or spawn.owner(roots[0]) is None:
            return None  # no longer served: the command runs here and says what it finds
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def _started(argv: list[str]) -> bool:
    """Whether the folder `argv` works on has a resident process now, started for it (or
    by another command at the same moment): only for the commands that start one, only
    where one may start (`spawn.may_start`)."""
    if os.environ.get("OK_NO_ROUTE") == "1" or spawn.turned_off(os.environ):
        return False
    at = command_at(argv)
    if at is None or argv[at] in _NO_START:
        return False
    if any(a in ("--help", "-h") for a in _before_dashdash(argv)):
        return False
    roots = _roots(argv, at)
    if len(roots) != 1 or roots[0] is None or not spawn.may_start(roots[0]):
        return False
    return spawn.start(roots[0]) is not None


class Claim(NamedTuple):
    """What `.ok/serve.json` says of the server that owns the folders a command works on."""

    pid: int
    socket: Path
    roots: tuple[str, ...]  # the folders (real paths)


def served(argv: list[str]) -> Claim | None:
    """The claim of the one live `ok serve` of ours that owns every folder `argv` works on,
    or None."""
    at = command_at(argv)
    if at is None or (argv[at] in _LOCAL and not _is_keys(argv, at)):
        return None
    if any(a in ("--help", "-h") for a in _before_dashdash(argv)):
        return None
    found: set[tuple[int, str]] = set()
    roots: list[str] = []
    for root in _roots(argv, at):
        record = _claim(root)
        where = None if record is None else record.get("socket")
        pid = None if record is None else record.get("pid")
        if not isinstance(where, str) or not isinstance(pid, int) or isinstance(pid, bool):
            return None
        if not routing.is_own_server(pid, record or {}):
            return None
        found.add((pid, where))
        roots.append(os.path.realpath(root or "."))
    if len(found) != 1:
        return None
    pid, where = found.pop()
    return Claim(pid, Path(where), tuple(roots))


def served_socket(argv: list[str]) -> str | None:
    """The routing socket of the live server of ours that owns every folder `argv` works
    on, or None."""
    claim = served(argv)
    return None if claim is None else str(claim.socket)


def connect(claim: Claim | None) -> socket.socket | None:
    """A connection to the server `claim` names, once it is known to be that server and to
    serve the claim's folders (its greeting says so); None, nothing sent, otherwise."""
    if claim is None:
        return None
    conn = routing.connect(claim.socket, claim.pid)
    if conn is None:
        return None
    try:
        greeting = b""
        while not greeting.endswith(b"\n") and len(greeting) < GREETING_MAX:
            more = conn.recv(65536)
            if not more:
                break
            greeting += more
        said = json.loads(greeting)
        if said.get("pid") != claim.pid or not set(claim.roots) <= set(said.get("roots", [])):
            raise ValueError("not the server of these folders")
        conn.settimeout(None)  # the command may run for as long as it runs
    except (OSError, ValueError, AttributeError):
        conn.close()
        return None
    return conn


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
    context_c = own_c(args, at)
    i = 0
    while i < len(args):
        a = args[i]
        mine = cmd in OWN_ROOT and i > at
        if a.startswith("--root="):
            (own if mine else given).append(a.split("=", 1)[1])
        elif (
            a == "--root" or (a == "-C" and not (context_c is not None and i > context_c))
        ) and i + 1 < len(args):
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
        "env": environment(argv, os.environ),
        "encoding": getattr(sys.stdout, "encoding", None) or "utf-8",
    }
    # a signal that comes while the request is on its way (the command may already be
    # running there) waits for the request to be whole, then goes to the command
    held: list[int] = []
    _on_signals(lambda signum, frame: held.append(signum))
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

    _on_signals(tell)
    for signum in held:
        tell(signum, None)
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


def _on_signals(handler: Callable[[int, FrameType | None], None]) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, handler)


def environment(argv: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` that the command `argv` may read, and only those: see
    SENT, NO_MODEL and FETCHES."""
    cmd = _command(argv)
    model = not any(cmd[: len(c)] == c for c in NO_MODEL)
    fetch = any(cmd[: len(c)] == c for c in FETCHES)

    def sent(name: str) -> bool:
        if name in SENT or name.startswith(SENT_PREFIXES):
            return True
        if model and name.endswith(KEY_SUFFIX):
            return True
        return fetch and (name in FETCH_VARS or name.startswith(FETCH_PREFIXES))

    return {k: v for k, v in environ.items() if sent(k)}


def _command(argv: list[str]) -> tuple[str, ...]:
    """The command's name and its subcommand's (`("mem", "add")`), as far as they are
    words before any option."""
    at = command_at(argv)
    if at is None:
        return ()
    words = [argv[at]]
    if at + 1 < len(argv) and not argv[at + 1].startswith("-"):
        words.append(argv[at + 1])
    return tuple(words)


def _lost() -> int:
    print(
        "Error: the `ok serve` that owns this folder stopped before the command finished "
        "(hint: run `ok status`; rerun the command once the server is back, or without it)",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":  # how a resident process is started (cli.spawn)
    main()
