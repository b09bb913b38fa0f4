"""Memory notes: markdown files with YAML frontmatter under `memories/by_date/YYYY-MM/DD/`.

The file is the note. Its id (`m-YYYYMMDD-xxxx`) lives in the frontmatter and survives edits;
`memories/topics/<slug>/` holds symlinks from tags and topics (a view only), kept current by
every add, update and delete and by `ok sync`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import re
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple, cast

import yaml

from ..errors import BadInput, EmptyDraft, NotFound
from ..records import NoteDict, Supersession
from ..records import supersession as _supersession
from . import crash, events, ids
from .folder import LINK_OUT, NAME_NOT_UTF8, Folder, atomic_write, is_utf8, iso, shown, utcnow

NOTE_ID = re.compile(r"^m-\d{8}-[a-z0-9]{4}\Z")
_FM = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)


@dataclass
class Note:
    id: str
    ts: str
    body: str
    tags: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    body_start: int = 0  # char offset of the body in the file text
    body_line: int = 1  # line number (from 1) of the body's first line in the file
    sha256: str = ""

    def to_text(self) -> str:
        meta: dict[str, Any] = {
            "id": self.id,
            "ts": self.ts,
            "tags": list(self.tags),
            "topics": list(self.topics),
        }
        meta.update({k: v for k, v in self.extra.items() if k not in meta})
        fm = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=None)
        return f"---\n{fm}---\n{self.body.rstrip()}\n"

    def as_dict(self, folder: Folder | None = None) -> NoteDict:
        d: dict[str, Any] = {
            "id": self.id,
            "ts": self.ts,
            "tags": self.tags,
            "topics": self.topics,
            "text": self.body,
        }
        if self.path is not None and folder is not None:
            d["path"] = folder.rel(self.path)
        d.update({k: v for k, v in self.extra.items() if k not in d})
        return cast(NoteDict, d)


def _str_list(value: Any, name: str, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\s]+", value) if v]
    if not isinstance(value, list):
        raise BadInput(f"{where}: `{name}` must be a list", f"write `{name}: [a, b]`")
    return [str(v).strip() for v in value if str(v).strip()]


def _frontmatter(text: str, where: str) -> tuple[dict[str, Any], int]:
    """The YAML frontmatter of a note's text (empty when there is none) and where the body
    starts; broken frontmatter is a `BadInput` naming `where`."""
    m = _FM.match(text)
    if not m:
        if text.startswith("---"):
            raise BadInput(
                f"{where}: frontmatter is not closed by a `---` line",
                "add the closing `---` after the YAML block",
            )
        return {}, 0
    try:
        meta = yaml.safe_load(m.group(1)) or {}
    except yaml.YAMLError as e:
        first = str(e).splitlines()[0] if str(e) else "invalid YAML"
        raise BadInput(
            f"{where}: broken YAML frontmatter ({first})",
            "fix the YAML between the `---` lines",
        ) from e
    if not isinstance(meta, dict):
        raise BadInput(
            f"{where}: frontmatter must be a YAML mapping",
            "write `key: value` lines between the `---` lines",
        )
    return meta, m.end()


def expiry(value: Any, where: str) -> str:
    """An `expires:` value (a date, a date and time) as UTC ISO; anything else is a
    `BadInput` naming `where`."""
    if isinstance(value, dt.datetime):
        return iso(value if value.tzinfo else value.replace(tzinfo=dt.UTC))
    if isinstance(value, dt.date):
        return f"{value.isoformat()}T00:00:00Z"
    try:
        when = dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(
            f"{where}: `expires: {value}` is not a date",
            "write e.g. `expires: 2026-12-31` or `expires: 2026-12-31T18:00:00Z`",
        ) from None
    return iso(when if when.tzinfo else when.replace(tzinfo=dt.UTC))


def parse_note(text: str, where: str = "note", path: Path | None = None) -> Note:
    """Parse a note file's text; broken frontmatter is a `BadInput` naming the file."""
    meta, body_start = _frontmatter(text, where)
    if meta.get("expires") not in (None, ""):
        meta["expires"] = expiry(meta["expires"], where)
    if "supersedes" in meta:
        meta["supersedes"] = _str_list(meta["supersedes"], "supersedes", where)
    note_id = str(meta.pop("id", "") or "") or (path.stem if path else "")
    if not note_id:
        raise BadInput(f"{where}: note has no id", "add `id: m-YYYYMMDD-xxxx` to the frontmatter")
    ts = meta.pop("ts", None)
    if isinstance(ts, dt.datetime):
        ts = iso(ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC))
    elif isinstance(ts, dt.date):
        ts = f"{ts.isoformat()}T00:00:00Z"
    tags = _str_list(meta.pop("tags", None), "tags", where)
    topics = _str_list(meta.pop("topics", None), "topics", where)
    body = text[body_start:]
    # record where the body proper starts (after leading blank lines) for citations
    lead = len(body) - len(body.lstrip("\n"))
    return Note(
        id=note_id,
        ts=str(ts or ""),
        body=body.strip("\n"),
        tags=tags,
        topics=topics,
        extra=meta,
        path=path,
        body_start=body_start + lead,
        body_line=text.count("\n", 0, body_start + lead) + 1,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


def read_note(path: Path, folder: Folder | None = None) -> Note:
    where = folder.rel(path) if folder else str(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(
            f"{where}: not valid UTF-8 (byte {e.start})", "re-save the note as UTF-8"
        ) from e
    note = parse_note(text, where, path)
    if not note.ts:
        note.ts = iso(dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC))
    return note


def new_id(now: dt.datetime | None = None) -> str:
    now = now or utcnow()
    alphabet = string.ascii_lowercase + string.digits
    return f"m-{now:%Y%m%d}-" + "".join(secrets.choice(alphabet) for _ in range(4))


def note_path(folder: Folder, note_id: str, ts: str) -> Path:
    day = ts[:10] if re.match(r"\d{4}-\d{2}-\d{2}", ts) else f"{utcnow():%Y-%m-%d}"
    return folder.by_date_dir / day[:7] / day[8:10] / f"{note_id}.md"


def clean_labels(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        for part in re.split(r"[,]+", v):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    return out


def _check_utf8(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # bytes that were not UTF-8 on the command line arrive as lone surrogates
        raise BadInput(
            "the note's text is not valid UTF-8", "pass UTF-8 text (e.g. convert it with iconv)"
        ) from None


def check_text(text: str) -> None:
    """A `BadInput` unless `text` can be a note: not empty, no NUL bytes, valid UTF-8."""
    if not text.strip():
        raise BadInput("the note is empty", "pass some text, or `-` to read it from stdin")
    if "\x00" in text:
        raise BadInput("the note contains NUL bytes", "pass plain text")
    _check_utf8(text)


def add(
    folder: Folder,
    text: str,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Note:
    """Write a new note file and return it (the caller indexes it)."""
    check_text(text)
    now = utcnow()
    while True:
        nid = new_id(now)
        path = note_path(folder, nid, iso(now))
        if not path.exists():
            break
    note = Note(
        id=nid,
        ts=iso(now),
        body=text.strip("\n"),
        tags=clean_labels(tags),
        topics=clean_labels(topics),
        extra=dict(extra or {}),
        path=path,
    )
    atomic_write(path, note.to_text())
    crash.point("note.written")
    events.emit(folder, "mem_added", note=note.id, path=folder.rel(path), tags=note.tags or None)
    _relink(folder, path, [], note.topics + note.tags)
    return read_note(path, folder)


# The editor's draft, as `git commit` has it: everything from the scissors line down is
# removed, so `#` lines above it (markdown headings) stay in the note.
SCISSORS = "# ------------------------ >8 ------------------------"
_DRAFT_HELP = (
    SCISSORS,
    "# Write the note above this line; this line and everything below it are removed.",
    "# Saving an empty note (or quitting without a word) aborts: nothing is written.",
    "# Between the `---` lines is YAML: tags and topics are lists; any other key",
    "# (title, scope, source…) is kept in the note's frontmatter. Empty keys are left out;",
    "# the id and the date are set when the note is saved.",
)


class Draft(NamedTuple):
    """A note as written in the editor (or a draft file), before it has an id."""

    body: str
    tags: list[str]
    topics: list[str]
    extra: dict[str, Any]


def draft_template(
    body: str = "", tags: list[str] | None = None, topics: list[str] | None = None
) -> str:
    """The text the editor opens for a new note: frontmatter to fill, the body, and the
    comment lines below the scissors line that say how it is read."""
    meta = {"title": None, "tags": clean_labels(tags), "topics": clean_labels(topics)}
    fm = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=None)
    fm = fm.replace("title: null\n", "title:\n")
    body = body.strip("\n")
    return f"---\n{fm}---\n{body}\n\n" + "\n".join(_DRAFT_HELP) + "\n"


def parse_draft(text: str, where: str = "draft") -> Draft:
    """Read a draft: frontmatter (optional) and body, without the scissors line and what
    follows it. An empty body is a `BadInput`; so are `id` and `ts`, which saving sets."""
    lines = text.removeprefix("\ufeff").splitlines()  # some editors save a BOM
    if SCISSORS in lines:
        lines = lines[: lines.index(SCISSORS)]
    lines = [ln for ln in lines if ln not in _DRAFT_HELP]  # in case the scissors went
    text = "\n".join(lines).lstrip("\n")
    meta, body_start = _frontmatter(text, where)
    for key in ("id", "ts"):
        if key in meta:
            raise BadInput(
                f"{where}: `{key}` is set when the note is saved", f"remove the `{key}:` line"
            )
    tags = _str_list(meta.pop("tags", None), "tags", where)
    topics = _str_list(meta.pop("topics", None), "topics", where)
    extra = {str(k): v for k, v in meta.items() if v not in (None, "", [], {})}
    body = text[body_start:].strip("\n")
    if not body.strip():
        raise EmptyDraft("Aborting: empty note, nothing was saved", "write the note's text")
    if "\x00" in body:
        raise BadInput(f"{where}: the note contains NUL bytes", "write plain text")
    return Draft(body, clean_labels(tags), clean_labels(topics), extra)


def reread(folder: Folder, before: Note) -> tuple[Note, bool]:
    """The note `before` after its file was edited by hand: read and checked (broken
    frontmatter or an empty body is a `BadInput`, the file left as it is), its id kept (an
    edited `id:` is put back; the second value says so) and its topic links moved."""
    assert before.path is not None
    where = folder.rel(before.path)
    if not before.path.exists():
        raise NotFound(f"{where} is gone", f"`ok sync` takes {before.id} out of the index")
    note = read_note(before.path, folder)
    if not note.body.strip():
        raise BadInput(
            f"{where}: the note is empty", f"use `ok mem delete {before.id}` to remove it"
        )
    restored = note.id != before.id
    if restored:
        note.id = before.id
        atomic_write(before.path, note.to_text())
        note = read_note(before.path, folder)
    events.emit(folder, "mem_updated", note=note.id, path=where)
    _relink(folder, before.path, before.topics + before.tags, note.topics + note.tags)
    return note, restored


def iter_note_files(folder: Folder) -> list[Path]:
    """The note files under `memories/by_date/` (symlinks out of the folder left out)."""
    return folder.files_under(folder.by_date_dir, ".md").files


class Problem(NamedTuple):
    """A file that is not indexed as written: `kind` is `unreadable`, `duplicate_id`,
    `supersede_cycle` (a `supersedes:` claim left aside) or `same_content` (the last is
    informational: the content is indexed once)."""

    path: str
    problem: str
    kind: str


def scan(
    folder: Folder, indexed: Callable[[], dict[str, str]] | None = None
) -> tuple[dict[str, Note], list[Problem]]:
    """All readable notes by id, plus the files that cannot be used.

    When two files carry one id, the established one keeps it: the file indexed under that
    id (`indexed()` gives {id: path}, asked only when there is such a clash), else the one
    with the oldest `ts`, else the one named after the id, else the path sorting first. The
    other is skipped and reported, so a copied note never pushes the original out.
    """
    read: list[tuple[str, Note]] = []
    listing = folder.files_under(folder.by_date_dir, ".md")
    problems = [Problem(folder.named(p), LINK_OUT, "unreadable") for p in listing.outside]
    for p in listing.files:
        if not is_utf8(p):
            problems.append(Problem(shown(folder.rel(p), 4096), NAME_NOT_UTF8, "unreadable"))
            continue
        rel = folder.rel(p)
        try:
            note = read_note(p, folder)
            ids.NOTE.check(note.id, rel, "give the note an `id:` that names one file")
        except BadInput as e:
            problems.append(Problem(rel, str(e), "unreadable"))
            continue
        read.append((rel, note))
    groups: dict[str, list[tuple[str, Note]]] = {}
    for rel, n in read:
        groups.setdefault(n.id, []).append((rel, n))
    known: dict[str, str] = {}
    asked = False
    winners: dict[str, str] = {}
    for nid, group in groups.items():
        if len(group) > 1:
            if not asked and indexed is not None:
                known, asked = indexed(), True
            indexed_at = known.get(nid)

            def rank(
                rn: tuple[str, Note], name: str = f"{nid}.md", at: str | None = indexed_at
            ) -> tuple[bool, str, bool, str]:
                return (rn[0] != at, rn[1].ts, Path(rn[0]).name != name, rn[0])

            group.sort(key=rank)
        winners[nid] = group[0][0]
        for rel, _ in group[1:]:
            problems.append(
                Problem(
                    rel,
                    f"duplicate id {nid} already used by {group[0][0]}; give it a new id",
                    "duplicate_id",
                )
            )
    notes = {n.id: n for rel, n in read if winners[n.id] == rel}
    return notes, sorted(problems)


def guessed_path(folder: Folder, note_id: str) -> Path | None:
    """Where a note with an id `ok` made (m-YYYYMMDD-xxxx) is filed, unless it was moved;
    None for any other id (which only a scan finds)."""
    if not NOTE_ID.match(note_id):
        return None
    return folder.by_date_dir / f"{note_id[2:6]}-{note_id[6:8]}" / note_id[8:10] / f"{note_id}.md"


def supersession(notes: dict[str, Note]) -> Supersession:
    """What the `supersedes:` lists of these notes hide, and the claims left aside because
    they close a cycle (`records.supersession`: the newest note of a cycle stays)."""
    edges = [(n.id, str(o)) for n in notes.values() for o in n.extra.get("supersedes") or []]
    return _supersession(edges, {n.id: n.ts for n in notes.values()})


def cycle_problems(folder: Folder, notes: dict[str, Note]) -> list[Problem]:
    """A problem for each `supersedes:` claim that closes a cycle, on the file of the note
    that makes it: the note it names stays in search (it is the newest of the cycle)."""
    out = []
    for new, kept, cycle in supersession(notes).ignored:
        path = notes[new].path
        assert path is not None
        out.append(
            Problem(
                folder.rel(path),
                f"`supersedes: {kept}` closes a cycle ({' -> '.join(cycle)}), so it is left "
                f"aside and {kept}, the newest of them, stays in search (hint: remove the "
                "`supersedes:` entry that is wrong)",
                "supersede_cycle",
            )
        )
    return out


def find(folder: Folder, note_id: str) -> Note:
    """A note by id (or unique id prefix)."""
    if "/" in note_id or note_id.endswith(".md"):
        p = folder.inside(note_id)
        if p.exists():
            return read_note(p, folder)
    guess = guessed_path(folder, note_id)
    if guess is not None and guess.is_file():
        return read_note(guess, folder)
    hits = [n for n in scan(folder)[0].values() if n.id == note_id or n.id.startswith(note_id)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        old = [n.id for nid, n in archived(folder).items() if nid.startswith(note_id)]
        if len(old) == 1:  # deleted, merged or expired: say how to have it back
            raise NotFound(
                f"memory note {old[0]} is archived",
                f"`ok mem restore {old[0]}` brings it back; "
                f"`ok mem delete --purge {old[0]}` deletes it for good",
            )
        raise NotFound(f"no memory note with id {shown(note_id)}", "list ids with `ok mem list`")
    raise BadInput(f"id prefix {note_id} matches {len(hits)} notes", "give more of the id")


def for_editing(folder: Folder, note_id: str) -> Note:
    """The note to open in the editor: as `find`, but the file of a full id is given even
    when its frontmatter is broken (with no labels then), so that it can be fixed."""
    try:
        return find(folder, note_id)
    except BadInput:
        guess = guessed_path(folder, note_id)
        if guess is not None and guess.is_file():
            return Note(id=note_id, ts="", body="", path=guess)
        raise


def update(
    folder: Folder,
    note_id: str,
    text: str | None = None,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    add_tags: list[str] | None = None,
) -> Note:
    note = find(folder, note_id)
    old_labels = note.topics + note.tags
    if text is not None:
        if not text.strip():
            raise BadInput("the new text is empty", "use `ok mem delete` to remove a note")
        _check_utf8(text)
        note.body = text.strip("\n")
    if tags is not None:
        note.tags = clean_labels(tags)
    if add_tags:
        note.tags = clean_labels(note.tags + add_tags)
    if topics is not None:
        note.topics = clean_labels(topics)
    note.extra["updated"] = iso()
    assert note.path is not None
    atomic_write(note.path, note.to_text())
    crash.point("note.written")
    events.emit(folder, "mem_updated", note=note.id, path=folder.rel(note.path))
    _relink(folder, note.path, old_labels, note.topics + note.tags)
    return read_note(note.path, folder)


def to_delete(folder: Folder, note_id: str, archived_too: bool = False) -> Note:
    """The note `note_id` (an id or a unique prefix) names; with `archived_too`, an
    archived note as well. An archived note asked for without it is not found, with a hint
    of what can be done with it."""
    try:
        return find(folder, note_id)
    except NotFound:
        if not archived_too:
            raise
        old = [n for nid, n in archived(folder).items() if nid.startswith(note_id)]
        if not old:
            raise
        if len(old) > 1:
            raise BadInput(
                f"id prefix {note_id} matches {len(old)} archived notes", "give more of the id"
            ) from None
        return old[0]


def purge(folder: Folder, note: Note) -> None:
    """Delete a note's file for good, live or archived (the caller takes it out of the
    graph)."""
    assert note.path is not None
    note.path.unlink()
    crash.point("note.deleted")
    was_archived = note.path.is_relative_to(archive_dir(folder))
    _prune(archive_dir(folder) if was_archived else folder.by_date_dir, note.path)
    events.emit(folder, "mem_deleted", note=note.id, path=folder.rel(note.path))
    if not was_archived:
        _relink(folder, note.path, note.topics + note.tags, [])


def _prune(top: Path, path: Path) -> None:
    """Remove the empty day and month folders above `path` (not `top` itself)."""
    for d in (path.parent, path.parent.parent):
        if d != top and d.exists() and not any(d.iterdir()):
            d.rmdir()


_ARCHIVE_KEYS = ("archived", "archived_reason")


def archive_dir(folder: Folder) -> Path:
    return folder.memories_dir / "archive"


def _archived_path(folder: Folder, note: Note) -> Path:
    assert note.path is not None
    return archive_dir(folder) / note.path.relative_to(folder.by_date_dir)


def archive(folder: Folder, note: Note, reason: str) -> Note:
    """Move a note's file to `memories/archive/` (same month and day folders), saying when
    and why in its frontmatter; its topic links go. Nothing is deleted: `restore` brings
    it back."""
    assert note.path is not None
    dest = _archived_path(folder, note)
    kept = replace(note, extra={**note.extra, "archived": iso(), "archived_reason": reason})
    atomic_write(dest, kept.to_text())  # the copy first: a crash leaves two, never none
    note.path.unlink()
    _prune(folder.by_date_dir, note.path)
    events.emit(folder, "mem_archived", note=note.id, path=folder.rel(dest), reason=reason)
    _relink(folder, note.path, note.topics + note.tags, [])
    return read_note(dest, folder)


def archived(folder: Folder) -> dict[str, Note]:
    """The archived notes by id (symlinks out of the folder left out)."""
    found: dict[str, Note] = {}
    for p in folder.files_under(archive_dir(folder), ".md").files:
        with contextlib.suppress(BadInput, OSError):
            n = read_note(p, folder)
            found[n.id] = n
    return found


class Restored(NamedTuple):
    """A note brought back from the archive, and what became of its expiry."""

    note: Note
    expired: str | None  # the expiry that had passed when it was restored (None: none had)
    expires: str | None  # when it expires now (None: never)


def restore(folder: Folder, note_id: str, expires: str | None = None) -> Restored:
    """Bring an archived note back to `memories/by_date/` as it was before it was archived
    (the caller indexes it). An expiry that has passed is cleared, so that the note is
    back in search and the next gc leaves it; `expires` (UTC ISO) sets a new one instead.
    A note whose id cannot name its file is refused, and stays in the archive."""
    notes = archived(folder)
    hits = [n for nid, n in notes.items() if nid == note_id or nid.startswith(note_id)]
    if not hits:
        raise NotFound(
            f"no archived note with id {shown(note_id)}",
            "archived notes are the files under memories/archive/",
        )
    if len(hits) > 1:
        raise BadInput(
            f"id prefix {note_id} matches {len(hits)} archived notes", "give more of the id"
        )
    note = hits[0]
    assert note.path is not None
    ids.NOTE.check(
        note.id,
        folder.rel(note.path),
        "fix the `id:` in its frontmatter (e.g. m-20260105-abcd), then restore it again",
    )
    dest = note_path(folder, note.id, note.ts)
    if dest.exists():
        raise BadInput(
            f"{folder.rel(dest)} exists already", "move it away, then restore the note again"
        )
    extra = {k: v for k, v in note.extra.items() if k not in _ARCHIVE_KEYS}
    was = str(extra.get("expires") or "") or None
    expired = was if was is not None and was <= iso() else None
    if expires is not None:
        extra["expires"] = expires
    elif expired is not None:
        del extra["expires"]
    back = replace(note, extra=extra)
    atomic_write(dest, back.to_text())
    note.path.unlink()
    _prune(archive_dir(folder), note.path)
    events.emit(folder, "mem_restored", note=note.id, path=folder.rel(dest))
    _relink(folder, dest, [], back.topics + back.tags)
    return Restored(read_note(dest, folder), expired, str(extra.get("expires") or "") or None)


def rewrite(folder: Folder, note: Note) -> Note:
    """Save a changed note over its own file, its topic links moved (the caller indexes it)."""
    assert note.path is not None
    before = read_note(note.path, folder)
    atomic_write(note.path, note.to_text())
    crash.point("note.written")
    events.emit(folder, "mem_updated", note=note.id, path=folder.rel(note.path))
    _relink(folder, note.path, before.topics + before.tags, note.topics + note.tags)
    return read_note(note.path, folder)


def slug(label: str) -> str:
    s = re.sub(r"[^\w.-]+", "-", label.strip().lower(), flags=re.U).strip("-.")
    return s or "untitled"


def _relink(folder: Folder, path: Path, old: list[str], new: list[str]) -> None:
    """Move one note's links in `memories/topics/` from its `old` labels to its `new` ones
    (a deleted note has none), so the view never points at a file that is gone."""
    keep = {slug(label) for label in new}
    for s in {slug(label) for label in old} - keep:
        d = folder.topics_dir / s
        link = d / path.name
        if link.is_symlink():
            link.unlink()
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()
    if not path.exists():
        return
    for s in keep:
        d = folder.topics_dir / s
        d.mkdir(parents=True, exist_ok=True)
        link = d / path.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(path, d))


def sync_topics(folder: Folder, notes: dict[str, Note]) -> None:
    """Make `memories/topics/` match `notes` (what `ok sync` found): links to notes gone,
    moved or relabelled since are taken out, links for new labels are made, empty topic
    folders removed. Files that are not links are left alone."""
    want: dict[Path, Path] = {}
    for n in notes.values():
        assert n.path is not None
        for label in dict.fromkeys(n.topics + n.tags):
            want[folder.topics_dir / slug(label) / n.path.name] = n.path
    have = [p for p in folder.topics_dir.glob("*/*") if p.is_symlink()]
    for link in have:
        target = want.get(link)
        if target is None or link.resolve() != target.resolve():
            link.unlink()
    for link, target in want.items():
        if not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                link.symlink_to(os.path.relpath(target, link.parent))
    for d in folder.topics_dir.glob("*"):
        if d.is_dir() and not d.is_symlink() and not any(d.iterdir()):
            d.rmdir()


def regenerate_topics(folder: Folder) -> dict[str, int]:
    """Rebuild `memories/topics/<slug>/` symlinks from every note's tags and topics."""
    import shutil

    notes, _ = scan(folder)
    if folder.topics_dir.exists():
        shutil.rmtree(folder.topics_dir)
    folder.topics_dir.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for n in notes.values():
        for label in dict.fromkeys(n.topics + n.tags):
            d = folder.topics_dir / slug(label)
            d.mkdir(exist_ok=True)
            assert n.path is not None
            link = d / n.path.name
            link.symlink_to(os.path.relpath(n.path, d))
            counts[slug(label)] = counts.get(slug(label), 0) + 1
    return dict(sorted(counts.items()))
