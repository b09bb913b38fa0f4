"""A caller's Cypher query, run in a process of its own (see `openkl.graph.sandbox`).

Run as a script (`python -I query_worker.py`), it imports only the standard library and
kuzu. It reads one pickled request on stdin, opens the database read-only, lets go of its
file lock at once (the process that started it keeps the files as they are while it runs),
limits its own memory, runs the query and writes pickled frames on stdout:
`("opened",)`, then `("rows", [...])` batches, then `("done", n)` or `("error", kind, text)`.
Its memory is limited by the kernel (RLIMIT_DATA): an allocation past the bound fails
inside the engine, which reports it as an error, and the process ends either way; its
parent kills it at its deadline.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import resource
import struct
import sys
from typing import Any

BATCH = 256  # rows per frame
_PR_SET_PDEATHSIG = 1


def _frame(out: Any, obj: Any) -> int:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<I", len(data)) + data)
    out.flush()
    return len(data)


def _vm_data() -> int:
    """Bytes of private writable mappings (what RLIMIT_DATA limits), Kùzu's reserved page
    buffer included."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def _kind(message: str) -> str:
    said = message.lower()
    if "bad_alloc" in said or "buffer pool is full" in said or "unable to allocate" in said:
        return "memory"
    if "interrupt" in said:
        return "timeout"
    if "read-only" in said or "read only" in said:
        return "read_only"
    return "query"


def main() -> None:
    # the worker ends with the process that asked for it
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, 9)
    out = sys.stdout.buffer
    size = struct.unpack("<I", sys.stdin.buffer.read(4))[0]
    req = pickle.loads(sys.stdin.buffer.read(size))
    import kuzu

    try:
        db = kuzu.Database(req["path"], read_only=True, buffer_pool_size=req["pool_bytes"])
        conn = kuzu.Connection(db)
    except Exception as e:
        _frame(out, ("error", "open", str(e).splitlines()[0] if str(e) else type(e).__name__))
        os._exit(0)
    # the lock this process took goes (closing any descriptor of a file ends the process's
    # locks on it), so that the opener keeps its own as it was
    os.close(os.open(req["path"], os.O_RDONLY))
    _frame(out, ("opened",))
    resource.setrlimit(resource.RLIMIT_DATA, (_vm_data() + req["memory_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    if req["timeout_ms"]:
        conn.set_query_timeout(req["timeout_ms"])
    sent = n = 0
    try:
        res = conn.execute(req["query"], req["params"])
        results = res if isinstance(res, list) else [res]
        batch: list[dict[str, Any]] = []
        for r in results:
            cols = r.get_column_names()
            while r.has_next():
                batch.append(dict(zip(cols, r.get_next(), strict=True)))
                if len(batch) >= BATCH:
                    sent += _frame(out, ("rows", batch))
                    n += len(batch)
                    batch = []
                    if sent > req["output_bytes"]:
                        _frame(out, ("error", "output", str(sent)))
                        os._exit(0)
        sent += _frame(out, ("rows", batch))
        n += len(batch)
        if sent > req["output_bytes"]:
            _frame(out, ("error", "output", str(sent)))
        else:
            _frame(out, ("done", n))
    except MemoryError:
        _frame(out, ("error", "memory", "out of memory"))
    except Exception as e:
        said = str(e).splitlines()[0] if str(e) else type(e).__name__
        _frame(out, ("error", _kind(said), said))
    os._exit(0)


if __name__ == "__main__":
    main()
