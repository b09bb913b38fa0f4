"""The records that pass between the layers, by name: what a mapping entry, a cite object,
a report, an entity or a relationship, an answer, an event, a bundle or a row of the graph
holds.

They are TypedDicts because they are also the JSON the adapters print: a record is a plain
dict at run time, and mypy checks its keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, NotRequired, cast

# pydantic (the HTTP routes' response models) reads TypedDicts of typing_extensions only,
# before Python 3.12
from typing_extensions import TypedDict

# -- files, citations and reports --------------------------------------------------------


# The mapping: `.ok/mapping.jsonl`, one entry per document version (openkl.files.mapping).
class Source(TypedDict, total=False):
    """Where a document came from; which keys are set says what kind of source it is."""

    path: str  # a file: its original under store/sources/ (or, hand-added, its own path)
    url: str  # a web page, as asked for
    arxiv: str  # an arXiv paper, the id as given (with a version when one was asked for)
    repo: str  # a repository (path or git URL), with `file` inside it
    file: str  # the file's path inside `repo`
    branch: str  # the branch of `repo`, when one was asked for
    s3: str  # an S3 object, s3://bucket/key
    endpoint: str  # the S3-compatible store `s3` is on (absent: AWS S3)


class RefreshPolicy(TypedDict, total=False):
    """When a source is due again (`ok store … --refresh/--cron`); cron wins."""

    interval: str  # "30m", "6h", "1d", "2w"
    cron: str  # five fields, UTC, or a macro such as @daily


class FetchInfo(TypedDict, total=False):
    """What the last fetch of a source learnt, and what the next refresh asks with."""

    kind: str  # web | arxiv | repo | file | s3
    url: str  # web: the URL after redirects; arxiv: the PDF's URL
    etag: str | None  # web: for If-None-Match (None, as a fetch reports it, is not stored);
    # s3: the object's ETag (a refresh downloads the object only when it changed)
    last_modified: str | None  # web: for If-Modified-Since (likewise); s3: UTC ISO
    content_type: str  # web
    status: int  # web: the HTTP status (304 when a refresh found it unchanged)
    version: str  # arxiv: the latest version, "v3"
    updated: str  # arxiv: when that version appeared
    commit: str  # repo: the commit the files were read at
    include: list[str]  # repo, s3: the --include globs
    prefix: str  # s3: the s3://bucket/prefix stored (a refresh lists it again)
    size: int  # s3: the object's size in bytes
    profile: str  # s3: the AWS profile it was read with, when one was named
    anonymous: bool  # s3: read unsigned (a public bucket, --no-sign-request)
    branch: str  # repo
    unchanged: bool  # arxiv, during a refresh only (never stored): the version is known


class RefreshError(TypedDict):
    """Why the last refresh of a source failed, and when it is tried again."""

    at: str  # when (UTC ISO)
    error: str  # the error, as one line
    since: NotRequired[str]  # the first failure of this streak (UTC ISO)
    failures: NotRequired[int]  # failures in a row
    retry_at: NotRequired[str]  # not due before then: the wait doubles per failure (UTC ISO)


class ArxivMeta(TypedDict):
    """What arXiv's API says about a paper; an arXiv document's `meta` holds it."""

    title: str
    authors: list[str]
    abstract: str
    published: str  # when the first version appeared (UTC ISO)
    updated: str  # when this version appeared
    version: str  # "v2"; empty when the API gave none
    entry_id: str  # the abstract page's URL
    categories: list[str]
    pdf_url: str
    doi: NotRequired[str]


class MappingEntry(TypedDict):
    """One document version in `.ok/mapping.jsonl`. Only `id` and `path` are always there:
    entries found by `ok sync` (a hand-added file, a doc edited in place) have few keys."""

    id: str  # the doc id: the first 16 hex digits of the normalized text's sha256
    path: str  # the normalized text (store/normalized/…); for an old version its kept copy
    # (.ok/versions/<id>.ok.md), or where that copy would be when `text_kept` is false
    source: NotRequired[Source]  # where it came from
    origin: NotRequired[str]  # what was read: an absolute path, a URL, or "-" for stdin
    media_type: NotRequired[str]  # the original's media type
    title: NotRequired[str]  # from the extractor or the fetcher (a page's <title>)
    ingested_at: NotRequired[str]  # when this version was stored (UTC ISO)
    fetched_at: NotRequired[str]  # when its source was last read (refreshes count from it)
    sha256: NotRequired[str]  # of the normalized text (the id is its first 16 digits)
    current: NotRequired[bool]  # false for a superseded version; absent means true
    refresh: NotRequired[RefreshPolicy | None]  # the refresh policy; None or absent: none
    meta: NotRequired[dict[str, Any]]  # what the extractor and the fetcher knew (ArxivMeta…,
    # a markdown file's frontmatter `tags`)
    fetch: NotRequired[FetchInfo]  # what the last fetch learnt
    refresh_error: NotRequired[RefreshError]  # the last refresh failed; cleared by success
    supersedes: NotRequired[str]  # the id of the version this one replaced
    superseded_by: NotRequired[str]  # an old version: the id of the one that replaced it
    superseded_at: NotRequired[str]  # an old version: when it was replaced
    last_path: NotRequired[str]  # an old version edited in place: the path it had
    text_kept: NotRequired[bool]  # false when an old version's text is gone (edited in place)
    drift: NotRequired[float]  # an old version: 1 - cosine to the version that replaced it


# Cite objects: what search returns, and what `ok cite` makes, keeps and verifies.
class Loc(TypedDict):
    """A span of a file's text."""

    kind: str  # always "char"
    start: int  # the first character (0-based)
    end: int  # one past the last character


class CiteContext(TypedDict):
    """The text around a quote, so it can be found again after edits."""

    pre: str  # up to 120 characters before the quote
    post: str  # up to 120 characters after it


class Signal(TypedDict):
    """One search signal's part in a hit (`ok search --explain`)."""

    # the signal's raw score: BM25 (relative to the query) or cosine similarity (comparable
    # across queries and folders: what `--min-score` holds the best passage to)
    score: float
    rank: int  # the hit's rank in that signal's list (1-based)
    norm: float  # the score min-max scaled within the query's list (what fusion adds)


class DriftFactor(TypedDict):
    """What a document's drift did to a hit's score (`ok search --drift-penalty --explain`)."""

    drift: float  # 1 - cosine between its latest version and the one that version replaced
    factor: float  # 1 - weight * drift, never under 0: what the score was multiplied by


class Cite(TypedDict):
    """A cite object: a search hit, a citation (`ok cite make`), a citation kept in
    `citations/<id>.json`, or a citation an answer gives. The required keys are always
    there, in this order (`new_cite` builds one); each of the others belongs to one use."""

    type: str  # chunk | memory (a note) | doc (a whole document)
    id: str  # a hit: the chunk or note id; a citation: c-<16 hex> (`citations.cite_id`)
    ref: NotRequired[str]  # a citation: what it cites (doc id, <doc>#char<s>-<e>, note id)
    doc_id: str  # the document's id (a note's id for a memory)
    path: str  # the cited file, relative to the folder's root
    abs_path: NotRequired[str]  # printed: the cited file's absolute path (never stored)
    sha256: str  # of the cited file's text
    title: str  # the document's title; a note's first line
    loc: Loc  # the quote's span in that text
    quote: str  # the cited text, exactly
    context: CiteContext  # the text on either side (empty when the file is unreadable)
    source: Source  # where the document came from
    created_at: str  # a hit: when the doc was stored or the note written; a citation: made
    tags: NotRequired[list[str]]  # a note hit: the note's tags; a kept citation: its own
    topics: NotRequired[list[str]]  # a note hit: the note's topics
    score: NotRequired[float]  # a hit: the fused score
    rank: NotRequired[int]  # a hit: its place in the results (1-based)
    signals: NotRequired[dict[str, Signal]]  # a hit with --explain: fts and vector
    recency: NotRequired[float]  # a hit with --explain and recency on: its date's factor
    drift: NotRequired[DriftFactor]  # a hit with --explain and a drift penalty: its doc's
    n: NotRequired[int]  # in an answer: the [N] marker the citation stands for
    retention_class: NotRequired[str]  # a kept citation: standard | keep | ephemeral
    history: NotRequired[list[CiteMove]]  # a kept citation: where `verify --update` moved it
    updated_at: NotRequired[str]  # a kept citation: when it was last moved
    status: NotRequired[str]  # a kept citation listed by status: what verify says of it


def new_cite(
    type_: str,
    id_: str,
    doc_id: str,
    path: str,
    sha256: str,
    title: str,
    start: int,
    end: int,
    quote: str,
    context: CiteContext,
    source: Source,
    created_at: str,
    *,
    ref: str | None = None,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    root: Path | None = None,
) -> Cite:
    """A cite object with its keys in the order the JSON shows them (`ref` after `id`,
    `abs_path` after `path` when the folder's `root` is given, the note's `tags` and
    `topics` last)."""
    head: dict[str, Any] = {"type": type_, "id": id_}
    if ref is not None:
        head["ref"] = ref
    body: dict[str, Any] = {
        "doc_id": doc_id,
        "path": path,
        **({} if root is None else {"abs_path": str(root / path)}),
        "sha256": sha256,
        "title": title,
        "loc": {"kind": "char", "start": start, "end": end},
        "quote": quote,
        "context": context,
        "source": source,
        "created_at": created_at,
    }
    if tags is not None:
        body["tags"] = tags
    if topics is not None:
        body["topics"] = topics
    return cast(Cite, head | body)


def with_abs_path(cite: Cite, root: Path | None) -> Cite:
    """A copy of `cite` whose `abs_path` (right after `path`) is its file under `root`;
    without a root, a copy without one (what is written to disk stays relative)."""
    out: dict[str, Any] = {}
    for k, v in cite.items():
        if k == "abs_path":
            continue
        out[k] = v
        if k == "path" and root is not None:
            out["abs_path"] = str(root / str(v))
    return cast(Cite, out)


def note_title(text: str) -> str:
    """A note's title in a cite object: the first line of the cited text (80 chars at most)."""
    return (text.splitlines() or [""])[0][:80]


class Supersession(NamedTuple):
    """What notes' `supersedes:` lists do: the notes they hide, and the claims left aside
    because they close a cycle (A supersedes B, and B, by a hand edit, A)."""

    hidden: set[str]
    # (the note that claims, the note it would hide, the cycle in order from the claimant)
    ignored: list[tuple[str, str, list[str]]]


def supersession(edges: Iterable[tuple[str, str]], ts: Mapping[str, str]) -> Supersession:
    """Which notes the edges (newer, older: a note and one it supersedes) hide. In a cycle
    every note would be hidden, so its newest note (by `ts`, then id) stays visible: the
    claims on it from inside the cycle are ignored, and reported. Notes not in `ts` (not
    there) and self-references count for nothing. Both graph backends and the files'
    own view (`hygiene.live_notes`) decide by this one rule."""
    out: dict[str, set[str]] = {}
    for new, old in edges:
        if new != old and new in ts and old in ts:
            out.setdefault(new, set()).add(old)
    ignored: list[tuple[str, str, list[str]]] = []
    for comp in _cycles(out):
        kept = max(comp, key=lambda n: (ts[n], n))
        for new in sorted(comp):
            if kept in out.get(new, ()):
                ignored.append((new, kept, _path_round(out, kept, new, set(comp))))
    skip = {(new, old) for new, old, _ in ignored}
    hidden = {old for new, olds in out.items() for old in olds if (new, old) not in skip}
    return Supersession(hidden, ignored)


def _cycles(out: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, without
    recursion: a hand-made chain may be long)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(out):
        if root in index:
            continue
        work = [(root, iter(sorted(out.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(out.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def _path_round(out: Mapping[str, set[str]], start: str, end: str, within: set[str]) -> list[str]:
    """A shortest chain of `supersedes` from `start` to `end` inside a cycle, with the
    claim of `end` on `start` closing it: [end, start, …, end]."""
    prev: dict[str, str] = {start: start}
    todo = [start]
    while todo and end not in prev:
        nxt = []
        for v in todo:
            for w in sorted(out.get(v, ())):
                if w in within and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        todo = nxt
    chain = [end]
    while chain[-1] != start:
        chain.append(prev[chain[-1]])
    return [end, *reversed(chain)]


class CitedAt(TypedDict):
    """Which version of which file a citation points at, and where in it."""

    doc_id: str
    path: str
    loc: Loc


class FoundAt(TypedDict):
    """Where `verify` found a citation's quote now."""

    doc_id: str  # the version that holds it (a note's id for a memory)
    path: str
    sha256: str  # of that file's text
    loc: Loc
    quote: NotRequired[str]  # only when it changed: the passage that is there now


class Archived(TypedDict):
    """The superseded version that still holds a quote which its successor lost."""

    path: str
    doc_id: str


class CiteStatus(TypedDict):
    """What `ok cite verify` says about one citation."""

    id: str
    status: str  # verified | moved | changed | missing
    type: str
    ref: str | None
    cited: CitedAt  # what the citation recorded
    found: FoundAt | None  # where the quote is now; None when missing
    similarity: float  # 1.0 for an exact quote; the closest passage's otherwise
    changes: list[str]  # what differs: document, path, version, span
    diagnostics: list[str]  # sentences saying what was looked at and found
    reason: NotRequired[str]  # missing: document_gone | note_gone | quote_gone
    archived: NotRequired[Archived]  # changed or missing, but the cited version has it
    persisted: NotRequired[bool]  # kept in citations/ (from `verify_many`)
    updated: NotRequired[bool]  # rewritten where it was found (`verify --update`)


class CitedVersion(TypedDict):
    """What a kept citation pointed at before `verify --update` moved it."""

    doc_id: str
    path: str
    sha256: str
    loc: Loc


# "from" is a keyword, hence the functional form
CiteMove = TypedDict(
    "CiteMove",
    {
        "at": str,  # when it was moved
        "status": str,  # what verify said then
        "changes": list[str],  # what differed
        "from": CitedVersion,  # where it pointed before
    },
)


class Span(TypedDict):
    start: int
    end: int


class CitePassage(TypedDict):
    """A citation's quote where it is now, with lines around it (`ok cite open`)."""

    id: str
    status: str
    verification: CiteStatus
    path: str
    lines: Span | None  # the quote's first and last line (1-based); None from the citation
    text: str  # the lines shown
    highlight: Span  # the quote within `text`
    first_line: NotRequired[int]  # the number of `text`'s first line
    from_citation: bool  # the files hold nothing: `text` is what the citation recorded


class Spot(TypedDict):
    """Where `ok open` goes: a file, a line in it, and the text there."""

    id: str  # what was asked for, resolved: a hit's or citation's id, or path:line
    status: str  # verified | moved | changed (an id, as verify says); a path: "file"
    path: str  # the file, relative to the folder's root (or as given, outside it)
    abs_path: str  # the file's absolute path
    line: int  # the first line of the span (1-based)
    end_line: int  # its last line
    text: str  # those lines
    # the line of the span's best sentence for the search it came from (the one with the
    # most of the query's words), where an editor opens; absent without a query
    best_line: NotRequired[int]


class FileProblem(TypedDict):
    """A file that could not be read, and why."""

    path: str
    problem: str


class CiteGcReport(TypedDict):
    """What `ok cite gc` removed (or would, with `dry_run`)."""

    transient: list[str]  # ids of transient citations
    orphaned: list[str]  # kept citations whose document or note is gone
    expired: list[str]  # ephemeral citations that no longer verify
    kept: int
    problems: list[FileProblem]  # citation files that cannot be read
    dry_run: bool


# Reports of the writes: what `ok store ingest` / `web` / `arxiv` / `repo`, `ok sync` /
# `ok index` and `ok refresh` print. The reports themselves stay dataclasses beside the code
# that fills them (store.IngestReport, sync.plan.SyncReport, refresh.RefreshReport), since
# they have derived parts; their items and their `as_dict()` are the records here.
class Skipped(TypedDict):
    """Something given or found that was not stored, and why."""

    path: str  # as given, found or fetched (a path or a URL)
    reason: str  # a sentence, with a hint where there is one
    # it should have been stored and could not be (named but missing, unreadable, a file
    # that does not parse, a page that could not be fetched): the command is partly done.
    # Left out otherwise: a file met in a directory and passed over for its type, a link
    # or its size, as rg passes files over.
    failed: NotRequired[bool]


class Added(TypedDict):
    """A document version an ingest stored."""

    id: str
    path: str  # its normalized text
    origin: str  # what it was read from
    title: str
    supersedes: NotRequired[str]  # the version it replaced
    drift: NotRequired[float]  # from that version (when both texts could be read)


class Unchanged(TypedDict):
    """Something an ingest found already stored."""

    id: str
    path: str
    origin: str
    current: NotRequired[bool]  # false: it is an old version (of `superseded_by`)
    superseded_by: NotRequired[str]


class IngestReportDict(TypedDict):
    """`store.IngestReport.as_dict()`."""

    added: list[Added]
    unchanged: list[Unchanged]
    skipped: list[Skipped]
    chunks: int  # chunks indexed


class Refusal(TypedDict):
    """What every refused request answers (4xx, 5xx)."""

    error: str
    hint: NotRequired[str]


class Uploaded(IngestReportDict):
    """`POST /stacks/{stack}/documents`: the report, with the one document's `id` on top."""

    id: NotRequired[str]


class IngestRefused(Refusal):
    """An upload of which every file was skipped (422)."""

    skipped: list[Skipped]


class DocShown(TypedDict):
    """A document's mapping entry and its normalized text."""

    entry: MappingEntry
    text: str


# a document whose normalized file was renamed (`ok sync`); "from" is a keyword, hence the
# functional form
DocMove = TypedDict("DocMove", {"id": str, "from": str, "to": str})


class SyncProblem(TypedDict):
    """A file `ok sync` could not take in as written."""

    path: str
    problem: str  # what is wrong, and how to fix it
    kind: str  # unreadable | same_content
    kept: NotRequired[str]  # the id of the version the graph keeps for that path


class SyncReportDict(TypedDict):
    """`sync.plan.SyncReport.as_dict()`: what `ok sync` / `ok index` did (or would do), to the
    Kùzu graph or (`ok sync --backend`) to a stack in PostgreSQL."""

    docs_added: list[str]
    docs_removed: list[str]
    docs_moved: list[DocMove]
    notes_added: list[str]
    notes_updated: list[str]
    notes_removed: list[str]
    chunks_added: int
    problems: list[SyncProblem]
    rebuilt: bool
    incomplete: list[str]  # re-indexed because derived parts were missing ("entities":
    # a batched load was cut off before its entities were made)
    docs_missing: list[str]  # in the mapping, not on disk
    docs_unlinked: list[str]  # old versions without SUPERSEDES
    recovered: list[str]  # ["graph"]: derived anew after a replayed log
    sources_kept: list[str]  # originals under store/sources/ of normalized files deleted by hand
    sources_unfinished: list[str]  # originals of an ingest cut off before its document
    changed: bool
    unreadable: list[str]  # paths of the problems of kind unreadable
    # a stack in PostgreSQL only
    stack: NotRequired[str]
    resumed: NotRequired[bool]  # a cut-off sync was finished
    reconsolidated: NotRequired[list[str]]  # entities recomputed: "all", "canonical", "settings"
    taken_over: NotRequired[str | None]  # the folder whose rows the sync replaced


class DueSource(TypedDict):
    """A document a refresh looks at, or whose policy was set."""

    id: str
    path: str | None
    kind: NotRequired[str | None]  # web | arxiv | repo | file; None: nothing to re-read
    refresh: RefreshPolicy | None
    next_due: str | None  # UTC ISO; None when never fetched or without a policy


class RefreshChange(TypedDict):
    """A refreshed document whose content changed: a new version."""

    id: str  # the version that was current
    new: str  # the new version's id
    path: str
    drift: float | None


class DocRef(TypedDict):
    """A document by id and path (new files of a refreshed repository)."""

    id: str
    path: str


class RefreshRemoved(TypedDict):
    id: str
    path: str
    reason: str  # "deleted upstream"


class RefreshFailure(TypedDict):
    id: str  # a doc id, or the path or URL of what failed
    error: str
    retry_at: NotRequired[str]  # a document: when a due run tries it again (UTC ISO)


class RefreshSkip(TypedDict):
    id: str
    reason: str


class RefreshReportDict(TypedDict):
    """`refresh.RefreshReport.as_dict()`: what `ok refresh` did."""

    due: list[DueSource]  # what was looked at
    changed: list[RefreshChange]
    unchanged: list[str]
    added: list[DocRef]  # new files of a repository
    removed: list[RefreshRemoved]  # files deleted upstream
    failed: list[RefreshFailure]
    skipped: list[RefreshSkip]
    dry_run: bool


class DocVersion(TypedDict):
    """One version of a document in `ok store history`, newest first."""

    id: str
    current: bool
    path: str | None
    title: str
    sha256: str | None
    source: Source | None
    ingested_at: str | None
    fetched_at: str | None
    superseded_at: str | None
    superseded_by: str | None
    supersedes: str | None
    drift: float | None  # from the version before
    fetch: NotRequired[FetchInfo]


# -- the entity graph --------------------------------------------------------------------
class Entity(TypedDict):
    """An entity as the graph returns it (`graph.ENTITY_COLS`)."""

    id: str
    name: str
    type: str
    description: str
    confidence: float
    aliases: list[str]
    docs: list[str]  # ids of the documents and notes that name it
    verified: bool
    source_kind: str
    ext_id: str
    extra: str  # JSON of what an imported bundle said beyond the columns, or ""


class CountedEntity(Entity):
    """An entity with how many chunks and notes mention it."""

    mentions: int


class ConsolidatedEntity(Entity):
    """An entity as consolidation writes it (and the writer reads it back)."""

    canonical: bool  # a canonical file (backfeed, an imported bundle) contributes to it


class EntityView(TypedDict):
    """An entity as the readers show it (`ok graph entities`, pages, MCP)."""

    id: str
    name: str
    type: str
    description: str
    confidence: float
    verified: bool
    source_kind: str
    ext_id: NotRequired[str]  # only when it has one
    aliases: list[str]
    docs: list[str]
    # where `description` is said (None: nowhere); set by every reader the adapters call
    description_cite: NotRequired[DescriptionCite | None]
    # without a description, a sentence that only names the entity ("" when none), and its
    # citation (`descriptions.split`); set with description_cite
    mention: NotRequired[str]
    mention_cite: NotRequired[DescriptionCite | None]


class EntityListed(EntityView):
    """An entity in a listing, with its mention count."""

    mentions: int


class EntitySource(TypedDict):
    """A document, note or bundle document an entity came from."""

    id: str
    kind: str  # doc, memory, bundle or missing
    title: str
    path: str


class EntityDetail(EntityView):
    """`ok graph entity NAME`: the entity with its relationships, sources and evidence."""

    relationships: list[DirectedRelationship]
    sources: list[EntitySource]
    mentions: list[Cite]  # the chunks and notes that name it


class DescriptionCite(TypedDict):
    """Where an entity's description is said: a citation (`ok cite make`) of the span."""

    id: str  # c-<16 hex>
    ref: str  # <doc>#char<s>-<e>, a chunk id or a note id
    doc_id: str
    path: str
    loc: Loc
    quote: str


class Description(TypedDict):
    """An entity's description (`openkl.knowledge.descriptions`)."""

    text: str
    # defining | apposition | copula | heading | … (extracted), llm, compiled; a kind in
    # descriptions.MENTIONS (context, paragraph, …) only names the entity: a mention
    method: str
    cite: DescriptionCite


class Conflict(TypedDict):
    """Two statements about one entity that disagree (`ok mem conflicts`)."""

    entity: str
    kind: str  # number | negation (deterministic signals) | llm
    reason: str
    a: Cite  # a citation of each statement
    b: Cite


class Mention(TypedDict):
    """A chunk or note naming an entity, with the extractor's confidence."""

    id: str  # the chunk or note
    confidence: float


class RelationshipProps(TypedDict):
    """What a relationship holds besides its ends and type, as consolidation makes it."""

    confidence: float
    evidence: str  # the chunk or note id of its best mention, or a canonical item's text
    docs: list[str]
    verified: bool
    source_kind: str
    description: str
    ext_id: str
    extra: str


class StoredRelationship(TypedDict):
    """A relationship as the graph holds it, for the writer to compare with (`docs` as
    stored, see `graph.rel_docs_text`)."""

    a: str
    b: str
    type: str
    rid: Any  # the engine's edge id
    confidence: float
    evidence: str
    docs: str
    verified: bool
    source_kind: str
    description: str
    ext_id: str
    extra: str


class Relationship(TypedDict):
    """A relationship between two entities, with their names."""

    from_id: str
    from_name: str
    to_id: str
    to_name: str
    type: str
    confidence: float
    evidence: str
    docs: list[str]
    verified: bool
    source_kind: str
    description: str


class DirectedRelationship(Relationship):
    """A relationship seen from one of its entities: `out` when it is the `from` end."""

    direction: str


class RelatedPair(TypedDict):
    """One step of a walk over relationships: both ends and the relationship."""

    a: str
    an: str  # a's name
    b: str
    bn: str
    type: str
    confidence: float
    evidence: str


# one relationship followed by a walk, in the direction it was walked ("from" is a keyword)
Hop = TypedDict(
    "Hop",
    {
        "from": str,
        "from_id": str,
        "to": str,
        "to_id": str,
        "type": str,
        "direction": str,
        "confidence": float,
        "evidence": str,
    },
)


class Step(TypedDict):
    """An entity (or, walking links, a note or document) a walk reached, with the path
    that reached it."""

    entity: str  # its name (a note's or document's title)
    id: str
    depth: int
    via: Hop
    path: list[str]
    hops: list[Hop]
    kind: NotRequired[str]  # walking links: memory | doc


class WalkStart(TypedDict):
    """The note a walk over links starts from."""

    id: str
    name: str  # its title
    type: str  # note
    path: str


class Traversal(TypedDict):
    """`ok graph traverse`: the walk from an entity (over RELATED) or a note (over
    LINKS_TO)."""

    start: EntityView | WalkStart
    depth: int
    rel: str | None
    min_confidence: float
    steps: list[Step]
    truncated: bool


class GraphNode(TypedDict):
    """An entity in a neighbourhood, with the hops from the nearest seed."""

    id: str
    name: str
    type: str
    confidence: float
    depth: int
    docs: list[str]


class Neighbourhood(TypedDict):
    """`GET /v1/{stack}/neighbourhood`, `ok graph export --format html`: the entities within
    `depth` hops of the seeds and every relationship among them."""

    seeds: list[str]  # entity ids
    depth: int
    min_confidence: float
    types: list[str]  # only these entity types (empty: all)
    nodes: list[GraphNode]
    edges: list[ContextRelationship]
    capped: bool  # more entities were in reach than `limit`
    limit: int
    query: NotRequired[str | None]  # the query whose results it starts from (None: an entity)


class ExportedRelationship(TypedDict):
    """A relationship as an AKS export reads it."""

    a: str
    b: str
    type: str
    confidence: float
    description: str
    docs: list[str]
    verified: bool
    source_kind: str
    ext_id: str
    extra: str


class ExtractionKeys(TypedDict):
    """The entity keys and alias pairs ("short\\tlong") one extraction names."""

    keys: list[str] | None
    aliases: list[str] | None


class ExtractionIndexed(ExtractionKeys):
    """An extraction's id and owner with its keys, for deciding what to consolidate."""

    id: str
    owner: str
    base: int


class ExtractionData(TypedDict):
    """An extraction's stored result (JSON) with where its chunk or note starts."""

    id: str
    owner: str
    base: int
    data: str


class ExtractionInput(TypedDict):
    """A chunk or note to extract entities from."""

    id: str
    owner: str  # the document or note
    base: int  # where the text starts in its owner
    text: str


class PageBuilt(TypedDict):
    """An entity's page as built and cached (`ok graph page`)."""

    entity_name: str
    markdown: str
    generated_at: str
    source_entity_id: str
    entity_id: str
    graph_version: str
    source_type: str  # "compiled"
    render: str  # the renderer's version


class EntityPage(PageBuilt):
    """An entity's page as `pages.page` returns it."""

    cached: bool  # read from the cache rather than built


# -- answers: `ok ask` and `ok context` --------------------------------------------------
class AnswerConflict(TypedDict):
    """Passages an answer draws on that disagree (`statements.contradiction`)."""

    kind: str  # number (different numbers or dates) | negation
    reason: str  # "15 against 5"
    citations: list[int]  # the `n` of each side's citation


class AnswerBody(TypedDict):
    """An answer as the extractive or the LLM path makes it, before `ask.answer` adds the
    question and the count of passages retrieved."""

    answer: str  # the text, every [N] marker the `n` of one of the citations
    citations: list[Cite]  # each with `n`
    confidence: float  # 0..1, from the cited passages' similarity to the question
    confidence_label: str  # HIGH | MEDIUM | LOW
    insufficient: bool  # the folder does not hold enough to answer
    mode: str  # extractive | llm
    model: str | None  # the LLM's label; None when extractive
    ungrounded: NotRequired[bool]  # an LLM's answer that cites nothing (then always true)
    conflicts: NotRequired[list[AnswerConflict]]  # its passages disagree (it says so first)
    # the fallback model answered (llm.chat.fallback_model): why (weak evidence, a failure)
    fallback: NotRequired[str]


class Answer(AnswerBody):
    """`ok ask`: a question answered from the folder (`ask.answer`). The JSON has
    `question` first, then the body's keys, then `retrieved`."""

    question: str
    retrieved: int  # how many passages were retrieved
    warning: NotRequired[str]  # what retrieval left of a long question unread (`QueryUse`)


class ContextEntity(EntityView):
    """An entity `ok context` picked, with why."""

    score: float  # its ranking score (mentions by the passages, names in the query)
    why: list[str]  # "named in the query", "mentioned in <title>" (three at most)


class ContextRelationship(TypedDict):
    """A relationship between two picked entities (`GraphStore.relationships_among`)."""

    from_id: str
    from_name: str
    type: str
    to_id: str
    to_name: str
    confidence: float
    evidence: str


class ContextSource(TypedDict):
    """A passage `ok context` retrieved: the parts of its search hit that it shows."""

    type: str
    id: str
    path: str
    title: str
    loc: Loc
    quote: str
    score: NotRequired[float]


class ContextLink(TypedDict):
    """A note linked to or from a note among the sources (`[[…]]`, `ok context`)."""

    id: str
    path: str
    title: str
    via: str  # the source note it is linked to or from
    direction: str  # out: `via` links to it; in: it links to `via`
    line: int  # of the link, in the file of the note it stands in


class Context(TypedDict):
    """`ok context QUERY`: the entity subgraph relevant to a query (`context.context`)."""

    query: str
    entities: list[ContextEntity]  # best first
    relationships: list[ContextRelationship]  # among `entities`, most confident first
    sources: list[ContextSource]
    linked_notes: list[ContextLink]  # notes linked to or from the source notes, not sources
    reasoning: str
    confidence: str  # HIGH | MEDIUM | LOW, from `confidence_score`
    confidence_score: float  # 0..1: how often, on held-out questions, evidence this strong
    # held the answer (`context.CALIBRATION`)
    support: ContextSupport  # what the score is made of
    method: str  # ranked | llm
    warnings: list[str]  # e.g. the LLM failed and the ranking was used


class ContextSupport(TypedDict):
    """How well `ok context`'s best passages answer the query."""

    similarity: float  # the best cosine similarity of a sentence of the top passages
    coverage: float  # the largest share of the query's words one such sentence holds
    typed: float  # 1 when one holds the kind of thing asked for (a year for "when"; always
    # 1 when the question asks for no kind), else 0


# -- status and lineage ------------------------------------------------------------------
class ExtractorMismatch(TypedDict):
    """The graph's entities came from another extractor than the configured one."""

    graph: str  # the extractor id the graph is stamped with
    config: str  # the configured one


class Status(TypedDict):
    """`ok status` (`indexer.status`): counts and staleness. When the graph cannot be
    opened only `root`, `error`, `in_sync` (false) and `lock` are there."""

    root: str
    counts: NotRequired[dict[str, int]]  # by node label: Doc, Chunk, MemoryNote, Entity, Topic
    embedder: NotRequired[str | None]  # the graph's embedder stamp
    inference: NotRequired[str]  # always there: the models the folder's settings name, in
    # a line (`ops.inference`): embeddings, chat, extraction, rerank
    stale: NotRequired[dict[str, list[Any]]]  # the non-empty docs_*, notes_*, incomplete and
    # recovered parts of what `ok sync` would do (`SyncReportDict`)
    problems: NotRequired[list[SyncProblem]]
    unreadable: NotRequired[list[str]]
    error: NotRequired[str]  # why the graph could not be read
    in_sync: NotRequired[bool]  # always there
    extractor_mismatch: NotRequired[ExtractorMismatch | None]
    lock: NotRequired[dict[str, Any] | None]  # always there: the writer lock's holder (its
    # lock file: pid, what, …), None when free
    server: NotRequired[dict[str, Any] | None]  # always there: the `ok serve` that owns the
    # folder (.ok/serve.json: pid, boot_id, started, url, since, socket), None when none does
    exec_waiting: NotRequired[list[ExecWaiting]]  # trigger commands waiting for approval here
    # in a process that watches the folder (`ok serve`, so a routed `ok status` too): how
    # its watch is doing
    watch: NotRequired[WatchState]


class WatchState(TypedDict):
    """How a folder's watch is doing (`ok serve`, `ok sync --watch`): `failing` is None
    while it is well, else what fails (`watch`: watching the files, `sync`: the syncs after
    changes), with the last `error`, `since` when (UTC ISO), the `failures` of its streak
    (failures close together, each waiting twice as long as the one before) and the
    seconds until it tries again (`retry_in`)."""

    failing: str | None
    error: str | None
    since: str | None
    failures: int
    retry_in: float


class LineageNode(TypedDict):
    """A note, chunk or document in a lineage walk. Which of `path` and `doc` it has
    depends on its kind; one that is not in the graph has only `id`, `kind` and `missing`."""

    id: str
    kind: str  # memory | chunk | doc
    path: NotRequired[str]  # a note or a document
    doc: NotRequired[str]  # a chunk: its document's id
    title: NotRequired[str]
    current: NotRequired[bool]  # false for a retired version (and its chunks)
    missing: NotRequired[bool]  # named, but not in the graph


class LineageStep(LineageNode):
    """A node a lineage walk reached."""

    depth: int  # hops from the root
    via: str  # the id of the node it was reached from
    rel: str  # DERIVED_FROM | PART_OF | SUPERSEDES | SUPERSEDED_BY | DERIVED_BY


# one edge of a lineage walk, between node ids ("from" is a keyword, hence the functional form)
LineageEdge = TypedDict("LineageEdge", {"from": str, "rel": str, "to": str})


class Lineage(TypedDict):
    """`ok graph lineage REF` (`lineage.lineage`)."""

    root: LineageNode
    nodes: list[LineageStep]  # breadth first
    edges: list[LineageEdge]  # every edge walked, also those to nodes already seen


# -- events and triggers -----------------------------------------------------------------
class Event(TypedDict):
    """One line of the event log (`events/YYYY-MM.jsonl`, `ok events`): `id`, `ts` and
    `type` first, then the fields of its type (those that were None are left out). The
    fields named here are the ones the readers look at; each type has more."""

    id: str  # ev-<UTC yyyymmddHHMMSS>-<8 hex of the event's JSON>
    ts: str  # when (UTC ISO)
    type: str  # ingested | drifted | refreshed | refresh_failed | removed | mem_added | …
    doc: NotRequired[str]  # the document it is about (the subject fields: `--doc` matches
    # them, see `events.SUBJECT_FIELDS`)
    previous: NotRequired[str]  # a new version: the id of the one it replaced
    new: NotRequired[str]  # a drift: the new version's id
    note: NotRequired[str]  # the note it is about
    item: NotRequired[str]  # trigger_fired: the chunk or note that fired it
    doc_id: NotRequired[str]
    path: NotRequired[str]
    trigger: NotRequired[str]  # trigger_fired, trigger_exec_failed: the trigger's name
    kind: NotRequired[str]  # trigger_fired: chunk | memory
    sha256: NotRequired[str]  # trigger_fired by a note: the note version's text hash


class TriggerDict(TypedDict):
    """A trigger as `ok trigger list --json` shows it (`triggers.Trigger.as_dict`)."""

    name: str
    example: str  # the text whose neighbours fire it
    threshold: float  # the cosine similarity at or above which it fires
    scope: str  # all | store | mem
    exec: str | None  # a shell command run with the event JSON on stdin
    env: list[str]  # variables passed on to `exec`
    timeout: float  # seconds `exec` may run
    created_at: str


class ExecWaiting(TypedDict):
    """A trigger whose command waits for approval on this machine (`ok status`, `ok doctor`)."""

    name: str
    exec: str  # the command, as it would run
    env: list[str]  # the variables it would be given
    approve: str  # the command that approves it: `ok trigger approve NAME`


class TriggerTest(TypedDict):
    """How close a text is to one trigger (`ok trigger test`)."""

    name: str
    similarity: float
    threshold: float
    fires: bool
    scope: str


class TriggerScan(TypedDict):
    """What `ok trigger scan` checked and fired."""

    triggers: list[str]  # the triggers checked
    docs: int  # current documents checked
    notes: int  # live notes checked
    fired: list[Event]  # the `trigger_fired` events it appended (none for what fired before)


class TriggerMatch(TypedDict):
    """What a trigger matched after an index write: one per trigger and document (its best
    chunk) or note version; a `trigger_fired` event holds it."""

    trigger: str
    threshold: float
    similarity: float  # of the best matching chunk
    kind: str  # chunk | memory
    item: str  # the chunk or note id
    path: str
    quote: str  # the start of its text (`triggers.QUOTE_CHARS`)
    doc: NotRequired[str]  # a chunk: its document
    note: NotRequired[str]  # a note: its id
    sha256: NotRequired[str]  # a note: its text's hash (it fires again when that changes)
    matches: NotRequired[int]  # always there, last: how many chunks of the document matched
    exec_waiting: NotRequired[str]  # why the trigger's command did not run: not approved here


class TriggerFired(TriggerMatch):
    """A `trigger_fired` event: a match with the event's `id`, `ts` and `type` before it."""

    id: str
    ts: str
    type: str


# -- backfeed and the canonical contributions --------------------------------------------
class ProposedEntity(TypedDict):
    """An entity a backfeed item proposes (`backfeed.parse` has checked it)."""

    name: str
    type: str  # "Concept" when none was given
    description: NotRequired[str]
    confidence: NotRequired[float]
    aliases: NotRequired[list[str]]
    properties: NotRequired[dict[str, Any]]  # free-form, kept as given


# a relationship a backfeed item proposes, between entity names ("from" is a keyword, hence
# the functional form)
ProposedRelationship = TypedDict(
    "ProposedRelationship",
    {
        "from": str,
        "to": str,
        "type": str,
        "confidence": NotRequired[float],
        "description": NotRequired[str],
    },
)


class BackfeedProposal(TypedDict):
    """What a backfeed item proposes (`backfeed.parse`); its id is the hash of the
    entities and relationships."""

    entities: list[ProposedEntity]
    relationships: list[ProposedRelationship]
    content: str  # the text it came from, or ""
    origin: str  # run | direct
    flagged_by: str | None
    source_run_id: str | None


class EditCaller(TypedDict):
    """Who queued or decided a backfeed item, and through what."""

    via: str  # cli | http | mcp
    # the OS user (the CLI, MCP over stdio), or the HTTP caller (MCP over HTTP too):
    # key:STACK/NAME, jwt:SUBJECT, or local (a server without credentials)
    by: str
    key_id: NotRequired[str]  # the API key's id (k…), when a key made the call


class Provenance(EditCaller):
    """Where a backfeed item came from: who queued it, when, and on what evidence."""

    at: str  # when it was queued (ISO)
    sources: list[EntitySource]  # the documents and notes it rests on (checked to exist)


class BackfeedItem(BackfeedProposal):
    """A backfeed item, `aks/backfeed/<id>.json` (`ok backfeed …`). Its JSON has these keys
    first, then the proposal's (the file itself is written with sorted keys)."""

    id: str  # bf-<12 hex>
    status: str  # pending | approved | rejected
    created_at: str
    decided_at: str | None
    reason: str | None  # a rejection's reason (or an approval's, when one was given)
    provenance: NotRequired[Provenance]  # who queued it (items queued by a known caller)
    decided_by: NotRequired[EditCaller]  # who approved or rejected it, when known


class FlaggedBackfeedItem(BackfeedItem):
    """`ok backfeed flag`: the item, and whether this call queued it."""

    created: bool  # false when the same proposal was queued before


class GraphEdit(FlaggedBackfeedItem):
    """`ok graph add entity|relation` (`POST /v1/{stack}/entities`, `/relationships`, MCP
    `graph_add_entity`, `graph_add_relationship`): the backfeed item that holds the edit,
    pending review or approved (then part of the graph, and of every rebuild)."""

    unknown: list[str]  # relationship ends no entity has yet (only a pending item may)


class CanonicalEntity(TypedDict):
    """An entity a canonical file (an approved backfeed item, an imported AKS bundle)
    contributes to consolidation (`backfeed.contributions`, `aks.contributions`)."""

    key: str  # the entity key (`entities.local.key_of` of the name)
    name: str
    type: str
    description: str
    confidence: float | None  # None: the default for canonical items (0.9)
    verified: bool
    source_kind: str  # backfeed, or what the bundle says (document by default)
    aliases: list[str]
    alias_keys: list[str]
    ext_id: NotRequired[str]  # a bundle's entity id
    extra: dict[str, Any]  # what the file says beyond the columns (properties, source, …)
    origin: str  # the backfeed item's id or the bundle's file name
    docs: list[str]  # a bundle's documents, as aks:<uuid>


class CanonicalRelation(TypedDict):
    """A relationship a canonical file contributes to consolidation, between entity keys."""

    src: str
    dst: str
    type: str
    confidence: float | None  # None: the default for canonical items (0.9)
    verified: bool
    source_kind: str
    description: str
    ext_id: NotRequired[str]  # a bundle's relationship id
    extra: NotRequired[dict[str, Any]]  # a bundle's `source`
    evidence: str  # the backfeed item's id or the bundle's file name
    docs: list[str]


# -- distillation ------------------------------------------------------------------------
class DistillRun(TypedDict):
    """`ok distill run` (`distill.run`): a memory note distilled by the LLM from what a
    search found, or why there is none."""

    prompt: str  # the distillation prompt's name
    query: str
    model: str  # the LLM's label
    note: dict[str, Any] | None  # the note as `ok mem show` has it (`Note.as_dict`: its
    # frontmatter is free-form); None when nothing was distilled
    citations: list[Cite]  # the cite objects of its [N] markers, each with `n`
    reason: NotRequired[str]  # why nothing was distilled


# -- AKS bundles -------------------------------------------------------------------------
# An AKS bundle (openkl/data/aks-schema.json) as `ok graph export` writes it and `ok bundle
# import` keeps it; an imported bundle has been validated against the schema, and what the
# schema allows beyond these keys (connectors, runs, audits…) is kept as given.
class AksSource(TypedDict, total=False):
    """Where an entity or relationship of a bundle came from."""

    document_id: str | None  # the first contributing document's uuid
    connector_id: str | None
    source_kind: str  # document | backfeed | manual …
    extracted_at: str | None
    model: str  # the extractor's id
    verified: bool
    pipeline: str  # openkl-entities | backfeed


class AksDocument(TypedDict):
    """A document a bundle lists."""

    id: str  # a uuid
    filename: str
    ingested_at: str
    source_hash: NotRequired[str | None]
    truncated: NotRequired[bool]
    original_length: NotRequired[int]
    audit: NotRequired[dict[str, Any]]


class ImportedDocument(AksDocument):
    """A document listed by an imported bundle (`aks.imported_documents`)."""

    bundle: str  # the bundle's file, aks/imports/<name>.json


class AksEntity(TypedDict):
    """An entity of a bundle."""

    id: str  # a uuid: the entity's `ext_id`, or one derived from its id
    name: str
    type: str
    description: NotRequired[str | None]
    properties: NotRequired[dict[str, Any]]  # free-form; `aliases` is openkl's
    confidence: float
    contributing_documents: NotRequired[list[str]]  # document uuids
    last_seen_at: NotRequired[str | None]
    source: NotRequired[AksSource]


class AksRelationship(TypedDict):
    """A relationship of a bundle, between entity uuids."""

    id: str
    from_entity_id: str
    to_entity_id: str
    type: str
    description: NotRequired[str | None]
    confidence: float
    source: NotRequired[AksSource]


class AksFilters(TypedDict):
    """The filters an export applied (`filters_applied`)."""

    min_confidence: float | None
    verified_only: bool | None  # None when false
    entity_type: str | None
    max_entities: int | None


class AksBundle(TypedDict):
    """An AKS bundle (`aks.export`, `aks.load_bundle`)."""

    aks_version: str
    domain: str
    stack_id: str  # a uuid derived from the domain
    stack_name: str
    compiled_at: str
    scope: str  # "stack"
    entity_count: int
    relationship_count: int
    document_count: NotRequired[int | None]
    compilation_strategy: NotRequired[str | None]
    documents: NotRequired[list[AksDocument]]
    entities: list[AksEntity]
    relationships: list[AksRelationship]
    filters_applied: NotRequired[AksFilters | None]


class BundleKept(TypedDict):
    """`ok bundle import`: the bundle kept under aks/imports/ (`aks.keep_bundle`)."""

    path: str  # aks/imports/<domain>-<stack id's first 8>.json
    domain: str
    stack_id: str
    entities: int
    relationships: int  # those kept
    dropped_relationships: int  # whose ends are not in the bundle
    documents: int


class BundleCheck(TypedDict):
    """`ok bundle validate`: a bundle that passed the schema, and its counts."""

    valid: bool  # always true (a failing bundle is an error)
    entities: int
    relationships: int


class ExportWritten(TypedDict):
    """`ok graph export -o …`: the files written (`ops.GraphExport.as_dict`)."""

    format: str  # aks | graphml | csv
    files: list[str]  # the paths written
    entities: int
    relationships: int


class ExportContent(TypedDict):
    """`ok graph export --json` to stdout: the files themselves (`ops.GraphExport.content`)."""

    format: str
    entities: int
    relationships: int
    content: dict[str, str]  # file name → its text
    rows: NotRequired[dict[str, list[dict[str, str]]]]  # csv: each table's rows, by table


# -- the folder: init and doctor ---------------------------------------------------------
class FolderInitialized(TypedDict):
    """`ok init`: the knowledge folder, and whether this call made it."""

    root: str
    created: bool  # false when it was there already


class Check(TypedDict):
    """One check of `ok doctor`."""

    check: str  # what was checked: folder, index, embedding model, ripgrep, …
    ok: bool
    detail: str  # what was found
    fix: str  # how to fix it, or ""
    # a broken `[[link]]` (check "link"): where it stands and its text between the brackets
    path: NotRequired[str]
    line: NotRequired[int]
    link: NotRequired[str]


# -- files: grep, listings and pages -----------------------------------------------------
class GrepMatch(TypedDict):
    """A line `ok grep` (or MCP `grep`) matched: the first match on it."""

    path: str  # relative to the folder's root
    line: int  # 1-based
    column: int  # 1-based, in characters
    text: str  # the whole line
    match: str  # the text that matched
    # with context asked for (-A/-B/-C, MCP before/after/context): the lines around it,
    # nearest last in `before`, nearest first in `after`; both there, maybe empty
    before: NotRequired[list[GrepLine]]
    after: NotRequired[list[GrepLine]]


class GrepLine(TypedDict):
    """A line of context around a grep match."""

    line: int  # 1-based
    text: str


class DirEntry(TypedDict):
    """An entry of a directory inside the folder (MCP `fs_list`)."""

    name: str
    path: str  # relative to the folder's root
    problem: NotRequired[str]  # a name that is not UTF-8: shown escaped, and why
    type: NotRequired[str]  # always there: file | dir | link | link-outside
    target: NotRequired[str]  # a link inside the folder: where it points
    size: NotRequired[int]  # a file: its size in bytes


class PagesWritten(TypedDict):
    """`ok graph page --all`: every entity's page written under graph/pages/."""

    dir: str  # relative to the folder's root
    pages: int
    regenerated: int  # built anew
    cached: int  # taken from the cache
    removed: int  # pages of an earlier run whose entity is gone or now below the floor


# -- rows the graph's named queries return -----------------------------------------------
# (columns as the queries name them; a text column the engine may hold as NULL is `| None`)
class NoteNode(TypedDict):
    """A note as a lineage walk reads it (`lineage_note`)."""

    path: str
    text: str | None


class ChunkNode(TypedDict):
    """A chunk as a lineage walk reads it (`lineage_chunk`)."""

    doc: str  # its document's id
    current: bool
    text: str | None


class DescribedEntity(TypedDict):
    """One entity's description as synthesized (None: its evidence defines nothing)."""

    id: str
    name: str
    description: Description | None
    mention: Description | None  # without a description, a sentence that only names it


class DescribedOne(DescribedEntity):
    """`POST /aks/v1/entities/{name}/synthesize-description`: one entity's, and by whom."""

    describer: str  # local | llm


class DescriptionsMade(TypedDict):
    """What a description synthesis did (`POST /stacks/{id}/synthesize-descriptions`)."""

    describer: str  # local | llm
    entities: int
    described: int  # how many got a description
    mentioned: int  # how many got only a mention
    results: list[DescribedEntity]


class DocCompiled(TypedDict):
    """What a document compiled into (`POST /stacks/{id}/documents/{doc}/ingest`)."""

    id: str
    path: str
    status: str  # compiled | empty (no text to chunk)
    chunks: int
    entities: int  # the entities its chunks mention, at least entities.min_confidence
    relationships: int  # the relationships among those entities


class DocNode(TypedDict):
    """A document as a lineage walk reads it (`lineage_doc`)."""

    path: str
    title: str
    current: bool


class WalkedNode(TypedDict):
    """A node a lineage walk reached (`lineage_walk`), as the graph holds it."""

    kind: str  # memory | chunk | doc
    id: str
    depth: int  # hops from the start
    via: str  # the id of the node it was reached from
    rel: str  # the relationship it was reached by
    row: NoteNode | ChunkNode | DocNode | None  # None: named, but not in the graph


class LineageWalk(TypedDict):
    """A breadth-first lineage walk (`lineage_walk`): the nodes in the order reached, and
    every edge walked (also those to nodes already reached)."""

    nodes: list[WalkedNode]
    edges: list[LineageEdge]


class LinkEdge(TypedDict):
    """A `[[…]]` link in a note, as the graph holds it (`LINKS_TO`)."""

    src: str  # the note the link is in
    kind: str  # memory | doc: what it points to
    dst: str  # the note's or document's id
    text: str  # the target as written, without `#heading` and `|alias`
    heading: str  # after `#`, or ""
    alias: str  # after `|`, or ""
    line: int  # in the file of the note the link is in, from 1


class NoteRefsRow(TypedDict):
    """A note's titles and links as JSON lists (`NoteRefs`), kept to derive its edges."""

    id: str
    titles: str  # ["Title", …]
    links: str  # [[raw, target, heading, alias, line], …]


class NoteTime(TypedDict):
    """A note's id and `ts`."""

    id: str
    ts: str


class LinkEnd(TypedDict):
    """A note or document at the end of a link, as the readers name it."""

    kind: str  # memory | doc
    id: str
    path: str
    title: str


class NoteLink(TypedDict):
    """A `[[…]]` link as a note's file has it, with what it points to (`ok mem show`)."""

    target: str
    heading: str
    alias: str
    line: int
    to: LinkEnd | None  # None: it matches no note or document


Backlink = TypedDict(
    "Backlink",
    {"from": str, "path": str, "title": str, "line": int, "target": str},
)
"""A link in another note that points to this one: its note, where it stands, as written."""


class NoteLinks(TypedDict):
    """A note's links and backlinks."""

    links: list[NoteLink]
    backlinks: list[Backlink]


class ChunkVector(TypedDict):
    """A current chunk with its vector (`current_chunks_of`), for the triggers."""

    id: str
    doc: str
    text: str
    vec: list[float]


class NoteVector(TypedDict):
    """A note with its vector (`notes_with_vectors`), for the triggers."""

    id: str
    path: str
    sha: str  # the note text's sha256
    text: str
    vec: list[float]


class DocSummary(TypedDict):
    """A document, as an AKS export lists it (`doc_summaries`)."""

    id: str
    path: str
    title: str
    sha: str
    created_at: str


class NoteSummary(TypedDict):
    """A note, as an AKS export lists it (`note_summaries`)."""

    id: str
    path: str
    sha: str
    ts: str


class MentionedIn(TypedDict):
    """An entity a chunk or note mentions (`mentions_in`)."""

    x: str  # the chunk or note
    e: str  # the entity
    c: float  # the mention's confidence


class SourceDoc(TypedDict):
    """A document an entity came from (`source_docs`)."""

    id: str
    title: str
    path: str
    source: str  # the mapping's source, as JSON text


class SourceNote(TypedDict):
    """A note an entity came from (`source_notes`)."""

    id: str
    path: str
    text: str


class SourceVersion(TypedDict):
    """A document version whose text an entity's evidence is read from (`source_versions`)."""

    id: str
    sha: str
    path: str
    title: str


class DocIndexed(TypedDict):
    """A document the graph holds, as `ok sync` compares it with the files (`docs`)."""

    id: str
    path: str
    sha256: str
    current: bool


class NoteIndexed(TypedDict):
    """A note the graph holds, as `ok sync` compares it with the files (`notes`)."""

    id: str
    path: str
    sha256: str


class ChunkRow(TypedDict):
    """A chunk with its document's fields (`chunks_by_id`), for a search hit."""

    id: str
    doc_id: str
    text: str
    start: int  # the chunk's span in its document's text
    end: int
    path: str  # the document's
    sha256: str
    source: str  # the mapping's source, as JSON text
    created_at: str
    title: str


class NoteRow(TypedDict):
    """A note as the graph holds it (`notes_by_id`), for a search hit."""

    id: str
    path: str
    sha256: str
    text: str
    ts: str
    tags: list[str]
    topics: list[str]
    body_start: int  # where the body starts in the note's file
    body_end: int
    # when it leaves search (ISO, "" never), the notes it replaces and the notes it was
    # distilled from: loaded with the note, not read back by `notes_by_id`
    expires: NotRequired[str]
    supersedes: NotRequired[list[str]]
    derived_notes: NotRequired[list[str]]


# -- rows the indexer loads into the graph -----------------------------------------------
class DocInput(TypedDict):
    """A document as `indexer.build_doc_rows` makes it for `add_docs`."""

    id: str
    path: str  # the normalized text, relative to the folder's root
    sha256: str  # of that text
    title: str
    source: str  # the mapping entry's source, as JSON text (sorted keys)
    created_at: str  # when it was stored, or ""
    chars: int  # the text's length
    current: bool


class ChunkInput(TypedDict):
    """A chunk as `indexer.build_doc_rows` makes it for `add_docs`."""

    id: str  # <doc id>#char<start>-<end>
    doc_id: str
    text: str
    # what the chunk is part of (`chunking.context_header`), indexed with its text
    header: NotRequired[str]
    start: int
    end: int
    ord: int  # its place among the document's chunks
    current: NotRequired[bool]  # absent means true


# -- settings ----------------------------------------------------------------------------
class SettingValue(TypedDict):
    """A setting's effective value and where it came from (`ok config list/get/set`)."""

    key: str  # dotted, e.g. search.k (an env-only variable: its name)
    value: Any
    source: str  # default | config | env
    type: str
    default: Any
    env: str  # the environment variable that overrides it
    help: str
    choices: NotRequired[list[str]]  # when only these values are allowed
    env_only: NotRequired[bool]  # read from the environment only (then always true)


# -- the HTTP API's answers (openkl.server) -----------------------------------------------
class Health(TypedDict):
    """`GET /health`: the process is up."""

    status: str  # ok
    version: str


class Ready(TypedDict):
    """`GET /ready`: every stack is open and its watch keeps up."""

    status: str  # ready
    stacks: list[str]


class StackRow(TypedDict):
    """A served stack, with what it says about itself and its counts."""

    name: str
    root: str  # its folder (relative to nothing: to a caller with credentials, the name)
    description: str | None
    metadata: dict[str, Any]
    docs: int
    chunks: int
    notes: int
    entities: int
    id: NotRequired[str]  # the AKS reference server's paths: the name again
    created: NotRequired[bool]  # just made


class StackDropped(TypedDict):
    """A stack no longer served; its files stay."""

    name: str
    root: str
    served: bool  # false
    files_deleted: bool  # false
    message: str
    id: NotRequired[str]


class NoteDict(TypedDict):
    """A note as `ok mem show --json` and the notes routes have it: its frontmatter's other
    keys follow these (`supersedes`, `expires`, `updated`, …, and any a user wrote)."""

    id: str
    ts: str
    tags: list[str]
    topics: list[str]
    text: str
    path: NotRequired[str]  # folder-relative
    supersedes: NotRequired[list[str]]
    expires: NotRequired[str]
    updated: NotRequired[str]


class NoteDeleted(TypedDict):
    """A note taken out of search: archived (restorable) unless purged."""

    deleted: str  # its id
    purged: bool
    archived: str | None  # where its file is now, folder-relative


class DistilledNote(NoteDict):
    """A distilled note, with the citations its [N] markers name."""

    citations: list[Cite]  # each with its `n`


class DistillPrompt(TypedDict):
    """A distillation prompt: its name, what it is for, and its instructions."""

    name: str
    title: str
    description: str
    prompt: str


class SearchAnswer(TypedDict):
    """`GET /v1/{stack}/search`: the hits, best first, and what to know of them."""

    stack: str
    query: str
    hits: list[Cite]
    warning: NotRequired[str]
    no_good_match: NotRequired[bool]  # nothing came near the query
    best_score: NotRequired[float | None]  # then: the best passage's similarity


class CitationsListed(TypedDict):
    """Persisted citations, and the files under citations/ that could not be read."""

    citations: list[Cite]
    problems: list[FileProblem]


class CitationsVerified(TypedDict):
    """Each citation's verification result, in the order asked; `ok`: all passed."""

    ok: bool
    results: list[CiteStatus]


class TriggersListed(TypedDict):
    """A folder's triggers, and the trigger files that could not be read."""

    triggers: list[TriggerDict]
    problems: list[str]


class TriggerRemoved(TypedDict):
    removed: str  # the trigger's name


# records whose keys go beyond those named (an event's type adds its own; a note's
# frontmatter may hold any): their schema says so
for _open in (Event, NoteDict):
    setattr(_open, "__pydantic_config__", {"extra": "allow"})  # noqa: B010
