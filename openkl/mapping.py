"""`.ok/mapping.jsonl`: docID → current path, source, fetch time and refresh policy.

One JSON object per line, one line per document version (superseded versions stay, marked
`current: false`, so old citations can follow `superseded_by`). Rewritten atomically.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import BadInput
from .folder import Folder, atomic_write


def load(folder: Folder) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if not folder.mapping_path.exists():
        return out
    for n, line in enumerate(folder.mapping_path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as e:
            raise BadInput(f"{folder.rel(folder.mapping_path)} line {n} is not valid JSON",
                           "fix or delete that line, then run `ok sync`") from e
        if isinstance(entry, dict) and entry.get("id"):
            out[entry["id"]] = entry
    return out


def save(folder: Folder, entries: dict[str, dict[str, Any]]) -> None:
    lines = [json.dumps(e, ensure_ascii=False, sort_keys=True)
             for _, e in sorted(entries.items(), key=lambda kv: (kv[1].get("path", ""), kv[0]))]
    atomic_write(folder.mapping_path, "\n".join(lines) + ("\n" if lines else ""))


def by_path(entries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["path"]: e for e in entries.values() if e.get("current", True) and e.get("path")}
