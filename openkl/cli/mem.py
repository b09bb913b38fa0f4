"""`ok mem …`: memory notes."""

from __future__ import annotations

from typing import Any

import typer

from . import completion, output
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
    limit: int = typer.Option(
        0, "--limit", "-n", min=0, help="At most this many, newest first (0: all)."
    ),
    json_: bool = JsonOpt,
) -> None:
    """List notes, newest first."""
    from .. import ops

    f = folder()
    res = ops.list_notes(f, tags=split_labels(tag), topics=split_labels(topic), limit=limit)
    for p in res.problems:
        output.warn(p.problem if p.kind == "unreadable" else f"{p.path}: {p.problem}")
    emit(
        [n.as_dict(f) for n in res.notes],
        json_,
        plain=lambda rs: "\n".join(
            f"{r['id']}\t{r['ts']}\t{','.join(r['tags'])}\t{_first_line(r['text'])}" for r in rs
        ),
    )


def _first_line(text: str) -> str:
    line = next((x for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= 80 else line[:79] + "…"


@app.command()
def show(
    note_id: str = typer.Argument(
        ..., help="Note id (or unique prefix).", autocompletion=completion.note_ids
    ),
    json_: bool = JsonOpt,
) -> None:
    """Print a note, then its [[links]] and its backlinks (the notes that link to it)."""
    from .. import ops

    f = folder()
    note = ops.show_note(f, note_id)
    links = ops.note_links(f, note)

    def plain(d: dict[str, Any]) -> str:
        lines = [note.to_text().rstrip("\n")]
        if links["links"]:
            lines += ["", "links:"]
        for k in links["links"]:
            to = k["to"]
            where = f"{to['id']}  {to['title'] or to['path']}" if to else "(matches no note)"
            lines.append(f"  line {k['line']}: [[{k['target']}]] -> {where}")
        if links["backlinks"]:
            lines += ["", "backlinks:"]
        for b in links["backlinks"]:
            lines.append(f"  {b['from']}  {b['title'] or b['path']}  (line {b['line']})")
        return "\n".join(lines) + "\n"

    emit({**note.as_dict(f), **links}, json_, plain=plain)


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
    from .. import ops
    from .hits import query_arg, show_hits

    q = query_arg(query)
    res = ops.search(
        folder(),
        q,
        k=k,
        mode=mode,
        scope="mem",
        tags=split_labels(tags),
        topics=split_labels(topics),
        since=since,
        until=until,
        explain=explain,
        check_stale=True,
        names=("-k", "--per-doc", "--since", "--until"),
    )
    show_hits(res, json_, explain)


@app.command()
def update(
    note_id: str = typer.Argument(..., help="Note id.", autocompletion=completion.note_ids),
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
def delete(
    note_id: str = typer.Argument(..., help="Note id.", autocompletion=completion.note_ids),
    json_: bool = JsonOpt,
) -> None:
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
