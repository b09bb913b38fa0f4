"""Local HTTP servers that speak the embedding and rerank protocols of hosted and local
model servers: OpenAI-compatible `/v1/embeddings` (Ollama, llama.cpp, vLLM) and `/rerank`
(llama.cpp's server and Jina: `documents` → `results[].relevance_score`; Text Embeddings
Inference: `texts` → `[{index, score}]`).

The vectors are hashed bags of words (similar texts get similar vectors) and the rerank
score is the share of the query's words a passage holds, so searches through them rank
by the words themselves. Tests read back the requests received. Nothing leaves the
machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def hashed_vector(text: str, dim: int) -> list[float]:
    v = np.zeros(dim, dtype=np.float64)
    for w in words(text):
        h = int.from_bytes(hashlib.sha256(w.encode()).digest()[:4], "big")
        v[h % dim] += 1.0 if h & (1 << 31) else -1.0
    v[0] += 0.01  # never the zero vector
    return [float(x) for x in v / np.linalg.norm(v)]


class Stub:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.url = ""
        self.status = 200  # what it answers (500: a failing server)
        self.delay = 0.0  # seconds before it answers
        self.key: str | None = None  # if set, a request without this bearer token gets 401


@contextmanager
def _serve(stub: Stub, answer: Any) -> Iterator[None]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            stub.requests.append(body)
            stub.headers.append(dict(self.headers))
            time.sleep(stub.delay)
            if stub.key is not None and self.headers.get("Authorization") != f"Bearer {stub.key}":
                self.send_error(401)
                return
            if stub.status != 200:
                self.send_error(stub.status)
                return
            code, data = answer(self.path, body)
            raw = json.dumps(data).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            # the client may have given up waiting (a budget)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(raw)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    stub.url = f"http://127.0.0.1:{srv.server_address[1]}"
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield
    finally:
        srv.shutdown()
        srv.server_close()


@contextmanager
def embedding_server(model: str = "hash-embed", dim: int = 64) -> Iterator[Stub]:
    """`POST /v1/embeddings {model, input}` → `{object: list, data: [{index, embedding}]}`,
    as OpenAI, Ollama, llama.cpp and vLLM answer; an unknown model is a 404 with an error.
    `stub.url` ends in /v1."""
    stub = Stub()

    def answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if not path.endswith("/v1/embeddings"):
            return 404, {"error": {"message": f"no route {path}"}}
        if body.get("model") != model:
            return 404, {"error": {"message": f"model {body.get('model')!r} not found"}}
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": hashed_vector(t, dim)}
            for i, t in enumerate(texts)
        ]
        data.reverse()  # the protocol orders by `index`, not by place
        return 200, {"object": "list", "model": model, "data": data}

    with _serve(stub, answer):
        stub.url += "/v1"
        yield stub


def overlap(query: str, text: str) -> float:
    q = set(words(query))
    return len(q & set(words(text))) / max(1, len(q))


def rerank_score(query: str, text: str) -> float:
    """What the rerank stub scores a passage: the share of the query's words it holds,
    then shorter first."""
    return round(overlap(query, text) + 1.0 / (10 + len(text)), 6)


@contextmanager
def rerank_server(style: str = "jina") -> Iterator[Stub]:
    """`POST /rerank`: `jina` (also llama.cpp's and Cohere's) reads `documents` and answers
    `{results: [{index, relevance_score}]}` best first, at most `top_n`; `tei` reads `texts`
    and answers `[{index, score}]`. The score: the share of the query's words a passage
    holds, then its length (shorter first), so the order differs from a fused ranking."""
    stub = Stub()

    def answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path.rstrip("/") != "/rerank":
            return 404, {"error": "not found"}
        field = "documents" if style == "jina" else "texts"
        if field not in body:  # as the servers answer a body without the field they read
            return 422, {"error": f"missing field `{field}`"}
        docs = body[field]
        scored = [(i, rerank_score(body["query"], d)) for i, d in enumerate(docs)]
        scored.sort(key=lambda x: -x[1])
        if style == "tei":
            return 200, [{"index": i, "score": s} for i, s in scored]
        top = int(body.get("top_n") or len(scored))
        return 200, {
            "model": body.get("model", "reranker"),
            "results": [{"index": i, "relevance_score": s} for i, s in scored[:top]],
        }

    with _serve(stub, answer):
        yield stub
