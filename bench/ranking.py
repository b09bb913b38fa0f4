"""Ranking variants on SciFact, scored without rebuilding the folder for each.

    uv run python bench/ranking.py --split train --variants base,digits [--save]

The folder is `bench/scifact.py`'s (built once). Its current chunks, their vectors and the
documents' titles are read from the graph; each variant then ranks every claim of the split
the way `ok search` does (`search.fuse`, `search.first_per_doc`, the pool of a 100-hit
search: 500 candidates per signal), with what it changes:

- the FTS text: a Kùzu FTS index of the variant's text is built beside the folder (same
  stemmer, same BM25 parameters, same query as `Graph.fts`) -- `base` is the text before
  words with digits had codes, `digits` is `graph.fts_text` with them;
- `title<N>`: each chunk's FTS text after its contextual header (`chunking.context_header`:
  the document's title, unless the chunk starts with it) N times;
- `tw<N>`: the document's title N more times in every chunk's FTS text (a field weight);
- `vtitle`: each chunk embedded after its contextual header (`chunking.with_header`, the
  header cut to a quarter of the model's window; the embedding cache keeps them);
- `vmix<A>`: each chunk's vector mixed, (1 - A) × its own + A × the `vtitle` one;
- `doc<L>`: a document scored by its best chunk plus L times its second best;
- `prf<M>x<B>`: the query vector moved toward the mean vector of the first M hits by B
  (Rocchio), and the vector list taken again;
- `w<X>` (hybrid): the vector's weight in `wsum` fusion (`search.vector_weight`), `rrf`:
  reciprocal rank fusion instead;
- `low<N>` (hybrid): each signal normalized between its top score and its score at rank N
  (below it counts 0) instead of its last candidate's;
- `dfuse` (hybrid): each document's best hit scored by its best BM25 chunk and its best
  vector chunk, fused, even when they are two chunks (`by_document`);
- `tmm` / `z` (hybrid): each signal normalized by its top score and a floor of 0
  (theoretical min-max) / to z-scores over its candidates, instead of min-max (`fuse_norm`);
- `bm<K1>x<B>`: BM25 with k1 = K1 and b = B instead of 0.9 and 0.4 (`Graph.fts`).

Variants combine with `+` (`digits+title2+doc0.2`). `digits` is what `ok search` did at
schema version 8, `digits+title1` what it does since version 9 (`PRODUCT`); their numbers
must equal `bench/scifact.py`'s on a folder of that version (checked by `--check`, which
runs `search()` itself on the first queries).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import provenance  # noqa: E402
import scifact  # noqa: E402

from openkl import graph as graph_mod  # noqa: E402
from openkl.graph.search import Fusion, QueryUse, first_per_doc, fuse, pool_size, search  # noqa: E402
from openkl.sync import indexer  # noqa: E402
from openkl.text.chunking import context_header, with_header  # noqa: E402

K = 100
PRODUCT = "digits+title1"  # what `ok search` does (schema version 9)
N_CAND = pool_size(K)
LAB = scifact.WORK / "ranking"


def _eval() -> Any:
    spec = importlib.util.spec_from_file_location("eval_run", scifact.DATA.parent / "eval_run.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_folder_data(folder: Any) -> dict[str, Any]:
    """The current chunks (id, doc, ord, text, vector) and each document's title and file
    name, read once and kept in LAB."""
    cache = LAB / "chunks.npz"
    meta = LAB / "chunks.json"
    if cache.exists() and meta.exists():
        m = json.loads(meta.read_text())
        return {**m, "vecs": np.load(cache)["vecs"]}
    LAB.mkdir(parents=True, exist_ok=True)
    with indexer.open_graph(folder) as g:
        rows = g.query(
            "MATCH (c:Chunk) WHERE c.current RETURN c.id AS id, c.doc_id AS doc, c.ord AS ord,"
            " c.text AS text, c.vec AS vec ORDER BY c.id"
        )
        docs = g.query(
            "MATCH (d:Doc) WHERE d.current RETURN d.id AS id, d.title AS title, d.path AS path"
        )
    m = {
        "ids": [r["id"] for r in rows],
        "doc": [r["doc"] for r in rows],
        "ord": [int(r["ord"]) for r in rows],
        "text": [r["text"] for r in rows],
        "title": {d["id"]: d["title"] or "" for d in docs},
        "name": {d["id"]: Path(d["path"]).name.removesuffix(".ok.md") for d in docs},
    }
    vecs = np.array([r["vec"] for r in rows], dtype=np.float32)
    np.savez(cache, vecs=vecs)
    meta.write_text(json.dumps(m))
    return {**m, "vecs": vecs}


def title_vectors(folder: Any, data: dict[str, Any]) -> np.ndarray:
    """Each chunk's vector with its document's title before it (the first chunk, which
    starts with the title, as it is)."""
    cache = LAB / "vecs-title.npy"
    if cache.exists():
        return np.load(cache)
    emb = indexer.embedder(folder)
    vecs = data["vecs"].copy()
    todo = [i for i in range(len(data["ids"])) if header(data, i)]
    room = max(1, emb.max_tokens // 4)
    texts = [embedded_text(data["text"][i], header(data, i), emb.tokenizer, room) for i in todo]
    t = time.time()
    new = indexer.embed_all(emb, texts, "embedding chunks with titles")
    print(f"embedded {len(texts)} chunks with titles in {time.time() - t:.0f}s", file=sys.stderr)
    vecs[todo] = np.asarray(new, dtype=np.float32)
    np.save(cache, vecs)
    return vecs


def embedded_text(text: str, header: str, tokenizer: Any, room: int) -> str:
    """A chunk's text after its header, the header cut to `room` tokens (with "…"): what
    the model reads of it is its first `max_tokens`, and a short header leaves a cut tail
    within the overlap the next chunk shares."""
    if not header:
        return text
    enc = tokenizer.encode(header, add_special_tokens=False)
    if len(enc.ids) > room:
        header = header[: enc.offsets[room - 1][1]].rstrip() + "…"
    return with_header(text, header)


def query_vectors(folder: Any, split: str, queries: list[tuple[str, str]]) -> np.ndarray:
    cache = LAB / f"qvecs-{split}.npy"
    if cache.exists():
        return np.load(cache)
    emb = indexer.embedder(folder)
    qv = []
    for _, text in queries:
        use = QueryUse.of(text, "vector", emb)
        seen = text[: use.vector_chars] if use.vector_chars is not None else text
        qv.append(np.asarray(emb.embed_query(seen), dtype=np.float32))
    arr = np.stack(qv)
    np.save(cache, arr)
    return arr


def base_fts(text: str) -> str:
    """`fts_text` before words with digits had codes."""
    return graph_mod._cjk(text, unigrams=True)


def base_query(text: str) -> str:
    return graph_mod._cjk(text, unigrams=False)


class FtsIndex:
    """A Kùzu FTS index over one variant's chunk texts, queried like `Graph.fts`."""

    def __init__(self, name: str, texts: list[str], ids: list[str]) -> None:
        import kuzu

        where = LAB / f"fts-{name}"
        fresh = not where.exists()
        if fresh:
            where.mkdir(parents=True)
        self.db = kuzu.Database(str(where / "db"))
        self.conn = kuzu.Connection(self.db)
        self.conn.execute("LOAD EXTENSION fts")
        if fresh:
            self.conn.execute("CREATE NODE TABLE C(id STRING PRIMARY KEY, fts STRING)")
            for i in range(0, len(ids), 2000):
                self.conn.execute(
                    "UNWIND $rows AS r CREATE (:C {id: r.id, fts: r.fts})",
                    {
                        "rows": [
                            {"id": a, "fts": b}
                            for a, b in zip(ids[i : i + 2000], texts[i : i + 2000], strict=True)
                        ]
                    },
                )
            self.conn.execute("CALL CREATE_FTS_INDEX('C', 'ix', ['fts'], stemmer := 'porter')")

    def search(
        self, q: str, k: int, bm25: tuple[float, float] = (0.9, 0.4)
    ) -> list[tuple[str, float]]:
        if not q.strip():
            return []
        res = self.conn.execute(
            f"CALL QUERY_FTS_INDEX('C', 'ix', $q, K := {bm25[0]}, B := {bm25[1]}, top := $top)"
            " RETURN node.id AS id, score ORDER BY score DESC, id LIMIT $lim",
            {"q": q, "top": k * 2, "lim": k},
        )
        out = []
        while res.has_next():
            i, s = res.get_next()
            out.append((i, float(s)))
        return out


def parse(variant: str) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "digits": False,
        "title": 0,
        "tw": 0,
        "vtitle": False,
        "doc": 0.0,
        "prf": None,
        "fusion": Fusion(),
        "dfuse": False,
        "low": 0,
        "vmix": 0.0,
        "norm": "",
        "bm25": (0.9, 0.4),
    }
    for part in variant.split("+"):
        if part in ("base", ""):
            continue
        if part == "digits":
            opts["digits"] = True
        elif part == "vtitle":
            opts["vtitle"] = True
        elif m := re.fullmatch(r"title(\d+)", part):
            opts["title"] = int(m[1])
        elif m := re.fullmatch(r"tw(\d+)", part):
            opts["tw"] = int(m[1])
        elif m := re.fullmatch(r"doc([\d.]+)", part):
            opts["doc"] = float(m[1])
        elif m := re.fullmatch(r"w([\d.]+)", part):
            opts["fusion"] = Fusion(vector_weight=float(m[1]))
        elif part == "rrf":
            opts["fusion"] = Fusion(method="rrf")
        elif m := re.fullmatch(r"low(\d+)", part):
            opts["low"] = int(m[1])
        elif m := re.fullmatch(r"vmix([\d.]+)", part):
            opts["vmix"] = float(m[1])
        elif m := re.fullmatch(r"bm([\d.]+)x([\d.]+)", part):
            opts["bm25"] = (float(m[1]), float(m[2]))
        elif part in ("tmm", "z"):
            opts["norm"] = part
        elif part == "dfuse":
            opts["dfuse"] = True
        elif m := re.fullmatch(r"prf(\d+)x([\d.]+)", part):
            opts["prf"] = (int(m[1]), float(m[2]))
        else:
            raise SystemExit(f"unknown variant part {part!r}")
    return opts


def fts_name(opts: dict[str, Any]) -> str:
    name = "digits" if opts["digits"] else "base"
    return (
        name
        + (f"-title{opts['title']}" if opts["title"] else "")
        + (f"-tw{opts['tw']}" if opts["tw"] else "")
    )


def header(data: dict[str, Any], i: int) -> str:
    return context_header(data["title"][data["doc"][i]], [], data["text"][i])


def fts_texts(data: dict[str, Any], opts: dict[str, Any]) -> list[str]:
    index = graph_mod.fts_text if opts["digits"] else base_fts
    out = []
    for i, text in enumerate(data["text"]):
        head = header(data, i)
        extra = (data["title"][data["doc"][i]] + "\n") * opts["tw"]
        out.append(index(extra + (f"{head}\n" * opts["title"]) + text))
    return out


def vector_top(
    vecs: np.ndarray, qvec: np.ndarray, ids: list[str], k: int
) -> list[tuple[str, float]]:
    sims = vecs @ qvec
    top = np.argpartition(-sims, k)[:k]
    return sorted(((ids[i], float(sims[i])) for i in top), key=lambda x: (-x[1], x[0]))


def doc_scores(hits: list[dict[str, Any]], lam: float) -> list[dict[str, Any]]:
    """Each document's best chunk, scored best + lam * second best."""
    best: dict[str, list[float]] = {}
    first: dict[str, dict[str, Any]] = {}
    for h in hits:
        d = h["id"].split("#", 1)[0]
        best.setdefault(d, []).append(h["score"])
        first.setdefault(d, h)
    out = []
    for d, h in first.items():
        s = best[d]
        out.append({**h, "score": s[0] + lam * (s[1] if len(s) > 1 else 0.0)})
    out.sort(key=lambda h: (-h["score"], h["id"]))
    return out


def by_document(hits: list[dict[str, Any]], fusion: Fusion) -> list[dict[str, Any]]:
    """Fused hybrid hits with each document's best hit scored as the document: its best
    BM25 chunk and its best vector chunk fused (`fusion`), even when they are two chunks.
    The document's other hits keep their own scores, which are never higher."""
    best: dict[str, dict[str, Any]] = {}
    for h in hits:
        owner = h["id"].split("#", 1)[0]
        mine = best.setdefault(owner, {})
        for name, sig in h["signals"].items():
            if name not in mine or sig["norm"] > mine[name]["norm"]:
                mine[name] = sig
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for h in hits:
        owner = h["id"].split("#", 1)[0]
        if owner not in seen:
            seen.add(owner)
            h = {**h, "score": _fused(best[owner], fusion)}
        out.append(h)
    out.sort(key=lambda h: (-h["score"], h["id"]))
    return out


def _fused(sig: dict[str, Any], fusion: Fusion) -> float:
    if fusion.method == "rrf":
        return sum(1.0 / (fusion.rrf_k + s["rank"]) for s in sig.values())
    w = fusion.vector_weight
    vec, fts = sig.get("vector"), sig.get("fts")
    return w * (vec["norm"] if vec else 0.0) + (1 - w) * (fts["norm"] if fts else 0.0)


def fuse_low(lists: dict[str, list], fusion: Fusion, low_rank: int) -> list[dict[str, Any]]:
    """`fuse` (wsum) with each signal normalized between its top score and its score at
    rank `low_rank` (what is below counts 0)."""
    fused: dict[Any, float] = {}
    w = {"vector": fusion.vector_weight, "fts": 1 - fusion.vector_weight}
    for name, items in lists.items():
        if not items:
            continue
        top = items[0][1]
        low = items[min(low_rank, len(items)) - 1][1]
        for key, sc in items:
            norm = max(0.0, (sc - low) / (top - low)) if top > low else 1.0
            fused[key] = fused.get(key, 0.0) + w[name] * norm
    out = [{"table": k[0], "id": k[1], "score": v, "signals": {}} for k, v in fused.items()]
    out.sort(key=lambda h: (-h["score"], h["id"]))
    return out


def fuse_norm(lists: dict[str, list], fusion: Fusion, how: str) -> list[dict[str, Any]]:
    """`fuse` (wsum) with each signal normalized otherwise: `tmm` by its top score and its
    theoretical floor (0 for BM25 and cosine), `z` to z-scores over its candidates (a
    candidate a signal lacks counts its lowest)."""
    w = {"vector": fusion.vector_weight, "fts": 1 - fusion.vector_weight}
    norms: dict[str, dict[Any, float]] = {}
    floor: dict[str, float] = {}
    for name, items in lists.items():
        if not items:
            continue
        sc = np.array([x[1] for x in items])
        if how == "tmm":
            n = sc / sc[0] if sc[0] > 0 else np.ones_like(sc)
        else:
            n = (sc - sc.mean()) / (sc.std() or 1.0)
        norms[name] = {k: float(v) for (k, _), v in zip(items, n, strict=True)}
        floor[name] = 0.0 if how == "tmm" else float(n.min())
    keys = {k for d in norms.values() for k in d}
    out = []
    for k in keys:
        f = sum(w[name] * norms[name].get(k, floor[name]) for name in norms)
        out.append({"table": k[0], "id": k[1], "score": f, "signals": {}})
    out.sort(key=lambda h: (-h["score"], h["id"]))
    return out


def rank(
    variant: str,
    split: str,
    mode: str,
    data: dict[str, Any],
    queries: list[tuple[str, str]],
    qvecs: np.ndarray,
    folder: Any,
    fusion: Fusion,
) -> dict[str, list[str]]:
    opts = parse(variant)
    ids = data["ids"]
    fts = None
    if mode != "vector":
        fts = FtsIndex(fts_name(opts), fts_texts(data, opts), ids)
    ask = graph_mod.fts_query if opts["digits"] else base_query
    vecs = title_vectors(folder, data) if opts["vtitle"] or opts["vmix"] else data["vecs"]
    if opts["vmix"]:  # the plain vector and the one with the header, mixed
        vecs = (1 - opts["vmix"]) * data["vecs"] + opts["vmix"] * vecs
        vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    pos = {c: i for i, c in enumerate(ids)}
    runs = {}
    for (qid, text), qv in zip(queries, qvecs, strict=True):
        lists: dict[str, list] = {"fts": [], "vector": []}
        if fts is not None:
            words = QueryUse.of(text, "fts").fts_text
            lists["fts"] = [
                (("Chunk", i), s) for i, s in fts.search(ask(words), N_CAND, opts["bm25"])
            ]
        if mode != "fts":
            lists["vector"] = [(("Chunk", i), s) for i, s in vector_top(vecs, qv, ids, N_CAND)]
        fusion = opts["fusion"] if opts["fusion"] != Fusion() else fusion
        if opts["low"] and mode == "hybrid":
            hits = fuse_low(lists, fusion, opts["low"])
        elif opts["norm"] and mode == "hybrid":
            hits = fuse_norm(lists, fusion, opts["norm"])
        else:
            hits = fuse(lists, mode, fusion)
        if opts["dfuse"] and mode == "hybrid":
            hits = by_document(hits, fusion)
        if opts["prf"] and mode != "fts":
            m, beta = opts["prf"]
            top = [pos[h["id"]] for h in first_per_doc(hits, 1, m)]
            q2 = qv + beta * vecs[top].mean(axis=0)
            q2 /= np.linalg.norm(q2)
            lists["vector"] = [(("Chunk", i), s) for i, s in vector_top(vecs, q2, ids, N_CAND)]
            hits = fuse(lists, mode, fusion)
            if opts["dfuse"] and mode == "hybrid":
                hits = by_document(hits, fusion)
        picked = doc_scores(hits, opts["doc"])[:K] if opts["doc"] else first_per_doc(hits, 1, K)
        runs[qid] = [data["name"][h["id"].split("#", 1)[0]] for h in picked]
    return runs


def score(ev: Any, qrels: dict, runs: dict[str, list[str]]) -> dict[str, Any]:
    nd, rc, mrr = [], [], []
    for q, rels in qrels.items():
        ranked = runs.get(q, [])
        nd.append(ev.ndcg_at(ranked, rels))
        rc.append(len(set(ranked[:100]) & set(rels)) / len(rels))
        mrr.append(next((1 / (i + 1) for i, d in enumerate(ranked[:10]) if d in rels), 0.0))
    n = len(qrels)
    return {
        "queries": n,
        "ndcg@10": round(sum(nd) / n, 4),
        "recall@100": round(sum(rc) / n, 4),
        "mrr@10": round(sum(mrr) / n, 4),
    }


def paired(ev: Any, qrels: dict, ref: dict[str, list[str]], runs: dict[str, list[str]]) -> dict:
    """nDCG@10 of `runs` less that of `ref`, claim by claim: the mean, a bootstrap 95%
    interval of it (2,000 draws, seed 0), and how many claims went up and down."""
    d = np.array(
        [ev.ndcg_at(runs.get(q, []), r) - ev.ndcg_at(ref.get(q, []), r) for q, r in qrels.items()]
    )
    rng = np.random.default_rng(0)
    means = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(2000)]
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "diff": round(float(d.mean()), 4),
        "ci95": [round(float(low), 4), round(float(high), 4)],
        "up": int((d > 0).sum()),
        "down": int((d < 0).sum()),
    }


def check(folder: Any, data: dict[str, Any], split: str, n: int = 20) -> None:
    """`PRODUCT` ranked by this script against `search()` itself on the first `n` claims."""
    queries = scifact.load_queries(split)[:n]
    qvecs = query_vectors(folder, split, scifact.load_queries(split))[:n]
    emb = indexer.embedder(folder)
    for mode in ("fts", "vector", "hybrid"):
        mine = rank(PRODUCT, split, mode, data, queries, qvecs, folder, Fusion())
        with indexer.open_graph(folder) as g:
            for qid, text in queries:
                hits = search(folder, g, text, k=K, mode=mode, scope="store", embedder=emb)
                theirs = [Path(h["path"]).name.removesuffix(".ok.md") for h in hits]
                if theirs[:10] != mine[qid][:10]:
                    print(
                        f"differs: {mode} {qid}\n {theirs[:10]}\n {mine[qid][:10]}", file=sys.stderr
                    )
    print("checked", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--split", default="train", choices=["test", "train"])
    ap.add_argument("--variants", default="base,digits")
    ap.add_argument("--modes", default="fts,vector,hybrid")
    ap.add_argument("--check", action="store_true", help="compare the baseline with search()")
    ap.add_argument("--fresh", action="store_true", help="rebuild the side FTS indexes")
    ap.add_argument("--save", action="store_true", help="write bench/results/<script>-<commit>")
    ap.add_argument("--schema", default="", help="the schema version the folder was built at")
    ap.add_argument("--name", default="", help="a name for the saved file, after the split")
    ap.add_argument(
        "--paired",
        default="",
        help="a variant each is compared with, claim by claim (a bootstrap 95%% interval)",
    )
    args = ap.parse_args()
    # the folder as `bench/scifact.py` built it; once its chunks are read, only its
    # embedder is used (an index of an older schema is not rebuilt for this)
    from openkl.files.folder import Folder

    root = scifact.WORK / "scifact"
    if args.schema:  # read a folder an older schema built, as it is
        graph_mod.SCHEMA_VERSION = args.schema
    folder = (
        Folder(root) if (LAB / "chunks.json").exists() or args.schema else scifact.build_folder()
    )
    if args.fresh:
        for p in LAB.glob("fts-*"):
            shutil.rmtree(p)
    data = load_folder_data(folder)
    if args.check:
        check(folder, data, args.split)
        return
    ev = _eval()
    qrels = ev.load_qrels(str(scifact.qrels_path(args.split)))
    queries = scifact.load_queries(args.split)
    qvecs = query_vectors(folder, args.split, queries)
    report = provenance.stamp()
    report.update({"split": args.split, "chunks": len(data["ids"]), "runs": []})
    for variant in args.variants.split(","):
        for mode in args.modes.split(","):
            opts = parse(variant)
            if mode == "vector" and (opts["digits"] or opts["title"] or opts["tw"]):
                continue  # no change to the vector list
            if mode == "fts" and (opts["vtitle"] or opts["prf"] or opts["vmix"]):
                continue
            changes_fusion = (
                opts["dfuse"] or opts["low"] or opts["norm"] or opts["fusion"] != Fusion()
            )
            if mode != "hybrid" and changes_fusion:
                continue
            t = time.time()
            runs = rank(variant, args.split, mode, data, queries, qvecs, folder, Fusion())
            row = {"variant": variant, "mode": mode, **score(ev, qrels, runs)}
            if args.paired:
                ref = rank(args.paired, args.split, mode, data, queries, qvecs, folder, Fusion())
                row["paired"] = paired(ev, qrels, ref, runs)
            row["seconds"] = round(time.time() - t, 1)
            report["runs"].append(row)
            print(json.dumps(row), flush=True)
    if args.save:
        provenance.save(report, "-".join(x for x in (args.split, args.name) if x))


if __name__ == "__main__":
    main()
