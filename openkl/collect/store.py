"""The grounding store: ingest originals into `store/sources/`, normalized text into
`store/normalized/…/*.ok.md`, and record each document in `.ok/mapping.jsonl`.

Doc ids are content hashes of the normalized text, so re-ingesting unchanged content is a
no-op and a renamed file keeps its id. A source whose content changed gets a new id; the old
version's text is kept under `.ok/versions/` and linked with `SUPERSEDES`.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BadInput, NotFound, OkError
from ..files import crash, events
from ..files import mapping as mapping_mod
from ..files.folder import NAME_NOT_UTF8, Folder, atomic_write, is_utf8, iso, shown
from ..files.mapping import resolve
from ..files.progress import progress
from ..knowledge import links
from ..knowledge.drift import after_ingest
from ..records import (
    Added,
    IngestReportDict,
    MappingEntry,
    RefreshPolicy,
    Skipped,
    Source,
    Unchanged,
)
from ..sync import indexer
from ..text.normalize import (
    IMAGE_MIME,
    SNIFF_BYTES,
    Extracted,
    extract_bytes,
    looks_like_text,
    require_ocr,
    supported,
)

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".ok", ".tox"}


@dataclass
class IngestReport:
    added: list[Added] = field(default_factory=list)
    unchanged: list[Unchanged] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    chunks: int = 0

    @property
    def failed(self) -> list[Skipped]:
        """What should have been stored and could not be (a normal skip is not)."""
        return [s for s in self.skipped if s.get("failed")]

    def as_dict(self) -> IngestReportDict:
        return {
            "added": self.added,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "chunks": self.chunks,
        }


@dataclass
class Candidate:
    """One thing to ingest: bytes plus where they go under `store/sources/`."""

    data: bytes
    rel: str  # path under store/sources/
    origin: str  # where it came from (absolute path, "-", URL …)
    source: Source
    extra: dict[str, Any] = field(default_factory=dict)
    copy_original: bool = True
    # what to extract text from when it differs from the original (a web page's main content)
    extract_data: bytes | None = None


def _skipped(path: str, reason: str, failed: bool) -> Skipped:
    """What was not stored, and why; `failed` when it should have been (a file the user
    named, an unreadable one), not when it was passed over in a directory."""
    out: Skipped = {"path": path, "reason": reason}
    if failed:
        out["failed"] = True
    return out


def versions_dir(folder: Folder) -> Path:
    return folder.ok_dir / "versions"


def normalized_rel(rel: str) -> str:
    p = Path(rel)
    stem = p.stem if p.suffix.lower() in (".md", ".markdown", ".txt") else p.name
    if stem.endswith(".ok"):
        stem = stem[:-3]
    return (p.parent / f"{stem}.ok.md").as_posix()


def collect(
    folder: Folder,
    paths: list[str],
    glob: list[str] | None = None,
    recursive: bool = True,
    ocr: bool = False,
    follow: bool = False,
    confine: Path | None = None,
) -> tuple[list[Candidate], list[Skipped]]:
    """Expand files and directories into candidates; report paths that cannot be read.

    Symlinks met while walking a directory are followed only when they stay inside it (or,
    with `follow`, anywhere); the others are skipped and reported, as rg and fd do. With
    `confine` (the MCP server passes the folder root) nothing outside it is ever read, and
    links anywhere inside it are fine. The folder's own directories (`managed`) are never
    sources: named or met on the way, they are skipped and reported; only a path named
    under store/sources/ is read again, as the original it is.
    """
    cands: list[Candidate] = []
    skipped: list[Skipped] = []
    max_bytes = int(folder.setting("ingest.max_file_mb") * 1024 * 1024)
    own = managed(folder)
    for raw in paths:
        if not is_utf8(raw):
            skipped.append({"path": shown(raw, 4096), "reason": NAME_NOT_UTF8, "failed": True})
            continue
        p = Path(raw).expanduser()
        if not p.exists():
            reason = "no such file or directory"
            if raw.startswith(("http://", "https://")):
                reason = "is a URL, not a file (hint: fetch it with `ok store web URL`)"
            elif raw.lower().startswith("arxiv:"):
                reason = "is an arXiv id (hint: use `ok store arxiv ID`)"
            elif raw.lower().startswith("s3://"):
                reason = "is an S3 URL, not a file (hint: use `ok store s3 URL`)"
            skipped.append({"path": raw, "reason": reason, "failed": True})
            continue
        p = p.resolve()
        why = _managed_by(folder, p, own)
        if why is not None:
            skipped.append({"path": raw, "reason": why})
            continue
        if p.is_dir():
            base = p
            walk = Walk(folder, p, recursive, follow, confine, own)
            files = walk.run()
            skipped += walk.skipped
            if glob:
                files = [
                    (f, r)
                    for f, r in files
                    if any(
                        fnmatch.fnmatch(f.relative_to(base).as_posix(), g)
                        or fnmatch.fnmatch(f.name, g)
                        for g in glob
                    )
                ]
            else:
                files = _by_type(files, ocr, skipped)
            prefix = base.name if base != folder.sources_dir else ""
        else:
            if _is_derived(folder, p):
                skipped.append(
                    {
                        "path": raw,
                        "reason": "is the folder's own derived state "
                        "(.ok/ or store/normalized/), not a document",
                        "failed": True,
                    }
                )
                continue
            files, base, prefix = [(p, p)], p.parent, ""
        named = not p.is_dir()  # a file the user named: not storing it is a failure
        for f, real in files:
            if _is_derived(folder, real):
                continue
            try:
                st = real.stat()
                if not stat.S_ISREG(st.st_mode):
                    skipped.append(
                        _skipped(
                            str(f),
                            "not a regular file (a device, pipe or socket); only files "
                            "are ingested",
                            named,
                        )
                    )
                    continue
                if st.st_size > max_bytes:
                    skipped.append(
                        _skipped(
                            str(f),
                            f"larger than the {max_bytes >> 20} MB limit (raise "
                            "ingest.max_file_mb)",
                            named,
                        )
                    )
                    continue
                # the checked target, not the link: a link swapped meanwhile is not followed
                data = real.read_bytes()
            except OSError as e:
                skipped.append(
                    {"path": str(f), "reason": f"unreadable: {e.strerror or e}", "failed": True}
                )
                continue
            in_sources = folder.sources_dir in f.parents
            rel = (
                f.relative_to(folder.sources_dir).as_posix()
                if in_sources
                else "/".join(x for x in (prefix, f.relative_to(base).as_posix()) if x)
            )
            # resolved, so every way of naming the file gives one origin (and one lineage)
            cands.append(
                Candidate(
                    data=data,
                    rel=rel,
                    origin=str(f.resolve()),
                    source={"path": f"store/sources/{rel}"},
                    copy_original=not in_sources,
                )
            )
    return cands, skipped


def _by_type(
    files: list[tuple[Path, Path]], ocr: bool, skipped: list[Skipped]
) -> list[tuple[Path, Path]]:
    """The files of a walked directory worth reading: known types, and text of any other
    name (README, README.Debian) judged by its first bytes; the rest go to `skipped`."""
    kept = []
    for f, real in files:
        if supported(f, ocr):
            kept.append((f, real))
            continue
        try:
            with real.open("rb") as fh:
                head = fh.read(SNIFF_BYTES)
        except OSError as e:
            skipped.append(
                {"path": str(f), "reason": f"unreadable: {e.strerror or e}", "failed": True}
            )
            continue
        if looks_like_text(head):
            kept.append((f, real))
            continue
        kind = f"'{f.suffix}'" if f.suffix else "without an extension"
        reason = f"not a supported file type ({kind}) and not UTF-8 text"
        if f.suffix.lower() in IMAGE_MIME:
            reason = "an image; its text can only be read with OCR (hint: pass --ocr)"
        skipped.append({"path": str(f), "reason": reason})
    return kept


def _is_derived(folder: Folder, f: Path) -> bool:
    return folder.ok_dir in f.parents or folder.normalized_dir in f.parents


def managed(folder: Folder) -> dict[Path, str]:
    """The folder's own directories, which ok writes and never reads as sources, each with
    what it holds."""
    from ..knowledge.aks import imports_dir
    from ..knowledge.backfeed import backfeed_dir
    from ..knowledge.triggers import triggers_dir

    return {
        folder.ok_dir: "its state",
        folder.sources_dir: "the copies of the originals it ingested",
        folder.normalized_dir: "the text it indexes",
        folder.memories_dir: "its memory notes (indexed as notes)",
        folder.citations_dir: "its citations",
        events.events_dir(folder): "its event log",
        folder.graph_dir: "its exports",
        triggers_dir(folder): "its triggers",
        backfeed_dir(folder): "its backfeed items",
        imports_dir(folder): "the AKS bundles it imported",
    }


MANAGED = "kept by ok: never a source"


def _managed_reason(folder: Folder, what: str, d: Path) -> str:
    return (
        f"the folder's own files ({folder.rel(d)}/: {what}), {MANAGED} "
        "(hint: name the documents to ingest)"
    )


def _managed_by(folder: Folder, p: Path, own: dict[Path, str]) -> str | None:
    """Why `p` (resolved) is not a source: it is one of the folder's own directories or
    lies in one. A path named under store/sources/ is read again as the original it is."""
    for d, what in own.items():
        if (p == d or d in p.parents) and d != folder.sources_dir:
            return _managed_reason(folder, what, d)
    return None


def _under(p: Path, top: Path) -> bool:
    return p == top or top in p.parents


class Walk:
    """The files under a directory, as (path as named, resolved path) pairs, and what was
    skipped on the way and why.

    Entries are sorted; hidden names and SKIP_DIRS are left out, and the folder's own
    directories (`own`) are skipped and reported. A symlinked directory
    whose target lies inside the walked tree is not entered (its files come by their real
    path), and no directory is entered twice, so link loops end.
    """

    def __init__(
        self,
        folder: Folder,
        top: Path,
        recursive: bool = True,
        follow: bool = False,
        confine: Path | None = None,
        own: dict[Path, str] | None = None,
    ) -> None:
        self.folder, self.top, self.recursive = folder, top.resolve(), recursive
        self.follow, self.confine = follow, confine
        # the folder's own directories, but the one the walk is in (store/sources/, named)
        self.own = {d: w for d, w in (own or {}).items() if not _under(self.top, d)}
        self.files: list[tuple[Path, Path]] = []
        self.skipped: list[Skipped] = []
        self._seen: set[Path] = set()

    def run(self) -> list[tuple[Path, Path]]:
        # depth first like os.walk: a directory's files, then its subdirectories in order
        # (a stack, not recursion: a hostile tree may be deeper than Python's stack)
        self._seen.add(self.top)
        todo = [(self.top, self.top)]
        while todo:
            subdirs = self._dir(*todo.pop())
            if self.recursive:
                todo.extend(reversed(subdirs))
        return self.files

    def _skip(self, p: Path, reason: str, failed: bool = False) -> None:
        self.skipped.append(_skipped(shown(p, 4096), reason, failed))

    def _link_target(self, p: Path) -> Path | None:
        """Where a symlink leads, if it may be followed; otherwise report it and say None."""
        try:
            target = p.resolve(strict=True)
        except (OSError, RuntimeError):
            # dangling, or a loop the kernel gave up on (ELOOP)
            self._skip(p, "a symlink that leads nowhere (broken, or a loop); nothing to read")
            return None
        if _is_derived(self.folder, target):
            self._skip(
                p,
                f"a symlink to {shown(target)}, among the folder's own files "
                "(.ok/ or store/normalized/), not a document",
            )
            return None
        if self.confine is not None:
            if not _under(target, self.confine):
                self._skip(
                    p,
                    f"a symlink to {shown(target)}, outside the knowledge folder; "
                    "links out of the folder are not followed here (hint: copy the "
                    "file into the folder, or run `ok store ingest --follow` in a shell)",
                )
                return None
        elif not self.follow and not _under(target, self.top):
            self._skip(
                p,
                f"a symlink to {shown(target)}, outside {shown(self.top)}; not "
                "followed (hint: pass --follow to include it, or name it directly)",
            )
            return None
        return target

    def _dir(self, named: Path, real: Path) -> list[tuple[Path, Path]]:
        """List one directory: keep its files, return the subdirectories to enter."""
        try:
            entries = sorted(os.scandir(named), key=lambda e: e.name)
        except OSError as e:
            self._skip(named, f"unreadable directory: {e.strerror or e}", failed=True)
            return []
        subdirs: list[tuple[Path, Path]] = []
        for ent in entries:
            if ent.name.startswith("."):
                continue
            p = named / ent.name
            if not is_utf8(ent.name):
                self._skip(p, NAME_NOT_UTF8)
                continue
            try:
                link = ent.is_symlink()
                is_dir = ent.is_dir(follow_symlinks=False)
            except OSError as err:
                self._skip(p, f"unreadable: {err.strerror or err}", failed=True)
                continue
            if is_dir and (not self.recursive or ent.name in SKIP_DIRS):
                continue
            if link and not self.recursive and p.is_dir():
                continue
            target = real / ent.name
            if link:
                got = self._link_target(p)
                if got is None:
                    continue
                target, is_dir = got, got.is_dir()
                if is_dir and (ent.name in SKIP_DIRS or _under(target, self.top)):
                    continue  # skipped by name, or its files come by their real path
            if not is_dir:
                self.files.append((p, target))
            elif target in self.own:
                self._skip(p, _managed_reason(self.folder, self.own[target], target))
            elif target not in self._seen:  # a second way into a directory (a loop) ends here
                self._seen.add(target)
                subdirs.append((p, target))
        return subdirs


def ingest(
    folder: Folder,
    cands: list[Candidate],
    report: IngestReport | None = None,
    index: bool = True,
    policy: RefreshPolicy | None = None,
    drift_threshold: float | None = None,
    ocr: bool = False,
) -> IngestReport:
    """Write originals, normalized docs and mapping entries, then index the new docs.

    The caller holds the writer lock. Files are written before the graph, so an
    interrupted run is repaired by `ok sync`.
    """
    rep = report or IngestReport()
    entries = mapping_mod.load(folder)
    _follow_origins(cands, entries)
    paths = mapping_mod.by_path(entries)
    new_items: list[tuple[str, str]] = []
    with progress("reading", len(cands) if len(cands) > 1 else 0) as advance:
        for cand in cands:
            advance(1)
            _take(folder, cand, rep, entries, paths, policy, new_items, ocr)
    if new_items:
        mapping_mod.save(folder, entries)
        crash.point("ingest.mapping-saved")
        after_ingest(folder, entries, rep.added, drift_threshold)
        crash.point("ingest.events-written")
        folder.log_op(
            "store.ingest", ids=[a["id"] for a in rep.added], paths=[a["path"] for a in rep.added]
        )
        if index:
            prepared = indexer.prepare_docs(folder, new_items, entries)  # slow part, graph free
            with indexer.open_graph(folder, write=True) as g:
                old = [a["supersedes"] for a in rep.added if a.get("supersedes")]
                # content that returns to an earlier version has that version's id, still
                # in the graph as an old Doc node: it is replaced, not duplicated
                in_graph = g.docs()
                back = [a["id"] for a in rep.added if a["id"] in in_graph]
                from ..knowledge.lineage import relink

                rep.chunks, derived = indexer.replace_docs(
                    folder, g, old + back, new_items, entries, prepared
                )
                relink(folder, g, derived)  # notes derived from a replaced version keep it
                links.relink(g)  # a `[[Title]]` may name the new document
    return rep


def _follow_origins(cands: list[Candidate], entries: dict[str, MappingEntry]) -> None:
    """A file stored before under another name keeps its place under `store/sources/`.

    `d4/a.md` given alone and as part of `d4` make different names, yet they are one
    source: identified by the resolved file it came from, its new version supersedes the
    old one instead of becoming a second current document.
    """
    owners: dict[str, MappingEntry] = {}
    for e in sorted(entries.values(), key=lambda e: e.get("ingested_at") or ""):
        src, origin = (e.get("source") or {}).get("path"), e.get("origin") or ""
        if e.get("current", True) and src and os.path.isabs(origin):
            owners[os.path.realpath(origin)] = e
    for cand in cands:
        if set(cand.source) != {"path"} or not os.path.isabs(cand.origin):
            continue
        owner = owners.get(os.path.realpath(cand.origin))
        if owner is None:
            continue
        src = str(owner.get("source", {}).get("path", ""))
        if src != cand.source["path"] and src.startswith("store/sources/"):
            cand.rel, cand.source = src[len("store/sources/") :], owner["source"].copy()


def _take(
    folder: Folder,
    cand: Candidate,
    rep: IngestReport,
    entries: dict[str, MappingEntry],
    paths: dict[str, MappingEntry],
    policy: RefreshPolicy | None,
    new_items: list[tuple[str, str]],
    ocr: bool = False,
) -> None:
    """Extract one candidate and write its files; record the outcome in `rep`."""
    # a document given by name (standard input, an upload) is called by that name
    where = cand.rel.removeprefix("stdin/") if cand.origin == "-" else cand.origin
    try:
        ext = extract_bytes(cand.extract_data or cand.data, cand.rel, where=where, ocr=ocr)
    except BadInput as e:
        # a file that should read and does not (a broken PDF, a named binary of no type)
        rep.skipped.append(
            {
                "path": where,
                "reason": e.message + (f" (hint: {e.hint})" if e.hint else ""),
                "failed": True,
            }
        )
        return
    fresh = {a["id"] for a in rep.added}
    try:
        did, entry = _write_doc(folder, cand, ext, entries, paths, policy, fresh)
    except _Twice as e:
        rep.skipped.append({"path": cand.origin, "reason": str(e)})
        return
    if entry is None:
        have = entries[did]
        seen: Unchanged = {"id": did, "path": have["path"], "origin": cand.origin}
        if not have.get("current", True):
            seen |= {"current": False, "superseded_by": have["superseded_by"]}
        rep.unchanged.append(seen)
        return
    new_items.append((did, entry["path"]))
    added: Added = {
        "id": did,
        "path": entry["path"],
        "origin": cand.origin,
        "title": entry.get("title", ""),
    }
    if entry.get("supersedes"):
        added["supersedes"] = entry["supersedes"]
    rep.added.append(added)


class _Twice(Exception):
    """A second version of one document in one ingest."""


def _write_doc(
    folder: Folder,
    cand: Candidate,
    ext: Extracted,
    entries: dict[str, MappingEntry],
    paths: dict[str, MappingEntry],
    policy: RefreshPolicy | None,
    fresh: Collection[str] = (),
) -> tuple[str, MappingEntry | None]:
    body = ext.text.encode("utf-8")
    did = indexer.doc_id_of(body)
    have = entries.get(did)
    if have and have.get("current", True) and (folder.root / have["path"]).exists():
        if policy and have.get("refresh") != policy:
            have["refresh"] = policy
        if not have.get("origin"):
            # found by `ok sync` without its provenance (written by a process that died
            # before recording it): this ingest knows where it came from
            if cand.copy_original and not (folder.sources_dir / cand.rel).exists():
                atomic_write(folder.sources_dir / cand.rel, cand.data)
            have.update(
                {
                    "source": cand.source,
                    "origin": cand.origin,
                    "media_type": ext.media_type,
                    "title": cand.extra.get("title") or ext.title,
                }
            )
            if ext.meta or cand.extra:
                have["meta"] = {**ext.meta, **cand.extra}
            mapping_mod.append(folder, [have])
        return did, None
    if have and not _revives(entries, have, cand):
        return did, None  # already kept as an older version of another source's lineage
    norm_rel = "store/normalized/" + normalized_rel(cand.rel)
    previous = paths.get(norm_rel)
    if previous and previous.get("source") != cand.source:
        # another source already owns that normalized name (a.md vs a.txt): disambiguate,
        # or continue this source's own disambiguated file
        base = norm_rel[: -len(".ok.md")]
        previous = next(
            (
                e
                for p, e in paths.items()
                if e.get("source") == cand.source
                and p.startswith(base + ".")
                and p.count(".") == base.count(".") + 3
            ),
            None,
        )
        norm_rel = previous["path"] if previous else f"{base}.{did[:6]}.ok.md"
    if previous and previous["id"] in fresh:
        # one ingest read two texts for one document (an original and its copy under
        # store/sources/, say): which is newer cannot be told, so the first one stays
        raise _Twice(
            f"another text of the same document ({previous['path']}) was read earlier in "
            "this ingest; the first is kept (hint: ingest this one on its own to make it "
            "the current version)"
        )
    now = iso()
    entry: MappingEntry = {
        "id": did,
        "path": norm_rel,
        "source": cand.source,
        "origin": cand.origin,
        "media_type": ext.media_type,
        "title": cand.extra.get("title") or ext.title,
        "ingested_at": now,
        "fetched_at": now,
        "sha256": hashlib.sha256(body).hexdigest(),
        "current": True,
        "refresh": policy or (previous.get("refresh") if previous else None),
    }
    if ext.meta or cand.extra:
        entry["meta"] = {**ext.meta, **cand.extra}
    target = folder.root / norm_rel
    if previous and target.exists():
        old_id = previous["id"]
        keep = versions_dir(folder) / f"{old_id}.ok.md"
        if not keep.exists():
            atomic_write(keep, target.read_bytes())
            crash.point("ingest.version-kept")
        previous.update(
            {"current": False, "superseded_by": did, "superseded_at": now, "path": folder.rel(keep)}
        )
        entry["supersedes"] = old_id
    # provenance first: a crash after this line leaves files the mapping describes, never
    # an original or a document whose source, title and origin are lost
    mapping_mod.append(folder, [e for e in (previous, entry) if e])
    if cand.copy_original:
        atomic_write(folder.sources_dir / cand.rel, cand.data)
        crash.point("ingest.source-written")
    atomic_write(target, body)
    crash.point("ingest.normalized-written")
    entries[did] = entry
    paths[norm_rel] = entry
    return did, entry


def _revives(entries: dict[str, MappingEntry], old: MappingEntry, cand: Candidate) -> bool:
    """Whether content equal to an old version may become current again.

    Only its own source may bring it back (a file edited back to an earlier text). Asked
    for by another name (`2401.00001v1` while `2401.00001` follows the latest version), it
    stays history: making it current would leave two current versions and cut the
    `SUPERSEDES` link between them.
    """
    head, seen = old, set()
    while (
        not head.get("current", True)
        and head.get("superseded_by") in entries
        and head["id"] not in seen
    ):
        seen.add(head["id"])
        head = entries[head["superseded_by"]]
    return head is old or not head.get("current", True) or head.get("source") == cand.source


def ingest_paths(
    folder: Folder,
    paths: list[str],
    glob: list[str] | None = None,
    recursive: bool = True,
    policy: RefreshPolicy | None = None,
    ocr: bool = False,
    follow: bool = False,
    confine: Path | None = None,
) -> IngestReport:
    """Ingest files and directories; see `collect` for which symlinks are followed."""
    if any(not p.strip() for p in paths):
        raise BadInput("an empty path was given", "name a file or directory (`.` for this one)")
    if ocr:
        require_ocr()
    cands, skipped = collect(folder, paths, glob, recursive, ocr, follow, confine)
    if not cands and not skipped:
        raise NotFound(*_nothing_matched(paths, glob, recursive))
    if not cands and all(MANAGED in s["reason"] for s in skipped):
        where = ", ".join(shown(p) for p in paths)
        own = ", ".join(dict.fromkeys(_rel_or_named(folder, s["path"]) + "/" for s in skipped))
        raise BadInput(
            f"{where} holds nothing but the folder's own files ({own}), which are never ingested",
            "name the documents to ingest, e.g. `ok store ingest ~/papers`: they are "
            "copied into store/sources/ as they are ingested",
        )
    rep = IngestReport(skipped=skipped)
    return ingest(folder, cands, rep, policy=policy, ocr=ocr)


def _rel_or_named(folder: Folder, path: str) -> str:
    """A skipped path as the folder names it, if it is in the folder."""
    full = Path(path).absolute()
    return folder.named(full) if folder.holds(full) else shown(path)


def _nothing_matched(paths: list[str], glob: list[str] | None, recursive: bool) -> tuple[str, str]:
    """The message and hint for an ingest that found no file to read."""
    where = ", ".join(shown(p) for p in paths)
    if glob:
        pats = " ".join(f"'{g}'" for g in glob)
        return (
            f"no file in {where} matches --glob {pats}",
            "a pattern matches a file's name or its path under the directory, e.g. "
            "--glob '*.pdf' or --glob 'docs/*.md'",
        )
    hint = "name files directly, or a directory with documents in it"
    if not recursive:
        hint = "drop --no-recursive to look in subdirectories too"
    return f"no files to ingest in {where}", hint


# NAME_MAX less room for the `.ok.md` suffix, a disambiguating id and atomic_write's temp name
MAX_STDIN_NAME = 200


def ingest_stdin(folder: Folder, data: bytes, name: str | None = None) -> IngestReport:
    name = name or f"stdin-{hashlib.sha256(data).hexdigest()[:8]}.md"
    return ingest_named(folder, [(name, data)])


def ingest_named(
    folder: Folder, files: Sequence[tuple[str, bytes]], option: str = "--name"
) -> IngestReport:
    """Ingest documents given as (file name, bytes), as standard input is, in one ingest
    (one graph write for all of them). Every name is checked before anything is written;
    `option` is what the caller calls a name, for the messages."""
    seen: set[str] = set()
    for name, _ in files:
        if "/" in name or name.startswith(".") or "\x00" in name or not name.strip():
            raise BadInput(
                f"{option} '{shown(name)}' must be a plain file name",
                f"e.g. {option} notes.md" if option.startswith("-") else "e.g. notes.md",
            )
        if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in name):
            raise BadInput(
                f"{option} '{shown(name)}' holds a control character (a line break, a tab …)",
                "name the document with printable characters only, e.g. notes.md",
            )
        if len(os.fsencode(name)) > MAX_STDIN_NAME:
            raise BadInput(
                f"{option} is {len(os.fsencode(name))} bytes long; at most {MAX_STDIN_NAME} "
                "are accepted",
                "pass a shorter name, e.g. notes.md",
            )
        if name in seen:
            raise BadInput(
                f"{option} '{shown(name)}' is given twice",
                "give each document its own name (the second would replace the first)",
            )
        seen.add(name)
    cands = [
        Candidate(
            data=data,
            rel=f"stdin/{name}",
            origin="-",
            source={"path": f"store/sources/stdin/{name}"},
        )
        for name, data in files
    ]
    return ingest(folder, cands)


def list_docs(folder: Folder, all_versions: bool = False) -> list[MappingEntry]:
    return [
        e
        for e in sorted(mapping_mod.load(folder).values(), key=lambda e: e.get("path", ""))
        if all_versions or e.get("current", True)
    ]


def remove(
    folder: Folder, ref: str, keep_source: bool = False, reason: str | None = None
) -> MappingEntry:
    """Delete a document's normalized file (and original), its mapping entry and graph nodes."""
    entry = resolve(folder, ref)
    entries = mapping_mod.load(folder)
    target = folder.root / entry["path"]
    src = (entry.get("source") or {}).get("path")
    if target.exists():
        target.unlink()
    if src and not keep_source and src.startswith("store/sources/"):
        sp = folder.root / src
        shared = [
            e
            for e in entries.values()
            if e["id"] != entry["id"]
            and (e.get("source") or {}).get("path") == src
            and e.get("current", True)
        ]
        if sp.exists() and not shared:
            sp.unlink()
    entries.pop(entry["id"], None)
    mapping_mod.save(folder, entries)
    with indexer.open_graph(folder, write=True) as g:
        indexer.remove_from_graph(folder, g, [entry["id"]], [])
        links.relink(g)
    folder.log_op("store.remove", ids=[entry["id"]], paths=[entry["path"]])
    events.emit(
        folder,
        "removed",
        doc=entry["id"],
        path=entry["path"],
        source=entry.get("source"),
        **({"reason": reason} if reason else {}),
    )
    return entry


def read_doc(folder: Folder, ref: str) -> tuple[MappingEntry, str]:
    entry = resolve(folder, ref, include_old=True)
    path = folder.root / entry["path"]
    if not path.exists():
        if entry.get("superseded_by"):
            raise NotFound(
                f"version {entry['id']} was replaced by {entry['superseded_by']} "
                "and its text was not kept (it was edited in place)",
                f"show the current version: `ok store show {entry['superseded_by']}`",
            )
        raise OkError(f"{entry['path']} is missing on disk", "run `ok sync`")
    return entry, path.read_text(encoding="utf-8")
