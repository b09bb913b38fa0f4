"""`ok mem …`: memory notes."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..errors import NOTHING_FOUND, BadInput, EmptyDraft, OkError, UsageError
from . import cmd_completion as completion
from . import output
from .common import (
    IncludeSupersededOpt,
    LlmOpt,
    RecencyOpt,
    SinceOpt,
    TagFilterOpt,
    TagsOpt,
    TopicFilterOpt,
    TopicsOpt,
    UntilOpt,
    WhereOpt,
    folder,
    limit_opt,
    scope_opt,
    split_labels,
    writing,
)
from .output import FormatOpt, JsonOpt, emit, emit_records, formats

if TYPE_CHECKING:
    from ..files.folder import Folder
    from ..files.notes import Note

app = typer.Typer(help="Memory notes: markdown files with YAML frontmatter.", no_args_is_help=True)


def _text_arg(text: str) -> str:
    """`-` is stdin."""
    return output.read_stdin_text() if text == "-" else text


@app.command()
def add(
    text: str = typer.Argument(
        None,
        help="The note's text, or `-` to read stdin. Without it the note is read from stdin "
        "when that is not a terminal, else written in your editor.",
        show_default=False,
    ),
    tags: list[str] = TagsOpt,
    topics: list[str] = TopicsOpt,
    edit: bool = typer.Option(
        False,
        "--edit",
        "-e",
        help="Write the note in $VISUAL, else $EDITOR, else vi (TEXT, if given, starts it).",
    ),
    from_: Path = typer.Option(
        None,
        "--from",
        metavar="FILE",
        help="Add the note drafted in FILE (frontmatter optional), e.g. a draft kept in "
        ".ok/drafts/ after a failed save; with --edit, open it first.",
        dir_okay=False,
    ),
    allow_duplicate: bool = typer.Option(
        False,
        "--allow-duplicate",
        help="Write the note even when it repeats a live note (see mem.duplicate_similarity "
        "and mem.duplicate_text).",
    ),
    supersedes: list[str] = typer.Option(
        None,
        "--supersedes",
        metavar="ID",
        help="The note this one replaces (repeatable): it leaves search and ask "
        "(`--include-superseded` brings it back) and stays in `ok graph lineage`.",
        autocompletion=completion.note_ids,
    ),
    ttl: str = typer.Option(
        None,
        "--ttl",
        metavar="SPAN",
        help="The note expires after this long (12h, 30d, 2w): it then leaves search and "
        "ask, and `ok mem gc` archives it.",
    ),
    json_: bool = JsonOpt,
) -> None:
    """Add a note (memories/by_date/YYYY-MM/DD/<id>.md) and index it.

    In the editor the note starts from a template, as `git commit` does: frontmatter to fill
    (title, tags, topics or any other key), the text, and `#` lines below a scissors line
    that are removed. An empty note aborts and writes nothing.

    A note that repeats a live note (nearly the same text or meaning) is refused with the
    id it duplicates, and nothing is written, unless --allow-duplicate is given. In the
    frontmatter, `supersedes:` and `expires:` (a date) do what --supersedes and --ttl do.
    """
    f = folder()
    if from_ is not None and text is not None:
        raise typer.BadParameter("give the note's text or --from FILE, not both")
    if text is None and from_ is None and not edit:
        if sys.stdin is None or sys.stdin.isatty():
            edit = True
        else:
            text = "-"  # piped in, as `echo x | ok mem add`
    if edit or from_ is not None:
        note = _add_drafted(
            f,
            text,
            split_labels(tags),
            split_labels(topics),
            edit,
            from_,
            allow_duplicate,
            split_labels(supersedes),
            ttl,
        )
    else:
        body = _text_arg(text)
        with writing(f, "ok mem add"):
            from .. import ops  # imported when used: `ok --help` stays light

            note = ops.add_note(
                f,
                body,
                split_labels(tags),
                split_labels(topics),
                allow_duplicate=allow_duplicate,
                supersedes=split_labels(supersedes),
                ttl=ttl,
            )
    emit(note.as_dict(f), json_, plain=lambda d: d["id"])


def _add_drafted(
    f: Folder,
    text: str | None,
    tags: list[str],
    topics: list[str],
    edit: bool,
    source: Path | None,
    allow_duplicate: bool = False,
    supersedes: list[str] | None = None,
    ttl: str | None = None,
) -> Note:
    """A note written in the editor or read from a draft file. The editor's text is kept
    in a file under .ok/drafts/ until the note is saved, so a failed save loses nothing."""
    from .. import ops
    from ..files import notes
    from . import editor

    if source is not None:
        try:
            start = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise BadInput(f"cannot read {source}: {e}", "give a UTF-8 text file") from e
        source = source.resolve()
    else:
        start = notes.draft_template(_text_arg(text) if text is not None else "", tags, topics)
    drafts = f.ok_dir / "drafts"
    ours = source if source is not None and source.parent == drafts.resolve() else None
    draft = ours
    if edit and draft is None:
        drafts.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="note-", suffix=".md", dir=drafts)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(start)
        draft = Path(name)
    path = draft or source
    assert path is not None
    kept = f"your text is kept in {editor.shown(draft)}" if draft is not None else ""
    while True:
        if edit:
            try:
                editor.edit(path, "nothing was saved" if ours is None else kept)
            except OkError:
                if draft is not None and ours is None:
                    draft.unlink(missing_ok=True)
                raise
        try:
            d = notes.parse_draft(path.read_text(encoding="utf-8"), editor.shown(path))
        except EmptyDraft:
            if draft is not None and ours is None:
                draft.unlink(missing_ok=True)
            raise
        except (BadInput, UnicodeDecodeError) as e:
            if edit and editor.again(str(e)):
                continue
            raise BadInput(
                e.message if isinstance(e, BadInput) else f"{editor.shown(path)}: not valid UTF-8",
                f"{kept}; fix it and run `ok mem add --from {editor.shown(draft)}`"
                if draft is not None
                else "fix the file and try again",
            ) from e
        break
    if source is None:  # the template held them, and the editor had the last word
        tags = topics = []
    try:
        with writing(f, "ok mem add"):
            return ops.add_note(
                f,
                d.body,
                notes.clean_labels(d.tags + tags),
                notes.clean_labels(d.topics + topics),
                extra=d.extra,
                draft=draft,
                allow_duplicate=allow_duplicate,
                supersedes=supersedes,
                ttl=ttl,
            )
    except OkError as e:
        if draft is not None and draft.exists():  # not saved: say where the text is
            e.hint = f"{e.hint}; {kept}" if e.hint else kept
        raise


@app.command("list")
@formats
def list_(
    tag: list[str] = TagFilterOpt,
    topic: list[str] = TopicFilterOpt,
    since: str | None = SinceOpt,
    until: str | None = UntilOpt,
    where: list[str] | None = WhereOpt,
    limit: int = limit_opt(0, "At most this many, newest first (0: all).", min=0),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """List notes, newest first.

    Examples:

    \b
      ok mem list -n 5
      ok mem list --since 7d --tag work
      ok mem list --until 2026-01-31 --format csv > january.csv
      ok mem list --where kind=distilled --where "reviewed>=2026-01-01"
    """
    from .. import ops

    f = folder()
    res = ops.list_notes(
        f,
        tags=split_labels(tag),
        topics=split_labels(topic),
        limit=limit,
        since=since,
        until=until,
        where=where,
        where_name="--where",
    )
    for p in res.problems:
        # a file that cannot be parsed says its name itself
        output.warn(p.problem if p.problem.startswith(f"{p.path}:") else f"{p.path}: {p.problem}")
    emit_records(
        [n.as_dict(f) for n in res.notes],
        json_,
        fmt,
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
    links = ops.note_links(ops.Call(f), note)

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
@formats
def search(
    query: str = typer.Argument(..., help="What to look for."),
    k: int | None = limit_opt(None, "Number of results (default 10, at most 1000)."),
    mode: str | None = typer.Option(
        None, "--mode", metavar="hybrid|vector|fts", help="Ranking signals (default hybrid)."
    ),
    tags: list[str] = TagFilterOpt,
    topics: list[str] = TopicFilterOpt,
    since: str = SinceOpt,
    until: str = UntilOpt,
    where: list[str] | None = WhereOpt,
    min_score: float | None = typer.Option(
        None,
        "--min-score",
        metavar="X",
        help="If no query word occurs, say no good match (exit 1) unless a passage's cosine "
        "similarity to the query reaches X (0-1; default search.min_score; 0: off).",
    ),
    explain: bool = typer.Option(False, "--explain"),
    include_superseded: bool = IncludeSupersededOpt,
    recency: str | None = RecencyOpt,
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """Search notes only (same as `ok search --in mem`)."""
    from .. import ops
    from .hits import search_request, show_hits

    req = search_request(
        query,
        tags,
        topics,
        where,
        k=k,
        mode=mode,
        scope="mem",
        since=since,
        until=until,
        explain=explain,
        min_score=min_score,
        include_superseded=include_superseded,
        recency=recency,
    )
    f = folder()
    res = ops.search(ops.local(f), req)
    show_hits(f, res, json_, explain, fmt, filtered=bool(tags or topics or since or until or where))


@app.command()
def update(
    note_id: str = typer.Argument(..., help="Note id.", autocompletion=completion.note_ids),
    text: str = typer.Option(None, "--text", help="New body (`-` reads stdin)."),
    tags: list[str] = typer.Option(
        None, "--tags", "--tag", "-t", help="Replace the tags (repeatable, or a,b)."
    ),
    add_tag: list[str] = typer.Option(None, "--add-tag", help="Add a tag."),
    topics: list[str] = typer.Option(
        None, "--topics", "--topic", help="Replace the topics (repeatable, or a,b)."
    ),
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
def edit(
    note_id: str = typer.Argument(..., help="Note id.", autocompletion=completion.note_ids),
    json_: bool = JsonOpt,
) -> None:
    """Edit a note's file in your editor, then index it again.

    The editor is $VISUAL, else $EDITOR, else vi; the file is indexed again even when
    unchanged. The id stays: an edited `id:` is put back. If the file no longer reads
    (broken frontmatter, no text) you are asked to edit it again; otherwise (or when nobody
    is at the terminal) your edit stays in the file, the index keeps the old version and
    the error says what is wrong: fix it, and `ok mem edit` or `ok sync` indexes it.
    """
    from .. import ops
    from . import editor

    f = folder()
    before = ops.note_for_editing(f, note_id)
    assert before.path is not None
    where = f.rel(before.path)
    old = before.path.read_bytes()
    while True:
        editor.edit(before.path, f"{where} is as the editor left it")
        if before.path.is_file() and before.path.read_bytes() == old:
            # indexed all the same: the file may have been changed by hand since
            output.info(f"no changes to {before.id}")
        try:
            with writing(f, "ok mem edit"):
                note, restored = ops.save_edited_note(f, before)
        except BadInput as e:
            if editor.again(str(e)):
                continue
            raise BadInput(
                e.message,
                f"your edit stays in {where}; fix it there (or `ok mem edit {before.id}`), "
                "then `ok sync` indexes it",
            ) from e
        break
    if restored:
        output.warn(f"the id of a note stays: {where} has `id: {before.id}` again")
    emit(note.as_dict(f), json_, plain=lambda d: d["id"])


@app.command(
    epilog="""Examples:

\b
  ok mem delete m-20261130-eh13              # archived: `ok mem restore` brings it back
  ok mem delete m-20261130 --yes             # a unique prefix, without being asked
  ok mem delete m-20261130-eh13 --purge      # the file is deleted for good
"""
)
def delete(
    note_id: str = typer.Argument(
        ...,
        help="Note id (a unique prefix is confirmed first).",
        autocompletion=completion.note_ids,
    ),
    purge: bool = typer.Option(
        False, "--purge", help="Delete the file for good (an archived note's too)."
    ),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Do not ask about an id given by a prefix."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Take a note out of search and the graph: its file moves to memories/archive/.

    `ok mem restore ID` brings it back; --purge deletes the file instead. An id given by a
    unique prefix is shown and confirmed first on a terminal (or with --yes); elsewhere the
    full id is needed."""
    from .. import ops

    f = folder()
    note = ops.note_to_delete(f, note_id, purge=purge)
    if note.id != note_id and not yes:
        _confirm_delete(note, purge)
    with writing(f, "ok mem delete"):
        done = ops.delete_note(f, note.id, purge=purge)

    def plain(d: dict[str, Any]) -> str:
        if d["purged"]:
            return f"deleted {d['deleted']} for good"
        return (
            f"archived {d['deleted']} in {d['archived']} "
            f"(`ok mem restore {d['deleted']}` brings it back)"
        )

    emit(done.as_dict(), json_, plain=plain)


def _confirm_delete(note: Note, purge: bool) -> None:
    """Ask at a terminal before deleting the note a prefix named; refuse elsewhere."""
    if sys.stdin is None or not sys.stdin.isatty():
        raise UsageError(
            f"the prefix given names {note.id}; nothing was deleted",
            f"give the full id, `{note.id}`, or --yes",
        )
    what = "Delete for good" if purge else "Delete (archive)"
    output.info(f"{note.id}  {_first_line(note.body)}")
    with output.waiting():
        yes = typer.confirm(f"{what} {note.id}?", default=False, err=True)
    if not yes:
        output.info("nothing was deleted")
        raise typer.Exit(NOTHING_FOUND)


@app.command()
def topics(json_: bool = JsonOpt) -> None:
    """Regenerate memories/topics/<slug>/ symlinks from tags and topics."""
    from .. import ops

    f = folder()
    with writing(f, "ok mem topics"):
        counts = ops.regenerate_topics(f)
    emit(counts, json_, plain=lambda c: "\n".join(f"{k}\t{v}" for k, v in c.items()))


@app.command()
def dedupe(
    dry_run: bool = typer.Option(
        False, "--dry-run", "-n", help="Only list the clusters that would be merged."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Merge near-duplicate notes: each cluster into its oldest note.

    The kept note gains every tag, topic and frontmatter list (citations, sources) of the
    others and `merged_from`, their ids; the others move to memories/archive/, never
    deleted (`ok mem restore ID` brings one back). Thresholds: mem.duplicate_similarity
    and mem.duplicate_text.
    """
    from .. import ops

    f = folder()
    with writing(f, "ok mem dedupe"):
        found = ops.dedupe_notes(f, dry_run=dry_run)
    report = {"dry_run": dry_run, "clusters": [c.as_dict() for c in found]}

    def plain(d: dict[str, Any]) -> str:
        if not d["clusters"]:
            return "no duplicate notes"
        verb = "would merge" if dry_run else "merged"
        return "\n".join(
            f"{verb} {', '.join(c['merged_from'])} into {c['keep']}" for c in d["clusters"]
        )

    emit(report, json_, plain=plain)


@app.command()
def gc(
    dry_run: bool = typer.Option(
        False, "--dry-run", "-n", help="Only list the notes that would be archived."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Move expired notes (`--ttl`, `expires:`) to memories/archive/, never deleting them.

    An archived note keeps its frontmatter and says when and why it was archived; `ok mem
    restore ID` brings it back.
    """
    from .. import ops

    f = folder()
    with writing(f, "ok mem gc"):
        gone = ops.gc_notes(f, dry_run=dry_run)
    report = {
        "dry_run": dry_run,
        "archived": [{"id": n.id, "expires": n.extra["expires"]} for n in gone],
    }

    def plain(d: dict[str, Any]) -> str:
        if not d["archived"]:
            return "no expired notes"
        verb = "would archive" if dry_run else "archived"
        return "\n".join(f"{verb} {n['id']} (expired {n['expires']})" for n in d["archived"])

    emit(report, json_, plain=plain)


@app.command()
def restore(
    note_id: str = typer.Argument(..., help="Id (or unique prefix) of an archived note."),
    ttl: str | None = typer.Option(
        None,
        "--ttl",
        metavar="SPAN",
        help="Give the note a new expiry this far from now (12h, 30d, 2w); without it an "
        "expiry that has passed is cleared and one still ahead is kept.",
    ),
    json_: bool = JsonOpt,
) -> None:
    """Bring a note back from memories/archive/ and index it again.

    A note archived because it expired comes back without its expiry, so that it is in
    search again and the next `ok mem gc` leaves it; --ttl gives it a new one instead.
    What became of the expiry is said on stderr, and in the JSON as `expiry`: its
    `action` (cleared, set, kept or none), the expiry that had passed (`was`) and the
    one it has now (`expires`).
    """
    from .. import ops

    f = folder()
    with writing(f, "ok mem restore"):
        back = ops.restore_note(f, note_id, ttl=ttl)
    note = back.note
    if ttl is not None:
        output.info(f"{note.id} now expires {back.expires} (--ttl {ttl})")
        action = "set"
    elif back.expired:
        output.info(
            f"{note.id} had expired ({back.expired}); its expiry is cleared "
            "(give it a new one with --ttl)"
        )
        action = "cleared"
    else:
        action = "kept" if back.expires else "none"
    expiry = {"action": action, "was": back.expired, "expires": back.expires}
    emit({**note.as_dict(f), "expiry": expiry}, json_, plain=lambda d: d["id"])


@app.command()
@formats
def conflicts(
    scope: str = scope_opt("mem", "What to compare."),
    llm: bool | None = LlmOpt,
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """List statements about the same entity that disagree, with a citation of each side.

    Without an LLM a pair is flagged when two sentences say the same thing about an
    entity but with different numbers or dates, or when one negates the other. With an
    LLM configured (llm.base_url, llm.model) the model also judges pairs that share
    enough words. Nothing is changed: resolve a conflict by editing a note or marking
    the old one superseded.

    Examples:
      ok mem conflicts
      ok mem conflicts --in all --json | jq '.[] | {entity, kind, reason}'
    """
    from .. import ops

    f = folder()
    found = ops.conflicts(ops.Call(f), scope=scope, use_llm=llm is not False)
    emit_records(found, json_, fmt, plain=lambda cs: _conflicts_text(cs, ops.where(f, _sides(cs))))


def _sides(found: list[Any]) -> list[Any]:
    return [c[side] for c in found for side in ("a", "b")]


def _conflicts_text(found: list[Any], wheres: list[str]) -> str:
    if not found:
        return "no conflicts found"
    out = []
    places = iter(wheres)
    for i, c in enumerate(found, 1):
        out.append(f"{i}. {c['entity']} — {c['kind']}: {c['reason']}")
        for side in ("a", "b"):
            s = c[side]
            out.append(f"   {side.upper()}: {' '.join(s['quote'].split())}")
            out.append(f"      {next(places)} ({s['id']})")
    return "\n".join(out)
