"""One place decides how output looks: `--json` > rich on a TTY > plain text on a pipe.

Data goes to stdout; progress, warnings and errors go to stderr.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import typer

from .. import settings
from ..errors import OkError, UsageError


class State(threading.local):
    """Global options, set by the root callback; per thread, as a server runs several
    commands at once."""

    root: str | None = None
    json: bool = False
    debug: bool = False
    tee: str | None = None
    color: str = "auto"
    # seconds spent waiting for the person (an editor, a pager, a question): not the
    # command's own time
    waited: float = 0.0
    # a command that runs until stopped (sync --watch, events --follow): no time to judge
    long_running: bool = False


state = State()


@contextlib.contextmanager
def waiting() -> Iterator[None]:
    """The block waits for the person, not for the command: its time is left out of what
    the command took (`state.waited`)."""
    import time

    started = time.monotonic()
    try:
        yield
    finally:
        state.waited += time.monotonic() - started


JsonOpt = typer.Option(False, "--json", help="Print JSON to stdout (stable shapes, for jq).")

FORMATS = ("json", "jsonl", "csv", "tsv")


def _check_format(value: str | None) -> str | None:
    if value is not None and value not in FORMATS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(FORMATS)}")
    return value


FormatOpt = typer.Option(
    None,
    "--format",
    metavar="json|jsonl|csv|tsv",
    callback=_check_format,
    help="Records as a JSON array (same as --json), JSON lines, or CSV/TSV with a header "
    "row (nested values as JSON text; TSV escapes tab, newline and backslash as \\t \\n \\\\).",
)


def formats(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command that takes `fmt` (FormatOpt) the shortcuts --csv and --tsv, as
    sqlite-utils has them: the decorator adds the two options and folds them into `fmt`."""
    import functools
    import inspect

    sig = inspect.signature(fn)
    extra = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(False, f"--{name}", help=f"The same as --format {name}."),
            annotation=bool,
        )
        for name in ("csv", "tsv")
    ]

    @functools.wraps(fn)
    def wrapper(*args: Any, csv: bool = False, tsv: bool = False, **kwargs: Any) -> Any:
        kwargs["fmt"] = _shortcut(kwargs.get("fmt"), csv, tsv)
        return fn(*args, **kwargs)

    wrapper.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[*sig.parameters.values(), *extra]
    )
    wrapper.__annotations__ = {**fn.__annotations__, "csv": "bool", "tsv": "bool"}
    return wrapper


def _shortcut(fmt: str | None, csv: bool, tsv: bool) -> str | None:
    chosen = [f for f, on in (("csv", csv), ("tsv", tsv)) if on]
    if fmt is not None:
        chosen = list(dict.fromkeys([fmt, *chosen]))
    if len(chosen) > 1:
        raise UsageError(
            "--" + " and --".join(chosen) + " ask for different formats", "give one of them"
        )
    return chosen[0] if chosen else None


def want_json(flag: bool) -> bool:
    return flag or state.json or settings.env("OK_JSON") == "1"


def is_tty() -> bool:
    """Rich (styled) output: stdout is a terminal, or `--color always` asks for it anyway."""
    return state.color == "always" or sys.stdout.isatty()


def styled() -> bool:
    """Bold, dim and colours at all: `--color` wins; on auto, `NO_COLOR` (any value) turns
    every style off, not only colours (https://no-color.org)."""
    if state.color in ("always", "never"):
        return state.color == "always"
    return not settings.env("NO_COLOR")


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def emit_jsonl(rows: Iterable[Any]) -> None:
    for r in rows:
        sys.stdout.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")


def records_format(fmt: str | None, json_flag: bool) -> str | None:
    """The format a list of records is printed in: `--format`, else json for `--json`
    (or OK_JSON=1), else None (a table on a terminal, plain lines on a pipe)."""
    if fmt is not None:
        if json_flag and fmt != "json":
            raise UsageError(f"--json and --format {fmt} disagree", "give one of them")
        return fmt
    return "json" if want_json(json_flag) else None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def write_records(rows: list[Any], fmt: str) -> None:
    """Print `rows` (dicts) as json, jsonl, csv or tsv. CSV and TSV get a header row of the
    keys in the order they first appear; a row without a key leaves its cell empty."""
    if fmt == "json":
        emit_json(rows)
        return
    if fmt == "jsonl":
        emit_jsonl(rows)
        return
    columns = list(dict.fromkeys(k for r in rows for k in r))
    if not columns:
        return
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    if fmt == "tsv":
        for line in [columns, *cells]:
            sys.stdout.write("\t".join(c.translate(_TSV_ESCAPES) for c in line) + "\n")
        return
    import csv

    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(columns)
    w.writerows(cells)


def emit_records(
    rows: list[Any],
    json_flag: bool,
    fmt: str | None,
    render: Callable[[Any], None] | None = None,
    plain: Callable[[Any], str] | None = None,
) -> None:
    """Print a list of records in the `--format` asked for, or as `emit` would."""
    chosen = records_format(fmt, json_flag)
    if chosen is None:
        emit(rows, False, render, plain)
    else:
        write_records(rows, chosen)


def emit_record(
    data: Any,
    json_flag: bool,
    fmt: str | None,
    render: Callable[[Any], None] | None = None,
    plain: Callable[[Any], str] | None = None,
) -> None:
    """Print one object in the `--format` asked for: JSON as --json prints it, one JSON line,
    or CSV/TSV of one row (nested values as JSON text); else as `emit` would."""
    chosen = records_format(fmt, json_flag)
    if chosen is None:
        emit(data, False, render, plain)
    elif chosen == "json":
        emit_json(data)
    else:
        write_records([data], chosen)


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    if not styled():  # no escape codes at all: rich's own NO_COLOR keeps bold and dim
        return Console(
            stderr=stderr, highlight=False, soft_wrap=not stderr and not is_tty(), color_system=None
        )
    return Console(
        stderr=stderr,
        highlight=False,
        soft_wrap=not stderr and not is_tty(),
        force_terminal=True if state.color == "always" else None,
    )


def emit(
    data: Any,
    json_flag: bool,
    render: Callable[[Any], None] | None = None,
    plain: Callable[[Any], str] | None = None,
) -> None:
    """Print `data` as JSON, as rich output (TTY) or as plain text (pipe)."""
    if want_json(json_flag) or (render is None and plain is None):
        emit_json(data)
    elif is_tty() and render is not None:
        render(data)
    elif plain is not None:
        text = plain(data)
        if text:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        assert render is not None
        render(data)


class _Captured(io.StringIO):
    """stdout while a pager waits for it: still a terminal, so output is styled as one."""

    def isatty(self) -> bool:
        return True


@contextlib.contextmanager
def paged(json_flag: bool = False) -> Iterator[None]:
    """Send what the block prints through `$PAGER` (default `less -FRX`), as git does: only
    when stdout is a terminal and the output is not JSON."""
    import os

    pager = settings.env("PAGER")
    pager = "less -FRX" if pager is None else pager.strip()
    if not sys.stdout.isatty() or want_json(json_flag) or pager in ("", "cat"):
        yield
        return
    from ..files import streams

    real, buf = streams.concrete(sys.stdout), _Captured()
    try:
        with streams.redirect("stdout", buf):
            yield
    finally:
        text = buf.getvalue()
        if text:
            import subprocess

            env = {"LESS": "FRX", **os.environ}  # the shell runs $PAGER, as git does
            real.flush()
            try:
                with waiting():  # the person reads: not the command's time
                    ran = subprocess.run(
                        pager,
                        shell=True,
                        input=text.encode(),
                        env=env,
                        check=False,
                        stdout=streams.fd_of(real),
                        stderr=streams.fd_of(sys.stderr),
                    )
                missing = ran.returncode == 127  # the shell found no such pager
            except OSError:
                missing = True
            if missing:  # print the text itself rather than lose it
                real.write(text)


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def info(message: str) -> None:
    print(message, file=sys.stderr)


def fail(err: OkError) -> None:
    """Print an expected error as one line and exit with its code."""
    print(f"Error: {err}", file=sys.stderr)
    raise SystemExit(err.exit_code)


def read_stdin_text() -> str:
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise OkError(
            f"stdin is not valid UTF-8 (bad byte at offset {e.start})",
            "pipe UTF-8 text, e.g. through `iconv -t utf-8`",
        ) from e
