"""The folder's files, read directly: directory listings, pieces of text files, grep.

Paths are relative to the folder root and never lead out of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import BadInput, NotFound
from ..files import grep as grep_mod
from ..files.folder import NAME_NOT_UTF8, Folder, check_path, is_utf8, shown
from ..records import DirEntry, GrepMatch

# not knowledge: openkl's own state (settings, keys, the server's claim, the graph) and git's
HIDDEN = (".ok", ".git")


def _hidden(rel: str) -> bool:
    return any(rel == h or rel.startswith(h + "/") for h in HIDDEN)


def _refuse_hidden(rel: str) -> None:
    if _hidden(rel):
        raise BadInput(
            f"{shown(rel)} is not part of the knowledge (.ok/ and .git/ are openkl's and git's "
            "own state)",
            "read notes (memories/), documents (store/) and citations (citations/)",
        )


def safe_path(folder: Folder, rel: str) -> Path:
    """A path inside the folder, or `BadInput`: no NUL bytes, no absolute paths, no `..`,
    and no symlink that leads out of the folder (the resolved path must stay inside)."""
    if "\x00" in rel:
        raise BadInput("path contains a NUL byte", "pass a plain relative path")
    rel = rel.strip() or "."
    check_path(rel)
    if rel.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", rel) or Path(rel).is_absolute():
        raise BadInput(
            f"absolute path '{shown(rel)}' refused", "pass a path relative to the folder root"
        )
    if ".." in PurePosixPath(rel.replace("\\", "/")).parts:
        raise BadInput(
            f"path '{shown(rel)}' climbs out with `..`", "pass a path relative to the folder root"
        )
    return folder.inside(rel)


@dataclass(frozen=True)
class Listing:
    """A directory's entries by name ({name, path, type, size | target}), at most as many
    as asked for, and how many there are."""

    path: str
    entries: list[DirEntry]
    total: int


def list_dir(folder: Folder, path: str = ".", *, max_entries: int) -> Listing:
    """The entries of a directory inside the folder, sorted by name."""
    d = safe_path(folder, path)
    _refuse_hidden(folder.rel(d))
    if not d.is_dir():
        raise BadInput(f"{path} is not a directory", "use fs_read for files")
    entries = sorted(
        (p for p in d.iterdir() if not (d == folder.root and p.name in HIDDEN)),
        key=lambda p: p.name,
    )
    rows: list[DirEntry] = []
    for p in entries[:max_entries]:
        rel = (d / p.name).relative_to(folder.root).as_posix()
        row: DirEntry = {"name": p.name, "path": rel}
        if not is_utf8(p.name):  # JSON cannot carry it; the escaped form cannot be read
            row["name"] = shown(p.name, 4096)
            row["path"] = shown(rel, 4096)
            row["problem"] = NAME_NOT_UTF8
        if p.is_symlink():
            target = p.resolve()
            inside = target == folder.root or folder.root in target.parents
            row["type"] = "link" if inside else "link-outside"
            if inside:
                row["target"] = folder.rel(target)
        elif p.is_dir():
            row["type"] = "dir"
        else:
            row["type"] = "file"
            row["size"] = p.stat().st_size
        rows.append(row)
    return Listing(
        path=folder.rel(d) if d != folder.root else ".", entries=rows, total=len(entries)
    )


@dataclass(frozen=True)
class Piece:
    """Bytes `offset` to `end` of a text file of `size` bytes, as text."""

    path: str
    size: int
    offset: int
    end: int
    text: str


def read_piece(folder: Folder, path: str, *, offset: int = 0, max_bytes: int) -> Piece:
    """At most `max_bytes` of a text file inside the folder from `offset`, cut at a
    character boundary."""
    p = safe_path(folder, path)
    rel = folder.rel(p)
    _refuse_hidden(rel)
    if not p.is_file():
        raise NotFound(f"no file {path} in the folder", "use fs_list to see what is there")
    size = p.stat().st_size
    offset = max(0, int(offset))
    if offset > size:
        raise BadInput(
            f"offset {offset} is past the end of {rel} ({size} bytes)",
            f"pass an offset from 0 to {size} (next_offset of the last piece)",
        )
    with open(p, "rb") as fh:
        head = fh.read(8192)
        if b"\x00" in head:
            raise BadInput(
                f"{rel} is a binary file", "read its normalized text under store/normalized/"
            )
        fh.seek(offset)
        raw = fh.read(max_bytes + 4)
    text = raw[:max_bytes].decode("utf-8", errors="ignore")
    end = offset + len(text.encode("utf-8"))
    return Piece(path=rel, size=size, offset=offset, end=end, text=text)


@dataclass(frozen=True)
class GrepResult:
    """Matching lines ({path, line, column, text, match}, and `before`/`after` with context),
    whether there were more, and per hit where every match on its line sits (character
    offsets, for highlighting)."""

    hits: list[GrepMatch]
    more: bool
    spans: list[tuple[tuple[int, int], ...]] = field(default_factory=list)


def grep(
    folder: Folder,
    pattern: str,
    *,
    scope: str = "all",
    ignore_case: bool = False,
    fixed: bool = False,
    word: bool = False,
    before: int = 0,
    after: int = 0,
    max_count: int,
    use_rg: bool = True,
    invert: bool = False,
    globs: list[str] | None = None,
) -> GrepResult:
    """Grep notes and normalized documents (ripgrep, else Python), stopping after
    `max_count` matches; `before`/`after` lines of context come with each match. `invert`
    gives the lines that do not match; `globs` (as rg's -g) narrow the files."""
    found = grep_mod.grep(
        folder,
        pattern,
        scope=scope,
        ignore_case=ignore_case,
        fixed=fixed,
        word=word,
        before=before,
        after=after,
        max_count=max_count + 1,
        use_rg=use_rg,
        invert=invert,
        globs=globs,
    )
    kept = found[:max_count]
    return GrepResult(
        hits=[f.record for f in kept], more=len(found) > max_count, spans=[f.spans for f in kept]
    )


@dataclass(frozen=True)
class GrepFiles:
    """The files that match (`ok grep -l`), or how many lines match in each (`-c`): path
    order, at most `max_files` of them, and whether there were more."""

    paths: list[str]
    counts: dict[str, int] | None  # with count=True only
    more: bool


def grep_files(
    folder: Folder,
    pattern: str,
    *,
    scope: str = "all",
    ignore_case: bool = False,
    fixed: bool = False,
    word: bool = False,
    count: bool = False,
    max_files: int,
    use_rg: bool = True,
    invert: bool = False,
    globs: list[str] | None = None,
) -> GrepFiles:
    """The files with a match, as `rg -l`; with `count`, the matching lines of each, as
    `rg -c`. Counts are whole; `max_files` caps how many files are named. `invert` and
    `globs` as for `grep`."""
    found = grep_mod.grep(
        folder,
        pattern,
        scope=scope,
        ignore_case=ignore_case,
        fixed=fixed,
        word=word,
        max_count=None,
        per_file=None if count else 1,
        use_rg=use_rg,
        invert=invert,
        globs=globs,
    )
    counts: dict[str, int] = {}
    for f in found:
        path = f.record["path"]
        counts[path] = counts.get(path, 0) + 1
    paths = list(counts)[:max_files]
    return GrepFiles(
        paths=paths,
        counts={p: counts[p] for p in paths} if count else None,
        more=len(counts) > max_files,
    )
