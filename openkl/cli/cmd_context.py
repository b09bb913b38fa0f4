"""`ok context QUERY`: the entity subgraph relevant to a question."""

from __future__ import annotations

import typer

from ..errors import NOTHING_FOUND
from ..records import Context
from .common import LlmOpt, folder, limit_opt
from .output import FormatOpt, JsonOpt, emit_record, formats, read_stdin_text, warn


@formats
def context(
    query: str = typer.Argument(..., help="A question or topic (`-` reads stdin)."),
    k: int = limit_opt(8, "Passages to retrieve."),
    max_entities: int = typer.Option(12, "--max-entities", help="Entities to return."),
    min_confidence: float = typer.Option(
        None, "--min-confidence", help="Confidence floor (default entities.min_confidence)."
    ),
    llm: bool = LlmOpt,
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """Hybrid retrieval → relevant entities, relationships, sources, reasoning, confidence.

    Notes among the sources bring the notes they [[link]] to and the notes that link to
    them (`linked_notes`).

    Examples:

    \b
      ok context "how does SQLite survive a crash"
      ok context "who worked with Babbage" --json | jq .entities
    """
    from .. import ops

    if query == "-":
        query = read_stdin_text().strip()
    data = ops.context(
        ops.Call(folder()),
        query,
        k=k,
        max_entities=max_entities,
        min_confidence=min_confidence,
        use_llm=llm,
    )
    for w in data["warnings"]:
        warn(w)

    def plain(d: Context) -> str:
        lines = [
            f"confidence: {d['confidence']} ({d['confidence_score']:.2f}, {d['method']})",
            d["reasoning"],
            "",
        ]
        for e in d["entities"]:
            lines.append(f"{e['confidence']:.2f}\t{e['type']}\t{e['name']}")
        if d["relationships"]:
            lines.append("")
        for r in d["relationships"]:
            lines.append(f"{r['from_name']} -{r['type']}-> {r['to_name']} ({r['confidence']:.2f})")
        if d["linked_notes"]:
            lines += ["", "linked notes:"]
        for n in d["linked_notes"]:
            arrow = "->" if n["direction"] == "out" else "<-"
            lines.append(f"  {n['via']} {arrow} {n['id']}  {n['title'] or n['path']}")
        return "\n".join(lines)

    emit_record(data, json_, fmt, plain=plain)
    if not data["entities"] and not data["sources"]:
        raise typer.Exit(NOTHING_FOUND)  # nothing to go on, as a search that finds nothing
