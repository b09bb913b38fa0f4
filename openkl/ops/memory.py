"""Memory notes: write, change or delete a note, index it and log it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..files import notes as notes_mod
from ..files.folder import Folder, iso, utcnow
from ..graph.indexing import open_graph
from ..knowledge import hygiene, links
from ..records import NoteDeleted
from ..sync import indexer


def add_note(
    folder: Folder,
    text: str,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    via: str | None = None,
    extra: dict[str, Any] | None = None,
    draft: Path | None = None,
    allow_duplicate: bool = False,
    supersedes: list[str] | None = None,
    ttl: str | None = None,
) -> notes_mod.Note:
    """Write a memory note, index it and log it (`via` names the adapter in the log).

    `extra` are more frontmatter keys (a title, say); `draft` is the file the note was
    written in, removed as soon as the note's own file is saved. A near duplicate of a
    live note is a `Duplicate` error, and nothing is written, unless `allow_duplicate`.
    `supersedes` are ids (or unique prefixes) of notes it replaces, which then leave
    search and ask; `ttl` (`30d`, `12h`, `2w`) sets when it expires and leaves them."""
    notes_mod.check_text(text)
    extra = dict(extra or {})
    replaced = notes_mod.clean_labels(
        [str(i) for i in extra.pop("supersedes", None) or []] + (supersedes or [])
    )
    if replaced:
        extra["supersedes"] = [notes_mod.find(folder, i).id for i in replaced]
    if ttl is not None:
        extra["expires"] = hygiene.expires_after(ttl)
    elif extra.get("expires"):
        extra["expires"] = notes_mod.expiry(extra["expires"], "the note's `expires:`")
    if not allow_duplicate:
        hygiene.refuse_duplicate(folder, text, frozenset(extra.get("supersedes") or []))
    note = notes_mod.add(folder, text, tags or [], topics or [], extra)
    if draft is not None:
        draft.unlink(missing_ok=True)
    indexer.index_note(folder, note)
    assert note.path is not None
    folder.log_op("mem.add", ids=[note.id], path=folder.rel(note.path), **_via(via))
    return note


def update_note(
    folder: Folder,
    note_id: str,
    *,
    text: str | None = None,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    add_tags: list[str] | None = None,
    via: str | None = None,
) -> notes_mod.Note:
    """Change a note's text, tags or topics (its id stays), index it again and log it."""
    note = notes_mod.update(
        folder, note_id, text=text, tags=tags, topics=topics, add_tags=add_tags or []
    )
    indexer.index_note(folder, note, replace=True)
    folder.log_op("mem.update", ids=[note.id], **_via(via))
    return note


def note_for_editing(folder: Folder, note_id: str) -> notes_mod.Note:
    """The note whose file `ok mem edit` opens (its file, even when broken, for a full id)."""
    return notes_mod.for_editing(folder, note_id)


def save_edited_note(
    folder: Folder, before: notes_mod.Note, via: str | None = None
) -> tuple[notes_mod.Note, bool]:
    """After the file of note `before` was edited by hand: check it, keep its id (whether an
    edited id had to be put back is the second value), index it again and log it. A file
    that cannot be read is a `BadInput` and stays as it is."""
    note, restored = notes_mod.reread(folder, before)
    indexer.index_note(folder, note, replace=True)
    folder.log_op("mem.edit", ids=[note.id], **_via(via))
    return note, restored


@dataclass(frozen=True)
class Deleted:
    """A deleted note: archived (restorable) unless purged."""

    id: str
    purged: bool
    archived: str | None  # where the note's file is now, folder-relative

    def as_dict(self) -> NoteDeleted:
        return {"deleted": self.id, "purged": self.purged, "archived": self.archived}


def note_to_delete(folder: Folder, note_id: str, purge: bool = False) -> notes_mod.Note:
    """The note an id or a unique prefix names, before it is deleted: a live one, or with
    `purge` an archived one too (the adapter confirms a prefix before it deletes)."""
    return notes_mod.to_delete(folder, note_id, archived_too=purge)


def delete_note(
    folder: Folder, note_id: str, purge: bool = False, via: str | None = None
) -> Deleted:
    """Take a note out of search and the graph, and log it: its file moves to
    memories/archive/ (`restore_note` brings it back), or with `purge` is deleted for good.
    `note_id` must be the full id: a prefix is for `note_to_delete`, confirmed first."""
    note = notes_mod.to_delete(folder, note_id, archived_too=purge)
    if note.id != note_id:
        raise UsageError(
            f"{note_id} is only the start of the id {note.id}, and deleting a note takes "
            "its full id: nothing was deleted",
            f"give `{note.id}`",
        )
    assert note.path is not None
    live = not note.path.is_relative_to(notes_mod.archive_dir(folder))
    kept: str | None = None
    if purge:
        notes_mod.purge(folder, note)
    else:
        moved = notes_mod.archive(folder, note, "deleted")
        assert moved.path is not None
        kept = folder.rel(moved.path)
    if live:
        _unindex(folder, [note.id])
    folder.log_op("mem.delete", ids=[note.id], purged=purge, **_via(via))
    return Deleted(id=note.id, purged=purge, archived=kept)


def _unindex(folder: Folder, note_ids: list[str]) -> None:
    with open_graph(folder, write=True) as g:
        indexer.remove_from_graph(folder, g, [], note_ids)
        links.relink(g)  # a link to one by title may now name another note


def dedupe_notes(
    folder: Folder, dry_run: bool = False, via: str | None = None
) -> list[hygiene.Cluster]:
    """Merge each cluster of near-duplicate notes into its oldest note (which keeps every
    tag, topic and frontmatter list of the others, and `merged_from`, their ids) and move
    the others to `memories/archive/`; with `dry_run`, only say what would be merged. The
    caller holds the writer lock."""
    found = hygiene.clusters(folder)
    if dry_run or not found:
        return found
    for c in found:
        keep = notes_mod.rewrite(folder, hygiene.merged(c))
        for n in c.absorbed:
            notes_mod.archive(folder, n, f"merged into {keep.id}")
        _unindex(folder, [n.id for n in c.absorbed])
        indexer.index_note(folder, keep, replace=True)
        folder.log_op(
            "mem.dedupe", ids=[keep.id], merged_from=[n.id for n in c.absorbed], **_via(via)
        )
    return found


def gc_notes(folder: Folder, dry_run: bool = False, via: str | None = None) -> list[notes_mod.Note]:
    """Move expired notes to `memories/archive/`, frontmatter and all (never deleted;
    `restore_note` brings one back); with `dry_run`, only say which. The caller holds the
    writer lock."""
    now = iso(utcnow())
    gone = [n for n in notes_mod.scan(folder)[0].values() if hygiene.expired(n, now)]
    gone.sort(key=lambda n: (n.ts, n.id))
    if dry_run or not gone:
        return gone
    for n in gone:
        notes_mod.archive(folder, n, f"expired {n.extra['expires']}")
    _unindex(folder, [n.id for n in gone])
    folder.log_op("mem.gc", ids=[n.id for n in gone], **_via(via))
    return gone


def restore_note(
    folder: Folder, note_id: str, ttl: str | None = None, via: str | None = None
) -> notes_mod.Restored:
    """Bring an archived note back, index it and log it. An expiry that has passed is
    cleared; `ttl` (`30d`, `12h`, `2w`) gives the note a new one from now instead."""
    expires = hygiene.expires_after(ttl) if ttl is not None else None
    back = notes_mod.restore(folder, note_id, expires)
    indexer.index_note(folder, back.note)
    extra = {"expired": back.expired} if back.expired else {}
    folder.log_op("mem.restore", ids=[back.note.id], expires=back.expires, **extra, **_via(via))
    return back


def regenerate_topics(folder: Folder) -> dict[str, int]:
    """Rebuild the memories/topics/<slug>/ links from every note's tags and topics, and log
    it; notes per topic. The caller holds the writer lock."""
    counts = notes_mod.regenerate_topics(folder)
    folder.log_op("mem.topics", topics=len(counts))
    return counts


def _via(via: str | None) -> dict[str, str]:
    return {"via": via} if via else {}
