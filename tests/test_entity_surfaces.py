"""Entities as every surface shows them: the CLI's JSON, HTTP (a real `ok serve`) and MCP (a
real client over stdio) carry the description the entity's page shows, with the passage
that says it; and every surface uses one confidence floor, entities.min_confidence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import call, serve
from helpers.run import run_ok
from helpers.serve import Server

NAME = "Ada Lovelace"


def page_of(name: str) -> str:
    r = run_ok("graph", "page", name, "--json")
    assert r.code == 0, r.err
    return str(r.json()["markdown"])


def assert_described_as_its_page(e: dict[str, Any], markdown: str) -> None:
    """The entity's description is the one its page shows, cited to the same passage, and
    its mention is empty."""
    cite = e["description_cite"]
    assert e["description"] and cite, e
    assert e["description"] in markdown
    assert f"`{cite['id']}`" in markdown
    assert " ".join(cite["quote"].split()) == e["description"] or e["description"] in cite["quote"]
    assert cite["loc"]["end"] > cite["loc"]["start"] and cite["path"]
    # beside it, the mention field, empty: a described entity needs no sentence naming it
    assert e["mention"] == "" and e["mention_cite"] is None, e


def test_the_cli_s_entity_json_carries_the_page_s_description(example_kf: Path) -> None:
    md = page_of(NAME)
    one = run_ok("graph", "entity", NAME, "--json")
    assert one.code == 0, one.err
    assert_described_as_its_page(one.json(), md)
    listed = run_ok("graph", "entities", "--json")
    assert listed.code == 0, listed.err
    rows = {e["name"]: e for e in listed.json()}
    assert_described_as_its_page(rows[NAME], md)
    # an entity no passage defines says so: no text, no citation, and its page says the same
    bare = [e for e in rows.values() if not e["description"]]
    assert bare and all(e["description_cite"] is None for e in bare)
    assert "_No source says what this entity is._" in page_of(bare[0]["name"])
    ctx = run_ok("context", "Who was Ada Lovelace?", "--json")
    assert ctx.code == 0, ctx.err
    got = {e["name"]: e for e in ctx.json()["entities"]}
    assert_described_as_its_page(got[NAME], md)
    plain = run_ok("graph", "entity", NAME)
    assert (
        one.json()["description"] in plain.out and one.json()["description_cite"]["id"] in plain.out
    )


@pytest.mark.server
def test_http_entity_json_carries_the_page_s_description(served: Server) -> None:
    h, dom = served.http, {"domain": served.stack}
    md = h.get(f"/aks/v1/pages/{NAME}", params=dom).json()["markdown"]
    one = h.get(f"/aks/v1/entities/{NAME}", params=dom)
    assert one.status_code == 200, one.text
    assert_described_as_its_page(one.json(), md)
    listed = h.get("/aks/v1/entities", params=dom)
    assert listed.status_code == 200, listed.text
    rows = listed.json()
    rows = rows.get("entities", rows) if isinstance(rows, dict) else rows
    assert_described_as_its_page({e["name"]: e for e in rows}[NAME], md)
    ctx = h.post("/aks/v1/context", json={"query": "Who was Ada Lovelace?", "domain": served.stack})
    assert ctx.status_code == 200, ctx.text
    assert_described_as_its_page({e["name"]: e for e in ctx.json()["entities"]}[NAME], md)


@pytest.mark.server
def test_mcp_entity_json_carries_the_page_s_description(example_kf: Path) -> None:
    md = page_of(NAME)

    async def go(c: Any) -> None:
        one = await call(c, "entities", name=NAME)
        assert_described_as_its_page(one, md)
        listed = await call(c, "entities", limit=200)
        assert_described_as_its_page({e["name"]: e for e in listed["results"]}[NAME], md)
        ctx = await call(c, "context", query="Who was Ada Lovelace?")
        assert_described_as_its_page({e["name"]: e for e in ctx["entities"]}[NAME], md)

    serve([example_kf], go)


FLOOR = 0.6  # not the default: a surface holding a floor of its own shows it


@pytest.mark.server
def test_every_surface_uses_the_folder_s_confidence_floor(example_kf: Path) -> None:
    assert run_ok("config", "set", "entities.min_confidence", str(FLOOR)).code == 0
    everything = run_ok("graph", "entities", "--min-confidence", "0", "--json").json()
    above = {e["name"] for e in everything if e["confidence"] >= FLOOR}
    assert above and len(above) < len(everything)  # the floor leaves some out
    cli = run_ok("graph", "entities", "--json")
    assert {e["name"] for e in cli.json()} == above
    cas9 = run_ok("graph", "entity", "Cas9", "--json").json()
    rels = [r["confidence"] for r in cas9["relationships"]]
    assert rels and min(rels) >= FLOOR
    assert (
        min(
            r["confidence"]
            for r in run_ok("graph", "entity", "Cas9", "--min-confidence", "0", "--json").json()[
                "relationships"
            ]
        )
        < FLOOR
    )
    page = run_ok("graph", "page", "Cas9", "--json").json()["markdown"]
    assert page.count("\n- ") == len(rels)  # the page lists the same relationships
    walk = run_ok("graph", "traverse", "Cas9", "--json").json()
    assert walk["steps"] and all(s["via"]["confidence"] >= FLOOR for s in walk["steps"])
    ctx = run_ok("context", "gene editing with Cas9", "--json").json()
    assert ctx["entities"] and all(e["confidence"] >= FLOOR for e in ctx["entities"])
    s = Server(example_kf)
    try:
        h, dom = s.http, {"domain": s.stack}
        api = h.get("/aks/v1/entities", params={**dom, "limit": 10_000}).json()
        assert {e["name"] for e in api} == above
        one = h.get("/aks/v1/entities/Cas9", params=dom).json()
        assert [r["confidence"] for r in one["relationships"]] == rels
        nb = h.get(f"/v1/{s.stack}/neighbourhood", params={"entity": "Cas9", "depth": 2}).json()
        assert nb["min_confidence"] == FLOOR and nb["nodes"] and nb["edges"]
        assert all(n["confidence"] >= FLOOR for n in nb["nodes"])
        assert all(e["confidence"] >= FLOOR for e in nb["edges"])
        got = h.post("/aks/v1/context", json={"query": "gene editing with Cas9", **dom}).json()
        assert [e["name"] for e in got["entities"]] == [e["name"] for e in ctx["entities"]]
        bundle = h.get("/aks/v1/export", params=dom).json()
        assert {e["name"] for e in bundle["entities"]} == above
        assert bundle["filters_applied"]["min_confidence"] == FLOOR
        every = h.get("/aks/v1/export", params={**dom, "all": "true"}).json()
        assert len(every["entities"]) == len(everything) and "filters_applied" not in every
    finally:
        s.stop()

    async def go(c: Any) -> None:
        listed = await call(c, "entities", limit=10_000)
        names = [e["name"] for e in listed["results"]]
        assert set(names) <= above and all(e["confidence"] >= FLOOR for e in listed["results"])
        assert names == [e["name"] for e in cli.json()][: len(names)]
        one = await call(c, "entities", name="Cas9")
        assert [r["confidence"] for r in one["relationships"]] == rels
        walk = await call(c, "traverse", name="Cas9")
        assert all(s["via"]["confidence"] >= FLOOR for s in walk["results"])

    serve([example_kf], go)
