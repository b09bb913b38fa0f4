"""Keep a folder's stack in PostgreSQL in line with its files, writing only what changed.

`publish` builds a stack from the files alone; `sync` compares the files with what
the stack holds (documents by content id, notes by file hash and path) and applies the
difference, with the same ids and rows a fresh build would make: the same cite objects,
the same entities, mentions and relationships.

A sync is a few transactions: first the removals (and a `pg_sync.pending` flag), then the
new documents in batches of whole documents (`graph.commit_chunks` chunks) with their
entity extractions, then the notes, versions, `[[…]]` links, lineage and the consolidation
of the entities the change touched (`entities/consolidation.py`, as `ok sync` runs it on
Kùzu), with the flag cleared. A sync cut off part way (a kill, a lost connection) leaves
whole documents and the flag; the next one adds what is missing and, seeing the flag,
makes every note's links, lineage and extraction again and recomputes every entity.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from . import crash, indexer, lineage, links
from . import mapping as mapping_mod
from . import notes as notes_mod
from .entities import consolidation
from .errors import IndexMismatch, StackTaken
from .folder import Folder
from .graph import check_stamps
from .graph.postgres import PG_LAYOUT, PgGraph
from .indexer import (
    _sync_versions,
    embed_all,
    file_problems,
    note_row,
    prepare_docs,
    problem_record,
    scan_docs,
)
from .indexing import embedder
from .records import SyncProblem

PENDING = "pg_sync.pending"
# the folder whose rows the stack holds: its id (`Folder.identity`), and where it was
FOLDER_ID, FOLDER_AT = "folder_id", "folder"
ANALYZE_AFTER = 1000  # chunks and notes a sync loads after which it analyzes the entity tables


@dataclass
class Synced:
    """What `sync` changed in the stack."""

    stack: str
    docs_added: list[str] = field(default_factory=list)
    docs_removed: list[str] = field(default_factory=list)
    docs_moved: list[str] = field(default_factory=list)
    notes_added: list[str] = field(default_factory=list)
    notes_updated: list[str] = field(default_factory=list)
    notes_removed: list[str] = field(default_factory=list)
    chunks_added: int = 0
    rebuilt: bool = False  # built afresh: another embedder or schema, or an empty stack
    resumed: bool = False  # a cut-off sync was finished
    # docs and notes loaded again because a part of them was missing (their extractions)
    incomplete: list[str] = field(default_factory=list)
    # entities recomputed beyond those the changed files name (`consolidation.stale`):
    # "all" after a cut-off sync, "canonical" files or "settings" changed
    reconsolidated: list[str] = field(default_factory=list)
    # files not synced as written (broken frontmatter, invalid UTF-8, …): as `ok sync`
    # reports them, each with the version the stack keeps for it, if any
    problems: list[SyncProblem] = field(default_factory=list)
    taken_over: str | None = None  # the folder whose rows this sync replaced (--take-over)

    @property
    def unreadable(self) -> list[str]:
        return [p["path"] for p in self.problems if p["kind"] == "unreadable"]

    @property
    def blocking(self) -> list[SyncProblem]:
        """Files whose content is not in the stack as written: the user has to fix them."""
        return [p for p in self.problems if p["kind"] != "same_content"]

    @property
    def changed(self) -> bool:
        return bool(
            self.docs_added
            or self.docs_removed
            or self.docs_moved
            or self.notes_added
            or self.notes_updated
            or self.notes_removed
            or self.rebuilt
            or self.resumed
            or self.incomplete
            or self.reconsolidated
            or self.taken_over
        )

    def as_dict(self) -> dict[str, Any]:
        fields = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return fields | {"changed": self.changed, "unreadable": self.unreadable}


@dataclass
class Published:
    """What `publish` loaded into a PostgreSQL stack."""

    stack: str
    docs: int
    chunks: int
    notes: int
    problems: list[SyncProblem] = field(default_factory=list)  # files not loaded as written

    @property
    def blocking(self) -> list[SyncProblem]:
        return [p for p in self.problems if p["kind"] != "same_content"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "docs": self.docs,
            "chunks": self.chunks,
            "notes": self.notes,
            "problems": self.problems,
            "unreadable": [p["path"] for p in self.problems if p["kind"] == "unreadable"],
        }


def publish(folder: Folder, g: PgGraph, take_over: bool = False) -> Published:
    """Build the folder's stack in PostgreSQL from the files alone, replacing what it held:
    documents with their chunks and vectors, old versions, notes, `[[…]]` links, lineage
    and the entity graph (extractions, consolidated with the canonical files as `ok sync`
    does). One transaction: a failed build leaves the old one. A stack that holds another
    folder's rows is refused (`StackTaken`) unless `take_over`."""
    check_owner(folder, g, take_over)
    found, doc_problems = scan_docs(folder)
    entries = mapping_mod.load(folder)
    prepared = prepare_docs(folder, sorted(found.items()), entries)
    by_id, note_problems = notes_mod.scan(folder)
    notes = list(by_id.values())
    problems = doc_problems + note_problems + file_problems(folder, by_id)
    rows = [note_row(folder, n) for n in notes]
    emb = embedder(folder)
    vecs = embed_all(emb, [r["text"] for r in rows], "embedding notes")
    store = g.as_store()
    with g.transaction():
        g.destroy()
        g.stamp(emb.dim, emb.identity)
        record_owner(folder, g)
        g.add_docs(prepared.docs, prepared.chunks, prepared.vecs)
        _sync_versions(store, entries)
        g.add_notes(rows, vecs)
        links.record(store, notes)
        lineage.link_derived(store, notes)
        links.relink(store)
        touched = consolidation.extract(
            folder, store, [d["id"] for d in prepared.docs], [r["id"] for r in rows]
        )
        consolidation.consolidate(folder, store, touched)
        consolidation.sync_canonical(folder, store)
        g.analyze_entities()
    return Published(
        g.stack,
        len(prepared.docs),
        len(prepared.chunks),
        len(rows),
        [problem_record(p) for p in problems],
    )


def _where(folder: Folder) -> str:
    return f"{socket.gethostname()}:{folder.root}"


def check_owner(folder: Folder, g: PgGraph, take_over: bool = False) -> str | None:
    """Refuse to write the stack when it holds another folder's rows (another folder
    with the same `domain`), unless `take_over`; then, where that folder was. A stack
    without a recorded folder (new, or built before folders were recorded) is this one's."""
    meta = g.meta()
    held = meta.get(FOLDER_ID)
    if not held or held == folder.identity():
        return None
    other = meta.get(FOLDER_AT) or "?"
    if not take_over:
        raise StackTaken(
            f"stack {g.stack!r} holds the rows of another folder ({other}), not of this one "
            f"({_where(folder)})",
            "give this folder a `domain:` of its own in .ok/config.yml, or pass --take-over "
            "to replace the stack's rows with this folder's",
        )
    return other


def record_owner(folder: Folder, g: PgGraph) -> None:
    """Record this folder as the one whose rows the stack holds (written only on a change)."""
    meta = g.meta()
    for key, value in ((FOLDER_ID, folder.identity()), (FOLDER_AT, _where(folder))):
        if meta.get(key) != value:
            g.set_meta(key, value)


def sync(folder: Folder, g: PgGraph, take_over: bool = False) -> Synced:
    """Bring the stack `g` in line with the folder's files; the caller holds the stack's
    writer lock and `g` is in a transaction, which this commits in batches. A stack that
    holds another folder's rows is refused (`StackTaken`) unless `take_over`."""
    emb = embedder(folder)
    taken_over = check_owner(folder, g, take_over)
    meta = g.meta()
    try:
        if not meta.get("schema_version"):
            raise IndexMismatch("the stack is empty")
        check_stamps(meta, emb.identity, "")
        if meta.get("pg_layout") != PG_LAYOUT:
            raise IndexMismatch("the stack has another table layout")
    except IndexMismatch:
        rebuilt = _rebuilt(publish(folder, g, take_over=True))
        rebuilt.taken_over = taken_over
        return rebuilt
    record_owner(folder, g)
    # what the folder holds, read as `ok sync` reads it: a file that cannot be read keeps
    # the version the stack has of it, and is reported
    state, planned = indexer.plan(folder, g.as_store())
    files, notes = state["files"], state["notes"]
    entries = mapping_mod.load(folder)
    rep = Synced(g.stack, resumed=meta.get(PENDING) == "1", taken_over=taken_over)
    rep.problems = planned.problems

    have = g.docs()
    current = {d: v for d, v in have.items() if v["current"]}
    rep.docs_added = sorted(set(files) - set(current))
    rep.docs_removed = sorted(set(current) - set(files))
    rep.docs_moved = sorted(d for d in set(files) & set(current) if files[d] != current[d]["path"])
    old = {d for d, e in entries.items() if not e.get("current", True) and e.get("superseded_by")}
    # old versions the mapping no longer has, and old rows of documents current again
    stale = sorted(d for d, v in have.items() if not v["current"] and (d not in old or d in files))
    gnotes = g.notes()
    rep.notes_added = sorted(set(notes) - set(gnotes))
    rep.notes_removed = planned.notes_removed  # not those kept for an unreadable file
    rep.notes_updated = sorted(
        n
        for n in set(notes) & set(gnotes)
        if rep.resumed
        or notes[n].sha256 != gnotes[n]["sha256"]
        or folder.rel(notes[n].path) != gnotes[n]["path"]  # type: ignore[arg-type]
    )
    # documents and notes without their entity extractions (a stack an older sync wrote):
    # out, then in, as `ok sync` mends a Kùzu graph
    damaged = g.incomplete()
    redo_docs = [d for d in damaged["docs"] if d in files and d not in rep.docs_added]
    redo_notes = [n for n in damaged["notes"] if n in notes and n not in rep.notes_updated]
    rep.incomplete = redo_docs + redo_notes
    rep.docs_removed = sorted(set(rep.docs_removed) | set(redo_docs))
    rep.docs_added = sorted(set(rep.docs_added) | set(redo_docs))
    rep.notes_updated = sorted(set(rep.notes_updated) | set(redo_notes))
    canon = consolidation.Canonical.load(folder)
    entity_work = consolidation.stale(folder, meta, canon)
    if not (rep.changed or stale or entity_work or _versions_missing(g, entries, set(have))):
        return rep

    # the slow part first, before anything is written: chunks, vectors and extractions
    prepared = prepare_docs(folder, [(d, files[d]) for d in rep.docs_added], entries)
    changed = [notes[n] for n in rep.notes_added + rep.notes_updated]
    rows = [note_row(folder, n) for n in changed]
    vecs = embed_all(emb, [r["text"] for r in rows], "embedding notes")
    consolidation.extract_texts(
        folder, [c["text"] for c in prepared.chunks] + [r["text"] for r in rows]
    )

    store = g.as_store()
    g.set_meta(PENDING, "1")
    gone = rep.docs_removed + stale
    derived = lineage.derived_notes(store, gone)
    for d in rep.docs_moved:
        g.set_doc_path(d, files[d])
    # their extractions go; the entities they named are recomputed at the end
    touched = consolidation.forget(store, gone + rep.notes_removed + rep.notes_updated)
    for d in gone:
        g.remove_doc(d)
    for n in rep.notes_removed + rep.notes_updated:
        g.remove_note(n)
    g.forget_note_refs(rep.notes_removed + rep.notes_updated)
    if gone or rep.notes_removed or rep.notes_updated:
        crash.point("graph.removed")
    g.commit_and_continue()

    rep.chunks_added = _add_docs(folder, g, prepared, touched)

    _sync_versions(store, entries)
    g.add_notes(rows, vecs)
    links.record(store, changed)
    crash.point("graph.notes-loaded")
    lineage.link_derived(store, changed)
    touched |= consolidation.extract(folder, store, [], [r["id"] for r in rows])
    if rep.resumed or "all" in entity_work:
        # a sync cut off after some extractions were committed: what they touch is not
        # known, so every entity is recomputed from the extractions the stack holds
        consolidation.consolidate_all(folder, store)
        rep.reconsolidated.append("all")
        crash.point("entities.consolidated")
    elif touched:
        consolidation.consolidate(folder, store, touched)
        crash.point("entities.consolidated")
    if consolidation.sync_canonical(folder, store, canon):
        rep.reconsolidated.append("canonical")
    if consolidation.sync_settings(folder, store):
        rep.reconsolidated.append("settings")
    lineage.relink(folder, store, [n for n in derived if n in notes and n not in rep.notes_updated])
    links.relink(store)
    g.prune_topics()
    if rep.chunks_added + len(rows) >= ANALYZE_AFTER:
        g.analyze_entities()  # fresh statistics after a large load, as `publish` leaves them
    g.unset_meta(PENDING)
    return rep


def _add_docs(folder: Folder, g: PgGraph, prepared: Any, touched: set[str]) -> int:
    """Load new documents in batches of whole documents, each batch committed with its
    entity extractions; adds the entity keys they name to `touched`."""
    limit = max(1, folder.setting("graph.commit_chunks"))
    per_doc: dict[str, list[int]] = {}
    for i, c in enumerate(prepared.chunks):
        per_doc.setdefault(c["doc_id"], []).append(i)
    batch: list[Any] = []
    size = 0
    for d in [*prepared.docs, None]:
        n = len(per_doc.get(d["id"], [])) if d is not None else 0
        if batch and (d is None or size + n > limit):
            idx = [i for b in batch for i in per_doc.get(b["id"], [])]
            g.add_docs(batch, [prepared.chunks[i] for i in idx], prepared.vecs[idx])
            crash.point("graph.docs-loaded")
            touched |= consolidation.extract(folder, g.as_store(), [b["id"] for b in batch], [])
            g.commit_and_continue()
            batch, size = [], 0
        if d is not None:
            batch.append(d)
            size += n
    return len(prepared.chunks)


def _versions_missing(g: PgGraph, entries: dict[str, Any], have: set[str]) -> bool:
    """Old versions the mapping records that the stack does not hold or link yet."""
    want = {
        (e["superseded_by"], d)
        for d, e in entries.items()
        if not e.get("current", True) and e.get("superseded_by") in have
    }
    return not want <= set(g.version_links())


def _rebuilt(pub: Published) -> Synced:
    rep = Synced(pub.stack, rebuilt=True, problems=pub.problems)
    rep.chunks_added = pub.chunks
    return rep
