"""How `ok`'s arguments are laid out, read before they are parsed: by the CLI (to move a
trailing --root to the front) and by the light entry point that sends a command to a server.
Standard library only."""

from __future__ import annotations

ROOT_FLAGS = ("-C", "--root")
VALUED_GLOBALS = {"-C", "--root", "--tee", "--color"}
OWN_ROOT = {"mcp", "serve"}  # subcommands with a --root option of their own
# commands whose -C is their own: lines of context, as in rg (`ok grep -C 2`)
OWN_C = (("grep",), ("cite", "open"))


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


def own_c(argv: list[str], at: int | None) -> int | None:
    """Where the command whose -C is its own ends in `argv` (its last word), when the
    command at `at` is one; after that point -C is not --root."""
    if at is None:
        return None
    for words in OWN_C:
        if argv[at : at + len(words)] == list(words):
            return at + len(words) - 1
    return None
