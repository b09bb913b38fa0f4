"""Collected documents: ingest files or text, fetch web pages, arXiv papers,
repositories and S3 objects, remove a document, set refresh policies, show its versions."""

from __future__ import annotations

from pathlib import Path

from ..collect import refresh as refresh_mod
from ..collect import sources
from ..collect import store as store_mod
from ..errors import UsageError
from ..files.folder import Folder
from ..records import DocVersion, DueSource, MappingEntry, RefreshPolicy

IngestReport = store_mod.IngestReport


def ingest(
    folder: Folder,
    paths: list[str] | None = None,
    *,
    data: bytes | None = None,
    name: str | None = None,
    files: list[tuple[str, bytes]] | None = None,
    glob: list[str] | None = None,
    recursive: bool = True,
    follow: bool = False,
    ocr: bool = False,
    policy: RefreshPolicy | None = None,
    confine: Path | None = None,
) -> IngestReport:
    """Ingest files and directories, or `data` as one document named `name`, or `files`,
    documents given as (name, bytes), all in one ingest (then `paths` is not looked at). A
    `policy` is set on what was stored already, too; `confine` keeps every file, whatever a
    link says, inside that directory. The caller holds the writer lock."""
    if data is not None:
        return store_mod.ingest_stdin(folder, data, name)
    if files is not None:
        return store_mod.ingest_named(folder, files, option="the file name")
    rep = store_mod.ingest_paths(
        folder,
        paths or [],
        glob=glob,
        recursive=recursive,
        policy=policy,
        ocr=ocr,
        follow=follow,
        confine=confine,
    )
    if policy and rep.unchanged:
        refresh_mod.set_policy(folder, [u["id"] for u in rep.unchanged], policy)
    return rep


# the names `--format` takes beside the bare extensions, and the extensions each stands for
_FORMAT_ALIASES = {
    "md": (".md", ".markdown", ".mdown"),
    "markdown": (".md", ".markdown", ".mdown"),
    "html": (".html", ".htm"),
    "txt": (".txt", ".text"),
    "text": (".txt", ".text"),
    "jpg": (".jpg", ".jpeg"),
    "jpeg": (".jpg", ".jpeg"),
    "tif": (".tif", ".tiff"),
    "tiff": (".tif", ".tiff"),
    "yaml": (".yaml", ".yml"),
}


def format_suffixes(fmt: str) -> tuple[str, ...]:
    """The file extensions of a type as `ok store ingest --format` names it (pdf, docx,
    md, html, …)."""
    from ..text.normalize import IMAGE_MIME, KREUZBERG_MIME, TEXT_SUFFIXES

    name = fmt.lower().lstrip(".")
    if name in _FORMAT_ALIASES:
        return _FORMAT_ALIASES[name]
    known = {*KREUZBERG_MIME, *TEXT_SUFFIXES, *IMAGE_MIME}
    if f".{name}" not in known:
        raise UsageError(
            f"--format {fmt!r} is not a type ok reads",
            "use one of: " + ", ".join(sorted(x.lstrip(".") for x in known)),
        )
    return (f".{name}",)


def check_format(paths: list[str], fmt: str, suffixes: tuple[str, ...]) -> None:
    """A file named on the command line must be of the type --format names (a directory's
    files are filtered by it instead)."""
    for raw in paths:
        p = Path(raw).expanduser()
        if raw != "-" and p.is_file() and not p.name.lower().endswith(suffixes):
            raise UsageError(
                f"{raw} is not a {fmt} file: its extension says what it is",
                f"leave out --format, or give *{suffixes[0]} files",
            )


def store_web(
    folder: Folder,
    url: str,
    *,
    depth: int = 0,
    same_host: bool = True,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    max_pages: int | None = None,
    policy: RefreshPolicy | None = None,
    what: str,
) -> IngestReport:
    """Fetch web pages (`max_pages` None: the folder's `web.max_pages`) and store them.

    Takes the writer lock itself, named `what`, and only to store: the fetch runs without
    it, so a slow site does not block other writers."""
    batch = sources.fetch_web(
        folder,
        url,
        depth=depth,
        same_host=same_host,
        include=include or None,
        exclude=exclude or None,
        max_pages=max_pages,
    )
    return _store(folder, batch, policy, what)


def store_arxiv(
    folder: Folder, ids: list[str], *, policy: RefreshPolicy | None = None, what: str
) -> IngestReport:
    """Fetch arXiv papers and store them; takes the writer lock itself, like `store_web`."""
    return _store(folder, sources.fetch_arxiv(folder, ids), policy, what)


def store_repo(
    folder: Folder,
    target: str,
    *,
    include: list[str] | None = None,
    branch: str | None = None,
    policy: RefreshPolicy | None = None,
    what: str,
) -> IngestReport:
    """Read a repository's files (a path, or a git URL cloned under .ok/cache) and store
    them; takes the writer lock itself, like `store_web`."""
    batch = sources.fetch_repo(folder, target, include=include or None, branch=branch)
    return _store(folder, batch, policy, what)


def store_s3(
    folder: Folder,
    url: str,
    *,
    include: list[str] | None = None,
    endpoint: str | None = None,
    profile: str | None = None,
    anonymous: bool = False,
    policy: RefreshPolicy | None = None,
    what: str,
) -> IngestReport:
    """Read the objects under an s3://bucket/prefix (AWS S3, or the S3-compatible store at
    `endpoint`; None: the folder's s3.endpoint_url) and store them, signed with `profile`
    (None: s3.profile, else boto3's chain) or, `anonymous`, unsigned; takes the writer lock
    itself, like `store_web`."""
    from ..collect import s3

    batch = s3.fetch_s3(
        folder,
        url,
        include=include or None,
        endpoint=endpoint,
        profile=profile,
        anonymous=anonymous,
    )
    return _store(folder, batch, policy, what)


def _store(
    folder: Folder, batch: sources.Batch, policy: RefreshPolicy | None, what: str
) -> IngestReport:
    with folder.write_lock(what):
        return sources.ingest_batch(folder, batch, policy=policy)


def remove_doc(folder: Folder, ref: str, keep_source: bool = False) -> MappingEntry:
    """Remove a document: its text, its original (unless `keep_source`), its mapping entry
    and its graph nodes; returns the mapping entry it had. The caller holds the writer lock."""
    return store_mod.remove(folder, ref, keep_source=keep_source)


def set_refresh_policy(
    folder: Folder, refs: list[str], policy: RefreshPolicy | None
) -> list[DueSource]:
    """Set (or, with None, clear) the refresh policy of documents; returns one row per
    document. The caller holds the writer lock."""
    return refresh_mod.set_policy(folder, refs, policy)


def refresh_policy(every: str | None = None, cron: str | None = None) -> RefreshPolicy | None:
    """A refresh policy from an interval (6h, 1d) and/or a cron line, checked (None when
    neither is given)."""
    return refresh_mod.make_policy(every, cron)


def doc_history(folder: Folder, doc: str) -> list[DocVersion]:
    """Every version of a document (id, prefix, path or source), newest first, with the
    drift from the version before."""
    return refresh_mod.history(folder, doc)
