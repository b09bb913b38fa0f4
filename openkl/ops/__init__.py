"""The operations the adapters share: one function per user-level operation that takes
more than one step, so the CLI, the MCP server and the HTTP server do the same thing.

Each operation takes resolved arguments and returns a result the adapter renders; the
caller holds the writer lock for operations that write. The exceptions say so: operations
that fetch from the network or wait for a model first (store_web, store_arxiv, store_repo,
refresh, distill_run) take the lock themselves for the part that writes, and init_folder
takes it once the folder exists.

The modules, by area: `ask` (answers and context); `cite` (citations, made and kept);
`distill` (distillation); `files` (files, read directly); `folder` (the folder and its
index); `freshness` (refresh and events); `graph` (the derived graph); `knowledge` (AKS
bundles, backfeed, graph export); `notes` (memory notes); `read` (reading what the folder
holds); `search` (search); `store` (collected documents); `triggers` (triggers); `verify`
(citations, checked).
"""

from __future__ import annotations

from .ask import ask, context
from .cite import gc_citations, keep_citations, make_citations, remember_citations
from .distill import Distilled, distill_note, distill_prompt, distill_prompts, distill_run
from .files import (
    FS_SKIP,
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
    describe,
    doctor,
    index,
    init_folder,
    publish,
    sync,
    sync_postgres,
    watch,
)
from .freshness import events, follow_events, refresh
from .graph import (
    NEIGHBOURHOOD_LIMIT,
    conflicts,
    cypher,
    entity,
    entity_page,
    lineage,
    list_entities,
    neighbourhood,
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
    add_note,
    dedupe_notes,
    delete_note,
    gc_notes,
    note_for_editing,
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
    doc_history,
    ingest,
    refresh_policy,
    remove_doc,
    set_refresh_policy,
    store_arxiv,
    store_repo,
    store_web,
)
from .triggers import add_trigger, list_triggers, match_triggers, remove_trigger
from .verify import CitationList, Verification, list_citations, open_citation, verify_citations

__all__ = [
    "NEIGHBOURHOOD_LIMIT",
    "About",
    "Around",
    "CitationList",
    "Counts",
    "Distilled",
    "DocText",
    "FS_SKIP",
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
    "ask",
    "backfeed_item",
    "backfeed_queue",
    "check_export",
    "context",
    "counts",
    "cypher",
    "decide_backfeed",
    "dedupe_notes",
    "delete_note",
    "gc_notes",
    "restore_note",
    "describe",
    "distill_note",
    "distill_prompt",
    "distill_prompts",
    "distill_run",
    "doc_history",
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
    "safe_path",
    "save_edited_note",
    "search",
    "search_options",
    "set_refresh_policy",
    "show_doc",
    "show_note",
    "note_links",
    "status",
    "store_arxiv",
    "store_repo",
    "store_web",
    "sync",
    "sync_postgres",
    "traverse",
    "update_note",
    "validate_bundle",
    "watch",
    "verify_citations",
    "write_pages",
    "zip_pages",
]
