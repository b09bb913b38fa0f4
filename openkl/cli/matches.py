"""How `ok grep` prints, as ripgrep does on a pipe: `path:LINE:text` for a match,
`path-LINE-text` for a line of context, `--` between groups that do not touch; on a
terminal (or `--color always`) paths, line numbers and matches are coloured as rg colours
them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..ops import GrepFiles, GrepResult

# rg's default colours: path magenta, line number green, match bold red
_PATH, _LINE, _MATCH, _OFF = "\x1b[35m", "\x1b[32m", "\x1b[1;31m", "\x1b[0m"


def _paint(code: str, text: str, color: bool) -> str:
    return f"{code}{text}{_OFF}" if color and text else text


def _marked(text: str, spans: tuple[tuple[int, int], ...], color: bool) -> str:
    """The line with every (non-empty) match in bold red."""
    if not color:
        return text
    out, at = [], 0
    for start, end in spans:
        if end <= start or start < at:
            continue
        out += [text[at:start], _paint(_MATCH, text[start:end], True)]
        at = end
    out.append(text[at:])
    return "".join(out)


def _row(path: str, line: int, sep: str, text: str, color: bool) -> str:
    return f"{_paint(_PATH, path, color)}{sep}{_paint(_LINE, str(line), color)}{sep}{text}"


def _matched(
    path: str, n: int, text: str, spans: tuple[tuple[int, int], ...], color: bool, only: bool
) -> list[str]:
    """A matched line's rows: the line, or with `only` (-o) each match on a row of its own."""
    if not only:
        return [_row(path, n, ":", _marked(text, spans, color), color)]
    return [_row(path, n, ":", _paint(_MATCH, text[a:b], color), color) for a, b in spans if b > a]


def lines_text(res: GrepResult, color: bool, only: bool = False) -> str:
    """The matched lines, with their context when they carry some; with `only` (rg's -o),
    each match alone."""
    context = any("before" in h or "after" in h for h in res.hits)
    if not context:
        return "\n".join(
            row
            for h, s in zip(res.hits, res.spans, strict=True)
            for row in _matched(h["path"], h["line"], h["text"], s, color, only)
        )
    # per file, every line to print: a match (its spans) or context (None)
    files: dict[str, dict[int, tuple[str, tuple[tuple[int, int], ...] | None]]] = {}
    for h, s in zip(res.hits, res.spans, strict=True):
        rows = files.setdefault(h["path"], {})
        for c in (*h.get("before", []), *h.get("after", [])):
            rows.setdefault(c["line"], (c["text"], None))
        rows[h["line"]] = (h["text"], s)
    out: list[str] = []
    for path, rows in files.items():
        last = None
        for n in sorted(rows):
            if out and (last is None or n != last + 1):
                out.append("--")
            text, spans = rows[n]
            if spans is None:
                out.append(_row(path, n, "-", text, color))
            else:
                out += _matched(path, n, text, spans, color, only)
            last = n
    return "\n".join(out)


def files_text(res: GrepFiles, color: bool) -> str:
    """`-l`: one path a line; `-c`: `path:N`."""
    if res.counts is None:
        return "\n".join(_paint(_PATH, p, color) for p in res.paths)
    return "\n".join(f"{_paint(_PATH, p, color)}:{n}" for p, n in res.counts.items())
