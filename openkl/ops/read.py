"""What the folder holds, read without changing it: status, notes, documents, counts.

Every read operation that needs the graph opens it for the call (read-only) unless the
caller passes `graph`, its own way of opening it (the MCP server's holds a per-folder lock
and puts a time cap on the queries).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TypedDict

from .. import indexer, links, store
from .. import notes as notes_mod
from ..errors import OkError
from ..folder import Folder
from ..graph.protocol import GraphStore
from ..indexing import open_graph
from ..records import MappingEntry, NoteLinks, Status

# how an adapter opens the graph for reading, if not with `open_graph(folder)`
Opener = Callable[[], AbstractContextManager[GraphStore]]


def reading(folder: Folder, graph: Opener | None = None) -> AbstractContextManager[GraphStore]:
    """The graph, opened read-only by `graph` or else by `open_graph(folder)`."""
    return graph() if graph is not None else open_graph(folder)


def status(folder: Folder) -> Status:
    """Counts and staleness, without changing anything (`ok status`)."""
    return indexer.status(folder)


class Counts(TypedDict):
    """How much the graph holds."""

    docs: int
    chunks: int
    notes: int
    entities: int


def counts(folder: Folder, *, graph: Opener | None = None) -> Counts:
    """Documents, chunks, notes and entities in the graph."""
    with reading(folder, graph) as g:
        c = g.counts()
    return Counts(
        docs=c.get("Doc", 0),
        chunks=c.get("Chunk", 0),
        notes=c.get("MemoryNote", 0),
        entities=c.get("Entity", 0),
    )


@dataclass(frozen=True)
class NoteList:
    """Notes, newest first, and the files that could not be read as notes."""

    notes: list[notes_mod.Note]
    problems: list[notes_mod.Problem]


def list_notes(
    folder: Folder,
    *,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    limit: int | None = None,
) -> NoteList:
    """Notes with all these tags and topics, newest first, at most `limit` (None: all)."""
    # the graph settles which of two files sharing an id is the established note; it is
    # opened only when such a clash exists
    notes, problems = notes_mod.scan(folder, lambda: indexer.indexed_note_paths(folder))
    want_tags, want_topics = set(tags or []), set(topics or [])
    rows = [
        n
        for n in sorted(notes.values(), key=lambda n: (n.ts, n.id), reverse=True)
        if want_tags <= set(n.tags) and want_topics <= set(n.topics)
    ]
    return NoteList(notes=rows[:limit] if limit else rows, problems=list(problems))


def show_note(folder: Folder, note_id: str) -> notes_mod.Note:
    """One note, by id or unique prefix."""
    return notes_mod.find(folder, note_id)


def note_links(folder: Folder, note: notes_mod.Note, *, graph: Opener | None = None) -> NoteLinks:
    """A note's `[[links]]` with what each points to, and its backlinks. Without a graph
    that can be read, the links are listed as the file has them, unresolved."""
    try:
        with reading(folder, graph) as g:
            return links.of_note(g, note)
    except OkError:
        return {
            "links": [
                {
                    "target": k.target,
                    "heading": k.heading,
                    "alias": k.alias,
                    "line": k.line,
                    "to": None,
                }
                for k in links.parse(note.body, note.body_line)
            ],
            "backlinks": [],
        }


def list_docs(folder: Folder, *, all_versions: bool = False) -> list[MappingEntry]:
    """The stored documents' mapping entries (old versions too with `all_versions`)."""
    return store.list_docs(folder, all_versions)


@dataclass(frozen=True)
class DocText:
    """A document's mapping entry and its normalized text."""

    entry: MappingEntry
    text: str


def show_doc(folder: Folder, doc: str) -> DocText:
    """A document by id, id prefix or path."""
    entry, text = store.read_doc(folder, doc)
    return DocText(entry=entry, text=text)
