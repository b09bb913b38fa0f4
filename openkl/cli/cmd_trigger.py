"""`ok trigger …`: semantic triggers on new knowledge."""

from __future__ import annotations

import typer

from ..records import TriggerTest
from . import output
from .common import folder, scope_opt, writing
from .output import FormatOpt, JsonOpt, emit, emit_records, formats

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
        None,
        "--exec",
        metavar="CMD",
        help="Shell command run with the event JSON on stdin (adding it approves it on "
        "this machine).",
    ),
    env: list[str] = typer.Option(
        None,
        "--env",
        metavar="NAME",
        help="Pass this environment "
        "variable on to the command (repeatable); it gets only PATH, "
        "HOME, the locale and OK_ROOT otherwise, and never API keys, JWT secrets or OK_*.",
    ),
    scope: str = scope_opt("all", "What to watch."),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds the command may run."),
    replace: bool = typer.Option(False, "--replace", help="Overwrite a trigger of that name."),
    json_: bool = JsonOpt,
) -> None:
    """Add a trigger (a file in triggers/). It checks what is indexed from now on (`ok
    trigger scan NAME` checks what is there already).

    A command (--exec) added here is approved on this machine; one that arrives otherwise
    (a pull, a hand edit) waits for `ok trigger approve`.

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
            approved_by="ok trigger add",
        )
    emit(t.as_dict(), json_, plain=lambda d: f"added trigger {d['name']}")


@app.command()
def approve(
    names: list[str] = typer.Argument(..., help="Trigger names."), json_: bool = JsonOpt
) -> None:
    """Let a trigger's command run on this machine, as its file says it now.

    A command that arrived by a pull or a hand edit does not run until approved here; the
    trigger still fires its event, which says so, and `ok status` and `ok doctor` list it.
    The approval is kept in .ok/ (not in git) for this exact command and its --env list:
    a changed command waits again.

    \b
      ok trigger list                 # check the exec: of each
      ok trigger approve new-papers
    """
    from .. import ops

    f = folder()
    done = []
    with writing(f, "ok trigger approve"):
        for name in dict.fromkeys(names):
            t = ops.approve_trigger(f, name, by="ok trigger approve")
            done.append({"name": t.name, "exec": t.exec, "env": t.env})
    emit(
        done,
        json_,
        plain=lambda rs: "\n".join(
            f"approved trigger {r['name']}: runs `{r['exec']}`"
            + (f" with {', '.join(r['env'])}" if r["env"] else "")
            for r in rs
        ),
    )


@app.command("list")
@formats
def list_(json_: bool = JsonOpt, fmt: str | None = FormatOpt) -> None:
    """List triggers. `approved` says whether a command may run on this machine (null: the
    trigger has none)."""
    from .. import ops

    f = folder()
    trigs, problems = ops.list_triggers(f)
    approved = ops.approved_triggers(f)
    for p in problems:
        output.warn(p)
    emit_records(
        [{**t.as_dict(), "approved": t.name in approved if t.exec else None} for t in trigs],
        json_,
        fmt,
        plain=lambda rs: "\n".join(
            f"{r['name']}\t{r['threshold']}\t{r['scope']}\t{_short(r['example'])}"
            + (f"\texec: {r['exec']}" if r["exec"] else "")
            + (f"\tenv: {','.join(r['env'])}" if r.get("env") else "")
            + (
                f"\twaits for approval (ok trigger approve {r['name']})"
                if r["approved"] is False
                else ""
            )
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
def scan(
    name: str | None = typer.Argument(None, help="Only this trigger (default: every one)."),
    json_: bool = JsonOpt,
) -> None:
    """Check what the folder already holds against the triggers, firing what matches.

    A trigger checks what is indexed after it was added; a scan checks every current
    document and live note, so it finds what was there before. Each trigger fires once per
    document or note version, whatever found it: what fired before (a write, an earlier
    scan) does not fire again, so a scan can be run at any time (`ok serve` runs one every
    triggers.scan_every seconds when set). Commands of approved triggers run as after a
    write.

    Examples:

    \b
      ok trigger add outages -e "the service was down" --threshold 0.6
      ok trigger scan outages
      ok trigger scan --json | jq -r '.fired[].path'
    """
    from .. import ops

    f = folder()
    with writing(f, "ok trigger scan"):
        rep = ops.scan_triggers(f, name)
    output.info(
        f"checked {rep['docs']} document(s) and {rep['notes']} note(s) against "
        f"{len(rep['triggers'])} trigger(s): {len(rep['fired'])} fired"
    )
    emit(
        rep,
        json_,
        plain=lambda r: "\n".join(
            f"{e['trigger']}\t{e['similarity']:.4f}\t{e['path']}\t{_short(e['quote'])}"
            for e in r["fired"]
        ),
    )


@app.command()
@formats
def test(
    text: str = typer.Argument(..., help="Text to test (`-` reads stdin)."),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
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

    emit_records(rows, json_, fmt, plain=plain)
