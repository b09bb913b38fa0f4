"""`ok store …`: collected documents."""

from __future__ import annotations

import sys
from typing import Any

import typer

from ..errors import PARTIAL, OkError, UsageError
from ..records import DocVersion
from . import cmd_completion as completion
from . import output
from .common import (
    DriftPenaltyOpt,
    RecencyOpt,
    SinceOpt,
    UntilOpt,
    WhereOpt,
    depth_opt,
    folder,
    glob_opt,
    limit_opt,
    split_globs,
    writing,
)
from .output import FormatOpt, JsonOpt, emit, emit_records, formats

RECURSIVE_DEPTH = 5  # hops --recursive follows without --depth, as wget -r

app = typer.Typer(
    help="Documents: originals in store/sources, text in store/normalized.", no_args_is_help=True
)

RefreshOpt = typer.Option(None, "--refresh", help="Refresh policy: an interval such as 6h, 1d, 7d.")
CronOpt = typer.Option(
    None, "--cron", help='Refresh on a cron schedule (UTC), e.g. "0 6 * * *"; wins over --refresh.'
)


def _print_report(rep: Any, json_: bool) -> None:
    for s in rep.skipped:
        output.warn(f"skipped {s['path']}: {s['reason']}")
    emit(
        rep.as_dict(),
        json_,
        plain=lambda d: "\n".join(
            [f"added {a['id']}  {a['path']}" for a in d["added"]]
            + [f"unchanged {u['id']}  {u['path']}" for u in d["unchanged"]]
            + [
                f"{len(d['added'])} added, {len(d['unchanged'])} unchanged, "
                f"{len(d['skipped'])} skipped, {d['chunks']} chunks"
            ]
        ),
    )


def report_ingest(rep: Any, json_: bool) -> None:
    """Print an ingest report. A file passed over in a directory (its type, a link, its
    size) is a warning, and `ingest && next` goes on; one that should have been stored and
    could not be makes the ingest partly done (exit 3), or failed when nothing was (2)."""
    _print_report(rep, json_)
    _exit_for(rep)


def _exit_for(rep: Any) -> None:
    if not rep.failed:
        return
    if rep.added or rep.unchanged:
        raise typer.Exit(PARTIAL)
    n = len(rep.failed)
    raise OkError(
        f"nothing was stored: {n} {'path' if n == 1 else 'paths'} could not be",
        "the warnings above say why",
    )


@app.command(
    epilog="""Examples:

\b
  ok store ingest docs/whitepapers               # a directory: every file it can read
  ok store ingest ~/papers --glob '*.pdf'         # only these (repeatable, or '*.pdf,*.md')
  ok store ingest ~/papers --format pdf           # the same
  curl -s https://example.org/a.pdf | ok store ingest - --format pdf
"""
)
def ingest(
    paths: list[str] = typer.Argument(..., help="Files or directories; `-` reads stdin."),
    glob: list[str] = glob_opt("In a directory, only files matching (a name or a path in it)"),
    input_format: str = typer.Option(
        None,
        "--format",
        metavar="pdf|docx|html|md|…",
        help="Only files of this type, by their extension (in a directory: as --glob "
        "'*.pdf'); with `-`, the type of what is piped.",
    ),
    no_recursive: bool = typer.Option(False, "--no-recursive", help="Do not descend into dirs."),
    follow: bool = typer.Option(
        False,
        "--follow",
        "-L",
        help="Follow symlinks that lead out of "
        "a given directory (they are skipped and reported otherwise).",
    ),
    name: str = typer.Option(None, "--name", help="File name for stdin input."),
    ocr: bool = typer.Option(
        False, "--ocr", help="Read images and scanned PDF pages with OCR (needs tesseract)."
    ),
    every: str = RefreshOpt,
    cron: str = CronOpt,
    json_: bool = JsonOpt,
) -> None:
    """Ingest documents: text/markdown as-is; pdf, html, docx, pptx, xlsx via kreuzberg."""
    from .. import ops

    f = folder()
    policy = ops.refresh_policy(every, cron)
    globs = split_globs(glob)
    data = None
    if input_format is not None:
        suffixes = ops.format_suffixes(input_format)
        globs += [f"*{x}" for x in suffixes]
        if paths == ["-"]:
            name = name or f"stdin{suffixes[0]}"
        elif name is not None and not name.lower().endswith(suffixes):
            raise UsageError(
                f"--name {name} is not a {input_format} file", f"name it *{suffixes[0]}"
            )
        ops.check_format(paths, input_format, suffixes)
    if paths == ["-"]:
        if policy:
            raise typer.BadParameter("stdin input cannot be refreshed: drop --refresh/--cron")
        data = sys.stdin.buffer.read()
    elif "-" in paths:
        raise typer.BadParameter("`-` (stdin) cannot be mixed with paths")
    with writing(f, "ok store ingest"):
        rep = ops.ingest(
            f,
            paths,
            data=data,
            name=name,
            glob=globs or None,
            recursive=not no_recursive,
            follow=follow,
            ocr=ocr,
            policy=policy,
        )
    report_ingest(rep, json_)


@app.command("list")
@formats
def list_(
    all_versions: bool = typer.Option(False, "--all", help="Include old versions."),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """List documents."""
    from .. import ops

    rows = ops.list_docs(folder(), all_versions=all_versions)
    emit_records(
        rows,
        json_,
        fmt,
        plain=lambda rs: "\n".join(f"{r['id']}\t{r['path']}\t{r.get('title', '')}" for r in rs),
    )


@app.command()
@formats
def search(
    query: str = typer.Argument(..., help="What to look for (`-` reads it from stdin)."),
    k: int | None = limit_opt(None, "Number of results (default 10, at most 1000)."),
    mode: str | None = typer.Option(
        None, "--mode", metavar="hybrid|vector|fts", help="Ranking signals (default hybrid)."
    ),
    path: str | None = typer.Option(
        None, "--path", metavar="GLOB", help="Only paths matching this glob."
    ),
    since: str | None = SinceOpt,
    until: str | None = UntilOpt,
    where: list[str] | None = WhereOpt,
    per_doc: int | None = typer.Option(
        None, "--per-doc", metavar="N", help="Hits per document (default 1, at most 1000)."
    ),
    min_score: float | None = typer.Option(
        None,
        "--min-score",
        metavar="X",
        help="If no query word occurs, say no good match (exit 1) unless a passage's cosine "
        "similarity to the query reaches X (0-1; default search.min_score; 0: off).",
    ),
    explain: bool = typer.Option(False, "--explain", help="Per-signal scores and ranks."),
    recency: str | None = RecencyOpt,
    drift_penalty: float | None = DriftPenaltyOpt,
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """Search documents only (the same as `ok search --in store`)."""
    from .. import ops
    from .hits import search_request, show_hits

    req = search_request(
        query,
        where=where,
        k=k,
        mode=mode,
        per_doc=per_doc,
        scope="store",
        path=path,
        since=since,
        until=until,
        explain=explain,
        min_score=min_score,
        recency=recency,
        drift_penalty=drift_penalty,
    )
    f = folder()
    res = ops.search(ops.local(f), req)
    show_hits(f, res, json_, explain, fmt, filtered=bool(path or since or until or where))


@app.command()
def show(
    doc: str = typer.Argument(
        ..., help="Doc id, id prefix or path.", autocompletion=completion.doc_ids
    ),
    meta: bool = typer.Option(False, "--meta", help="Only the mapping entry."),
    json_: bool = JsonOpt,
) -> None:
    """Print a document's normalized text (or its metadata)."""
    from .. import ops

    d = ops.show_doc(folder(), doc)
    if meta or output.want_json(json_):
        emit({**d.entry, **({} if meta else {"text": d.text})}, True)
    else:
        with output.paged():
            sys.stdout.write(d.text)


@app.command()
def remove(
    doc: str = typer.Argument(
        ..., help="Doc id, id prefix or path.", autocompletion=completion.doc_ids
    ),
    keep_source: bool = typer.Option(False, "--keep-source", help="Keep the original."),
    json_: bool = JsonOpt,
) -> None:
    """Remove a document (normalized text, original, mapping entry, graph nodes)."""
    from .. import ops

    f = folder()
    with writing(f, "ok store remove"):
        entry = ops.remove_doc(f, doc, keep_source=keep_source)
    emit(
        {"removed": entry["id"], "path": entry["path"]},
        json_,
        plain=lambda d: f"removed {d['removed']}  {d['path']}",
    )


def _fetched(rep: Any, json_: bool) -> None:
    """Report a fetch-and-ingest: nothing stored is an error (2); a page or file that could
    not be fetched or read beside others that were makes it partly done (3)."""
    _print_report(rep, json_)
    if not rep.added and not rep.unchanged:
        raise OkError("nothing was stored", "the warnings above say why")
    _exit_for(rep)


@app.command()
def web(
    url: str = typer.Argument(..., help="The page to fetch (http or https)."),
    depth: int | None = depth_opt(
        None, "Follow links this many hops away (default 0: the page alone; 5 with -r)."
    ),
    recursive: bool = typer.Option(
        False,
        "--recursive",
        "-r",
        help="Follow links, as wget -r: up to 5 hops unless --depth says, and --max-pages.",
    ),
    same_host: bool = typer.Option(
        True, "--same-host/--any-host", help="Follow links only on the start page's host."
    ),
    include: list[str] = glob_opt("Follow only links matching this glob (a URL or a path)"),
    exclude: list[str] = typer.Option(
        None, "--exclude", help="Never follow links matching this glob (repeatable)."
    ),
    max_pages: int = typer.Option(
        None, "--max-pages", help="Stop after this many pages (default 50)."
    ),
    every: str = RefreshOpt,
    cron: str = CronOpt,
    json_: bool = JsonOpt,
) -> None:
    """Fetch web pages (main content as markdown), politely: robots.txt, a delay per host.

    Examples:

    \b
      ok store web https://example.org/guide --refresh 1d
      ok store web https://example.org/docs/ --depth 2 --include '/docs/*' --max-pages 100
      ok store web https://example.org/docs/ --recursive --max-depth 3
    """
    from .. import ops

    f = folder()
    if depth is None:
        depth = RECURSIVE_DEPTH if recursive else 0
    rep = ops.store_web(
        f,
        url,
        depth=depth,
        same_host=same_host,
        include=split_globs(include) or None,
        exclude=exclude,
        max_pages=max_pages,
        policy=ops.refresh_policy(every, cron),
        what="ok store web",
    )
    _fetched(rep, json_)


@app.command()
def arxiv(
    ids: list[str] = typer.Argument(..., help="arXiv ids, e.g. 2401.01234 or 2401.01234v2."),
    every: str = RefreshOpt,
    cron: str = CronOpt,
    json_: bool = JsonOpt,
) -> None:
    """Store arXiv papers: metadata from the arXiv API, text from the PDF.

    An id without a version follows the latest version on refresh; with one, it stays put.

    Examples:

    \b
      ok store arxiv 1706.03762 2005.11401 --refresh 7d
      ok store arxiv 2005.11401v2               # this version only
    """
    from .. import ops

    f = folder()
    policy = ops.refresh_policy(every, cron)
    rep = ops.store_arxiv(f, ids, policy=policy, what="ok store arxiv")
    _fetched(rep, json_)


@app.command()
def repo(
    target: str = typer.Argument(..., help="A local repository path or a git URL."),
    include: list[str] = glob_opt(
        "Only files matching this glob (default: every supported text file)"
    ),
    branch: str = typer.Option(None, "--branch", "-b", help="Branch or tag to read."),
    every: str = RefreshOpt,
    cron: str = CronOpt,
    json_: bool = JsonOpt,
) -> None:
    """Store the files of a repository (respects .gitignore; URLs are cloned under .ok/cache).

    Examples:

    \b
      ok store repo ~/src/project --include '*.md' --include '*.py'
      ok store repo ~/src/project --include "*.py,*.md"
      ok store repo https://github.com/org/repo.git --branch main --refresh 7d
    """
    from .. import ops

    f = folder()
    policy = ops.refresh_policy(every, cron)
    rep = ops.store_repo(
        f,
        target,
        include=split_globs(include) or None,
        branch=branch,
        policy=policy,
        what="ok store repo",
    )
    _fetched(rep, json_)


@app.command("s3")
def s3_(
    url: str = typer.Argument(..., help="s3://bucket/prefix: one object, or those under it."),
    include: list[str] = glob_opt(
        "Only objects matching this glob, a key or a name (default: every type ok reads)"
    ),
    endpoint_url: str = typer.Option(
        None,
        "--endpoint-url",
        metavar="URL",
        help="An S3-compatible store (MinIO, Ceph, R2 …), e.g. http://127.0.0.1:9000 "
        "(default: s3.endpoint_url, else AWS S3).",
    ),
    profile: str = typer.Option(
        None,
        "--profile",
        help="The AWS profile to sign with (default: s3.profile, else the usual chain: "
        "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws/credentials).",
    ),
    no_sign_request: bool = typer.Option(
        False,
        "--no-sign-request",
        help="Read a public bucket without credentials (its refreshes too).",
    ),
    every: str = RefreshOpt,
    cron: str = CronOpt,
    json_: bool = JsonOpt,
) -> None:
    """Store objects from S3 or an S3-compatible store; a refresh re-reads what changed (ETag).

    `s3://bucket/docs` is the object `docs` if there is one, else every object under
    docs/. An object stored before with the same ETag is not downloaded again. A refresh
    lists the prefix again: changed objects become new versions, new ones are added and
    deleted ones removed.

    Examples:

    \b
      ok store s3 s3://team-docs/handbook/ --refresh 1d
      ok store s3 s3://papers/2024 --include '*.pdf' --profile research
      ok store s3 s3://notes/ --endpoint-url http://127.0.0.1:9000   # MinIO
      ok store s3 s3://open-data/reports/ --no-sign-request          # a public bucket
    """
    from .. import ops

    f = folder()
    policy = ops.refresh_policy(every, cron)
    rep = ops.store_s3(
        f,
        url,
        include=split_globs(include) or None,
        endpoint=endpoint_url,
        profile=profile,
        anonymous=no_sign_request,
        policy=policy,
        what="ok store s3",
    )
    _fetched(rep, json_)


@app.command()
@formats
def history(
    doc: str = typer.Argument(
        ..., help="Doc id (any version), prefix or path.", autocompletion=completion.doc_ids
    ),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """Every version of a document, newest first, with drift from the version before.

    Examples:

    \b
      ok store history https://example.org/guide
      ok store history ee43fb66 --json
    """
    from .. import ops

    rows = ops.doc_history(folder(), doc)

    def plain(rs: list[DocVersion]) -> str:
        return "\n".join(
            f"{r['id']}\t{'current' if r['current'] else 'old'}\t{r['ingested_at'] or ''}\t"
            + ("-" if r["drift"] is None else f"drift {r['drift']:.4f}")
            for r in rs
        )

    emit_records(rows, json_, fmt, plain=plain)


@app.command()
def policy(
    docs: list[str] = typer.Argument(
        ..., help="Doc ids, prefixes or paths.", autocompletion=completion.doc_ids
    ),
    every: str = RefreshOpt,
    cron: str = CronOpt,
    clear: bool = typer.Option(False, "--clear", help="Remove the refresh policy."),
    json_: bool = JsonOpt,
) -> None:
    """Set or clear the refresh policy of stored documents.

    Examples:

    \b
      ok store policy https://example.org/guide --refresh 6h
      ok store policy 2401.00001 --cron "0 6 * * 1"
      ok store policy ee43fb66 --clear
    """
    from .. import ops

    pol = ops.refresh_policy(every, cron)
    if bool(pol) == clear:
        raise typer.BadParameter("pass --refresh and/or --cron, or --clear")
    f = folder()
    with writing(f, "ok store policy"):
        rows = ops.set_refresh_policy(f, docs, None if clear else pol)
    emit(
        rows,
        json_,
        plain=lambda rs: "\n".join(
            f"{r['id']}\t{r['path']}\t{r['refresh'] or '-'}\tnext {r['next_due'] or '-'}"
            for r in rs
        ),
    )
