"""`ok store web|arxiv|repo` against a local web site, a local arXiv API and local git repos."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.localsite import (
    ArxivFeed,
    Page,
    Paper,
    Site,
    free_port,
    git,
    make_repo,
    serve,
    write_files,
)
from helpers.run import run_ok

from openkl.files.folder import Folder
from openkl.files.mapping import load as load_mapping


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.setenv("OK_WEB_DELAY", "0")
    s = Site()
    s.pages["/robots.txt"] = Page(b"User-agent: *\nDisallow: /private/\n", "text/plain")
    s.html(
        "/",
        "Home of the lighthouse site",
        "<h1>Lighthouses</h1><p>Lighthouses guide ships along dangerous coasts.</p>"
        '<a href="/keepers">keepers</a> <a href="/private/logbook">log</a> '
        '<a href="/lamps.html#top">lamps</a> <a href="http://elsewhere.invalid/x">away</a>'
        '<a href="/skip/me">skip</a>',
        nav='<a href="/">Home</a> Navigation menu entry',
    )
    s.html(
        "/keepers",
        "Keepers",
        '<p>Lighthouse keepers trimmed the wicks every night.</p><a href="/deeper">deeper</a>',
    )
    s.html("/lamps.html", "Lamps", "<p>Fresnel lenses focus the lamp into a strong beam.</p>")
    s.html("/deeper", "Deeper", "<p>Two hops from home.</p>")
    s.html("/private/logbook", "Log", "<p>Private logbook entries.</p>")
    s.html("/skip/me", "Skip", "<p>Excluded page.</p>")
    with serve(s):
        yield s


def _nothing_written(root: Path) -> None:
    assert load_mapping(Folder(root)) == {}
    assert not any((root / "store" / "sources").rglob("*"))
    assert not (root / "events").exists()


def test_web_crawl_depth_robots_hosts_and_main_content(kf: Path, site: Site) -> None:
    r = run_ok("store", "web", site.url("/"), "--depth", "1", "--exclude", "/skip/*", "--json")
    assert r.code == 0, r.err
    added = {a["origin"] for a in r.json()["added"]}
    assert added == {site.url("/"), site.url("/keepers"), site.url("/lamps.html")}
    assert "/private/logbook" not in site.hits  # robots.txt disallows it
    assert "/deeper" not in site.hits and "/skip/me" not in site.hits
    assert "disallowed by the site's robots.txt" in r.err
    entries = load_mapping(Folder(kf))
    home = next(e for e in entries.values() if e["source"] == {"url": site.url("/")})
    assert home["title"] == "Home of the lighthouse site"
    assert home["fetch"]["etag"] and home["fetch"]["kind"] == "web"
    assert home["fetched_at"]
    text = (kf / home["path"]).read_text()
    assert "Lighthouses guide ships" in text
    assert "Navigation menu entry" not in text and "Site footer text" not in text
    assert (
        kf / "store/sources" / home["path"][len("store/normalized/") :].replace(".ok.md", "")
    ).exists() or any((kf / "store/sources/web").rglob("index.html"))
    hits = run_ok("search", "what focuses the lamp beam", "--json", "-k", "1").json()
    assert "lamps" in hits[0]["path"] and hits[0]["source"] == {"url": site.url("/lamps.html")}
    evs = [
        json.loads(x) for x in (kf / "events").glob("*.jsonl").__next__().read_text().splitlines()
    ]
    assert sorted(e["type"] for e in evs) == ["ingested"] * 3


def test_web_any_host_and_include(kf: Path, site: Site) -> None:
    r = run_ok(
        "store",
        "web",
        site.url("/"),
        "--depth",
        "2",
        "--include",
        "*/keep*",
        "--include",
        "*/deeper",
        "--json",
    )
    assert r.code == 0, r.err
    assert {a["origin"] for a in r.json()["added"]} == {
        site.url("/"),
        site.url("/keepers"),
        site.url("/deeper"),
    }


@pytest.mark.parametrize(
    "path,page,message",
    [
        ("/gone", None, "not available (HTTP 404"),
        ("/broken", Page(b"oops", "text/html", status=500), "server error (HTTP 500"),
        (
            "/logo.png",
            Page(b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "image/png"),
            "content type 'image/png'",
        ),
        ("/loop", Page(b"", status=302, headers={"Location": "/loop2"}), "too many redirects"),
        ("/huge", Page(b"<p>" + b"x" * 300_000 + b"</p>"), "over the size cap"),
        ("/huge-stream", Page(b"<p>" + b"y" * 300_000 + b"</p>", chunked=True), "size cap"),
        ("/private/logbook", None, "disallowed by the site's robots.txt"),
    ],
)
def test_web_bad_pages_fail_cleanly(
    kf: Path,
    site: Site,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    page: Page | None,
    message: str,
) -> None:
    monkeypatch.setenv("OK_WEB_MAX_MB", "0.1")
    if page is not None:
        site.pages[path] = page
    site.pages["/loop2"] = Page(b"", status=302, headers={"Location": "/loop"})
    r = run_ok("store", "web", site.url(path))
    assert r.code == 2
    assert r.err.startswith("Error: ") and message in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1
    _nothing_written(kf)


def test_web_unreachable_and_bad_url(kf: Path) -> None:
    r = run_ok("store", "web", f"http://127.0.0.1:{free_port()}/page")
    assert r.code == 2 and "cannot reach 127.0.0.1" in r.err, r.err
    r = run_ok("store", "web", "ftp://example.org/file")
    assert r.code == 2 and "is not an http(s) URL" in r.err
    _nothing_written(kf)


def test_web_plain_text_and_pdf_pages(kf: Path, site: Site) -> None:
    from helpers.localsite import make_pdf

    site.pages["/notes.txt"] = Page(b"Tide tables predict high water.\n", "text/plain")
    site.pages["/paper"] = Page(make_pdf(["Foghorns warn ships in thick fog."]), "application/pdf")
    assert run_ok("store", "web", site.url("/notes.txt")).code == 0
    r = run_ok("store", "web", site.url("/paper"), "--json")
    assert r.code == 0, r.err
    path = r.json()["added"][0]["path"]
    assert "Foghorns warn ships" in (kf / path).read_text()


# -- arXiv -----------------------------------------------------------------------------------------
@pytest.fixture
def arxiv_site(site: Site, monkeypatch: pytest.MonkeyPatch) -> ArxivFeed:
    feed = ArxivFeed(site)
    monkeypatch.setenv("OK_ARXIV_API_URL", site.url("/api/query?{}"))
    monkeypatch.setenv("OK_ARXIV_DELAY", "0")
    monkeypatch.setenv("OK_ARXIV_RETRIES", "0")
    feed.publish(
        Paper(
            "2401.00001",
            1,
            "Tidal Retrieval Models",
            ["Ada Keeper", "Bo Lamp"],
            "We retrieve tides with dense vectors.",
            ["Tidal Retrieval Models", "Dense vectors predict the tides of harbours."],
        )
    )
    return feed


def test_arxiv_metadata_and_pdf_text(kf: Path, arxiv_site: ArxivFeed) -> None:
    r = run_ok("store", "arxiv", "2401.00001", "--refresh", "7d", "--json")
    assert r.code == 0, r.err
    added = r.json()["added"]
    assert len(added) == 1 and added[0]["title"] == "Tidal Retrieval Models"
    e = load_mapping(Folder(kf))[added[0]["id"]]
    assert e["source"] == {"arxiv": "2401.00001"}
    assert e["meta"]["authors"] == ["Ada Keeper", "Bo Lamp"]
    assert e["meta"]["abstract"] == "We retrieve tides with dense vectors."
    assert e["meta"]["version"] == "v1" and e["fetch"]["version"] == "v1"
    assert e["refresh"] == {"interval": "7d"}
    assert "Dense vectors predict the tides" in (kf / e["path"]).read_text()
    assert (kf / "store/sources/arxiv/2401.00001.pdf").read_bytes().startswith(b"%PDF")


def test_arxiv_bad_ids(kf: Path, arxiv_site: ArxivFeed) -> None:
    r = run_ok("store", "arxiv", "2401.00001", "not-an-id")
    assert r.code == 2 and "'not-an-id' is not an arXiv identifier" in r.err
    assert "/api/query" not in arxiv_site.site.hits  # checked before any request
    r = run_ok("store", "arxiv", "2401.99999")
    assert r.code == 2 and "arXiv has no paper with id '2401.99999'" in r.err
    _nothing_written(kf)


def test_arxiv_refresh_follows_new_versions(kf: Path, arxiv_site: ArxivFeed) -> None:
    r = run_ok("store", "arxiv", "2401.00001", "--json")
    old = r.json()["added"][0]["id"]
    pdf_hits = arxiv_site.site.hits["/pdf/2401.00001v1"]
    r = run_ok("refresh", old, "--json")
    assert r.code == 0, r.err
    assert r.json()["unchanged"] == [old]
    assert arxiv_site.site.hits["/pdf/2401.00001v1"] == pdf_hits  # same version: no download
    arxiv_site.publish(
        Paper(
            "2401.00001",
            2,
            "Tidal Retrieval Models",
            ["Ada Keeper"],
            "Revised.",
            ["Tidal Retrieval Models", "Sparse lexical signals predict the tides better."],
        )
    )
    r = run_ok("refresh", old, "--json")
    assert r.code == 0, r.err
    changed = r.json()["changed"]
    assert len(changed) == 1 and changed[0]["id"] == old
    e = load_mapping(Folder(kf))[changed[0]["new"]]
    assert e["supersedes"] == old and e["fetch"]["version"] == "v2"
    # a paper is named by its arXiv id too: the current version
    hist = run_ok("store", "history", "2401.00001", "--json").json()
    assert [h["id"] for h in hist] == [changed[0]["new"], old]


def test_storing_an_older_arxiv_version_keeps_the_history(kf: Path, arxiv_site: ArxivFeed) -> None:
    v1 = run_ok("store", "arxiv", "2401.00001", "--json").json()["added"][0]["id"]
    arxiv_site.publish(
        Paper(
            "2401.00001",
            2,
            "Tidal Retrieval Models",
            ["Ada Keeper"],
            "Revised.",
            ["Tidal Retrieval Models", "Sparse lexical signals predict the tides better."],
        )
    )
    v2 = run_ok("refresh", v1, "--json").json()["changed"][0]["new"]
    before = (kf / ".ok/mapping.jsonl").read_text()
    # v1 is in the history already: asking for it by its version stores nothing new
    r = run_ok("store", "arxiv", "2401.00001v1", "--json")
    assert r.code == 0, r.err
    assert r.json()["added"] == []
    assert r.json()["unchanged"] == [
        {
            "id": v1,
            "path": f".ok/versions/{v1}.ok.md",
            "origin": arxiv_site.site.url("/pdf/2401.00001v1"),
            "current": False,
            "superseded_by": v2,
        }
    ]
    assert (kf / ".ok/mapping.jsonl").read_text() == before
    hist = run_ok("store", "history", "2401.00001", "--json").json()
    assert [(h["id"], h["current"]) for h in hist] == [(v2, True), (v1, False)]
    assert [d["id"] for d in run_ok("store", "list", "--json").json()] == [v2]
    lin = run_ok("graph", "lineage", v2, "--json").json()
    assert {"from": v2, "rel": "SUPERSEDES", "to": v1} in lin["edges"]
    hits = run_ok("search", "tides", "--in", "store", "--json").json()
    assert {h["id"].split("#")[0] for h in hits} == {v2}
    assert run_ok("status", "--json").json()["in_sync"] is True


def test_an_older_arxiv_version_not_stored_is_refused(kf: Path, arxiv_site: ArxivFeed) -> None:
    arxiv_site.publish(
        Paper(
            "2401.00001",
            2,
            "Tidal Retrieval Models",
            ["Ada Keeper"],
            "Revised.",
            ["Tidal Retrieval Models", "Sparse lexical signals predict the tides better."],
        )
    )
    v2 = run_ok("store", "arxiv", "2401.00001", "--json").json()["added"][0]["id"]
    before = (kf / ".ok/mapping.jsonl").read_text()
    hits = dict(arxiv_site.site.hits)
    r = run_ok("store", "arxiv", "2401.00001v1")
    assert r.code == 2
    assert r.err.startswith(
        f"Error: arXiv 2401.00001v1 is older than the stored v2 of "
        f"2401.00001 (document {v2}) (hint: "
    )
    assert len(r.err.strip().splitlines()) == 1
    assert dict(arxiv_site.site.hits) == hits  # refused before any request
    assert (kf / ".ok/mapping.jsonl").read_text() == before
    # the current version by its own number is fine
    r = run_ok("store", "arxiv", "2401.00001v2", "--json")
    assert r.code == 0 and [u["id"] for u in r.json()["unchanged"]] == [v2]


# -- repositories ----------------------------------------------------------------------------------
REPO_FILES = {
    "README.md": "# Harbour tools\n\nUtilities for harbour masters.\n",
    "src/tides.py": 'def high_water(day):\n    """Predict high water for a day."""\n',
    "docs/guide.md": "# Guide\n\nHow to moor a boat safely.\n",
    "secret.md": "# Secret\n\nDo not store me.\n",
    "build/out.md": "# Build output\n",
    "logo.png": "not really a png",
    ".gitignore": "secret.md\nbuild/\n",
}


def test_repo_local_respects_gitignore_and_include(kf: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "harbour", REPO_FILES)
    (repo / "untracked.md").write_text("# Untracked but not ignored\n")
    r = run_ok("store", "repo", str(repo), "--json")
    assert r.code == 0, r.err
    paths = sorted(a["path"] for a in r.json()["added"])
    assert paths == [
        "store/normalized/repos/harbour/README.ok.md",
        "store/normalized/repos/harbour/docs/guide.ok.md",
        "store/normalized/repos/harbour/src/tides.py.ok.md",
        "store/normalized/repos/harbour/untracked.ok.md",
    ]
    e = next(e for e in load_mapping(Folder(kf)).values() if e["path"].endswith("guide.ok.md"))
    assert e["source"] == {"repo": str(repo), "file": "docs/guide.md"}
    assert len(e["fetch"]["commit"]) == 40
    r = run_ok("store", "repo", str(repo), "--include", "*.py", "--json")
    assert r.code == 0 and [u["path"] for u in r.json()["unchanged"]] == [
        "store/normalized/repos/harbour/src/tides.py.ok.md"
    ]


def test_repo_plain_directory_uses_gitignore(kf: Path, tmp_path: Path) -> None:
    d = tmp_path / "plain"
    write_files(
        d,
        {
            "a.md": "# A\n\nalpha\n",
            "skip.md": "# skip\n",
            "sub/b.md": "# B\n\nbeta\n",
            "sub/.gitignore": "b.md\n",
            ".gitignore": "skip.md\n",
        },
    )
    r = run_ok("store", "repo", str(d), "--json")
    assert r.code == 0, r.err
    assert [a["path"] for a in r.json()["added"]] == ["store/normalized/repos/plain/a.ok.md"]


def test_repo_clone_branch_and_refresh(kf: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "upstream", REPO_FILES)
    git(repo, "checkout", "-q", "-b", "docs")
    write_files(repo, {"docs/guide.md": "# Guide\n\nOn the docs branch: how to moor.\n"})
    git(repo, "commit", "-qam", "docs branch")
    git(repo, "checkout", "-q", "main")
    url = repo.as_uri()
    r = run_ok("store", "repo", url, "--branch", "docs", "--include", "docs/*", "--json")
    assert r.code == 0, r.err
    [doc] = r.json()["added"]
    assert "On the docs branch" in (kf / doc["path"]).read_text()
    assert list((kf / ".ok/cache/repos").iterdir())  # the clone lives in the derived cache
    # upstream moves on: a refresh re-reads the repository (changed file, new file)
    git(repo, "checkout", "-q", "docs")
    write_files(
        repo,
        {
            "docs/guide.md": "# Guide\n\nMooring now needs two lines.\n",
            "docs/new.md": "# New\n\nA new page about buoys.\n",
        },
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "more docs")
    r = run_ok("refresh", doc["id"], "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert [c["id"] for c in out["changed"]] == [doc["id"]]
    assert [a["path"] for a in out["added"]] == ["store/normalized/repos/upstream/docs/new.ok.md"]


def test_repo_refresh_removes_files_deleted_upstream(kf: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "harbour", REPO_FILES)
    r = run_ok("store", "repo", str(repo), "--include", "*.md", "--json")
    assert r.code == 0, r.err
    r = run_ok("store", "repo", str(repo), "--include", "*.py", "--json")
    assert r.code == 0, r.err  # a second include: its files are no deletion candidates
    docs = {a["path"].rsplit("/", 1)[1]: a["id"] for a in run_ok("store", "list", "--json").json()}
    guide, tides = docs["guide.ok.md"], docs["tides.py.ok.md"]
    (repo / "docs/guide.md").unlink()
    git(repo, "commit", "-qam", "drop the guide")
    r = run_ok("refresh", "--all", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["removed"] == [
        {
            "id": guide,
            "path": "store/normalized/repos/harbour/docs/guide.ok.md",
            "reason": "deleted upstream",
        }
    ]
    assert out["skipped"] == [] and tides in out["unchanged"]  # re-read with both includes
    assert guide not in load_mapping(Folder(kf)) and tides in load_mapping(Folder(kf))
    assert not (kf / "store/normalized/repos/harbour/docs/guide.ok.md").exists()
    assert run_ok("search", "moor a boat safely", "--mode", "fts", "--json").json() == []
    [ev] = run_ok("events", "--type", "removed", "--json").json()
    assert ev["doc"] == guide and ev["reason"] == "deleted upstream"
    # the graph agrees with a rebuild
    before = run_ok("status", "--json").json()
    assert before["in_sync"] and run_ok("index", "--rebuild").code == 0
    assert run_ok("status", "--json").json()["counts"] == before["counts"]


def test_repo_bad_targets(kf: Path, tmp_path: Path) -> None:
    r = run_ok("store", "repo", str(tmp_path / "nope"))
    assert r.code == 2 and "no such directory" in r.err
    r = run_ok("store", "repo", (tmp_path / "nope").as_uri())
    assert r.code == 2 and "git clone failed" in r.err
    repo = make_repo(tmp_path / "r", {"a.md": "# a\n"})
    r = run_ok("store", "repo", str(repo), "--include", "*.rs")
    assert r.code == 2 and "no files to store match --include" in r.err
    _nothing_written(kf)


def test_polite_delay_and_crawl_delay(site: Site) -> None:
    import time

    from openkl.collect.sources import WebClient

    with WebClient(delay=0.3, max_bytes=1 << 20) as c:
        t = time.monotonic()
        for p in ("/", "/keepers", "/lamps.html"):
            c.get(site.url(p))
        assert time.monotonic() - t >= 0.6  # three requests to one host, 0.3 s apart
    site.pages["/robots.txt"] = Page(b"User-agent: *\nCrawl-delay: 1\n", "text/plain")
    with WebClient(delay=0, max_bytes=1 << 20) as c:
        t = time.monotonic()
        c.get(site.url("/"))
        c.get(site.url("/keepers"))
        assert time.monotonic() - t >= 1.0  # the site's Crawl-delay wins over ours


def test_restoring_a_web_page_updates_its_policy(kf: Path, site: Site) -> None:
    doc = run_ok("store", "web", site.url("/keepers"), "--json").json()["added"][0]["id"]
    assert load_mapping(Folder(kf))[doc].get("refresh") is None
    r = run_ok("store", "web", site.url("/keepers"), "--cron", "@daily", "--json")
    assert r.code == 0 and [u["id"] for u in r.json()["unchanged"]] == [doc]
    assert load_mapping(Folder(kf))[doc]["refresh"] == {"cron": "@daily"}
    # a page is named by its URL in every command that takes a document
    r = run_ok("store", "policy", site.url("/keepers"), "--refresh", "1d", "--json")
    assert r.code == 0 and r.json()[0]["id"] == doc
    r = run_ok("refresh", site.url("/keepers"), "--json")
    assert r.code == 0 and r.json()["unchanged"] == [doc]
    r = run_ok("store", "show", site.url("/nowhere"))
    assert r.code == 2 and "no document matches" in r.err


def test_failing_robots_txt_means_no_crawling(kf: Path, site: Site) -> None:
    site.pages["/robots.txt"] = Page(b"oops", status=503)
    r = run_ok("store", "web", site.url("/"))
    assert r.code == 2 and "disallowed by the site's robots.txt" in r.err
    _nothing_written(kf)
    site.pages.pop("/robots.txt")  # none at all (404): everything may be fetched
    assert run_ok("store", "web", site.url("/keepers")).code == 0


def test_repo_links_out_of_the_repository_are_not_stored(kf: Path, tmp_path: Path) -> None:
    secret = tmp_path / "home" / "id_key.md"
    secret.parent.mkdir()
    secret.write_text("# Key\n\nPRIVATE KEY MATERIAL\n")
    repo = make_repo(tmp_path / "evil", {"README.md": "# Evil\n\nLooks harmless.\n"})
    (repo / "notes.md").symlink_to(secret)
    (repo / "docs.md").symlink_to("README.md")  # a link inside is fine
    r = run_ok("store", "repo", str(repo), "--json")
    assert r.code == 0 and "outside the repository" in r.err, r.err  # a warning, as for fetches
    rep = r.json()
    assert sorted(a["path"] for a in rep["added"]) == ["store/normalized/repos/evil/README.ok.md"]
    assert [s["path"] for s in rep["skipped"]] == ["notes.md"]
    assert "outside the repository" in rep["skipped"][0]["reason"]
    for p in kf.rglob("*"):
        if p.is_file() and not p.is_relative_to(kf / ".ok"):
            assert "PRIVATE KEY" not in p.read_text(errors="replace"), p
