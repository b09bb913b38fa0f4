"""Graph edits: `ok graph add entity|relation`, `POST /v1/{stack}/entities` and
`/relationships`, MCP `graph_add_entity` and `graph_add_relationship`. Each lands as a
backfeed item with its provenance, pending or approved, and a rebuild keeps it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import mcp
from helpers.run import run_ok
from helpers.serve import Server, jwt_token, mcp_http

SECRET = "s3cret-for-graph-edit-tests-long-enough-for-hs256"


def _ok(*args: str) -> Any:
    r = run_ok(*args)
    assert r.code == 0, (args, r.err)
    return r


def test_an_entity_waits_for_review_then_is_approved_and_kept(example_kf: Path) -> None:
    doc = next(d["id"] for d in _ok("store", "list", "--json").json() if "crispr" in d["path"])
    r = _ok(
        "graph", "add", "entity", "Litestream", "--type", "software",
        "--description", "Streams SQLite changes to object storage.",
        "--alias", "litestream.io", "--source", doc, "--json",
    )  # fmt: skip
    item = r.json()
    assert item["status"] == "pending" and item["created"] and item["id"].startswith("bf-")
    assert item["entities"] == [
        {
            "name": "Litestream",
            "type": "Software",
            "description": "Streams SQLite changes to object storage.",
            "aliases": ["litestream.io"],
        }
    ]
    prov = item["provenance"]
    assert prov["via"] == "cli" and prov["by"] and prov["at"]
    assert [(s["id"], s["kind"]) for s in prov["sources"]] == [(doc, "doc")]
    assert f"ok backfeed approve {item['id']}" in r.err
    # plain output: the id, the status and what it adds
    plain = _ok("graph", "add", "entity", "Litestream", "-t", "Software",
                "--description", "Streams SQLite changes to object storage.",
                "--alias", "litestream.io", "--source", doc)  # fmt: skip
    assert plain.out.startswith(item["id"] + "\tpending\tLitestream (Software)")
    assert "queued before" in plain.err
    # pending: in the queue and its file, not in the graph
    assert (example_kf / "aks/backfeed" / f"{item['id']}.json").exists()
    shown = _ok("backfeed", "show", item["id"], "--json").json()
    assert shown["provenance"] == prov
    assert run_ok("graph", "entity", "Litestream").code == 2
    _ok("backfeed", "approve", item["id"])
    for _ in range(2):  # as approved, and again after a rebuild from the files
        e = _ok("graph", "entity", "Litestream", "--json").json()
        assert e["verified"] and e["source_kind"] == "backfeed" and e["type"] == "Software"
        assert e["description"] == "Streams SQLite changes to object storage."
        assert doc in [s["id"] for s in e["sources"]]
        _ok("index", "--rebuild")
    decided = _ok("backfeed", "show", item["id"], "--json").json()
    assert decided["status"] == "approved" and decided["decided_by"]["via"] == "cli"
    said = _ok("backfeed", "show", item["id"]).out.splitlines()
    assert said[1] == f"queued by {prov['by']} via cli at {prov['at']}"
    assert said[2].startswith(f"  source: {doc}") and said[3].startswith("approved by ")


def test_a_relation_approved_at_once_is_walked_and_survives_a_rebuild(example_kf: Path) -> None:
    note = _ok("mem", "list", "--json").json()[0]["id"]
    _ok("graph", "add", "entity", "Litestream", "-t", "Software", "--approve")
    r = _ok("graph", "add", "relation", "Litestream", "Replicates To", "SQLite",
            "--source", note, "--approve", "--json")  # fmt: skip
    item = r.json()
    assert item["status"] == "approved" and item["unknown"] == []
    assert item["relationships"] == [
        {"from": "Litestream", "to": "SQLite", "type": "replicates_to"}
    ]
    assert item["provenance"]["sources"][0] == {
        **item["provenance"]["sources"][0], "id": note, "kind": "memory"
    }  # fmt: skip
    for _ in range(2):
        e = _ok("graph", "entity", "Litestream", "--json").json()
        rels = {(x["type"], x["to_name"]) for x in e["relationships"]}
        assert ("replicates_to", "SQLite") in rels
        walk = _ok("graph", "traverse", "Litestream", "--depth", "1", "--json").json()
        assert "SQLite" in [s["entity"] for s in walk["steps"]]
        _ok("index", "--rebuild")


def test_a_relation_to_an_unknown_entity_waits_or_is_refused(example_kf: Path) -> None:
    r = run_ok("graph", "add", "relation", "Qwzx Engine", "uses", "SQLite", "--approve")
    assert r.code == 2 and "no entity 'Qwzx Engine'" in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert not list((example_kf / "aks/backfeed").glob("bf-*.json"))
    r = _ok("graph", "add", "relation", "Qwzx Engine", "uses", "SQLite", "--json")
    item = r.json()
    assert item["status"] == "pending" and item["unknown"] == ["Qwzx Engine"]
    assert "no entity 'Qwzx Engine' yet" in r.err
    # approving checks again: refused until the entity is there
    assert run_ok("backfeed", "approve", item["id"]).code == 2
    _ok("graph", "add", "entity", "Qwzx Engine", "-t", "Software", "--approve")
    _ok("backfeed", "approve", item["id"])
    e = _ok("graph", "entity", "Qwzx Engine", "--json").json()
    assert ("uses", "SQLite") in {(x["type"], x["to_name"]) for x in e["relationships"]}


def test_bad_edits_are_refused_in_one_line_and_write_nothing(example_kf: Path) -> None:
    cases = [
        (("entity", "Foo", "--type", "Gadget"), "unknown entity type"),
        (("entity", "   ", "--type", "Concept"), "entity name is empty"),
        (("entity", "Fo\x1bo", "--type", "Concept"), "control character"),
        (("entity", "Foo\u202ebar", "--type", "Concept"), "control character"),
        (("entity", "x" * 201, "--type", "Concept"), "at most 200"),
        (("entity", "Foo", "--type", "Concept", "--source", "nope-nope"), "no document"),
        (("entity", "Foo", "--type", "Concept", "--description", "d" * 2001), "at most 2000"),
        (("entity", "Foo"), "--type"),
        (("relation", "SQLite", "is a!", "WAL"), "snake_case"),
        (("relation", "SQLite", "uses", "sqlite"), "related to itself"),
        (("relation", "SQLite", "uses", ""), "empty"),
    ]
    for args, said in cases:
        r = run_ok("graph", "add", *args)
        assert r.code == 2, (args, r.out)
        assert said in r.err and "Error" in r.err, (args, r.err)
    assert not list((example_kf / "aks/backfeed").glob("bf-*.json"))


def test_edits_over_http_record_the_caller_and_need_admin_to_approve(example_kf: Path) -> None:
    write = _ok("serve", "keys", "add", "writer", "--scope", "write", "--json").json()
    read = _ok("serve", "keys", "add", "reader", "--scope", "read").out.strip()
    boss = _ok("serve", "keys", "add", "boss", "--scope", "admin", "--json").json()
    s = Server(
        example_kf, "--auth", env={"OK_SERVE_JWT_SECRET_ENV": "T_SECRET", "T_SECRET": SECRET}
    )
    try:
        h, st = s.http, s.stack
        as_writer = {"Authorization": f"Bearer {write['key']}"}
        admin = {"Authorization": f"Bearer {jwt_token(SECRET, f'{st}:admin')}"}
        body = {"name": "Litestream", "type": "Software", "sources": ["crispr-gene-editing"]}
        r = h.post(f"/v1/{st}/entities", json=body, headers=as_writer)
        assert r.status_code == 404 and r.json()["error"].startswith("no document")
        body["sources"] = ["docs/crispr-gene-editing.ok.md"]
        r = h.post(f"/v1/{st}/entities", json=body, headers=as_writer)
        assert r.status_code == 201, r.text
        item = r.json()
        assert item["status"] == "pending" and item["created"]
        assert item["provenance"]["via"] == "http"
        assert item["provenance"]["by"] == f"key:{st}/writer"
        assert item["provenance"]["key_id"] == write["id"]
        assert item["provenance"]["sources"][0]["kind"] == "doc"
        again = h.post(f"/v1/{st}/entities", json=body, headers=as_writer)
        assert again.status_code == 200 and not again.json()["created"]
        # approving needs admin; a read key may not edit at all
        r = h.post(f"/v1/{st}/entities", json={**body, "approve": True}, headers=as_writer)
        assert r.status_code == 403 and "approve" in r.json()["error"]
        r = h.post(f"/v1/{st}/entities", json=body, headers={"Authorization": f"Bearer {read}"})
        assert r.status_code == 403
        r = h.post(f"/v1/{st}/entities", json={**body, "approve": True}, headers=admin)
        assert r.status_code == 200 and r.json()["status"] == "approved", r.text
        assert r.json()["decided_by"]["by"] == "jwt:agent-7"
        rel = {"from": "Litestream", "to": "SQLite", "type": "uses", "approve": True}
        r = h.post(f"/v1/{st}/relationships", json=rel, headers=admin)
        assert r.status_code == 201 and r.json()["status"] == "approved", r.text
        e = h.get(f"/aks/v1/entities/Litestream?domain={st}", headers=admin).json()
        assert e["verified"] and ("uses", "SQLite") in {
            (x["type"], x["to_name"]) for x in e["relationships"]
        }
        # the older AKS backfeed routes record their callers the same way
        as_boss = {"Authorization": f"Bearer {boss['key']}"}
        for name, decision in (("Raft", "approve"), ("Paxos", "reject")):
            proposal = {"entities": [{"name": name, "type": "Concept"}], "relationships": []}
            r = h.post(f"/aks/v1/backfeed/flag?domain={st}", json=proposal, headers=as_writer)
            assert r.status_code == 201, r.text
            flagged = r.json()
            assert flagged["provenance"]["via"] == "http"
            assert flagged["provenance"]["key_id"] == write["id"]
            decided = h.post(
                f"/aks/v1/backfeed/{decision}",
                json={"item_id": flagged["id"], "domain": st, "reason": "checked"},
                headers=as_boss,
            )
            assert decided.status_code == 200, decided.text
            assert decided.json()["decided_by"] == {
                "via": "http", "by": f"key:{st}/boss", "key_id": boss["id"]
            }  # fmt: skip
        # bad input: a JSON 4xx, nothing written
        bad = [
            ("entities", {"name": "X", "type": "Gadget"}, 400),
            ("entities", {"name": "X"}, 422),
            ("entities", {"name": "X", "type": "Concept", "extra": 1}, 422),
            (
                "relationships",
                {"from": "Nope Qwzx", "to": "SQLite", "type": "uses", "approve": True},
                400,
            ),  # fmt: skip
            ("relationships", {"from": "SQLite", "to": "WAL", "type": "??"}, 400),
        ]
        before = sorted((example_kf / "aks/backfeed").glob("bf-*.json"))
        for route, b, code in bad:
            r = h.post(f"/v1/{st}/{route}", json=b, headers=admin)
            assert r.status_code == code and r.json()["error"], (route, b, r.text)
        assert sorted((example_kf / "aks/backfeed").glob("bf-*.json")) == before
    finally:
        s.stop()
    # what the server wrote is the folder's: a rebuild keeps it
    _ok("index", "--rebuild")
    assert _ok("graph", "entity", "Litestream", "--json").json()["verified"]


def test_mcp_tools_add_entities_and_relationships(example_kf: Path) -> None:
    async def use(client: Any) -> Any:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert not tools["graph_add_entity"].annotations.read_only_hint
        ent = await mcp.call(
            client, "graph_add_entity", name="Litestream", type="Software", approve=True
        )
        rel = await mcp.call(
            client, "graph_add_relationship", from_name="Litestream", type="uses",
            to_name="SQLite", sources=["docs/write-ahead-logging.ok.md"],
        )  # fmt: skip
        bad = await mcp.fail(client, "graph_add_entity", name="X", type="Gadget")
        refused = await mcp.fail(
            client, "graph_add_relationship", from_name="Nope Qwzx", type="uses",
            to_name="SQLite", approve=True,
        )  # fmt: skip
        return ent, rel, bad, refused

    ent, rel, bad, refused = mcp.serve([example_kf], use)
    assert ent["status"] == "approved" and ent["provenance"]["via"] == "mcp"
    assert rel["status"] == "pending" and rel["provenance"]["sources"][0]["kind"] == "doc"
    assert "unknown entity type" in bad and "no entity 'Nope Qwzx'" in refused
    assert _ok("graph", "entity", "Litestream", "--json").json()["verified"]
    queued = _ok("backfeed", "queue", "--json").json()
    assert [i["id"] for i in queued] == [rel["id"]]
    # a read-only server has no edit tools
    names = {t["name"] for t in _ok("mcp", "--list-tools", "--read-only").json()}
    assert "graph_add_entity" not in names and "mem_add" not in names


def test_mcp_over_http_records_the_http_caller(example_kf: Path) -> None:
    write = _ok("serve", "keys", "add", "agent", "--scope", "write", "--json").json()
    s = Server(example_kf, "--auth")

    async def add(client: Any) -> Any:
        ok = await mcp.call(client, "graph_add_entity", name="Litestream", type="Software")
        no = await mcp.fail(
            client, "graph_add_entity", name="Rqlite", type="Software", approve=True
        )
        return ok, no

    try:
        item, refused = mcp_http(s.url, add, write["key"])
    finally:
        s.stop()
    prov = item["provenance"]
    assert prov["via"] == "mcp" and prov["by"] == f"key:{s.stack}/agent"
    assert prov["key_id"] == write["id"] and item["status"] == "pending"
    assert "may not approve" in refused
    saved = json.loads((example_kf / "aks/backfeed" / f"{item['id']}.json").read_text())
    assert saved["provenance"] == prov
