"""Benchmark the fresh-knowledge hot paths.

1. `ok refresh --due` over N sources when nothing is due (what a cron job pays every run):
   a folder whose mapping holds N web/arXiv/file sources with interval and cron policies,
   all fetched recently. Timed end to end (the `ok` process) and in-process.
2. The trigger check after an index write: M new chunks against T triggers, as the indexer's
   hook runs it (vectors read from the graph, similarity, events for what fires).

Run:  .venv/bin/python bench/refresh.py [--sources 10000] [--chunks 1000] [--triggers 50]
Work files go to bench/.work/refresh/ (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "refresh"
OK_BIN = str(Path(sys.executable).parent / "ok")
NOW = "2026-01-10T12:10:00Z"


def _entries(n: int) -> list[dict]:
    rnd = random.Random(7)
    policies = [
        {"interval": "1d"},
        {"interval": "6h"},
        {"interval": "7d"},
        {"cron": "0 6 * * *"},
        {"cron": "*/30 * * * *", "interval": "1h"},
        {"cron": "15 3 * * mon"},
    ]
    out = []
    for i in range(n):
        did = f"{i:016x}"
        kind = i % 3
        source = (
            {"url": f"https://site{i % 97}.example/page/{i}"}
            if kind == 0
            else {"arxiv": f"2401.{i:05d}"}
            if kind == 1
            else {"path": f"store/sources/files/{i}.md"}
        )
        minute = rnd.randrange(0, 5)  # fetched in the last few minutes: nothing is due
        out.append(
            {
                "id": did,
                "path": f"store/normalized/b/{i}.ok.md",
                "source": source,
                "origin": source.get("url") or f"/data/{i}.md",
                "media_type": "text/html",
                "title": f"Source {i}",
                "ingested_at": "2026-01-01T00:00:00Z",
                "fetched_at": f"2026-01-10T12:{minute:02d}:00Z",
                "sha256": "0" * 64,
                "current": True,
                "refresh": policies[i % len(policies)],
                "fetch": {"kind": "web", "etag": f'"{i:x}"', "status": 200} if kind == 0 else {},
            }
        )
    return out


def bench_due(n: int, runs: int) -> dict:
    from openkl.collect.refresh import refresh
    from openkl.files.folder import Folder

    root = WORK / "due"
    if root.exists():
        shutil.rmtree(root)
    f = Folder.init(root)
    lines = [json.dumps(e, sort_keys=True) for e in _entries(n)]
    f.mapping_path.write_text("\n".join(lines) + "\n")
    # nothing may be due: this benchmark must never reach out to the hosts it names
    env = {
        **os.environ,
        "OK_ROOT": str(root),
        "OK_NOW": NOW,
        "OK_ARXIV_API_URL": "http://127.0.0.1:9/api/query?{}",
    }
    p = subprocess.run(
        [OK_BIN, "refresh", "--dry-run", "--json"], env=env, capture_output=True, text=True
    )
    assert p.returncode == 0 and json.loads(p.stdout)["due"] == [], "bench data is due"
    cli = []
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(
            [OK_BIN, "refresh", "--due", "--json"], env=env, capture_output=True, text=True
        )
        cli.append(time.perf_counter() - t)
        assert p.returncode == 0 and json.loads(p.stdout)["due"] == [], p.stderr
    os.environ["OK_NOW"] = NOW
    lib = []
    for _ in range(runs):
        t = time.perf_counter()
        rep = refresh(f, due=True)
        lib.append(time.perf_counter() - t)
        assert rep.due == []
    base = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([OK_BIN, "--help"], capture_output=True)
        base.append(time.perf_counter() - t)
    return {
        "sources": n,
        "mapping_mb": round(f.mapping_path.stat().st_size / 1e6, 2),
        "cli_median_s": round(statistics.median(cli), 3),
        "cli_max_s": round(max(cli), 3),
        "in_process_median_s": round(statistics.median(lib), 3),
        "ok_help_median_s": round(statistics.median(base), 3),
    }


def bench_triggers(n_chunks: int, n_triggers: int, runs: int) -> dict:
    from openkl.files.folder import Folder
    from openkl.knowledge import triggers
    from openkl.sync.indexer import embedder, open_graph

    root = WORK / "triggers"
    if root.exists():
        shutil.rmtree(root)
    f = Folder.init(root)
    topics = [
        "tides",
        "lighthouses",
        "ferries",
        "gulls",
        "harbours",
        "storms",
        "boats",
        "nets",
        "charts",
        "buoys",
    ]
    with f.write_lock("bench"):
        for i in range(n_triggers):
            triggers.add(f, f"t{i:02d}", f"news about {topics[i % 10]} number {i}", threshold=0.9)
    emb = embedder(f)
    examples = emb.embed([t.example for t in triggers.load(f)[0]])
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(n_chunks, emb.dim)).astype(np.float32)
    hot = rng.choice(n_chunks, size=max(1, n_chunks // 100), replace=False)
    vecs[hot] = examples[hot % len(examples)] + 0.01 * vecs[hot]  # ~1% of chunks match
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    per_doc = 10
    docs: list[dict[str, Any]] = []
    chunks: list[dict[str, Any]] = []
    for d in range(n_chunks // per_doc):
        did = f"{d:016x}"
        docs.append(
            {
                "id": did,
                "path": f"store/normalized/{d}.ok.md",
                "sha256": "0" * 64,
                "title": f"doc {d}",
                "source": "{}",
                "created_at": NOW,
                "chars": 1000,
                "current": True,
            }
        )
        for c in range(per_doc):
            chunks.append(
                {
                    "id": f"{did}#char{c * 100}-{c * 100 + 99}",
                    "doc_id": did,
                    "text": f"chunk {c} of doc {d}",
                    "start": c * 100,
                    "end": c * 100 + 99,
                    "ord": c,
                }
            )
    times, fired = [], 0
    with f.write_lock("bench"), open_graph(f, write=True) as g:
        g.add_docs(docs, chunks, vecs[: len(chunks)])
        doc_ids = [d["id"] for d in docs]
        note_ids: list[str] = []
        for _ in range(runs):
            t = time.perf_counter()
            evs = triggers.check(f, g, doc_ids, note_ids)
            times.append(time.perf_counter() - t)
            fired = max(fired, len(evs))
        t = time.perf_counter()
        for _ in range(20):
            triggers.check(f, g, doc_ids[:1], [])  # one small document, as `ok mem add` sees
        one = (time.perf_counter() - t) / 20
    shutil.rmtree(root / "triggers")
    with f.write_lock("bench"), open_graph(f, write=True) as g:
        t = time.perf_counter()
        for _ in range(20):
            triggers.check(f, g, doc_ids, [])
        none = (time.perf_counter() - t) / 20
    return {
        "chunks": len(chunks),
        "triggers": n_triggers,
        "first_run_fired": fired,
        "check_median_s": round(statistics.median(times), 4),
        "check_first_s": round(times[0], 4),
        "one_doc_s": round(one, 4),
        "no_triggers_s": round(none, 6),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=int, default=10_000)
    ap.add_argument("--chunks", type=int, default=1000)
    ap.add_argument("--triggers", type=int, default=50)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OK_NO_PROGRESS", "1")
    print(json.dumps({"refresh_due": bench_due(args.sources, args.runs)}))
    print(json.dumps({"trigger_check": bench_triggers(args.chunks, args.triggers, args.runs)}))


if __name__ == "__main__":
    main()
