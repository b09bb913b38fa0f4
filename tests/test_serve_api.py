"""`ok serve`'s API beyond the reads: stacks made, changed and dropped; pages as a zip; AKS
bundles out and in; backfeed; triggers and refresh; and what /metrics counts of them.

One server (auth on, real keys and JWTs) serves the module; every endpoint is called with
its right key, another stack's key, a read key where it writes, and bad input."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from helpers.run import run_ok, until
from helpers.serve import Server, hand_written_note, jwt_token, mcp_http, metric_value

pytestmark = pytest.mark.server

SECRET = "s3cret-for-api-tests-that-is-long-enough-for-hs256"


@dataclass
class Api:
    s: Server
    root: Path  # the first stack's folder
    other: Path  # a second stack's folder
    stacks_dir: Path
    source: Path  # a file the first stack holds a copy of, refreshed from
    exported: dict[str, Any]  # `ok graph export -o -` before the server started
    keys: dict[str, str]  # read, write, admin (first stack), other (admin of the second)

    @property
    def name(self) -> str:
        return self.s.stack

    def call(self, method: str, path: str, who: str | None, **kw: Any) -> httpx.Response:
        token = self.keys.get(who or "", who or "")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.s.http.request(method, path, headers=headers, **kw)

    def jwt(self, scope: str) -> str:
        return jwt_token(SECRET, scope)

    def metrics(self) -> str:
        r = self.call("GET", "/metrics", self.jwt("*:read"))
        assert r.status_code == 200, r.text
        return r.text


def _key(root: Path, name: str, scope: str) -> str:
    r = run_ok("--root", str(root), "serve", "keys", "add", name, "--scope", scope)
    assert r.code == 0, r.err
    return r.out.strip()


@pytest.fixture(scope="module")
def api(_example_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    base = tmp_path_factory.mktemp("api")
    root = base / "kb"
    shutil.copytree(_example_template, root, symlinks=True)
    other = base / "other"
    assert run_ok("init", str(other)).code == 0
    assert run_ok("--root", str(other), "mem", "add", "The other team's harbour plan.").code == 0
    source = base / "src" / "tides.md"
    source.parent.mkdir()
    source.write_text("# Tides\n\nA tide gauge records the sea level every six minutes.\n")
    assert run_ok("--root", str(root), "store", "ingest", str(source)).code == 0
    exported = run_ok("--root", str(root), "graph", "export", "-o", "-")
    assert exported.code == 0, exported.err
    keys = {
        "read": _key(root, "reader", "read"),
        "write": _key(root, "writer", "write"),
        "admin": _key(root, "boss", "admin"),
        "other": _key(other, "them", "admin"),
    }
    stacks_dir = base / "stacks"
    env = {
        "OK_SERVE_JWT_SECRET_ENV": "T_SECRET",
        "T_SECRET": SECRET,
        "OK_SERVE_STACKS_DIR": str(stacks_dir),
        "OK_SERVE_RATE_LIMIT": "0",
        "OK_SERVE_REFRESH_EVERY": "0",
        "OK_LOCK_TIMEOUT": "30",
    }
    s = Server(root, "--auth", more=(other,), env=env)
    try:
        yield Api(s, root, other, stacks_dir, source, json.loads(exported.out), keys)
    finally:
        s.stop()


def _is_error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, (r.request.method, r.request.url, r.status_code, r.text)
    body = r.json()
    assert isinstance(body["error"], str) and body["error"], body
    return body


# -- AKS bundles ---------------------------------------------------------------------------
def test_a_stack_exports_the_bundle_ok_graph_export_writes(api: Api) -> None:
    def same(bundle: dict[str, Any]) -> None:
        assert bundle["entities"] and bundle["domain"] == api.exported["domain"]
        for key in ("compiled_at",):
            bundle.pop(key), api.exported.pop(key, None)
        assert bundle == {k: v for k, v in api.exported.items() if k != "compiled_at"}

    r = api.call("GET", f"/aks/v1/stacks/{api.name}/bundle", "read")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
    same(r.json())
    r = api.call("GET", "/aks/v1/export", "read", params={"domain": api.name})
    assert r.status_code == 200, r.text
    same(r.json())
    few = api.call("GET", "/aks/v1/export", "read", params={"max_entities": 2}).json()
    assert few["entity_count"] == 2
    # another stack's key, a stack that is not there, and bad filters
    _is_error(api.call("GET", f"/aks/v1/stacks/{api.name}/bundle", "other"), 403)
    _is_error(api.call("GET", "/aks/v1/export", "other", params={"domain": api.name}), 403)
    _is_error(api.call("GET", "/aks/v1/stacks/nowhere/bundle", api.jwt("*:read")), 404)
    _is_error(api.call("GET", "/aks/v1/export", "read", params={"min_confidence": 2}), 422)


def test_a_bundle_is_imported_as_ok_bundle_import_does(api: Api) -> None:
    bundle = api.call("GET", f"/aks/v1/stacks/{api.name}/bundle", "read").json()
    imports = api.other / "aks" / "imports"
    path = "/aks/v1/stacks/other/bundle"
    # bad bundles: nothing is kept
    broken = {k: v for k, v in bundle.items() if k != "entities"}
    body = _is_error(api.call("POST", path, "other", json=broken), 400)
    assert "entities" in body["error"], body
    bad_type = {**bundle, "entity_count": "many"}
    body = _is_error(api.call("POST", path, "other", json=bad_type), 400)
    assert "$.entity_count" in body["error"], body
    _is_error(api.call("POST", path, "other", content=b"{not json"), 400)
    _is_error(api.call("POST", path, "other", content=b""), 400)
    _is_error(api.call("POST", path, "other", content=b"\xff\xfe"), 400)
    assert not imports.exists() or not list(imports.iterdir())
    # the first stack's keys cannot write the other stack, a read key cannot write its own
    _is_error(api.call("POST", path, "admin", json=bundle), 403)
    _is_error(api.call("POST", f"/aks/v1/stacks/{api.name}/bundle", "read", json=bundle), 403)
    assert not imports.exists() or not list(imports.iterdir())
    r = api.call("POST", path, "other", json=bundle)
    assert r.status_code == 201, r.text
    kept = r.json()
    assert kept["entities"] == bundle["entity_count"]
    assert (api.other / kept["path"]).is_file()
    name = bundle["entities"][0]["name"]
    r = api.call("GET", "/aks/v1/entities", "other", params={"domain": "other", "name": name})
    assert r.status_code == 200 and name in [e["name"] for e in r.json()], r.text


# -- pages ---------------------------------------------------------------------------------
def test_all_pages_come_as_a_zip(api: Api) -> None:
    r = api.call("GET", "/aks/v1/pages", "read", params={"domain": api.name})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/zip"
    assert "content-length" not in r.headers  # streamed
    zf = zipfile.ZipFile(io.BytesIO(r.content))
    names = zf.namelist()
    assert names[-1] == "index.md" and len(names) > 2
    ent = api.call("GET", "/aks/v1/entities", "read", params={"limit": 1}).json()[0]
    one = api.call("GET", f"/aks/v1/pages/{ent['name']}", "read").json()
    assert zf.read(f"{one['entity_id']}.md").decode() == one["markdown"]
    assert f"({one['entity_id']}.md)" in zf.read("index.md").decode()
    # a higher floor leaves pages out; the other stack's key sees none of these
    fewer = api.call("GET", "/aks/v1/pages", "read", params={"min_confidence": 0.99})
    assert len(zipfile.ZipFile(io.BytesIO(fewer.content)).namelist()) < len(names)
    _is_error(api.call("GET", "/aks/v1/pages", "other", params={"domain": api.name}), 403)
    _is_error(api.call("GET", "/aks/v1/pages", api.jwt("*:read"), params={"domain": "no"}), 404)
    _is_error(api.call("GET", "/aks/v1/pages", "read", params={"min_confidence": -1}), 422)
    assert not (api.root / "graph" / "pages").exists()  # nothing written in the folder


# -- backfeed ------------------------------------------------------------------------------
def test_backfeed_is_flagged_queued_and_decided_by_an_admin(api: Api) -> None:
    proposal = {
        "entities": [{"name": "Tide Gauge", "type": "Tool"}, {"name": "Sea Level", "type": "X"}],
        "relationships": [{"from": "Tide Gauge", "to": "Sea Level", "type": "measures"}],
    }
    flag = "/aks/v1/backfeed/flag"
    queue_dir = api.root / "aks" / "backfeed"
    # bad proposals, another stack's key and a read key: nothing is queued
    for bad in ({"bogus": 1}, {"entities": "x"}, [1]):
        _is_error(api.call("POST", flag, "write", json=bad), 400)
    _is_error(api.call("POST", flag, "write", content=b"{oops"), 400)
    _is_error(api.call("POST", flag, "other", json=proposal, params={"domain": api.name}), 403)
    _is_error(api.call("POST", flag, "read", json=proposal), 403)
    assert not queue_dir.exists() or not list(queue_dir.iterdir())
    r = api.call("POST", flag, "write", json=proposal)
    assert r.status_code == 201 and r.json()["created"] and r.json()["status"] == "pending"
    item = r.json()["id"]
    again = api.call("POST", flag, "write", json=proposal)
    assert again.status_code == 200 and again.json()["created"] is False
    queued = api.call("GET", "/aks/v1/backfeed/queue", "read").json()
    assert [i["id"] for i in queued] == [item]
    assert api.call("GET", f"/aks/v1/backfeed/{item}", "read").json()["status"] == "pending"
    _is_error(api.call("GET", "/aks/v1/backfeed/queue", "other", params={"domain": api.name}), 403)
    _is_error(
        api.call("GET", f"/aks/v1/backfeed/{item}", "other", params={"domain": api.name}), 403
    )
    _is_error(api.call("GET", "/aks/v1/backfeed/queue", "read", params={"status": "x"}), 422)
    _is_error(api.call("GET", "/aks/v1/backfeed/bf-000000000000", "read"), 404)
    # deciding is an admin's: a writer (who may flag) may not approve
    approve = "/aks/v1/backfeed/approve"
    _is_error(api.call("POST", approve, "write", json={"item_id": item}), 403)
    _is_error(api.call("POST", approve, "other", json={"item_id": item, "domain": api.name}), 403)
    _is_error(api.call("POST", approve, "admin", json={"item": item}), 422)
    _is_error(api.call("POST", approve, "admin", json={"item_id": "bf-nothing"}), 404)
    assert api.call("GET", f"/aks/v1/backfeed/{item}", "read").json()["status"] == "pending"
    r = api.call("POST", approve, "admin", json={"item_id": item})
    assert r.status_code == 200 and r.json()["status"] == "approved", r.text
    ents = api.call("GET", "/aks/v1/entities", "read", params={"name": "Tide Gauge"}).json()
    assert ents and ents[0]["name"] == "Tide Gauge"
    # a rejection needs a reason, and keeps it
    r = api.call("POST", flag, "write", json={"entities": [{"name": "Rip Current", "type": "X"}]})
    second = r.json()["id"]
    reject = "/aks/v1/backfeed/reject"
    _is_error(api.call("POST", reject, "admin", json={"item_id": second}), 400)
    _is_error(api.call("POST", reject, "write", json={"item_id": second, "reason": "no"}), 403)
    r = api.call("POST", reject, "admin", json={"item_id": second, "reason": "not ours"})
    assert r.json()["status"] == "rejected" and r.json()["reason"] == "not ours"
    done = api.call("GET", "/aks/v1/backfeed/queue", "read", params={"status": "all"}).json()
    assert {i["id"]: i["status"] for i in done} == {item: "approved", second: "rejected"}


# -- triggers and refresh ------------------------------------------------------------------
def test_triggers_are_added_and_removed_and_their_fires_counted(api: Api) -> None:
    v1 = f"/v1/{api.name}"
    trig_dir = api.root / "triggers"
    tides = {"name": "tides", "example": "the height of the tide at the harbour", "threshold": 0.3}
    # bad triggers, another stack's key and a read key: no file is written
    for bad, status in [
        ({**tides, "name": "../up"}, 400),
        ({**tides, "name": "Caps"}, 400),
        ({**tides, "threshold": 5}, 400),
        ({**tides, "scope": "everything"}, 400),
        ({**tides, "env": ["HOME"]}, 400),  # env without exec
        ({**tides, "example": ""}, 422),
        ({**tides, "colour": "red"}, 422),
    ]:
        _is_error(api.call("POST", f"{v1}/triggers", "write", json=bad), status)
    _is_error(api.call("POST", f"{v1}/triggers", "other", json=tides), 403)
    _is_error(api.call("POST", f"{v1}/triggers", "read", json=tides), 403)
    # a command runs as the server's user: only an admin may add one, and only on a server
    # started with --allow-exec-triggers (this one is not)
    failing = {"name": "pager", "example": tides["example"], "threshold": 0.3, "exec": "exit 3"}
    _is_error(api.call("POST", f"{v1}/triggers", "write", json=failing), 403)
    body = _is_error(api.call("POST", f"{v1}/triggers", "admin", json=failing), 403)
    assert "--allow-exec-triggers" in body["hint"]
    assert not trig_dir.exists() or not list(trig_dir.iterdir())
    r = api.call("POST", f"{v1}/triggers", "write", json=tides)
    assert r.status_code == 201 and r.json()["name"] == "tides", r.text
    assert yaml.safe_load((trig_dir / "tides.yml").read_text())["threshold"] == 0.3
    _is_error(api.call("POST", f"{v1}/triggers", "write", json=tides), 400)  # there already
    _is_error(api.call("POST", f"{v1}/triggers", "admin", json={**failing, "name": "tides"}), 403)
    r = api.call("POST", f"{v1}/triggers", "write", json={**tides, "name": "pager"})
    assert r.status_code == 201, r.text
    listed = api.call("GET", f"{v1}/triggers", "read").json()["triggers"]
    assert {t["name"] for t in listed} == {"tides", "pager"}
    # a note close to both fires both
    r = api.call("POST", f"{v1}/notes", "write", json={"text": "The tide at the harbour is high."})
    assert r.status_code == 201, r.text

    def counted() -> bool:
        text = api.metrics()
        fires = [
            metric_value(text, "ok_trigger_fires_total", stack=api.name, trigger=t, outcome="fired")
            for t in ("tides", "pager")
        ]
        return fires == [1, 1]

    until(counted)
    # removed by a writer; not by a reader or another stack's key
    _is_error(api.call("DELETE", f"{v1}/triggers/tides", "read"), 403)
    _is_error(api.call("DELETE", f"{v1}/triggers/tides", "other"), 403)
    _is_error(api.call("DELETE", f"{v1}/triggers/nothing", "write"), 404)
    assert (trig_dir / "tides.yml").exists()
    for name in ("tides", "pager"):
        r = api.call("DELETE", f"{v1}/triggers/{name}", "write")
        assert r.status_code == 200 and r.json() == {"removed": name}
    assert not list(trig_dir.glob("*.yml"))


def test_refresh_stores_what_changed_and_counts_outcomes_and_drift(api: Api) -> None:
    v1 = f"/v1/{api.name}"
    docs = api.call("GET", f"{v1}/documents", "read").json()
    doc = next(d for d in docs if d.get("origin") == str(api.source))
    before = api.metrics()
    # bad options, a document that is not there, another stack's key and a read key
    _is_error(api.call("POST", f"{v1}/refresh", "write", json={"due": True, "all": True}), 400)
    _is_error(api.call("POST", f"{v1}/refresh", "write", json={"drift_threshold": 3}), 422)
    _is_error(api.call("POST", f"{v1}/refresh", "write", json={"docs": ["d-nothing"]}), 404)
    _is_error(api.call("POST", f"{v1}/refresh", "other", json={"docs": [doc["id"]]}), 403)
    _is_error(api.call("POST", f"{v1}/refresh", "read", json={"docs": [doc["id"]]}), 403)
    r = api.call("POST", f"{v1}/refresh", "write", json={"docs": [doc["id"]], "dry_run": True})
    assert r.status_code == 200 and [d["id"] for d in r.json()["due"]] == [doc["id"]]
    # unchanged, then changed: a new version, with its drift
    r = api.call("POST", f"{v1}/refresh", "write", json={"docs": [doc["id"]]})
    assert r.status_code == 200 and r.json()["unchanged"] == [doc["id"]], r.text
    api.source.write_text("# Tides\n\nRip currents pull swimmers away from the beach.\n")
    r = api.call("POST", f"{v1}/refresh", "write", json={"docs": [doc["id"]]})
    assert r.status_code == 200, r.text
    changed = r.json()["changed"]
    assert [c["id"] for c in changed] == [doc["id"]] and changed[0]["drift"] > 0
    hits = api.call("GET", f"{v1}/search", "read", params={"q": "rip currents", "k": 1}).json()
    assert hits["hits"][0]["doc_id"] == changed[0]["new"]
    after = api.metrics()

    def grew(name: str, **labels: str) -> float:
        return metric_value(after, name, **labels) - metric_value(before, name, **labels)

    assert grew("ok_refresh_sources_total", stack=api.name, outcome="unchanged") == 1
    assert grew("ok_refresh_sources_total", stack=api.name, outcome="changed") == 1
    assert grew("ok_refresh_drift_count", stack=api.name) == 1
    assert grew("ok_refresh_drift_sum", stack=api.name) == pytest.approx(changed[0]["drift"])


# -- stacks --------------------------------------------------------------------------------
def test_a_stack_is_created_served_patched_and_dropped(api: Api) -> None:
    sea = api.jwt("sea:admin")
    body = {"name": "sea", "description": "Tide notes", "metadata": {"team": "ops"}}
    # bad names and bodies, a read key, another stack's admin: nothing is made
    for name in ("../up", "a/b", "..", ".hidden", "-x", "x\x00y", "x" * 65, "a..b", ""):
        r = api.call("POST", "/aks/v1/stacks", api.jwt("*:admin"), json={**body, "name": name})
        assert r.status_code in (400, 422), (name, r.text)
        assert r.json()["error"]
    _is_error(api.call("POST", "/aks/v1/stacks", sea, json={**body, "domain": "x"}), 422)
    _is_error(api.call("POST", "/aks/v1/stacks", sea, json={**body, "metadata": [1]}), 422)
    _is_error(api.call("POST", "/aks/v1/stacks", "read", json=body), 403)
    _is_error(api.call("POST", "/aks/v1/stacks", "other", json=body), 403)
    _is_error(api.call("POST", "/aks/v1/stacks", api.jwt("sea:write"), json=body), 403)
    _is_error(api.call("POST", "/aks/v1/stacks", api.jwt("*:admin"), json={"name": "other"}), 409)
    assert not api.stacks_dir.exists() or not list(api.stacks_dir.iterdir())
    # made as `ok init` makes a folder, and served at once: claimed, searchable
    r = api.call("POST", "/aks/v1/stacks", sea, json=body)
    assert r.status_code == 201, r.text
    made = r.json()
    root = api.stacks_dir / "sea"
    assert made["name"] == "sea" and made["created"]
    assert "root" not in made and str(root) not in r.text  # a remote caller sees no paths
    assert made["description"] == "Tide notes" and made["metadata"] == {"team": "ops"}
    config = yaml.safe_load((root / ".ok" / "config.yml").read_text())
    assert config["domain"] == "sea" and config["metadata"] == {"team": "ops"}
    assert json.loads((root / ".ok" / "serve.json").read_text())["pid"] == api.s.proc.pid
    r = api.call("POST", "/v1/sea/notes", sea, json={"text": "Spring tides follow the full moon."})
    assert r.status_code == 201, r.text
    hits = api.call("GET", "/v1/sea/search", sea, params={"q": "spring tides moon"}).json()
    assert hits["hits"][0]["id"] == r.json()["id"]
    # and watched: a note written on disk is synced
    hand_written_note(root, "m-20260105-seaw", "Neap tides come at the half moon.")

    def synced() -> bool:
        got = api.call("GET", "/v1/sea/search", sea, params={"q": "neap tides half moon"})
        return got.json()["hits"][:1] != [] and got.json()["hits"][0]["id"] == "m-20260105-seaw"

    until(synced)
    assert "sea" in _mcp_stacks(api)  # MCP serves it too
    _is_error(api.call("POST", "/aks/v1/stacks", sea, json=body), 409)
    listed = api.call("GET", "/aks/v1/stacks", api.jwt("*:read")).json()
    assert "sea" in [x["name"] for x in listed]
    assert [x["name"] for x in api.call("GET", "/aks/v1/stacks", "read").json()] == [api.name]
    # patched: description and metadata (merged; null removes a key), by an admin only
    patch = {"description": "Tides and currents", "metadata": {"team": None, "owner": "ana"}}
    _is_error(api.call("PATCH", "/aks/v1/stacks/sea", api.jwt("sea:write"), json=patch), 403)
    _is_error(api.call("PATCH", "/aks/v1/stacks/sea", "admin", json=patch), 403)
    _is_error(api.call("PATCH", f"/aks/v1/stacks/{api.name}", "read", json=patch), 403)
    _is_error(api.call("PATCH", "/aks/v1/stacks/sea", sea, json={"name": "ocean"}), 422)
    _is_error(api.call("PATCH", "/aks/v1/stacks/sea", sea, json={"metadata": "x"}), 422)
    _is_error(api.call("PATCH", "/aks/v1/stacks/nowhere", api.jwt("*:admin"), json=patch), 404)
    assert yaml.safe_load((root / ".ok" / "config.yml").read_text())["description"] == "Tide notes"
    r = api.call("PATCH", "/aks/v1/stacks/sea", sea, json=patch)
    assert r.status_code == 200, r.text
    assert r.json()["description"] == "Tides and currents"
    assert r.json()["metadata"] == {"owner": "ana"}
    assert api.call("GET", "/aks/v1/stacks/sea", sea).json()["metadata"] == {"owner": "ana"}
    r = api.call("PATCH", f"/aks/v1/stacks/{api.name}", "admin", json={"description": "Ours"})
    assert r.status_code == 200 and r.json()["description"] == "Ours"
    # dropped: no longer served, its files kept, the folder usable by `ok` again
    _is_error(api.call("DELETE", "/aks/v1/stacks/sea", api.jwt("sea:write")), 403)
    _is_error(api.call("DELETE", "/aks/v1/stacks/sea", "other"), 403)
    _is_error(api.call("DELETE", f"/aks/v1/stacks/{api.name}", "write"), 403)
    _is_error(api.call("DELETE", "/aks/v1/stacks/nowhere", api.jwt("*:admin")), 404)
    r = api.call("DELETE", "/aks/v1/stacks/sea", sea)
    assert r.status_code == 200, r.text
    assert r.json()["served"] is False and r.json()["files_deleted"] is False
    assert "files stay" in r.json()["message"]
    assert not (root / ".ok" / "serve.json").exists()
    assert list((root / "memories").rglob("*.md"))
    _is_error(api.call("GET", "/aks/v1/stacks/sea", sea), 404)
    got = run_ok("--root", str(root), "search", "spring tides moon", "--json")
    assert got.code == 0 and "Spring tides" in got.json()[0]["quote"], got.err
    assert "sea" not in _mcp_stacks(api)
    # the server goes on with the others
    assert api.call("GET", f"/v1/{api.name}/status", "read").status_code == 200


def _mcp_stacks(api: Api) -> list[str]:
    async def names(client: Any) -> list[str]:
        got = await client.call_tool("list_stacks", {})
        return [st["name"] for st in json.loads(got.content[0].text)["results"]]

    return list(mcp_http(api.s.url, names, api.jwt("*:admin")))


def test_without_a_stacks_dir_no_stack_is_created(kf: Path) -> None:
    s = Server(kf)
    try:
        r = s.http.post("/aks/v1/stacks", json={"name": "sea"})
        body = _is_error(r, 400)
        assert "serve.stacks_dir" in body["error"] and "serve.stacks_dir" in body["hint"]
        # the last stack a server holds stays: stop the server instead
        body = _is_error(s.http.delete(f"/aks/v1/stacks/{s.stack}"), 400)
        assert "stop the server" in body["hint"]
    finally:
        s.stop()
    assert not (kf.parent / "sea").exists()
