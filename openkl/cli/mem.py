"""`ok mem …`: memory notes."""

from __future__ import annotations

from typing import Any

import typer

from .. import notes as notes_mod
from . import output
from .common import TagsOpt, TopicsOpt, folder, split_labels, writing
from .output import JsonOpt, emit

app = typer.Typer(help="Memory notes: markdown files with YAML frontmatter.", no_args_is_help=True)


def _text_arg(text: str) -> str:
    return output.read_stdin_text() if text == "-" else text


@app.command()
def add(
    text: str = typer.Argument(..., help="The note's text, or `-` to read stdin."),
    tags: list[str] = TagsOpt,
    topics: list[str] = TopicsOpt,
    json_: bool = JsonOpt,
) -> None:
    """Add a note (memories/by_date/YYYY-MM/DD/<id>.md) and index it."""
    f = folder()
    body = _text_arg(text)
    with writing(f, "ok mem add"):
        from .. import ops  # imported when used: `ok --help` stays light

        note = ops.add_note(f, body, split_labels(tags), split_labels(topics))
    emit(note.as_dict(f), json_, plain=lambda d: d["id"])


@app.command("list")
def list_(
    tag: list[str] = typer.Option(None, "--tag", "-t", help="Only notes with this tag."),
    topic: list[str] = typer.Option(None, "--topic", help="Only notes with this topic."),
    limit: int = typer.Option(0, "--limit", "-n", help="At most this many (newest first)."),
    json_: bool = JsonOpt,
) -> None:
    """List notes, newest first."""
    f = folder()
    notes, problems = notes_mod.scan(f, lambda: _indexed_note_paths(f))
    for p in problems:
        output.warn(p.problem if p.kind == "unreadable" else f"{p.path}: {p.problem}")
    want_tags, want_topics = set(split_labels(tag)), set(split_labels(topic))
    rows = [
        n.as_dict(f)
        for n in sorted(notes.values(), key=lambda n: (n.ts, n.id), reverse=True)
        if want_tags <= set(n.tags) and want_topics <= set(n.topics)
    ]
    rows = rows[:limit] if limit else rows
    emit(
        rows,
        json_,
        plain=lambda rs: "\n".join(
            f"{r['id']}\t{r['ts']}\t{','.join(r['tags'])}\t{_first_line(r['text'])}" for r in rs
        ),
    )


def _indexed_note_paths(f: Any) -> dict[str, str]:
    # the graph settles which of two files sharing an id is the established note; it is
    # opened (and the indexer imported) only when such a clash exists
    from ..indexer import indexed_note_paths

    return indexed_note_paths(f)


def _first_line(text: str) -> str:
    line = next((x for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= 80 else line[:79] + "…"


@app.command()
def show(
    note_id: str = typer.Argument(..., help="Note id (or unique prefix)."), json_: bool = JsonOpt
) -> None:
    """Print a note."""
    f = folder()
    note = notes_mod.find(f, note_id)
    emit(note.as_dict(f), json_, plain=lambda d: note.to_text())


@app.command()
def search(
    query: str = typer.Argument(..., help="What to look for."),
    k: int | None = typer.Option(
        None, "-k", "--limit", metavar="N", help="Number of results (default 10, at most 1000)."
    ),
    mode: str | None = typer.Option(
        None, "--mode", metavar="hybrid|vector|fts", help="Ranking signals (default hybrid)."
    ),
    tags: list[str] = typer.Option(None, "--tag", "-t"),
    topics: list[str] = typer.Option(None, "--topic"),
    since: str = typer.Option(
        None,
        "--since",
        metavar="WHEN",
        help="Only notes dated on/after: ISO date/time, or a span back "
        "from now (30m, 12h, 7d, 2w).",
    ),
    until: str = typer.Option(
        None, "--until", metavar="WHEN", help="Only notes dated on/before (same forms as --since)."
    ),
    explain: bool = typer.Option(False, "--explain"),
    json_: bool = JsonOpt,
) -> None:
    """Search notes only (same as `ok search --in mem`)."""
    from .hits import run_search

    run_search(
        query,
        k=k,
        scope="mem",
        mode=mode,
        tags=tags,
        topics=topics,
        path=None,
        since=since,
        until=until,
        per_doc=None,
        diverse=False,
        explain=explain,
        show_query=False,
        json_=json_,
    )


@app.command()
def update(
    note_id: str = typer.Argument(..., help="Note id."),
    text: str = typer.Option(None, "--text", help="New body (`-` reads stdin)."),
    tags: list[str] = typer.Option(None, "--tags", help="Replace the tags."),
    add_tag: list[str] = typer.Option(None, "--add-tag", help="Add a tag."),
    topics: list[str] = typer.Option(None, "--topics", help="Replace the topics."),
    json_: bool = JsonOpt,
) -> None:
    """Change a note's text, tags or topics (the id stays)."""
    f = folder()
    if text is None and tags is None and topics is None and not add_tag:
        raise typer.BadParameter("nothing to change: pass --text, --tags, --add-tag or --topics")
    from .. import ops

    with writing(f, "ok mem update"):
        note = ops.update_note(
            f,
            note_id,
            text=_text_arg(text) if text is not None else None,
            tags=split_labels(tags) if tags is not None else None,
            topics=split_labels(topics) if topics is not None else None,
            add_tags=split_labels(add_tag),
        )
    emit(note.as_dict(f), json_, plain=lambda d: d["id"])


@app.command()
def delete(note_id: str = typer.Argument(..., help="Note id."), json_: bool = JsonOpt) -> None:
    """Delete a note file and drop it from the graph."""
    from .. import ops

    f = folder()
    with writing(f, "ok mem delete"):
        note = ops.delete_note(f, note_id)
    emit({"deleted": note.id}, json_, plain=lambda d: f"deleted {d['deleted']}")


@app.command()
def topics(json_: bool = JsonOpt) -> None:
    """Regenerate memories/topics/<slug>/ symlinks from tags and topics."""
    from .. import ops

    f = folder()
    with writing(f, "ok mem topics"):
        counts = ops.regenerate_topics(f)
    emit(counts, json_, plain=lambda c: "\n".join(f"{k}\t{v}" for k, v in c.items()))
