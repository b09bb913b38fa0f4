"""Chunking: spans point back into the text, and no chunk outgrows the model's window, even
for text without any boundary (a long line of base64, a minified file)."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest
from helpers.run import run_ok

from openkl.text.chunking import WHOLE, chunk_text
from openkl.text.embeddings import Embedder

MAX_TOKENS = 256


@pytest.fixture(scope="module")
def tokenizer():
    return Embedder().tokenizer


def _b64(n: int) -> str:
    return base64.b64encode(random.Random(n).randbytes(n * 3 // 4)).decode()


def _check(text: str, chunks: list, tokenizer) -> None:
    assert chunks
    assert all(text[c.start : c.end] == c.text for c in chunks)
    # neighbours touch or overlap, so every character is in some chunk
    assert chunks[0].start == len(text) - len(text.lstrip())
    assert chunks[-1].end == len(text.rstrip())
    assert all(b.start <= a.end for a, b in zip(chunks, chunks[1:], strict=False))
    counts = [
        len(e.ids)
        for e in tokenizer.encode_batch([c.text for c in chunks], add_special_tokens=False)
    ]
    assert max(counts) <= MAX_TOKENS - 2  # room for [CLS]/[SEP]


@pytest.mark.parametrize(
    "text",
    [
        "x" * (WHOLE + 50_001),  # one word: a single [UNK] to the tokenizer
        _b64(WHOLE + 40_000),  # no spaces, but punctuation every ~30 chars
        "\x01" * 5_000 + " tail words here",  # characters the tokenizer drops
        "lead words " * 40 + "z" * 3_000 + " trailing words" * 40,
    ],
    ids=["x", "base64", "control", "mixed"],
)
def test_text_without_boundaries_is_cut_to_the_window(text: str, tokenizer) -> None:
    chunks = chunk_text(text, tokenizer, MAX_TOKENS, 64)
    _check(text, chunks, tokenizer)
    assert max(len(c.text) for c in chunks) <= 2_000


def test_long_prose_chunks_like_one_call(tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Long texts are tokenized in segments; for prose that gives the same chunks."""
    words = ["tide", "moon", "shore", "rock", "pool", "crab", "gull", "kelp", "wave", "salt"]
    rnd = random.Random(7)
    text = "\n\n".join(
        " ".join(rnd.choice(words) for _ in range(rnd.randint(5, 90))) + "."
        for _ in range(WHOLE // 200)
    )
    assert len(text) > WHOLE
    chunks = chunk_text(text, tokenizer, MAX_TOKENS, 64)
    _check(text, chunks, tokenizer)
    monkeypatch.setattr("openkl.text.chunking.WHOLE", len(text))
    assert chunk_text(text, tokenizer, MAX_TOKENS, 64) == chunks


def test_a_long_line_is_searchable_in_window_sized_chunks(kf: Path, tmp_path: Path) -> None:
    doc = tmp_path / "blob.txt"
    doc.write_text("Blob header\n\n" + "x" * 60_000 + "\n\n" + _b64(4_000) + "\n")
    r = run_ok("store", "ingest", str(doc), "--json")
    assert r.code == 0, r.err
    hits = run_ok("search", "blob header", "--json", "-k", "3", "--per-doc", "3").json()
    assert hits and max(len(h["quote"]) for h in hits) <= 2_000
    rows = run_ok(
        "graph",
        "cypher",
        "MATCH (d:Doc)-[:HAS_CHUNK]->(c:Chunk) RETURN d.path AS p, "
        "c.span_start AS s, c.span_end AS e, c.text AS t",
        "--json",
    ).json()
    text = (kf / rows[0]["p"]).read_text(encoding="utf-8")
    assert len(rows) > 50
    assert all(text[r["s"] : r["e"]] == r["t"] for r in rows)
    assert max(len(r["t"]) for r in rows) <= 2_000
