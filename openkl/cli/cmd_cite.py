"""`ok cite …`: citations that can be checked against the files later."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import typer

from ..errors import NOTHING_FOUND, BadInput, UsageError
from ..knowledge import citations as cit
from ..records import Cite, CitePassage, CiteStatus, FoundAt
from . import cmd_completion as completion
from . import output
from .common import TagFilterOpt, TagsOpt, folder, split_labels, writing
from .output import FormatOpt, JsonOpt, emit, emit_records, formats

app = typer.Typer(
    help="Citations: make, verify and open them, even after files change.", no_args_is_help=True
)


def _items(f: Any, refs: list[str]) -> list[str | Cite]:
    """Ids, cite-object files and `-` (stdin) as one list, all parsed before any work."""
    out: list[str | Cite] = []
    for ref in refs:
        if ref == "-":
            out += cit.parse_input(f, output.read_stdin_text(), "stdin")
        elif cit.is_ref(ref):
            out.append(ref)
        elif Path(ref).is_file() and ref.endswith((".json", ".jsonl")):
            try:
                text = Path(ref).read_text(encoding="utf-8")
            except UnicodeDecodeError as e:
                raise BadInput(f"{ref} is not valid UTF-8", "pass a JSON file") from e
            out += cit.parse_input(f, text, ref)
        else:
            out.append(ref)
    return out


def _wheres(f: Any, items: list[Any]) -> list[str]:
    """`path:L1-L2` of each (lines, as grep and editors count; the JSON keeps characters)."""
    from .. import ops

    return ops.where(f, items)


def _snippet(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@app.command(
    epilog="""Examples:

\b
  ok cite make store/normalized/docs/write-ahead-logging.ok.md --lines 3-5
  ok cite make ee43fb66e85b241f#char0-1079 --persist --tags wal   # a search hit
  ok search "gene editing" --json | jq -r '.[].id' | ok cite make - --persist
"""
)
@formats
def make(
    refs: list[str] = typer.Argument(
        ...,
        help="Search-hit/chunk ids (<doc>#char<s>-<e>), doc "
        "ids, memory ids, a PATH, or `-` for stdin.",
        autocompletion=completion.note_or_doc_ids,
    ),
    lines: str = typer.Option(
        None, "--lines", metavar="A-B", help="Lines a-b of one PATH or id (1-based)."
    ),
    chars: str = typer.Option(
        None, "--chars", metavar="A-B", help="Chars a-b of one PATH or id (end excl.)."
    ),
    persist: bool = typer.Option(
        False, "--persist", help="Write citations/<id>.json (--tags and --retention-class do)."
    ),
    tags: list[str] = TagsOpt,
    retention_class: str | None = typer.Option(
        None,
        "--retention-class",
        metavar="standard|keep|ephemeral",
        help="standard (default), keep (or durable: gc never removes it) "
        "or ephemeral (gc removes it once it fails).",
    ),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """Make citations: printed, or with --persist (or --tags, --retention-class, which only
    a kept citation has) kept in citations/."""
    f = folder()
    retention_class = cit.retention_named(retention_class)
    items = _items(f, refs)
    if (lines or chars) and len(items) != 1:
        raise UsageError("--lines/--chars need exactly one PATH or id")
    # a tag or a retention class is asked of a kept citation: asking is keeping
    persist = persist or bool(tags) or retention_class is not None
    if not items:
        raise BadInput(
            "nothing to cite: the input held no ids or cite objects",
            "check the command that feeds it",
        )
    from .. import ops  # imported when used: `ok --help` stays light

    with writing(f, "ok cite make") if persist else contextlib.nullcontext():
        cites = ops.make_citations(
            f,
            items,
            lines=lines,
            chars=chars,
            persist=persist,
            tags=split_labels(tags),
            retention_class=retention_class,
        )
    emit_records(
        cites,
        json_,
        fmt,
        plain=lambda cs: "\n".join(
            f"{c['id']}\t{w}\t{_snippet(c['quote'])}"
            for c, w in zip(cs, _wheres(f, cs), strict=True)
        ),
    )


@app.command(
    epilog="""Examples:

\b
  ok cite verify --all                        # every persisted citation
  ok cite verify --all --update               # follow moved quotes to their new place
  ok ask "what is WAL?" --json | jq '.citations' | ok cite verify -
"""
)
@formats
def verify(
    refs: list[str] = typer.Argument(
        None,
        help="Citation ids, other ids, cite-object JSON files, or `-` (JSON or ids on stdin).",
        autocompletion=completion.citation_ids,
    ),
    all_: bool = typer.Option(False, "--all", help="Verify every persisted citation."),
    update: bool = typer.Option(
        False, "--update", help="Rewrite persisted citations that moved to their new place."
    ),
    min_similarity: float = typer.Option(
        None,
        "--min-similarity",
        metavar="0..1",
        help="Fuzzy matches below this are missing (default cite.min_similarity, 0.7).",
    ),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """Check citations against the files: verified, moved, changed or missing.

    Exits 0 only when every citation is verified or moved.
    """
    f = folder()
    if not refs and not all_:
        raise UsageError("nothing to verify", "pass ids, a file, `-`, or --all")
    if min_similarity is not None and not 0 < min_similarity <= 1:
        raise UsageError("--min-similarity must be in (0, 1]")
    items = _items(f, list(refs or []))
    if refs and not items:  # an empty pipe verifies nothing: that is not a pass
        raise BadInput(
            "nothing to verify: the input held no ids or cite objects",
            "check the command that feeds it",
        )
    from .. import ops

    with writing(f, "ok cite verify --update") if update else contextlib.nullcontext():
        v = ops.verify_citations(
            f, items, all_persisted=all_, update=update, min_similarity=min_similarity
        )
    if all_ and not v.results:
        output.info("no persisted citations to verify")
    emit_records(v.results, json_, fmt, plain=lambda rs: _plain_results(f, rs))
    if v.failed:
        output.info(f"{len(v.failed)} of {len(v.results)} citations failed verification")
        raise typer.Exit(NOTHING_FOUND)


def _plain_results(f: Any, rs: list[CiteStatus]) -> str:
    # where the quote is now; a missing one only by its file (its lines are gone)
    spots: list[FoundAt | dict[str, str]] = [r["found"] or {"path": r["cited"]["path"]} for r in rs]
    wheres = _wheres(f, spots)
    lines = []
    for r, where in zip(rs, wheres, strict=True):
        extra = f"\tsimilarity {r['similarity']:.2f}" if r["status"] == "changed" else ""
        upd = "\tupdated" if r.get("updated") else ""
        lines.append(f"{r['status']}\t{r['id']}\t{where}{extra}{upd}")
        lines += [f"\t{d}" for d in r["diagnostics"]]
    return "\n".join(lines)


@app.command(
    "open",
    epilog="""Examples:

\b
  ok cite open c-2b78d9272c9d171e              # the passage, quote marked >>> <<< when piped
  ok cite open c-2b78d9272c9d171e -C 5 --json | jq -r .text
""",
)
def open_(
    ref: str = typer.Argument(
        ...,
        help="Citation id (or chunk/memory id, or `-` for one cite object on stdin).",
        autocompletion=completion.citation_or_note_ids,
    ),
    context: int = typer.Option(
        2, "--context", "-C", metavar="N", help="Lines of context around the span."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Print the cited passage where it is now, with the quote highlighted."""
    f = folder()
    items = _items(f, [ref])
    if len(items) != 1:
        raise UsageError(f"`ok cite open` shows one citation, got {len(items)}")
    from .. import ops

    p = ops.open_citation(f, items[0], context)
    if p["status"] == "changed":
        output.warn(
            f"{p['id']}: the quote was edited "
            f"(similarity {p['verification']['similarity']:.2f}); showing the new text"
        )
    elif p["status"] == "missing":
        output.warn(f"{p['id']}: the quote is missing from the files; showing the recorded quote")
    if output.want_json(json_):
        emit(p, True)
    else:
        where = p["path"] + (
            f":{cit.shown_lines(p['lines']['start'], p['lines']['end'])}" if p["lines"] else ""
        )
        output.info(f"{p['id']}  {where}  ({p['status']})")
        if output.is_tty():
            with output.paged():
                _render_passage(p)
        else:
            text, h = p["text"], p["highlight"]
            sys.stdout.write(
                text[: h["start"]]
                + ">>> "
                + text[h["start"] : h["end"]]
                + " <<<"
                + text[h["end"] :]
                + "\n"
            )
    if p["status"] == "missing":
        raise typer.Exit(NOTHING_FOUND)


def _render_passage(p: CitePassage) -> None:
    from rich.text import Text

    t = Text(p["text"])
    t.stylize("bold black on yellow", p["highlight"]["start"], p["highlight"]["end"])
    output.console().print(t)


@app.command(
    "list",
    epilog="""Examples:

\b
  ok cite list --tag wal
  ok cite list --status changed --json | jq -r '.[].id'   # what needs a look
""",
)
@formats
def list_(
    tag: list[str] = TagFilterOpt,
    doc: str = typer.Option(
        None, "--doc", metavar="ID|PATH", help="Only citations of this doc/note (id or path)."
    ),
    status: str = typer.Option(
        None,
        "--status",
        metavar="STATUS",
        help="Only this status (verifies each): verified, moved, changed, missing.",
    ),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """List persisted citations."""
    from .. import ops

    res = ops.list_citations(folder(), tags=split_labels(tag), doc=doc, status=status)
    for p in res.problems:
        output.warn(f"{p['path']}: {p['problem']}")
    rows = res.citations
    f = folder()
    emit_records(
        rows,
        json_,
        fmt,
        plain=lambda rs: "\n".join(
            f"{c['id']}\t{w}\t{','.join(c.get('tags') or [])}\t{_snippet(c['quote'], 60)}"
            for c, w in zip(rs, _wheres(f, rs), strict=True)
        ),
    )


@app.command(
    epilog="""Examples:

\b
  ok cite gc --dry-run                        # what would go, nothing removed
  ok cite gc --json | jq '.orphaned'
"""
)
def gc(
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Only report what would go."),
    json_: bool = JsonOpt,
) -> None:
    """Remove transient citations and orphaned ones (their document is gone)."""
    from .. import ops

    f = folder()
    with writing(f, "ok cite gc"):
        rep = ops.gc_citations(f, dry_run=dry_run)
    for p in rep["problems"]:
        output.warn(f"{p['path']}: {p['problem']}")
    verb = "would remove" if dry_run else "removed"
    emit(
        rep,
        json_,
        plain=lambda d: "\n".join(
            [f"{verb} {k} {i}" for k in ("transient", "orphaned", "expired") for i in d[k]]
            + [
                f"{verb} {len(d['transient'])} transient, {len(d['orphaned'])} orphaned, "
                f"{len(d['expired'])} expired; kept {d['kept']}"
            ]
        ),
    )
