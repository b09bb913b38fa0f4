"""`ok context`'s confidence comes from how well its passages answer the query (calibrated
on the dev questions of bench/gold/qa, see docs/benchmarks.md), not from how confident the
entities it found are."""

from __future__ import annotations

from pathlib import Path

from helpers.run import run_ok

from openkl.knowledge.context import CALIBRATION, calibrated


def _context(query: str) -> dict:
    r = run_ok("context", query, "--json")
    assert r.code in (0, 1), r.err
    return r.json()


def test_high_only_when_the_passages_answer_the_question(example_kf: Path) -> None:
    wal = _context("how does write-ahead logging make databases durable")
    assert wal["confidence"] == "HIGH", wal["support"]
    # the folder holds nothing on T cells: confident entities of the passages found
    # (the nearest, on other things) do not make the answer confident
    tcell = _context("what regulates T cell activation")
    assert tcell["confidence"] != "HIGH", tcell["support"]
    assert tcell["confidence_score"] < CALIBRATION["high"] <= wal["confidence_score"]
    assert tcell["support"]["similarity"] < wal["support"]["similarity"]
    for d in (wal, tcell):
        assert set(d["support"]) == {"similarity", "coverage", "typed"}
        assert (d["confidence_score"], d["confidence"]) == calibrated(d["support"])
    # a "when" question whose passages hold no date is less supported than one whose do
    dated = _context("when did Ada Lovelace write her notes on the Analytical Engine")
    assert dated["support"]["typed"] == 1.0


def test_the_label_follows_the_score() -> None:
    weak = {"similarity": 0.1, "coverage": 0.0, "typed": 0.0}
    strong = {"similarity": 0.8, "coverage": 1.0, "typed": 1.0}
    (lo, lo_label), (hi, hi_label) = calibrated(weak), calibrated(strong)  # type: ignore[arg-type]
    assert 0 <= lo < hi <= 1 and lo_label == "LOW" and hi_label == "HIGH"
