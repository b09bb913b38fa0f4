"""Keep a folder's stack in PostgreSQL in line with its files, writing only what changed.

`publish` builds a stack from the files alone; `sync` applies the plan `ok sync` makes
for Kùzu (`sync.plan.plan`: the files against what the stack holds, documents by content
id, notes by file hash and path, a file that cannot be read keeping the version the stack
has) and reports it the same way (`sync.plan.SyncReport`), with the same ids and rows a
fresh build would make: the same cite objects, the same entities, mentions and
relationships.

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

from ..entities import consolidation
from ..errors import IndexMismatch, StackTaken
from ..files import crash
from ..files import mapping as mapping_mod
from ..files import notes as notes_mod
from ..files.folder import Folder
from ..graph import check_stamps
from ..graph.indexing import embed_all, embedder
from ..graph.postgres import PG_LAYOUT, PgGraph
from ..knowledge import lineage, links
from ..records import SyncProblem
from .plan import (
    Plan,
    Prepared,
    PreparedDocs,
    SyncReport,
    file_problems,
    finish,
    note_row,
    plan,
    prepare,
    prepare_docs,
    problem_record,
    scan_docs,
    sync_versions,
    tidy,
)

PENDING = "pg_sync.pending"
# the folder whose rows the stack holds: its id (`Folder.identity`), and where it was
FOLDER_ID, FOLDER_AT = "folder_id", "folder"
ANALYZE_AFTER = 1000  # chunks and notes a sync loads after which it analyzes the entity tables


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
        sync_versions(store, entries)
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


def sync(folder: Folder, g: PgGraph, take_over: bool = False) -> SyncReport:
    """Bring the stack `g` in line with the folder's files (`sync.plan`, as `ok sync` plans
    for Kùzu); the caller holds the folder's and the stack's writer locks and `g` is in a
    transaction, which this commits in batches. A stack that holds another folder's rows
    is refused (`StackTaken`) unless `take_over`."""
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
        rebuilt = _rebuilt(g, publish(folder, g, take_over=True))
        rebuilt.taken_over = taken_over
        return rebuilt
    record_owner(folder, g)
    store = g.as_store()
    p = plan(folder, store)
    rep = p.report
    rep.stack, rep.resumed, rep.taken_over = g.stack, meta.get(PENDING) == "1", taken_over
    if rep.resumed:  # a cut-off sync: every note's links, lineage and extractions again
        rep.notes_updated = sorted(set(rep.notes_updated) | (set(p.notes) & set(store.notes())))
    tidy(folder, p)
    canon = consolidation.Canonical.load(folder)
    entity_work = consolidation.stale(folder, meta, canon)
    if p.work or entity_work:
        # the slow part first, before anything is written: chunks, vectors and extractions
        prepared = prepare(folder, p)
        texts = [c["text"] for c in prepared.docs.chunks] if prepared.docs else []
        consolidation.extract_texts(folder, texts + [r["text"] for r in prepared.notes])
        _apply(folder, g, p, prepared, canon, entity_work)
    finish(folder, p)
    return rep


def _apply(
    folder: Folder,
    g: PgGraph,
    p: Plan,
    prepared: Prepared,
    canon: consolidation.Canonical,
    entity_work: list[str],
) -> None:
    """Apply a plan to the stack: the removals first (with the `PENDING` flag), then the new
    documents in batches of whole documents, then notes, versions, links, lineage and the
    entities the change touched; each step committed, the flag cleared at the end."""
    rep, store = p.report, g.as_store()
    g.set_meta(PENDING, "1")
    derived = lineage.derived_notes(store, p.docs_out)
    for mv in rep.docs_moved:
        g.set_doc_path(mv["id"], mv["to"])
    # their extractions go; the entities they named are recomputed at the end
    touched = consolidation.forget(store, p.docs_out + p.notes_out)
    for d in p.docs_out:
        g.remove_doc(d)
    for n in p.notes_out:
        g.remove_note(n)
    g.forget_note_refs(p.notes_out)
    if p.docs_out or p.notes_out:
        crash.point("graph.removed")
    g.commit_and_continue()

    if prepared.docs is not None:
        rep.chunks_added = _add_docs(folder, g, prepared.docs, touched)

    sync_versions(store, p.entries)
    g.add_notes(prepared.notes, prepared.note_vecs)
    changed = p.changed_notes
    links.record(store, changed)
    crash.point("graph.notes-loaded")
    lineage.link_derived(store, changed)
    touched |= consolidation.extract(folder, store, [], [r["id"] for r in prepared.notes])
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
    lineage.relink(
        folder, store, [n for n in derived if n in p.notes and n not in rep.notes_updated]
    )
    links.relink(store)
    g.prune_topics()
    if rep.chunks_added + len(prepared.notes) >= ANALYZE_AFTER:
        g.analyze_entities()  # fresh statistics after a large load, as `publish` leaves them
    g.unset_meta(PENDING)


def _add_docs(folder: Folder, g: PgGraph, prepared: PreparedDocs, touched: set[str]) -> int:
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


def _rebuilt(g: PgGraph, pub: Published) -> SyncReport:
    """A rebuild's report: everything the stack now holds was added."""
    docs = g.docs()
    return SyncReport(
        stack=pub.stack,
        rebuilt=True,
        problems=pub.problems,
        chunks_added=pub.chunks,
        docs_added=sorted(d for d, v in docs.items() if v["current"]),
        notes_added=sorted(g.notes()),
    )
