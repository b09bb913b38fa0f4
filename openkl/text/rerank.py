"""Rerank: a cross-encoder endpoint reorders the top candidates of the fused ranking.

Speaks the common `/rerank` protocol of llama.cpp's server, Text Embeddings Inference,
Jina and Cohere: `POST {model?, query, documents, top_n}` (TEI names the passages `texts`)
→ `{results: [{index, relevance_score}]}` or, from TEI, `[{index, score}]`. Off unless `search.rerank` is set. A
search waits for it at most `search.rerank_budget` seconds; on a timeout or an error it
keeps the fused ranking and says so (a warning), so rerank never makes a search fail or
wait longer than its budget.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ..errors import OkError
from ..files import streams


class RerankError(OkError):
    """The rerank endpoint failed or answered with something unusable."""


@dataclass(frozen=True)
class Reranker:
    url: str  # the full URL requests go to
    model: str | None
    api_key: str | None
    top: int  # candidates reranked
    budget: float  # seconds a search waits


def endpoint_url(url: str) -> str:
    """`url` as given when it names a path, else its `/rerank` (`http://host:8080` →
    `http://host:8080/rerank`, `…/v1` → `…/v1/rerank`)."""
    url = url.rstrip("/")
    path = urlparse(url).path
    return url + "/rerank" if path in ("", "/v1") else url


def reranker_from(folder: Any) -> Reranker | None:
    """The folder's rerank endpoint (`search.rerank`), checked; None when it is off. The
    key is read from this process's own environment, as the embedding endpoint's."""
    url = folder.setting("search.rerank")
    if not url:
        return None
    url = str(url).strip()
    if not url.startswith(("http://", "https://")):
        raise RerankError(
            f"search.rerank {url!r} is not an http(s) URL",
            "e.g. http://localhost:8080/rerank (llama.cpp's server with --reranking)",
        )
    top = int(folder.setting("search.rerank_top"))
    budget = float(folder.setting("search.rerank_budget"))
    if top < 2:
        raise RerankError(f"search.rerank_top = {top} reranks nothing", "use 2 or more, e.g. 20")
    if budget <= 0:
        raise RerankError(
            f"search.rerank_budget = {budget:g} leaves no time", "use seconds, e.g. 2"
        )
    key_env = folder.secret_env("search.rerank_api_key_env")
    key = streams.own_environ().get(key_env) if key_env else None
    if key_env and not key:
        raise RerankError(
            f"the API key variable {key_env} is not set",
            f"export {key_env}=… (keys are read from the environment only)",
        )
    model = folder.setting("search.rerank_model")
    return Reranker(endpoint_url(url), str(model) if model else None, key, top, budget)


# the field each endpoint was last seen to take its passages in, by URL
_FIELD: dict[str, str] = {}
_FIELDS = ("documents", "texts")


def scores(r: Reranker, query: str, texts: Sequence[str]) -> dict[int, float]:
    """The endpoint's relevance score of each text, by its index in `texts` (a text it
    left out has none). The passages go as `documents` (llama.cpp, Jina, Cohere); an
    endpoint that refuses that form (400 or 422) is asked with `texts` (TEI), and the form
    that worked is used first from then on."""
    import httpx

    first = _FIELD.get(r.url, _FIELDS[0])
    headers = {"Content-Type": "application/json"}
    if r.api_key:
        headers["Authorization"] = f"Bearer {r.api_key}"
    with httpx.Client(timeout=r.budget) as client:
        for field in (first, *(f for f in _FIELDS if f != first)):
            body: dict[str, Any] = {"query": query, field: list(texts), "top_n": len(texts)}
            if r.model:
                body["model"] = r.model
            try:
                resp = client.post(r.url, json=body, headers=headers)
            except httpx.TimeoutException as e:
                raise RerankError(f"the rerank endpoint timed out after {r.budget:g}s") from e
            except httpx.HTTPError as e:
                raise RerankError(
                    f"cannot reach the rerank endpoint {r.url}: {type(e).__name__}"
                ) from e
            if resp.status_code not in (400, 422):
                break
    if resp.status_code >= 400:
        raise RerankError(f"the rerank endpoint answered HTTP {resp.status_code}")
    _FIELD[r.url] = field
    try:
        data = resp.json()
    except ValueError as e:
        raise RerankError("the rerank endpoint answered with invalid JSON") from e
    return _parsed(data, len(texts))


def _parsed(data: Any, n: int) -> dict[int, float]:
    items = data.get("results", data.get("data")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise RerankError("the rerank endpoint's answer has no results")
    out: dict[int, float] = {}
    for item in items:
        if not isinstance(item, dict):
            raise RerankError("the rerank endpoint's results are not objects")
        score = item.get("relevance_score", item.get("score"))
        index = item.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
            raise RerankError(f"the rerank endpoint gave an index {index!r} of no passage")
        if not isinstance(score, int | float) or isinstance(score, bool):
            raise RerankError("a rerank result has no relevance_score")
        out[index] = float(score)
    return out


def within_budget(
    r: Reranker, query: str, texts: Sequence[str]
) -> tuple[dict[int, float] | None, str | None]:
    """`scores`, or (None, why) when the endpoint failed or did not answer within the
    budget: the caller then keeps its own order. The request goes on in the background
    until its own timeout (the budget) and is then dropped."""
    got: dict[str, Any] = {}
    done = threading.Event()

    def ask() -> None:
        try:
            got["scores"] = scores(r, query, texts)
        except RerankError as e:
            got["error"] = e.message
        except Exception as e:  # noqa: BLE001 - any failure leaves the fused ranking
            got["error"] = f"{type(e).__name__}: {e}"
        finally:
            done.set()

    threading.Thread(target=ask, name="rerank", daemon=True).start()
    kept = "the fused ranking is kept"
    if not done.wait(r.budget):
        return None, f"rerank: no answer from {r.url} within {r.budget:g}s; {kept}"
    if "error" in got:
        return None, f"rerank: {got['error']}; {kept}"
    return got["scores"], None
