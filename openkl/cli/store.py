"""`ok store …`: collected documents."""

from __future__ import annotations

import sys
from typing import Any

import typer

from ..records import DocVersion
from . import completion, output
from .common import folder, writing
from .output import FormatOpt, JsonOpt, emit, emit_records

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
    """Print an ingest report; exit 1 when anything was skipped."""
    _print_report(rep, json_)
    if rep.skipped:
        raise typer.Exit(1)


@app.command()
def ingest(
    paths: list[str] = typer.Argument(..., help="Files or directories; `-` reads stdin."),
    glob: list[str] = typer.Option(None, "--glob", "-g", help="Only files matching (repeatable)."),
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
    data = None
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
            glob=glob,
            recursive=not no_recursive,
            follow=follow,
            ocr=ocr,
            policy=policy,
        )
    report_ingest(rep, json_)


@app.command("list")
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
    """Report a fetch-and-ingest; pages that could not be fetched are warnings, not failures."""
    _print_report(rep, json_)
    if not rep.added and not rep.unchanged:
        raise typer.Exit(1)


@app.command()
def web(
    url: str = typer.Argument(..., help="The page to fetch (http or https)."),
    depth: int = typer.Option(0, "--depth", "-d", help="Follow links this many hops away."),
    same_host: bool = typer.Option(
        True, "--same-host/--any-host", help="Follow links only on the start page's host."
    ),
    include: list[str] = typer.Option(
        None, "--include", help="Follow only links matching this glob (URL or path; repeatable)."
    ),
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
    """
    from .. import ops

    f = folder()
    rep = ops.store_web(
        f,
        url,
        depth=depth,
        same_host=same_host,
        include=include,
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
    include: list[str] = typer.Option(
        None,
        "--include",
        "-g",
        help="Only files matching this glob (repeatable); default: every supported text file.",
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
      ok store repo https://github.com/org/repo.git --branch main --refresh 7d
    """
    from .. import ops

    f = folder()
    policy = ops.refresh_policy(every, cron)
    rep = ops.store_repo(
        f, target, include=include, branch=branch, policy=policy, what="ok store repo"
    )
    _fetched(rep, json_)


@app.command()
def history(
    doc: str = typer.Argument(
        ..., help="Doc id (any version), prefix or path.", autocompletion=completion.doc_ids
    ),
    json_: bool = JsonOpt,
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

    emit(rows, json_, plain=plain)


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
