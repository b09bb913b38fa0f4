"""Sockets and claims that are not the live server's, for the routing tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.run import until

# a listener that keeps everything it is sent (bytes and passed descriptors), as a process of
# another user could; it writes what it got to REPORT when told to stop (SIGTERM)
ROGUE = r"""
import array, json, os, signal, socket, sys, threading
path, report = sys.argv[1], sys.argv[2]
got = {"connections": 0, "bytes": 0, "fds": 0}
def stop(*_):
    with open(report, "w") as f:
        json.dump(got, f)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
os.chmod(path, 0o777)
srv.listen(8)
def keep(conn):
    while True:
        fds = array.array("i")
        try:
            msg, anc, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(16 * fds.itemsize))
        except OSError:
            return
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got["fds"] += len(data) // fds.itemsize
        if not msg:
            return
        got["bytes"] += len(msg)
while True:
    conn, _ = srv.accept()
    got["connections"] += 1
    threading.Thread(target=keep, args=(conn,), daemon=True).start()
"""


class Rogue:
    """A socket server at `where/rogue.sock` (a process of `uid`, by default ours) that
    records what reaches it."""

    def __init__(self, where: Path, uid: int | None = None, argv0: str = "rogue") -> None:
        self.path = where / "rogue.sock"
        self.report = where / "got.json"
        python = "/usr/bin/python3" if uid is not None else sys.executable

        def become() -> None:
            if uid is not None:
                os.setgid(uid)
                os.setuid(uid)

        # `argv0 serve`: its command line looks like a server's
        self.proc = subprocess.Popen(
            [python, "-c", ROGUE, str(self.path), str(self.report), "serve", argv0],
            preexec_fn=become,
        )
        until(lambda: self.path.exists() or self.proc.poll() is not None, 60, 0.05)
        assert self.path.exists(), "the rogue listener did not start"

    def got(self) -> dict[str, int]:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        got: dict[str, int] = json.loads(self.report.read_text())
        return got


def forge_claim(root: Path, **fields: object) -> str:
    """Write `.ok/serve.json` as someone else would: the live claim's fields, changed.
    Returns what it held."""
    claim_path = root / ".ok" / "serve.json"
    held = claim_path.read_text() if claim_path.exists() else ""
    claim = json.loads(held) if held else {}
    claim.update(fields)
    claim_path.write_text(json.dumps(claim) + "\n")
    return held


def public_dir(uid: int | None = None) -> Path:
    """A directory in /tmp that another user may enter (the test's own tmp_path may not)."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="ok-rogue-"))
    d.chmod(0o777 if uid is None else 0o700)
    if uid is not None:
        os.chown(d, uid, uid)
    return d
