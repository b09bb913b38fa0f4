"""Derive the graph from the files: `ok index`, `ok sync` and the incremental updates of writes.

The files are the truth. `sync` compares what the folder holds (normalized docs by content
hash, notes by file hash) with what the graph holds, and applies the difference: new and
edited files are chunked, embedded (cached) and bulk-loaded; renamed docs keep their id and
only change path; deleted files leave the graph. `rebuild` starts from an empty database.
"""

from __future__ import annotations

import sqlite3
from typing import Any, cast

from ..entities import consolidation
from ..errors import GraphUnrecoverable, OkError
from ..files import crash
from ..files import notes as notes_mod
from ..files.folder import Folder
from ..graph import Graph
from ..graph.indexing import (
    embed_all,
    embedder,
    files_newer_than_index,
    open_graph,
    room_to_write,
)
from ..graph.protocol import GraphStore
from ..knowledge import lineage, links, triggers
from ..records import MappingEntry, Status
from .plan import (
    DOC_SUFFIX,
    Plan,
    PreparedDocs,
    SyncReport,
    build_doc_rows,
    chunk_rows,
    doc_id_of,
    finish,
    note_row,
    plan,
    prepare_docs,
    scan_docs,
    sync_versions,
    tidy,
)

# for the adapters, and what the other writers (store, refresh, …) take from here
__all__ = [
    "DOC_SUFFIX",
    "PreparedDocs",
    "SyncReport",
    "build_doc_rows",
    "chunk_rows",
    "doc_id_of",
    "embed_all",
    "embedder",
    "files_newer_than_index",
    "open_graph",
    "plan",
    "prepare_docs",
    "scan_docs",
]


def indexed_note_paths(folder: Folder) -> dict[str, str]:
    """{note id: path} as the graph has them; empty when the graph cannot be read now."""
    try:
        with open_graph(folder, write=False, check=False) as g:
            return {k: v["path"] for k, v in g.notes().items()}
    except OkError:
        return {}


def index_docs(
    folder: Folder,
    g: GraphStore,
    items: list[tuple[str, str]],
    entries: dict[str, MappingEntry] | None = None,
    prepared: PreparedDocs | None = None,
) -> int:
    """Load docs (id, relative path) into the graph; returns the number of chunks."""
    if not items:
        return 0
    p = prepared or prepare_docs(folder, items, entries)
    # Kùzu holds a transaction's changes in its page pool until the commit, so a large load
    # commits every `graph.commit_chunks` chunks: each committed batch holds whole documents (chunks,
    # vectors, entities), and the documents of a batch that a crash cut off are simply not
    # in the graph, which `ok status` sees and `ok sync` adds
    limit = max(1, folder.setting("graph.commit_chunks"))
    batches: list[list[int]] = [[]]
    size = 0
    per_doc: dict[str, list[int]] = {}
    for i, c in enumerate(p.chunks):
        per_doc.setdefault(c["doc_id"], []).append(i)
    for j, d in enumerate(p.docs):
        n = len(per_doc.get(d["id"], []))
        if batches[-1] and size + n > limit:
            batches.append([])
            size = 0
        batches[-1].append(j)
        size += n
    # — and their entities are consolidated once, after the last batch: a batch's
    # extractions are committed with it, and a Meta flag that the final consolidation
    # clears tells `ok sync` to consolidate again if the load was cut off before
    touched: set[str] = set()
    for b, doc_idx in enumerate(batches):
        if b:
            if b == 1:
                g.set_meta(consolidation.PENDING, "1")
            g.commit_and_continue()
        docs = [p.docs[j] for j in doc_idx]
        rows = [i for d in docs for i in per_doc.get(d["id"], [])]
        # room for this batch, asked before each one: the disk fills as a load goes on,
        # and Kùzu aborts the process when a write or checkpoint finds no room. A load of
        # one commit is small: `graph.min_free_mb` covers the rewrite of its checkpoint
        room_to_write(folder, g.room_needed(len(rows), rewrite=len(batches) > 1))
        g.add_docs(docs, [p.chunks[i] for i in rows], p.vecs[rows])
        crash.point("graph.docs-loaded")
        ids = [d["id"] for d in docs]
        touched |= consolidation.extract(folder, g, ids, [])
        triggers.check(folder, g, ids, [])
    if len(batches) > 1:
        g.commit_and_continue()
    if touched:
        if len(batches) > 1:  # its entities rewrite the entity tables, in commits of their own
            room_to_write(folder, g.room_needed(0))
        consolidation.consolidate(folder, g, touched, stepwise=len(batches) > 1)
        crash.point("entities.consolidated")
    if len(batches) > 1:
        g.set_meta(consolidation.PENDING, "")
    return len(p.chunks)


def index_notes(folder: Folder, g: GraphStore, notes: list[notes_mod.Note]) -> None:
    if not notes:
        return
    emb = embedder(folder)
    rows = [note_row(folder, n) for n in notes]
    vecs = embed_all(emb, [r["text"] for r in rows], "embedding notes")
    g.add_notes(rows, vecs)
    links.record(g, notes)
    crash.point("graph.notes-loaded")
    lineage.link_derived(g, notes)
    consolidation.on_indexed(folder, g, [], [r["id"] for r in rows])
    triggers.check(folder, g, [], [r["id"] for r in rows])


def index_note(folder: Folder, note: notes_mod.Note, replace: bool = False) -> None:
    """Index one note (replacing its old version); the caller holds the writer lock.

    The note file is already written; if the graph cannot be updated the error says so and
    how to catch up, since the note itself is safe.
    """
    where = folder.rel(note.path) if note.path else note.id
    try:
        embed_all(embedder(folder), [note.body], "embedding notes")  # before the graph opens
        with open_graph(folder, write=True) as g:
            if replace:
                remove_from_graph(folder, g, [], [note.id])
            index_notes(folder, g, [note])
            links.relink(g)  # its links, and links elsewhere that name it
    except OkError as e:
        raise type(e)(
            f"note {note.id} is saved in {where} but not indexed: {e.message}",
            "run `ok sync` when the graph is free",
        ) from e
    except (OSError, sqlite3.Error) as e:  # the embedding cache on a full disk, say
        raise OkError(
            f"note {note.id} is saved in {where} but not indexed: {e}",
            "run `ok sync` once the cause is fixed",
        ) from e


def replace_docs(
    folder: Folder,
    g: GraphStore,
    removed: list[str],
    items: list[tuple[str, str]],
    entries: dict[str, MappingEntry],
    prepared: PreparedDocs | None = None,
    removed_notes: list[str] | None = None,
) -> tuple[int, list[str]]:
    """Take `removed` docs (and notes) out of the graph and load `items`, then link old
    versions (`SUPERSEDES`). Returns the chunks loaded and the notes that were derived from
    the removed docs, whose `DERIVED_FROM` edges the caller restores with `lineage.relink`
    once everything they may point to is in place."""
    derived = lineage.derived_notes(g, removed)
    remove_from_graph(folder, g, removed, removed_notes or [])
    chunks = index_docs(folder, g, items, entries, prepared)
    # old versions before notes, so a note citing an old version can link to it
    sync_versions(g, entries)
    return chunks, derived


def remove_from_graph(
    folder: Folder, g: GraphStore, doc_ids: list[str], note_ids: list[str]
) -> None:
    consolidation.on_removing(folder, g, doc_ids, note_ids)
    for d in doc_ids:
        g.remove_doc(d)
    for n in note_ids:
        g.remove_note(n)
    if note_ids:
        g.forget_note_refs(note_ids)
    if doc_ids or note_ids:
        crash.point("graph.removed")


def sync(folder: Folder, rebuild: bool = False) -> SyncReport:
    """Bring the graph in line with the files (`sync.plan`). The caller holds the writer lock."""
    # a rebuild fills a new database beside the live one, which keeps serving until the
    # new one is complete and swapped in
    target = Graph.start_rebuild(folder.kuzu_dir) if rebuild else None
    try:
        with open_graph(folder, write=True, kuzu_dir=target) as g:
            p = plan(folder, g)
    except GraphUnrecoverable:
        if rebuild:
            raise
        rep = sync(folder, rebuild=True)
        rep.recovered = ["graph"]
        return rep
    rep = p.report
    if rep.recovered and not rebuild:
        # a replayed log can hold part of a killed transaction (Kùzu 0.11): what it left
        # is not worth trusting, and the files say everything a rebuild needs
        recovered = rep.recovered
        rep = sync(folder, rebuild=True)
        rep.recovered = recovered
        return rep
    rep.rebuilt = rebuild
    tidy(folder, p)
    crash.point("sync.mapping-saved")
    # embed before reopening the graph: readers are not locked out during the slow part
    items = p.items
    prepared = prepare_docs(folder, items, p.entries) if items else None
    embed_all(embedder(folder), [n.body for n in p.changed_notes], "embedding notes")
    with open_graph(folder, write=True, kuzu_dir=target) as g:
        _apply(folder, g, p, prepared)
        if target is not None:
            crash.point("rebuild.loading")
    if target is not None:
        Graph.swap_in(folder.kuzu_dir)
    finish(folder, p)
    return rep


def _apply(folder: Folder, g: GraphStore, p: Plan, prepared: PreparedDocs | None) -> None:
    """Apply a plan to the open Kùzu graph, in its write transaction (committed in batches
    of whole documents when the load is large: `index_docs`)."""
    rep = p.report
    for mv in rep.docs_moved:
        g.set_doc_path(mv["id"], mv["to"])
    rep.chunks_added, derived = replace_docs(
        folder, g, p.docs_out, p.items, p.entries, prepared, p.notes_out
    )
    index_notes(folder, g, p.changed_notes)
    if "entities" in rep.incomplete:
        consolidation.consolidate_all(folder, g)
    consolidation.pay(folder, g)  # what writes of notes left for later, now
    lineage.relink(folder, g, [n for n in derived if n in p.notes])  # notes left as they were
    # approved backfeed items and imported bundles are files too
    consolidation.sync_canonical(folder, g)
    consolidation.sync_settings(folder, g)
    # every note's links, once all it may point to is in place
    links.relink(g)


def status(folder: Folder) -> Status:
    """Counts and staleness, without changing anything."""
    out: Status = {"root": str(folder.root)}
    try:
        with open_graph(folder, write=False) as g:
            out["counts"] = g.counts()
            out["embedder"] = g.meta().get("embedder")
            rep = plan(folder, g).report
            stale = out["stale"] = {
                k: cast(list[Any], v)
                for k, v in rep.as_dict().items()
                if k.startswith(("docs_", "notes_", "incomplete", "recovered")) and v
            }
            out["problems"] = rep.problems
            out["unreadable"] = rep.unreadable
            if (
                not rep.recovered
                and Graph.log_pending(folder.kuzu_dir)
                and folder.lock_state() is None
            ):
                # a killed writer's log that no writer has replayed yet (see _mark_replayed)
                stale["recovered"] = ["graph"]
            out["in_sync"] = not rep.changed and "recovered" not in stale
            out["extractor_mismatch"] = consolidation.extractor_mismatch(folder, g)
    except OkError as e:
        out["error"] = str(e)
        out["in_sync"] = False
    out["lock"] = folder.lock_state()
    out["server"] = folder.server()
    waiting = triggers.waiting(folder)
    if waiting:
        out["exec_waiting"] = waiting
    return out
