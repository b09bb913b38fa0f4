"""Typed errors. The CLI turns each into one line: ``Error: … (hint: …)`` and an exit code."""

from __future__ import annotations


class OkError(Exception):
    """An expected failure with a message for the user and, where possible, a fix."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"


class UsageError(OkError):
    """The command line itself is wrong (exit 2)."""

    exit_code = 2


class NotAFolder(OkError):
    """No knowledge folder could be found."""


class NotFound(OkError):
    """An id or path names nothing."""


class BadInput(OkError):
    """A file or value that cannot be used as given."""


class LockBusy(OkError):
    """Another process holds the writer lock (or the graph) longer than we may wait."""


class IndexMismatch(OkError):
    """The derived graph was built with another schema or embedder."""


class ReadOnlyViolation(OkError):
    """A write was attempted through a read-only surface."""


class QueryRefused(OkError):
    """A query that no flag allows: it reaches files or extensions, or is several statements."""
