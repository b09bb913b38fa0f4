"""`ok ask`: a question answered from the folder, with [N] citations."""

from __future__ import annotations

import sys

import typer

from ..errors import NOTHING_FOUND
from ..files.folder import Folder
from ..records import Answer
from . import output
from .common import IncludeSupersededOpt, LlmOpt, RecencyOpt, folder, limit_opt, scope_opt
from .output import FormatOpt, JsonOpt, emit_record, formats


@formats
def ask(
    question: str = typer.Argument(..., help="The question (`-` reads it from stdin)."),
    k: int | None = limit_opt(None, "Passages to retrieve (default 8: ask.k)."),
    scope: str = scope_opt("all", "Where to look."),
    llm: bool | None = LlmOpt,
    no_stream: bool = typer.Option(False, "--no-stream", help="Do not stream the answer."),
    allow_uncited: bool = typer.Option(
        False,
        "--allow-uncited",
        help="Accept an LLM answer that cites no passage (exit 0); without it such an answer "
        "is printed, marked `ungrounded`, and the exit code is 1.",
    ),
    include_superseded: bool = IncludeSupersededOpt,
    recency: str | None = RecencyOpt,
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """Answer a question from notes and documents; every [N] maps to a cite object.

    With an LLM configured (llm.base_url, llm.model; key from llm.api_key_env) the answer is
    grounded in the retrieved passages; without one it is made of the best matching
    sentences, each cited. Says so when the folder does not hold the answer, and exits 1
    then, as a search that finds nothing; so does an LLM answer that cites no passage,
    unless --allow-uncited. When the passages it draws on disagree (a different number or
    date, or one negated), the answer says so first and cites both sides.

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
    streaming = not no_stream and output.records_format(fmt, json_) is None and output.is_tty()
    streamed: list[str] = []

    def on_token(tok: str) -> None:
        streamed.append(tok)
        sys.stdout.write(tok)
        sys.stdout.flush()

    res = ops.ask(
        ops.Call(f),
        question,
        k=k,
        scope=scope,
        use_llm=llm is not False,
        on_token=on_token if streaming else None,
        include_superseded=include_superseded,
        recency=recency,
    )
    if res.get("warning"):
        output.warn(res["warning"])
    if streamed:
        sys.stdout.write("\n")
        if res["answer"] != "".join(streamed).strip():
            sys.stdout.write(f"\n{res['answer']}\n")
        sys.stdout.write(_sources(f, res) + "\n")
    else:
        emit_record(res, json_, fmt, plain=lambda r: f"{r['answer']}\n{_sources(f, r)}")
    if res["insufficient"]:  # the answer says so; a script learns it from the exit code
        raise typer.Exit(NOTHING_FOUND)
    if res.get("ungrounded") and not allow_uncited:  # nothing in it is checked: a "no"
        output.info("hint: --allow-uncited accepts an answer that cites nothing")
        raise typer.Exit(NOTHING_FOUND)


def _sources(f: Folder, r: Answer) -> str:
    from .. import ops

    lines = [""]
    wheres = ops.where(f, list(r["citations"]))
    for c, where in zip(r["citations"], wheres, strict=True):
        quote = " ".join(c["quote"].split())
        quote = quote if len(quote) <= 100 else quote[:99] + "…"
        lines.append(f"[{c['n']}] {where}  {quote}")
    model = r.get("model") or "extractive (no LLM)"
    if r.get("fallback"):
        model += f" (fallback: {r['fallback']})"
    lines.append(f"confidence: {r['confidence']:.2f} ({r['confidence_label']}) · {model}")
    return "\n".join(lines)
