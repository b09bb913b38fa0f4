"""Shared pieces of the CLI: opening the folder, the writer lock, common options."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import typer

from ..folder import Folder, open_folder
from .output import state


def folder() -> Folder:
    f = open_folder(state.root)
    if state.tee:
        f.tee = Path(state.tee).expanduser().resolve()
    return f


@contextlib.contextmanager
def writing(f: Folder, what: str) -> Iterator[Folder]:
    """Hold the folder's writer lock for a command."""
    with f.write_lock(what):
        yield f


def split_labels(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out += [x.strip() for x in v.split(",") if x.strip()]
    return out


TagsOpt = typer.Option(None, "--tags", "--tag", "-t", help="Tag(s), comma-separated or repeated.")
TopicsOpt = typer.Option(None, "--topics", "--topic", help="Topic(s), comma-separated or repeated.")
IncludeSupersededOpt = typer.Option(
    False,
    "--include-superseded",
    help="Also notes that a newer note supersedes (left out by default; expired notes are "
    "always left out).",
)
RecencyOpt = typer.Option(
    None,
    "--recency",
    metavar="HALF_LIFE",
    help="Favour newer documents and notes: each score times 0.5^(age/HALF_LIFE), at least "
    "search.recency_floor (e.g. 90d, 12h, 2w; `off`; default search.recency, off).",
)
