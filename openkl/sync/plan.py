"""One sync for both backends: what the folder holds against what a graph holds.

The files are the truth. `plan` compares what the folder holds (normalized docs by content
hash, notes by file hash) with what a `GraphStore` holds, and says what a sync does: the
documents to add, remove and move, the notes to add, update and remove, old versions to
link or drop, derived parts to load again, and the files that could not be read, each
keeping the version the graph holds of it. `SyncReport` is what a sync did, whichever
graph it wrote.

Both backends run the same steps around a plan: `tidy` (the mapping follows the files:
edits in place become versions, renames and deletions), `prepare` (chunks and vectors,
before the graph is written), and `finish` (the topic links). What differs is only how a
plan is applied: `indexer.sync` in Kùzu's transaction, or in a new database swapped in for
a rebuild; `pg_sync.sync` under the stack's advisory lock, in batches of whole documents.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..entities import consolidation
from ..errors import BadInput
from ..files import mapping as mapping_mod
from ..files import notes as notes_mod
from ..files.folder import LINK_OUT, NAME_NOT_UTF8, Folder, is_utf8, iso, shown
from ..graph.indexing import embed_all, embedder
from ..graph.protocol import GraphStore
from ..knowledge import backfeed
from ..records import (
    ChunkInput,
    DocInput,
    DocMove,
    MappingEntry,
    NoteRow,
    SyncProblem,
    SyncReportDict,
)
from ..text.chunking import chunk_text, context_header, heading_paths
from ..text.embeddings import Embedder
from ..text.normalize import frontmatter, title_of

DOC_SUFFIX = ".ok.md"
# the parts of a report only a stack in PostgreSQL has: a Kùzu report leaves them out
STACK_ONLY = ("stack", "resumed", "reconsolidated", "taken_over")


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


@dataclass
class SyncReport:
    """What a sync did (or would do), the same for a Kùzu graph and a stack in PostgreSQL.
    A stack's report also names the stack (`STACK_ONLY`)."""

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
    # a stack in PostgreSQL: its name; a cut-off sync it finished; the entities recomputed
    # beyond those the changed files name (`consolidation.stale`: "all" after a cut-off
    # sync, "canonical" files or "settings" changed); the folder whose rows it replaced
    stack: str | None = None
    resumed: bool = False
    reconsolidated: list[str] = field(default_factory=list)
    taken_over: str | None = None

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
            or self.resumed
            or self.reconsolidated
            or self.taken_over
        )

    @property
    def unreadable(self) -> list[str]:
        return [p["path"] for p in self.problems if p["kind"] == "unreadable"]

    @property
    def blocking(self) -> list[SyncProblem]:
        """Files whose content is not in the graph as written: the user has to fix them."""
        return [p for p in self.problems if p["kind"] != "same_content"]

    def as_dict(self) -> SyncReportDict:
        fields = {
            k: getattr(self, k)
            for k in self.__dataclass_fields__
            if self.stack is not None or k not in STACK_ONLY
        }
        return cast(
            SyncReportDict, fields | {"changed": self.changed, "unreadable": self.unreadable}
        )


@dataclass
class Plan:
    """What a sync does: `report` holds the decisions as the sync reports them (documents and
    notes to add, update, move and remove, versions to link, derived parts to load again,
    the files that could not be read and the version each keeps); the rest is what the
    backends need to apply it."""

    report: SyncReport
    files: dict[str, str]  # doc id -> normalized path (an unreadable one: the id the graph has)
    notes: dict[str, notes_mod.Note]  # note id -> note, as read
    # old-version rows the mapping no longer records, or of documents current again
    stale: list[str] = field(default_factory=list)
    entries: dict[str, MappingEntry] = field(default_factory=dict)  # the mapping (`tidy`)

    @property
    def items(self) -> list[tuple[str, str]]:
        """The documents to load: (id, path)."""
        return [(d, self.files[d]) for d in self.report.docs_added]

    @property
    def changed_notes(self) -> list[notes_mod.Note]:
        return [self.notes[n] for n in self.report.notes_added + self.report.notes_updated]

    @property
    def docs_out(self) -> list[str]:
        """The document rows to take out: removed (or loaded again) and stale versions."""
        return self.report.docs_removed + self.stale

    @property
    def notes_out(self) -> list[str]:
        return self.report.notes_removed + self.report.notes_updated

    @property
    def work(self) -> bool:
        """Whether applying the plan writes anything to the graph."""
        return bool(self.report.changed or self.stale)


def plan(folder: Folder, g: GraphStore) -> Plan:
    """What a sync of `folder` into `g` would do, without doing it.

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
    # between recording a document and writing it): `tidy` drops those entries
    rep.docs_missing = sorted(
        d
        for d, e in entries.items()
        if e.get("current", True) and d not in files and d not in in_graph
    )
    # version links a writer had not committed yet (`sync_versions` links them)
    old = {d for d, e in entries.items() if not e.get("current", True) and e.get("superseded_by")}
    want = {
        (e["superseded_by"], d)
        for d, e in entries.items()
        if d in old and e.get("superseded_by") in graph_docs
    }
    have = set(g.version_links())
    rep.docs_unlinked = sorted(o for _, o in want - have)
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
    # old versions the mapping no longer has, and old rows of documents current again
    stale = sorted(
        d for d, v in graph_docs.items() if not v["current"] and (d not in old or d in files)
    )
    return Plan(rep, files, notes, stale)


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


@dataclass
class Prepared:
    """What a plan loads, computed before the graph is written: the new documents' rows
    and vectors, and the changed notes' rows and vectors."""

    docs: PreparedDocs | None
    notes: list[NoteRow]
    note_vecs: np.ndarray


def tidy(folder: Folder, p: Plan) -> None:
    """The mapping follows the files before a plan is applied: a document edited in place
    becomes the next version of the one it replaced, renamed and hand-added documents are
    recorded, deleted ones dropped. Leaves the mapping in `p.entries`. The caller holds the
    folder's writer lock."""
    remove_stale_temp_files(folder)
    p.entries = mapping_mod.load(folder)
    _link_edits(folder, p.entries, p.report, p.files)
    # the mapping first, so new docs are indexed with their recorded ingest time
    _sync_mapping(folder, p.entries, p.files, p.report)


def prepare(folder: Folder, p: Plan) -> Prepared:
    """Chunk and embed what `p` loads; the slow part, done before the graph is written so
    that readers are not locked out meanwhile."""
    items = p.items
    docs = prepare_docs(folder, items, p.entries) if items else None
    rows = [note_row(folder, n) for n in p.changed_notes]
    vecs = embed_all(embedder(folder), [r["text"] for r in rows], "embedding notes")
    return Prepared(docs, rows, vecs)


def finish(folder: Folder, p: Plan) -> None:
    """After a plan is applied: the topic links are a view of the notes, and a pull or a
    hand edit can add or remove notes."""
    notes_mod.sync_topics(folder, p.notes)


def remove_stale_temp_files(folder: Folder) -> None:
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


def sync_versions(g: GraphStore, entries: dict[str, MappingEntry]) -> None:
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
