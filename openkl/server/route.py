"""The unix socket on which `ok serve` runs other `ok` commands for the folders it owns.

A client (`openkl.cli.route`) connects, passes its stdin, stdout and stderr as file
descriptors, then one JSON line: its arguments, working directory and environment. The
command runs here, in a thread of its own that has the client's streams, environment and
working directory, over the graph and model this process keeps open; its output goes
straight to the client's terminal or pipe. The answer is one JSON line, `{"exit": N}`.
While the command runs the client may send `{"signal": N}` (Ctrl-C, a kill): the command
is interrupted as Ctrl-C interrupts it in a process of its own. A client that goes away
interrupts it too.

Only processes of the server's own user may connect (the socket is 0600 and the peer's
uid is checked)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import socket
import struct
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .. import streams

HELLO = b"OK1\n"
MAX_REQUEST = 4 << 20  # the JSON line: arguments and environment
_CLONE_FS = 0x00000200


def socket_path(ok_dir: Path, name: str = "serve") -> Path:
    """Where a socket of the server goes (`serve`: this routing one; `http`: the API with
    --socket-only): in `.ok/`, or, when that path is longer than a unix socket address can
    be, in the temp directory under a name derived from it."""
    p = ok_dir / f"{name}.sock"
    if len(os.fsencode(p)) < 100:
        return p
    import hashlib

    digest = hashlib.sha256(os.fsencode(ok_dir.resolve())).hexdigest()[:20]
    return Path("/tmp") / f"ok-{name}-{os.getuid()}-{digest}.sock"


class Router:
    """Accept routed commands on `path` and run each with `run(argv) -> exit code`."""

    def __init__(self, path: Path, run: Callable[[list[str]], int]) -> None:
        self.path = path
        self._run = run
        self._sock: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._workers: dict[int, threading.Thread] = {}
        self._interrupted: set[int] = set()  # the workers `stop()` interrupted
        self._lock = threading.Lock()
        self._closing = threading.Event()

    def start(self) -> None:
        streams.install()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a killed server's socket; the claim said it is not live
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old)
        sock.listen(64)
        self._sock = sock
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
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        with self._lock:
            workers = list(self._workers.values())
        for t in workers:
            t.join(timeout=10)

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._closing.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(
                target=self._serve, args=(conn,), name="ok-route-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            if not _same_user(conn):
                return
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


def _same_user(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid == os.getuid()


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
