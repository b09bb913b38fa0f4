"""`ok distill …`: memory notes distilled from cited passages."""

from __future__ import annotations

import sys

import typer

from ..records import DistillRun
from . import output
from .common import TagsOpt, TopicsOpt, folder, limit_opt, scope_opt, split_labels, writing
from .output import FormatOpt, JsonOpt, emit, emit_records, formats

app = typer.Typer(
    help="Distill passages into memory notes that cite their sources.", no_args_is_help=True
)


@app.command(
    epilog="""Examples:

\b
  ok distill prompts
  ok distill prompts --json | jq -r '.[].name'
"""
)
@formats
def prompts(json_: bool = JsonOpt, fmt: str | None = FormatOpt) -> None:
    """List the distillation prompts."""
    from .. import ops

    emit_records(
        ops.distill_prompts(),
        json_,
        fmt,
        plain=lambda ps: "\n".join(f"{p['name']}\t{p['description']}" for p in ps),
    )


@app.command(
    "get-prompt",
    epilog="""Examples:

\b
  ok distill get-prompt extract-facts                     # the instructions alone
  ok search "wal" -k 3 | ok distill get-prompt summarize-insights --text -
""",
)
def get_prompt(
    name: str = typer.Argument(..., help="Prompt name (see `ok distill prompts`)."),
    text: str = typer.Option(None, "--text", help="Material to append (`-` reads stdin)."),
    json_: bool = JsonOpt,
) -> None:
    """Print a prompt, ready to paste into any model (optionally with the material)."""
    from .. import ops

    material = output.read_stdin_text if text == "-" else text
    emit(ops.distill_prompt(name, material), json_, plain=lambda d: d["prompt"])


@app.command(
    epilog="""Examples:

\b
  ok distill create "WAL flushes the log before the data files [1]." c-2b78d9272c9d171e
  ok distill create "Recovery replays the log [1]; one writer at a time [2]." \\
      ee43fb66e85b241f#char0-1079 m-20261130-ab9s --tags wal --json
"""
)
def create(
    text: str = typer.Argument(
        ..., help="The memory's text; [N] refers to the N-th CITE_ID (`-` reads stdin)."
    ),
    cite_ids: list[str] = typer.Argument(
        ..., help="Ids it rests on: chunk ids, note ids, doc ids or persisted citation ids."
    ),
    tags: list[str] = TagsOpt,
    topics: list[str] = TopicsOpt,
    json_: bool = JsonOpt,
) -> None:
    """Write a memory note that cites its sources (DERIVED_FROM edges to them)."""
    from .. import ops

    f = folder()
    body = output.read_stdin_text() if text == "-" else text
    with writing(f, "ok distill create"):
        done = ops.distill_note(
            f, body, cite_ids, tags=split_labels(tags), topics=split_labels(topics)
        )
    emit(done.as_dict(f), json_, plain=lambda d: d["id"])


@app.command(
    epilog="""Examples (an LLM must be configured: llm.base_url, llm.model):

\b
  ok distill run extract-facts --query "write-ahead logging"
  ok distill run memory-synthesis -q "CRISPR" -k 5 --tags crispr --json | jq .note.id
"""
)
def run(
    prompt: str = typer.Argument(..., help="Prompt name (see `ok distill prompts`)."),
    query: str = typer.Option(..., "--query", "-q", help="What to distill (searched first)."),
    k: int = limit_opt(8, "Passages to give the model."),
    scope: str = scope_opt("all", "Where to look."),
    tags: list[str] = TagsOpt,
    topics: list[str] = TopicsOpt,
    json_: bool = JsonOpt,
) -> None:
    """Search, distill the passages with the configured LLM, save a cited memory note."""
    from .. import ops

    f = folder()
    streaming = not output.want_json(json_) and output.is_tty()

    def on_token(tok: str) -> None:
        sys.stderr.write(tok)
        sys.stderr.flush()

    res = ops.distill_run(
        f,
        prompt,
        query,
        k=k,
        tags=split_labels(tags),
        topics=split_labels(topics),
        scope=scope,
        on_token=on_token if streaming else None,
    )
    if streaming:
        sys.stderr.write("\n")
    if res["note"] is None:
        output.warn(f"nothing distilled: {res.get('reason')}")
    emit(res, json_, plain=_plain_run)


def _plain_run(r: DistillRun) -> str:
    return r["note"]["id"] if r["note"] else ""
