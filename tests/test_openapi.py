"""The OpenAPI document says what every route answers: each operation has a 2xx response
with a schema (a record of openkl.records), or a declared media type that is not JSON
(streams, zips, metrics); and what a running server answers fits those schemas, key for
key."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
import jsonschema
from fastapi import FastAPI
from helpers.serve import Server

from openkl.server import Stacks, create_app

# the answers that are not JSON, by their media type
STREAMS = {"text/event-stream", "application/zip", "text/plain"}


def _schema(doc: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    """`schema`, its `$ref` followed."""
    schema = schema or {}
    ref = schema.get("$ref", "")
    if ref.startswith("#/components/schemas/"):
        return dict(doc["components"]["schemas"][ref.rsplit("/", 1)[1]])
    return schema


def _empty(doc: dict[str, Any], schema: dict[str, Any] | None) -> bool:
    """The schema says nothing of the answer: `{}`, or an object without properties."""
    s = {k: v for k, v in _schema(doc, schema).items() if k not in ("title", "description")}
    if s.get("type") == "array":
        return _empty(doc, s.get("items")) and not s.get("items", {}).get("type")
    if s.get("anyOf"):
        return all(_empty(doc, x) for x in s["anyOf"])
    closed = s.get("type") == "object" and not s.get("properties")
    return not s or (closed and not isinstance(s.get("additionalProperties"), dict))


def gaps(app: FastAPI) -> list[str]:
    """The operations of `app` whose 2xx answer the OpenAPI document does not describe."""
    doc = app.openapi()
    out = []
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            where = f"{method.upper()} {path}"
            answers = {code: r for code, r in op["responses"].items() if code.startswith("2")}
            if not answers:
                out.append(f"{where}: no 2xx response")
            for code, r in answers.items():
                content = r.get("content") or {}
                if not content:
                    out.append(f"{where}: {code} has no content")
                for media, body in content.items():
                    if media in STREAMS:
                        continue
                    if media != "application/json":
                        out.append(f"{where}: {code} {media} is neither JSON nor a stream")
                    elif _empty(doc, body.get("schema")):
                        out.append(f"{where}: {code} has an empty schema {body.get('schema')}")
    return out


def test_every_operation_describes_its_answer(kf: Path) -> None:
    app = create_app(Stacks([kf]))
    doc = app.openapi()
    assert len(doc["paths"]) > 40
    assert gaps(app) == []
    # the streams say what they are
    assert "application/zip" in doc["paths"]["/aks/v1/pages"]["get"]["responses"]["200"]["content"]
    follow = doc["paths"]["/v1/{stack}/events/follow"]["get"]["responses"]["200"]["content"]
    assert "text/event-stream" in follow
    ask = doc["paths"]["/v1/{stack}/ask"]["post"]["responses"]["200"]["content"]
    assert {"application/json", "text/event-stream"} <= set(ask)
    status = doc["paths"]["/v1/{stack}/status"]["get"]["responses"]["200"]["content"]
    assert _schema(doc, status["application/json"]["schema"])["properties"]


def test_the_check_finds_an_answer_without_a_model() -> None:
    app = FastAPI()

    @app.get("/untyped")
    def untyped() -> Any:
        return {}

    @app.get("/typed")
    def typed() -> dict[str, int]:
        return {}

    found = gaps(app)
    assert len(found) == 1 and found[0].startswith("GET /untyped: 200 has an empty schema")


def _strict(doc: dict[str, Any]) -> dict[str, Any]:
    """The document's schemas, each object closed to keys it does not name."""
    schemas = copy.deepcopy(doc["components"]["schemas"])
    for s in schemas.values():
        if s.get("type") == "object" and "properties" in s:
            s.setdefault("additionalProperties", False)
    return schemas


def misfits(
    doc: dict[str, Any], schemas: dict[str, Any], path: str, method: str, r: Any
) -> list[str]:
    """Where the answer `r` does not fit the schema of its route's answer."""
    op = doc["paths"][path][method]
    schema = op["responses"][str(r.status_code)]["content"]["application/json"]["schema"]
    validator = jsonschema.Draft202012Validator({**schema, "components": {"schemas": schemas}})
    return [
        f"{method.upper()} {path}: {e.message} at {list(e.absolute_path)}"
        for e in validator.iter_errors(r.json())
    ]


def test_what_a_server_answers_fits_its_schemas(example_kf: Path) -> None:
    s = Server(example_kf)
    try:
        _answers_fit(s.http)
    finally:
        s.stop()


def _answers_fit(h: httpx.Client) -> None:
    """Ask a server many of its routes; each answer fits its schema."""
    doc = h.get("/openapi.json").json()
    schemas = _strict(doc)
    st = h.get("/aks/v1/stacks").json()[0]["name"]
    docs = h.get(f"/v1/{st}/documents").json()
    note = h.post(f"/v1/{st}/notes", json={"text": "Kafka retries are capped at five."})
    entities = h.get("/aks/v1/entities", params={"domain": st}).json()
    calls: list[tuple[str, str, str, dict[str, Any]]] = [
        ("get", "/health", "/health", {}),
        ("get", "/ready", "/ready", {}),
        ("get", "/aks/v1/stacks", "/aks/v1/stacks", {}),
        ("get", "/aks/v1/stacks/{stack}", f"/aks/v1/stacks/{st}", {}),
        ("get", "/stacks", "/stacks", {}),
        ("get", "/v1/{stack}/status", f"/v1/{st}/status", {}),
        ("get", "/v1/{stack}/search", f"/v1/{st}/search", {"params": {"q": "retry"}}),
        ("get", "/v1/{stack}/documents", f"/v1/{st}/documents", {}),
        (
            "get",
            "/v1/{stack}/documents/{doc}",
            f"/v1/{st}/documents/{docs[0]['id']}",
            {},
        ),
        (
            "get",
            "/v1/{stack}/documents/{doc}/history",
            f"/v1/{st}/documents/{docs[0]['id']}/history",
            {},
        ),
        ("get", "/v1/{stack}/notes", f"/v1/{st}/notes", {}),
        ("get", "/v1/{stack}/events", f"/v1/{st}/events", {}),
        ("get", "/v1/{stack}/triggers", f"/v1/{st}/triggers", {}),
        ("get", "/v1/{stack}/citations", f"/v1/{st}/citations", {}),
        ("get", "/v1/{stack}/distill/prompts", f"/v1/{st}/distill/prompts", {}),
        ("get", "/aks/v1/backfeed/queue", "/aks/v1/backfeed/queue", {}),
        ("get", "/aks/v1/entities", "/aks/v1/entities", {"params": {"domain": st}}),
        (
            "get",
            "/aks/v1/entities/{name}",
            f"/aks/v1/entities/{entities[0]['name']}",
            {"params": {"domain": st}},
        ),
        (
            "get",
            "/aks/v1/traverse",
            "/aks/v1/traverse",
            {"params": {"domain": st, "start": entities[0]["name"]}},
        ),
        ("get", "/aks/v1/export", "/aks/v1/export", {"params": {"domain": st}}),
        (
            "get",
            "/v1/{stack}/neighbourhood",
            f"/v1/{st}/neighbourhood",
            {"params": {"entity": entities[0]["name"]}},
        ),
        (
            "get",
            "/v1/{stack}/lineage/{ref}",
            f"/v1/{st}/lineage/{note.json()['id']}",
            {},
        ),
        ("post", "/aks/v1/context", "/aks/v1/context", {"json": {"query": "retries"}}),
        (
            "post",
            "/v1/{stack}/ask",
            f"/v1/{st}/ask",
            {"json": {"question": "How are retries capped?", "llm": False}},
        ),
        (
            "post",
            "/v1/{stack}/citations/verify",
            f"/v1/{st}/citations/verify",
            {"json": {"items": [docs[0]["id"]]}},
        ),
        (
            "post",
            "/v1/{stack}/cypher",
            f"/v1/{st}/cypher",
            {"json": {"query": "MATCH (d:Doc) RETURN d.id AS id LIMIT 2"}},
        ),
        ("post", "/v1/{stack}/sync", f"/v1/{st}/sync", {}),
    ]
    assert note.status_code == 201, note.text
    found = misfits(doc, schemas, "/v1/{stack}/notes", "post", note)
    for method, path, url, kwargs in calls:
        r = h.request(method.upper(), url, **kwargs)
        assert r.status_code < 300, f"{method} {url}: {r.status_code} {r.text[:300]}"
        found += misfits(doc, schemas, path, method, r)
    assert not found, "\n".join(found)
