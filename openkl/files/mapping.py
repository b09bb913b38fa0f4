"""`.ok/mapping.jsonl`: docID → current path, source, fetch time and refresh policy.

One JSON object per line, one line per document version (superseded versions stay, marked
`current: false`, so old citations can follow `superseded_by`). Rewritten atomically.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple, cast

from ..errors import BadInput, NotFound
from ..records import MappingEntry
from . import ids
from .folder import Folder, append_whole, atomic_write, refuse_link_out, shown


class Rejected(NamedTuple):
    """A line of the mapping left out: its number, its text (kept as it is by `save`) and
    why."""

    line: int
    text: str
    problem: str


class Read(NamedTuple):
    """The mapping's entries by doc id, and the lines left out."""

    entries: dict[str, MappingEntry]
    rejected: list[Rejected]


def load(folder: Folder) -> dict[str, MappingEntry]:
    """Entries by doc id; of several lines for one id (appended by a journal), the last wins.
    Lines whose id or paths could lead out of the folder are left out (`read` says which)."""
    return read(folder).entries


def read(folder: Folder) -> Read:
    """The entries as `load` gives them, and the lines it leaves out, with the reason."""
    out: dict[str, MappingEntry] = {}
    rejected: list[Rejected] = []
    if not folder.mapping_path.exists():
        return Read(out, rejected)
    refuse_link_out(folder.mapping_path, folder.root)
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
            raise BadInput(
                f"{folder.named(folder.mapping_path)} line {n} is not valid JSON",
                "fix or delete that line, then run `ok sync`",
            ) from e
        if isinstance(entry, dict) and entry.get("id"):
            problem = _unsafe(entry)
            if problem:
                rejected.append(Rejected(n, line, problem))
                continue
            out[entry["id"]] = cast(MappingEntry, entry)  # its other keys are as written
    return Read(out, rejected)


def _unsafe(entry: dict[str, Any]) -> str | None:
    """Why an entry cannot be used (its id or a path of it names a file outside the
    folder, or none), or None."""
    if not ids.DOC.valid(entry["id"]):
        return ids.DOC.problem(entry["id"])
    path = entry.get("path")
    if path is not None and not ids.rel_path(path):
        return f"its path {shown(str(path))} is not a path inside the folder"
    source = entry.get("source")
    if isinstance(source, dict) and "path" in source and not ids.rel_path(source["path"]):
        return f"its source.path {shown(str(source['path']))} is not a path inside the folder"
    for key in ("supersedes", "superseded_by"):
        if key in entry and entry[key] is not None and not ids.DOC.valid(entry[key]):
            return f"its {key}: {ids.DOC.problem(entry[key])}"
    return None


def append(folder: Folder, entries: list[MappingEntry]) -> None:
    """Record entries at the end of the mapping before the files they describe are written,
    so a crash between the two cannot lose a document's provenance. `save` compacts."""
    from . import crash

    if not entries:
        return
    data = "".join(
        json.dumps(e, ensure_ascii=False, sort_keys=True) + "\n" for e in entries
    ).encode("utf-8")
    path = folder.mapping_path
    refuse_link_out(path, folder.root)  # before its tail may be cut
    _cut_torn_tail(path)
    append_whole(path, data, fsync=True, within=folder.root)
    crash.point("ingest.journaled")


def _cut_torn_tail(path: Path) -> None:
    """Cut a line that a killed writer left unfinished back to the last whole line, so the
    next append starts on a line of its own (`append_whole` handles failures in-process)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            start = max(0, size - (1 << 20))
            cut = os.pread(fd, size - start, start).rfind(b"\n")
            if cut >= 0 or start == 0:
                os.ftruncate(fd, start + cut + 1)
    finally:
        os.close(fd)


def save(folder: Folder, entries: dict[str, MappingEntry]) -> None:
    """Rewrite the mapping with `entries`; the lines `load` leaves out stay, as they were,
    for the user to fix (they are reported, never dropped)."""
    lines = [
        json.dumps(e, ensure_ascii=False, sort_keys=True)
        for _, e in sorted(entries.items(), key=lambda kv: (kv[1].get("path", ""), kv[0]))
    ]
    lines += [r.text for r in read(folder).rejected]
    atomic_write(folder.mapping_path, "\n".join(lines) + ("\n" if lines else ""))


def by_path(entries: dict[str, MappingEntry]) -> dict[str, MappingEntry]:
    return {e["path"]: e for e in entries.values() if e.get("current", True) and e.get("path")}


def resolve(folder: Folder, ref: str, include_old: bool = False) -> MappingEntry:
    """A mapping entry by doc id, id prefix, path (normalized or source), URL or arXiv id."""
    entries = load(folder)
    if ref in entries:
        return entries[ref]
    hits = [
        e
        for d, e in entries.items()
        if (e.get("current", True) or include_old)
        and (
            d.startswith(ref)
            or e.get("path") == ref
            or (e.get("source") or {}).get("path") == ref
            or e.get("path", "").endswith("/" + ref)
        )
    ]
    if not hits:  # a web page or an S3 object by its URL, a paper by its arXiv id: the
        # current version
        hits = [
            e
            for e in entries.values()
            if e.get("current", True)
            and ref in tuple((e.get("source") or {}).get(k) for k in ("url", "arxiv", "s3"))
        ]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise NotFound(f"no document matches '{shown(ref)}'", "list documents with `ok store list`")
    raise BadInput(f"{ref!r} matches {len(hits)} documents", "give more of the id")
