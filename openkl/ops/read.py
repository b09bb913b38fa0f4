"""What the folder holds, read without changing it: status, notes, documents, counts.

Every read operation that needs the graph opens it for the call (read-only) unless the
caller passes `graph`, its own way of opening it (the MCP server's holds a per-folder lock
and puts a time cap on the queries).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TypeVar

from typing_extensions import TypedDict

from ..collect import store
from ..entities.queries import EntityReader
from ..errors import OkError, UsageError
from ..files import notes as notes_mod
from ..files import progress
from ..files import where as where_mod
from ..files.folder import Folder, parse_time
from ..graph import DB_FILE, Graph
from ..graph.indexing import inference_line, open_graph
from ..graph.protocol import GraphStore
from ..knowledge import descriptions, links
from ..records import Description, EntityDetail, EntityView, MappingEntry, NoteLinks, Status
from ..sync import indexer
from .call import Call, Opener
from .upkeep import watch_state

E = TypeVar("E", bound=EntityView)
DESCRIBE_BATCH = 256  # entities whose evidence is read at once: bounded memory
FIRST_BUILD_WAIT = 1800.0  # seconds a first reader waits for another's first build


def reading(folder: Folder, graph: Opener | None = None) -> AbstractContextManager[GraphStore]:
    """The graph, opened read-only by `graph` or else by `open_graph(folder)` (built first
    when the folder has none yet: `ensure_index`)."""
    if graph is not None:
        return graph()
    ensure_index(folder)
    return open_graph(folder)


def described(folder: Folder, g: GraphStore, rows: list[E]) -> list[E]:
    """`rows` with each entity's description (`descriptions.describe`, as its page shows
    it) in `description`, and the passage saying it in `description_cite` (None when no
    passage says what the entity is); without one, a sentence that only names the entity in
    `mention` ("" when none) and its passage in `mention_cite`."""
    if not rows:
        return rows
    got = describe_all(folder, g, [r["id"] for r in rows], lambda n: None)
    for r in rows:
        d, m = descriptions.split(got.get(r["id"]))
        if d is not None:
            r["description"] = d["text"]
        r["description_cite"] = d["cite"] if d is not None else None
        r["mention"] = m["text"] if m is not None else ""
        r["mention_cite"] = m["cite"] if m is not None else None
    return rows


def describe_all(
    folder: Folder, g: GraphStore, ids: list[str], advance: Callable[[int], None]
) -> dict[str, Description | None]:
    """The descriptions of many entities, reading the graph once for all of them (their
    graph versions, which the cache of descriptions is keyed by) and the evidence of those
    not cached a batch at a time."""
    reader = EntityReader(g, ids)
    done = [0]

    def step(n: int) -> None:
        done[0] += n
        advance(n)

    def details(stale: list[str]) -> Mapping[str, EntityDetail]:
        return _Batched(stale, lambda b: reader.details(folder, b, descriptions.EVIDENCE), step)

    got = descriptions.describe_with(folder, reader, ids, details)
    advance(len(ids) - done[0])  # the rest came from the cache
    return got


class _Batched(Mapping[str, EntityDetail]):
    """Details read `DESCRIBE_BATCH` at a time, as they are asked for in order."""

    def __init__(
        self,
        ids: list[str],
        read: Callable[[list[str]], Mapping[str, EntityDetail]],
        advance: Callable[[int], None],
    ) -> None:
        self.ids, self.read, self.advance = ids, read, advance
        self.at = {eid: i for i, eid in enumerate(ids)}
        self.got: Mapping[str, EntityDetail] = {}

    def __getitem__(self, eid: str) -> EntityDetail:
        if eid not in self.got:
            start = self.at[eid]
            batch = self.ids[start : start + DESCRIBE_BATCH]
            self.got = self.read(batch)
            self.advance(len(batch))
        return self.got[eid]

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


def ensure_index(folder: Folder) -> None:
    """Build the graph of a folder that has files but no graph yet (a fresh clone: the
    graph is derived, so not in git), as `ok sync` would: under the writer lock, so that
    of two first readers one builds and the other waits for it and reads."""
    if Graph.is_resident(folder.kuzu_dir):
        return
    Graph.finish_swap(folder.kuzu_dir, writer=False)  # a rebuild killed as it swapped
    if (folder.kuzu_dir / DB_FILE).exists():
        return
    # the writer that holds the lock while there is no graph is building it: the reader
    # waits for that, however long a first build takes, not the usual few seconds
    wait = max(float(folder.setting("lock_timeout")), FIRST_BUILD_WAIT)
    try:
        with folder.write_lock("ok: building the index on first use", timeout=wait):
            if (folder.kuzu_dir / DB_FILE).exists():
                return  # built while we waited
            progress.note(
                f"building the index of {folder.root} (first use; `ok sync` does it "
                "explicitly, and keeps it up to date)"
            )
            # built beside and swapped in whole: a reader that does not wait for the lock
            # finds no graph or a complete one, never one half loaded
            indexer.sync(folder, rebuild=True)
    except PermissionError as e:
        raise OkError(
            f"the folder has no index yet, and it cannot be built here: {e}",
            "run `ok sync` as a user who may write in the folder",
        ) from e


def status(folder: Folder) -> Status:
    """Counts and staleness, without changing anything (`ok status`); in a process that
    watches the folder (`ok serve`), how its watch is doing too (`watch`)."""
    out = indexer.status(folder)
    out["inference"] = inference(folder)
    state = watch_state(folder)
    if state is not None:
        out["watch"] = state
    return out


def inference(folder: Folder) -> str:
    """Which models the folder uses (embeddings, chat, extraction, rerank), in one line,
    without asking any of them."""
    return inference_line(folder)


class Counts(TypedDict):
    """How much the graph holds."""

    docs: int
    chunks: int
    notes: int
    entities: int


def counts(call: Call) -> Counts:
    """Documents, chunks, notes and entities in the graph."""
    folder = call.folder
    with reading(folder, call.reader) as g:
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
    since: str | None = None,
    until: str | None = None,
    where: list[str] | None = None,
    where_name: str = "where",
) -> NoteList:
    """Notes with all these tags and topics, dated from `since` to `until` (ISO date/time,
    a date including its day, or a span back from now: 7d), whose frontmatter meets every
    `where` condition (`owner=alice`; see `openkl.files.where`), newest first, at most `limit`
    (None: all)."""
    conds = where_mod.parse_all(where, where_name)
    after = parse_time(since, "--since")
    before = parse_time(until, "--until", end_of_day=True)
    if after and before and after > before:
        raise UsageError(f"--since {since} is later than --until {until}", "swap them")
    # the graph settles which of two files sharing an id is the established note; it is
    # opened only when such a clash exists
    notes, problems = notes_mod.scan(folder, lambda: indexer.indexed_note_paths(folder))
    want_tags, want_topics = set(tags or []), set(topics or [])
    rows = [
        n
        for n in sorted(notes.values(), key=lambda n: (n.ts, n.id), reverse=True)
        if want_tags <= set(n.tags)
        and want_topics <= set(n.topics)
        and (not after or _utc(n.ts) >= after)
        and (not before or _utc(n.ts) <= before)
        and (
            not conds
            or where_mod.holds_all(
                conds, {"id": n.id, "ts": n.ts, "tags": n.tags, "topics": n.topics, **n.extra}
            )
        )
    ]
    return NoteList(notes=rows[:limit] if limit else rows, problems=list(problems))


def _utc(ts: str) -> str:
    """A note's time as the UTC ISO string `parse_time` gives, to compare with it."""
    try:
        return parse_time(ts, "ts") or ts
    except OkError:
        return ts


def show_note(folder: Folder, note_id: str) -> notes_mod.Note:
    """One note, by id or unique prefix."""
    return notes_mod.find(folder, note_id)


def note_links(call: Call, note: notes_mod.Note) -> NoteLinks:
    """A note's `[[links]]` with what each points to, and its backlinks. Without a graph
    that can be read, the links are listed as the file has them, unresolved."""
    folder = call.folder
    try:
        with reading(folder, call.reader) as g:
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
