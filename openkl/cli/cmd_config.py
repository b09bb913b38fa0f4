"""`ok config …`: show and change the folder's settings (`.ok/config.yml`)."""

from __future__ import annotations

from typing import Any

import typer

from ..records import SettingValue
from . import output
from .common import folder
from .output import FormatOpt, JsonOpt, emit, emit_records, formats

app = typer.Typer(
    help="Show and change settings: every key with its value, its type and where the value "
    "comes from (default, .ok/config.yml or an OK_* environment variable). "
    "The reference is docs/config.md.",
    epilog="""Examples:

\b
  ok config list --changed
  ok config get search.k
  ok config set search.k 5
  ok config unset search.k
  OK_SEARCH_K=3 ok config get search.k --json   # the environment wins""",
    no_args_is_help=True,
)

KeyArg = typer.Argument(..., metavar="KEY", help="Dotted setting name, e.g. search.k.")


def _warn_unknown(data: dict[str, Any]) -> None:
    from ..settings import suggest, unknown_keys

    for key in unknown_keys(data):
        output.warn(
            f".ok/config.yml sets {key!r}, which is not a setting and is ignored "
            f"({suggest(key)}; `ok config unset {key}` removes it)"
        )


def _plain_row(d: SettingValue) -> str:
    from ..settings import render

    where = f"env {d['env']}" if d["source"] == "env" else d["source"]
    return f"{d['key']}\t{render(d['value'])}\t{where}\t{d['type']}\t{d['help']}"


def _render_rows(rows: list[SettingValue]) -> None:
    from rich.table import Table

    from ..settings import render

    table = Table(expand=True)
    table.add_column("key", overflow="fold", ratio=2)
    table.add_column("value", overflow="fold", ratio=2)
    table.add_column("from", ratio=1)
    table.add_column("type", ratio=1, overflow="fold")
    table.add_column("description", ratio=4)
    for d in rows:
        where = f"env {d['env']}" if d["source"] == "env" else d["source"]
        style = "" if d["source"] == "default" else "bold"
        table.add_row(d["key"], render(d["value"]), where, d["type"], d["help"], style=style)
    output.console().print(table)


@app.command("list")
@formats
def list_(
    changed: bool = typer.Option(
        False, "--changed", help="Only settings not at their default (set in the file or env)."
    ),
    json_: bool = JsonOpt,
    fmt: str | None = FormatOpt,
) -> None:
    """Every setting: key, effective value, where it comes from, type and description.

    Bold rows (on a terminal) are not at their default. Plain output is one tab-separated
    line per setting: key, value, source, type, description.

    Examples:

    \b
      ok config list
      ok config list --changed
      ok config list --json | jq -r '.[] | select(.source != "default") | .key'
    """
    from ..settings import DECLARED, resolve

    f = folder()
    rows = [resolve(s, f.config).as_dict() for s in DECLARED]
    if changed:
        rows = [d for d in rows if d["source"] != "default"]
    _warn_unknown(f.config)
    emit_records(
        rows, json_, fmt, render=_render_rows, plain=lambda rs: "\n".join(map(_plain_row, rs))
    )


@app.command("get")
def get(key: str = KeyArg, json_: bool = JsonOpt) -> None:
    """Print one setting's effective value (`--json`: with its source, type and default).

    An unset value prints nothing.

    Examples:

    \b
      ok config get search.k
      ok config get llm.base_url --json
      k=$(ok config get search.k)
    """
    from ..settings import lookup, render, resolve

    f = folder()
    d = resolve(lookup(key), f.config).as_dict()
    emit(d, json_, plain=lambda d: render(d["value"]))


@app.command("set")
def set_(
    key: str = KeyArg,
    value: str = typer.Argument(
        ..., metavar="VALUE", help="The new value, checked against the type."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Write one setting to .ok/config.yml (atomically; other keys are kept).

    The value must fit the setting's type (`ok config list` shows it): an integer, a number,
    true/false or one of the listed choices. An `OK_*` environment variable for the key still
    wins; you are told when one is set. Comments other than the file's opening lines are not
    kept.

    Examples:

    \b
      ok config set search.k 5
      ok config set search.mode fts
      ok config set llm.base_url http://localhost:11434/v1
      ok config set mcp.timeouts.ask 300
    """
    from ..settings import file_value, render

    f = folder()
    v = f.set_setting(key, value)
    if v.source == "env":
        output.warn(f"{v.setting.env} is set in the environment and wins over the file")
    written = render(file_value(f.config, v.setting.key))
    emit(v.as_dict(), json_, plain=lambda d: f"{d['key']} = {written}")


@app.command("unset")
def unset(key: str = KeyArg, json_: bool = JsonOpt) -> None:
    """Remove a setting from .ok/config.yml, so its default (or environment variable) applies.

    Also removes keys the file sets that are not settings (old or misspelt ones, which
    `ok config list` warns about).

    Examples:

    \b
      ok config unset search.k
      ok config unset llm.base_url --json
    """
    from ..settings import BY_ENV, SETTINGS, render, resolve

    f = folder()
    removed = f.unset_setting(key)
    d: dict[str, Any] = {"key": key, "removed": removed}
    s = SETTINGS.get(key) or BY_ENV.get(key.upper())
    if s is not None:
        d = {**resolve(s, f.config).as_dict(), "removed": removed}

    def plain(d: dict[str, Any]) -> str:
        if not removed:
            return f"{d['key']} is not set in .ok/config.yml"
        if "value" not in d:
            return f"removed {d['key']}"
        return f"removed {d['key']}; it is now {render(d['value']) or 'unset'} ({d['source']})"

    emit(d, json_, plain=plain)
