"""`ok`: the root command, global options, and the core commands.

Feature groups (mem, store, graph, cite, …) live in sibling modules and are registered
below. Heavy libraries (kuzu, fastembed, kreuzberg) are imported only inside commands, so
`ok --help` stays fast.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

import typer

from ..errors import ERROR, NOTHING_FOUND, CheckFailed, OkError, PartlyDone, UsageError
from ..records import Status, SyncProblem
from . import cmd_completion as completion
from . import output
from .argv import OWN_ROOT, ROOT_FLAGS, command_at, own_c
from .common import (
    DriftPenaltyOpt,
    IncludeSupersededOpt,
    RecencyOpt,
    SinceOpt,
    TagFilterOpt,
    TakeOverOpt,
    TopicFilterOpt,
    UntilOpt,
    WhereOpt,
    folder,
    glob_opt,
    limit_opt,
    scope_opt,
    split_globs,
    writing,
)
from .output import FormatOpt, JsonOpt, emit, formats, is_tty, state, styled


# A private typer API (pyproject.toml pins typer to the versions that have it).
def _plain_metavar(self: Any, ctx: Any) -> str:
    """`--root ROOT`, `QUERY`: upper-case names instead of `<str>` type labels in help."""
    if self.type_descriptor.is_choice:
        return _typed_metavar(self, ctx)
    return (self.name or "value").upper()


_typed_metavar = typer.core._TyperParameter.display_type
typer.core._TyperParameter.display_type = _plain_metavar  # type: ignore[method-assign]

app = typer.Typer(
    name="ok",
    help="openkl: a local-first knowledge layer. Notes and documents as plain files; "
    "hybrid search, a graph, and citations anyone can verify.\n\n"
    "Start with `ok init`, add notes with `ok mem add`, documents with "
    "`ok store ingest`, then `ok search`.",
    epilog="""A first session:

\b
  ok init ~/kb && cd ~/kb
  ok store ingest ~/papers --glob '*.pdf'
  ok mem add "Retries need jitter, or they synchronize" --tags infra
  ok search "retry storms"
  ok cite verify --all

Run `ok COMMAND --help` for each command's options and examples.""",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    # eager: runs before click asks for a command, so `ok --version` alone works
    if value:
        from importlib.metadata import version

        print(f"ok {version('openkl')}")
        raise typer.Exit()


@app.callback()
def _root(
    root: str = typer.Option(
        None,
        "--root",
        "-C",
        envvar="OK_ROOT",
        metavar="DIR",
        help="Knowledge folder (default: nearest parent with .ok/); also after the subcommand "
        "(after `grep`, -C is lines of context, as in rg: use --root there).",
    ),
    json_: bool = typer.Option(False, "--json", help="JSON output for every command."),
    tee: str = typer.Option(
        None, "--tee", metavar="FILE", help="Also append ops-log lines to this file."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    color: str = typer.Option(
        "auto",
        "--color",
        metavar="auto|always|never",
        help="Styled output: auto (on a terminal, unless NO_COLOR is set), always, never.",
    ),
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        expose_value=False,
        callback=_print_version,
        help="Print the version and exit.",
    ),
) -> None:
    state.root, state.json, state.tee, state.debug = root, json_, tee, debug
    state.color = _color_choice(color)


def _color_choice(color: str) -> str:
    if color not in ("auto", "always", "never"):
        raise typer.BadParameter(
            f"{color!r} is not one of auto, always, never", param_hint="'--color'"
        )
    return color


# -- folder -------------------------------------------------------------------------------
@app.command()
def init(
    directory: Path = typer.Argument(Path("."), help="Where to create the folder."),
    domain: str = typer.Option(None, help="Name of this knowledge stack (default: dir name)."),
    json_: bool = JsonOpt,
) -> None:
    """Create a knowledge folder (store/, memories/, citations/, graph/, .ok/)."""
    from .. import ops  # imported when used: `ok --help` stays light

    done = ops.init_folder(directory, domain, what="ok init")
    emit(
        done.as_dict(),
        json_,
        plain=lambda d: (
            f"{'Initialized' if d['created'] else 'Already a'} knowledge folder in {d['root']}"
        ),
    )


@app.command()
def index(
    rebuild: bool = typer.Option(False, "--rebuild", help="Drop the graph and rebuild it."),
    backend: str | None = typer.Option(
        None,
        "--backend",
        metavar="URI",
        help="Build the folder's stack in PostgreSQL (postgresql://user:pw@host/db) from the "
        "files, replacing what it held, instead of the Kùzu graph in .ok/.",
    ),
    take_over: bool = TakeOverOpt,
    json_: bool = JsonOpt,
) -> None:
    """Build the graph from the files (incremental; --rebuild starts from scratch).

    With --backend, the folder's documents, notes, links, lineage and entities go to
    PostgreSQL with pgvector, as one stack named after the folder (its `domain`);
    `ok search --backend` (or the graph.backend setting) then reads them."""
    from .. import ops

    f = folder()
    if backend:
        with writing(f, "ok index --backend"):
            pub = ops.publish(f, backend, take_over)
        for p in pub.problems:
            output.warn(_problem_line(p))
        emit(pub.as_dict(), json_, plain=_published)
        _fail_on_problems(pub.blocking)
        return
    if take_over:
        raise UsageError("--take-over goes with --backend", "add --backend URI, or drop it")
    with writing(f, "ok index"):
        rep = ops.index(f, rebuild=rebuild)
    _report_sync(rep, json_)


def _synced(d: Any) -> str:
    unreadable = f"; {len(d['unreadable'])} unreadable" if d["unreadable"] else ""
    if not d["changed"]:
        return f"stack {d['stack']} is up to date{unreadable}"
    parts = [
        f"{len(d[k])} {k.replace('_', ' ')}"
        for k in ("docs_added", "docs_removed", "docs_moved", "notes_added", "notes_updated")
        + ("notes_removed",)
        if d[k]
    ]
    if d["incomplete"]:
        parts.append(f"{len(d['incomplete'])} incomplete loaded again")
    if d["reconsolidated"]:
        parts.append("entities recomputed (" + ", ".join(d["reconsolidated"]) + ")")
    how = "rebuilt" if d["rebuilt"] else "synced"
    done = ", ".join(parts) or f"{d['chunks_added']} chunks"
    return f"{how} stack {d['stack']}: {done}{unreadable}"


def _published(d: Any) -> str:
    return (
        f"published stack {d['stack']}: {d['docs']} docs, {d['chunks']} chunks, {d['notes']} notes"
    )


@app.command()
def sync(
    json_: bool = JsonOpt,
    watch: bool = typer.Option(
        False,
        "--watch",
        help="Then keep watching the folder and sync after each change (Ctrl-C stops).",
    ),
    backend: str | None = typer.Option(
        None,
        "--backend",
        metavar="URI",
        help="Bring the folder's stack in PostgreSQL (postgresql://…) up to date instead, "
        "writing only what changed.",
    ),
    take_over: bool = TakeOverOpt,
) -> None:
    """Bring the graph up to date after files were added, edited, renamed or deleted.

    With --watch it stays, and syncs again shortly after files change (an editor saving,
    `git pull`), printing what each sync did; with --json, one JSON object per line.
    With --backend, the folder's stack in PostgreSQL is synced (one writer per stack: a
    second waits up to lock_timeout, then says who holds it). The stack records which
    folder it holds: another folder with the same domain is refused unless --take-over.
    """
    from .. import ops

    f = folder()
    if backend:
        if watch:
            raise UsageError("--watch and --backend do not go together", "use `ok serve --backend`")
        with writing(f, "ok sync --backend"):
            synced = ops.sync_postgres(f, backend, take_over)
        for p in synced.problems:
            output.warn(_problem_line(p))
        if synced.taken_over:
            output.warn(f"stack {synced.stack} held the rows of {synced.taken_over}: replaced")
        emit(synced.as_dict(), json_, plain=_synced)
        _fail_on_problems(synced.blocking)
        return
    if take_over:
        raise UsageError("--take-over goes with --backend", "add --backend URI, or drop it")
    if watch:
        state.long_running = True
        output.info(f"watching {f.root} for changes (Ctrl-C stops)")
        said: list[object] = []

        def line(r: Any) -> None:
            _watch_line(r, json_, always=not said)
            said.append(r)

        # Ctrl-C between changes ends the watch; during a sync, that sync is rolled back
        with contextlib.suppress(KeyboardInterrupt):
            ops.watch(f, line, writing=lambda: writing(f, "ok sync --watch"), initial=True)
        return
    with writing(f, "ok sync"):
        rep = ops.sync(f)
    _report_sync(rep, json_)


def _watch_line(rep: Any, json_: bool, always: bool = False) -> None:
    """One line per sync of `ok sync --watch` (a failed sync is a warning; the watch goes on)."""
    if isinstance(rep, OkError):
        output.warn(str(rep))
        return
    for p in rep.problems:
        output.warn(_problem_line(p))
    if json_ or state.json:
        output.emit_jsonl([rep.as_dict()])
        sys.stdout.flush()
    elif rep.changed or always:
        print(_sync_summary(rep.as_dict()), flush=True)


def _report_sync(rep: Any, json_: bool) -> None:
    for p in rep.problems:
        output.warn(_problem_line(p))
    for src in rep.sources_kept:
        output.warn(
            f"{src} is kept though its normalized file was deleted "
            "(delete it too if the document is meant to go; `ok store remove` drops both)"
        )
    for src in rep.sources_unfinished:
        output.warn(
            f"{src} was copied by an ingest that was cut off before its document was written: "
            f"`ok store ingest {src}` finishes it (or delete it)"
        )

    emit(rep.as_dict(), json_, plain=_sync_summary)
    _fail_on_problems(rep.blocking)


def _sync_summary(d: Any) -> str:
    """What a sync did, in one line."""
    parts = [
        f"{len(d[k])} {k.replace('_', ' ')}"
        for k in (
            "docs_added",
            "docs_removed",
            "docs_moved",
            "notes_added",
            "notes_updated",
            "notes_removed",
        )
        if d[k]
    ]
    if d["docs_missing"]:
        parts.append(f"{len(d['docs_missing'])} mapping entries without a file dropped")
    if d["docs_unlinked"]:
        parts.append(f"{len(d['docs_unlinked'])} old versions linked")
    redone = [x for x in d["incomplete"] if x != "entities"]
    if redone:
        parts.append(f"{len(redone)} with missing derived parts indexed again")
    if "entities" in d["incomplete"]:
        parts.append("entities of a cut-off load consolidated")
    if d["recovered"]:
        parts.append("index rebuilt from the files after a killed writer")
    if d["sources_kept"]:
        parts.append(f"{len(d['sources_kept'])} originals kept in store/sources/")
    if d["sources_unfinished"]:
        parts.append(f"{len(d['sources_unfinished'])} cut-off ingests left in store/sources/")
    done = (
        (", ".join(parts) + f" ({d['chunks_added']} chunks embedded).") if parts else "Up to date."
    )
    if d["unreadable"]:
        done += f" {len(d['unreadable'])} unreadable (see the warnings)."
    return done


def _problem_line(p: SyncProblem) -> str:
    line = f"{p['path']}: {p['problem']}"
    if p.get("kind") == "unreadable":
        line += (
            f"; unreadable, its last indexed version ({p['kept']}) stays searchable"
            if p.get("kept")
            else "; unreadable, not indexed"
        )
    return line


def _fail_on_problems(blocking: list[SyncProblem], check: bool = False) -> None:
    """Files the graph cannot follow fail the command after the rest of the work is done:
    a sync that did the rest is partly done (exit 3), a `check` (status) says no (1)."""
    if not blocking:
        return
    paths = ", ".join(p["path"] for p in blocking[:3]) + (" …" if len(blocking) > 3 else "")
    raise (CheckFailed if check else PartlyDone)(
        f"{len(blocking)} file{'s' if len(blocking) > 1 else ''} not indexed as written: {paths}",
        "fix what the warnings name, then run `ok sync`",
    )


@app.command()
def status(json_: bool = JsonOpt) -> None:
    """Counts of what is indexed, and what is stale."""
    from .. import ops

    data = ops.status(folder())

    def plain(d: Status) -> str:
        lines = [f"root: {d['root']}"]
        if d.get("inference"):
            lines.append(f"inference: {d['inference']}")
        if "error" in d:
            lines.append(f"index: {d['error']}")
        else:
            c = d["counts"]
            lines.append(
                f"docs: {c['Doc']}  chunks: {c['Chunk']}  notes: {c['MemoryNote']}  "
                f"entities: {c['Entity']}"
            )
            lines.append(f"embedder: {d['embedder']}")
            lines.append(
                "in sync"
                if d["in_sync"]
                else "stale: "
                + ", ".join(_stale_part(k, v) for k, v in d["stale"].items())
                + " (run `ok sync`)"
            )
            if d["unreadable"]:
                lines[-1] += f"; {len(d['unreadable'])} unreadable"
            for p in d["problems"]:
                lines.append(f"problem: {_problem_line(p)}")
            m = d.get("extractor_mismatch")
            if m:
                lines.append(
                    f"entities: extracted by {m['graph']}, configured {m['config']}"
                    " (run `ok index --rebuild`)"
                )
        if d["lock"]:
            lines.append(
                f"writer lock held by pid {d['lock'].get('pid')} ({d['lock'].get('what')})"
            )
        srv = d.get("server")
        if srv and "error" not in d and srv.get("resident"):
            lines.append(
                f"served by its resident process (pid {srv.get('pid')}; `ok daemon` stops "
                "or starts it): ok commands here run in it"
            )
        elif srv and "error" not in d:  # (the error already says so)
            lines.append(
                f"served by `ok serve` (pid {srv.get('pid')}, {srv.get('url')}): "
                "ok commands here run in it"
            )
        for ew in d.get("exec_waiting", []):
            lines.append(
                f"trigger {ew['name']} waits for approval to run `{ew['exec']}` "
                f"(check it, then `{ew['approve']}`)"
            )
        w = d.get("watch")
        if w and w["failing"]:
            lines.append(
                f"watch: {w['failing']} failing since {w['since']} ({w['failures']} failures: "
                f"{w['error']}); trying again in {w['retry_in']:g}s"
            )
        return "\n".join(lines)

    emit(data, json_, plain=plain)
    _fail_on_problems(
        [p for p in data.get("problems", []) if p.get("kind") != "same_content"], check=True
    )
    w = data.get("watch")
    if w and w["failing"]:
        raise CheckFailed(
            f"the server's watch of this folder is failing ({w['failing']}: {w['error']}), "
            "so what it answers may be stale",
            "it tries again by itself; fix what the error names (the server's log has each "
            "failure)",
        )


def _stale_part(key: str, value: list[str]) -> str:
    if key == "recovered":
        return "the graph replayed a killed writer's log, which `ok sync` rebuilds from the files"
    if key == "incomplete" and "entities" in value:
        rest = [x for x in value if x != "entities"]
        return (
            f"{len(rest)} incomplete, " if rest else ""
        ) + "entities not consolidated after a cut-off load"
    if key == "docs_missing":
        return f"{len(value)} docs recorded but not on disk"
    return f"{len(value)} {key.replace('_', ' ')}"


@app.command()
def doctor(json_: bool = JsonOpt) -> None:
    """Check the folder, index, model, rg, kreuzberg, lock and [[links]] in notes; print fixes."""
    from .. import ops

    checks = ops.doctor(state.root)
    emit(
        checks,
        json_,
        plain=lambda cs: "\n".join(
            f"{'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {c['detail']}"
            + ("" if c["ok"] or not c.get("fix") else f"\n     fix: {c['fix']}")
            for c in cs
        ),
    )
    if not all(c["ok"] for c in checks):
        raise typer.Exit(NOTHING_FOUND)  # a check said no


# -- search ------------------------------------------------------------------------------
SEARCH_EXAMPLES = """Examples:

\b
  ok search "write-ahead logging"                # notes and documents together
  ok search "deadline" --in mem --tag work -k 5   # notes tagged work
  ok search "BM25" --mode fts --explain           # keyword only, with scores
  ok search "gene editing" --json | jq -r '.[].id' | ok cite make - --persist
  ok search "BM25" | cut -f4                        # piped: rank, score, id, path:L1-L2, snippet
  ok search "BM25" --format tsv | cut -f5           # a header row; nested values as JSON
  ok open 1                                       # the first hit, in $EDITOR
"""


@app.command(epilog=SEARCH_EXAMPLES)
@formats
def search(
    query: str = typer.Argument(..., help="What to look for (`-` reads it from stdin)."),
    k: int | None = limit_opt(None, "Number of results (default 10, at most 1000)."),
    scope: str = scope_opt("all", "Where to search."),
    mode: str | None = typer.Option(
        None, "--mode", metavar="hybrid|vector|fts", help="Ranking signals (default hybrid)."
    ),
    tags: list[str] | None = TagFilterOpt,
    topics: list[str] | None = TopicFilterOpt,
    path: str | None = typer.Option(
        None, "--path", metavar="GLOB", help="Only paths matching this glob."
    ),
    since: str | None = SinceOpt,
    until: str | None = UntilOpt,
    where: list[str] | None = WhereOpt,
    per_doc: int | None = typer.Option(
        None, "--per-doc", metavar="N", help="Hits per document (default 1, at most 1000)."
    ),
    diverse: bool = typer.Option(
        False, "--diverse", help="Prefer hits that differ from each other (MMR)."
    ),
    min_score: float | None = typer.Option(
        None,
        "--min-score",
        metavar="X",
        help="If no query word occurs, say no good match (exit 1) unless a passage's cosine "
        "similarity to the query reaches X (0-1; default search.min_score; 0: off).",
    ),
    explain: bool = typer.Option(False, "--explain", help="Per-signal scores and ranks."),
    show_query: bool = typer.Option(False, "--show-query", help="Print the Cypher run (stderr)."),
    include_superseded: bool = IncludeSupersededOpt,
    recency: str | None = RecencyOpt,
    drift_penalty: float | None = DriftPenaltyOpt,
    backend: str | None = typer.Option(
        None,
        "--backend",
        metavar="URI",
        help="Read the folder's stack from PostgreSQL (built by `ok index --backend`); "
        "default: the graph.backend setting, else the Kùzu graph.",
    ),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """Hybrid (BM25 + vector) search over notes and documents; hits are cite objects.

    On a terminal, a table; piped, one line per hit (rank, score, id, path:L1-L2 in lines
    of the file, snippet; tab-separated). `ok open RANK` opens a hit of the last search,
    `ok open PATH:L1-L2` the lines."""
    from .. import ops
    from .hits import search_request, show_hits

    req = search_request(
        query,
        tags,
        topics,
        where,
        k=k,
        mode=mode,
        per_doc=per_doc,
        diverse=diverse,
        scope=scope,
        path=path,
        since=since,
        until=until,
        explain=explain,
        min_score=min_score,
        trace=show_query,
        include_superseded=include_superseded,
        recency=recency,
        drift_penalty=drift_penalty,
    )
    f = folder()
    res = ops.search(ops.local(f, backend), req)
    filtered = bool(tags or topics or path or since or until or where)
    show_hits(f, res, json_, explain, fmt, filtered=filtered)


@app.command(
    "open",
    epilog="""Examples:

\b
  ok search "write-ahead logging" && ok open 1   # the first hit, at its line
  ok open 87d2d091278facbb#char0-1042            # a chunk, a note, a doc or a citation id
  ok open store/normalized/docs/wal.ok.md:12     # a path (from here or the root) and line
  ok open 2 | head -3                            # piped: path:line, then the lines
""",
)
def open_(
    ref: str = typer.Argument(
        ...,
        help="A rank of the last search, an id as `ok search` prints it, or "
        "PATH[:LINE[-LINE]] (as search, cite and ask print them).",
        autocompletion=completion.hit_refs,
    ),
    json_: bool = JsonOpt,
) -> None:
    """Open a hit in $VISUAL, else $EDITOR, else vi, at its line; piped, print its lines.

    A hit of the last search opens at its best sentence for that search (the one holding
    the most of the query's words), as the web explorer marks it. Ids are followed to where
    their text is now (as `ok cite verify` finds it). Editors of the VS Code family get
    `--goto FILE:LINE`, all others `+LINE FILE`."""
    from .. import ops
    from .hits import open_spot

    open_spot(ops.locate(folder(), ref, Path.cwd()), json_)


@app.command(
    "grep",
    epilog="""Output is rg's: `path:LINE:text` for a match, `path-LINE-text` for context, `--`
between groups; matches are coloured on a terminal (--color). Exit 1 when nothing matched.
Here -C N is lines of context, as in rg; name the folder with --root DIR.

Examples:

\b
  ok grep -i "analytical engine"
  ok grep -w Ada -C 2                  # whole words, two lines around each match
  ok grep -l "TODO|FIXME" --in mem     # the files that match, one a line
  ok grep -c Babbage                   # path:N, the matching lines of each file
  ok grep -o "[A-Z][a-z]+ Lovelace"     # only the matches
  ok grep -v "^$" -g '*.html.ok.md' -c # non-empty lines of the html documents
  ok grep "TODO|FIXME" --in mem --json | jq -r '.[].path' | sort -u
  ok grep Babbage -A 1 --json | jq -r '.[].after[].text'
""",
)
def grep_cmd(
    pattern: str = typer.Argument(..., help="Regular expression (ripgrep syntax)."),
    scope: str = scope_opt("all", "Where to grep."),
    ignore_case: bool = typer.Option(False, "-i", "--ignore-case"),
    fixed: bool = typer.Option(False, "-F", "--fixed-strings", help="Pattern is plain text."),
    word: bool = typer.Option(
        False, "-w", "--word-regexp", help="Only whole words: no letter, digit or _ around it."
    ),
    invert: bool = typer.Option(False, "-v", "--invert-match", help="The lines that do not match."),
    only: bool = typer.Option(
        False, "-o", "--only-matching", help="Each match alone, one a line: path:LINE:match."
    ),
    glob: list[str] | None = glob_opt(
        "Only files whose folder-relative path matches (rg's -g: `*.html.ok.md`, "
        "`memories/**`; `!GLOB` leaves files out)"
    ),
    context: int | None = typer.Option(
        None, "-C", "--context", metavar="N", min=0, help="Lines of context around each match."
    ),
    after: int | None = typer.Option(
        None, "-A", "--after-context", metavar="N", min=0, help="Lines after (overrides -C)."
    ),
    before: int | None = typer.Option(
        None, "-B", "--before-context", metavar="N", min=0, help="Lines before (overrides -C)."
    ),
    files_only: bool = typer.Option(
        False, "-l", "--files-with-matches", help="Only the paths of files that match."
    ),
    count: bool = typer.Option(False, "-c", "--count", help="Matching lines per file: path:N."),
    max_count: int = typer.Option(
        1000,
        "--max",
        metavar="N",
        help="Stop after this many matches in all (-l, -c: files; rg's -m counts per file).",
    ),
    color: str | None = typer.Option(
        None,
        "--color",
        metavar="auto|always|never",
        help="Colour matches: auto (on a terminal, unless NO_COLOR), always, never.",
    ),
    no_rg: bool = typer.Option(False, "--no-rg", help="Use the pure-Python matcher."),
    json_: bool = JsonOpt,
) -> None:
    """Grep memories and normalized documents (ripgrep; Python fallback without rg)."""
    from .. import ops
    from .matches import files_text, lines_text

    if color is not None:
        state.color = _color_choice(color)
    if files_only and count:
        raise typer.BadParameter("-l and -c do not combine", param_hint="'-l' / '-c'")
    if only and invert:
        raise typer.BadParameter(
            "-o and -v do not combine: a line that does not match has no match to show",
            param_hint="'-o' / '-v'",
        )
    paint = is_tty() and styled()
    globs = split_globs(glob)
    if files_only or count:
        res = ops.grep_files(
            folder(),
            pattern,
            scope=scope,
            ignore_case=ignore_case,
            fixed=fixed,
            word=word,
            count=count,
            max_files=max_count,
            use_rg=not no_rg,
            invert=invert,
            globs=globs,
        )
        emit(
            res.counts if res.counts is not None else res.paths,
            json_,
            plain=lambda _: files_text(res, paint),
        )
        if not res.paths:
            raise typer.Exit(NOTHING_FOUND)
        return
    hits = ops.grep(
        folder(),
        pattern,
        scope=scope,
        ignore_case=ignore_case,
        fixed=fixed,
        word=word,
        before=before if before is not None else context or 0,
        after=after if after is not None else context or 0,
        max_count=max_count,
        use_rg=not no_rg,
        invert=invert,
        globs=globs,
    )
    records: list[Any] = list(hits.hits)
    if only:  # one record per match, as the lines print them
        records = [
            {**h, "column": a + 1, "text": h["text"][a:b], "match": h["text"][a:b]}
            for h, spans in zip(hits.hits, hits.spans, strict=True)
            for a, b in spans
            if b > a
        ]
    emit(records, json_, plain=lambda _: lines_text(hits, paint, only))
    if not hits.hits:
        raise typer.Exit(NOTHING_FOUND)


def _register() -> None:
    from . import cmd_cite as cite_cli
    from . import cmd_graph as graph_cli
    from . import cmd_mem as mem_cli
    from . import cmd_store as store_cli

    app.add_typer(mem_cli.app, name="mem")
    app.add_typer(store_cli.app, name="store")
    app.add_typer(graph_cli.app, name="graph")
    from . import cmd_refresh as refresh_cli
    from . import cmd_trigger as trigger_cli

    app.command("refresh")(refresh_cli.refresh)
    app.command("events")(refresh_cli.events)
    app.add_typer(trigger_cli.app, name="trigger")
    from . import cmd_ask as ask_cli
    from . import cmd_distill as distill_cli
    from . import cmd_mcp as mcp_cli

    app.command("ask")(ask_cli.ask)
    app.command("mcp")(mcp_cli.mcp)
    app.add_typer(distill_cli.app, name="distill")
    app.add_typer(cite_cli.app, name="cite")
    from . import cmd_backfeed as backfeed_cli
    from . import cmd_bundle as bundle_cli
    from . import cmd_context as context_cli

    app.command("context")(context_cli.context)
    app.add_typer(bundle_cli.app, name="bundle")
    app.add_typer(backfeed_cli.app, name="backfeed")
    from . import cmd_config as config_cli

    app.add_typer(config_cli.app, name="config")
    from . import cmd_completion as completion_cli

    app.command("completion")(completion_cli.completion)
    from . import cmd_serve as serve_cli

    app.add_typer(serve_cli.app, name="serve")
    from . import cmd_daemon as daemon_cli

    app.add_typer(daemon_cli.app, name="daemon")


_register()


def hoist_root(argv: list[str]) -> list[str]:
    """Move `-C DIR` / `--root DIR` / `--root=DIR` given after the subcommand to the front,
    where the top-level option is parsed, so `ok search x -C DIR` works like `ok -C DIR
    search x`. Nothing after `--` is touched, nor the arguments of `ok mcp` and `ok serve`,
    whose own repeatable `--root` names the folders they serve, nor `-C` after `ok grep`,
    which is grep's lines of context (and `ok cite open`'s; `--root` still moves)."""
    at = command_at(argv)
    cmd = None if at is None else argv[at]
    if cmd in OWN_ROOT:
        return argv
    mine = own_c(argv, at)
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest.extend(argv[i:])
            break
        own = a == "-C" and mine is not None and i > mine
        if a in ROOT_FLAGS and i + 1 < len(argv) and not own:
            front += [a, argv[i + 1]]
            i += 2
            continue
        if a.startswith("--root="):
            front.append(a)
        else:
            rest.append(a)
        i += 1
    return front + rest


def run(argv: list[str] | None = None, routed: bool = False) -> int:
    """Run `ok` with `argv`; expected errors become one line on stderr. Returns the exit code.
    `routed`: for another process, by `ok serve`, which runs no second server."""
    import time

    started = time.monotonic()
    argv = hoist_root(sys.argv[1:] if argv is None else argv)
    code = _run(argv, routed)
    if not routed:  # a routed command was fast: `ok serve` ran it
        _serve_hint(time.monotonic() - started - state.waited, code, argv)
    return code


# commands that run until stopped, or never open a folder's graph
_NO_HINT = {"serve", "mcp", "init", "completion", "config", "open", "daemon"}


def _serve_hint(took: float, code: int, argv: list[str]) -> None:
    """Once per folder, on a terminal: a command that took over a second (its own time, not
    the person's) says that `ok serve` makes commands fast (setting hints.serve)."""
    if took <= 1.0 or code == 130 or state.long_running or not sys.stderr.isatty():
        return
    at = command_at(argv)
    if at is None or argv[at] in _NO_HINT or "--help" in argv or "-h" in argv:
        return
    from ..files.folder import Folder, find_root

    try:
        f = Folder(find_root(explicit=state.root))
        if not f.setting("hints.serve"):
            return
        said = f.cache_dir / "serve-hint"
        if said.exists():
            return
        f.cache_dir.mkdir(parents=True, exist_ok=True)
        said.write_text(f"{took:.1f}\n")
    except (OkError, OSError):
        return
    print(
        f"hint: that took {took:.1f} s, mostly loading the model and the graph; `ok serve` "
        "keeps them loaded, and every ok command on this folder then runs in it at once "
        "(said once; `ok config set hints.serve false` silences it)",
        file=sys.stderr,
    )


_built: list[Any] = []  # the click command tree, once built


def _command() -> Any:
    """The click command tree of `app`, built once per process: typer builds it anew on each
    call (a tenth of a second), and `ok serve` runs every routed command through it."""
    if not _built:
        _built.append(typer.main.get_command(app))
    return _built[0]


def _run(argv: list[str], routed: bool) -> int:
    state.root, state.json, state.tee, state.debug = None, False, None, False
    state.color = "auto"
    state.waited, state.long_running = 0.0, False
    at = command_at(argv)
    keys = at is not None and "keys" in argv[at + 1 :]  # ok serve keys …: fine
    if routed and at is not None and argv[at] in ("serve", "init") and not keys:
        print(f"Error: `ok {argv[at]}` does not run inside `ok serve`", file=sys.stderr)
        return 2
    try:
        # `ok serve` runs other processes' commands with this same function
        rv = _command()(args=argv, prog_name="ok", standalone_mode=False, obj={"run": run})
        return rv if isinstance(rv, int) else 0
    except OkError as e:
        if state.debug:
            raise
        err = _disk_full(e) or e
        print(f"Error: {err}", file=sys.stderr)
        return err.exit_code
    except typer.Exit as e:
        return int(e.exit_code or 0)
    except typer.Abort:
        print("Aborted.", file=sys.stderr)
        return 130
    except typer.TyperException as e:  # usage errors: click's show() prints usage and hint
        show = getattr(e, "show", None)
        if show is not None:
            show()
        else:
            print(f"Error: {e.format_message()}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise
    except Exception as e:  # a bug, not bad input: say so in one line, keep the traceback
        if state.debug:
            raise
        full = _disk_full(e)
        if full is not None:
            print(f"Error: {full}", file=sys.stderr)
            return full.exit_code
        first = (str(e).splitlines() or [""])[0][:300]
        print(
            f"Error: unexpected {type(e).__name__}: {first} (hint: rerun with --debug for "
            "the traceback, and please report it)",
            file=sys.stderr,
        )
        return ERROR


def _disk_full(e: BaseException) -> OkError | None:
    """A full disk, wherever it surfaced (the OS, the graph engine, SQLite), as one error."""
    import contextlib

    from ..errors import disk_full
    from ..files.folder import find_root

    root = None
    with contextlib.suppress(Exception):
        root = find_root(explicit=state.root)
    return disk_full(e, root)


def main() -> None:
    """Console entry point."""
    try:
        code = run()
        sys.stdout.flush()
    except BrokenPipeError:
        # downstream closed the pipe (`ok … | head`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 0
    raise SystemExit(code)
