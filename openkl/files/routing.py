"""What both ends of a routed `ok` command rely on: where `ok serve` puts its routing socket,
and how a client knows that the process at the other end is its own live `ok serve`.

The socket goes in a directory that only its user may enter (`$XDG_RUNTIME_DIR/openkl`,
else `~/.cache/openkl/run`, else the folder's `.ok/run`), never under a name anyone could
take in /tmp. A client sends nothing before it has checked, in this order, that the claim
in `.ok/serve.json` names a live `ok serve` process of its own user (its boot id and start
time as recorded), that the socket is its user's, in a private directory of its user, and,
once connected, that the kernel's peer credentials (SO_PEERCRED) are that very process.
Paths longer than a unix socket address are reached through the directory's descriptor
(`/proc/self/fd/N/NAME`).

Standard library only: the light `ok` entry point (openkl.cli.route) imports it."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

_ADDRESS_MAX = 107  # bytes of a unix socket path (sun_path is 108, with its NUL)


# -- processes ----------------------------------------------------------------------------------
def process_stamp(pid: int) -> dict[str, str] | None:
    """What tells process `pid` from a later one given the same pid: this boot's id and the
    process's start time (clock ticks since boot). None when there is no such process."""
    try:
        proc_stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: count after its last ")"
    return {"boot_id": boot, "started": proc_stat.rsplit(")", 1)[1].split()[19]}


def is_server(pid: int, claim: Mapping[str, Any]) -> bool:
    """Process `pid` is alive and is the `ok serve` that wrote `claim` (of whichever user),
    not a later process given its pid (after a kill, or a reboot)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    stamp = process_stamp(pid)
    recorded = {k: claim.get(k) for k in ("boot_id", "started")}
    return b"serve" in cmd and stamp is not None and recorded == stamp


def is_own_server(pid: int, claim: Mapping[str, Any]) -> bool:
    """`is_server`, and the process runs as this process's user."""
    return pid > 0 and _uids(pid) == {os.getuid()} and is_server(pid, claim)


def _uids(pid: int) -> set[int]:
    """The real, effective, saved and filesystem uids of process `pid` (empty: no such)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return {int(u) for u in line.split()[1:]}
    except (OSError, ValueError):
        pass
    return set()


def peer(conn: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a unix socket, as the kernel
    recorded them when it connected (or, for a server, when it began listening)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


# -- private directories ------------------------------------------------------------------------
def is_private(st: os.stat_result) -> bool:
    """A directory (not a link) of this process's user that no one else may enter."""
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _private_dir(path: Path, parents: tuple[Path, ...] = ()) -> Path | None:
    """`path` as a private directory of ours (made 0700 when missing, with `parents` made
    0700 first), or None when it cannot be one."""
    try:
        for d in (*parents, path):
            with contextlib.suppress(FileExistsError):
                d.mkdir(mode=0o700)
        st = path.lstat()
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
            path.chmod(0o700)  # ours but open: our own directory, closed
            st = path.lstat()
    except OSError:
        return None
    return path if is_private(st) else None


def socket_dirs(ok_dir: Path, environ: Mapping[str, str] | None = None) -> Iterator[Path]:
    """Where a server's routing socket may go, best first: `$XDG_RUNTIME_DIR/openkl` (when
    that directory is ours and private), `$XDG_CACHE_HOME/openkl/run` (~/.cache), the
    folder's `.ok/run`; each made private when it is missing."""
    env = os.environ if environ is None else environ
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        with contextlib.suppress(OSError):
            if is_private(Path(runtime).lstat()):
                got = _private_dir(Path(runtime) / "openkl")
                if got is not None:
                    yield got
    cache = env.get("XDG_CACHE_HOME", "")
    base = Path(cache) if cache.startswith("/") else Path(env.get("HOME") or "~").expanduser()
    if base.is_absolute():
        cache_dir = base if cache.startswith("/") else base / ".cache"
        got = _private_dir(cache_dir / "openkl" / "run", (cache_dir, cache_dir / "openkl"))
        if got is not None:
            yield got
    got = _private_dir(ok_dir / "run")
    if got is not None:
        yield got


def socket_name(ok_dir: Path) -> str:
    """The routing socket's name: one per folder, so one directory serves them all."""
    import hashlib

    digest = hashlib.sha256(os.fsencode(os.path.realpath(ok_dir))).hexdigest()[:20]
    return f"serve-{digest}.sock"


def listen(ok_dir: Path, environ: Mapping[str, str] | None = None) -> tuple[socket.socket, Path]:
    """A listening routing socket for the folder `ok_dir`, in the first private directory
    where one can be made (a fresh one in the temp directory last), and its path. A path
    too long for a socket address is bound through the directory's descriptor."""
    errors: list[str] = []
    for d in socket_dirs(ok_dir, environ):
        try:
            return _bind(d / socket_name(ok_dir)), d / socket_name(ok_dir)
        except OSError as e:
            errors.append(f"{d}: {e.strerror or e}")
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="ok-run-"))  # random, 0700: no one else's name
    try:
        return _bind(d / "serve.sock"), d / "serve.sock"
    except OSError as e:
        raise OSError(
            e.errno, "cannot make the routing socket: " + "; ".join([*errors, f"{d}: {e}"])
        ) from e


def _bind(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _at(path) as where:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(where)  # a killed server's socket: its claim was found stale
            old = os.umask(0o177)
            try:
                sock.bind(where)
            finally:
                os.umask(old)
        sock.listen(64)
    except BaseException:
        sock.close()
        raise
    return sock


@contextlib.contextmanager
def _at(path: Path) -> Iterator[str]:
    """An address for `path`, checked to be in a private directory of ours (open for the
    block): the path itself, or, when too long for an address, the same name through a
    descriptor of its directory."""
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not is_private(os.fstat(fd)):
            raise PermissionError(13, f"{path.parent} is not a private directory of ours")
        short = str(path)
        if len(os.fsencode(short)) > _ADDRESS_MAX:
            short = f"/proc/self/fd/{fd}/{path.name}"
        yield short
    finally:
        os.close(fd)


def own_socket(path: Path) -> bool:
    """`path` is a socket of ours in a private directory of ours: what a server of ours
    made (and what a client may connect to, or a stale claim's cleaner may remove)."""
    try:
        parent = path.parent.lstat()
        st = path.lstat()
    except OSError:
        return False
    return is_private(parent) and stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()


def connect(path: Path, pid: int, timeout: float = 60) -> socket.socket | None:
    """A connection to the routing socket at `path` when it is our own and the process that
    answers on it is `pid` of our user (checked by the kernel's peer credentials); None, and
    nothing sent, otherwise."""
    if not path.is_absolute():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout)
        # the directory is opened and checked, then the socket reached through it: a
        # directory swapped in between is not the one connected to
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            st = os.stat(path.name, dir_fd=fd, follow_symlinks=False)
            if not (is_private(os.fstat(fd)) and stat.S_ISSOCK(st.st_mode)):
                raise PermissionError(13, "not a private socket")
            if st.st_uid != os.getuid():
                raise PermissionError(13, "not our socket")
            conn.connect(f"/proc/self/fd/{fd}/{path.name}")
        finally:
            os.close(fd)
        if peer(conn) != (pid, os.getuid()):
            raise PermissionError(13, "another process answers")
    except OSError:
        conn.close()
        return None
    return conn
