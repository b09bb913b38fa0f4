"""Where the bytes of a folder's graph (`.ok/kuzu`) go.

    uv run python bench/index_size.py [FOLDER] [--checkpoint] [--walks] [--save]
    uv run python bench/index_size.py --compare BEFORE.json AFTER.json
    uv run python bench/index_size.py --estimate SMALL.json LARGE.json [--chunks 100000]

For a folder (default: bench/.work/scifact, which `bench/scifact.py` builds), reports:

- `disk`: the files under `.ok/kuzu` and their sizes; `keyword_bytes`: the keyword index
  beside it (`.ok/keyword`, Tantivy), and `total_bytes_per_chunk` both together;
- `counts`: rows per node and relationship table, RELATED by type and by how many
  documents a co-occurrence (`related_to`) edge rests on;
- `tables`: Kùzu's own page accounting (`CALL storage_info(table)`, 4 KiB pages), per table
  and per column, for the folder's tables and the full-text index's internal tables
  (`<table id>_<index>_docs|terms|appears_in`, the stopword table); a relationship table
  holds each column twice (forward and backward lists);
- `unaccounted`: file bytes that no column's pages explain (primary-key hash indexes, the
  catalog and metadata, and pages freed but not given back);
- `text`: how many characters the graph holds of chunk text, its FTS copy, and the
  per-chunk extraction results, against the normalized files on disk;
- `--checkpoint`: the size after a CHECKPOINT of a copy (does Kùzu give freed pages back?);
- `--walks`: what traverse and context return (`walks`), to compare two builds
  (`--compare`);
- `--estimate SMALL LARGE`: the size at `--chunks` chunks, each part grown as the power of
  the chunk count the two saved reports show (an estimate, not a build).

`--save` writes bench/results/index_size-<commit>.json (the commit of this checkout).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from openkl.files.folder import Folder  # noqa: E402
from openkl.graph import DB_FILE, FTS_INDEXES, Graph  # noqa: E402
from openkl.graph.keyword import keyword_dir  # noqa: E402

PAGE = 4096
# a column's pages are reported under these sub-columns; they are summed into the column
_PARTS = ("_null", "_index", "_data", "_offset")


def _files(kuzu: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(kuzu.iterdir()) if p.is_file()}


def _base_column(name: str) -> str:
    # "fwd_docs_offset" -> "docs"; "bwd_NBR_ID" -> "NBR_ID"; "v_data_null" -> "v"
    for d in ("fwd_", "bwd_"):
        if name.startswith(d):
            name = name[len(d) :]
    if name in ("csr_offset", "csr_length"):
        return "(adjacency lists)"
    changed = True
    while changed:
        changed = False
        for p in _PARTS:
            if name.endswith(p) and len(name) > len(p):
                name = name[: -len(p)]
                changed = True
    return name or "_"


def _storage(g: Graph, table: str) -> dict[str, Any]:
    rows = g.query(f"CALL storage_info('{table}') RETURN *")
    cols: dict[str, int] = defaultdict(int)
    direction: dict[str, int] = defaultdict(int)
    pages: set[int] = set()
    for r in rows:
        n = int(r["num_pages"])
        cols[_base_column(r["column_name"])] += n * PAGE
        if r["table_type"] == "REL":
            direction[r["column_name"][:3]] += n * PAGE
        if n and r["start_page_idx"] != 4294967295:
            pages.update(range(int(r["start_page_idx"]), int(r["start_page_idx"]) + n))
    out: dict[str, Any] = {
        "bytes": sum(cols.values()),
        "columns": dict(sorted(cols.items(), key=lambda kv: -kv[1])),
        "_pages": pages,
    }
    if direction:
        out["by_direction"] = dict(direction)
    return out


def _count(g: Graph, table: str, rel: bool) -> int:
    pattern = f"()-[x:{table}]->()" if rel else f"(x:`{table}`)"
    return int(g.query(f"MATCH {pattern} RETURN count(*) AS n")[0]["n"])


def measure(root: Path) -> dict[str, Any]:
    """The report described in the module docstring, for one folder (read-only)."""
    folder = Folder(root)
    kuzu = folder.kuzu_dir
    disk = _files(kuzu)
    out: dict[str, Any] = {"folder": str(root), "disk": disk, "disk_bytes": sum(disk.values())}
    with Graph.open(kuzu, write=False, check=False) as g:
        tables = g.query("CALL show_tables() RETURN name, type, id")
        ids = {t["name"]: t["id"] for t in tables}
        counts = {t["name"]: _count(g, t["name"], t["type"] == "REL") for t in tables}
        out["counts"] = dict(sorted(counts.items()))
        chunks = counts.get("Chunk", 0)
        out["chunks"] = chunks
        rel_types = g.query(
            "MATCH ()-[r:RELATED]->() RETURN r.type AS t, count(*) AS n ORDER BY n DESC"
        )
        out["related_by_type"] = {r["t"]: r["n"] for r in rel_types}
        docs = g.query("MATCH ()-[r:RELATED]->() WHERE r.type = 'related_to' RETURN r.docs AS d")
        by_docs: dict[str, int] = defaultdict(int)
        for r in docs:
            n = len(json.loads(r["d"] or "[]"))
            by_docs[str(n) if n < 5 else "5+"] += 1
        out["related_to_by_docs"] = dict(sorted(by_docs.items()))
        # the full-text indexes' own tables
        internal = []
        for table, index, _ in FTS_INDEXES:
            for part in ("docs", "terms", "appears_in"):
                internal.append((f"{ids[table]}_{index}_{part}", f"fts:{index}:{part}"))
        internal.append(("default_english_stopwords", "fts:stopwords"))
        storage: dict[str, Any] = {}
        for t in tables:
            storage[t["name"]] = _storage(g, t["name"])
        for name, label in internal:
            try:
                storage[label] = _storage(g, name)
            except Exception as e:  # noqa: BLE001 - an index kùzu names otherwise is reported
                storage[label] = {"bytes": 0, "error": str(e).splitlines()[0]}
        used: set[int] = set()
        for s in storage.values():
            used |= s.pop("_pages", set())
        db_bytes = disk.get(DB_FILE, 0)
        columns_total = sum(s["bytes"] for s in storage.values())
        out["tables"] = dict(sorted(storage.items(), key=lambda kv: -kv[1]["bytes"]))
        out["tables_bytes"] = columns_total
        out["unaccounted"] = {
            "bytes": db_bytes - columns_total,
            "file_pages": db_bytes // PAGE,
            "column_pages": len(used),
            "highest_column_page": max(used) if used else 0,
        }
        for name, s in out["tables"].items():
            n = counts.get(name)
            if n:
                s["bytes_per_row"] = round(s["bytes"] / n, 1)
            if chunks:
                s["bytes_per_chunk"] = round(s["bytes"] / chunks, 1)
        out["text"] = _text(g, folder)
    kw = keyword_dir(kuzu)
    out["keyword_bytes"] = (
        sum(p.stat().st_size for p in kw.rglob("*") if p.is_file()) if kw.exists() else 0
    )
    if chunks:
        out["bytes_per_chunk"] = round(out["disk_bytes"] / chunks, 1)
        out["total_bytes_per_chunk"] = round((out["disk_bytes"] + out["keyword_bytes"]) / chunks, 1)
    groups: dict[str, int] = defaultdict(int)
    for name, s in out["tables"].items():
        groups["fts index" if name.startswith("fts:") else name] += s["bytes"]
    groups["unaccounted (pk indexes, catalog, free pages)"] = out["unaccounted"]["bytes"]
    out["summary_bytes"] = dict(sorted(groups.items(), key=lambda kv: -kv[1]))
    return out


def _text(g: Graph, folder: Folder) -> dict[str, Any]:
    row = g.query(
        "MATCH (c:Chunk) RETURN sum(size(c.text)) AS text, sum(size(c.fts)) AS fts,"
        " sum(CASE WHEN c.fts = c.text THEN 1 ELSE 0 END) AS same, count(*) AS n"
    )[0]
    ext = g.query("MATCH (x:Extraction) RETURN sum(size(x.data)) AS d, count(*) AS n")[0]
    files = sum(p.stat().st_size for p in (folder.root / "store").rglob("*.ok.md"))
    return {
        "chunk_text_chars": int(row["text"] or 0),
        "chunk_fts_chars": int(row["fts"] or 0),
        "chunks_whose_fts_equals_text": int(row["same"] or 0),
        "chunks": row["n"],
        "extraction_data_chars": int(ext["d"] or 0),
        "extractions": ext["n"],
        "normalized_files_bytes": files,
    }


QUERIES = (
    "vitamin D deficiency and bone density",
    "insulin resistance in obese mice",
    "macrophages in tumour growth",
    "statins and cardiovascular risk",
    "DNA damage repair in cancer cells",
)


def walks(root: Path, names: list[str] | None = None, top: int = 5) -> dict[str, Any]:
    """What traverse (depth 2, at the default floor and at 0) and context return: for the
    `top` most mentioned entities (or `names`) and for a few queries, so that two folders
    built from the same files can be compared."""
    from openkl.entities.consolidation import min_confidence
    from openkl.entities.queries import list_entities, traverse
    from openkl.knowledge.context import context
    from openkl.sync import indexer

    folder = Folder(root)
    floor = min_confidence(folder)
    out: dict[str, Any] = {"floor": floor, "traverse": {}, "context": {}}
    with indexer.open_graph(folder) as g:
        if not names:
            ents = sorted(list_entities(g, min_confidence=floor), key=lambda e: -e["mentions"])
            names = [e["name"] for e in ents[:top]]
        for name in names:
            row: dict[str, Any] = {}
            for label, mc in (("floor", floor), ("zero", 0.0)):
                t = traverse(g, name, depth=2, min_confidence=mc, limit=200)
                row[label] = {
                    "steps": len(t["steps"]),
                    "truncated": t["truncated"],
                    "reached": [s["id"] for s in t["steps"]],
                }
            out["traverse"][name] = row
        for q in QUERIES:
            c = context(folder, g, q, use_llm=False)
            out["context"][q] = {
                "entities": [e["id"] for e in c["entities"]],
                "relationships": [
                    (r["from_id"], r["type"], r["to_id"]) for r in c["relationships"]
                ],
                "confidence": c["confidence"],
            }
    return out


def compare_walks(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """How the walks of two builds (`walks`) differ: per entity and floor, the steps of
    each and how many of the first's entities the second reaches; per query, whether
    context chose the same entities, and the relationships of each."""
    out: dict[str, Any] = {"traverse": {}, "context": {}}
    for name, row in before["traverse"].items():
        other = after["traverse"].get(name)
        if other is None:
            continue
        out["traverse"][name] = {
            label: {
                "steps": [row[label]["steps"], other[label]["steps"]],
                "same": row[label]["reached"] == other[label]["reached"],
                "kept": len(set(row[label]["reached"]) & set(other[label]["reached"])),
            }
            for label in row
        }
    for q, c in before["context"].items():
        d = after["context"].get(q)
        if d is not None:
            out["context"][q] = {
                "same_entities": c["entities"] == d["entities"],
                "relationships": [len(c["relationships"]), len(d["relationships"])],
                "same_relationships": c["relationships"] == d["relationships"],
            }
    return out


# the graph of a folder with one chunk: its fixed part (primary-key hash indexes, catalog)
FIXED_BYTES = 12_169_216


def estimate(small: dict[str, Any], large: dict[str, Any], chunks: int) -> dict[str, Any]:
    """The graph's size at `chunks` chunks, from two measured builds of the same kind of
    text: each part of `summary_bytes` (less the fixed part, for the unaccounted bytes)
    grows as the power of the chunk count that the two builds show."""
    import math

    n0, n1 = small["chunks"], large["chunks"]
    parts: dict[str, int] = {}
    for name, b1 in large["summary_bytes"].items():
        b0 = small["summary_bytes"].get(name, 0)
        fixed = FIXED_BYTES if name.startswith("unaccounted") else 0
        x0, x1 = b0 - fixed, b1 - fixed
        if x0 <= 0 or x1 <= 0:
            parts[name] = b1
            continue
        alpha = math.log(x1 / x0) / math.log(n1 / n0)
        parts[name] = round(fixed + x1 * (chunks / n1) ** alpha)
    total = sum(parts.values())
    return {
        "chunks": chunks,
        "from": [n0, n1],
        "bytes": total,
        "bytes_per_chunk": round(total / chunks, 1),
        "parts": dict(sorted(parts.items(), key=lambda kv: -kv[1])),
    }


def checkpointed(root: Path) -> dict[str, int]:
    """The graph's file sizes after a CHECKPOINT of a copy of it."""
    with tempfile.TemporaryDirectory(dir=HERE / ".work") as tmp:
        copy = Path(tmp) / "kuzu"
        shutil.copytree(Folder(root).kuzu_dir, copy)
        with Graph.open(copy, write=True, check=False) as g:
            g.query("CHECKPOINT")
        return _files(copy)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(HERE / ".work" / "scifact"))
    ap.add_argument("--checkpoint", action="store_true", help="also CHECKPOINT a copy")
    ap.add_argument("--walks", action="store_true", help="also traverse and context results")
    ap.add_argument("--names", default="", help="entities to traverse (comma-separated)")
    ap.add_argument(
        "--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two saved --walks JSON"
    )
    ap.add_argument(
        "--estimate",
        nargs=2,
        metavar=("SMALL", "LARGE"),
        help="estimate the size at --chunks from two saved reports",
    )
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--save", action="store_true")
    ap.add_argument("--label", default="", help="suffix of the saved file's name")
    a = ap.parse_args()
    if a.estimate:
        small, large = (json.loads(Path(x).read_text()) for x in a.estimate)
        print(json.dumps(estimate(small, large, a.chunks), indent=1))
        return
    if a.compare:
        b, c = (json.loads(Path(x).read_text())["walks"] for x in a.compare)
        print(json.dumps(compare_walks(b, c), indent=1))
        return
    root = Path(a.folder)
    rep = measure(root)
    if a.checkpoint:
        rep["after_checkpoint"] = checkpointed(root)
    if a.walks:
        rep["walks"] = walks(root, [n for n in a.names.split(",") if n] or None)
    rev = subprocess.run(
        ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    rep["commit"] = rev
    text = json.dumps(rep, indent=1, default=str)
    print(text)
    if a.save:
        name = f"index_size-{rev}{('-' + a.label) if a.label else ''}.json"
        (HERE / "results" / name).write_text(text + "\n")


if __name__ == "__main__":
    main()
