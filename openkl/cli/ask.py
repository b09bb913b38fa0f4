"""`ok ask`: a question answered from the folder, with [N] citations."""

from __future__ import annotations

import sys

import typer

from ..records import Answer
from . import output
from .common import IncludeSupersededOpt, RecencyOpt, folder
from .output import JsonOpt, emit


def ask(
    question: str = typer.Argument(..., help="The question (`-` reads it from stdin)."),
    k: int | None = typer.Option(
        None, "-k", "--limit", metavar="N", help="Passages to retrieve (default 8: ask.k)."
    ),
    scope: str = typer.Option(
        "all", "--in", metavar="all|mem|store", help="Where to look: notes, documents or both."
    ),
    no_llm: bool = typer.Option(
        False, "--no-llm", help="Extractive answer even when an LLM is configured."
    ),
    no_stream: bool = typer.Option(False, "--no-stream", help="Do not stream the answer."),
    include_superseded: bool = IncludeSupersededOpt,
    recency: str | None = RecencyOpt,
    json_: bool = JsonOpt,
) -> None:
    """Answer a question from notes and documents; every [N] maps to a cite object.

    With an LLM configured (llm.base_url, llm.model; key from llm.api_key_env) the answer is
    grounded in the retrieved passages; without one it is made of the best matching
    sentences, each cited. Says so when the folder does not hold the answer.

    Examples:

    \b
      ok ask "what happens to committed transactions when the process crashes?"
      ok ask "who was Ada Lovelace?" --in store -k 4 --json | jq -r .answer
      ok ask "what is WAL?" --json | jq '.citations' | ok cite verify -
    """
    from .. import ops

    if question == "-":
        question = output.read_stdin_text().strip()
    f = folder()
    # an LLM's answer streams to a terminal; ops calls on_token only when an LLM answers
    streaming = not no_stream and not output.want_json(json_) and output.is_tty()
    streamed: list[str] = []

    def on_token(tok: str) -> None:
        streamed.append(tok)
        sys.stdout.write(tok)
        sys.stdout.flush()

    res = ops.ask(
        f,
        question,
        k=k,
        scope=scope,
        use_llm=not no_llm,
        on_token=on_token if streaming else None,
        include_superseded=include_superseded,
        recency=recency,
    )
    if streamed:
        sys.stdout.write("\n")
        if res["answer"] != "".join(streamed).strip():
            sys.stdout.write(f"\n{res['answer']}\n")
        sys.stdout.write(_sources(res) + "\n")
        return
    emit(res, json_, plain=lambda r: f"{r['answer']}\n{_sources(r)}")


def _sources(r: Answer) -> str:
    lines = [""]
    for c in r["citations"]:
        loc = c["loc"]
        quote = " ".join(c["quote"].split())
        quote = quote if len(quote) <= 100 else quote[:99] + "…"
        lines.append(f"[{c['n']}] {c['path']}:{loc['start']}-{loc['end']}  {quote}")
    model = r.get("model") or "extractive (no LLM)"
    lines.append(f"confidence: {r['confidence']:.2f} ({r['confidence_label']}) · {model}")
    return "\n".join(lines)
