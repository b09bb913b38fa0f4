"""A large knowledge folder from real text: SciFact's abstracts, recombined.

    uv run python bench/scale.py [--docs 46000] [--batch 5000] [--seed 7] [--save]

Builds `bench/.work/scale` (override with OK_BENCH_WORK) for the 100k-chunk measurements
of bench/serve.py, bench/vector_index.py and bench/backends.py:

- the 5,183 SciFact abstracts, one file each, exactly as bench/scifact.py writes them;
- `--docs` further documents, each made of three different abstracts chosen at random
  (seeded): from each, a run of consecutive sentences, starting at a random sentence and
  covering about a third of that abstract. Its title names the three sources. Every
  document's text is therefore real scientific prose, never a copy of another, and its
  chunks are new texts that the model embeds for real.

Every chunk's vector is computed first, into the folder's embedding cache (resumable: cached
texts are skipped; `--prefill-only` stops there), so the ingest times below are the graph's.
The files are ingested with `ok store ingest`'s own code (`ingest_paths`) in batches of
`--batch` files, each batch committed before the next, so a build cut off part way goes on
from the next unfinished batch when run again. The embedding cache of the SciFact folder
(bench/.work/scifact, if built) is copied in first, so the original abstracts are not
embedded again. The report gives per batch: files, chunks, seconds, chunks/s; and at the
end the folder's chunk, entity and edge counts and `.ok/kuzu`'s bytes per chunk.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import provenance  # noqa: E402

from openkl.collect.store import ingest_paths  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402
from openkl.graph import indexing  # noqa: E402
from openkl.sync import indexer  # noqa: E402
from openkl.text.chunking import chunk_text  # noqa: E402
from openkl.text.normalize import frontmatter, normalize_text  # noqa: E402

DATA = Path(os.environ.get("OK_BENCH_DATA", HERE.parent.parent / "shared" / "bench" / "scifact"))
WORK = Path(os.environ.get("OK_BENCH_WORK", HERE / ".work"))
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


def abstracts() -> list[dict[str, str]]:
    with open(DATA / "corpus.jsonl") as f:
        return [json.loads(line) for line in f]


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE.split(text.strip()) if s.strip()]


def recombined(corpus: list[dict[str, str]], n: int, seed: int) -> list[tuple[str, str]]:
    """`n` (name, text) documents, each three sentence runs from three abstracts."""
    rng = random.Random(seed)
    split = [(d, sentences(d.get("text", ""))) for d in corpus]
    split = [(d, s) for d, s in split if len(s) >= 3]
    out = []
    for i in range(n):
        parts, titles = [], []
        for d, sents in rng.sample(split, 3):
            length = max(1, round(len(sents) / 3))
            start = rng.randrange(0, len(sents) - length + 1)
            parts.append(" ".join(sents[start : start + length]))
            titles.append(d.get("title", "").strip().rstrip("."))
        title = "; ".join(t[:80] for t in titles)
        out.append((f"mix-{i:06d}", f"{title}\n\n" + "\n\n".join(parts) + "\n"))
    return out


def write_corpus(root: Path, docs: int, batch: int, seed: int, limit: int) -> list[Path]:
    """The batch directories, written once (their content depends only on the arguments)."""
    corpus = abstracts()[: limit or None]
    spec = {"docs": docs, "batch": batch, "seed": seed, "abstracts": len(corpus)}
    stamp = root / "spec.json"
    if stamp.exists() and json.loads(stamp.read_text()) == spec:
        return sorted(p for p in root.iterdir() if p.is_dir())
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    files = [
        (str(d["_id"]), f"{d.get('title', '').strip()}\n\n{d.get('text', '').strip()}\n")
        for d in corpus
    ] + recombined(corpus, docs, seed)
    dirs = []
    for b in range(0, len(files), batch):
        d = root / f"batch-{b // batch:03d}"
        d.mkdir()
        for name, text in files[b : b + batch]:
            (d / f"{name}.txt").write_text(text)
        dirs.append(d)
    stamp.write_text(json.dumps(spec))
    return dirs


def prefill(folder: Folder, dirs: list[Path]) -> dict[str, float]:
    """Embed every chunk the ingest will make into the folder's embedding cache.

    The chunks are those of the normalized text (`normalize_text` of each plain-text file,
    chunked with the folder's settings), so the ingest then finds every vector cached and
    its time is the graph's alone. Cached texts are skipped, so this resumes too.
    """
    emb = indexing.embedder(folder)
    max_tokens = folder.setting("chunking.max_tokens")
    overlap = folder.setting("chunking.overlap")
    t, new = time.time(), 0
    for d in dirs:
        texts = []
        for p in sorted(d.iterdir()):
            text = normalize_text(p.read_text())
            texts += [
                c.text
                for c in chunk_text(text, emb.tokenizer, max_tokens, overlap, frontmatter(text)[1])
            ]
        todo = emb.missing(texts)
        new += todo
        if todo:
            indexing.embed_all(emb, texts, f"embedding {d.name}")
    s = time.time() - t
    return {
        "embedded": new,
        "seconds": round(s, 1),
        "chunks_per_s": round(new / s, 1) if new else 0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--docs", type=int, default=46000, help="recombined documents (default 46000)")
    ap.add_argument("--batch", type=int, default=5000, help="files per ingest (default 5000)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--abstracts", type=int, default=0, help="use only the first N (a trial run)")
    ap.add_argument("--name", default="scale", help="folder name under bench/.work")
    ap.add_argument("--save", action="store_true", help="write bench/results/scale-<commit>.json")
    ap.add_argument(
        "--prefill-only", action="store_true", help="fill the embedding cache, ingest nothing"
    )
    args = ap.parse_args()
    report = provenance.stamp()
    dirs = write_corpus(
        WORK / f"{args.name}-corpus", args.docs, args.batch, args.seed, args.abstracts
    )
    root = WORK / args.name
    fresh = not (root / ".ok").exists()
    folder = Folder.init(root)
    cache = WORK / "scifact" / ".ok" / "cache" / "embeddings.sqlite"
    if fresh and cache.exists():
        shutil.copy2(cache, folder.root / ".ok" / "cache" / "embeddings.sqlite")
    embedded = prefill(folder, dirs)
    print(json.dumps({"prefill": embedded}), file=sys.stderr, flush=True)
    if args.prefill_only:
        return
    done_file = root / ".ok" / "scale-batches.json"
    done = json.loads(done_file.read_text()) if done_file.exists() else []
    for d in dirs:
        if d.name in [b["batch"] for b in done]:
            continue
        t = time.time()
        with folder.write_lock("bench"):
            rep = ingest_paths(folder, [str(d)])
        s = time.time() - t
        row = {
            "batch": d.name,
            "files": len(rep.added),
            "chunks": rep.chunks,
            "seconds": round(s, 1),
            "chunks_per_s": round(rep.chunks / s, 1) if s else None,
            "load_1min": round(os.getloadavg()[0], 2),
        }
        done.append(row)
        done_file.write_text(json.dumps(done))
        print(json.dumps(row), file=sys.stderr, flush=True)
    with indexer.open_graph(folder) as g:

        def count(q: str) -> int:
            return int(g.query(q)[0]["n"])

        counts = {
            "docs": count("MATCH (d:Doc) WHERE d.current RETURN count(d) AS n"),
            "chunks": count("MATCH (c:Chunk) WHERE c.current RETURN count(c) AS n"),
            "entities": count("MATCH (e:Entity) RETURN count(e) AS n"),
            "mentions": count("MATCH ()-[m:MENTIONS]->() RETURN count(m) AS n"),
            "related": count("MATCH ()-[r:RELATED]->() RETURN count(r) AS n"),
        }
    kuzu = root / ".ok" / "kuzu"
    size = kuzu.stat().st_size if kuzu.is_file() else sum(p.stat().st_size for p in kuzu.rglob("*"))
    report.update(
        {
            "build": {"docs": args.docs, "batch": args.batch, "seed": args.seed},
            "prefill": embedded,
            "batches": done,
            "ingest_seconds": round(sum(b["seconds"] for b in done), 1),
            **counts,
            "kuzu_bytes": size,
            "kuzu_bytes_per_chunk": round(size / max(counts["chunks"], 1)),
        }
    )
    print(json.dumps(report, indent=1))
    if args.save:
        provenance.save(report)


if __name__ == "__main__":
    main()
