"""Shell completion: `ok completion bash|zsh|fish` prints the script, and the completers
that offer note, document and citation ids.

The completers read file names and the mapping only: a TAB press never opens the graph,
takes the lock or loads the model.
"""

from __future__ import annotations

from pathlib import Path

import typer

SHELLS = ("bash", "zsh", "fish")


def completion(
    shell: str = typer.Argument(..., metavar="bash|zsh|fish", help="The shell to complete in."),
) -> None:
    """Print the completion script for a shell (commands, options, and note, document and
    citation ids).

    \b
    Examples:
      eval "$(ok completion bash)"                   # in ~/.bashrc
      ok completion zsh > "${fpath[1]}/_ok"           # then restart zsh
      ok completion fish > ~/.config/fish/completions/ok.fish
    """
    from typer._completion_shared import get_completion_script  # a private typer API

    from ..errors import BadInput

    if shell not in SHELLS:
        raise BadInput(f"no completion for {shell!r}", "use one of: bash, zsh, fish")
    typer.echo(get_completion_script(prog_name="ok", complete_var="_OK_COMPLETE", shell=shell))


def _root(ctx: typer.Context) -> Path | None:
    """The folder the command line names (`--root`, `OK_ROOT`, or a parent with .ok/)."""
    from ..files.folder import find_root

    try:
        return find_root(explicit=ctx.find_root().params.get("root"))
    except Exception:  # outside a folder there is nothing to offer, and TAB must not fail
        return None


def _matching(ids: list[str], incomplete: str) -> list[str]:
    return sorted(i for i in set(ids) if i.startswith(incomplete))


def note_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    """Ids of the notes under memories/by_date/ (a note's file is named by its id)."""
    root = _root(ctx)
    if root is None:
        return []
    notes = root / "memories" / "by_date"
    ids = [p.stem for p in notes.rglob("m-*.md")] if notes.is_dir() else []
    return _matching(ids, incomplete)


def doc_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    """Ids of the documents in .ok/mapping.jsonl."""
    root = _root(ctx)
    if root is None:
        return []
    from ..files import mapping
    from ..files.folder import Folder

    try:
        ids = list(mapping.load(Folder(root)))
    except Exception:  # a damaged mapping is `ok sync`'s to report, not TAB's
        return []
    return _matching(ids, incomplete)


def citation_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    """Ids of the persisted citations (citations/<id>.json) and the recent transient ones."""
    root = _root(ctx)
    if root is None:
        return []
    ids: list[str] = []
    for d in (root / "citations", root / ".ok" / "cache" / "citations"):
        if d.is_dir():
            ids += [p.stem for p in d.glob("c-*.json")]
    return _matching(ids, incomplete)


def note_or_doc_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    return note_ids(ctx, incomplete) + doc_ids(ctx, incomplete)


def citation_or_note_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    return citation_ids(ctx, incomplete) + note_ids(ctx, incomplete)


def hit_refs(ctx: typer.Context, incomplete: str) -> list[str]:
    """The ids of the last search's hits (.ok/cache/last-search.json), citation and note ids."""
    import json

    root = _root(ctx)
    if root is None:
        return []
    try:
        last = json.loads((root / ".ok" / "cache" / "last-search.json").read_text("utf-8"))
        ids = [str(h["id"]) for h in last["hits"]]
    except Exception:  # no search yet, or a damaged file: offer the rest
        ids = []
    return _matching(ids, incomplete) + citation_or_note_ids(ctx, incomplete)
