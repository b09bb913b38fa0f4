"""`.ok/mapping.jsonl`: docID → current path, source, fetch time and refresh policy.

One JSON object per line, one line per document version (superseded versions stay, marked
`current: false`, so old citations can follow `superseded_by`). Rewritten atomically.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .errors import BadInput
from .folder import Folder, atomic_write


def load(folder: Folder) -> dict[str, dict[str, Any]]:
    """Entries by doc id; of several lines for one id (appended by a journal), the last wins."""
    out: dict[str, dict[str, Any]] = {}
    if not folder.mapping_path.exists():
        return out
    text = folder.mapping_path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as e:
            if n == len(lines):  # an append torn by a crash or a full disk: never finished
                break
            raise BadInput(f"{folder.rel(folder.mapping_path)} line {n} is not valid JSON",
                           "fix or delete that line, then run `ok sync`") from e
        if isinstance(entry, dict) and entry.get("id"):
            out[entry["id"]] = entry
    return out


def append(folder: Folder, entries: list[dict[str, Any]]) -> None:
    """Record entries at the end of the mapping before the files they describe are written,
    so a crash between the two cannot lose a document's provenance. `save` compacts."""
    from . import crash

    if not entries:
        return
    data = "".join(json.dumps(e, ensure_ascii=False, sort_keys=True) + "\n"
                   for e in entries).encode("utf-8")
    path = folder.mapping_path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            # a torn append of a killed writer: cut it back to its last whole line
            tail = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
            cut = tail.rfind(b"\n")
            os.ftruncate(fd, size - len(tail) + cut + 1 if cut >= 0 else
                         (0 if size <= len(tail) else size))
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    crash.point("ingest.journaled")


def save(folder: Folder, entries: dict[str, dict[str, Any]]) -> None:
    lines = [json.dumps(e, ensure_ascii=False, sort_keys=True)
             for _, e in sorted(entries.items(), key=lambda kv: (kv[1].get("path", ""), kv[0]))]
    atomic_write(folder.mapping_path, "\n".join(lines) + ("\n" if lines else ""))


def by_path(entries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["path"]: e for e in entries.values() if e.get("current", True) and e.get("path")}
