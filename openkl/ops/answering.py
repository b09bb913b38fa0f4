"""Answers and context: a question answered with [N] citations, and the entity subgraph
relevant to a question."""

from __future__ import annotations

from collections.abc import Callable

from ..graph.indexing import embedder
from ..knowledge import ask as ask_mod
from ..knowledge import context as context_mod
from ..records import Answer, Context
from ..text.llm import chat_pair
from ..text.rerank import reranker_from
from .call import Call
from .read import described, reading
from .searching import recency_of, rerank_hits

# `ok context`'s defaults: passages retrieved, entities returned
CONTEXT_K = 8
CONTEXT_MAX_ENTITIES = 12


def ask(
    call: Call,
    question: str,
    *,
    k: int | None = None,
    scope: str = "all",
    use_llm: bool = True,
    max_k: int | None = None,
    on_token: Callable[[str], None] | None = None,
    include_superseded: bool = False,
    recency: str | None = None,
) -> Answer:
    """Answer `question` from the call's folder, read by its reader (see `ask.ask` for the result), with the
    configured LLM unless `use_llm` is false, else extractively. `k` defaults to ask.k
    (`max_k` clamps it); `on_token` receives an LLM's answer as it streams. The graph is
    closed before the model answers, so writers are not kept out; the citations are
    remembered for `ok cite open`. A rerank endpoint (search.rerank) picks the passages
    from the top search.rerank_top, as in search; the chat model's fallback answers when
    the best passage is weak (`llm.ChatPair`)."""
    folder = call.folder
    llm = chat_pair(folder, required=False) if use_llm else None  # bad settings fail early
    if k is None:
        k = folder.setting("ask.k")
    if max_k is not None:
        k = min(k, max_k)
    emb = embedder(folder)
    reranker = reranker_from(folder)
    with reading(folder, call.reader) as g:
        found = ask_mod.retrieve(
            folder,
            g,
            question,
            k=max(k, reranker.top) if reranker is not None else k,
            scope=scope,
            embedder=emb,
            include_superseded=include_superseded,
            recency=recency_of(folder, recency),
        )
    hits, warning = found.hits, found.warning
    if reranker is not None:  # the passages the endpoint finds most relevant
        hits, why = rerank_hits(reranker, question, hits, k)
        warning = "; ".join(w for w in (warning, why) if w) or None
    return ask_mod.answer(
        folder,
        question,
        hits,
        llm=llm,
        on_token=on_token if llm is not None else None,
        embedder=emb,
        remember=True,
        warning=warning,
        best=found.best_score,
    )


def context(
    call: Call,
    query: str,
    *,
    k: int | None = None,
    max_entities: int | None = None,
    min_confidence: float | None = None,
    use_llm: bool | None = None,
    max_k: int | None = None,
) -> Context:
    """The entity subgraph relevant to `query` in the call's folder, read by its reader (see `context.context` for the result):
    `k` passages (default 8), at most `max_entities` entities (default 12), both clamped
    by `max_k`; `min_confidence` defaults to entities.min_confidence, and `use_llm` to
    whether an LLM is configured."""
    folder = call.folder
    k = CONTEXT_K if k is None else k
    max_entities = CONTEXT_MAX_ENTITIES if max_entities is None else max_entities
    if max_k is not None:
        k, max_entities = min(k, max_k), min(max_entities, max_k)
    emb = embedder(folder)
    with reading(folder, call.reader) as g:
        got = context_mod.context(
            folder,
            g,
            query,
            k=k,
            max_entities=max_entities,
            min_conf=min_confidence,
            use_llm=use_llm,
            embedder=emb,
        )
        described(folder, g, got["entities"])
        return got
