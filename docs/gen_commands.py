"""Write docs/commands.md: the `--help` of every `ok` command, in one page.

uv run python docs/gen_commands.py          # rewrite the file
uv run python docs/gen_commands.py --check  # exit 1 when the file is out of date (CI)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def render() -> str:
    import typer

    from openkl.cli.app import app

    os.environ["COLUMNS"] = "100"
    os.environ["TERMINAL_WIDTH"] = "100"
    root = typer.main.get_command(app)
    out = [
        "# `ok` command reference",
        "",
        "Generated from `--help` by `docs/gen_commands.py`; CI checks it is current.",
        "",
    ]

    def walk(cmd, path: list[str]) -> None:
        ctx = cmd.context_class(cmd, info_name=" ".join(path))
        out.append(f"{'#' * min(len(path) + 1, 4)} `{' '.join(path)}`")
        out.append("")
        out.append("```")
        out.append(cmd.get_help(ctx).rstrip())
        out.append("```")
        out.append("")
        for name in getattr(cmd, "list_commands", lambda c: [])(ctx):
            walk(cmd.get_command(ctx, name), [*path, name])

    walk(root, ["ok"])
    return "\n".join(out)


def main() -> None:
    target = HERE / "commands.md"
    text = render()
    if "--check" in sys.argv:
        if not target.exists() or target.read_text() != text:
            print(
                "docs/commands.md is out of date: run `uv run python docs/gen_commands.py`",
                file=sys.stderr,
            )
            raise SystemExit(1)
        return
    target.write_text(text)


if __name__ == "__main__":
    main()
