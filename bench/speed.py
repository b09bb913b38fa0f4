"""Ingest throughput and search latency.

    uv run python bench/speed.py [--docs 500] [--queries 50] [--cli-calls 20]

1. Ingest throughput: a fresh folder (empty embedding cache) ingests `--docs` SciFact
   abstracts; chunks/s is compared with the raw throughput of the same embedding model on
   the same chunk texts (no pipeline around it).
2. A second ingest of the same files (everything unchanged) as a share of the first.
3. Search latency, p50/p95: warm (in-process, model loaded) and through the CLI (a new
   `ok search` process per query), on the fresh folder (~1k chunks) and on the SciFact
   folder built by bench/scifact.py (~10k chunks) when present.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("OK_NO_PROGRESS", "1")

from openkl.collect.store import ingest_paths  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402
from openkl.graph.search import search  # noqa: E402
from openkl.sync import indexer  # noqa: E402
from openkl.text.chunking import chunk_text  # noqa: E402
from openkl.text.embeddings import Embedder  # noqa: E402

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")

DATA = Path(os.environ.get("OK_BENCH_DATA", HERE.parent.parent / "shared" / "bench" / "scifact"))
WORK = Path(os.environ.get("OK_BENCH_WORK", HERE / ".work"))
OK = str(Path(sys.executable).parent / "ok")


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def write_corpus(n: int) -> Path:
    d = WORK / f"speed-corpus-{n}"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    with open(DATA / "corpus.jsonl") as f:
        for i, line in enumerate(f):
            if i >= n:
                break
            doc = json.loads(line)
            (d / f"{doc['_id']}.txt").write_text(f"{doc['title']}\n\n{doc['text']}\n")
    return d


def queries(n: int) -> list[str]:
    with open(DATA / "queries.jsonl") as f:
        return [json.loads(x)["text"] for x in f][:n]


def latency(root: Path, qs: list[str], cli_calls: int) -> dict:
    folder = Folder(root)
    emb = indexer.embedder(folder)
    emb.embed_query("warm up")
    warm = []
    with indexer.open_graph(folder) as g:
        chunks = g.counts()["Chunk"]
        for q in qs:
            t = time.perf_counter()
            search(folder, g, q, k=10, embedder=emb)
            warm.append((time.perf_counter() - t) * 1000)
    # a warm reader opening the graph per query, as the MCP server does
    per_call = []
    for q in qs:
        t = time.perf_counter()
        with indexer.open_graph(folder) as g:
            search(folder, g, q, k=10, embedder=emb)
        per_call.append((time.perf_counter() - t) * 1000)
    cli = []
    for q in qs[:cli_calls]:
        t = time.perf_counter()
        subprocess.run(
            [OK, "--root", str(root), "search", q, "--json"], check=True, capture_output=True
        )
        cli.append((time.perf_counter() - t) * 1000)
    return {
        "chunks": chunks,
        "warm_ms": {"p50": round(pct(warm, 50), 1), "p95": round(pct(warm, 95), 1)},
        "warm_open_per_call_ms": {
            "p50": round(pct(per_call, 50), 1),
            "p95": round(pct(per_call, 95), 1),
        },
        "cli_ms": {"p50": round(pct(cli, 50), 1), "p95": round(pct(cli, 95), 1)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--docs", type=int, default=500)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--cli-calls", type=int, default=20)
    ap.add_argument(
        "--latency-only",
        action="store_true",
        help="skip the ingest measurement; time search on existing folders",
    )
    args = ap.parse_args()
    qs = queries(args.queries)
    if args.latency_only:
        for root in (WORK / f"speed-{args.docs}", WORK / "scifact"):
            if (root / ".ok" / "kuzu").exists():
                print(json.dumps({"latency": latency(root, qs, args.cli_calls)}))
        return
    corpus = write_corpus(args.docs)
    root = WORK / f"speed-{args.docs}"
    shutil.rmtree(root, ignore_errors=True)
    folder = Folder.init(root)

    # raw model throughput on exactly the chunks the pipeline will embed
    raw_emb = Embedder()
    texts = []
    for p in sorted(corpus.iterdir()):
        texts += [c.text for c in chunk_text(p.read_text(), raw_emb.tokenizer, 256, 64)]
    raw_emb.embed_query("warm up")
    t = time.perf_counter()
    raw_emb._embed_raw(texts)
    raw_s = time.perf_counter() - t

    with folder.write_lock("bench"):
        t = time.perf_counter()
        rep = ingest_paths(folder, [str(corpus)])
        first_s = time.perf_counter() - t
        t = time.perf_counter()
        rep2 = ingest_paths(folder, [str(corpus)])
        second_s = time.perf_counter() - t
    assert rep.chunks == len(texts), (rep.chunks, len(texts))
    assert not rep2.added
    result = {
        "docs": args.docs,
        "chunks": rep.chunks,
        "raw_embed_chunks_per_s": round(len(texts) / raw_s, 2),
        "ingest_chunks_per_s": round(rep.chunks / first_s, 2),
        "ingest_vs_raw": round((rep.chunks / first_s) / (len(texts) / raw_s), 3),
        "first_ingest_s": round(first_s, 2),
        "second_ingest_s": round(second_s, 3),
        "second_vs_first": round(second_s / first_s, 4),
    }
    print(json.dumps({"ingest": result}))
    print(json.dumps({"latency": latency(root, qs, args.cli_calls)}))
    big = WORK / "scifact"
    if (big / ".ok" / "kuzu").exists():
        print(json.dumps({"latency": latency(big, qs, args.cli_calls)}))


if __name__ == "__main__":
    main()
