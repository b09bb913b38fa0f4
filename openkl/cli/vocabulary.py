"""The words of the command line: one spelling for each idea a flag stands for, and what
each exit code means. docs/gen_commands.py prints both tables in docs/commands.md, and
tests/test_flags.py walks every command's options against them. Standard library only."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Idea:
    """One thing a flag may stand for, and how it is spelt wherever it applies."""

    name: str
    flags: tuple[str, ...]  # every command with the idea accepts each of these
    dests: tuple[str, ...]  # the parameter names that hold it in the code
    meaning: str
    metavar: str = ""
    aliases: tuple[str, ...] = ()  # older spellings, still accepted where they were
    requires: tuple[str, ...] = ()  # other ideas a command with this one has as well


IDEAS: tuple[Idea, ...] = (
    Idea("json", ("--json",), ("json_",), "JSON on stdout, in stable shapes (for jq)"),
    Idea(
        "format",
        ("--format",),
        ("fmt",),
        "records as a JSON array (as --json), JSON lines, or CSV/TSV with a header row; "
        "a command that prints one object prints one row",
        "json|jsonl|csv|tsv",
        requires=("csv", "tsv"),
    ),
    Idea(
        "export format",
        ("--format",),
        ("format_",),
        "`graph export`: what to write (an AKS bundle, GraphML, CSV tables, a page)",
        "aks|graphml|csv|html",
    ),
    Idea(
        "input format",
        ("--format",),
        ("input_format",),
        "`store ingest`: only files of this type, by extension; with `-`, what is piped",
        "pdf|docx|html|md|…",
    ),
    Idea("csv", ("--csv",), ("csv",), "the same as --format csv"),
    Idea("tsv", ("--tsv",), ("tsv",), "the same as --format tsv"),
    Idea("limit", ("-k", "-n", "--limit"), ("k", "limit"), "at most N results", "N"),
    Idea(
        "scope",
        ("--in",),
        ("scope",),
        "notes (mem; `memory` is the same), documents (store) or both (all)",
        "all|mem|store",
    ),
    Idea("tags", ("-t", "--tag", "--tags"), ("tag", "tags"), "tags, repeated or comma-separated"),
    Idea("topics", ("--topic", "--topics"), ("topic", "topics"), "topics, as --tag"),
    Idea(
        "since",
        ("--since",),
        ("since",),
        "on or after: an ISO date or time, or a span back from now (30m, 12h, 7d, 2w)",
        "WHEN",
    ),
    Idea("until", ("--until",), ("until",), "on or before (a date includes its day)", "WHEN"),
    Idea(
        "where",
        ("--where",),
        ("where",),
        "only where the file's frontmatter matches: KEY=VALUE (a list contains it), KEY!=, "
        "KEY>=, KEY<… (dates and numbers compare), a bare KEY (it is set); repeatable",
        "KEY=VALUE",
    ),
    Idea("type", ("-t", "--type"), ("type_",), "only this type", "TYPE"),
    Idea("doc", ("--doc",), ("doc",), "only about this document or note", "ID|PATH"),
    Idea("min-confidence", ("--min-confidence",), ("min_confidence",), "a confidence floor"),
    Idea(
        "depth",
        ("-d", "--depth", "--max-depth"),
        ("depth",),
        "how many hops (links, relationships, versions) away",
        "N",
    ),
    Idea(
        "glob",
        ("-g", "--glob", "--include"),
        ("glob", "include"),
        "only files (or links) matching this glob, repeated or comma-separated",
        "GLOB",
    ),
    Idea("context", ("-C", "--context"), ("context",), "lines of context around it", "N"),
    Idea(
        "max",
        ("--max",),
        ("max_count",),
        "`ok grep`: stop after N matches in all (-l, -c: files); -n, -k are not limits in "
        "rg, and rg's -m counts per file",
        "N",
    ),
    Idea("dry-run", ("-n", "--dry-run"), ("dry_run",), "only say what would be done"),
    Idea("yes", ("-y", "--yes"), ("yes",), "do not ask for a confirmation"),
    Idea(
        "llm",
        ("--llm", "--no-llm"),
        ("llm",),
        "use the configured LLM, or not (default: when one is configured)",
    ),
    Idea("refresh", ("--refresh",), ("every",), "a refresh policy: an interval (6h, 1d, 7d)"),
    Idea("cron", ("--cron",), ("cron",), "a refresh on a cron schedule (UTC); wins over --refresh"),
)

BY_NAME = {i.name: i for i in IDEAS}

# commands that print records: each takes --format (and --csv, --tsv)
LIST_COMMANDS = (
    "search",
    "ask",
    "context",
    "events",
    "mem list",
    "mem search",
    "mem conflicts",
    "store list",
    "store search",
    "store history",
    "graph cypher",
    "graph entities",
    "cite make",
    "cite verify",
    "cite list",
    "trigger list",
    "trigger test",
    "backfeed queue",
    "distill prompts",
    "config list",
)


@dataclass(frozen=True)
class ExitCode:
    code: int
    name: str
    meaning: str


# rg's and grep's: 0 found, 1 nothing found, 2 an error (usage errors too)
EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(0, "success", "the command did what was asked (a list with nothing in it too)"),
    ExitCode(
        1,
        "nothing found",
        "a query found nothing (search's no good match or no hit within the filters, grep, "
        "ask and context with nothing to go on) or a check said no (`ask`: an LLM answer "
        "that cites nothing, unless --allow-uncited; `cite verify`: a "
        "citation changed or missing; `cite open` of a missing quote; `doctor`: a check "
        "failed; a confirmation declined)",
    ),
    ExitCode(
        2,
        "error",
        "nothing or not all was done: the command line is wrong (unknown option, bad value), "
        "or the input (an unknown id, a file that cannot be read, a refused query), or the "
        "folder (busy, full, not found)",
    ),
    ExitCode(
        3,
        "partial",
        "the work was done, but some of it failed: a file found but unreadable "
        "(`store ingest`), a source that could not be fetched (`refresh`, `store web`), files "
        "that could not be indexed as written (`sync`, `index`)",
    ),
    ExitCode(130, "interrupted", "Ctrl-C (SIGINT)"),
)
