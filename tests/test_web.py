"""The web explorer over HTTP, without a browser: the page and its assets, the auth gate,
the neighbourhood route, the bundle's pinned libraries and `ok graph export --format html`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.run import REPO, run_ok
from helpers.serve import Server

from openkl.knowledge import explorer as web


@pytest.mark.server
def test_the_page_and_its_assets_are_served(served: Server) -> None:
    h = served.http
    page = h.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/ui/vendor.js"></script><script src="/ui/app.js"></script>' in page.text
    assert "//" not in page.text.replace("http://www.w3.org", "")  # nothing from elsewhere
    assert h.get("/ui/vendor.js").text.startswith(web.bundle_header())
    js = h.get("/ui/app.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert h.get("/ui/app.css").headers["content-type"].startswith("text/css")
    nope = h.get("/ui/nothing.js")
    assert nope.status_code == 404 and "app.js" in nope.json()["hint"]


def test_the_bundle_holds_the_libraries_the_lockfile_pins() -> None:
    lock = json.loads((REPO / "web/package-lock.json").read_text())
    deps = json.loads((REPO / "web/package.json").read_text())["dependencies"]
    versions = {n: lock["packages"][f"node_modules/{n}"]["version"] for n in deps}
    header = web.bundle_header()
    assert set(re.findall(r"[\w.-]+@[\d.]+", header)) == {f"{n}@{v}" for n, v in versions.items()}
    assert all(deps[n] == v for n, v in versions.items())  # package.json pins exact versions


@pytest.mark.server
def test_neighbourhood_of_an_entity_holds_its_relationships(served: Server) -> None:
    h = served.http
    url = f"/v1/{served.stack}/neighbourhood"
    r = h.get(url, params={"entity": "Jennifer Doudna", "depth": 1, "min_confidence": 0.3})
    assert r.status_code == 200, r.text
    nb = r.json()
    ids = {n["id"] for n in nb["nodes"]}
    assert nb["seeds"] == ["jennifer-doudna"] and "university-of-california" in ids
    assert all(n["depth"] in (0, 1) for n in nb["nodes"])
    assert nb["edges"] and all(e["from_id"] in ids and e["to_id"] in ids for e in nb["edges"])
    assert all(e["confidence"] >= 0.3 for e in nb["edges"]) and not nb["capped"]
    wider = h.get(url, params={"entity": "Jennifer Doudna", "depth": 2, "min_confidence": 0.3})
    assert ids < {n["id"] for n in wider.json()["nodes"]}
    only = h.get(
        url, params={"entity": "Jennifer Doudna", "min_confidence": 0.3, "types": "Organization"}
    ).json()
    assert {n["type"] for n in only["nodes"] if n["depth"]} == {"Organization"}


@pytest.mark.server
def test_a_neighbourhood_over_its_limit_says_it_was_capped(served: Server) -> None:
    r = served.http.get(
        f"/v1/{served.stack}/neighbourhood",
        params={"entity": "Jennifer Doudna", "depth": 3, "min_confidence": 0, "limit": 4},
    ).json()
    assert len(r["nodes"]) == 4 and r["capped"] and r["limit"] == 4


@pytest.mark.server
def test_neighbourhood_of_a_query_starts_from_the_entities_of_its_results(served: Server) -> None:
    r = served.http.get(f"/v1/{served.stack}/neighbourhood", params={"query": "gene editing"})
    assert r.status_code == 200
    assert "cas9" in r.json()["seeds"]


@pytest.mark.server
@pytest.mark.parametrize(
    ("params", "status", "words"),
    [
        ({"entity": "Nobody Atall"}, 404, "no entity named"),
        ({}, 400, "name an entity or a query"),
        ({"entity": "Cas9", "query": "x"}, 400, "not both"),
        ({"entity": "Cas9", "depth": 9}, 422, "depth"),
        ({"query": "x" * 2001}, 422, "query"),
        ({"entity": ""}, 422, "entity"),
    ],
)
def test_bad_neighbourhood_requests_get_one_clear_error(
    served: Server, params: dict[str, object], status: int, words: str
) -> None:
    r = served.http.get(f"/v1/{served.stack}/neighbourhood", params=params)
    assert r.status_code == status, r.text
    assert words in r.json()["error"].lower() and r.json()["hint"]


@pytest.mark.server
def test_with_keys_the_page_is_public_and_the_api_is_not(example_kf: Path) -> None:
    key = run_ok("serve", "keys", "add", "viewer", "--scope", "read").out.strip()
    s = Server(example_kf, "--auth")
    try:
        assert s.http.get("/").status_code == 200 and s.http.get("/ui/app.js").status_code == 200
        url = f"/v1/{s.stack}/neighbourhood"
        assert s.http.get(url, params={"entity": "Cas9"}).status_code == 401
        ok = s.http.get(url, params={"entity": "Cas9"}, headers={"Authorization": f"Bearer {key}"})
        assert ok.status_code == 200 and ok.json()["nodes"]
    finally:
        s.stop()


def test_graph_export_html_writes_one_self_contained_page(example_kf: Path) -> None:
    out = example_kf / "cas9.html"
    r = run_ok("graph", "export", "--format", "html", "--entity", "Cas9", "-o", str(out))
    assert r.code == 0, r.err
    page = out.read_text()
    assert "<script src" not in page and "<link" not in page  # nothing to fetch
    assert web.asset("app.css") in page and web.bundle_header() in page
    data = json.loads(page.split("window.OK_DATA = ", 1)[1].split(";</script>", 1)[0])
    assert data["neighbourhood"]["seeds"] == ["cas9"] and data["neighbourhood"]["nodes"]
    r = run_ok("graph", "export", "--format", "html", "--query", "gene editing", "-o", "-")
    assert r.code == 0 and r.out.startswith("<!doctype html>")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--format", "html"], "pass --entity NAME"),
        (["--entity", "Cas9"], "add --format html"),
        (["--format", "html", "--entity", "Nobody Atall"], "no entity named"),
        (["--format", "html", "--entity", "Cas9", "--depth", "7"], "--depth"),
    ],
)
def test_graph_export_html_refuses_what_it_cannot_draw(
    example_kf: Path, args: list[str], words: str
) -> None:
    r = run_ok("graph", "export", *args)
    assert r.code != 0 and words in r.err and "Traceback" not in r.err
    assert not list((example_kf / "graph").glob("*.html"))
