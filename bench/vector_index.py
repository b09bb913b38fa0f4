"""Exact cosine scan vs Kùzu's HNSW index on the same chunks: build time, latency, recall@10.

    uv run python bench/vector_index.py [FOLDER]   (default: the SciFact folder of bench/scifact.py)

Works on a copy of the folder's graph, so the folder itself is untouched.
"""

from __future__ import annotations

import importlib.util  # noqa: F401  (kuzu needs it loaded)
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from openkl.embeddings import Embedder  # noqa: E402


def main() -> None:
    import kuzu

    root = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / ".work" / "scifact"
    tmp = Path(tempfile.mkdtemp(prefix="ok-vec-"))
    shutil.copy(root / ".ok/kuzu/graph.kz", tmp / "graph.kz")
    db = kuzu.Database(str(tmp / "graph.kz"))
    conn = kuzu.Connection(db)
    n = conn.execute("MATCH (c:Chunk) RETURN count(c)").get_next()[0]
    qfile = HERE.parent.parent / "shared/bench/scifact/queries.jsonl"
    queries = [json.loads(x)["text"] for x in qfile.read_text().splitlines()][:100]
    emb = Embedder()
    qv = [emb.embed_query(q).tolist() for q in queries]

    def exact(v: list[float]) -> list[str]:
        r = conn.execute(
            "MATCH (c:Chunk) WITH c, array_cosine_similarity(c.vec, CAST($q AS "
            "FLOAT[384])) AS s RETURN c.id ORDER BY s DESC LIMIT 10",
            {"q": v},
        )
        out = []
        while r.has_next():
            out.append(r.get_next()[0])
        return out

    t = time.perf_counter()
    truth = [exact(v) for v in qv]
    exact_ms = (time.perf_counter() - t) * 1000 / len(qv)
    t = time.perf_counter()
    conn.execute("CALL CREATE_VECTOR_INDEX('Chunk', 'chunk_vec', 'vec', metric := 'cosine')")
    build_s = time.perf_counter() - t
    lat, recall = [], []
    for v, want in zip(qv, truth, strict=True):
        t = time.perf_counter()
        r = conn.execute(
            "CALL QUERY_VECTOR_INDEX('Chunk', 'chunk_vec', $q, 10)"
            " RETURN node.id ORDER BY distance",
            {"q": v},
        )
        got = []
        while r.has_next():
            got.append(r.get_next()[0])
        lat.append((time.perf_counter() - t) * 1000)
        recall.append(len(set(got) & set(want)) / 10)
    print(
        json.dumps(
            {
                "chunks": n,
                "exact_scan_ms_mean": round(exact_ms, 1),
                "hnsw_build_s": round(build_s, 1),
                "hnsw_query_ms_median": round(statistics.median(lat), 1),
                "hnsw_recall@10_vs_exact": round(statistics.mean(recall), 3),
            }
        )
    )
    conn.close()
    db.close()
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
