"""The operations the adapters share: one function per user-level operation that takes
more than one step, so the CLI, the MCP server and the HTTP server do the same thing.

Each operation takes resolved arguments and returns a result the adapter renders; the
caller holds the writer lock for operations that write.
"""

from __future__ import annotations

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
