"""AKS bundles: schema-valid export, stable ids, round trip, import errors by JSON path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.run import REPO, run_ok

SHARED_SCHEMA = REPO.parent / "shared" / "aks" / "SCHEMA.json"


def _schema() -> dict:
    from openkl.knowledge.aks import SCHEMA_PATH

    ours = json.loads(SCHEMA_PATH.read_text())
    if SHARED_SCHEMA.exists():
        assert json.loads(SHARED_SCHEMA.read_text()) == ours, "bundled schema is out of date"
    return ours


def _export(*args: str) -> dict:
    r = run_ok("graph", "export", "--format", "aks", "--out", "-", *args)
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_export_validates_and_is_stable(example_kf: Path) -> None:
    from jsonschema import Draft202012Validator

    b = _export()
    Draft202012Validator(_schema()).validate(b)
    assert b["entity_count"] == len(b["entities"]) > 20
    assert b["relationship_count"] == len(b["relationships"]) > 10
    floor = float(run_ok("config", "get", "entities.min_confidence").out)
    assert b["filters_applied"]["min_confidence"] == floor  # the floor every view applies
    ids = {e["id"] for e in b["entities"]}
    assert all(r["from_entity_id"] in ids and r["to_entity_id"] in ids for r in b["relationships"])
    assert all(e["source"]["source_kind"] for e in b["entities"])
    docs = {d["id"] for d in b["documents"]}
    assert all(set(e["contributing_documents"]) <= docs for e in b["entities"])
    again = _export()
    assert [e["id"] for e in again["entities"]] == [e["id"] for e in b["entities"]]
    assert [r["id"] for r in again["relationships"]] == [r["id"] for r in b["relationships"]]


def test_export_leaves_out_entities_below_the_floor_unless_all(example_kf: Path) -> None:
    from jsonschema import Draft202012Validator, FormatChecker

    check = Draft202012Validator(_schema(), format_checker=FormatChecker())
    floor = float(run_ok("config", "get", "entities.min_confidence").out)
    listed = run_ok("graph", "entities", "--json").json()
    everything = run_ok("graph", "entities", "--min-confidence", "0", "--json").json()
    assert len(listed) < len(everything)  # some are below the floor
    b = _export()
    check.validate(b)
    assert {e["name"] for e in b["entities"]} == {e["name"] for e in listed}
    assert all(e["confidence"] >= floor for e in b["entities"])
    assert all(r["confidence"] >= floor for r in b["relationships"])
    every = _export("--all")
    check.validate(every)
    assert {e["name"] for e in every["entities"]} == {e["name"] for e in everything}
    assert "filters_applied" not in every and len(every["relationships"]) > len(b["relationships"])
    # --all and a floor of one's own contradict each other
    r = run_ok("graph", "export", "--all", "--min-confidence", "0.5", "-o", "-")
    assert r.code == 2 and "--all" in r.err and r.out == ""


def test_export_shows_progress_on_a_terminal_only(example_kf: Path, tmp_path: Path) -> None:
    import os
    import pty
    import re
    import subprocess
    import threading

    from helpers.run import OK_BIN, run_cli

    n = len(run_ok("graph", "entities", "--min-confidence", "0", "--json").json())
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "OK_NO_PROGRESS"}
    env.update({"COLUMNS": "120", "TERM": "xterm"})
    seen: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                return
            if not chunk:
                return
            seen.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out = tmp_path / "all.aks.json"
    proc = subprocess.run(
        [OK_BIN, "graph", "export", "--all", "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
        timeout=300,
    )
    os.close(follower)
    reader.join(timeout=10)
    os.close(leader)
    shown = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", b"".join(seen).decode(errors="replace"))
    assert proc.returncode == 0, shown
    assert re.search(rf"describing entities\S*\s.*?\d+/{n}\b", shown), shown
    assert json.loads(out.read_text())["entity_count"] == n
    piped = run_cli("graph", "export", "--all", "-o", str(out), env=env)
    assert piped.code == 0 and "describing" not in piped.err


def test_filtered_export_records_filters_and_drops_dangling(example_kf: Path) -> None:
    from jsonschema import Draft202012Validator

    b = _export("--min-confidence", "0.8", "--max-entities", "5")
    Draft202012Validator(_schema()).validate(b)
    assert b["filters_applied"] == {
        "min_confidence": 0.8,
        "verified_only": None,
        "entity_type": None,
        "max_entities": 5,
    }
    assert len(b["entities"]) == 5 and all(e["confidence"] >= 0.8 for e in b["entities"])
    ids = {e["id"] for e in b["entities"]}
    assert all(r["from_entity_id"] in ids and r["to_entity_id"] in ids for r in b["relationships"])


def test_export_files_and_formats(example_kf: Path) -> None:
    r = run_ok("graph", "export", "--json")
    assert r.code == 0, r.err
    files = r.json()["files"]
    assert files[0].endswith(".aks.json") and Path(files[0]).parent == example_kf / "graph"
    r = run_ok("graph", "export", "--format", "graphml", "--out", "-")
    assert r.code == 0 and r.out.startswith("<?xml") and "<node id=" in r.out
    import xml.dom.minidom

    xml.dom.minidom.parseString(r.out)
    r = run_ok("graph", "export", "--format", "csv", "--json")
    names = sorted(Path(p).name for p in r.json()["files"])
    assert names == ["entities.csv", "relationships.csv"]
    r = run_ok("graph", "export", "--format", "rdf")
    assert r.code != 0 and "unknown format" in r.err


def test_csv_export_never_runs_two_tables_together(example_kf: Path, tmp_path: Path) -> None:
    """Two CSV tables in one stream read as one table with a second header in the middle:
    stdout takes one table (or JSON), a directory takes both files."""
    r = run_ok("graph", "export", "--format", "csv", "-o", "-")
    assert r.code == 2 and not r.out, r.out[:200]
    assert "--table entities|relationships" in r.err and "-o DIR" in r.err
    assert len(r.err.strip().splitlines()) == 1
    for table, header in (
        ("entities", "id,name,type"),
        ("relationships", "id,from_id,from"),
        ("relations", "id,from_id,from"),
    ):
        r = run_ok("graph", "export", "--format", "csv", "--table", table, "-o", "-")
        assert r.code == 0, r.err
        lines = r.out.splitlines()
        assert lines[0].startswith(header) and len(lines) > 1
        assert not any(line.startswith("id,") for line in lines[1:])
    r = run_ok("graph", "export", "--format", "csv", "-o", "-", "--json")
    data = r.json()
    assert data["format"] == "csv" and set(data["content"]) == {"entities.csv", "relationships.csv"}
    assert len(data["rows"]["entities"]) == data["entities"] > 0
    assert {"id", "name", "type"} <= set(data["rows"]["entities"][0])
    assert len(data["rows"]["relationships"]) == data["relationships"]
    r = run_ok("graph", "export", "--format", "graphml", "-o", "-", "--json")
    assert next(iter(r.json()["content"].values())).startswith("<?xml")
    out = tmp_path / "exports"
    r = run_ok("graph", "export", "--format", "csv", "-o", str(out), "--json")
    assert sorted(Path(p).name for p in r.json()["files"]) == ["entities.csv", "relationships.csv"]
    assert (out / "entities.csv").read_text().startswith("id,name,type")
    r = run_ok("graph", "export", "--format", "csv", "-o", str(tmp_path / "one.csv"))
    assert r.code == 2 and "not a directory" in r.err and not (tmp_path / "one.csv").exists()
    r = run_ok(
        "graph",
        "export",
        "--format",
        "csv",
        "--table",
        "entities",
        "-o",
        str(tmp_path / "one.csv"),
        "--json",
    )
    assert r.json()["files"] == [str(tmp_path / "one.csv")]
    assert (tmp_path / "one.csv").read_text().startswith("id,name,type")
    r = run_ok("graph", "export", "--format", "aks", "--table", "entities")
    assert r.code == 2 and "--format csv only" in r.err


def test_round_trip_into_an_empty_folder(example_kf: Path, tmp_path: Path) -> None:
    bundle = _export()
    path = tmp_path / "b.json"
    path.write_text(json.dumps(bundle))
    empty = tmp_path / "empty"
    assert run_ok("init", str(empty)).code == 0
    r = run_ok("--root", str(empty), "bundle", "import", str(path), "--json")
    assert r.code == 0, r.err
    assert r.json()["entities"] == bundle["entity_count"]
    r = run_ok("--root", str(empty), "graph", "export", "--out", "-")
    back = json.loads(r.out)
    assert back["entities"] == bundle["entities"]
    assert back["relationships"] == bundle["relationships"]
    assert back["documents"] == bundle["documents"]
    # entities, traverse, context and pages work from the bundle alone, and survive a rebuild
    assert run_ok("--root", str(empty), "index", "--rebuild").code == 0
    r = run_ok("--root", str(empty), "graph", "traverse", "Ada Lovelace", "--json")
    assert "Charles Babbage" in {s["entity"] for s in r.json()["steps"]}
    r = run_ok("--root", str(empty), "graph", "page", "Ada Lovelace")
    assert r.code == 0 and "# Ada Lovelace" in r.out and "ada-lovelace.html" in r.out
    r = run_ok("--root", str(empty), "context", "Charles Babbage", "--json")
    assert r.code == 0 and "Charles Babbage" in [e["name"] for e in r.json()["entities"]]
    assert (
        json.loads(run_ok("--root", str(empty), "graph", "export", "--out", "-").out)["entities"]
        == bundle["entities"]
    )


def test_foreign_bundle_merges_with_extracted_entities(example_kf: Path, tmp_path: Path) -> None:
    b = {
        "aks_version": "0.1.0",
        "domain": "ops",
        "stack_id": "0b5f1f3e-2a35-4d8b-9a57-1f5b4b3a7c11",
        "stack_name": "Ops",
        "compiled_at": "2025-01-01T00:00:00Z",
        "scope": "stack",
        "entity_count": 2,
        "relationship_count": 2,
        "entities": [
            {
                "id": "11111111-1111-4111-8111-111111111111",
                "name": "sqlite",
                "type": "System",
                "confidence": 0.7,
                "description": "An embedded SQL engine.",
            },
            {
                "id": "22222222-2222-4222-8222-222222222222",
                "name": "Litestream",
                "type": "System",
                "confidence": 0.8,
            },
        ],
        "relationships": [
            {
                "id": "33333333-3333-4333-8333-333333333333",
                "from_entity_id": "22222222-2222-4222-8222-222222222222",
                "to_entity_id": "11111111-1111-4111-8111-111111111111",
                "type": "replicates",
                "confidence": 0.9,
            },
            {
                "id": "44444444-4444-4444-8444-444444444444",
                "from_entity_id": "22222222-2222-4222-8222-222222222222",
                "to_entity_id": "99999999-9999-4999-8999-999999999999",
                "type": "uses",
                "confidence": 0.9,
            },
        ],
    }
    p = tmp_path / "ops.json"
    p.write_text(json.dumps(b))
    r = run_ok("bundle", "import", str(p), "--json")
    assert r.code == 0, r.err
    assert r.json()["dropped_relationships"] == 1
    e = run_ok("graph", "entity", "SQLite", "--json").json()
    assert e["type"] == "System" and e["description"] == "An embedded SQL engine."
    assert len(e["docs"]) == 2  # still both example documents
    assert any(
        r["from_name"] == "Litestream" and r["type"] == "replicates" for r in e["relationships"]
    )
    assert (example_kf / "aks" / "imports").is_dir()


@pytest.mark.parametrize(
    "mutate,path",
    [
        (lambda b: b["entities"][0].update(confidence=1.5), "$.entities[0].confidence"),
        (lambda b: b.pop("stack_id"), "$"),
        (
            lambda b: b["relationships"][0].update(from_entity_id="nope"),
            "$.relationships[0].from_entity_id",
        ),
        (lambda b: b.update(entity_count=999), "$.entity_count"),
    ],
)
def test_bad_bundles_name_the_json_path(example_kf: Path, tmp_path: Path, mutate, path) -> None:
    b = _export()
    mutate(b)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(b))
    before = sorted((example_kf / "aks").rglob("*")) if (example_kf / "aks").exists() else []
    r = run_ok("bundle", "import", str(p))
    assert r.code == 2
    assert f"at {path}" in r.err, r.err
    after = sorted((example_kf / "aks").rglob("*")) if (example_kf / "aks").exists() else []
    assert before == after  # nothing written
    r = run_ok("bundle", "validate", str(p))
    assert r.code == 2 and path in r.err
    p.write_text("{not json")
    r = run_ok("bundle", "import", str(p))
    assert r.code == 2 and "not valid JSON" in r.err
