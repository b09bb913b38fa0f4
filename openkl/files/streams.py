"""Standard streams and environment per thread, for a process that runs commands for other
processes (`ok serve` running a routed `ok` command): each such thread writes to its
caller's stdout and stderr, reads its stdin and sees its environment, while every other
thread keeps the process's own.

Until `install()` is called nothing changes: `sys.stdout` is the real stream, `os.environ`
the real environment, and `redirect` swaps `sys.stdout` as code usually does."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from typing import IO, Any

_local = threading.local()
_installed = False
_install_lock = threading.Lock()


class _Stream:
    """Stands in for `sys.stdin`/`sys.stdout`/`sys.stderr`: the calling thread's own stream
    when one is bound, else the process's."""

    def __init__(self, name: str, default: IO[Any]) -> None:
        self._name = name
        self._default = default

    def target(self) -> IO[Any]:
        return getattr(_local, self._name, None) or self._default

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.target(), attr)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.target())

    # the hot and the probed methods, spelled out
    def write(self, s: Any) -> int:
        return self.target().write(s)

    def flush(self) -> None:
        self.target().flush()

    def isatty(self) -> bool:
        return self.target().isatty()

    def fileno(self) -> int:
        return self.target().fileno()

    def writable(self) -> bool:
        return self.target().writable()

    def readable(self) -> bool:
        return self.target().readable()


class _Environ(MutableMapping[str, str]):
    """Stands in for `os.environ`: the calling thread's environment when one is bound."""

    def __init__(self, real: MutableMapping[str, str]) -> None:
        self.real = real

    def _env(self) -> MutableMapping[str, str]:
        return getattr(_local, "environ", None) or self.real

    def __getitem__(self, key: str) -> str:
        return self._env()[key]

    def __setitem__(self, key: str, value: str) -> None:
        self._env()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._env()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._env()))

    def __len__(self) -> int:
        return len(self._env())

    def copy(self) -> dict[str, str]:
        return dict(self._env())


def own_environ() -> Mapping[str, str]:
    """The process's own environment, whatever thread asks: what a process serving other
    commands holds for itself (the keys of the endpoints its search uses), not the
    environment a routed command brought."""
    env = os.environ
    return env.real if isinstance(env, _Environ) else env


def install() -> None:
    """Make `sys.std*` and `os.environ` follow the thread (once per process)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        for name in ("stdin", "stdout", "stderr"):
            setattr(sys, name, _Stream(name, getattr(sys, name)))
        os.environ = _Environ(os.environ)  # type: ignore[assignment]  # noqa: B003
        _installed = True


@contextlib.contextmanager
def bound(
    stdin: IO[Any], stdout: IO[Any], stderr: IO[Any], environ: Mapping[str, str]
) -> Iterator[None]:
    """Give the calling thread these streams and this environment for the block."""
    install()
    saved = {n: getattr(_local, n, None) for n in ("stdin", "stdout", "stderr", "environ")}
    _local.stdin, _local.stdout, _local.stderr = stdin, stdout, stderr
    _local.environ = dict(environ)
    try:
        yield
    finally:
        for n, v in saved.items():
            setattr(_local, n, v)


@contextlib.contextmanager
def redirect(name: str, stream: IO[Any]) -> Iterator[None]:
    """Send the calling thread's `sys.<name>` to `stream` for the block (only this thread's
    once `install()` has run; the process's before)."""
    current = getattr(sys, name)
    if isinstance(current, _Stream):
        saved = getattr(_local, name, None)
        setattr(_local, name, stream)
        try:
            yield
        finally:
            setattr(_local, name, saved)
        return
    setattr(sys, name, stream)
    try:
        yield
    finally:
        setattr(sys, name, current)


def concrete(stream: Any) -> Any:
    """The stream itself behind a stand-in: what a thread started now should write to."""
    return stream.target() if isinstance(stream, _Stream) else stream


def fd_of(stream: Any) -> int | None:
    """The file descriptor behind `stream`, or None (a StringIO, a closed stream)."""
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None
