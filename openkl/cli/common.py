"""Shared pieces of the CLI: opening the folder, the writer lock, common options."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from ..files.folder import Folder, open_folder
from ..records import EditCaller
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


def cli_caller() -> EditCaller:
    """Who runs this command, as a backfeed item records it: the OS user, through the CLI."""
    import getpass

    try:
        who = getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (a bare container)
        who = "cli"
    return {"via": "cli", "by": who or "cli"}


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

DriftPenaltyOpt = typer.Option(
    None,
    "--drift-penalty",
    metavar="WEIGHT",
    help="Hold back documents whose latest version drifted far from the one it replaced: "
    "each score times 1 - WEIGHT * drift (0-10; 0: off; default search.drift_penalty, off). "
    "--explain shows each hit's drift and factor.",
)


# -- the flag vocabulary (openkl/cli/vocabulary.py): one spelling per idea --------------------
SCOPES = ("all", "mem", "store")


def _scope(value: str | None) -> str | None:
    """`--in`: all, mem or store; `memory` is mem."""
    if value is None:
        return None
    v = "mem" if value == "memory" else value
    if v not in SCOPES:
        from ..errors import UsageError

        raise UsageError(
            f"unknown scope {value!r} for --in", "use one of: all, mem, store (memory is mem)"
        )
    return v


def scope_opt(default: str = "all", help: str = "Where to look.") -> Any:
    return typer.Option(
        default,
        "--in",
        metavar="all|mem|store",
        callback=_scope,
        help=f"{help} mem (or memory): notes; store: documents; all: both.",
        autocompletion=lambda: list(SCOPES),
    )


def limit_opt(default: int | None, help: str = "At most this many.", **kw: Any) -> Any:
    return typer.Option(default, "-k", "-n", "--limit", metavar="N", help=help, **kw)


TagFilterOpt = typer.Option(
    None, "--tag", "--tags", "-t", metavar="TAG", help="Only with this tag (repeatable, or a,b)."
)
TopicFilterOpt = typer.Option(
    None, "--topic", "--topics", metavar="TOPIC", help="Only with this topic (repeatable, or a,b)."
)
SinceOpt = typer.Option(
    None,
    "--since",
    metavar="WHEN",
    help="Only on or after: an ISO date/time, or a span back from now (30m, 12h, 7d, 2w).",
)
WhereOpt = typer.Option(
    None,
    "--where",
    metavar="KEY=VALUE",
    help="Only where the file's frontmatter matches (repeatable, all must hold): KEY=VALUE "
    "(a list contains it), KEY!=VALUE, KEY>=DATE or N, KEY<… (a date is its whole day; "
    "30d is 30 days ago), or a bare KEY (it is set).",
)
UntilOpt = typer.Option(
    None,
    "--until",
    metavar="WHEN",
    help="Only on or before (a date includes that day; same forms as --since).",
)
LlmOpt = typer.Option(
    None,
    "--llm/--no-llm",
    help="Use the configured LLM (llm.base_url, llm.model), or not; default: when one is "
    "configured.",
)
TakeOverOpt = typer.Option(
    False,
    "--take-over",
    help="With --backend: when the folder's stack in PostgreSQL holds another folder's rows "
    "(another folder with the same domain), replace them with this folder's instead of "
    "refusing.",
)


def depth_opt(default: int | None, help: str, **kw: Any) -> Any:
    return typer.Option(default, "-d", "--depth", "--max-depth", metavar="N", help=help, **kw)


def glob_opt(help: str) -> Any:
    return typer.Option(
        None, "-g", "--glob", "--include", metavar="GLOB", help=f"{help} (repeatable, or a,b)."
    )


def split_globs(values: list[str] | None) -> list[str]:
    """Globs given repeated or comma-separated (`--include "*.py,*.md"`); a comma inside
    braces (`*.{py,md}`) is part of its glob."""
    out: list[str] = []
    for v in values or []:
        depth, cur = 0, ""
        for ch in v:
            if ch == "," and depth == 0:
                out.append(cur)
                cur = ""
                continue
            depth += {"{": 1, "}": -1}.get(ch, 0)
            cur += ch
        out.append(cur)
    return [g.strip() for g in out if g.strip()]
