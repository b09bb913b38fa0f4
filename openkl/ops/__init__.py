"""The operations the adapters share: one function per user-level operation that takes
more than one step, so the CLI, the MCP server and the HTTP server do the same thing.

Each operation takes resolved arguments and returns a result the adapter renders; the
caller holds the writer lock for operations that write. The exceptions say so: operations
that fetch from the network or wait for a model first (store_web, store_arxiv, store_repo,
store_s3, refresh, distill_run) take the lock themselves for the part that writes, and
init_folder takes it once the folder exists.

The modules, by area: `ask` (answers and context); `cite` (citations, made and kept);
`distill` (distillation); `files` (files, read directly); `folder` (the folder and its
index); `freshness` (refresh and events); `graph` (the derived graph); `knowledge` (AKS
bundles, backfeed, graph export); `notes` (memory notes); `read` (reading what the folder
holds); `search` (search); `store` (collected documents); `triggers` (triggers); `verify`
(citations, checked).
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .ask import ask, context
    from .cite import gc_citations, keep_citations, make_citations, remember_citations, where
    from .distill import Distilled, distill_note, distill_prompt, distill_prompts, distill_run
    from .files import (
        HIDDEN,
        GrepFiles,
        GrepResult,
        Listing,
        Piece,
        grep,
        grep_files,
        list_dir,
        read_piece,
        safe_path,
    )
    from .folder import (
        About,
        Initialized,
        about,
        consolidating_later,
        describe,
        doctor,
        index,
        init_folder,
        pay_entities,
        publish,
        sync,
        sync_postgres,
        watch,
    )
    from .freshness import events, follow_events, refresh
    from .graph import (
        NEIGHBOURHOOD_LIMIT,
        compile_doc,
        conflicts,
        cypher,
        entity,
        entity_page,
        lineage,
        list_entities,
        neighbourhood,
        query_limits,
        synthesize_descriptions,
        traverse,
        write_pages,
        zip_pages,
    )
    from .knowledge import (
        Around,
        GraphExport,
        backfeed_item,
        backfeed_queue,
        check_export,
        decide_backfeed,
        export_graph,
        flag_backfeed,
        import_bundle,
        validate_bundle,
    )
    from .notes import (
        Deleted,
        add_note,
        dedupe_notes,
        delete_note,
        gc_notes,
        note_for_editing,
        note_to_delete,
        regenerate_topics,
        restore_note,
        save_edited_note,
        update_note,
    )
    from .read import (
        Counts,
        DocText,
        NoteList,
        Opener,
        counts,
        list_docs,
        list_notes,
        note_links,
        show_doc,
        show_note,
        status,
    )
    from .search import SearchOptions, SearchResult, locate, search, search_options
    from .store import (
        check_format,
        doc_history,
        format_suffixes,
        ingest,
        refresh_policy,
        remove_doc,
        set_refresh_policy,
        store_arxiv,
        store_repo,
        store_s3,
        store_web,
    )
    from .triggers import (
        add_trigger,
        approve_trigger,
        approved_triggers,
        list_triggers,
        match_triggers,
        remove_trigger,
        scan_triggers,
        waiting_triggers,
    )
    from .verify import CitationList, Verification, list_citations, open_citation, verify_citations

# each name's module: a submodule is imported when one of its names is first used, so that a
# command that needs one operation (`ok grep`) does not load the graph, the model and numpy
_WHERE = {
    "annotations": "__future__",
    "ask": "ask",
    "context": "ask",
    "gc_citations": "cite",
    "keep_citations": "cite",
    "make_citations": "cite",
    "remember_citations": "cite",
    "where": "cite",
    "Distilled": "distill",
    "distill_note": "distill",
    "distill_prompt": "distill",
    "distill_prompts": "distill",
    "distill_run": "distill",
    "HIDDEN": "files",
    "GrepFiles": "files",
    "GrepResult": "files",
    "Listing": "files",
    "Piece": "files",
    "grep": "files",
    "grep_files": "files",
    "list_dir": "files",
    "read_piece": "files",
    "safe_path": "files",
    "About": "folder",
    "Initialized": "folder",
    "about": "folder",
    "consolidating_later": "folder",
    "pay_entities": "folder",
    "describe": "folder",
    "doctor": "folder",
    "index": "folder",
    "init_folder": "folder",
    "publish": "folder",
    "sync": "folder",
    "sync_postgres": "folder",
    "watch": "folder",
    "events": "freshness",
    "follow_events": "freshness",
    "refresh": "freshness",
    "NEIGHBOURHOOD_LIMIT": "graph",
    "compile_doc": "graph",
    "conflicts": "graph",
    "cypher": "graph",
    "entity": "graph",
    "entity_page": "graph",
    "lineage": "graph",
    "list_entities": "graph",
    "neighbourhood": "graph",
    "query_limits": "graph",
    "synthesize_descriptions": "graph",
    "traverse": "graph",
    "write_pages": "graph",
    "zip_pages": "graph",
    "Around": "knowledge",
    "GraphExport": "knowledge",
    "backfeed_item": "knowledge",
    "backfeed_queue": "knowledge",
    "check_export": "knowledge",
    "decide_backfeed": "knowledge",
    "export_graph": "knowledge",
    "flag_backfeed": "knowledge",
    "import_bundle": "knowledge",
    "validate_bundle": "knowledge",
    "Deleted": "notes",
    "add_note": "notes",
    "dedupe_notes": "notes",
    "delete_note": "notes",
    "gc_notes": "notes",
    "note_for_editing": "notes",
    "note_to_delete": "notes",
    "regenerate_topics": "notes",
    "restore_note": "notes",
    "save_edited_note": "notes",
    "update_note": "notes",
    "Counts": "read",
    "DocText": "read",
    "NoteList": "read",
    "Opener": "read",
    "counts": "read",
    "list_docs": "read",
    "list_notes": "read",
    "note_links": "read",
    "show_doc": "read",
    "show_note": "read",
    "status": "read",
    "SearchOptions": "search",
    "SearchResult": "search",
    "locate": "search",
    "search": "search",
    "search_options": "search",
    "check_format": "store",
    "doc_history": "store",
    "format_suffixes": "store",
    "ingest": "store",
    "refresh_policy": "store",
    "remove_doc": "store",
    "set_refresh_policy": "store",
    "store_arxiv": "store",
    "store_repo": "store",
    "store_s3": "store",
    "store_web": "store",
    "add_trigger": "triggers",
    "approve_trigger": "triggers",
    "approved_triggers": "triggers",
    "list_triggers": "triggers",
    "match_triggers": "triggers",
    "remove_trigger": "triggers",
    "scan_triggers": "triggers",
    "waiting_triggers": "triggers",
    "CitationList": "verify",
    "Verification": "verify",
    "list_citations": "verify",
    "open_citation": "verify",
    "verify_citations": "verify",
}


class _Operations(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        # the import system names each submodule it loads on this package; where a
        # submodule shares its name with its operation (`search`, `ask`), the operation
        # keeps the name, as it did when every submodule was imported here
        if isinstance(value, types.ModuleType) and _WHERE.get(name) == name:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Operations


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next use is a plain attribute
    return value


__all__ = [
    "NEIGHBOURHOOD_LIMIT",
    "About",
    "Around",
    "CitationList",
    "Counts",
    "Distilled",
    "DocText",
    "HIDDEN",
    "GraphExport",
    "GrepFiles",
    "GrepResult",
    "Initialized",
    "Listing",
    "NoteList",
    "Opener",
    "Piece",
    "SearchOptions",
    "SearchResult",
    "Verification",
    "about",
    "add_note",
    "add_trigger",
    "approve_trigger",
    "approved_triggers",
    "ask",
    "backfeed_item",
    "backfeed_queue",
    "check_export",
    "context",
    "counts",
    "compile_doc",
    "synthesize_descriptions",
    "cypher",
    "query_limits",
    "decide_backfeed",
    "dedupe_notes",
    "delete_note",
    "Deleted",
    "note_to_delete",
    "gc_notes",
    "restore_note",
    "describe",
    "distill_note",
    "distill_prompt",
    "distill_prompts",
    "distill_run",
    "doc_history",
    "check_format",
    "consolidating_later",
    "format_suffixes",
    "doctor",
    "entity",
    "conflicts",
    "entity_page",
    "events",
    "export_graph",
    "flag_backfeed",
    "follow_events",
    "gc_citations",
    "grep",
    "grep_files",
    "import_bundle",
    "neighbourhood",
    "index",
    "publish",
    "pay_entities",
    "ingest",
    "init_folder",
    "keep_citations",
    "list_citations",
    "list_dir",
    "list_docs",
    "list_entities",
    "list_notes",
    "lineage",
    "list_triggers",
    "locate",
    "make_citations",
    "match_triggers",
    "open_citation",
    "read_piece",
    "refresh",
    "refresh_policy",
    "note_for_editing",
    "regenerate_topics",
    "remember_citations",
    "remove_doc",
    "remove_trigger",
    "scan_triggers",
    "safe_path",
    "save_edited_note",
    "search",
    "search_options",
    "set_refresh_policy",
    "show_doc",
    "show_note",
    "note_links",
    "status",
    "waiting_triggers",
    "store_arxiv",
    "store_repo",
    "store_s3",
    "store_web",
    "sync",
    "sync_postgres",
    "traverse",
    "update_note",
    "validate_bundle",
    "watch",
    "where",
    "verify_citations",
    "write_pages",
    "zip_pages",
]
