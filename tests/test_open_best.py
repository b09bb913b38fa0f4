"""`ok open RANK` on a terminal opens the editor at the hit's best sentence for the search,
the one the web explorer marks; not at the first line of a long passage."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.run import run_ok
from helpers.terminal import at_terminal


def test_open_goes_to_the_sentence_that_answers(example_kf: Path, tmp_path: Path) -> None:
    query = "who received the Nobel Prize for Cas9"
    hits = run_ok("search", query, "--json", "-k", "1").json()
    assert run_ok("search", query, "-k", "1").code == 0  # remembered for `ok open 1`
    path = example_kf / hits[0]["path"]
    text = path.read_text()
    lines = text.splitlines()
    nobel = next(i for i, x in enumerate(lines, 1) if "Nobel Prize" in x)
    chunk_start = text.count("\n", 0, hits[0]["loc"]["start"]) + 1
    assert nobel > chunk_start  # the sentence is not where the passage starts
    said = tmp_path / "editor-args"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {said}\n')
    editor.chmod(0o755)
    env = {**os.environ, "OK_ROOT": str(example_kf), "EDITOR": str(editor), "NO_COLOR": "1"}
    env.pop("VISUAL", None)
    code, seen = at_terminal(["open", "1"], env)
    assert code == 0, seen
    assert said.read_text().splitlines() == [f"+{nobel}", str(path)]
    # the JSON says it too; a rank without a query word in the passage keeps the first line
    spot = run_ok("open", "1", "--json").json()
    assert spot["best_line"] == nobel and spot["line"] == chunk_start
    assert "best_line" not in run_ok("open", hits[0]["id"], "--json").json()
