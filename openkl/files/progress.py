"""Progress bars on stderr, shown only on a terminal (pipes and tests stay quiet)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

from .. import settings
from . import streams

Advance = Callable[[int], None]


def _enabled() -> bool:
    return sys.stderr.isatty() and not settings.env("OK_NO_PROGRESS")


@contextlib.contextmanager
def progress(description: str, total: int | None) -> Iterator[Advance]:
    """`with progress("embedding", n) as advance: … advance(k)`."""
    if not _enabled() or not total:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        # NO_COLOR: no escape codes at all (rich alone would keep bold and dim)
        console=Console(
            # the stream itself: the bar is drawn from a thread of rich's own
            file=streams.concrete(sys.stderr),
            color_system=None if settings.env("NO_COLOR") else "auto",
        ),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def note(message: str) -> None:
    """A status line on stderr."""
    print(message, file=sys.stderr)
