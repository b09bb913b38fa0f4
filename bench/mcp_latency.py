"""Latency of `search` through a warm MCP server vs the same queries through the CLI.

    .venv/bin/python bench/mcp_latency.py [--calls 200] [--cli-calls 20] [--k 10]

Builds (once) a ~10k-chunk knowledge folder from the SciFact corpus under
bench/.work/mcp-10k, from the corpus files of bench/scifact.py (built first when missing)
and with copies of its embedding and entity caches, so nothing is embedded twice; then:

- starts `ok mcp --root <folder>` over stdio with the real MCP client, warms it with a few
  calls, and times `--calls` `search` calls (SciFact test claims, in order) end to end;
- times `ok search QUERY --json` in a fresh process for the first `--cli-calls` claims;
- times the library call (open the graph, search, close) in this process, for reference.

Prints one JSON object with p50/p95/mean in milliseconds for each.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from openkl.collect.store import ingest_paths  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402
from openkl.graph.search import search  # noqa: E402
from openkl.sync import indexer  # noqa: E402

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")

DATA = Path(os.environ.get("OK_BENCH_DATA", HERE.parent.parent / "shared" / "bench" / "scifact"))
WORK = Path(os.environ.get("OK_BENCH_WORK", HERE / ".work"))
OK = str(Path(sys.executable).parent / "ok")


def _copy_sqlite(src: Path, dst: Path) -> None:
    """A consistent copy of a SQLite cache, even while another process writes to it."""
    if not src.exists() or dst.exists():
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    s = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=60)
    d = sqlite3.connect(dst)
    with d:
        s.backup(d)
    s.close()
    d.close()


def build_folder(embeddings: Path | None = None) -> Folder:
    """The 10k folder. Its caches are copies of bench/.work/scifact's when that folder is
    there, or `embeddings` (OK_BENCH_EMBEDDINGS) is copied as its embedding cache: any
    cache that holds vectors of the abstracts as bench/scifact.py writes them (the first
    batch of bench/scale.py's does), so they are not computed again."""
    import scifact  # bench/scifact.py writes the corpus

    root = WORK / "mcp-10k"
    corpus = scifact.write_corpus()
    folder = Folder.init(root, domain="scifact10k")
    embeddings = embeddings or (
        Path(os.environ["OK_BENCH_EMBEDDINGS"]) if os.environ.get("OK_BENCH_EMBEDDINGS") else None
    )
    if embeddings is not None:
        _copy_sqlite(embeddings, folder.cache_dir / "embeddings.sqlite")
    for name in ("embeddings.sqlite", "entities.sqlite"):
        _copy_sqlite(WORK / "scifact" / ".ok" / "cache" / name, folder.cache_dir / name)
    t = time.time()
    with folder.write_lock("bench mcp_latency"):
        rep = ingest_paths(folder, [str(corpus)])
    if rep.added:
        print(
            f"ingested {len(rep.added)} docs, {rep.chunks} chunks in {time.time() - t:.0f}s",
            file=sys.stderr,
        )
    return folder


def queries(n: int) -> list[str]:
    out = []
    with open(DATA / "queries.jsonl") as f:
        for line in f:
            out.append(json.loads(line)["text"])
    return [out[i % len(out)] for i in range(n)]


def stats(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {
        "n": len(s),
        "p50_ms": round(statistics.median(s), 1),
        "p95_ms": round(s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))], 1),
        "mean_ms": round(statistics.fmean(s), 1),
        "max_ms": round(s[-1], 1),
    }


def bench_mcp(root: Path, qs: list[str], k: int) -> dict[str, float]:
    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=OK, args=["mcp", "--root", str(root)], env={**os.environ, "OK_NO_PROGRESS": "1"}
    )
    times: list[float] = []

    async def main() -> None:
        async with Client(params, read_timeout_seconds=120) as c:
            for q in qs[:5]:  # warm: model loaded, first graph open done
                await c.call_tool("search", {"query": q, "k": k, "scope": "store"})
            for q in qs:
                t = time.perf_counter()
                r = await c.call_tool("search", {"query": q, "k": k, "scope": "store"})
                times.append((time.perf_counter() - t) * 1000)
                assert not r.is_error, r.content[0].text

    anyio.run(main)
    return stats(times)


def bench_cli(root: Path, qs: list[str], k: int) -> dict[str, float]:
    times = []
    env = {**os.environ, "OK_ROOT": str(root), "OK_NO_PROGRESS": "1"}
    for q in qs:
        t = time.perf_counter()
        r = subprocess.run(
            [OK, "search", q, "--in", "store", "-k", str(k), "--json"], capture_output=True, env=env
        )
        times.append((time.perf_counter() - t) * 1000)
        assert r.returncode == 0, r.stderr.decode()
    return stats(times)


def bench_library(folder: Folder, qs: list[str], k: int) -> dict[str, float]:
    emb = indexer.embedder(folder)
    emb.embed_query("warm up")
    times = []
    for q in qs:
        t = time.perf_counter()
        with indexer.open_graph(folder) as g:
            search(folder, g, q, k=k, scope="store", embedder=emb)
        times.append((time.perf_counter() - t) * 1000)
    return stats(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--cli-calls", type=int, default=20)
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    folder = build_folder()
    with indexer.open_graph(folder) as g:
        counts = g.counts()
    qs = queries(args.calls)
    out = {
        "folder": str(folder.root),
        "docs": counts["Doc"],
        "chunks": counts["Chunk"],
        "k": args.k,
    }
    out["mcp_search"] = bench_mcp(folder.root, qs, args.k)
    out["cli_search"] = bench_cli(folder.root, qs[: args.cli_calls], args.k)
    out["library_open_search_close"] = bench_library(folder, qs, args.k)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
