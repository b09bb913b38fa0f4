"""The ids that name files, one check per kind.

An id read from a file (a note's frontmatter, a line of the mapping, a citation or backfeed
file, a bundle) or from a request becomes part of a path: `memories/by_date/…/<id>.md`,
`citations/<id>.json`, `.ok/versions/<id>.ok.md`. Each kind is checked here, and nowhere
else, before that happens: an id that could name a file elsewhere (`../x`, `a/b`) or no
file at all is refused by a request and reported and skipped when a file holds it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import BadInput

# a file name is at most 255 bytes; room is left for a suffix and a temp file's name
MAX_ID_BYTES = 200


# control characters (Unicode's Cc: C0, DEL and C1), and the parts of a path that are no
# name of their own (`.`, `..`, empty)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# what a relative path inside the folder never has: a leading `/`, a backslash, a control
# character, or a part that is no name of its own (`.`, `..`, empty)
_NOT_INSIDE = re.compile(r"\A/|\\|[\x00-\x1f\x7f-\x9f]|(?:\A|/)\.{0,2}(?:/|\Z)")


def _utf8(value: str) -> bool:
    """False for bytes that were not UTF-8 (lone surrogates)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _file_name(value: str) -> bool:
    """One plain file name: no separator, nothing hidden (`.`, `..`), no control
    character, valid UTF-8, not too long."""
    if not value or value[0] == "." or "/" in value or "\\" in value or _CONTROL.search(value):
        return False
    return _utf8(value) and len(value.encode("utf-8", "surrogatepass")) <= MAX_ID_BYTES


def _matches(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern)
    return lambda value: compiled.fullmatch(value) is not None


@dataclass(frozen=True)
class IdKind:
    """A kind of id: what it is called, the test a value passes and an example."""

    what: str
    test: Callable[[str], bool]
    form: str  # what a valid one looks like, for the hint

    def valid(self, value: object) -> bool:
        return isinstance(value, str) and self.test(value)

    def check(self, value: object, where: str = "", hint: str | None = None) -> str:
        """`value`, if it is an id of this kind; else a `BadInput` naming `where` (with
        `hint`, or what a valid id looks like)."""
        if self.valid(value):
            return str(value)
        raise BadInput(f"{where}{': ' if where else ''}{self.problem(value)}", hint or self.form)

    def problem(self, value: object) -> str:
        """Why `value` is refused, in a few words."""
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:79] + "…"
        return f"{shown} is not a valid {self.what}"


# notes written by `ok` have ids like m-20260105-abcd; a note written by hand may carry
# any id that names a file of its own
NOTE = IdKind("note id", _file_name, "a note id names one file: m-20260105-abcd, no / or ..")
DOC = IdKind("document id", _matches(r"[0-9a-f]{16}"), "document ids are 16 hex digits")
CITATION = IdKind("citation id", _matches(r"c-[0-9a-f]{16}"), "citation ids are c-<16 hex digits>")
BACKFEED = IdKind("backfeed item id", _matches(r"bf-[0-9a-f]{12}"), "backfeed ids are bf-<12 hex>")
TRIGGER = IdKind(
    "trigger name",
    _matches(r"[a-z0-9][a-z0-9_.-]{0,63}"),
    "use lowercase letters, digits, '-', '_' or '.', e.g. new-papers",
)
STACK_ID = IdKind(
    "stack id",
    _matches(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
    "a bundle's stack_id is a UUID, as `ok graph export` writes it",
)


def rel_path(value: object) -> bool:
    """Whether `value` is a path relative to the folder root that stays inside it as
    written: not absolute, no `.`, `..` or empty parts, no control characters (a symlink on
    the way is the walker's business)."""
    return isinstance(value, str) and not _NOT_INSIDE.search(value) and _utf8(value)
