"""`ok mcp`: the knowledge folder as an MCP server for agents (stdio, official `mcp` SDK).

One server serves one or more folders ("stacks", named by their config `domain`). Every tool
calls the same library functions as the CLI, and opens the graph for the length of one call
only: Kùzu lets one read-write opener lock out every other process, so a server that kept the
database open would stop `ok mem add` or `ok store ingest` in a shell. What stays warm is the
embedding model (`embedder_for` caches it per process), which is the slow part of a query.

Every tool is capped: results per call (`mcp.max_k`), bytes per result (`mcp.max_bytes`;
longer results are cut and say so in `truncated`/`marker`), and seconds per call
(`mcp.timeout`, per tool in `mcp.timeouts`; a call over its cap returns an error and its
graph query is interrupted). Write tools take the folder's writer lock like the CLI does, and
`--read-only` (or `mcp.read_only`) leaves them out.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from .. import ops, settings
from ..errors import (
    BadInput,
    Duplicate,
    NotFound,
    OkError,
    ReadOnlyViolation,
    UsageError,
    disk_full,
)
from ..files import notes as notes_mod
from ..files.folder import MAX_PATH, Folder, open_folder, shown, stacks_of
from ..ops import safe_path
from ..records import EditCaller
from ..sync import indexer

SERVER_NAME = "openkl"
MARKER = (
    "[truncated: {shown} of {total} {what} shown; the result exceeded the {cap}-byte cap "
    "(mcp.max_bytes){hint}]"
)

# what a tool does (`settings.McpTool.does`) that a read-only server leaves out
WRITES = ("add", "write")

GREP_CONTEXT_MAX = 20  # lines of context a sh_grep match may carry each side

# over streamable HTTP (`ok serve`), who is calling the tool running now: the server's
# `Caller` of the request (its `who`, `key_id`, `allows`); None over stdio
http_caller: contextvars.ContextVar[Any] = contextvars.ContextVar("http_caller", default=None)

# arguments many tools share (the JSON schema an agent sees comes from these)
StackArg = Annotated[
    str | None, Field(description="Stack name from list_stacks (default: the first stack).")
]
ScopeArg = Annotated[
    Literal["all", "mem", "store"],
    Field(description="Where to look: all, mem (memory notes) or store (documents)."),
]
RecencyArg = Annotated[
    str | None,
    Field(
        description="Favour newer items: a half-life such as 90d, 12h or 2w, or off "
        "(default search.recency, off)."
    ),
]
IncludeSupersededArg = Annotated[
    bool,
    Field(description="Also notes that a newer note supersedes (left out by default)."),
]
SinceArg = Annotated[
    str | None,
    Field(
        description="Only items dated on/after: ISO date/time (2026-01-31, 2026-01-31T08:00:00Z) "
        "or a span back from now (30m, 12h, 7d, 2w)."
    ),
]
DriftPenaltyArg = Annotated[
    float | None,
    Field(
        ge=0,
        le=10,
        description="Hold back documents whose latest version drifted from the one it "
        "replaced: each score times 1 - weight * drift (0: off; default "
        "search.drift_penalty, off).",
    ),
]
WhereArg = Annotated[
    list[str] | None,
    Field(
        description="Conditions on the frontmatter of each hit's file, all of which must hold: "
        "key=value (a list contains it), key!=value, key>=2026-01-01 or a number, key<…, or a "
        "bare key (it is set); dates and numbers compare as such."
    ),
]
UntilArg = Annotated[
    str | None,
    Field(
        description="Only items dated on/before (a bare date includes that day; same forms as since)."
    ),
]

SourcesField = Field(
    description="Documents (id, prefix or path) and memory notes (id) it rests on; each must "
    "be in the folder. Kept as its provenance and shown as its sources."
)
ApproveField = Field(
    description="Approve it at once (in the graph now) instead of leaving it for a person to "
    "review; over HTTP this needs the admin scope."
)

INSTRUCTIONS = """\
openkl knowledge folders: memory notes and collected documents, searchable and citable.
A good loop: `search` (or `sh_grep` for exact strings) → read what matters (`fs_read`, or the
ok:// resources) → `cite_make` for the passages you rely on → `distill_create` a note whose
claims cite them [N] (a distillation prompt says how), `mem_add` what you learned, or `ask`
for a cited answer. Every search hit is a cite object (type, id, path, loc, quote) that
`cite_verify` can check later. Results are capped; narrow the query or page with offsets.
Use `list_stacks` to see the folders served; pass `stack` to pick one (default: the first)."""


@dataclass
class Stack:
    """One served knowledge folder."""

    name: str
    folder: Folder
    # one graph opener at a time per folder in this process (Kùzu's file lock is per process)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def timeout(self, tool: str) -> float:
        """The tool's time cap: `mcp.timeouts.<tool>`, else `mcp.timeout`."""
        per = self.folder.setting(f"mcp.timeouts.{tool}")
        return float(per if per is not None else self.folder.setting("mcp.timeout"))


class ToolTimeout(OkError):
    """A tool ran past its time cap."""


def _json_size(data: Any) -> int:
    return len(json.dumps(data, ensure_ascii=False, default=str).encode("utf-8"))


def limit(result: dict[str, Any], cap: int) -> dict[str, Any]:
    """Cut a result to `cap` bytes of JSON, saying so: list results lose items from the end,
    text results lose text from the end; both keep valid JSON."""
    if _json_size(result) <= cap:
        return result
    out = dict(result)
    lists = [k for k, v in out.items() if isinstance(v, list) and v]
    if lists:
        totals = {k: len(out[k]) for k in lists}

        def mark() -> None:
            cut = [k for k in lists if len(out[k]) < totals[k]]
            out["truncated"] = True
            out["marker"] = MARKER.format(
                shown=", ".join(f"{len(out[k])}" for k in cut),
                total=", ".join(f"{totals[k]}" for k in cut),
                what=", ".join(cut),
                cap=cap,
                hint="; ask for fewer (k) or narrow the query",
            )

        while _json_size(out) > cap and any(out[k] for k in lists):
            # shorten the biggest list by a tenth (at least one item), from the end
            k = max((k for k in lists if out[k]), key=lambda k: _json_size(out[k]))
            out[k] = out[k][: len(out[k]) - max(1, len(out[k]) // 10)]
            mark()
        if _json_size(out) <= cap:
            return out
    if isinstance(out.get("text"), str):
        raw = out["text"].encode("utf-8")
        marker = MARKER.format(shown=len(raw), total=len(raw), what="bytes", cap=cap, hint="")
        out.update({"text": "", "truncated": True, "marker": marker})
        room = cap - _json_size(out) - len(marker) - 8
        cut = raw[: max(0, room)].decode("utf-8", errors="ignore")
        # JSON escapes can make text longer than its bytes; shrink until it fits
        while cut and _json_size({**out, "text": cut + "\n" + marker}) > cap:
            cut = cut[: int(len(cut) * 0.9)]
        out["marker"] = MARKER.format(
            shown=len(cut.encode("utf-8")), total=len(raw), what="bytes", cap=cap, hint=""
        )
        out["text"] = cut + "\n" + out["marker"]
        return out
    text = json.dumps(result, ensure_ascii=False, default=str)
    cut = text.encode("utf-8")[: max(0, cap - 300)].decode("utf-8", errors="ignore")
    return {
        "truncated": True,
        "partial_json": cut,
        "marker": MARKER.format(
            shown=len(cut.encode()), total=len(text.encode()), what="bytes", cap=cap, hint=""
        ),
    }


# what a single string argument may hold: names and ids are short, paths at most PATH_MAX
MAX_ARG = MAX_PATH


def check_args(args: dict[str, Any]) -> None:
    """Refuse arguments no tool can use (NUL bytes, ids and paths past any file system's
    limits) with one line naming the argument, before any work is done.

    Only the arguments themselves, the items of list arguments and the path/id fields of
    cite objects are looked at: a cite object's quote may be a whole document.
    """

    def check(name: str, value: Any) -> None:
        if not isinstance(value, str):
            return
        if "\x00" in value:
            raise BadInput(
                f"`{name}` contains a NUL byte", "pass text, ids and paths without \\x00"
            )
        if name.split("[")[0] not in FREE_TEXT and len(value) > MAX_ARG:
            raise BadInput(
                f"`{name}` is {len(value)} characters long; at most {MAX_ARG} are accepted",
                "pass an id from search, a name, or a path relative to the folder root",
            )

    for k, v in args.items():
        for i, item in enumerate(v) if isinstance(v, list) else [(None, v)]:
            at = k if i is None else f"{k}[{i}]"
            if isinstance(item, dict):
                for field_ in ID_FIELDS & set(item):
                    check(f"{at}.{field_}", item[field_])
            else:
                check(at, item)


ID_FIELDS = {"id", "doc_id", "path", "ref"}
# arguments that are prose, not names: long is fine
FREE_TEXT = {"text", "query", "question", "pattern"}


class KnowledgeServer:
    """The tools, resources and prompts over a set of stacks; `build()` makes the MCPServer.

    The tool methods are plain functions (arguments in, JSON-able dict out) so that the
    server and tests call the same code.
    """

    def __init__(
        self, roots: Sequence[str | Path | None] | None = None, read_only: bool = False
    ) -> None:
        folders = stacks_of([open_folder(r) for r in (roots or [None])])
        self.stacks = {name: Stack(name, f) for name, f in folders.items()}
        first = next(iter(self.stacks.values())).folder
        self.read_only = read_only or first.setting("mcp.read_only")
        # per stack, how `ok serve --backend` reads its stack in PostgreSQL (its time cap
        # given): every tool but graph_cypher reads it; Cypher reads the folder's Kùzu graph
        self.backends: dict[str, Callable[[float], Any]] = {}
        # and what it does after a tool's write, under the writer lock: sync that backend
        self.after_writes: dict[str, Callable[[], None]] = {}
        # served by `ok serve`: a caller's Cypher is also held to the server's serve.timeout
        self.served = False

    # -- plumbing -------------------------------------------------------------------------
    def stack(self, name: str | None = None) -> Stack:
        if not name:
            return next(iter(self.stacks.values()))
        if name not in self.stacks:
            raise NotFound(
                f"no stack named {name!r}", "call list_stacks; stacks: " + ", ".join(self.stacks)
            )
        return self.stacks[name]

    def _check_k(self, st: Stack, k: int | None) -> int | None:
        """A count the caller passed must be at least 1 (one over `mcp.max_k` is clamped,
        not refused: the result says which k was used)."""
        if k is not None and int(k) < 1:
            raise UsageError(
                f"k must be at least 1, got {k}",
                f"pass 1 to {st.folder.setting('mcp.max_k')} (mcp.max_k)",
            )
        return k

    def _k(self, st: Stack, k: int) -> int:
        """`k`, checked and capped by `mcp.max_k`."""
        self._check_k(st, k)
        return min(int(k), st.folder.setting("mcp.max_k"))

    def _read_graph(self, st: Stack, tool: str) -> Any:
        """Open the graph read-only for one call, with the tool's time cap on its queries."""

        @contextlib.contextmanager
        def cm() -> Any:
            with _held(st.lock, st.timeout(tool), tool), indexer.open_graph(st.folder) as g:
                g.set_timeout(st.timeout(tool))
                yield g

        return cm()

    def _kuzu(self, st: Stack, tool: str) -> Callable[[], Any]:
        """How the operations open the folder's Kùzu graph for one call of `tool`."""
        return functools.partial(self._read_graph, st, tool)

    def _reader(self, st: Stack, tool: str) -> Callable[[], Any]:
        """How `tool` reads the graph: from the stack's PostgreSQL backend, if the server
        that runs these tools has one, else as `_kuzu`."""
        backend = self.backends.get(st.name)
        return backend(st.timeout(tool)) if backend is not None else self._kuzu(st, tool)

    @contextlib.contextmanager
    def _writing(self, st: Stack, tool: str) -> Iterator[None]:
        """The folder's writer lock, like the CLI takes it. This process's own calls queue on
        the stack lock first: the writer lock is re-entrant per folder, not per thread."""
        with _held(st.lock, st.timeout(tool), tool), st.folder.write_lock(f"ok mcp {tool}"):
            yield
            after = self.after_writes.get(st.name)
            if after is not None:
                after()

    def warm(self) -> None:
        """Load the embedding model now, so the first query does not pay for it."""
        for st in self.stacks.values():
            indexer.embedder(st.folder).warm()

    # -- tools: discovery and search ------------------------------------------------------
    def list_stacks(self) -> dict[str, Any]:
        """The knowledge folders this server serves, with what each holds."""
        out = []
        for st in self.stacks.values():
            row: dict[str, Any] = {
                "name": st.name,
                "root": str(st.folder.root),
                "read_only": self.read_only,
            }
            try:
                row.update(ops.counts(self._call(st, "list_stacks")))
            except OkError as e:
                row["error"] = str(e)
            out.append(row)
        return {"results": out}

    def _call(self, st: Stack, tool: str) -> ops.Call:
        """What one call of `tool` on `st` runs with: the stack's folder, its reader (its
        PostgreSQL backend, else its Kùzu graph), the tool's time cap, and its writer."""
        return ops.Call(
            st.folder,
            reader=self._reader(st, tool),
            timeout=st.timeout(tool),
            writer=lambda what: self._writing(st, tool),
        )

    def _search_request(
        self,
        st: Stack,
        query: str,
        k: int | None,
        tags: list[str] | None = None,
        topics: list[str] | None = None,
        where: list[str] | None = None,
        **given: Any,
    ) -> ops.SearchRequest:
        """A search as a tool asks for it (`given`: its other arguments, as
        `SearchRequest` names them): k checked and capped by mcp.max_k, tags and topics
        cleaned as notes keep them."""
        return ops.SearchRequest(
            query,
            k=self._check_k(st, k),
            max_k=st.folder.setting("mcp.max_k"),
            tags=tuple(notes_mod.clean_labels(tags)),
            topics=tuple(notes_mod.clean_labels(topics)),
            where=tuple(where or ()),
            **given,
        )

    def _search(
        self, tool: str, stack: str | None, query: str, k: int | None, **given: Any
    ) -> dict[str, Any]:
        st = self.stack(stack)
        res = ops.search(self._call(st, tool), self._search_request(st, query, k, **given))
        out: dict[str, Any] = {
            "stack": st.name,
            "query": query,
            "k": res.options.k,
            "results": res.hits,
        }
        if res.warning:
            out["warning"] = res.warning
        if res.no_good_match:
            out["message"] = (
                f"no good match: none of the query's words occur, and the nearest "
                f"passage's cosine similarity is {res.best_score or 0.0:.2f}, under "
                f"min_score {res.options.min_score:g}; nothing here is about this query"
            )
        return out

    def search(
        self,
        query: Annotated[str, Field(description="What to look for (words or a question).")],
        k: Annotated[
            int | None, Field(ge=1, description="Number of hits (capped by mcp.max_k).")
        ] = None,
        scope: ScopeArg = "all",
        mode: Annotated[
            Literal["hybrid", "vector", "fts"] | None,
            Field(description="Ranking signals: hybrid (default), vector or fts."),
        ] = None,
        tags: Annotated[
            list[str] | None, Field(description="Only notes with all these tags.")
        ] = None,
        topics: Annotated[
            list[str] | None, Field(description="Only notes with all these topics.")
        ] = None,
        path: Annotated[str | None, Field(description="Only paths matching this glob.")] = None,
        since: SinceArg = None,
        until: UntilArg = None,
        min_score: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description="When none of the query's words occur, the cosine similarity the "
                "best passage must reach, else no good match and no results (default "
                "search.min_score; 0 shows the nearest anyway).",
            ),
        ] = None,
        include_superseded: IncludeSupersededArg = False,
        recency: RecencyArg = None,
        where: WhereArg = None,
        drift_penalty: DriftPenaltyArg = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Hybrid (BM25 + vector) search over memory notes and documents. Each hit is a cite
        object: type, id, path, loc (char span), quote, context, source, score, rank. When
        nothing in the folder is near the query, `results` is empty and `message` says so.
        Expired notes, and notes a newer note supersedes, are left out."""
        return self._search(
            "search",
            stack,
            query,
            k,
            tags=tags,
            topics=topics,
            where=where,
            scope=scope,
            mode=mode,
            path=path,
            since=since,
            until=until,
            min_score=min_score,
            include_superseded=include_superseded,
            recency=recency,
            drift_penalty=drift_penalty,
        )

    def mem_search(
        self,
        query: Annotated[str, Field(description="What to look for.")],
        k: Annotated[
            int | None, Field(ge=1, description="Number of hits (capped by mcp.max_k).")
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Only notes with these tags.")] = None,
        topics: Annotated[
            list[str] | None, Field(description="Only notes with these topics.")
        ] = None,
        since: SinceArg = None,
        until: UntilArg = None,
        include_superseded: IncludeSupersededArg = False,
        recency: RecencyArg = None,
        where: WhereArg = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Search memory notes only (hybrid). Hits are cite objects of type `memory`.
        Expired notes, and notes a newer note supersedes, are left out."""
        return self._search(
            "mem_search",
            stack,
            query,
            k,
            tags=tags,
            topics=topics,
            where=where,
            scope="mem",
            since=since,
            until=until,
            include_superseded=include_superseded,
            recency=recency,
        )

    def store_search(
        self,
        query: Annotated[str, Field(description="What to look for.")],
        k: Annotated[
            int | None, Field(ge=1, description="Number of hits (capped by mcp.max_k).")
        ] = None,
        path: Annotated[
            str | None, Field(description="Only documents whose path matches this glob.")
        ] = None,
        since: SinceArg = None,
        until: UntilArg = None,
        where: WhereArg = None,
        drift_penalty: DriftPenaltyArg = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Search collected documents only (hybrid). Hits are cite objects of type `chunk`."""
        return self._search(
            "store_search",
            stack,
            query,
            k,
            where=where,
            scope="store",
            path=path,
            since=since,
            until=until,
            drift_penalty=drift_penalty,
        )

    # -- tools: writes --------------------------------------------------------------------
    def mem_add(
        self,
        text: Annotated[str, Field(description="The note's text (markdown).")],
        tags: Annotated[list[str] | None, Field(description="Tags.")] = None,
        topics: Annotated[list[str] | None, Field(description="Topics.")] = None,
        allow_duplicate: Annotated[
            bool,
            Field(description="Write it even when it repeats a live note (default: refused)."),
        ] = False,
        supersedes: Annotated[
            list[str] | None,
            Field(
                description="Ids of the notes this one replaces: they leave search and ask, "
                "and stay in lineage."
            ),
        ] = None,
        ttl: Annotated[
            str | None,
            Field(description="Expire the note after this long: 12h, 30d or 2w."),
        ] = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Write a memory note (a markdown file under memories/by_date/) and index it.
        Returns the note with its id (m-YYYYMMDD-xxxx) and path. A note that repeats a live
        one is refused ("duplicate of m-…") and nothing is written."""
        st = self.stack(stack)
        f = st.folder
        try:
            with self._writing(st, "mem_add"):
                note = ops.add_note(
                    f,
                    text,
                    notes_mod.clean_labels(tags),
                    notes_mod.clean_labels(topics),
                    via="mcp",
                    allow_duplicate=allow_duplicate,
                    supersedes=supersedes,
                    ttl=ttl,
                )
        except Duplicate as e:
            e.hint = (
                f"read it as the resource ok://{st.name}/memory/{e.duplicate_of}; "
                "pass allow_duplicate=true to write it anyway"
            )
            raise
        return {"stack": st.name, **note.as_dict(f)}

    def distill_create(
        self,
        text: Annotated[
            str,
            Field(
                description="The distilled note (markdown). End each claim with [N], the "
                "number of the citation it rests on: [1] is the first of `citations`."
            ),
        ],
        citations: Annotated[
            list[str | dict[str, Any]],
            Field(
                min_length=1,
                description="What the note rests on, in [N] order: cite objects or ids from "
                "search / cite_make (chunk ids <doc>#char<s>-<e>, c-… citation ids, doc ids, "
                "memory ids).",
            ),
        ],
        tags: Annotated[list[str] | None, Field(description="Tags.")] = None,
        topics: Annotated[list[str] | None, Field(description="Topics.")] = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Write a distilled memory note from cited sources (the RFC's `ok distill create`):
        every citation is verified against the files first (a quote that changed or is gone
        is refused, one that moved is cited where it is now), then kept under citations/,
        and the note gets a DERIVED_FROM edge to every source passage, document or note. A
        text none of whose claims carries an [N] marker is refused; nothing is written then.
        The prompts (extract-facts, memory-synthesis, …) say how to distill."""
        st = self.stack(stack)
        f = st.folder
        with self._writing(st, "distill_create"):
            done = ops.distill_note(
                f,
                text,
                list(citations),
                tags=notes_mod.clean_labels(tags),
                topics=notes_mod.clean_labels(topics),
                via="mcp",
            )
        return {"stack": st.name, **done.as_dict(f)}

    def store_ingest(
        self,
        paths: Annotated[
            list[str] | None,
            Field(
                description="Files or directories inside the folder (e.g. store/sources/x.pdf), relative to its root."
            ),
        ] = None,
        text: Annotated[
            str | None, Field(description="Text to ingest as a new document (instead of paths).")
        ] = None,
        name: Annotated[
            str | None, Field(description="File name for `text`, e.g. notes.md.")
        ] = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Ingest documents: files already inside the folder (pdf, html, docx, md, txt, …), or
        the given text. Unchanged content is a no-op; changed content supersedes the old
        version (kept for citations). Symlinks that lead out of the folder are skipped and
        listed in `skipped`."""
        st = self.stack(stack)
        f = st.folder
        if bool(paths) == (text is not None):
            raise UsageError("pass either `paths` or `text`")
        resolved = [str(safe_path(f, p)) for p in paths or []]
        data = text.encode("utf-8") if text is not None else None
        with self._writing(st, "store_ingest"):
            # never out of the folder, whatever a link inside it says
            rep = ops.ingest(f, resolved, data=data, name=name, confine=f.root)
        return {"stack": st.name, **rep.as_dict()}

    def _edit_caller(self, st: Stack, approve: bool) -> EditCaller:
        """Who makes a graph edit: the HTTP caller over `ok serve` (approving needs the
        admin scope there, as on the HTTP routes), else the OS user."""
        caller = http_caller.get()
        if caller is None:
            import getpass

            try:
                who = getpass.getuser() or "mcp"
            except (OSError, KeyError):
                who = "mcp"
            return {"via": "mcp", "by": who}
        if approve and not caller.allows(st.name, "admin"):
            raise OkError(
                f"{caller.who} may not approve graph edits on stack {st.name!r}",
                "approving needs the admin scope: leave out approve to queue the edit for review",
            )
        out: EditCaller = {"via": "mcp", "by": caller.who}
        if caller.key_id:
            out["key_id"] = caller.key_id
        return out

    def graph_add_entity(
        self,
        name: Annotated[str, Field(description="The entity's name.")],
        type: Annotated[
            str,
            Field(
                description="Person, Organization, Place, Event, Work, Software, Method, "
                "Chemical, GeneProtein, Disease, Organism, Anatomy, Concept, Code or Reference."
            ),
        ],
        description: Annotated[str | None, Field(description="What it is, in a sentence.")] = None,
        aliases: Annotated[list[str] | None, Field(description="Other names it goes by.")] = None,
        sources: Annotated[list[str] | None, SourcesField] = None,
        approve: Annotated[bool, ApproveField] = False,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Add an entity to the entity graph. It is written as a backfeed item in the
        folder (aks/backfeed/), with who added it, when, and its sources: pending until a
        person approves it (`ok backfeed approve ID`), or with approve=true in the graph at
        once. Either way a rebuild keeps it. Returns the item (`id`, `status`,
        `provenance`); the same entity added twice is one item (`created` false)."""
        st = self.stack(stack)
        caller = self._edit_caller(st, approve)
        with self._writing(st, "graph_add_entity"):
            done = ops.add_entity(
                st.folder,
                name,
                type,
                caller=caller,
                description=description,
                aliases=aliases or [],
                sources=sources or [],
                approve=approve,
            )
        return {"stack": st.name, **done}

    def graph_add_relationship(
        self,
        from_name: Annotated[str, Field(description="The entity it goes from.")],
        type: Annotated[str, Field(description="A snake_case verb: uses, part_of, works_with, …")],
        to_name: Annotated[str, Field(description="The entity it goes to.")],
        description: Annotated[
            str | None, Field(description="What it says, in a sentence.")
        ] = None,
        sources: Annotated[list[str] | None, SourcesField] = None,
        approve: Annotated[bool, ApproveField] = False,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Add a relationship from_name -type-> to_name to the entity graph, written as
        graph_add_entity writes an entity. With approve=true both ends must be entities of
        the graph (else it is refused and nothing is written); without, an end may be
        added later (`unknown` names such ends), and approval checks again."""
        st = self.stack(stack)
        caller = self._edit_caller(st, approve)
        with self._writing(st, "graph_add_relationship"):
            done = ops.add_relation(
                st.folder,
                from_name,
                type,
                to_name,
                caller=caller,
                description=description,
                sources=sources or [],
                approve=approve,
            )
        return {"stack": st.name, **done}

    # -- tools: graph ---------------------------------------------------------------------
    def graph_cypher(
        self,
        query: Annotated[str, Field(description="A read-only Cypher query.")],
        params: Annotated[
            dict[str, Any] | None, Field(description="Query parameters ($name).")
        ] = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Run a read-only Cypher query against the derived graph (Doc, Chunk, MemoryNote,
        Entity, Topic; HAS_CHUNK, MENTIONS, DERIVED_FROM, HAS_TOPIC, RELATED, SUPERSEDES).
        One statement; writes are refused, and so is anything that reaches files, other
        databases or extensions (LOAD FROM, COPY, EXPORT, IMPORT, INSTALL, ATTACH). Rows are
        capped by mcp.cypher_max_rows."""
        st = self.stack(stack)
        cap = st.folder.setting("mcp.cypher_max_rows")
        try:
            seconds, setting = st.timeout("graph_cypher"), "mcp.timeouts.graph_cypher"
            if self.served and float(st.folder.setting("serve.timeout")) < seconds:
                seconds, setting = float(st.folder.setting("serve.timeout")), "serve.timeout"
            limits = ops.query_limits(st.folder, seconds, setting)
            rows = ops.cypher(
                st.folder, query, params, graph=self._kuzu(st, "graph_cypher"), limits=limits
            )
        except ReadOnlyViolation as e:
            raise ReadOnlyViolation(
                "graph_cypher is read-only; this query writes",
                "use mem_add / store_ingest to change the folder",
            ) from e
        out: dict[str, Any] = {
            "stack": st.name,
            "count": len(rows),
            "results": json.loads(json.dumps(rows[:cap], default=str)),
        }
        if len(rows) > cap:
            out["truncated"] = True
            out["marker"] = f"[truncated: {cap} of {len(rows)} rows shown (mcp.cypher_max_rows)]"
        return out

    # -- tools: citations -----------------------------------------------------------------
    def cite_make(
        self,
        refs: Annotated[
            list[str],
            Field(
                description="Search-hit/chunk ids (<doc>#char<s>-<e>), doc ids, memory ids, or paths inside the folder."
            ),
        ],
        lines: Annotated[
            str | None, Field(description="Lines a-b (1-based) of a single ref.")
        ] = None,
        chars: Annotated[
            str | None, Field(description="Chars a-b (end exclusive) of a single ref.")
        ] = None,
        persist: Annotated[
            bool, Field(description="Write citations/<id>.json (off on a read-only server).")
        ] = False,
        tags: Annotated[
            list[str] | None, Field(description="Tags for persisted citations.")
        ] = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Make citations: cite objects with a deterministic id (c-…), the exact quote, its
        char span and context, as the files are now. Transient unless `persist`."""
        st = self.stack(stack)
        f = st.folder
        if not refs:
            raise UsageError("nothing to cite", "pass ids from search, or paths")
        if (lines or chars) and len(refs) != 1:
            raise UsageError("lines/chars need exactly one ref")
        if persist and self.read_only:
            raise ReadOnlyViolation(
                "this server is read-only, so citations cannot be persisted",
                "call cite_make without persist",
            )
        with self._writing(st, "cite_make") if persist else contextlib.nullcontext():
            cites = ops.make_citations(
                f,
                list(refs),
                lines=lines,
                chars=chars,
                cwd=f.root,
                persist=persist,
                tags=notes_mod.clean_labels(tags),
                via="mcp",
            )
        return {"stack": st.name, "results": cites}

    def cite_verify(
        self,
        items: Annotated[
            list[str | dict[str, Any]],
            Field(
                description="Citation ids (c-…), other ids, or cite objects as returned by search/cite_make/ask."
            ),
        ],
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Check citations against the files: verified (quote at its span, hash matches),
        moved (found elsewhere or in a newer version), changed (only a close match, with
        similarity) or missing. `ok` is true when every one is verified or moved."""
        st = self.stack(stack)
        if not items:
            raise UsageError("nothing to verify", "pass citation ids or cite objects")
        v = ops.verify_citations(st.folder, [x if isinstance(x, dict) else str(x) for x in items])
        return {"stack": st.name, "ok": v.ok, "results": v.results}

    # -- tools: entity graph ----------------------------------------------------------------
    def entities(
        self,
        name: Annotated[
            str | None,
            Field(
                description="One entity (name, alias or id): its relationships, sources and evidence."
            ),
        ] = None,
        type: Annotated[str | None, Field(description="Only this entity type.")] = None,
        query: Annotated[str | None, Field(description="Only names containing this text.")] = None,
        min_confidence: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description="Minimum confidence 0..1 (default: entities.min_confidence).",
            ),
        ] = None,
        limit: Annotated[
            int | None,
            Field(ge=1, description="At most this many (default 50, capped by mcp.max_k)."),
        ] = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Entities of the graph (names, terms, people, systems …) with type, confidence,
        aliases and contributing documents, most confident first; or, with `name`, one
        entity in detail."""
        st = self.stack(stack)
        call = self._call(st, "entities")
        if name:
            detail = ops.entity(call, name, min_confidence=min_confidence)
            return {"stack": st.name, **detail}
        rows = ops.list_entities(
            call,
            type=type,
            min_confidence=min_confidence,
            name=query,
            limit=self._k(st, limit or 50),
        )
        return {"stack": st.name, "results": rows}

    def traverse(
        self,
        name: Annotated[
            str,
            Field(description="Start entity (name, alias or id), or a note (id or title)."),
        ],
        depth: Annotated[int, Field(ge=0, le=4, description="Hops to walk (0-4).")] = 2,
        rel: Annotated[str | None, Field(description="Only this relationship type.")] = None,
        min_confidence: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description="Minimum confidence 0..1 (default: entities.min_confidence).",
            ),
        ] = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Walk the entity graph from an entity over typed relationships (both directions),
        breadth first; each step carries its path and the evidence of every hop. From a
        note, walk its [[links]] and backlinks (LINKS_TO, both directions)."""
        st = self.stack(stack)
        if not 0 <= depth <= 4:
            raise UsageError("depth must be between 0 and 4")
        cap = st.folder.setting("mcp.max_k") * 4
        res = ops.traverse(
            self._call(st, "traverse"),
            name,
            depth=depth,
            rel=rel,
            min_confidence=min_confidence,
            limit=cap,
        )
        out = {
            "stack": st.name,
            "start": res["start"],
            "depth": depth,
            "rel": rel,
            "results": res["steps"],
        }
        if res["truncated"]:
            out["truncated"] = True
            out["marker"] = f"[truncated: stopped after {cap} steps; lower depth or set rel]"
        return out

    def context(
        self,
        query: Annotated[str, Field(description="A question or topic.")],
        k: Annotated[
            int | None,
            Field(
                ge=1, description="Passages to retrieve (default ask.k, 8; capped by mcp.max_k)."
            ),
        ] = None,
        max_entities: Annotated[
            int, Field(ge=1, description="Entities to return (capped by mcp.max_k).")
        ] = 12,
        min_confidence: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description="Entity confidence floor 0..1 (default: entities.min_confidence).",
            ),
        ] = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Hybrid retrieval, then the entity subgraph relevant to the query: entities (with
        why each matters), the relationships between them, the source passages, the
        reasoning and a HIGH/MEDIUM/LOW confidence. Uses the LLM to pick entities when one is
        configured."""
        st = self.stack(stack)
        passages, entities = self._check_k(st, k or None), self._check_k(st, max_entities)
        data = ops.context(
            self._call(st, "context"),
            query,
            k=passages,
            max_entities=entities,
            min_confidence=min_confidence,
            max_k=st.folder.setting("mcp.max_k"),
        )
        return {"stack": st.name, **data}

    # -- tools: answers -------------------------------------------------------------------
    def ask(
        self,
        question: Annotated[str, Field(description="The question.")],
        k: Annotated[
            int | None,
            Field(
                ge=1, description="Passages to retrieve (default ask.k, 8; capped by mcp.max_k)."
            ),
        ] = None,
        scope: ScopeArg = "all",
        include_superseded: IncludeSupersededArg = False,
        recency: RecencyArg = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Answer a question from the folder with [N] markers; `citations` holds the cite
        object of every [N] (its `n`). Uses the configured LLM, else an extractive answer of
        the best matching sentences. Says so when the folder does not hold the answer.
        Expired notes, and notes a newer note supersedes, are left out."""
        st = self.stack(stack)
        k = self._check_k(st, k or None)
        res = ops.ask(
            self._call(st, "ask"),  # its reader is not held while the LLM answers
            question,
            k=k,
            scope=scope,
            max_k=st.folder.setting("mcp.max_k"),
            include_superseded=include_superseded,
            recency=recency,
        )
        return {"stack": st.name, **res}

    # -- tools: files ---------------------------------------------------------------------
    def fs_list(
        self,
        path: Annotated[str, Field(description="Directory relative to the folder root.")] = ".",
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """List a directory inside the knowledge folder (never outside it; .ok/ and .git/
        are not listed)."""
        st = self.stack(stack)
        cap = st.folder.setting("mcp.fs_max_entries")
        ls = ops.list_dir(st.folder, path, max_entries=cap)
        out: dict[str, Any] = {"stack": st.name, "path": ls.path, "results": ls.entries}
        if ls.total > cap:
            out["truncated"] = True
            out["marker"] = f"[truncated: {cap} of {ls.total} entries shown (mcp.fs_max_entries)]"
        return out

    def fs_read(
        self,
        path: Annotated[str, Field(description="File relative to the folder root.")],
        offset: Annotated[
            int,
            Field(ge=0, description="Byte offset to start at (next_offset of the previous piece)."),
        ] = 0,
        max_bytes: Annotated[
            int | None,
            Field(ge=1, description="At most this many bytes (capped by mcp.max_bytes)."),
        ] = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Read a text file inside the knowledge folder (notes, normalized docs, citations;
        not .ok/ or .git/). Long files come back in pieces: `next_offset` says where to go
        on."""
        st = self.stack(stack)
        cap = st.folder.setting("mcp.max_bytes") - 1000
        piece = ops.read_piece(
            st.folder, path, offset=offset, max_bytes=min(int(max_bytes or cap), cap)
        )
        out: dict[str, Any] = {
            "stack": st.name,
            "path": piece.path,
            "size": piece.size,
            "offset": piece.offset,
            "text": piece.text,
        }
        if piece.end < piece.size:
            out["truncated"] = True
            out["next_offset"] = piece.end
            out["marker"] = (
                f"[truncated: bytes {piece.offset}-{piece.end} of {piece.size} shown; call "
                f"fs_read with offset={piece.end} to continue]"
            )
            out["text"] = piece.text + "\n" + out["marker"]
        return out

    def sh_grep(
        self,
        pattern: Annotated[
            str,
            Field(
                description="Regular expression (ripgrep syntax), or plain text with fixed=true."
            ),
        ],
        scope: ScopeArg = "all",
        ignore_case: Annotated[bool, Field(description="Case-insensitive.")] = False,
        fixed: Annotated[bool, Field(description="Pattern is plain text.")] = False,
        word: Annotated[
            bool, Field(description="Whole words only (rg -w): no letter, digit or _ around.")
        ] = False,
        context: Annotated[
            int, Field(ge=0, le=GREP_CONTEXT_MAX, description="Lines before and after (rg -C).")
        ] = 0,
        before: Annotated[
            int | None,
            Field(
                ge=0, le=GREP_CONTEXT_MAX, description="Lines before (rg -B; wins over context)."
            ),
        ] = None,
        after: Annotated[
            int | None,
            Field(ge=0, le=GREP_CONTEXT_MAX, description="Lines after (rg -A; wins over context)."),
        ] = None,
        files_with_matches: Annotated[
            bool, Field(description="Only the paths of matching files (rg -l): `files`.")
        ] = False,
        count: Annotated[
            bool, Field(description="Matching lines per file (rg -c): `counts` {path: N}.")
        ] = False,
        max_count: Annotated[
            int | None,
            Field(
                ge=1,
                description="Stop after this many matches, or files with files_with_matches or "
                "count (capped by mcp.grep_max).",
            ),
        ] = None,
        stack: StackArg = None,
    ) -> dict[str, Any]:
        """Grep memory notes and normalized documents (ripgrep): exact strings, names, ids.
        Matches are {path, line, column, text, match}; with context lines they also carry
        `before` and `after` lists of {line, text}."""
        st = self.stack(stack)
        cap = st.folder.setting("mcp.grep_max")
        n = min(int(max_count or cap), cap)
        out: dict[str, Any] = {"stack": st.name, "pattern": pattern}
        if files_with_matches or count:
            if files_with_matches and count:
                raise UsageError("files_with_matches and count do not combine", "pass one of them")
            found = ops.grep_files(
                st.folder,
                pattern,
                scope=scope,
                ignore_case=ignore_case,
                fixed=fixed,
                word=word,
                count=count,
                max_files=n,
            )
            if found.counts is not None:
                out["counts"] = found.counts
            else:
                out["files"] = found.paths
            if found.more:
                out["truncated"] = True
                out["marker"] = f"[truncated: stopped after {n} files (max_count, mcp.grep_max)]"
            return out
        res = ops.grep(
            st.folder,
            pattern,
            scope=scope,
            ignore_case=ignore_case,
            fixed=fixed,
            word=word,
            before=context if before is None else before,
            after=context if after is None else after,
            max_count=n,
        )
        out["results"] = res.hits
        if res.more:
            out["truncated"] = True
            out["marker"] = f"[truncated: stopped after {n} matches (max_count, mcp.grep_max)]"
        return out

    # -- resources --------------------------------------------------------------------------
    def read_note(self, stack: str, note_id: str) -> str:
        st = self.stack(stack)
        note = ops.show_note(st.folder, note_id)
        assert note.path is not None
        return note.path.read_text(encoding="utf-8")

    def read_doc(self, stack: str, doc_id: str) -> str:
        return ops.show_doc(self.stack(stack).folder, doc_id).text

    # -- the MCP server -------------------------------------------------------------------
    def tool_specs(self) -> list[tuple[Callable[..., dict[str, Any]], dict[str, bool]]]:
        """(method, annotations) for every tool this server offers: those of
        `settings.MCP_TOOL_TABLE`, in its order, less the writing ones on a read-only
        server."""
        return [
            (getattr(self, t.name), self.hints(t.does))
            for t in settings.MCP_TOOL_TABLE
            if not (self.read_only and t.does in WRITES)
        ]

    def hints(self, does: str) -> dict[str, bool]:
        """The MCP annotations of a tool that `does` this (see `settings.McpTool`)."""
        reads = does in ("read", "read-out") or (does == "persist" and self.read_only)
        return {
            "read_only_hint": reads,
            "destructive_hint": False,
            "idempotent_hint": does != "add",
            "open_world_hint": does == "read-out",
        }

    def call(
        self, name: str, fn: Callable[..., dict[str, Any]], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """Run a tool with its caps applied (in the calling thread; `build` adds the timer)."""
        st = self.stack(kwargs.get("stack"))
        return limit(fn(**kwargs), st.folder.setting("mcp.max_bytes"))

    def build(self) -> Any:
        """The `MCPServer` with every tool, resource and prompt registered."""
        from mcp.types import ToolAnnotations

        from ..collect import distill

        server = _server_class()(
            SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING", version=_version()
        )
        for fn, ann in self.tool_specs():
            name = fn.__name__
            server.add_tool(
                self._timed(name, fn),
                name=name,
                description=describe(fn),
                annotations=ToolAnnotations(title=name.replace("_", " "), **ann),
            )

        @server.resource(
            "ok://{stack}/memory/{note_id}",
            name="memory note",
            description="A memory note file (YAML frontmatter + markdown body).",
            mime_type="text/markdown",
        )
        def _note(stack: str, note_id: str) -> str:
            return self._resource(self.read_note, stack, note_id)

        @server.resource(
            "ok://{stack}/doc/{doc_id}",
            name="document",
            description="A document's normalized text (.ok.md), by doc id.",
            mime_type="text/markdown",
        )
        def _doc(stack: str, doc_id: str) -> str:
            return self._resource(self.read_doc, stack, doc_id)

        @server.resource(
            "ok://stacks",
            name="stacks",
            mime_type="application/json",
            description="The knowledge folders this server serves.",
        )
        def _stacks() -> str:
            return json.dumps(self.list_stacks()["results"], indent=2)

        for p in distill.PROMPTS.values():
            server.prompt(name=p.name, title=p.title, description=p.description)(_prompt_fn(p))
        return server

    def _resource(self, fn: Callable[..., str], *args: str) -> str:
        from mcp.server.mcpserver.exceptions import ResourceError

        try:
            check_args(dict(zip(("stack", "id"), args, strict=False)))
            return fn(*args)
        except OkError as e:
            raise ResourceError(str(e)) from e
        except (OSError, ValueError, OverflowError) as e:
            raise ResourceError(
                f"cannot read the resource: {_reason(e)} (hint: use an id "
                "from search or list_stacks)"
            ) from e

    def _timed(self, name: str, fn: Callable[..., dict[str, Any]]) -> Callable[..., Any]:
        """Wrap a tool: run it on a worker thread under its time cap; typed errors become
        tool errors the agent can read."""
        import anyio
        import anyio.to_thread
        from mcp.server.mcpserver.exceptions import ToolError

        async def run(**kwargs: Any) -> dict[str, Any]:
            cap = 0.0
            st: Stack | None = None
            try:
                check_args(kwargs)
                st = self.stack(kwargs.get("stack"))
                cap = st.timeout(name)
                with anyio.fail_after(cap):
                    return await anyio.to_thread.run_sync(
                        functools.partial(self.call, name, fn, kwargs), abandon_on_cancel=True
                    )
            except TimeoutError:
                raise ToolError(
                    f"{name} exceeded its time cap of {cap:g}s "
                    f"(hint: narrow the request, or raise mcp.timeouts.{name})"
                ) from None
            except OkError as e:
                if "interrupted" in str(e).lower():
                    raise ToolError(
                        f"{name} exceeded its time cap of {cap:g}s "
                        f"(hint: narrow the request, or raise mcp.timeouts.{name})"
                    ) from None
                raise ToolError(str(disk_full(e, st.folder.root if st else None) or e)) from e
            except Exception as e:
                full = disk_full(e, st.folder.root if st else None)
                if full is not None:
                    raise ToolError(str(full)) from e
                if isinstance(e, OSError | ValueError | OverflowError):
                    # what the system said about an argument no check caught: still one line
                    raise ToolError(
                        f"{name} failed: {_reason(e)} (hint: check the paths, ids "
                        "and numbers passed)"
                    ) from e
                raise

        sig = inspect.signature(fn, eval_str=True)
        run.__signature__ = sig.replace(return_annotation=dict[str, Any])  # type: ignore[attr-defined]
        run.__name__ = name
        run.__doc__ = fn.__doc__
        return run


def _server_class() -> type[Any]:
    """`MCPServer`, with arguments that fail the input schema, and URIs that match no
    resource, told in one line."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import (
        ResourceNotFoundError,
        ToolError,
        UnexpectedToolError,
    )
    from pydantic import ValidationError

    class Server(MCPServer):  # type: ignore[misc]
        async def read_resource(self, uri: Any, context: Any = None) -> Any:
            try:
                return await super().read_resource(uri, context)
            except ResourceNotFoundError as e:
                # the SDK's message repeats the whole URI, however long
                raise ResourceNotFoundError(
                    f"unknown resource {shown(str(uri), 120)} (hint: read ok://stacks, "
                    "ok://STACK/doc/ID or ok://STACK/memory/ID, with an id from search)"
                ) from e

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            # over HTTP, the request's caller (`ok serve` put it in the request's state)
            try:
                request = context.request_context.request if context is not None else None
            except ValueError:  # no request: a call from within the process
                request = None
            caller = getattr(getattr(request, "state", None), "caller", None)
            token = http_caller.set(caller)
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as e:
                cause = e.__cause__
                if isinstance(e, UnexpectedToolError) or not isinstance(cause, ValidationError):
                    raise
                # the SDK's text spans lines and repeats the caller's values in full
                raise ToolError(f"Error executing tool {name}: {schema_errors(cause)}") from cause
            finally:
                http_caller.reset(token)

    return Server


def schema_errors(e: Any) -> str:
    """One line for a pydantic `ValidationError` of tool arguments."""
    parts = []
    for err in e.errors():
        where = ".".join(str(x) for x in err.get("loc", ()) if x != "") or "arguments"
        got = err.get("input")
        shown_got = "" if isinstance(got, dict) else f" (got {shown(repr(got), 40)})"
        parts.append(f"`{where}`: {err.get('msg', 'invalid')}{shown_got}")
    return (
        "validation error: "
        + "; ".join(parts)
        + " (hint: see the tool's input schema for types and bounds)"
    )


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror + (f": {shown(e.filename)}" if e.filename else "")
    return shown((str(e).splitlines() or [type(e).__name__])[0], 200)


@contextlib.contextmanager
def _held(lock: threading.Lock, timeout: float, what: str) -> Iterator[None]:
    """Hold `lock`, waiting at most `timeout` seconds (a call past its cap still holds it)."""
    if not lock.acquire(timeout=max(0.01, timeout)):
        raise ToolTimeout(
            f"{what} waited {timeout:g}s for an earlier call on this folder", "retry in a moment"
        )
    try:
        yield
    finally:
        lock.release()


def describe(fn: Callable[..., Any]) -> str:
    """A tool's docstring with its hard-wrapped lines joined (paragraphs kept)."""
    doc = inspect.getdoc(fn) or fn.__name__
    return "\n\n".join(" ".join(par.split()) for par in doc.split("\n\n"))


def _prompt_fn(p: Any) -> Callable[..., str]:
    def render(
        text: Annotated[
            str, Field(description="The material to work on (notes, passages, a document).")
        ] = "",
    ) -> str:
        return p.render(text)

    render.__name__ = p.name.replace("-", "_")
    render.__doc__ = p.description
    return render


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("openkl")
    except Exception:  # pragma: no cover - running from a source tree
        return "0"


def serve(roots: Sequence[str | Path | None] | None = None, read_only: bool = False) -> None:
    """Serve over stdio until the client goes away."""
    ks = KnowledgeServer(roots, read_only=read_only)
    server = ks.build()
    warming = threading.Thread(target=_warm_quietly, args=(ks,), daemon=True)
    warming.start()
    server.run("stdio")
    # a client that leaves while the model is still loading must not take the process down
    # in the middle of onnxruntime's set-up (it aborts: "terminate called …", exit 134)
    warming.join(timeout=60)


def _warm_quietly(ks: KnowledgeServer) -> None:
    # a broken model shows up on the first real call, with its message
    with contextlib.suppress(Exception):
        ks.warm()


def http_app(server: Any, path: str) -> Any:
    """The ASGI app of `server` over streamable HTTP at `path`, for `ok serve`. The SDK's own
    Host and Origin checks are off: the server checks both on every route before /mcp is
    reached (openkl.server.guard), by the same rule and with the same JSON errors."""
    from mcp.server.transport_security import TransportSecuritySettings

    return server.streamable_http_app(
        streamable_http_path=path,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
