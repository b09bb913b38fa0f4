"""Derive the graph from the files: `ok index`, `ok sync` and the incremental updates of writes.

The files are the truth. `sync` compares what the folder holds (normalized docs by content
hash, notes by file hash) with what the graph holds, and applies the difference: new and
edited files are chunked, embedded (cached) and bulk-loaded; renamed docs keep their id and
only change path; deleted files leave the graph. `rebuild` starts from an empty database.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast

import numpy as np

from . import backfeed, crash, lineage, links, triggers
from . import mapping as mapping_mod
from . import notes as notes_mod
from .chunking import chunk_text, context_header, heading_paths
from .embeddings import Embedder
from .entities import consolidation
from .errors import BadInput, GraphUnrecoverable, OkError
from .folder import LINK_OUT, NAME_NOT_UTF8, Folder, is_utf8, iso, shown
from .graph import Graph
from .graph.protocol import GraphStore
from .indexing import embed_all, embedder, files_newer_than_index, open_graph, room_to_write
from .normalize import frontmatter, title_of
from .records import (
    ChunkInput,
    DocInput,
    DocMove,
    MappingEntry,
    NoteRow,
    Status,
    SyncProblem,
    SyncReportDict,
)

__all__ = ["embed_all", "embedder", "files_newer_than_index", "open_graph"]  # for the adapters

DOC_SUFFIX = ".ok.md"


def doc_id_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def scan_docs(folder: Folder) -> tuple[dict[str, str], list[notes_mod.Problem]]:
    """Normalized docs in the folder: {doc id: relative path}, plus problems found."""
    found: dict[str, str] = {}
    listing = folder.files_under(folder.normalized_dir, DOC_SUFFIX)
    problems = [notes_mod.Problem(folder.named(p), LINK_OUT, "unreadable") for p in listing.outside]
    for p in listing.files:
        if not is_utf8(p):
            problems.append(
                notes_mod.Problem(shown(folder.rel(p), 4096), NAME_NOT_UTF8, "unreadable")
            )
            continue
        data = p.read_bytes()
        rel = folder.rel(p)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(
                notes_mod.Problem(rel, "not valid UTF-8 (re-save it as UTF-8)", "unreadable")
            )
            continue
        did = doc_id_of(data)
        if did in found:
            problems.append(
                notes_mod.Problem(
                    rel, f"same content as {found[did]}; indexed once", "same_content"
                )
            )
            continue
        found[did] = rel
    return found, problems


def indexed_note_paths(folder: Folder) -> dict[str, str]:
    """{note id: path} as the graph has them; empty when the graph cannot be read now."""
    try:
        with open_graph(folder, write=False, check=False) as g:
            return {k: v["path"] for k, v in g.notes().items()}
    except OkError:
        return {}


def _read_text(folder: Folder, rel: str) -> str:
    return (folder.root / rel).read_text(encoding="utf-8")


def build_doc_rows(
    folder: Folder, emb: Embedder, items: list[tuple[str, str]], entries: dict[str, MappingEntry]
) -> tuple[list[DocInput], list[ChunkInput]]:
    """Doc and chunk rows for (doc id, relative path) pairs."""
    max_tokens = folder.setting("chunking.max_tokens")
    overlap = folder.setting("chunking.overlap")
    docs: list[DocInput] = []
    chunks: list[ChunkInput] = []
    for did, rel in items:
        text = _read_text(folder, rel)
        entry = entries.get(did) or {"id": did, "path": rel}
        source = entry.get("source") or {"path": rel}
        docs.append(
            {
                "id": did,
                "path": rel,
                "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                "title": entry.get("title") or title_of(text, Path(rel).name),
                "source": json.dumps(source, sort_keys=True),
                "created_at": entry.get("ingested_at") or "",
                "chars": len(text),
                "current": True,
            }
        )
        chunks += chunk_rows(did, text, emb, max_tokens, overlap, docs[-1]["title"])
    return docs, chunks


def chunk_rows(
    did: str, text: str, emb: Embedder, max_tokens: int, overlap: int, title: str = ""
) -> list[ChunkInput]:
    """The chunk rows of document `did`'s normalized text, as an ingest makes them, each
    with its contextual header (`chunking.context_header`: the title and the headings above
    it)."""
    cs = chunk_text(text, emb.tokenizer, max_tokens, overlap, frontmatter(text)[1])
    paths = heading_paths(text, [c.start for c in cs])
    return [
        {
            "id": c.chunk_id(did),
            "doc_id": did,
            "text": c.text,
            "header": context_header(title, path, c.text),
            "start": c.start,
            "end": c.end,
            "ord": i,
        }
        for i, (c, path) in enumerate(zip(cs, paths, strict=True))
    ]


@dataclass
class PreparedDocs:
    """Rows and vectors of docs, computed before the graph is opened."""

    docs: list[DocInput]
    chunks: list[ChunkInput]
    vecs: np.ndarray


def prepare_docs(
    folder: Folder, items: list[tuple[str, str]], entries: dict[str, MappingEntry] | None = None
) -> PreparedDocs:
    """Chunk and embed docs without touching the graph.

    Embedding is the slow part of indexing; doing it before the graph is opened keeps the
    graph free for readers (and the MCP server) meanwhile.
    """
    emb = embedder(folder)
    entries = entries if entries is not None else mapping_mod.load(folder)
    docs, chunks = build_doc_rows(folder, emb, items, entries)
    return PreparedDocs(docs, chunks, embed_all(emb, [c["text"] for c in chunks]))


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


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def note_row(folder: Folder, n: notes_mod.Note) -> NoteRow:
    assert n.path is not None
    return {
        "id": n.id,
        "path": folder.rel(n.path),
        "sha256": n.sha256,
        "text": n.body,
        "ts": n.ts,
        "tags": n.tags,
        "topics": n.topics,
        "body_start": n.body_start,
        "body_end": n.body_start + len(n.body),
        "expires": str(n.extra.get("expires") or ""),
        "supersedes": [str(i) for i in n.extra.get("supersedes") or []],
        "derived_notes": [
            str(i) for i in _as_list(n.extra.get("derived_from")) if notes_mod.NOTE_ID.match(str(i))
        ],
    }


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
    _sync_versions(g, entries)
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


@dataclass
class SyncReport:
    docs_added: list[str] = field(default_factory=list)
    docs_removed: list[str] = field(default_factory=list)
    docs_moved: list[DocMove] = field(default_factory=list)
    notes_added: list[str] = field(default_factory=list)
    notes_updated: list[str] = field(default_factory=list)
    notes_removed: list[str] = field(default_factory=list)
    chunks_added: int = 0
    problems: list[SyncProblem] = field(default_factory=list)
    rebuilt: bool = False
    incomplete: list[str] = field(default_factory=list)  # re-indexed: derived parts missing
    docs_missing: list[str] = field(default_factory=list)  # in the mapping, not on disk
    docs_unlinked: list[str] = field(default_factory=list)  # old versions without SUPERSEDES
    recovered: list[str] = field(default_factory=list)  # derived anew after a replayed log
    # originals left in store/sources/ when their normalized file was deleted by hand: kept,
    # since the original may be the only copy of what was fetched (`ok store remove` drops both)
    sources_kept: list[str] = field(default_factory=list)
    # originals whose ingest was cut off before their normalized file was written (never
    # indexed): `ok store ingest` of the original finishes it
    sources_unfinished: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.docs_added
            or self.docs_removed
            or self.docs_moved
            or self.notes_added
            or self.notes_updated
            or self.notes_removed
            or self.incomplete
            or self.docs_missing
            or self.docs_unlinked
            or self.recovered
        )

    @property
    def unreadable(self) -> list[str]:
        return [p["path"] for p in self.problems if p["kind"] == "unreadable"]

    @property
    def blocking(self) -> list[SyncProblem]:
        """Files whose content is not in the graph as written: the user has to fix them."""
        return [p for p in self.problems if p["kind"] != "same_content"]

    def as_dict(self) -> SyncReportDict:
        fields = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return cast(
            SyncReportDict, fields | {"changed": self.changed, "unreadable": self.unreadable}
        )


class OnDisk(TypedDict):
    """What `plan` read from the folder, for `sync` to load."""

    files: dict[str, str]  # doc id -> normalized path (an unreadable one: the id the graph has)
    notes: dict[str, notes_mod.Note]  # note id -> note


def plan(folder: Folder, g: GraphStore) -> tuple[OnDisk, SyncReport]:
    """What `sync` would do, without doing it.

    A file that cannot be read (broken YAML, invalid UTF-8) is reported, and the version
    the graph holds for its path stays: an editor's typo must not take knowledge out of
    search. Its `problem` names the id kept (`kept`); a rebuild has nothing to keep.
    """
    rep = SyncReport()
    files, problems = scan_docs(folder)
    gnotes = g.notes()
    notes, note_problems = notes_mod.scan(folder, lambda: {k: v["path"] for k, v in gnotes.items()})
    graph_docs = g.docs()
    in_graph = {k: v for k, v in graph_docs.items() if v["current"]}
    kept: dict[str, str] = {}  # unreadable path -> id of the version the graph keeps for it
    broken = {p.path for p in problems + note_problems if p.kind == "unreadable"}
    for did, d in in_graph.items():
        if d["path"] in broken and did not in files:
            files[did] = d["path"]  # as if the file still held that version
            kept[d["path"]] = did
    for nid, n in gnotes.items():
        if n["path"] in broken and nid not in notes:
            kept[n["path"]] = nid
    entries, rejected = mapping_mod.read(folder)
    extra = file_problems(folder, notes, rejected)
    rep.problems = [problem_record(p, kept.get(p.path)) for p in problems + note_problems + extra]
    rep.docs_added = sorted(set(files) - set(in_graph))
    rep.docs_removed = sorted(set(in_graph) - set(files))
    rep.docs_moved = [
        {"id": d, "from": in_graph[d]["path"], "to": files[d]}
        for d in sorted(set(files) & set(in_graph))
        if files[d] != in_graph[d]["path"]
    ]
    rep.notes_added = sorted(set(notes) - set(gnotes))
    rep.notes_removed = sorted(set(gnotes) - set(notes) - set(kept.values()))
    rep.notes_updated = sorted(
        n
        for n in set(notes) & set(gnotes)
        if notes[n].sha256 != gnotes[n]["sha256"] or folder.rel(notes[n].path) != gnotes[n]["path"]  # type: ignore[arg-type]
    )
    # documents the mapping records as current but that are not on disk (a writer died
    # between recording a document and writing it): `sync` drops those entries
    rep.docs_missing = sorted(
        d
        for d, e in entries.items()
        if e.get("current", True) and d not in files and d not in in_graph
    )
    # version links a writer had not committed yet (sync links them: _sync_versions)
    want = {
        (e["superseded_by"], d)
        for d, e in entries.items()
        if not e.get("current", True) and e.get("superseded_by") in graph_docs
    }
    have = set(g.version_links())
    rep.docs_unlinked = sorted(old for _, old in want - have)
    # derived parts that are missing are indexed again: out, then in
    damaged = g.incomplete()
    redo_docs = [d for d in damaged["docs"] if d in files and d not in rep.docs_added]
    redo_notes = [n for n in damaged["notes"] if n in notes and n not in rep.notes_updated]
    rep.incomplete = redo_docs + redo_notes
    meta = g.meta()
    if meta.get("replayed") == "1":
        rep.recovered = ["graph"]
    if meta.get(consolidation.PENDING) == "1":  # a large load cut off before its entities were made
        rep.incomplete.append("entities")
    rep.docs_removed = sorted(set(rep.docs_removed) | set(redo_docs))
    rep.docs_added = sorted(set(rep.docs_added) | set(redo_docs))
    rep.notes_updated = sorted(set(rep.notes_updated) | set(redo_notes))
    return {"files": files, "notes": notes}, rep


def file_problems(
    folder: Folder,
    notes: dict[str, notes_mod.Note],
    rejected: list[mapping_mod.Rejected] | None = None,
) -> list[notes_mod.Problem]:
    """What the folder holds that is not used as written, beyond what `scan_docs` and
    `notes.scan` report: lines of the mapping left out (an id or a path that could name a
    file outside the folder), backfeed files left out, and `supersedes:` claims that close
    a cycle. `ok sync` and `ok status` report them; so does any other sync of the files."""
    if rejected is None:
        rejected = mapping_mod.read(folder).rejected
    where = folder.named(folder.mapping_path)
    out = [
        notes_mod.Problem(
            where,
            f"line {r.line}: {r.problem}; the line is left out and kept as it is "
            "(hint: fix or delete it)",
            "unreadable",
        )
        for r in rejected
    ]
    try:
        out += [notes_mod.Problem(p, why, "unreadable") for p, why in backfeed.scan(folder)[1]]
    except BadInput as e:
        out.append(
            notes_mod.Problem(folder.named(backfeed.backfeed_dir(folder)), str(e), "unreadable")
        )
    out += notes_mod.cycle_problems(folder, notes)
    return out


def problem_record(p: notes_mod.Problem, kept: str | None = None) -> SyncProblem:
    """A problem as a sync reports it; `kept`: the id of the version the graph keeps."""
    out: SyncProblem = {"path": p.path, "problem": p.problem, "kind": p.kind}
    if kept is not None:
        out["kept"] = kept
    return out


def sync(folder: Folder, rebuild: bool = False) -> SyncReport:
    """Bring the graph in line with the files. The caller holds the writer lock."""
    # a rebuild fills a new database beside the live one, which keeps serving until the
    # new one is complete and swapped in
    target = Graph.start_rebuild(folder.kuzu_dir) if rebuild else None
    _remove_stale_temp_files(folder)
    try:
        with open_graph(folder, write=True, kuzu_dir=target) as g:
            state, rep = plan(folder, g)
    except GraphUnrecoverable:
        if rebuild:
            raise
        rep = sync(folder, rebuild=True)
        rep.recovered = ["graph"]
        return rep
    if rep.recovered and not rebuild:
        # a replayed log can hold part of a killed transaction (Kùzu 0.11): what it left
        # is not worth trusting, and the files say everything a rebuild needs
        recovered = rep.recovered
        rep = sync(folder, rebuild=True)
        rep.recovered = recovered
        return rep
    rep.rebuilt = rebuild
    files, notes = state["files"], state["notes"]
    entries = mapping_mod.load(folder)
    _link_edits(folder, entries, rep, files)
    # the mapping first, so new docs are indexed with their recorded ingest time
    _sync_mapping(folder, entries, files, rep)
    crash.point("sync.mapping-saved")
    # embed before reopening the graph: readers are not locked out during the slow part
    items = [(d, files[d]) for d in rep.docs_added]
    prepared = prepare_docs(folder, items, entries) if items else None
    changed_notes = [notes[n] for n in rep.notes_added + rep.notes_updated]
    embed_all(embedder(folder), [n.body for n in changed_notes], "embedding notes")
    with open_graph(folder, write=True, kuzu_dir=target) as g:
        for mv in rep.docs_moved:
            g.set_doc_path(mv["id"], mv["to"])
        rep.chunks_added, derived = replace_docs(
            folder,
            g,
            rep.docs_removed,
            items,
            entries,
            prepared,
            rep.notes_removed + rep.notes_updated,
        )
        index_notes(folder, g, changed_notes)
        if "entities" in rep.incomplete:
            consolidation.consolidate_all(folder, g)
        consolidation.pay(folder, g)  # what writes of notes left for later, now
        lineage.relink(folder, g, [n for n in derived if n in notes])  # notes left as they were
        # approved backfeed items and imported bundles are files too
        consolidation.sync_canonical(folder, g)
        consolidation.sync_settings(folder, g)
        # every note's links, once all it may point to is in place
        links.relink(g)
        if target is not None:
            crash.point("rebuild.loading")
    if target is not None:
        Graph.swap_in(folder.kuzu_dir)
    # the topic links are a view of the notes: a pull or a hand edit can add or remove notes
    notes_mod.sync_topics(folder, notes)
    return rep


def _remove_stale_temp_files(folder: Folder) -> None:
    """Drop half-written `atomic_write` temp files left by a killed process.

    Only called under the writer lock, so no live writer can own them.
    """
    for base in (
        folder.store_dir,
        folder.memories_dir,
        folder.citations_dir,
        folder.ok_dir / "versions",
    ):
        if base.exists():
            for tmp in base.rglob(".*.tmp"):
                if tmp.is_file():
                    tmp.unlink()
    for tmp in folder.ok_dir.glob(".*.tmp"):
        tmp.unlink()


def _link_edits(
    folder: Folder, entries: dict[str, MappingEntry], rep: SyncReport, files: dict[str, str]
) -> None:
    """A doc edited in place (same path, new content) supersedes the version it replaced.

    The old text is gone from disk by then (`text_kept: false`); citations of it carry their
    quote and are checked against the new version through `superseded_by`.
    """
    added_at = {files[d]: d for d in rep.docs_added}
    linked = False
    for old in rep.docs_removed:
        e = entries.get(old)
        new = added_at.get(e.get("path", "") if e else "")
        if not e or not e.get("current", True) or not new or new == old:
            continue
        now = iso()
        ne = entries.setdefault(
            new, {"id": new, "path": files[new], "ingested_at": now, "current": True}
        )
        for k in ("source", "origin", "media_type", "refresh"):
            if k in e and k not in ne:
                ne[k] = e[k]
        ne["supersedes"] = old
        keep = folder.ok_dir / "versions" / f"{old}.ok.md"
        e.update(
            {
                "current": False,
                "superseded_by": new,
                "superseded_at": now,
                "last_path": e["path"],
                "path": keep.relative_to(folder.root).as_posix(),
            }
        )
        if not keep.exists():
            e["text_kept"] = False
        linked = True
    if linked:
        mapping_mod.save(folder, entries)


def _sync_versions(g: GraphStore, entries: dict[str, MappingEntry]) -> None:
    """Superseded versions from the mapping become non-current Doc nodes with SUPERSEDES."""
    have = g.docs()
    old = [
        (did, e)
        for did, e in sorted(entries.items())
        if not e.get("current", True) and e.get("superseded_by")
    ]
    for did, e in old:
        if did not in have:
            g.add_old_version(
                did,
                e.get("path", ""),
                e.get("sha256", ""),
                e.get("title", ""),
                json.dumps(e.get("source") or {}),
                e.get("ingested_at", ""),
            )
        elif have[did]["current"]:
            g.retire_doc(did)
    # every node first: an edge's newer end may be an old version created just above
    for did, e in old:
        g.link_version(
            e["superseded_by"], did, float(e.get("drift") or 0.0), e.get("superseded_at") or ""
        )


def _sync_mapping(
    folder: Folder, entries: dict[str, MappingEntry], files: dict[str, str], rep: SyncReport
) -> None:
    """Keep mapping.jsonl's paths in line with the files (renames, hand-added docs, deletions)."""
    changed = False
    for did, rel in files.items():
        e = entries.get(did)
        if e is None:
            entries[did] = {
                "id": did,
                "path": rel,
                "source": {"path": rel},
                "ingested_at": iso(),
                "current": True,
            }
            changed = True
        elif e.get("path") != rel or not e.get("current", True):
            e["path"], e["current"] = rel, True
            e.pop("superseded_by", None)
            changed = True
    gone = []
    for did in list(entries):
        e = entries[did]
        if e.get("current", True) and did not in files:
            gone.append(entries.pop(did))
            changed = True
    used = {(e.get("source") or {}).get("path") for e in entries.values()}
    for e in gone:
        src = (e.get("source") or {}).get("path") or ""
        if src.startswith("store/sources/") and src not in used and (folder.root / src).exists():
            # in the graph: its normalized file was deleted; never indexed: cut off
            was_indexed = e["id"] in rep.docs_removed
            (rep.sources_kept if was_indexed else rep.sources_unfinished).append(src)
    if changed:
        mapping_mod.save(folder, entries)


def status(folder: Folder) -> Status:
    """Counts and staleness, without changing anything."""
    out: Status = {"root": str(folder.root)}
    try:
        with open_graph(folder, write=False) as g:
            out["counts"] = g.counts()
            out["embedder"] = g.meta().get("embedder")
            _, rep = plan(folder, g)
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
