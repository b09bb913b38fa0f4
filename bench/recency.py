"""Recency in ranking: does `--recency` put the newer of two notes on a changed fact first,
without pushing an old but still true fact down?

    uv run python bench/recency.py [--half-life 30d] [--save]

A folder of memory notes, written at pinned dates (`OK_NOW`):
- changed facts: an old note (about 400 days before the queries) says one thing, a newer
  note (10 to 40 days before) says what replaced it, in nearly the same words; the right
  top hit is the newer note;
- unchanged facts: an old note holds the only answer, and a newer note on a nearby subject
  shares some of its words; the right top hit is the old note.

Each fact has one question, asked with `ops.search` (hybrid, notes only, one hit). The report
gives top-1 accuracy for both kinds with recency off and on, and for every floor on a 0.1
grid. The floor's default (search.recency_floor, 0.4) was chosen on these same facts: the
numbers are not held out. The facts are written for this benchmark and are small (16 of
each kind); the notes were added with `allow_duplicate`, as a changed fact is a near
duplicate by design (in use, `--supersedes` takes the old note out of search entirely).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import provenance  # noqa: E402

from openkl import ops, settings  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402

ASKED = "2026-06-01T09:00:00Z"
OLD = "2025-04-27T09:00:00Z"  # 400 days before ASKED

# (question, old note, newer note, days before ASKED the newer note was written)
CHANGED = [
    (
        "what is the staging server called?",
        "The staging server is called heron.",
        "The staging server is called osprey now.",
        12,
    ),
    (
        "which day do deploys go out?",
        "Deploys go out on Tuesdays.",
        "Deploys go out on Thursdays.",
        20,
    ),
    (
        "where is the build cache kept?",
        "The build cache is kept on the office NAS.",
        "The build cache is kept in object storage.",
        35,
    ),
    ("who is the on-call lead?", "The on-call lead is Priya.", "The on-call lead is Marcus.", 10),
    (
        "what port does the metrics endpoint use?",
        "The metrics endpoint uses port 9100.",
        "The metrics endpoint uses port 9464.",
        25,
    ),
    (
        "which Python version do services run?",
        "Services run Python 3.10.",
        "Services run Python 3.12.",
        30,
    ),
    (
        "how long are backups kept?",
        "Backups are kept for 14 days.",
        "Backups are kept for 30 days.",
        15,
    ),
    (
        "what is the wifi network called?",
        "The office wifi network is called Kestrel.",
        "The office wifi network is called Merlin.",
        18,
    ),
    (
        "which database do orders live in?",
        "Orders live in the MySQL database.",
        "Orders live in the Postgres database.",
        40,
    ),
    (
        "when is the team standup?",
        "The team standup is at 9:30.",
        "The team standup is at 10:15.",
        11,
    ),
    (
        "what is the release branch called?",
        "The release branch is called stable.",
        "The release branch is called release/next.",
        22,
    ),
    (
        "where do error reports go?",
        "Error reports go to the #alerts channel.",
        "Error reports go to the #incidents channel.",
        16,
    ),
    (
        "how many replicas does the API run?",
        "The API runs three replicas.",
        "The API runs five replicas.",
        28,
    ),
    (
        "which region hosts production?",
        "Production is hosted in eu-west-1.",
        "Production is hosted in eu-central-1.",
        33,
    ),
    (
        "what is the code freeze day?",
        "Code freeze is on Wednesday afternoon.",
        "Code freeze is on Monday morning.",
        14,
    ),
    (
        "who approves expense reports?",
        "Expense reports are approved by Dana.",
        "Expense reports are approved by Lee.",
        19,
    ),
]

# (question, old note holding the answer, newer note on a nearby subject, its age in days)
UNCHANGED = [
    (
        "what is the staging database password manager?",
        "Staging database passwords live in the Vault instance.",
        "The staging database was resized to eight cores.",
        9,
    ),
    (
        "which license does the SDK use?",
        "The SDK is released under the Apache 2.0 license.",
        "The SDK gained a new retry helper.",
        12,
    ),
    (
        "what time zone are the reports in?",
        "All reports use the UTC time zone.",
        "The weekly reports now include a cost table.",
        15,
    ),
    (
        "how do we name feature flags?",
        "Feature flags are named team.feature.variant.",
        "The checkout feature flag was turned on for everyone.",
        20,
    ),
    (
        "what is the style guide for commit messages?",
        "Commit messages start with the component, then a colon.",
        "The commit hook now runs the linter too.",
        7,
    ),
    (
        "where is the office?",
        "The office is at 12 Harbour Street.",
        "The office kitchen got a new coffee machine.",
        25,
    ),
    (
        "who founded the company?",
        "The company was founded by Ana and Joel.",
        "The company picnic is on the first Saturday of July.",
        30,
    ),
    (
        "what does the acronym SLO mean here?",
        "SLO means service level objective.",
        "The search SLO dashboard moved to the new Grafana.",
        13,
    ),
    (
        "which editor config do we share?",
        "We share an .editorconfig with four-space indents.",
        "The shared editor snippets were updated.",
        17,
    ),
    (
        "what is the support email?",
        "The support email is help@example.org.",
        "Support tickets now get a satisfaction survey.",
        21,
    ),
    (
        "how are API versions numbered?",
        "API versions are numbered by date, like 2024-05.",
        "The API docs got a new search box.",
        8,
    ),
    (
        "what is the on-call rotation length?",
        "The on-call rotation lasts one week.",
        "The on-call handbook has a new page on paging.",
        26,
    ),
    (
        "which cloud provider do we use?",
        "We use one cloud provider: AWS.",
        "The cloud bill review is on the first Monday.",
        11,
    ),
    (
        "what is the maximum upload size?",
        "The maximum upload size is 25 MB.",
        "Uploads now show a progress bar.",
        14,
    ),
    (
        "how are secrets rotated?",
        "Secrets are rotated every 90 days by a scheduled job.",
        "The scheduled jobs page lists owners now.",
        23,
    ),
    (
        "what language is the billing service written in?",
        "The billing service is written in Go.",
        "The billing service got a new invoice template.",
        18,
    ),
]


def _at(when: str) -> None:
    os.environ["OK_NOW"] = when


def _days_before(days: int) -> str:
    import datetime as dt

    asked = dt.datetime.fromisoformat(ASKED.replace("Z", "+00:00"))
    return (asked - dt.timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def build(root: Path) -> tuple[Folder, list[tuple[str, str, str]]]:
    """The folder, and (kind, question, the id of the right note) per fact."""
    folder = ops.init_folder(root, what="bench").folder
    cases: list[tuple[str, str, str]] = []
    for kind, facts in (("changed", CHANGED), ("unchanged", UNCHANGED)):
        for i, (question, old, newer, days) in enumerate(facts):
            _at(OLD.replace("09:00", f"09:{i:02d}"))
            with folder.write_lock("bench"):
                a = ops.add_note(folder, old, allow_duplicate=True)
            _at(_days_before(days).replace(":00:00Z", f":{i:02d}:00Z"))
            with folder.write_lock("bench"):
                b = ops.add_note(folder, newer, allow_duplicate=True)
            cases.append((kind, question, b.id if kind == "changed" else a.id))
    return folder, cases


def accuracy(folder: Folder, cases: list[tuple[str, str, str]], recency: str) -> dict[str, float]:
    _at(ASKED)
    right: dict[str, list[bool]] = {"changed": [], "unchanged": []}
    for kind, question, want in cases:
        res = ops.search(
            ops.local(folder),
            ops.SearchRequest(question, k=1, scope="mem", recency=recency, min_score=0),
        )
        right[kind].append(bool(res.hits) and res.hits[0]["doc_id"] == want)
    return {k: round(sum(v) / len(v), 3) for k, v in right.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--half-life", default="30d", help="the --recency half-life (default 30d)")
    ap.add_argument("--save", action="store_true", help="write bench/results/…json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ok-recency-"))
    try:
        folder, cases = build(work / "kf")
        floors: dict[str, dict[str, float]] = {}
        for tenth in range(11):
            data = dict(folder.config_now())
            settings.put(data, "search.recency_floor", tenth / 10)
            folder.write_config(data)
            floors[f"{tenth / 10:.1f}"] = accuracy(Folder(folder.root), cases, args.half_life)
        data = dict(folder.config_now())
        settings.drop(data, "search.recency_floor")
        folder.write_config(data)
        report: dict[str, Any] = provenance.stamp()
        report.update(
            {
                "facts": {"changed": len(CHANGED), "unchanged": len(UNCHANGED)},
                "half_life": args.half_life,
                "off": accuracy(Folder(folder.root), cases, "off"),
                "on_default_floor": floors["0.4"],
                "by_floor": floors,
                "note": "the floor was chosen on these same facts; not held out",
            }
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, indent=2))
    if args.save:
        provenance.save(report)


if __name__ == "__main__":
    main()
