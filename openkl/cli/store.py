"""`ok store …`: collected documents."""

from __future__ import annotations

import sys
from typing import Any

import typer

from . import output
from .common import folder, writing
from .output import JsonOpt, emit

app = typer.Typer(help="Documents: originals in store/sources, text in store/normalized.",
                  no_args_is_help=True)


def report_ingest(rep: Any, json_: bool) -> None:
    """Print an ingest report; exit 1 when anything was skipped."""
    for s in rep.skipped:
        output.warn(f"skipped {s['path']}: {s['reason']}")
    emit(rep.as_dict(), json_, plain=lambda d: "\n".join(
        [f"added {a['id']}  {a['path']}" for a in d["added"]]
        + [f"unchanged {u['id']}  {u['path']}" for u in d["unchanged"]]
        + [f"{len(d['added'])} added, {len(d['unchanged'])} unchanged, "
           f"{len(d['skipped'])} skipped, {d['chunks']} chunks"]))
    if rep.skipped:
        raise typer.Exit(1)


@app.command()
def ingest(
    paths: list[str] = typer.Argument(..., help="Files or directories; `-` reads stdin."),
    glob: list[str] = typer.Option(None, "--glob", "-g", help="Only files matching (repeatable)."),
    no_recursive: bool = typer.Option(False, "--no-recursive", help="Do not descend into dirs."),
    name: str = typer.Option(None, "--name", help="File name for stdin input."),
    json_: bool = JsonOpt,
) -> None:
    """Ingest documents: text/markdown as-is; pdf, html, docx, pptx, xlsx via kreuzberg."""
    from ..store import IngestReport, ingest_paths, ingest_stdin

    f = folder()
    with writing(f, "ok store ingest"):
        if paths == ["-"]:
            rep = ingest_stdin(f, sys.stdin.buffer.read(), name)
        elif "-" in paths:
            raise typer.BadParameter("`-` (stdin) cannot be mixed with paths")
        else:
            rep = ingest_paths(f, paths, glob=glob, recursive=not no_recursive)
    assert isinstance(rep, IngestReport)
    report_ingest(rep, json_)


@app.command("list")
def list_(all_versions: bool = typer.Option(False, "--all", help="Include old versions."),
          json_: bool = JsonOpt) -> None:
    """List documents."""
    from ..store import list_docs

    rows = list_docs(folder(), all_versions)
    emit(rows, json_, plain=lambda rs: "\n".join(
        f"{r['id']}\t{r['path']}\t{r.get('title', '')}" for r in rs))


@app.command()
def show(doc: str = typer.Argument(..., help="Doc id, id prefix or path."),
         meta: bool = typer.Option(False, "--meta", help="Only the mapping entry."),
         json_: bool = JsonOpt) -> None:
    """Print a document's normalized text (or its metadata)."""
    from ..store import read_doc

    entry, text = read_doc(folder(), doc)
    if meta or output.want_json(json_):
        emit({**entry, **({} if meta else {"text": text})}, True)
    else:
        sys.stdout.write(text)


@app.command()
def remove(doc: str = typer.Argument(..., help="Doc id, id prefix or path."),
           keep_source: bool = typer.Option(False, "--keep-source", help="Keep the original."),
           json_: bool = JsonOpt) -> None:
    """Remove a document (normalized text, original, mapping entry, graph nodes)."""
    from ..store import remove as do_remove

    f = folder()
    with writing(f, "ok store remove"):
        entry = do_remove(f, doc, keep_source=keep_source)
    emit({"removed": entry["id"], "path": entry["path"]}, json_,
         plain=lambda d: f"removed {d['removed']}  {d['path']}")
