"""`ok daemon start|stop|status`: a folder's resident process, by hand.

The first `ok` command in a folder that no server owns starts one (setting serve.auto;
OK_NO_DAEMON=1 turns it off): it keeps the graph and the model loaded, every later command
of the same user on the folder runs in it, and it exits after serve.idle_exit seconds
without a command. These commands start one without a command to run, stop one, and list
them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..errors import NOTHING_FOUND, BadInput, OkError
from . import spawn
from .common import folder
from .output import JsonOpt, emit

app = typer.Typer(
    help="The folder's resident process, which keeps the graph and the model loaded so "
    "that ok commands run at once: start, stop, status.",
    no_args_is_help=True,
)


@app.command()
def start(json_: bool = JsonOpt) -> None:
    """Start the folder's resident process now (as the first command in the folder would,
    even with serve.auto false); nothing when a server owns the folder already.

    \b
      ok daemon start && ok search "retry storms"
    """
    f = folder()
    was = spawn.owner(f.root)
    pid = was if was is not None else spawn.start(f.root, tell=False)
    if pid is None:
        raise OkError(
            "the folder's resident process could not start",
            f"its log says why: {f.cache_dir / spawn.LOG}",
        )
    emit(
        {"root": str(f.root), "pid": pid, "started": was is None},
        json_,
        plain=lambda d: (
            f"{'started' if d['started'] else 'already served by'} pid {d['pid']}: ok "
            "commands in this folder run in it"
        ),
    )


@app.command()
def stop(json_: bool = JsonOpt) -> None:
    """Stop the folder's resident process (exit 1 when it has none). The next command
    starts a new one unless serve.auto is false or OK_NO_DAEMON=1; an `ok serve` started by
    hand is not stopped here.

    \b
      ok daemon stop
    """
    f = folder()
    try:
        pid = spawn.stop(f.root)
    except TimeoutError as e:
        raise BadInput(str(e), "look at it (ps), then end it: kill -9 PID") from e
    if pid is None:
        claim = spawn.claim(f.root) or {}
        served = spawn.owner(f.root)
        said = (
            f"the folder is served by `ok serve` (pid {served}), not a resident process; "
            "stop it where it runs"
            if served is not None and not claim.get("resident")
            else "the folder has no resident process"
        )
        emit({"root": str(f.root), "stopped": None}, json_, plain=lambda _: said)
        raise typer.Exit(NOTHING_FOUND)
    emit(
        {"root": str(f.root), "stopped": pid},
        json_,
        plain=lambda d: f"stopped the resident process (pid {d['stopped']})",
    )


@app.command()
def status(json_: bool = JsonOpt) -> None:
    """List this user's resident processes (every folder): folder, pid, since when, the
    commands run, memory; and the `ok serve` that owns this folder, if one does.

    \b
      ok daemon status
      ok daemon status --json | jq -r '.[].root'
    """
    here = _here()
    rows: list[dict[str, Any]] = []
    for r in spawn.listed(None if here is None else here / ".ok"):
        rows.append({"kind": "resident", **r, "this": here is not None and Path(r["root"]) == here})
    if here is not None and not any(r["this"] for r in rows):
        pid = spawn.owner(here)
        claim = spawn.claim(here) or {}
        if pid is not None:
            rows.append(
                {
                    "kind": "resident" if claim.get("resident") else "serve",
                    "root": str(here),
                    "pid": pid,
                    "since": claim.get("since"),
                    "url": claim.get("url") or None,
                    "this": True,
                }
            )
    emit(rows, json_, plain=_table)


def _here() -> Path | None:
    try:
        return folder().root
    except OkError:
        return None


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no resident process runs"
    lines = []
    for r in rows:
        parts = [r["kind"], f"pid {r['pid']}", r["root"], f"since {r.get('since')}"]
        if r["kind"] == "resident" and "commands" in r:
            parts.append(f"{r['commands']} commands")
            if r.get("last_active"):
                parts.append(f"last {r['last_active']}")
            if r.get("idle_exit"):
                parts.append(f"exits after {r['idle_exit']:g} s idle")
        if r.get("rss_mb") is not None:
            parts.append(f"{r['rss_mb']} MB")
        if r.get("url"):
            parts.append(r["url"])
        if r.get("this"):
            parts.append("(this folder)")
        lines.append("  ".join(str(p) for p in parts))
    return "\n".join(lines)
