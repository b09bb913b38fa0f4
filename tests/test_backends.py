"""One behaviour suite for both graphs behind `ok serve`: embedded Kùzu (the default) and
PostgreSQL with pgvector (`ok serve --backend`, on tests/helpers/pg.py's server).

Each backend gets one real `ok serve` (uvicorn) for the module, called over httpx, on
copies of the same two folders: stack A (the example documents and a note) and stack B
(another team's note and document), keys required (`--auth`). The tests say what a user
relies on, whichever graph answers: search, citations, entities, sync after edits, auth
per stack. What they expect comes from the folders' own files, or from what a test writes
into them, never from a number copied from a run. Each test writes what it needs under
names of its own, so the tests share the server without depending on each other. Where
the backends differ by design, each side's documented behaviour is tested: Cypher is
answered from the Kùzu graph on both (the server keeps it open beside PostgreSQL), and
PostgreSQL's own graph refuses Cypher with one clear error; BM25's scores are each
ranking's own, so scores are checked for their order, not their values.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.run import REPO, run_ok, until
from helpers.serve import ROUTES, Server, call_route, jwt_token, mcp_http

from openkl.knowledge import aks

pytestmark = [pytest.mark.postgres, pytest.mark.server]

BACKENDS = ["kuzu", "postgresql"]
MODES = ["hybrid", "vector", "fts"]
SECRET = "a-jwt-secret-for-the-shared-suite-long-enough-for-hs256"
B_NOTE = "The Beta team's vault code is 4471, kept by Ottoline Vasquez."
B_DOC = "# Beta logistics\n\nOttoline Vasquez drives the Meridian Van between the depots.\n"


@dataclass
class Served:
    """One backend's server and what the tests need to call it."""

    backend: str
    server: Server
    a: str  # the stacks' names
    b: str
    keys: dict[str, str]  # a-write, a-read, b-write
    uri: str | None = None  # the PostgreSQL database, for the postgresql backend
    # a client that sends no credentials of its own
    bare: httpx.Client = field(default_factory=httpx.Client)

    @property
    def http(self) -> httpx.Client:
        """A client with stack A's write key."""
        return self.server.http

    @property
    def root(self) -> Path:
        """Stack A's folder."""
        return self.server.root

    @property
    def v1(self) -> str:
        return f"/v1/{self.a}"

    def ok(self, r: httpx.Response, status: int = 200) -> Any:
        assert r.status_code == status, (r.request.method, r.request.url, r.text)
        return r.json()

    def search(self, q: str, **params: Any) -> list[dict[str, Any]]:
        return self.ok(self.http.get(f"{self.v1}/search", params={"q": q, **params}))["hits"]

    def sync(self) -> dict[str, Any]:
        return self.ok(self.http.post(f"{self.v1}/sync"))

    def add_doc(self, name: str, text: str) -> dict[str, Any]:
        """A document stored over HTTP (as `ok store ingest`): its mapping entry."""
        r = self.http.post(f"{self.v1}/documents", params={"name": name}, content=text.encode())
        [added] = self.ok(r, 201)["added"]
        return dict(added)

    def entity(self, name: str) -> httpx.Response:
        return self.http.get(f"/aks/v1/entities/{name}", params={"domain": self.a})


@pytest.fixture(scope="module")
def folders(_example_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Stack A (the example documents and a note) and stack B (another team's note and
    document), with keys: A's write and read keys, B's write key."""
    base = tmp_path_factory.mktemp("backends")
    a, b = base / "alpha", base / "beta"
    shutil.copytree(_example_template, a, symlinks=True)
    assert run_ok("init", str(b)).code == 0
    assert run_ok("--root", str(b), "mem", "add", B_NOTE).code == 0
    (base / "beta-logistics.md").write_text(B_DOC)
    assert run_ok("--root", str(b), "store", "ingest", str(base / "beta-logistics.md")).code == 0

    def key(root: Path, name: str, scope: str) -> str:
        r = run_ok("--root", str(root), "serve", "keys", "add", name, "--scope", scope)
        assert r.code == 0, r.err
        return r.out.strip()

    keys = {
        "a-write": key(a, "a-writer", "write"),
        "a-read": key(a, "a-reader", "read"),
        "b-write": key(b, "b-writer", "write"),
    }
    return a, b, keys


def _selected(request: pytest.FixtureRequest) -> list[str]:
    """The backends the tests of this module that were selected run on."""
    wanted = {
        item.callspec.params.get("served")
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    return [b for b in BACKENDS if b in wanted]


@pytest.fixture(scope="module")
def servers(
    request: pytest.FixtureRequest, folders: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Served]]:
    """`ok serve --auth` over copies of both folders, on Kùzu and with `--backend` on
    PostgreSQL (both stacks in one database): started side by side, as each takes a while
    (the model, the first sync)."""
    a_t, b_t, keys = folders
    wanted = _selected(request)
    uri = request.getfixturevalue("pg_uri") if "postgresql" in wanted else None
    env = {
        "OK_SERVE_JWT_SECRET_ENV": "T_SECRET",
        "T_SECRET": SECRET,
        "OK_SERVE_RATE_LIMIT": "0",  # metering is test_serve.py's
        "OK_NO_PROGRESS": "1",
    }
    headers = {"Authorization": f"Bearer {keys['a-write']}"}

    def start(backend: str) -> Served:
        base = tmp_path_factory.mktemp(backend)
        a, b = base / a_t.name, base / b_t.name
        shutil.copytree(a_t, a, symlinks=True)
        shutil.copytree(b_t, b, symlinks=True)
        args = ["--auth", *(["--backend", str(uri)] if backend == "postgresql" else [])]
        s = Server(a, *args, more=(b,), env=env, headers=headers)
        a_name, b_name = s.http.get("/ready").json()["stacks"]
        if backend == "postgresql":
            assert '"backend": "postgresql"' in s.log.read_text()  # it really is PostgreSQL
        bare = httpx.Client(base_url=s.url, timeout=60)
        return Served(backend, s, a_name, b_name, keys, uri if backend != "kuzu" else None, bare)

    with ThreadPoolExecutor(len(wanted)) as pool:
        starting = {b: pool.submit(start, b) for b in wanted}
    started: dict[str, Served] = {}
    try:
        for b, f in starting.items():  # every start is waited for, so each can be stopped
            with contextlib.suppress(Exception):
                started[b] = f.result()
        for f in starting.values():
            f.result()  # a start that failed fails the tests
        yield started
    finally:
        for st in started.values():
            st.bare.close()
        with ThreadPoolExecutor(max(1, len(started))) as pool:
            stopped = {b: pool.submit(st.server.stop) for b, st in started.items()}
        for b, f in stopped.items():
            assert f.result() == 0, started[b].server.log.read_text()[-3000:]


@pytest.fixture(scope="module", params=BACKENDS)
def served(request: pytest.FixtureRequest, servers: dict[str, Served]) -> Served:
    """One backend's server."""
    return servers[request.param]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_cite(root: Path, c: dict[str, Any]) -> None:
    """A cite object says where its quote is: the file at its path holds the quote at its
    span, between its context, and has the hash it names; over HTTP it names no path on
    the server's disk."""
    path = root / c["path"]
    text = path.read_text(encoding="utf-8")
    s, e = c["loc"]["start"], c["loc"]["end"]
    assert c["loc"]["kind"] == "char" and 0 <= s < e <= len(text), c
    assert text[s:e] == c["quote"], c
    assert text[:s].endswith(c["context"]["pre"]) and text[e:].startswith(c["context"]["post"])
    assert c["sha256"] == sha256(path) and "abs_path" not in c, c
    # a hit is named by its span; a citation has an id of its own, and names the span
    ref = c["ref"] if c["id"].startswith("c-") else c["id"]
    if c["type"] == "chunk":
        assert ref == f"{c['doc_id']}#char{s}-{e}", c
    else:
        assert c["type"] == "memory" and ref == c["doc_id"], c


def write(path: Path, text: str) -> None:
    """Write a file whole, as an editor saves it (the server's watcher may read it at any
    moment, and must not see it half written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def note_file(root: Path, nid: str, body: str, derived_from: str = "") -> Path:
    """A note written by hand, as an editor or a pull would leave it."""
    path = root / "memories" / "by_date" / "2026-01" / "05" / f"{nid}.md"
    src = f"derived_from: [{derived_from}]\n" if derived_from else ""
    write(path, f"---\nid: {nid}\nts: 2026-01-05T10:00:00Z\n{src}---\n{body}\n")
    return path


def current(served: Served, path: str) -> dict[str, Any]:
    """The mapping entry of the current document at `path`."""
    docs = served.ok(served.http.get(f"{served.v1}/documents"))
    return next(d for d in docs if d["path"] == path)


# -- search -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_search_finds_each_document_by_what_it_says(served: Served, mode: str) -> None:
    """Each document is the first hit for its own title, in every mode, and every hit is a
    cite object whose quote is in its file at its span."""
    docs = served.ok(served.http.get(f"{served.v1}/documents"))
    assert docs
    for d in docs:
        hits = served.search(d["title"], mode=mode, scope="store", k=5)
        assert hits and hits[0]["doc_id"] == d["id"], (d["title"], hits[:2])
        assert hits[0]["path"] == d["path"] and hits[0]["title"] == d["title"]
        assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
        # each ranking has its own scores (BM25's differ between the backends): in order
        scores = [h["score"] for h in hits]
        assert scores == sorted(scores, reverse=True) and scores[-1] >= 0, scores
        for h in hits:
            check_cite(served.root, h)


def test_search_filters_by_where_and_by_tag(served: Served) -> None:
    v1, h = served.v1, served.http
    tagged = served.ok(
        h.post(
            f"{v1}/notes",
            json={"text": "Lamp wicks on the Bell Rock light are trimmed at midnight.",
                  "tags": ["bellrock"]},
        ),
        201,
    )  # fmt: skip
    untagged = served.ok(
        h.post(
            f"{v1}/notes",
            json={
                "text": "Lamp wicks on the Bell Rock light are trimmed.",
                "allow_duplicate": True,
            },
        ),
        201,
    )
    q = "lamp wicks Bell Rock light trimmed"
    mem = served.search(q, scope="mem")
    assert mem and {x["type"] for x in mem} == {"memory"}
    assert {tagged["id"], untagged["id"]} <= {x["id"] for x in mem}
    docs = served.ok(h.get(f"{v1}/documents"))
    store = served.search(docs[0]["title"] + " lamp wicks", scope="store")
    assert store and {x["type"] for x in store} == {"chunk"}
    assert {x["doc_id"] for x in store} <= {d["id"] for d in docs}
    # the same words with no filter find both kinds
    both = served.search(docs[0]["title"] + " lamp wicks", k=10)
    assert {x["type"] for x in both} == {"chunk", "memory"}
    by_tag = served.search(q, tag="bellrock")
    assert [x["id"] for x in by_tag] == [tagged["id"]] and by_tag[0]["tags"] == ["bellrock"]
    for x in mem + store + by_tag:
        check_cite(served.root, x)


def test_a_note_is_found_at_once_and_gone_once_deleted(served: Served) -> None:
    v1, h = served.v1, served.http
    text = "The Skerryvore lighthouse burned colza oil in a four-wick lamp."
    note = served.ok(h.post(f"{v1}/notes", json={"text": text}), 201)
    assert (served.root / note["path"]).read_text().endswith(text + "\n")
    q = "Skerryvore lighthouse colza oil lamp"
    for mode in MODES:
        [hit] = served.search(q, mode=mode, scope="mem", k=1)
        assert hit["id"] == note["id"] and hit["quote"] == text, mode
        check_cite(served.root, hit)
    assert served.ok(h.delete(f"{v1}/notes/{note['id']}"))["deleted"] == note["id"]
    for mode in MODES:
        assert note["id"] not in [x["id"] for x in served.search(q, mode=mode)]


def test_a_removed_document_is_gone_from_search_and_entities(served: Served) -> None:
    text = "# Saltmarsh\n\nThe Wendover Saltmarsh floods at every spring tide.\n"
    doc = served.add_doc("saltmarsh.md", text)
    q = "Wendover Saltmarsh spring tide"
    for mode in MODES:
        assert served.search(q, mode=mode, k=1)[0]["doc_id"] == doc["id"], mode
    assert served.entity("Wendover Saltmarsh").status_code == 200
    assert served.ok(served.http.delete(f"{served.v1}/documents/{doc['id']}"))["id"] == doc["id"]
    assert not (served.root / doc["path"]).exists()
    for mode in MODES:
        found = served.search(q, mode=mode)
        assert doc["id"] not in [x["doc_id"] for x in found], mode
    assert served.http.get(f"{served.v1}/documents/{doc['id']}").status_code == 404
    assert served.entity("Wendover Saltmarsh").status_code == 404


# -- citations ----------------------------------------------------------------------------------
def test_citations_are_verified_then_moved_changed_or_missing_after_edits(served: Served) -> None:
    v1, h = served.v1, served.http
    kept = "The Carrick ferry leaves the north pier at seven each morning."
    edited = "Its crossing takes forty minutes in calm weather and longer in a gale."
    dropped = "Tickets are sold by the harbour master from a green hut."
    doc = served.add_doc("ferry.md", f"# Carrick ferry\n\n{kept}\n\n{edited}\n\n{dropped}\n")
    path = served.root / doc["path"]
    [hit] = served.search("Carrick ferry north pier seven", k=1)
    assert hit["doc_id"] == doc["id"] and kept in hit["quote"]
    # a citation of the hit, and of each sentence by its span in the file
    text = path.read_text()
    made = [served.ok(h.post(f"{v1}/citations", json={"items": [hit], "persist": True}), 201)[0]]
    for sentence in (kept, edited, dropped):
        s = text.index(sentence)
        body = {"items": [doc["id"]], "chars": f"{s}-{s + len(sentence)}", "persist": True}
        made += served.ok(h.post(f"{v1}/citations", json=body), 201)
    assert [c["quote"] for c in made[1:]] == [kept, edited, dropped]
    for c in made:
        check_cite(served.root, c)
        assert (served.root / "citations" / f"{c['id']}.json").exists()
    ids = [c["id"] for c in made]
    got = served.ok(h.post(f"{v1}/citations/verify", json={"items": ids}))
    assert got["ok"] and [r["status"] for r in got["results"]] == ["verified"] * 4

    # a paragraph written before them (they move), one lightly edited, one deleted
    write(
        path,
        text.replace("# Carrick ferry\n", "# Carrick ferry\n\nA lead paragraph came later.\n")
        .replace("forty minutes", "about forty minutes")
        .replace(dropped + "\n", ""),
    )
    served.sync()  # or the server's watcher did: either way, the edit is a new version
    new = current(served, doc["path"])
    new_id = new["id"]
    assert new_id != doc["id"] and new["supersedes"] == doc["id"]
    got = served.ok(h.post(f"{v1}/citations/verify", json={"items": ids}))
    whole, moved, changed, missing = got["results"]
    assert not got["ok"]
    assert whole["status"] == "changed"  # the chunk it cites is not all there any more
    assert moved["status"] == "moved" and moved["found"]["doc_id"] == new_id
    s, e = moved["found"]["loc"]["start"], moved["found"]["loc"]["end"]
    assert path.read_text()[s:e] == kept and s > made[1]["loc"]["start"]
    assert changed["status"] == "changed" and 0 < changed["similarity"] < 1
    s, e = changed["found"]["loc"]["start"], changed["found"]["loc"]["end"]
    assert path.read_text()[s:e] == changed["found"]["quote"]
    assert "about forty minutes" in changed["found"]["quote"]
    assert missing["status"] == "missing" and missing["reason"] == "quote_gone"
    # and search answers from the new text
    [hit] = served.search("Carrick ferry crossing forty minutes", k=1)
    assert hit["doc_id"] == new_id and "about forty minutes" in hit["quote"]
    assert dropped not in json.dumps(served.search("tickets harbour master green hut"))
    listed = served.ok(h.get(f"{v1}/citations", params={"status": "missing"}))["citations"]
    assert missing["id"] in [c["id"] for c in listed]


# -- entities -----------------------------------------------------------------------------------
OBSERVATORY = (
    "# Tidewater Observatory\n\nMarguerite Okonkwo founded the Tidewater Observatory in "
    "Lisbon. The Tidewater Observatory uses the Halvorsen Spectrograph to measure tides.\n"
)


def test_an_entity_named_in_a_document_is_listed_found_walked_and_exported(
    served: Served,
) -> None:
    from jsonschema import Draft202012Validator

    h, dom = served.http, {"domain": served.a}
    doc = served.add_doc("observatory.md", OBSERVATORY)
    path = served.root / doc["path"]
    # listed, with the document it comes from
    [listed] = served.ok(h.get("/aks/v1/entities", params={**dom, "name": "Okonkwo"}))
    assert listed["name"] == "Marguerite Okonkwo" and listed["docs"] == [doc["id"]]
    assert listed["mentions"] >= 1
    # by name: its relationships with their evidence, and the passages that mention it
    ent = served.ok(served.entity("Tidewater Observatory"))
    assert ent["name"] == "Tidewater Observatory" and doc["id"] in ent["docs"]
    uses = [r for r in ent["relationships"] if r["type"] == "uses"]
    assert [r["to_name"] for r in uses] == ["Halvorsen Spectrograph"]
    assert uses[0]["evidence"].startswith(doc["id"] + "#char")
    others = {r["from_name"] for r in ent["relationships"] if r["direction"] == "in"}
    assert "Marguerite Okonkwo" in others
    assert ent["mentions"] and {m["doc_id"] for m in ent["mentions"]} == {doc["id"]}
    for m in ent["mentions"]:
        check_cite(served.root, m)
        assert "Tidewater Observatory" in m["quote"]
    assert ent["sources"] == [
        {"id": doc["id"], "kind": "doc", "title": "Tidewater Observatory", "path": doc["path"]}
    ]
    # traverse reaches what it uses
    walk = served.ok(
        h.get("/aks/v1/traverse", params={**dom, "start": "Tidewater Observatory", "depth": 1})
    )
    step = next(s for s in walk["steps"] if s["entity"] == "Halvorsen Spectrograph")
    assert step["depth"] == 1 and step["via"]["type"] == "uses"
    assert step["path"] == ["Tidewater Observatory", "Halvorsen Spectrograph"]
    # context: the passage that answers, and the entities around it
    ctx = served.ok(
        h.post("/aks/v1/context", json={"query": "who founded the Tidewater Observatory",
                                        "domain": served.a}),
    )  # fmt: skip
    assert any(src["path"] == doc["path"] for src in ctx["sources"]), ctx["sources"]
    names = {e["name"] for e in ctx["entities"]}
    assert {"Tidewater Observatory", "Marguerite Okonkwo"} <= names
    # a name it does not know is a 404 that names the entities whose names hold it
    r = served.entity("Tidewater")
    assert r.status_code == 404 and "Tidewater Observatory" in r.json()["hint"], r.text
    # the AKS export holds them and validates against the AKS schema
    shared = REPO.parent / "shared" / "aks" / "SCHEMA.json"
    schema = json.loads((shared if shared.exists() else aks.SCHEMA_PATH).read_text())
    r = h.get("/aks/v1/export", params=dom)
    bundle = served.ok(r)
    Draft202012Validator(schema).validate(bundle)
    exported = {e["name"] for e in bundle["entities"]}
    assert {"Marguerite Okonkwo", "Tidewater Observatory", "Halvorsen Spectrograph"} <= exported
    assert path.read_text() == OBSERVATORY  # reading changed nothing


# -- sync after edits ---------------------------------------------------------------------------
def test_files_edited_added_and_removed_on_disk_are_reflected_after_a_sync(
    served: Served,
) -> None:
    v1, h, root = served.v1, served.http, served.root
    pilots = served.add_doc(
        "pilots.md", "# Harbour pilots\n\nThe harbour pilot Ingrid Solberg boards at the Fairway.\n"
    )
    vineyard = served.add_doc(
        "vineyard.md", "# Vineyards\n\nYsolde Marchetti grows grapes on the Cinque Terraces.\n"
    )
    note_file(root, "m-20260105-pilo", "Pilots board at the Fairway.", pilots["id"])
    served.sync()
    down = served.ok(h.get(f"{v1}/lineage/{pilots['id']}", params={"direction": "down"}))
    assert [(n["id"], n["rel"]) for n in down["nodes"]] == [("m-20260105-pilo", "DERIVED_BY")]
    for name in ("Ingrid Solberg", "Ysolde Marchetti"):
        assert served.entity(name).status_code == 200, name

    # edited in place, added and removed by hand (an editor, a pull)
    path = root / pilots["path"]
    write(path, path.read_text().replace("Ingrid Solberg", "Torvald Hagen"))
    reef = root / "store" / "normalized" / "hand" / "reef.ok.md"
    write(reef, "# Reefs\n\nThe Quillon Reef shelters parrotfish at low water.\n")
    (root / vineyard["path"]).unlink()
    served.sync()  # the server's watcher may have done part of it already: either way

    docs = {d["path"]: d for d in served.ok(h.get(f"{v1}/documents"))}
    new = docs[pilots["path"]]
    assert new["id"] != pilots["id"] and new["supersedes"] == pilots["id"]
    added = docs[reef.relative_to(root).as_posix()]
    assert vineyard["path"] not in docs
    # search
    [hit] = served.search("harbour pilot Torvald Hagen", k=1)
    assert hit["doc_id"] == new["id"] and "Torvald Hagen" in hit["quote"]
    check_cite(root, hit)
    assert "Ingrid Solberg" not in json.dumps(served.search("Ingrid Solberg pilot", mode="fts"))
    [hit] = served.search("Quillon Reef parrotfish", k=1)
    assert hit["doc_id"] == added["id"]
    check_cite(root, hit)
    found = served.search("Ysolde Marchetti grapes terraces")
    assert vineyard["id"] not in [x["doc_id"] for x in found]
    # entities
    for name, there in [
        ("Torvald Hagen", new["id"]),
        ("Quillon Reef", added["id"]),
        ("Ingrid Solberg", None),
        ("Ysolde Marchetti", None),
    ]:
        r = served.entity(name)
        if there is None:
            assert r.status_code == 404, (name, r.text)
        else:
            assert there in served.ok(r)["docs"], name
    # lineage: the note goes up to the version it was made from, and on to the new one
    up = served.ok(h.get(f"{v1}/lineage/m-20260105-pilo", params={"direction": "up"}))
    assert [(n["id"], n["rel"], n["current"]) for n in up["nodes"]] == [
        (pilots["id"], "DERIVED_FROM", False),
        (new["id"], "SUPERSEDED_BY", True),
    ]
    # the stack's counts are the files'
    row = served.ok(h.get(f"/aks/v1/stacks/{served.a}"))
    every = served.ok(h.get(f"{v1}/documents", params={"all_versions": True}))
    assert row["docs"] == len(every) and row["notes"] == len(served.ok(h.get(f"{v1}/notes")))


def test_the_server_s_watch_syncs_a_note_written_on_disk(served: Served) -> None:
    """No sync asked for: the server sees the file change and syncs (PostgreSQL too)."""
    path = note_file(served.root, "m-20260105-kelp", "Sea otters in the Ardmore Kelp Forest.")

    def found() -> bool:
        hits = served.search("sea otters Ardmore Kelp Forest", scope="mem", k=1)
        return bool(hits) and hits[0]["id"] == "m-20260105-kelp"

    until(found)
    check_cite(served.root, served.search("sea otters Ardmore Kelp Forest", k=1)[0])
    until(lambda: served.entity("Ardmore Kelp Forest").status_code == 200)
    path.unlink()
    until(lambda: not found())
    until(lambda: served.entity("Ardmore Kelp Forest").status_code == 404)
    assert served.ok(served.http.get(f"{served.v1}/status"))["in_sync"]


# -- auth per stack -----------------------------------------------------------------------------
def test_a_key_for_one_stack_never_reaches_the_other(served: Served) -> None:
    h, a, b = served.bare, served.a, served.b
    # A's write key and an admin JWT for A (a read key may do less than either)
    a_keys = [served.keys["a-write"], jwt_token(SECRET, f"{a}:admin")]
    for method, route, body, _ in ROUTES:
        for token in a_keys:
            r = call_route(h, method, route, body, b, token)
            assert r.status_code in (403, 404), (method, route, r.status_code, r.text)
            assert "4471" not in r.text and "Vasquez" not in r.text and "Meridian" not in r.text
    # what stack A's keys see: A only, and nothing of B's even when they ask for it
    for token in [*a_keys, served.keys["a-read"]]:
        auth = {"Authorization": f"Bearer {token}"}
        listed = served.ok(h.get("/aks/v1/stacks", headers=auth))
        assert [x["name"] for x in listed] == [a]
        q = "vault code Ottoline Vasquez Meridian Van"
        found = served.ok(h.get(f"/v1/{a}/search", params={"q": q}, headers=auth))["hits"]
        assert "4471" not in json.dumps(found) and "Meridian" not in json.dumps(found)
        ents = served.ok(h.get("/aks/v1/entities", params={"limit": 10_000}, headers=auth))
        assert "Ottoline Vasquez" not in [e["name"] for e in ents]
        # MCP serves every stack at once: not for a key of one
        r = httpx.post(
            f"{served.server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers=auth,
        )
        assert r.status_code == 403 and r.json()["error"]
    # B's own key reads B: the content is there, kept from A alone
    auth = {"Authorization": f"Bearer {served.keys['b-write']}"}
    found = served.ok(h.get(f"/v1/{b}/search", params={"q": "vault code"}, headers=auth))
    assert "4471" in found["hits"][0]["quote"]
    r = h.get("/aks/v1/entities/Ottoline Vasquez", params={"domain": b}, headers=auth)
    assert served.ok(r)["name"] == "Ottoline Vasquez"
    assert h.get(f"/v1/{a}/notes", headers=auth).status_code == 403


def test_a_read_key_cannot_write_and_bad_tokens_get_401(served: Served) -> None:
    h, a = served.bare, served.a
    read = served.keys["a-read"]
    notes = served.ok(served.http.get(f"/v1/{a}/notes"))
    docs = served.ok(served.http.get(f"/v1/{a}/documents"))
    for method, route, body, need in ROUTES:
        if need == "write":
            r = call_route(h, method, route, body, a, read)
            assert r.status_code == 403 and r.json()["error"], (method, route, r.text)
    # … but reads
    r = call_route(h, "GET", "/v1/{s}/search?q=gene", None, a, read)
    assert r.status_code == 200 and r.json()["hits"], r.text
    assert served.ok(served.http.get(f"/v1/{a}/notes")) == notes  # nothing was written
    assert served.ok(served.http.get(f"/v1/{a}/documents")) == docs
    forged = jwt_token("not-the-secret-but-as-long-as-one-for-hs256-signing", f"{a}:admin")
    expired = jwt_token(SECRET, f"{a}:admin", exp=int(time.time()) - 60)
    for token in (forged, expired):
        for method, route, body, _ in ROUTES:
            r = call_route(h, method, route, body, a, token)
            assert r.status_code == 401 and r.json()["error"], (method, route, r.text)
    assert "expired" in call_route(h, "GET", "/v1/{s}/notes", None, a, expired).json()["error"]
    # the good token is let in, and sees its stack's notes
    good = call_route(h, "GET", "/v1/{s}/notes", None, a, jwt_token(SECRET, f"{a}:read"))
    assert good.status_code == 200 and good.json() == notes


# -- where the backends differ by design --------------------------------------------------------
def test_cypher_is_answered_from_the_kuzu_graph_on_both(served: Served) -> None:
    """`POST /v1/STACK/cypher` reads the folder's Kùzu graph, which `ok serve --backend`
    keeps open beside PostgreSQL; the stack in PostgreSQL itself refuses Cypher in one
    clear error that names the ways out."""
    h, v1 = served.http, served.v1
    rows = served.ok(
        h.post(f"{v1}/cypher", json={"query": "MATCH (d:Doc) WHERE d.current RETURN d.id AS id"})
    )
    docs = served.ok(h.get(f"{v1}/documents"))
    assert sorted(r["id"] for r in rows) == sorted(d["id"] for d in docs)
    r = h.post(f"{v1}/cypher", json={"query": "MATCH (n:Entity) DETACH DELETE n"})
    assert r.status_code == 403 and r.json()["error"]
    if served.backend == "postgresql":
        from openkl.errors import QueryRefused
        from openkl.graph.postgres import PgGraph

        assert served.uri is not None
        with PgGraph.open(served.uri, stack=served.a, write=False) as g:
            assert g.docs()  # the stack is there …
            with pytest.raises(QueryRefused) as refused:
                g.cypher("MATCH (d:Doc) RETURN count(*) AS n")  # … and takes no Cypher
        said = refused.value
        assert said.message == (
            "Cypher runs on the Kùzu graph only; this folder's graph is in PostgreSQL"
        )
        assert "SQL" in (said.hint or "") and "ok index" in (said.hint or "")


def test_mcp_answers_from_the_same_graph_as_http(served: Served) -> None:
    """An agent with a key for every stack (a JWT) gets over MCP what HTTP answers."""
    token = jwt_token(SECRET, f"{served.a}:read {served.b}:read")
    q = "Ada Lovelace analytical engine"

    async def ask(client: Any) -> Any:
        hits = await client.call_tool("search", {"query": q, "k": 3, "stack": served.a})
        ents = await client.call_tool("entities", {"name": "Ada Lovelace", "stack": served.a})
        return json.loads(hits.content[0].text), json.loads(ents.content[0].text)

    hits, ent = mcp_http(served.server.url, ask, token)
    over_http = served.search(q, k=3)
    assert [x["id"] for x in hits["results"]] == [x["id"] for x in over_http]
    http_ent = served.ok(served.entity("Ada Lovelace"))
    assert (ent["stack"], ent["id"], ent["docs"]) == (served.a, http_ent["id"], http_ent["docs"])
    assert [m["id"] for m in ent["mentions"]] == [m["id"] for m in http_ent["mentions"]]
