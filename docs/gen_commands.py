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

    from openkl.cli.root import app

    os.environ["COLUMNS"] = "100"
    os.environ["TERMINAL_WIDTH"] = "100"
    root = typer.main.get_command(app)
    out = [
        "# `ok` command reference",
        "",
        "Generated from `--help` by `docs/gen_commands.py`; CI checks it is current.",
        "",
        *exit_codes(),
        *vocabulary(root),
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


def exit_codes() -> list[str]:
    from openkl.cli.vocabulary import EXIT_CODES

    out = [
        "## Exit codes",
        "",
        "As rg and grep have them, so that a script can tell a search that found nothing "
        "from one that failed: `ok search … || fallback` runs the fallback for both, "
        "`[ $? -eq 1 ]` only for the first. Every command follows the table; the error "
        "itself is one line on stderr, `Error: … (hint: …)`.",
        "",
        "| code | | when |",
        "|---|---|---|",
    ]
    out += [f"| {c.code} | {c.name} | {c.meaning} |" for c in EXIT_CODES]
    return [*out, ""]


def vocabulary(root) -> list[str]:
    """The flag vocabulary, with the commands that take each idea (read from the tree)."""
    from openkl.cli.vocabulary import IDEAS

    users: dict[str, list[str]] = {i.name: [] for i in IDEAS}
    by_dest = {d: i.name for i in IDEAS for d in i.dests}
    every: list[str] = []

    def walk(cmd, path: list[str]) -> None:
        ctx = cmd.context_class(cmd, info_name=" ".join(path))
        names = getattr(cmd, "list_commands", lambda c: [])(ctx)
        for name in names:
            walk(cmd.get_command(ctx, name), [*path, name])
        if path and (not names or path == ["serve"]):
            every.append(" ".join(path))
            for p in cmd.params:
                idea = by_dest.get(p.name) if p.param_type_name == "option" else None
                if idea is not None:
                    users[idea].append(" ".join(path))

    walk(root, [])
    out = [
        "## Flags: one spelling for each idea",
        "",
        "The same idea is spelt the same way in every command that has it (older spellings "
        "are kept where they were). `tests/test_flags.py` checks every command against "
        "this table, which `openkl/cli/vocabulary.py` holds. Two letters stand for two "
        "ideas, never in the same command: `-t` is a tag, or a type where there are no "
        "tags; `-n` is a limit, or `--dry-run` in the commands that change things. `ok "
        "grep` speaks rg: `-n`, `-k` are not limits there, `--max` is.",
        "",
        "| idea | spellings | value | meaning | commands |",
        "|---|---|---|---|---|",
    ]
    for i in IDEAS:
        flags = ", ".join(f"`{f}`" for f in i.flags + i.aliases)
        cmds = ", ".join(f"`{c}`" for c in users[i.name])
        if len(users[i.name]) > len(every) / 2:
            cmds = "all but " + ", ".join(f"`{c}`" for c in every if c not in users[i.name])
        value = "`" + i.metavar.replace("|", "\\|") + "`" if i.metavar else ""
        out.append(f"| {i.name} | {flags} | {value} | {i.meaning} | {cmds} |")
    return [*out, ""]


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
