"""`ok bundle …`: AKS bundles in and out of the folder."""

from __future__ import annotations

import typer

from .common import folder, writing
from .output import JsonOpt, emit, read_stdin_text

app = typer.Typer(
    help="AKS bundles: import and validate (export is `ok graph export`).", no_args_is_help=True
)


def _read(path: str) -> tuple[str, str]:
    from pathlib import Path

    from ..errors import BadInput

    if path == "-":
        return read_stdin_text(), "stdin"
    p = Path(path).expanduser()
    if not p.is_file():
        raise BadInput(f"no bundle file at {path}", "pass the path of an AKS bundle (.json)")
    return p.read_text(encoding="utf-8"), path


@app.command("import")
def import_(
    path: str = typer.Argument(..., help="Bundle file (`-` reads stdin)."),
    json_: bool = JsonOpt,
) -> None:
    """Load an AKS bundle into the folder (kept under aks/imports/, survives rebuilds).

    Examples:

    \b
      ok bundle import team.aks.json
      curl -s https://example.org/kb.aks.json | ok bundle import -
    """
    from .. import ops

    text, where = _read(path)
    f = folder()
    with writing(f, "ok bundle import"):
        data = ops.import_bundle(f, text, where)
    emit(
        data,
        json_,
        plain=lambda d: (
            f"imported {d['entities']} entities and "
            f"{d['relationships']} relationships into {d['path']}"
            + (
                f" ({d['dropped_relationships']} dangling dropped)"
                if d["dropped_relationships"]
                else ""
            )
        ),
    )


@app.command()
def validate(
    path: str = typer.Argument(..., help="Bundle file (`-` reads stdin)."),
    json_: bool = JsonOpt,
) -> None:
    """Check a bundle against the AKS v0.1.0 schema (errors name the JSON path)."""
    from .. import ops

    text, where = _read(path)
    emit(
        ops.validate_bundle(text, where),
        json_,
        plain=lambda d: f"valid: {d['entities']} entities, {d['relationships']} relationships",
    )
