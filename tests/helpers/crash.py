"""What the crash tests compare: a folder's snapshot and provenance, and a fresh rebuild."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from helpers.run import run_ok

NOW = "2026-11-30T12:00:00Z"


QUERIES = [
    "Ada Lovelace analytical engine",
    "CRISPR gene editing",
    "write-ahead log durability",
    "lighthouse keepers at night",
    "writer lock",
]


def ok_at(root: Path, *args: str, input: str | None = None) -> Any:
    r = run_ok("--root", str(root), *args, input=input)
    assert r.code == 0, (args, r.err)
    return r


def snapshot(root: Path) -> dict[str, Any]:
    """What the derived state answers, timestamps pinned by OK_NOW."""
    out: dict[str, Any] = {}
    for q in QUERIES:
        # without the no-good-match floor: the ranking is compared even for a query
        # the scenario leaves nothing near
        hits = ok_at(root, "search", q, "-k", "5", "--json", "--min-score", "0").json()
        out[q] = [(h["id"], round(h["score"], 6), h["path"], h["sha256"]) for h in hits]
    for name, cypher in {
        "docs": "MATCH (d:Doc) RETURN d.current AS c, count(*) AS n ORDER BY c",
        "chunks": "MATCH (c:Chunk) RETURN c.current AS c, count(*) AS n ORDER BY c",
        "notes": "MATCH (m:MemoryNote) RETURN count(*) AS n",
        "entities": "MATCH (e:Entity) RETURN count(*) AS n",
        # listed, not counted: Kùzu's count(*) over a relationship table can be off by the
        # edges deleted and re-created in one transaction
        "related": "MATCH (a:Entity)-[r:RELATED]->(b:Entity) RETURN a.id AS src, b.id AS dst,"
        " r.type AS t, r.confidence AS c ORDER BY src, dst, t",
        "mentions": "MATCH (x)-[r:MENTIONS]->(e:Entity) RETURN x.id AS src,"
        " e.id AS dst, r.confidence AS c ORDER BY src, dst",
        "supersedes": "MATCH (a:Doc)-[:SUPERSEDES]->(b:Doc) RETURN a.id AS x, b.id AS y ORDER BY x, y",
        "extractions": "MATCH (x:Extraction) RETURN count(*) AS n",
    }.items():
        out[name] = ok_at(root, "graph", "cypher", cypher, "--json").json()
    out["aks"] = json.loads(ok_at(root, "graph", "export", "-o", "-").out)
    out["mapping"] = provenance(root)
    return out


def provenance(root: Path) -> dict[str, Any]:
    rows = {}
    for line in (root / ".ok" / "mapping.jsonl").read_text().splitlines():
        e = json.loads(line)
        rows[e["id"]] = {
            k: e.get(k)
            for k in (
                "path",
                "current",
                "source",
                "origin",
                "title",
                "media_type",
                "superseded_by",
                "supersedes",
            )
        }
    return rows


_rebuilt: dict[str, dict[str, Any]] = {}


def _files_digest(root: Path) -> str:
    """A digest of the folder's files, the truth a rebuild starts from (derived state and
    logs aside)."""
    import hashlib

    h = hashlib.sha256()
    derived = (
        root / ".ok" / "cache",
        root / ".ok" / "kuzu",
        root / ".ok" / "kuzu.rebuild",
        root / ".ok" / "kuzu.old",
    )
    for p in sorted(root.rglob("*")):
        if (
            any(d == p or d in p.parents for d in derived)
            or p.name in ("ops.log", "lock")
            or not p.is_file()
            or p.is_symlink()
        ):
            continue
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def fresh_rebuild(root: Path, where: Path) -> dict[str, Any]:
    """The same files, indexed from nothing (several crash points leave the same files:
    their rebuild is made once)."""
    key = _files_digest(root)
    if key not in _rebuilt:
        shutil.copytree(root, where, symlinks=True)
        for d in [*(where / ".ok").glob("kuzu*"), *(where / ".ok").glob("keyword*")]:
            if d.is_dir():
                shutil.rmtree(d)
        ok_at(where, "index", "--rebuild")
        _rebuilt[key] = snapshot(where)
    return _rebuilt[key]


def note_ids(root: Path) -> set[str]:
    return {p.stem for p in (root / "memories" / "by_date").rglob("m-*.md")}
