"""The unix socket on which `ok serve` runs other `ok` commands for the folders it owns.

A client (`openkl.cli.route`) connects, checks that this process is the server the folder's
claim names (`openkl.files.routing`) and reads this server's greeting, one JSON line with its
pid and the folders it serves; then it passes its stdin, stdout and stderr as file
descriptors, then one JSON line: its arguments, working directory and the part of its
environment the command may read. The command runs here, in a thread of its own that has
the client's streams, environment and working directory, over the graph and model this
process keeps open; its output goes straight to the client's terminal or pipe. The answer is one JSON line, `{"exit": N}`.
While the command runs the client may send `{"signal": N}` (Ctrl-C, a kill): the command
is interrupted as Ctrl-C interrupts it in a process of its own. A client that goes away
interrupts it too.

Only processes of the server's own user may connect: the socket is 0600 in a directory
only that user may enter (`openkl.files.routing`), and a peer of another uid (by the kernel's
peer credentials) is refused before anything else is said or read."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ..files import routing, streams
from ..files.folder import iso

HELLO = b"OK1\n"
MAX_REQUEST = 4 << 20  # the JSON line: arguments and environment
_CLONE_FS = 0x00000200


def socket_path(ok_dir: Path, name: str = "http") -> Path:
    """Where the socket of the HTTP API with --socket-only goes: in `.ok/`, or, when that
    path is longer than a unix socket address can be, in the temp directory under a name
    derived from it. (The routing socket is made by `routing.listen`.)"""
    p = ok_dir / f"{name}.sock"
    if len(os.fsencode(p)) < 100:
        return p
    import hashlib

    digest = hashlib.sha256(os.fsencode(ok_dir.resolve())).hexdigest()[:20]
    return Path("/tmp") / f"ok-{name}-{os.getuid()}-{digest}.sock"


class Router:
    """Accept routed commands for the folder `ok_dir` (and the others `roots()` names: the
    folders served) and run each with `run(argv) -> exit code`."""

    def __init__(
        self,
        ok_dir: Path,
        run: Callable[[list[str]], int],
        roots: Callable[[], list[Path]] = lambda: [],
    ) -> None:
        self.ok_dir = ok_dir
        self.path: Path | None = None  # where the socket is, once started
        self._run = run
        self._roots = roots
        self._sock: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._workers: dict[int, threading.Thread] = {}
        self._interrupted: set[int] = set()  # the workers `stop()` interrupted
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._open = 0  # connections accepted and not yet closed
        self._quiet_since = time.monotonic()  # when the last connection closed
        self.commands = 0  # commands run

    def start(self) -> None:
        """Make the socket (in a private directory: `routing.listen`) and take commands."""
        streams.install()
        self._sock, self.path = routing.listen(self.ok_dir)
        self._accepting = threading.Thread(target=self._accept, name="ok-route", daemon=True)
        self._accepting.start()

    def stop(self) -> None:
        """Stop taking commands and interrupt the ones under way (as Ctrl-C would: a write
        rolls back, a wait for the writer lock ends), without waiting for them. Quick, so
        that it can run in a signal handler."""
        self._closing.set()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            # once each: a second interrupt would cut short the first one's "Interrupted."
            workers = [t for k, t in self._workers.items() if k not in self._interrupted]
            self._interrupted.update(id(t) for t in workers)
        for t in workers:
            _interrupt(t)

    def close(self) -> None:
        """`stop()`, then wait for the commands under way (a while) and remove the socket."""
        self.stop()
        if self._sock is not None:
            self._sock.close()
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            if self.path.parent.name.startswith("ok-run-"):  # the temp directory's own
                with contextlib.suppress(OSError):
                    self.path.parent.rmdir()
        with self._lock:
            workers = list(self._workers.values())
        for t in workers:
            t.join(timeout=10)

    def close_if_idle(self, seconds: float) -> bool:
        """Stop taking commands when no connection is open and none was for `seconds`
        (then True). A client that connects from then on finds the socket closed, sends
        nothing and runs its command elsewhere."""
        with self._lock:
            if self._open or time.monotonic() - self._quiet_since < seconds:
                return False
            self._closing.set()
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_RDWR)
            return True

    def busy(self) -> bool:
        """A client is connected (a command runs, or is about to)."""
        with self._lock:
            return self._open > 0

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._closing.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:  # counted, or closed, before an idle check can pass it by
                if self._closing.is_set():
                    conn.close()
                    return
                self._open += 1
            threading.Thread(
                target=self._serve, args=(conn,), name="ok-route-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            pid, uid = routing.peer(conn)
            if uid != os.getuid():
                _log(event="route.refused", pid=pid, uid=uid)
                refused = "refused: this server runs the commands of its own user only"
                conn.sendall(json.dumps({"error": refused}).encode() + b"\n")
                return
            roots = [os.path.realpath(r) for r in self._roots()]
            conn.sendall(json.dumps({"pid": os.getpid(), "roots": roots}).encode() + b"\n")
            fds, request = _receive(conn)
            self._command(conn, fds, request)
        except (OSError, ValueError) as e:
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"error": str(e)}).encode() + b"\n")
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()
            with self._lock:
                self._open -= 1
                self._quiet_since = time.monotonic()

    def _command(self, conn: socket.socket, fds: list[int], request: dict[str, Any]) -> None:
        argv = [str(a) for a in request.get("argv", [])]
        cwd = str(request.get("cwd") or "/")
        env = {str(k): str(v) for k, v in dict(request.get("env") or {}).items()}
        encoding = str(request.get("encoding") or "utf-8")
        result: dict[str, int] = {}
        done_r, done_w = os.pipe()  # written when the command ends: wakes the watch

        def work() -> None:
            try:
                result["exit"] = _run_as_client(self._run, argv, cwd, env, fds, encoding)
            finally:
                os.write(done_w, b"x")

        worker = threading.Thread(target=work, name="ok-route-command", daemon=True)
        with self._lock:
            self._workers[id(worker)] = worker
            self.commands += 1
        try:
            worker.start()
            _watch_client(conn, worker, done_r)
            worker.join()
        finally:
            with self._lock:
                self._workers.pop(id(worker), None)
                self._interrupted.discard(id(worker))
            os.close(done_r)
            os.close(done_w)
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"exit": result.get("exit", 1)}).encode() + b"\n")


def _log(**fields: object) -> None:
    """A line of the server's log (the access log's shape)."""
    print(json.dumps({"ts": iso(), **fields}), file=streams.concrete(sys.stderr), flush=True)


def _receive(conn: socket.socket) -> tuple[list[int], dict[str, Any]]:
    msg, fds, _flags, _addr = socket.recv_fds(conn, len(HELLO), 3)
    fds = list(fds)
    while len(msg) < len(HELLO) and msg == HELLO[: len(msg)]:
        more = conn.recv(len(HELLO) - len(msg))
        if not more:
            break
        msg += more
    if msg != HELLO or len(fds) != 3:
        raise ValueError("not an ok client")
    buf = b""
    while not buf.endswith(b"\n"):
        more = conn.recv(65536)
        if not more:
            raise ValueError("the request ended early")
        buf += more
        if len(buf) > MAX_REQUEST:
            raise ValueError("the request is too large")
    request = json.loads(buf)
    if not isinstance(request, dict):
        raise ValueError("the request is not a JSON object")
    return fds, request


def _watch_client(conn: socket.socket, worker: threading.Thread, done: int) -> None:
    """Until the command ends (`done` is readable): a signal from the client, or the client
    gone, interrupts it."""
    buf = b""
    while True:
        ready, _, _ = select.select([conn.fileno(), done], [], [])
        if done in ready:
            return
        try:
            more = conn.recv(4096)
        except OSError:
            more = b""
        if not more:
            _interrupt(worker)
            return
        buf += more
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            with contextlib.suppress(ValueError):
                if "signal" in json.loads(line):
                    _interrupt(worker)


def _interrupt(t: threading.Thread) -> None:
    """Raise KeyboardInterrupt in `t` (at its next Python instruction), as Ctrl-C would."""
    if t.ident is not None and t.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(t.ident), ctypes.py_object(KeyboardInterrupt)
        )


def _own_directory(cwd: str) -> None:
    """Give this thread a working directory of its own (unshare CLONE_FS), then enter `cwd`:
    relative paths in the command mean what they meant to the client."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_FS) != 0:
        raise OSError(ctypes.get_errno(), "cannot give the command its own working directory")
    os.chdir(cwd)


def _run_as_client(
    run: Callable[[list[str]], int],
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    fds: list[int],
    encoding: str,
) -> int:
    files: list[IO[Any]] = []
    try:
        stdin = os.fdopen(os.dup(fds[0]), "r", encoding=encoding, errors="surrogateescape")
        files.append(stdin)
        # buffered as Python buffers its own: by line on a terminal, in blocks on a pipe
        out, err = (
            os.fdopen(
                os.dup(fd),
                "w",
                encoding=encoding,
                errors=errors,
                buffering=1 if os.isatty(fd) or errors != "strict" else -1,
            )
            for fd, errors in ((fds[1], "strict"), (fds[2], "backslashreplace"))
        )
        files += [out, err]
    except OSError:
        return 1
    try:
        with streams.bound(stdin, out, err, env):
            try:
                _own_directory(cwd)
            except OSError as e:
                print(f"Error: cannot enter {cwd}: {e.strerror}", file=err)
                return 1
            try:
                code = run(argv)
                out.flush()
            except BrokenPipeError:  # the reader of the output went away (`ok … | head`)
                code = 0
            except KeyboardInterrupt:
                print("Interrupted.", file=err)
                code = 130
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            return code
    finally:
        for f in files:
            with contextlib.suppress(OSError, ValueError):
                f.close()
        sys.stdout.flush()
