"""Distillation: memory notes that cite the passages they came from."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..collect import distill as distill_mod
from ..files import notes as notes_mod
from ..files.folder import Folder
from ..records import Cite, DistilledNote, DistillRun
from ..text import llm as llm_mod


@dataclass(frozen=True)
class Distilled:
    """A distilled note and the cite objects of its [N] markers, in their order."""

    note: notes_mod.Note
    citations: list[Cite]

    def as_dict(self, folder: Folder) -> DistilledNote:
        """The note as `ok mem show` has it, with its citations numbered (`n`) from 1."""
        return {
            **self.note.as_dict(folder),
            "citations": [{**c, "n": i} for i, c in enumerate(self.citations, 1)],
        }


def distill_prompts() -> list[dict[str, str]]:
    """The distillation prompts: name, title, description."""
    return distill_mod.list_prompts()


def distill_prompt(name: str, material: str | Callable[[], str] | None = None) -> dict[str, str]:
    """A prompt's instructions, ready for any model, followed by `material` when given: the
    text, or a function that reads it (called only once the prompt is known to exist, so a
    wrong name fails before stdin is read)."""
    p = distill_mod.get_prompt(name)
    if callable(material):
        material = material()
    body = p.render(material) if material is not None else p.text()
    return {"name": p.name, "title": p.title, "description": p.description, "prompt": body}


def distill_note(
    folder: Folder,
    text: str,
    cite_ids: Sequence[str | Mapping[str, Any]],
    *,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    via: str | None = None,
) -> Distilled:
    """Write a memory note whose [N] refers to the N-th of `cite_ids` (ids or cite objects;
    DERIVED_FROM edges to each) and index it. The caller holds the writer lock.

    Every citation is verified against the files before anything is written (a changed or
    missing quote is refused), and so is a text none of whose claims carries an [N] marker
    (`via` names the adapter in the log)."""
    note, cites = distill_mod.create(folder, text, cite_ids, tags=tags, topics=topics, via=via)
    return Distilled(note=note, citations=cites)


def distill_run(
    folder: Folder,
    prompt_name: str,
    query: str,
    *,
    k: int,
    scope: str = "all",
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    on_token: Callable[[str], None] | None = None,
) -> DistillRun:
    """Search for `query`, distill the `k` best passages with the folder's LLM (which must be
    configured), and save a cited memory note: {note, citations, prompt, query, model};
    `note` is None (with a `reason`) when nothing was distilled.

    Takes the writer lock itself, and only to write the note, not while the model thinks."""
    distill_mod.get_prompt(prompt_name)
    llm = llm_mod.config_from(folder, required=True, role="chat")
    return distill_mod.run(
        folder,
        prompt_name,
        query,
        llm=llm,
        k=k,
        tags=tags,
        topics=topics,
        scope=scope,
        on_token=on_token,
    )
