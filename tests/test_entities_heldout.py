"""Entity quality on held-out documents that were never used to tune the extractor."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import run_ok

sys.path.insert(0, str(Path(__file__).parent / "gold"))


def test_heldout_quality(kf: Path) -> None:
    from evaluate import HELDOUT, evaluate

    from openkl.folder import open_folder
    from openkl.indexer import open_graph

    r = run_ok("store", "ingest", str(HELDOUT / "docs"))
    assert r.code == 0, r.err
    f = open_folder(kf)
    with open_graph(f) as g:
        score = evaluate(f, g, 0.4, HELDOUT / "gold.json")
    assert score["entity_recall"] >= 0.7, score
    assert score["entity_precision"] >= 0.6, score
