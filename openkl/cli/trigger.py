"""`ok trigger …`: semantic triggers on new knowledge."""

from __future__ import annotations

import typer

from ..records import TriggerTest
from . import output
from .common import folder, writing
from .output import JsonOpt, emit

app = typer.Typer(
    help="Semantic triggers: fire an event (and a command) when new notes or "
    "documents come close to an example text.",
    no_args_is_help=True,
)


@app.command()
def add(
    name: str = typer.Argument(..., help="Trigger name (lowercase, digits, - _ .)."),
    example: str = typer.Option(
        ..., "--example", "-e", help="Text that new knowledge is compared with (`-` reads stdin)."
    ),
    threshold: float = typer.Option(0.8, "--threshold", help="Cosine similarity to fire at."),
    exec_: str = typer.Option(
        None, "--exec", metavar="CMD", help="Shell command run with the event JSON on stdin."
    ),
    env: list[str] = typer.Option(
        None,
        "--env",
        metavar="NAME",
        help="Pass this environment "
        "variable on to the command (repeatable); it gets only PATH, "
        "HOME, the locale and OK_ROOT otherwise.",
    ),
    scope: str = typer.Option("all", "--in", help="What to watch: all, mem or store."),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds the command may run."),
    replace: bool = typer.Option(False, "--replace", help="Overwrite a trigger of that name."),
    json_: bool = JsonOpt,
) -> None:
    """Add a trigger (a file in triggers/). It checks only what is indexed from now on.

    Examples:

    \b
      ok trigger add gene-editing -e "CRISPR base editing in human cells" --threshold 0.6
      ok trigger add papers -e "retrieval benchmarks" --in store --exec 'jq -r .path >> new.txt'
      ok trigger add alerts -e "outage" --exec 'curl -d @- "$HOOK_URL"' --env HOOK_URL
    """
    from .. import ops

    if example == "-":
        example = output.read_stdin_text()
    f = folder()
    with writing(f, "ok trigger add"):
        t = ops.add_trigger(
            f,
            name,
            example,
            threshold=threshold,
            scope=scope,
            exec_=exec_,
            timeout=timeout,
            replace=replace,
            env=env,
        )
    emit(t.as_dict(), json_, plain=lambda d: f"added trigger {d['name']}")


@app.command("list")
def list_(json_: bool = JsonOpt) -> None:
    """List triggers."""
    from .. import ops

    trigs, problems = ops.list_triggers(folder())
    for p in problems:
        output.warn(p)
    emit(
        [t.as_dict() for t in trigs],
        json_,
        plain=lambda rs: "\n".join(
            f"{r['name']}\t{r['threshold']}\t{r['scope']}\t{_short(r['example'])}"
            + (f"\texec: {r['exec']}" if r["exec"] else "")
            + (f"\tenv: {','.join(r['env'])}" if r.get("env") else "")
            for r in rs
        ),
    )


def _short(text: str, n: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


@app.command()
def remove(name: str = typer.Argument(..., help="Trigger name."), json_: bool = JsonOpt) -> None:
    """Remove a trigger."""
    from .. import ops

    f = folder()
    with writing(f, "ok trigger remove"):
        t = ops.remove_trigger(f, name)
    emit({"removed": t.name}, json_, plain=lambda d: f"removed trigger {d['removed']}")


@app.command()
def test(
    text: str = typer.Argument(..., help="Text to test (`-` reads stdin)."), json_: bool = JsonOpt
) -> None:
    """Show how close a text is to each trigger, and which would fire (nothing is written)."""
    from .. import ops

    if text == "-":
        text = output.read_stdin_text()
    rows = ops.match_triggers(folder(), text)

    def plain(rs: list[TriggerTest]) -> str:
        return (
            "\n".join(
                f"{r['name']}\t{r['similarity']:.4f}\t"
                f"{'fires' if r['fires'] else 'quiet'} (threshold {r['threshold']})"
                for r in rs
            )
            or "No triggers."
        )

    emit(rows, json_, plain=plain)
