"""Filters on any frontmatter key: `--where KEY=VALUE` and its kin.

A condition is `KEY OP VALUE` with OP one of `=`, `!=`, `>`, `>=`, `<`, `<=`, or a bare
`KEY` (the key is there, with a value). KEY may reach into a mapping with dots
(`source.lang`). A list holds a condition when one of its items does (`tags=ops`: the list
contains `ops`). Values compare as what they are: numbers as numbers, dates and times as
times (a bare date is its whole day: `reviewed<=2026-03-01` includes the 1st, as
`--until` does; a span such as `30d` means that long ago), true/false as booleans, and
text as text, case aside. A key the frontmatter lacks (or leaves empty)
holds `KEY!=VALUE` and `KEY=` (nothing), and no other condition.

The frontmatter is read from the files (a note's, a normalized document's), which are the
truth; a file whose frontmatter cannot be read is one without frontmatter.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .folder import parse_time

OPS = ("!=", ">=", "<=", "=", ">", "<")
_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
FORMS = "write KEY=VALUE, KEY!=VALUE, KEY>=DATE, KEY<N, … or a bare KEY (it is set)"
_FM = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?\r?\n)?---[ \t]*(?:\r?\n|\Z)", re.S)


@dataclass(frozen=True)
class Where:
    """One condition on a frontmatter key."""

    key: str
    op: str  # one of OPS, or "" (the key is set)
    value: str

    def __str__(self) -> str:
        return f"{self.key}{self.op}{self.value}"

    def holds(self, meta: Mapping[str, Any]) -> bool:
        """Whether the frontmatter `meta` meets this condition."""
        found, got = _lookup(meta, self.key)
        if not found or got is None or got == "" or got == []:
            # an empty value: `KEY=` asks for it, `KEY!=` for any other
            return (self.op == "=" and not self.value) or (self.op == "!=" and bool(self.value))
        if self.op == "":
            return True
        if not self.value:
            return self.op == "!="
        items = got if isinstance(got, list) else [got]
        if self.op == "!=":
            return not any(_compare(x, "=", self.value) for x in items)
        return any(_compare(x, self.op, self.value) for x in items)


def parse(spec: str, option: str = "--where") -> Where:
    """`KEY=VALUE` (or another operator, or a bare KEY) as a `Where`; anything else is a
    usage error naming `option`."""
    text = spec.strip()
    at = min((i for i in (text.find(c) for c in "=!<>") if i >= 0), default=-1)
    key, op, value = text, "", ""
    if at >= 0:
        key = text[:at].strip()
        op = next((o for o in OPS if text.startswith(o, at)), "")
        if not op:
            raise UsageError(f"{option} {spec!r}: no operator after {key!r}", FORMS)
        value = text[at + len(op) :].strip()
    if not key or not _KEY.match(key):
        raise UsageError(
            f"{option} {spec!r}: {key!r} is not a frontmatter key",
            FORMS + "; keys are letters, digits, _ - and . between mapping levels",
        )
    if op in (">", ">=", "<", "<=") and not value:
        raise UsageError(f"{option} {spec!r}: {op} needs a value to compare with", FORMS)
    return Where(key, op, value)


def parse_all(specs: Iterable[str] | None, option: str = "--where") -> list[Where]:
    """Each of `specs` parsed (None: none)."""
    return [parse(s, option) for s in specs or []]


def holds_all(conds: Iterable[Where], meta: Mapping[str, Any]) -> bool:
    return all(c.holds(meta) for c in conds)


def read_meta(path: Path) -> dict[str, Any]:
    """The YAML frontmatter of a file (empty when it has none or it cannot be read)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            head = fh.read(65536)
    except OSError:
        return {}
    m = _FM.match(head)
    if not m:
        return {}
    import yaml

    try:
        meta = yaml.safe_load(m.group(1) or "")
    except yaml.YAMLError:
        return {}
    return meta if isinstance(meta, dict) else {}


def meta_of(root: Path, rel: str, cache: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`read_meta` of the file at `rel` under `root`, read once per `cache`."""
    if rel not in cache:
        cache[rel] = read_meta(root / rel)
    return cache[rel]


# -- comparing -----------------------------------------------------------------------------------
def _lookup(meta: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    if key in meta:
        return True, meta[key]
    cur: Any = meta
    for part in key.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


def _number(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int | float):
        return float(x)
    try:
        return float(str(x).strip())
    except ValueError:
        return None


def _when(x: Any) -> dt.datetime | None:
    """A frontmatter value as a UTC time, if it is a date or a time."""
    if isinstance(x, dt.datetime):
        return x if x.tzinfo else x.replace(tzinfo=dt.UTC)
    if isinstance(x, dt.date):
        return dt.datetime(x.year, x.month, x.day, tzinfo=dt.UTC)
    s = str(x).strip()
    if len(s) < 10 or not s[:4].isdigit():
        return None
    try:
        when = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _given_when(value: str, end_of_day: bool) -> dt.datetime | None:
    """The time a condition names: a date, a time, or a span back from now."""
    try:
        iso = parse_time(value, "--where", end_of_day=end_of_day)
    except UsageError:
        return None
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")) if iso else None


def _is_date(value: str) -> bool:
    return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()))


def _compare(got: Any, op: str, value: str) -> bool:
    if isinstance(got, Mapping):
        return False
    if isinstance(got, bool):
        want = value.strip().lower()
        if want not in ("true", "false", "yes", "no", "on", "off"):
            return False
        return _order(got, want in ("true", "yes", "on"), op)
    a, b = _number(got), _number(value)
    if a is not None and b is not None and not isinstance(got, str | dt.date):
        return _order(a, b, op)
    when = _when(got)
    if when is not None:
        if _is_date(value):  # a bare date is its whole day
            day = dt.date.fromisoformat(value.strip())
            return _order(when.astimezone(dt.UTC).date(), day, op)
        given = _given_when(value, end_of_day=False)
        if given is not None:
            return _order(when, given, op)
    if a is not None and b is not None:
        return _order(a, b, op)
    return _order(str(got).strip().casefold(), value.strip().casefold(), op)


def _order(a: Any, b: Any, op: str) -> bool:
    if op == "=":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if op == ">":
        return bool(a > b)
    if op == ">=":
        return bool(a >= b)
    if op == "<":
        return bool(a < b)
    return bool(a <= b)
