"""Backfeed: flag, queue, approve, reject; canonical files that survive rebuilds."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.run import run_ok

PROPOSAL = {
    "entities": [
        {
            "name": "Litestream",
            "type": "System",
            "description": "Streams SQLite changes to object storage.",
        }
    ],
    "relationships": [
        {"from": "Litestream", "to": "SQLite", "type": "replicates"},
        {"from": "Litestream", "to": "WAL", "type": "reads"},
    ],
}


def _flag(payload: object) -> dict:
    r = run_ok("backfeed", "flag", "--json", input=json.dumps(payload))
    assert r.code == 0, r.err
    return r.json()


def test_flag_approve_and_survive_rebuild(example_kf: Path) -> None:
    item = _flag(PROPOSAL)
    assert item["status"] == "pending" and item["created"]
    assert _flag(PROPOSAL)["id"] == item["id"]  # same proposal, same item
    assert (example_kf / "aks" / "backfeed" / f"{item['id']}.json").exists()
    q = run_ok("backfeed", "queue", "--json").json()
    assert [i["id"] for i in q] == [item["id"]]
    # not in the graph until approved
    assert run_ok("graph", "entity", "Litestream").code == 2
    r = run_ok("backfeed", "approve", item["id"], "--json")
    assert r.code == 0, r.err
    for _ in range(2):
        r = run_ok("graph", "entity", "Litestream", "--json")
        assert r.code == 0, r.err
        e = r.json()
        assert e["verified"] and e["source_kind"] == "backfeed" and e["type"] == "System"
        rels = {(r["type"], r["to_name"]) for r in e["relationships"]}
        assert ("replicates", "SQLite") in rels and ("reads", "Write-ahead logging") in rels
        assert run_ok("index", "--rebuild").code == 0
    assert run_ok("backfeed", "queue", "--json").json() == []
    assert len(run_ok("backfeed", "queue", "--status", "approved", "--json").json()) == 1
    b = json.loads(run_ok("graph", "export", "--out", "-").out)
    lit = next(e for e in b["entities"] if e["name"] == "Litestream")
    assert lit["source"]["verified"] and lit["source"]["source_kind"] == "backfeed"


def test_approved_item_marks_an_existing_entity_verified(example_kf: Path) -> None:
    item = _flag({"entities": [{"name": "sqlite", "type": "System"}]})
    assert run_ok("backfeed", "approve", item["id"]).code == 0
    e = run_ok("graph", "entity", "SQLite", "--json").json()
    assert e["verified"] and len(e["docs"]) == 2 and e["type"] == "System"


def test_reject_and_decide_twice(example_kf: Path) -> None:
    item = _flag({"entities": [{"name": "Phlogiston", "type": "Concept"}]})
    r = run_ok("backfeed", "reject", item["id"])
    assert r.code == 2  # --reason is required
    r = run_ok("backfeed", "reject", item["id"], "--reason", "not a thing", "--json")
    assert r.code == 0 and r.json()["reason"] == "not a thing"
    r = run_ok("backfeed", "approve", item["id"])
    assert r.code == 2 and "already rejected" in r.err
    ok = _flag({"entities": [{"name": "Oxygen"}]})
    assert run_ok("backfeed", "approve", ok["id"]).code == 0
    r = run_ok("backfeed", "approve", ok["id"])
    assert r.code == 2 and "already approved" in r.err
    assert run_ok("graph", "entity", "Phlogiston").code == 2


def test_bad_input_is_refused_and_nothing_is_written(example_kf: Path) -> None:
    cases = [
        ("{not json", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"entities": []}', "proposes no entities"),
        ('{"entities": [{"type": "X"}]}', "$.entities[0].name"),
        ('{"entities": [{"name": "A", "confidence": 3}]}', "$.entities[0].confidence"),
        (
            '{"relationships": [{"from": "Nowhere Man", "to": "SQLite", "type": "x"}]}',
            "unknown entity 'Nowhere Man'",
        ),
        ('{"entities": [{"name": "A"}], "bogus": 1}', "$.bogus"),
    ]
    for text, msg in cases:
        r = run_ok("backfeed", "flag", input=text)
        assert r.code == 2, text
        assert msg in r.err, (text, r.err)
    assert not (example_kf / "aks" / "backfeed").exists() or not list(
        (example_kf / "aks" / "backfeed").iterdir()
    )
    r = run_ok("backfeed", "approve", "bf-000000000000")
    assert r.code == 2 and "no backfeed item" in r.err
    r = run_ok("backfeed", "queue", "--status", "maybe")
    assert r.code == 2
