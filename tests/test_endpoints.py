"""Separate model endpoints: embeddings from an OpenAI-compatible `/v1/embeddings`, chat and
extraction each at an endpoint of their own, a fallback chat model for weak evidence, and
an optional rerank endpoint within a latency budget. Every endpoint is a local server
speaking the real protocol over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from conftest import run_cli, run_ok
from helpers.endpoint_stubs import embedding_server, rerank_score, rerank_server
from helpers.mcp import call
from helpers.mcp import serve as mcp_serve
from helpers.openai_stub import chat_server
from helpers.serve import Server

DOCS = {
    "kestrel.md": "# Kestrels\n\nThe kestrel hovers over grassland hunting voles and mice.\n",
    "heron.md": "# Herons\n\nThe grey heron stands in shallow water waiting for fish.\n",
    "puffin.md": "# Puffins\n\nPuffins nest in burrows on sea cliffs and dive for sand eels.\n",
    "osprey.md": "# Ospreys\n\nThe osprey plunges feet first into lakes to catch fish.\n",
}


def _ingest(tmp_path: Path) -> None:
    src = tmp_path / "birds"
    src.mkdir()
    for name, text in DOCS.items():
        (src / name).write_text(text)
    r = run_ok("store", "ingest", str(src))
    assert r.code == 0, r.err


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


# -- embeddings ----------------------------------------------------------------------------
def test_an_embedding_endpoint_indexes_and_searches(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with embedding_server(dim=64) as emb:
        assert run_ok("config", "set", "embedding.base_url", emb.url).code == 0
        assert run_ok("config", "set", "embedding.model", "hash-embed").code == 0
        _ingest(tmp_path)
        assert emb.requests and all(r["model"] == "hash-embed" for r in emb.requests)
        embedded = {t for r in emb.requests for t in r["input"]}
        assert any("kestrel hovers" in t for t in embedded)
        r = run_ok("search", "heron waiting for fish", "--mode", "vector", "--json")
        assert r.code == 0, r.err
        assert r.json()[0]["path"].endswith("/heron.ok.md")
        st = run_ok("status", "--json").json()
        assert st["embedder"] == "openai:hash-embed:64"
        assert f"embeddings: hash-embed @ {emb.url}, 64 dimensions" in st["inference"]
        # the dimension is remembered: a later read asks the endpoint for the query only
        before = len(emb.requests)
        assert run_ok("search", "puffin burrows", "--mode", "vector").code == 0
        assert len(emb.requests) == before + 1
    # the endpoint gone: one clear line, no traceback
    r = run_ok("search", "ospreys", "--mode", "vector")
    assert r.code != 0
    assert r.err.startswith("Error: cannot reach the embedding endpoint") and "hint:" in r.err


def test_a_change_of_embedder_is_detected_and_rebuilt(kf: Path, tmp_path: Path) -> None:
    _ingest(tmp_path)  # the local model
    local = run_ok("status", "--json").json()["embedder"]
    assert local.endswith(":384")
    with embedding_server(model="other-embed", dim=32) as emb:
        assert run_ok("config", "set", "embedding.base_url", emb.url).code == 0
        assert run_ok("config", "set", "embedding.model", "other-embed").code == 0
        r = run_ok("search", "kestrel")
        assert r.code != 0
        assert f"built with embedder {local}" in r.err
        assert "openai:other-embed:32" in r.err and "ok index --rebuild" in r.err
        r = run_ok("index", "--rebuild")
        assert r.code == 0, r.err
        assert run_ok("status", "--json").json()["embedder"] == "openai:other-embed:32"
        r = run_ok("search", "grey heron shallow water", "--mode", "vector", "--json")
        assert r.code == 0, r.err
        assert r.json()[0]["path"].endswith("/heron.ok.md")
    # and back to the local model: told again
    assert run_ok("config", "unset", "embedding.base_url").code == 0
    assert run_ok("config", "unset", "embedding.model").code == 0
    r = run_ok("search", "kestrel")
    assert r.code != 0 and "built with embedder openai:other-embed:32" in r.err


@pytest.mark.server
def test_a_server_embeds_and_reranks_for_http_and_routed_commands(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with embedding_server(dim=48) as emb, rerank_server() as rr:
        emb.key = "sk-birds"
        for key, value in (
            ("embedding.base_url", emb.url),
            ("embedding.model", "hash-embed"),
            ("embedding.api_key_env", "BIRDS_API_KEY"),
            ("search.rerank", rr.url),
            ("search.rerank_budget", "3"),
        ):
            assert run_ok("config", "set", key, value).code == 0
        monkeypatch.setenv("BIRDS_API_KEY", "sk-birds")
        _ingest(tmp_path)
        monkeypatch.delenv("BIRDS_API_KEY")  # only the server holds it now
        s = Server(kf, env={"BIRDS_API_KEY": "sk-birds"})
        try:
            log = s.log.read_text()
            assert f"inference: embeddings: hash-embed @ {emb.url}, 48 dimensions" in log
            assert f"rerank: top 20 @ {rr.url}/rerank within 3s" in log
            q = "kestrel heron osprey puffin fish"
            r = s.http.get(f"/v1/{s.stack}/search", params={"q": q, "k": 4, "explain": "true"})
            assert r.status_code == 200, r.text
            hits = r.json()["hits"]
            assert [h["signals"]["rerank"]["rank"] for h in hits] == [1, 2, 3, 4]
            # a routed command brings no key (a search is sent none): the server's is used
            served = len(emb.requests)
            got = run_cli("search", "grey heron waiting", "--mode", "vector", "--json", cwd=kf)
            assert got.code == 0, got.err
            assert got.json()[0]["path"].endswith("/heron.ok.md")
            assert len(emb.requests) > served
            # a slow reranker: the fused ranking, and the warning with it
            rr.delay = 10.0
            r = s.http.get(f"/v1/{s.stack}/search", params={"q": q, "k": 4, "explain": "true"})
            assert r.status_code == 200, r.text
            assert "within 3s; the fused ranking is kept" in r.json()["warning"]
            assert all("rerank" not in h["signals"] for h in r.json()["hits"])
        finally:
            s.stop()


def test_the_embedding_key_follows_the_allow_list(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = run_ok("config", "set", "embedding.api_key_env", "HOME")
    assert r.code != 0 and "_API_KEY" in r.err and "OK_EMBEDDING_API_KEY" in r.err
    with embedding_server() as emb:
        for key, value in (
            ("embedding.base_url", emb.url),
            ("embedding.model", "hash-embed"),
            ("embedding.api_key_env", "BIRDS_API_KEY"),
        ):
            assert run_ok("config", "set", key, value).code == 0
        monkeypatch.setenv("BIRDS_API_KEY", "sk-birds")
        _ingest(tmp_path)
        assert {h.get("Authorization") for h in emb.headers} == {"Bearer sk-birds"}


def test_a_model_the_endpoint_lacks_is_one_error(kf: Path, tmp_path: Path) -> None:
    with embedding_server() as emb:
        assert run_ok("config", "set", "embedding.base_url", emb.url).code == 0
        r = run_ok("search", "x")  # still the local model's name
        assert r.code != 0 and "embedding.model names the local model" in r.err
        assert run_ok("config", "set", "embedding.model", "no-such-model").code == 0
        src = tmp_path / "one"
        src.mkdir()
        (src / "a.md").write_text("# A\n\nSome text.\n")
        r = run_ok("store", "ingest", str(src))
        assert r.code != 0
        assert "embedding endpoint answered HTTP 404" in r.err and "not found" in r.err


# -- chat, extraction and the fallback -------------------------------------------------------
def test_chat_and_extraction_have_endpoints_of_their_own(
    kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extraction = json.dumps(
        {"entities": [{"name": "Grace Hopper", "type": "Person", "confidence": 0.9}]}
    )
    with (
        chat_server(["Grace Hopper wrote the first compiler [1]."]) as chat,
        chat_server([extraction]) as extract,
    ):
        monkeypatch.setenv("OK_LLM_RETRIES", "0")
        for key, value in (
            ("llm.chat.base_url", chat.url),
            ("llm.chat.model", "small-chat"),
            ("llm.extract.base_url", extract.url),
            ("llm.extract.model", "extractor"),
            ("entities.extractor", "llm"),
        ):
            assert run_ok("config", "set", key, value).code == 0
        r = run_ok("mem", "add", "Grace Hopper wrote the first compiler, the A-0 system.")
        assert r.code == 0, r.err
        assert [q["model"] for q in extract.requests] == ["extractor"] and not chat.requests
        r = run_ok("ask", "Who wrote the first compiler?", "--json")
        assert r.code == 0, r.err
        assert [q["model"] for q in chat.requests] == ["small-chat"]
        assert len(extract.requests) == 1
        got = r.json()
        assert got["model"] == f"small-chat @ {chat.url}" and "fallback" not in got
        line = run_ok("status", "--json").json()["inference"]
        assert f"chat: small-chat @ {chat.url}" in line
        assert f"extraction: extractor @ {extract.url} (entities)" in line


def test_weak_evidence_goes_to_the_fallback_model(
    kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_ok("mem", "add", "The lighthouse keeper logs the fog horn at dawn.")
    with chat_server(["The keeper logs it [1]."]) as chat:
        monkeypatch.setenv("OK_LLM_RETRIES", "0")
        for key, value in (
            ("llm.base_url", chat.url),
            ("llm.chat.model", "small"),
            ("llm.chat.fallback_model", "large"),
            ("llm.chat.fallback_below", "0.99"),  # no passage is this close
        ):
            assert run_ok("config", "set", key, value).code == 0
        r = run_ok("ask", "When does the keeper log the fog horn?", "--json")
        assert r.code == 0, r.err
        got = r.json()
        assert [q["model"] for q in chat.requests] == ["large"]
        assert got["model"] == f"large @ {chat.url}"
        assert "under 0.99" in got["fallback"]
        plain = run_ok("ask", "When does the keeper log the fog horn?")
        assert "(fallback: the best passage's similarity" in plain.out
        # strong enough evidence: the small model answers
        assert run_ok("config", "set", "llm.chat.fallback_below", "0.05").code == 0
        r = run_ok("ask", "When does the keeper log the fog horn?", "--json")
        assert r.json()["model"] == f"small @ {chat.url}" and "fallback" not in r.json()
        assert chat.requests[-1]["model"] == "small"


def test_a_failing_chat_model_hands_over_to_the_fallback(
    kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_ok("mem", "add", "The lighthouse keeper logs the fog horn at dawn.")
    with chat_server(["At dawn [1]."]) as big:
        monkeypatch.setenv("OK_LLM_RETRIES", "0")
        for key, value in (
            ("llm.chat.base_url", f"http://127.0.0.1:{_closed_port()}/v1"),
            ("llm.chat.model", "small"),
            ("llm.chat.fallback_model", "large"),
            ("llm.chat.fallback_base_url", big.url),
            ("llm.chat.fallback_below", "0"),
        ):
            assert run_ok("config", "set", key, value).code == 0
        r = run_ok("ask", "When does the keeper log the fog horn?", "--json")
        assert r.code == 0, r.err
        assert r.json()["model"] == f"large @ {big.url}"
        assert r.json()["fallback"].startswith("small failed: cannot reach the LLM endpoint")


# -- rerank ----------------------------------------------------------------------------------
def _fused(query: str) -> list[str]:
    r = run_ok("search", query, "-k", "4", "--min-score", "0", "--json")
    assert r.code == 0, r.err
    assert len(r.json()) == 4
    return [h["id"] for h in r.json()]


@pytest.mark.parametrize("style", ["jina", "tei"])
def test_rerank_reorders_the_top_candidates(kf: Path, tmp_path: Path, style: str) -> None:
    _ingest(tmp_path)
    query = "kestrel heron osprey puffin fish"
    fused = _fused(query)
    with rerank_server(style) as rr:
        assert run_ok("config", "set", "search.rerank", rr.url).code == 0
        assert run_ok("config", "set", "search.rerank_model", "bge-reranker").code == 0
        r = run_ok("search", query, "-k", "4", "--min-score", "0", "--explain", "--json")
        assert r.code == 0, r.err
        hits = r.json()
        sent = rr.requests[-1]
        field = "documents" if style == "jina" else "texts"
        assert sent["query"] == query and sent["model"] == "bge-reranker"
        assert sent["top_n"] == len(sent[field]) == 4
        # TEI refuses `documents` (422) and is asked with `texts`, which is remembered
        assert [list(q) for q in rr.requests] == (
            [["query", "documents", "top_n", "model"]]
            if style == "jina"
            else [["query", "documents", "top_n", "model"], ["query", "texts", "top_n", "model"]]
        )
        # the order is the endpoint's: by its score, best first
        got = [h["signals"]["rerank"]["score"] for h in hits]
        assert got == sorted(got, reverse=True)
        assert [h["signals"]["rerank"]["rank"] for h in hits] == [1, 2, 3, 4]
        assert [h["rank"] for h in hits] == [1, 2, 3, 4]
        assert sorted(h["id"] for h in hits) == sorted(fused)
        by_id = {h["id"]: h["quote"] for h in hits}
        want = sorted(fused, key=lambda i: (-rerank_score(query, by_id[i]), fused.index(i)))
        assert [h["id"] for h in hits] == want
        assert want != fused  # the endpoint changed the order
        plain = run_ok("search", query, "-k", "4", "--min-score", "0", "--explain")
        assert list(rr.requests[-1]) == ["query", field, "top_n", "model"]
        assert "rerank=" in plain.out and plain.err == ""
        assert "rerank: top 20 @ " + rr.url in run_ok("status", "--json").json()["inference"]


def test_a_slow_or_failing_rerank_keeps_the_fused_ranking(kf: Path, tmp_path: Path) -> None:
    _ingest(tmp_path)
    query = "kestrel heron osprey puffin fish"
    fused = _fused(query)
    with rerank_server() as rr:
        rr.delay = 5.0
        for key, value in (("search.rerank", rr.url), ("search.rerank_budget", "0.3")):
            assert run_ok("config", "set", key, value).code == 0
        r = run_ok("search", query, "-k", "4", "--min-score", "0", "--explain", "--json")
        assert r.code == 0, r.err
        assert [h["id"] for h in r.json()] == fused
        assert all("rerank" not in h["signals"] for h in r.json())
        assert "no answer from" in r.err and "within 0.3s; the fused ranking is kept" in r.err
        rr.delay, rr.status = 0.0, 500
        r = run_ok("search", query, "-k", "4", "--min-score", "0", "--json")
        assert r.code == 0, r.err
        assert [h["id"] for h in r.json()] == fused
        assert "rerank: the rerank endpoint answered HTTP 500" in r.err


def test_rerank_settings_are_checked(kf: Path, tmp_path: Path) -> None:
    _ingest(tmp_path)
    assert run_ok("config", "set", "search.rerank", "localhost:8080").code == 0
    r = run_ok("search", "heron")
    assert r.code != 0 and "search.rerank 'localhost:8080' is not an http(s) URL" in r.err
    r = run_ok("config", "set", "search.rerank_api_key_env", "PATH")
    assert r.code != 0 and "OK_RERANK_API_KEY" in r.err


def test_doctor_names_the_models_and_asks_each_endpoint(kf: Path, tmp_path: Path) -> None:
    r = run_ok("doctor", "--json")
    checks = {c["check"]: c for c in r.json()}
    assert checks["inference"]["detail"] == (
        "embeddings: local all-MiniLM-L6-v2-int8 (384 dimensions); chat: none; "
        "extraction: local rules; rerank: off"
    )
    assert "embedding endpoint" not in checks and "rerank endpoint" not in checks
    with embedding_server(dim=16) as emb, rerank_server("tei") as rr:
        for key, value in (
            ("embedding.base_url", emb.url),
            ("embedding.model", "hash-embed"),
            ("search.rerank", rr.url),
        ):
            assert run_ok("config", "set", key, value).code == 0
        r = run_ok("doctor", "--json")
        checks = {c["check"]: c for c in r.json()}
        assert checks["embedding endpoint"] == {
            "check": "embedding endpoint",
            "ok": True,
            "detail": "openai:hash-embed:16",
            "fix": "",
        }
        assert checks["rerank endpoint"]["ok"] and "texts" in rr.requests[-1]
        rr.status = 503
        r = run_ok("doctor", "--json")
        assert r.code == 1
        checks = {c["check"]: c for c in r.json()}
        assert not checks["rerank endpoint"]["ok"]
        assert "answered HTTP 503" in checks["rerank endpoint"]["detail"]
        assert checks["embedding endpoint"]["ok"]


def test_mcp_search_is_reranked_and_warns_when_the_reranker_fails(kf: Path, tmp_path: Path) -> None:
    _ingest(tmp_path)
    query = "kestrel heron osprey puffin fish"
    fused = _fused(query)
    with rerank_server() as rr:
        assert run_ok("config", "set", "search.rerank", rr.url).code == 0

        async def twice(client: object) -> tuple[dict, dict]:
            first = await call(client, "search", query=query, k=4, min_score=0)
            rr.status = 500
            return first, await call(client, "search", query=query, k=4, min_score=0)

        good, bad = mcp_serve([kf], twice)
    by_id = {h["id"]: h["quote"] for h in good["results"]}
    want = sorted(fused, key=lambda i: (-rerank_score(query, by_id[i]), fused.index(i)))
    assert [h["id"] for h in good["results"]] == want != fused
    assert "warning" not in good
    assert [h["id"] for h in bad["results"]] == fused
    assert "rerank endpoint answered HTTP 500; the fused ranking is kept" in bad["warning"]
