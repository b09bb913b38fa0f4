"""Callers' Cypher, bounded in time, memory and output by a process of its own.

Kùzu's own query timeout is checked between batches of rows, and values the query builds
(`range(1, 300000000)`, `repeat('a', …)`, lists grown clause by clause) live outside its
page buffer, so a query run in this process could hold it past any timeout and take the
machine's memory. A caller's query therefore runs in a worker process
(`query_worker.py`) that opens the database read-only beside this one, under a memory
limit the kernel enforces; this process reads its rows up to an output cap and kills it at
the deadline. The worker reads the files as they are when it starts: the caller holds a
lease on the graph meanwhile, so no checkpoint rewrites them under it.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import LockBusy, OkError, QueryTimedOut, QueryTooLarge, ReadOnlyViolation

WORKER = Path(__file__).with_name("query_worker.py")
_OPEN_SECONDS = 30.0  # how long a worker may take to open the database, at most


@dataclass(frozen=True)
class QueryLimits:
    """What one caller's query may take: wall time (None: no limit), memory beyond the
    worker's own start (a quarter of it as Kùzu's page buffer), and output (its rows,
    serialized)."""

    seconds: float | None = None
    memory_mb: int = 1024
    output_mb: float = 16.0
    workers: int = 4  # queries of this process that may run at once
    setting: str = "the query's time limit"  # named in a timeout's message

    @property
    def pool_bytes(self) -> int:
        return max(64, self.memory_mb // 4) << 20

    @property
    def heap_bytes(self) -> int:
        return max(64 << 20, (self.memory_mb << 20) - self.pool_bytes)

    @property
    def output_bytes(self) -> int:
        return int(self.output_mb * (1 << 20))


class _Rows(pickle.Unpickler):
    """Unpickles only the plain values a query returns."""

    ALLOWED = {
        ("datetime", "datetime"),
        ("datetime", "date"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("uuid", "UUID"),
        ("decimal", "Decimal"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not a query value")


_slots: threading.BoundedSemaphore | None = None
_slots_lock = threading.Lock()


def _slot(workers: int) -> threading.BoundedSemaphore:
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(max(1, workers))
        return _slots


@contextlib.contextmanager
def _worker_slot(workers: int, wait: float | None) -> Iterator[None]:
    """One of this process's `workers` query workers, waited for up to `wait` seconds."""
    slots = _slot(workers)
    if not slots.acquire(timeout=wait if wait is not None else -1):
        raise LockBusy(
            f"{workers} queries are running already",
            "retry in a moment (graph.query_workers sets how many may run at once)",
        )
    try:
        yield
    finally:
        slots.release()


def run(
    db_path: Path,
    query: str,
    params: dict[str, Any],
    limits: QueryLimits,
    *,
    opening: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
) -> list[dict[str, Any]]:
    """The rows of a read-only `query`, run in a worker process under `limits`. `opening`
    is held while the worker opens the database (see `_Resident.sharing`)."""
    deadline = None if limits.seconds is None else time.monotonic() + limits.seconds
    with _worker_slot(limits.workers, limits.seconds):
        try:
            return _run_once(db_path, query, params, limits, opening, deadline)
        except _OpenFailed:
            # a writer of this process was appending to the log as the worker read it
            return _run_once(db_path, query, params, limits, opening, deadline)


class _OpenFailed(OkError):
    """The worker could not open the database."""


def _run_once(
    db_path: Path,
    query: str,
    params: dict[str, Any],
    limits: QueryLimits,
    opening: Callable[[], contextlib.AbstractContextManager[None]],
    deadline: float | None,
) -> list[dict[str, Any]]:
    proc = subprocess.Popen(
        [sys.executable, "-I", str(WORKER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        start_new_session=True,  # not a terminal's: Ctrl-C reaches this process, which kills it
    )
    try:
        return _talk(proc, db_path, query, params, limits, opening, deadline)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _talk(
    proc: subprocess.Popen[bytes],
    db_path: Path,
    query: str,
    params: dict[str, Any],
    limits: QueryLimits,
    opening: Callable[[], contextlib.AbstractContextManager[None]],
    deadline: float | None,
) -> list[dict[str, Any]]:
    assert proc.stdin is not None and proc.stdout is not None
    remaining = None if deadline is None else max(1, int((deadline - time.monotonic()) * 1000))
    request = pickle.dumps(
        {
            "path": str(db_path),
            "query": query,
            "params": params,
            "pool_bytes": limits.pool_bytes,
            "memory_bytes": limits.heap_bytes,
            "output_bytes": limits.output_bytes,
            "timeout_ms": remaining or 0,
        }
    )
    reader = _Frames(proc.stdout, limits, deadline)
    with opening():
        try:
            proc.stdin.write(struct.pack("<I", len(request)) + request)
            proc.stdin.close()
        except BrokenPipeError:
            raise OkError("the query worker could not start", "see the server's log") from None
        first = reader.next(open_deadline=time.monotonic() + _OPEN_SECONDS)
    rows: list[dict[str, Any]] = []
    frame = first
    while True:
        kind = frame[0]
        if kind == "rows":
            rows.extend(frame[1])
        elif kind == "done":
            return rows
        elif kind == "error":
            raise _error(frame[1], frame[2], limits)
        frame = reader.next()


class _Frames:
    """The worker's frames, read within the deadline and the output cap."""

    def __init__(self, stream: IO[bytes], limits: QueryLimits, deadline: float | None) -> None:
        self.fd = stream.fileno()
        self.limits = limits
        self.deadline = deadline
        self.read = 0

    def next(self, open_deadline: float | None = None) -> tuple[Any, ...]:
        head = self._exactly(4, open_deadline)
        size = struct.unpack("<I", head)[0]
        self.read += size
        if self.read > self.limits.output_bytes + (1 << 16):
            raise _too_large_output(self.limits)
        body = self._exactly(size, open_deadline)
        try:
            frame = _Rows(io.BytesIO(body)).load()
        except (pickle.UnpicklingError, EOFError, ValueError) as e:
            raise OkError(f"the query worker answered garbage: {e}") from e
        if not isinstance(frame, tuple) or not frame:
            raise OkError("the query worker answered garbage")
        return frame

    def _exactly(self, n: int, open_deadline: float | None) -> bytes:
        chunks: list[bytes] = []
        got = 0
        while got < n:
            until = self.deadline
            if open_deadline is not None:
                until = open_deadline if until is None else min(until, open_deadline)
            wait = 0.1 if until is None else min(0.1, until - time.monotonic())
            if wait <= 0:
                raise self._late(open_deadline)
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                continue
            data = os.read(self.fd, min(n - got, 1 << 20))
            if not data:
                raise OkError(
                    "the query's worker process ended without an answer",
                    "the query may need more memory than graph.query_memory_mb allows",
                )
            chunks.append(data)
            got += len(data)
        return b"".join(chunks)

    def _late(self, open_deadline: float | None) -> OkError:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return _timed_out(self.limits)
        return OkError("the query worker did not open the graph in time", "retry")


def _timed_out(limits: QueryLimits) -> QueryTimedOut:
    return QueryTimedOut(
        f"the query ran past {limits.setting} ({limits.seconds:g} s) and was stopped",
        "narrow it (a LIMIT, a smaller range), or raise " + limits.setting,
    )


def _too_large_output(limits: QueryLimits) -> QueryTooLarge:
    return QueryTooLarge(
        f"the query's result is larger than graph.query_output_mb ({limits.output_mb:g} MiB)",
        "return fewer rows or columns (a LIMIT), or raise graph.query_output_mb",
    )


def _error(kind: str, text: str, limits: QueryLimits) -> OkError:
    if kind == "memory":
        return QueryTooLarge(
            f"the query needs more memory than graph.query_memory_mb ({limits.memory_mb} MiB)",
            "narrow it (a LIMIT, a smaller range or list), or raise graph.query_memory_mb",
        )
    if kind == "timeout":
        return _timed_out(limits)
    if kind == "output":
        return _too_large_output(limits)
    if kind == "read_only":
        return ReadOnlyViolation(
            "this query writes to the graph, which is opened read-only",
            "pass --write if you really mean to change the graph",
        )
    if kind == "open":
        return _OpenFailed(f"the query worker could not open the graph: {text}", "retry")
    return OkError(f"query failed: {text}")
