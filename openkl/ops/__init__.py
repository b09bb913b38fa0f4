"""The operations the adapters share: one function per user-level operation that takes
more than one step, so the CLI, the MCP server and the HTTP server do the same thing.

Each operation takes resolved arguments and returns a result the adapter renders; the
caller holds the writer lock for operations that write. The exceptions say so: operations
that fetch from the network or wait for a model first (store_web, store_arxiv, store_repo,
refresh, distill_run) take the lock themselves for the part that writes, and init_folder
takes it once the folder exists.
"""

from __future__ import annotations

# writes
from .cite import gc_citations, make_citations
from .distill import Distilled, distill_note, distill_prompt, distill_prompts, distill_run
from .folder import Initialized, doctor, index, init_folder, sync
from .freshness import events, follow_events, refresh
from .knowledge import (
    GraphExport,
    backfeed_item,
    backfeed_queue,
    check_export,
    export_graph,
    flag_backfeed,
    validate_bundle,
)
from .notes import regenerate_topics
from .store import (
    ingest,
    refresh_policy,
    remove_doc,
    set_refresh_policy,
    store_arxiv,
    store_repo,
    store_web,
)
from .triggers import add_trigger, list_triggers, match_triggers, remove_trigger

# isort: split
from .cite import keep_citations, remember_citations
from .knowledge import decide_backfeed, import_bundle
from .notes import add_note, delete_note, update_note
from .search import SearchOptions, search, search_options

# reads
# isort: split
from .ask import ask, context
from .files import FS_SKIP, GrepResult, Listing, Piece, grep, list_dir, read_piece, safe_path
from .graph import (
    cypher,
    entity,
    entity_page,
    list_entities,
    traverse,
    write_pages,
)
from .read import (
    Counts,
    DocText,
    NoteList,
    Opener,
    counts,
    list_docs,
    list_notes,
    show_doc,
    show_note,
    status,
)
from .search import SearchResult
from .verify import CitationList, Verification, list_citations, open_citation, verify_citations

__all__ = [
    # writes
    "Distilled",
    "GraphExport",
    "Initialized",
    "add_trigger",
    "backfeed_item",
    "backfeed_queue",
    "check_export",
    "distill_note",
    "distill_prompt",
    "distill_prompts",
    "distill_run",
    "doctor",
    "events",
    "export_graph",
    "flag_backfeed",
    "gc_citations",
    "follow_events",
    "index",
    "ingest",
    "init_folder",
    "list_triggers",
    "make_citations",
    "match_triggers",
    "refresh",
    "refresh_policy",
    "regenerate_topics",
    "remove_doc",
    "remove_trigger",
    "set_refresh_policy",
    "store_arxiv",
    "store_repo",
    "store_web",
    "sync",
    "validate_bundle",
    "SearchOptions",
    "add_note",
    "decide_backfeed",
    "delete_note",
    "import_bundle",
    "keep_citations",
    "remember_citations",
    "search",
    "search_options",
    "update_note",
    # reads
    "FS_SKIP",
    "CitationList",
    "Counts",
    "DocText",
    "GrepResult",
    "Listing",
    "NoteList",
    "Opener",
    "Piece",
    "SearchResult",
    "Verification",
    "ask",
    "context",
    "counts",
    "cypher",
    "entity",
    "entity_page",
    "grep",
    "list_citations",
    "list_dir",
    "list_docs",
    "list_entities",
    "list_notes",
    "open_citation",
    "read_piece",
    "safe_path",
    "show_doc",
    "show_note",
    "status",
    "traverse",
    "verify_citations",
    "write_pages",
]
