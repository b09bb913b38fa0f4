"""The AKS reference server's quick start, walked as its README writes it, against `ok serve`
(a real uvicorn over HTTP); and the routes it names beside: stacks by id, compiling a
document, `scope=verified`, description synthesis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.openai_stub import chat_server
from helpers.run import run_ok
from helpers.serve import Server

from openkl import ops
from openkl.errors import OkError
from openkl.files.folder import open_folder

pytestmark = pytest.mark.server

RUNBOOK = """\
# Incident Response Runbook
When a service produces a P1 incident, the on-call engineer is paged
through the monitoring system. The on-call engineer must acknowledge
the page within 5 minutes. The first task is to determine whether the
incident was caused by a recent deployment.
If the incident is caused by a deployment, the on-call engineer initiates
a rollback. The rollback procedure reverts the offending change and
restores service to the previous known-good version. Every rollback
generates a postmortem document within 48 hours.
The postmortem includes a timeline, a root cause analysis, and a list
of remediation actions. Remediation actions are tracked in the engineering
backlog and reviewed at the weekly engineering retrospective.
"""


def test_the_seed_quick_start_as_written(kf: Path, tmp_path: Path) -> None:
    runbook = tmp_path / "runbook.md"
    runbook.write_text(RUNBOOK)
    with chat_server(["The rollback procedure reverts the offending change [1]."]) as llm:
        env = {
            "OK_SERVE_STACKS_DIR": str(tmp_path / "stacks"),
            "OK_LLM_BASE_URL": llm.url,
            "OK_LLM_MODEL": "stub-model",
        }
        s = Server(kf, env=env)
        try:
            h = s.http
            # 1. Create a Stack; note the id field in the response
            r = h.post("/stacks", json={"name": "Test Stack", "domain": "test-stack"})
            assert r.status_code == 201, r.text
            stack_id = r.json()["id"]
            assert stack_id == "test-stack" and r.json()["metadata"] == {"title": "Test Stack"}
            assert "test-stack" in [x["id"] for x in h.get("/stacks").json()]
            assert h.get(f"/stacks/{stack_id}").json()["id"] == stack_id
            # 3. Upload it (multipart, as curl -F file=@/tmp/runbook.md); note the document id
            with runbook.open("rb") as fh:
                r = h.post(f"/stacks/{stack_id}/documents", files={"file": fh})
            assert r.status_code == 201, r.text
            doc_id = r.json()["id"]
            assert [d["id"] for d in h.get(f"/stacks/{stack_id}/documents").json()] == [doc_id]
            # 4. Compile it: chunks, entities and relationships; idempotent
            r = h.post(f"/stacks/{stack_id}/documents/{doc_id}/ingest")
            assert r.status_code == 200, r.text
            compiled = r.json()
            assert compiled["id"] == doc_id and compiled["status"] == "compiled"
            assert compiled["chunks"] >= 1 and compiled["entities"] >= 1
            assert h.post(f"/stacks/{stack_id}/documents/{doc_id}/ingest").json() == compiled
            r = h.post(f"/stacks/{stack_id}/documents/0123456789abcdef/ingest")
            assert r.status_code == 404 and r.json()["error"]
            # 5. Query it in natural language
            r = h.post(
                "/aks/v1/context",
                json={
                    "query": "what does the on-call engineer do during a P1?",
                    "domain": "test-stack",
                },
            )
            assert r.status_code == 200, r.text
            ctx = r.json()
            assert ctx["entities"] and ctx["reasoning"] and ctx["confidence"]
            # 6. Generate an entity page
            r = h.get("/aks/v1/pages/Rollback", params={"domain": "test-stack"})
            assert r.status_code == 200, r.text
            assert "rollback" in json.loads(r.text)["markdown"].lower()
            # 7. Export the whole Stack as an AKS Bundle, valid against the schema
            r = h.get("/aks/v1/export", params={"domain": "test-stack"})
            assert r.status_code == 200, r.text
            checked = ops.validate_bundle(r.text)
            assert checked["valid"] and checked["entities"] >= compiled["entities"]

            # the entity listing's scope: nothing is verified until a reviewer approves it
            ents = "/aks/v1/entities"
            got = h.get(ents, params={"domain": "test-stack", "scope": "verified"})
            assert got.status_code == 200 and got.json() == []
            assert len(h.get(ents, params={"domain": "test-stack", "scope": "all"}).json()) > 0
            r = h.get(ents, params={"domain": "test-stack", "scope": "mine"})
            assert r.status_code == 422 and r.json()["error"]
            flag = h.post(
                "/aks/v1/backfeed/flag",
                params={"domain": "test-stack"},
                json={"entities": [{"name": "Postmortem Review", "type": "Process"}]},
            )
            assert flag.status_code == 201, flag.text
            r = h.post(
                "/aks/v1/backfeed/approve",
                json={"item_id": flag.json()["id"], "domain": "test-stack"},
            )
            assert r.status_code == 200, r.text
            got = h.get(ents, params={"domain": "test-stack", "scope": "verified"}).json()
            assert [e["name"] for e in got] == ["Postmortem Review"] and got[0]["verified"]

            # descriptions, synthesized per stack, and per entity with another describer
            asked = len(llm.requests)  # the context's entity selection asked the model
            r = h.post(f"/stacks/{stack_id}/synthesize-descriptions")
            assert r.status_code == 200, r.text
            made = r.json()
            assert made["describer"] == "local" and made["entities"] >= 1
            assert made["described"] == sum(1 for x in made["results"] if x["description"])
            assert len(llm.requests) == asked  # the local describer asks no model
            r = h.post(
                "/aks/v1/entities/rollback/synthesize-description",
                params={"domain": "test-stack", "describer": "llm"},
            )
            assert r.status_code == 200, r.text
            one = r.json()
            assert one["describer"] == "llm" and one["name"].lower() == "rollback"
            assert one["description"]["method"] == "llm" and len(llm.requests) == asked + 1
            assert "reverts the offending change" in one["description"]["text"]
            for bad in (
                ("/aks/v1/entities/rollback/synthesize-description", {"describer": "x"}, 422),
                ("/aks/v1/entities/nobody-here/synthesize-description", {}, 404),
                (f"/stacks/{stack_id}/synthesize-descriptions", {"name": "nobody-here"}, 404),
            ):
                r = h.post(bad[0], params={"domain": "test-stack", **bad[1]})
                assert r.status_code == bad[2] and r.json()["error"], r.text

            # the reference server's stack-less document paths name the route to use
            r = h.get(f"/documents/{doc_id}")
            assert r.status_code == 404 and f"/v1/STACK/documents/{doc_id}" in r.json()["hint"]
            assert h.delete(f"/documents/{doc_id}").status_code == 404
            r = h.delete(f"/stacks/{stack_id}")
            assert r.status_code == 200 and r.json()["files_deleted"] is False
            assert h.get(f"/stacks/{stack_id}").status_code == 404
        finally:
            s.stop()


def test_the_llm_describer_needs_an_llm(example_kf: Path) -> None:
    f = open_folder(example_kf)
    with pytest.raises(OkError, match="no LLM is configured"):
        ops.synthesize_descriptions(ops.Call(f), ["Ada Lovelace"], describer="llm")
    with pytest.raises(OkError, match="unknown describer 'poet'"):
        ops.synthesize_descriptions(ops.Call(f), describer="poet")
    made = ops.synthesize_descriptions(ops.Call(f), ["Ada Lovelace", "ada lovelace"])
    assert made["entities"] == 1 and made["results"][0]["name"] == "Ada Lovelace"
    assert made["results"][0]["description"]["cite"]
    assert run_ok("graph", "entity", "Ada Lovelace", "--json").json()["description"]
