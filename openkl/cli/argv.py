"""How `ok`'s arguments are laid out, read before they are parsed: by the CLI (to move a
trailing --root to the front) and by the light entry point that sends a command to a server.
Standard library only."""

from __future__ import annotations

ROOT_FLAGS = ("-C", "--root")
VALUED_GLOBALS = {"-C", "--root", "--tee", "--color"}
OWN_ROOT = {"mcp", "serve"}  # subcommands with a --root option of their own
OWN_C = {"grep"}  # subcommands whose -C is their own: `ok grep -C 2` is context, as in rg


def command_at(argv: list[str]) -> int | None:
    """Where the subcommand's name is: the first argument that is neither a global option
    nor the value of one."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return None
        if a in VALUED_GLOBALS:
            i += 2
            continue
        if not a.startswith("-"):
            return i
        i += 1
    return None
