"""Generated meeting notes that name people and places, for the tests of many writes."""

from __future__ import annotations

import random
from pathlib import Path

NAMES = (
    "Ada Lovelace", "Charles Babbage", "Alan Turing", "Grace Hopper", "John von Neumann",
    "Claude Shannon", "Marie Curie", "Niels Bohr", "Lise Meitner", "Emmy Noether",
    "Kurt Gödel", "Edsger Dijkstra", "Barbara Liskov", "Donald Knuth", "Tim Berners-Lee",
    "Linus Torvalds", "Margaret Hamilton", "Katherine Johnson", "Dennis Ritchie", "Ken Thompson",
)  # fmt: skip


PLACES = ("London", "Cambridge", "Princeton", "Paris", "Copenhagen", "Vienna", "Zurich", "Oslo")


def meeting_notes(i: int) -> str:
    """A document naming people and a place per sentence: every sentence pairs its names, so
    documents added later name pairs the graph already holds (their relationships change)."""
    rng = random.Random(i)
    sentences = []
    for _ in range(6):
        a, b, c = rng.sample(NAMES, 3)
        sentences.append(
            f"{a} met {b} and {c} in {rng.choice(PLACES)} in {1900 + rng.randrange(100)}."
        )
    return f"# Meeting notes {i}\n\n" + " ".join(sentences) + "\n"


def write_notes(where: Path, numbers: range) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    for i in numbers:
        (where / f"n{i:03d}.md").write_text(meeting_notes(i))
    return where
