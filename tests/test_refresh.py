"""Refresh policies, `ok refresh`, drift, version history and lineage.

The clock is pinned with OK_NOW, so "a day later" is an environment change, not a wait.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.localsite import Page, Site, serve
from helpers.run import run_ok

from openkl.collect.refresh import make_policy, next_due, parse_cron, parse_interval
from openkl.errors import BadInput
from openkl.files.folder import Folder
from openkl.files.mapping import load as load_mapping

T0 = dt.datetime(2026, 1, 10, 8, 0, tzinfo=dt.UTC)


def at(monkeypatch: pytest.MonkeyPatch, **delta: float) -> None:
    monkeypatch.setenv("OK_NOW", (T0 + dt.timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ"))


STABLE = (
    "The harbour office opens at dawn and closes when the last ferry has docked; "
    "its keeper records every arrival in the ledger."
)
OLD = [
    "Gullwing gulls nest on the breakwater and squabble over fish scraps every spring.",
    "Fishermen mend gullwing nets on the quay while herring gulls watch from the posts.",
    "Seabirds follow the trawlers home, diving for whatever the gullwing crews throw back.",
]
NEW = [
    "Marmalade is made by simmering bitter Seville oranges with sugar until it sets.",
    "Spread the marmalade thinly on hot buttered toast, or stir it into a glaze for ham.",
    "Store sealed jars of marmalade in a cool cupboard for up to two years.",
]


def _page(site: Site, paras: list[str]) -> None:
    site.html(
        "/tides",
        "Harbour notes",
        "<h1>Harbour notes</h1>" + "".join(f"<p>{p}</p>" for p in [STABLE, *paras]),
    )


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.setenv("OK_WEB_DELAY", "0")
    s = Site()
    s.pages["/robots.txt"] = Page(b"User-agent: *\nAllow: /\n", "text/plain")
    _page(s, OLD)
    with serve(s):
        yield s


def _events(*args: str) -> list[dict]:
    r = run_ok("events", "--json", *args)
    assert r.code == 0, r.err
    return r.json()


def test_refresh_due_web_page_end_to_end(
    kf: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    at(monkeypatch)
    r = run_ok("store", "web", site.url("/tides"), "--refresh", "1d", "--json")
    assert r.code == 0, r.err
    old = r.json()["added"][0]["id"]
    text = (kf / r.json()["added"][0]["path"]).read_text()
    start = text.index(STABLE)
    cite = run_ok(
        "cite", "make", old, "--chars", f"{start}-{start + len(STABLE)}", "--persist", "--json"
    )
    assert cite.code == 0, cite.err
    cite_obj = cite.json()
    cite_obj = cite_obj[0] if isinstance(cite_obj, list) else cite_obj

    # an hour later nothing is due: no request goes out
    at(monkeypatch, hours=1)
    hits = dict(site.hits)
    r = run_ok("refresh", "--due", "--json")
    assert r.code == 0 and r.json()["due"] == [] and site.hits == hits
    assert run_ok("refresh").out.strip() == "Nothing is due."

    # the page changes; a day later the policy has elapsed
    _page(site, NEW)
    at(monkeypatch, hours=25)
    r = run_ok("refresh", "--due", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert [c["id"] for c in out["changed"]] == [old]
    new, drift = out["changed"][0]["new"], out["changed"][0]["drift"]
    assert new != old and 0.1 < drift < 1.0

    entries = load_mapping(Folder(kf))
    assert entries[old]["current"] is False and entries[old]["superseded_by"] == new
    assert entries[old]["drift"] == drift
    assert entries[new]["supersedes"] == old and entries[new]["refresh"] == {"interval": "1d"}
    assert entries[new]["fetched_at"] == "2026-01-11T09:00:00Z"
    assert (kf / ".ok/versions" / f"{old}.ok.md").read_text() == text

    rows = run_ok(
        "graph",
        "cypher",
        "MATCH (n:Doc)-[s:SUPERSEDES]->(o:Doc) "
        "RETURN n.id AS new, o.id AS old, s.drift AS drift, o.current AS cur",
        "--json",
    ).json()
    assert rows == [{"new": new, "old": old, "drift": pytest.approx(drift), "cur": False}]

    hist = run_ok("store", "history", old, "--json").json()
    assert [(h["id"], h["current"]) for h in hist] == [(new, True), (old, False)]
    assert hist[0]["drift"] == drift and hist[1]["drift"] is None

    types = [e["type"] for e in _events("--doc", new)]
    assert types == ["ingested", "drifted", "refreshed"]
    [refreshed] = _events("--type", "refreshed")
    assert refreshed["previous"] == old and refreshed["drift"] == drift

    # search sees only the current text
    assert (
        run_ok("search", "gullwing gulls nest", "--in", "store", "--mode", "fts", "--json").json()
        == []
    )
    hits = run_ok("search", "bitter Seville oranges marmalade", "--json").json()
    assert hits and all(h["doc_id"] == new for h in hits)
    assert run_ok(
        "graph",
        "cypher",
        "MATCH (c:Chunk) WHERE c.doc_id = $d RETURN count(c) AS n",
        "-p",
        f"d={old}",
        "--json",
    ).json() == [{"n": 0}]

    # the old citation follows the document to its new version
    v = run_ok("cite", "verify", cite_obj["id"], "--json")
    status = v.json()[0]["status"] if isinstance(v.json(), list) else v.json()["status"]
    assert status in ("moved", "changed"), v.out
    assert status != "missing"

    # lineage walks SUPERSEDES both ways
    lin = run_ok("graph", "lineage", new, "--json").json()
    assert [(n["rel"], n["id"]) for n in lin["nodes"]] == [("SUPERSEDES", old)]
    lin = run_ok("graph", "lineage", old, "--direction", "down", "--json").json()
    assert [(n["rel"], n["id"]) for n in lin["nodes"]] == [("SUPERSEDED_BY", new)]

    # unchanged on the next round: a conditional request answered 304, no new version
    at(monkeypatch, hours=50)
    r = run_ok("refresh", "--json")
    assert r.code == 0 and r.json()["unchanged"] == [new] and not r.json()["changed"]
    assert site.not_modified.get("/tides") == 1
    assert load_mapping(Folder(kf))[new]["fetched_at"] == "2026-01-12T10:00:00Z"


def test_refresh_failure_keeps_the_current_version(
    kf: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    at(monkeypatch)
    doc = run_ok("store", "web", site.url("/tides"), "--json").json()["added"][0]["id"]
    site.pages["/tides"] = Page(b"down for maintenance", status=500)
    r = run_ok("refresh", doc, "--json")
    assert r.code == 2
    assert "server error (HTTP 500" in r.json()["failed"][0]["error"]
    assert "could not refresh" in r.err
    e = load_mapping(Folder(kf))[doc]
    assert e["current"] is True and "HTTP 500" in e["refresh_error"]["error"]
    [ev] = _events("--type", "refresh_failed")
    assert ev["doc"] == doc
    # recovered and changed, with a threshold no drift reaches: no `drifted` event
    _page(site, NEW)
    r = run_ok("refresh", doc, "--drift-threshold", "1.5", "--json")
    assert r.code == 0, r.err
    assert "refresh_error" not in load_mapping(Folder(kf))[r.json()["changed"][0]["new"]]
    assert _events("--type", "drifted") == []
    assert len(_events("--type", "refreshed")) == 1


def test_file_source_cron_policy_and_history(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "outside" / "ferry.md"
    src.parent.mkdir()
    src.write_text("# Ferry\n\nThe ferry leaves at nine.\n")
    at(monkeypatch)  # 08:00; next 06:00 run is tomorrow
    r = run_ok("store", "ingest", str(src), "--cron", "0 6 * * *", "--refresh", "1h", "--json")
    assert r.code == 0, r.err
    doc = r.json()["added"][0]["id"]
    entry = load_mapping(Folder(kf))[doc]
    assert entry["refresh"] == {"interval": "1h", "cron": "0 6 * * *"}
    assert next_due(entry) == dt.datetime(2026, 1, 11, 6, 0, tzinfo=dt.UTC)  # cron wins
    src.write_text("# Ferry\n\nThe ferry leaves at ten from the north pier.\n")
    at(monkeypatch, hours=21, minutes=59)
    assert run_ok("refresh", "--dry-run", "--json").json()["due"] == []
    at(monkeypatch, hours=22)
    d = run_ok("refresh", "--dry-run", "--json").json()
    assert [x["id"] for x in d["due"]] == [doc] and d["changed"] == []
    r = run_ok("refresh", "--json")
    assert r.code == 0, r.err
    new = r.json()["changed"][0]["new"]
    hist = run_ok("store", "history", new, "--json").json()
    assert [h["id"] for h in hist] == [new, doc]
    assert isinstance(hist[0]["drift"], float)
    plain = run_ok("store", "history", doc).out.splitlines()
    assert plain[0].startswith(new) and "drift" in plain[0] and plain[1].endswith("-")
    assert "ten from the north pier" in (kf / hist[0]["path"]).read_text()


def test_policy_command_and_bad_policies(
    kf: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    at(monkeypatch)
    r = run_ok("store", "web", site.url("/tides"), "--cron", "61 * * * *")
    assert r.code == 2 and "bad minute field '61'" in r.err
    assert "/tides" not in site.hits  # refused before any request
    r = run_ok("store", "web", site.url("/tides"), "--refresh", "soon")
    assert r.code == 2 and "refresh interval 'soon' is not valid" in r.err
    assert load_mapping(Folder(kf)) == {}
    doc = run_ok("store", "web", site.url("/tides"), "--json").json()["added"][0]["id"]
    r = run_ok("store", "policy", doc, "--refresh", "2h", "--json")
    assert r.code == 0 and r.json()[0]["next_due"] == "2026-01-10T10:00:00Z"
    at(monkeypatch, hours=3)
    assert [x["id"] for x in run_ok("refresh", "-n", "--json").json()["due"]] == [doc]
    assert run_ok("store", "policy", doc, "--clear").code == 0
    assert run_ok("refresh", "-n", "--json").json()["due"] == []
    r = run_ok("refresh", doc, "--all")
    assert r.code == 2 and "not several" in r.err
    r = run_ok("store", "ingest", "-", "--name", "x.md", "--refresh", "1d", input="# x\n")
    assert r.code != 0 and "stdin input cannot be refreshed" in r.err


def test_lineage_from_a_derived_note(kf: Path, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    at(monkeypatch)
    r = run_ok("store", "web", site.url("/tides"), "--json")
    old = r.json()["added"][0]["id"]
    chunk = run_ok(
        "graph", "cypher", "MATCH (c:Chunk) RETURN c.id AS id ORDER BY c.ord LIMIT 1", "--json"
    ).json()[0]["id"]
    note = kf / "memories/by_date/2026-01/10/m-20260110-lin1.md"
    note.parent.mkdir(parents=True)
    note.write_text(
        f"---\nid: m-20260110-lin1\nts: 2026-01-10T08:00:00Z\n"
        f"derived_from: ['{chunk}']\n---\nGulls nest on the breakwater.\n"
    )
    assert run_ok("sync").code == 0
    lin = run_ok("graph", "lineage", "m-20260110-lin1", "--json").json()
    assert [(n["rel"], n["id"], n["depth"]) for n in lin["nodes"]] == [
        ("DERIVED_FROM", chunk, 1),
        ("PART_OF", old, 2),
    ]
    _page(site, NEW)
    new = run_ok("refresh", old, "--json").json()["changed"][0]["new"]
    # the note's source is now an old version; lineage says what replaced it
    lin = run_ok("graph", "lineage", "m-20260110-lin1", "--direction", "up", "--json").json()
    assert [(n["rel"], n["id"]) for n in lin["nodes"]] == [
        ("DERIVED_FROM", old),
        ("SUPERSEDED_BY", new),
    ]
    r = run_ok("graph", "lineage", "nothing-here")
    assert r.code == 2 and "nothing in the graph has id" in r.err


# -- policies as a library ------------------------------------------------------------------------
def test_intervals() -> None:
    assert parse_interval("90m") == dt.timedelta(minutes=90)
    assert parse_interval("1d") == dt.timedelta(days=1)
    assert parse_interval("2w") == dt.timedelta(weeks=2)
    for bad in ("", "0h", "1y", "h", "-1d"):
        with pytest.raises(BadInput):
            parse_interval(bad)
    assert make_policy(None, None) is None


@pytest.mark.parametrize(
    "expr,after,expected",
    [
        ("0 6 * * *", "2026-01-10T08:00", "2026-01-11T06:00"),
        ("0 6 * * *", "2026-01-10T05:59", "2026-01-10T06:00"),
        ("0 6 * * *", "2026-01-10T06:00", "2026-01-11T06:00"),  # strictly after
        ("*/15 * * * *", "2026-01-10T08:07", "2026-01-10T08:15"),
        ("30 9 * * mon-fri", "2026-01-10T10:00", "2026-01-12T09:30"),  # Sat -> Mon
        ("0 0 1 * *", "2026-01-31T12:00", "2026-02-01T00:00"),
        ("0 0 29 2 *", "2026-03-01T00:00", "2028-02-29T00:00"),
        ("0 12 13 * 5", "2026-01-10T00:00", "2026-01-13T12:00"),  # day 13 OR a Friday
        ("@hourly", "2026-01-10T08:30", "2026-01-10T09:00"),
        ("0 0 * * 7", "2026-01-10T00:00", "2026-01-11T00:00"),  # 7 is Sunday too
        ("0 8-10/2 * jan *", "2026-01-10T08:00", "2026-01-10T10:00"),
    ],
)
def test_cron_next(expr: str, after: str, expected: str) -> None:
    t = dt.datetime.fromisoformat(after).replace(tzinfo=dt.UTC)
    assert parse_cron(expr).next_after(t) == dt.datetime.fromisoformat(expected).replace(
        tzinfo=dt.UTC
    )


@pytest.mark.parametrize(
    "expr,message",
    [
        ("* * * *", "must have 5 fields"),
        ("61 * * * *", "bad minute field"),
        ("0 24 * * *", "bad hour field"),
        ("0 0 0 * *", "bad day of month field"),
        ("0 0 * 13 *", "bad month field"),
        ("0 0 * * funday", "bad day of week field"),
        ("*/0 * * * *", "step '0' must be a positive number"),
        ("5-1 * * * *", "runs backwards"),
        ("0 0 30 2 *", "never fires"),
    ],
)
def test_cron_errors(expr: str, message: str) -> None:
    with pytest.raises(BadInput) as e:
        parse_cron(expr)
    assert message in e.value.message


def test_content_that_returns_to_an_earlier_version(
    kf: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    at(monkeypatch)
    first = run_ok("store", "web", site.url("/tides"), "--json").json()["added"][0]["id"]
    _page(site, NEW)
    second = run_ok("refresh", first, "--json").json()["changed"][0]["new"]
    _page(site, OLD)  # the page is put back as it was
    r = run_ok("refresh", second, "--json")
    assert r.code == 0, r.err
    assert r.json()["changed"][0]["new"] == first
    entries = load_mapping(Folder(kf))
    assert entries[first]["current"] is True and entries[second]["superseded_by"] == first
    assert [h["id"] for h in run_ok("store", "history", first, "--json").json()] == [first, second]
    hits = run_ok("search", "gullwing gulls nest", "--json").json()
    assert hits and {h["doc_id"] for h in hits} == {first}
    docs = run_ok(
        "graph",
        "cypher",
        "MATCH (d:Doc) RETURN d.id AS id, d.current AS cur ORDER BY cur DESC",
        "--json",
    ).json()
    assert docs == [{"id": first, "cur": True}, {"id": second, "cur": False}]


def test_plain_ingest_of_an_edited_file_records_drift(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "quay.md"
    src.write_text("# Quay\n\nThe quay is built of granite blocks.\n")
    old = run_ok("store", "ingest", str(src), "--json").json()["added"][0]["id"]
    src.write_text("# Quay\n\nThe quay is built of granite blocks and oak piles.\n")
    monkeypatch.setenv("OK_REFRESH_DRIFT_THRESHOLD", "0.0")  # any change counts
    r = run_ok("store", "ingest", str(src), "--json")
    assert r.code == 0, r.err
    [added] = r.json()["added"]
    assert added["supersedes"] == old and 0 < added["drift"] < 0.2
    evs = run_ok("events", "--doc", added["id"], "--json").json()
    assert [e["type"] for e in evs] == ["ingested", "drifted"]
    assert evs[1]["threshold"] == 0.0 and evs[1]["previous"] == old


def test_last_modified_and_refresh_all(
    kf: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamp = "Sat, 10 Jan 2026 07:00:00 GMT"
    site.pages["/plain.txt"] = Page(
        b"Slack water comes between the tides.\n",
        "text/plain",
        etag=False,
        headers={"Last-Modified": stamp},
    )
    doc = run_ok("store", "web", site.url("/plain.txt"), "--json").json()["added"][0]["id"]
    assert load_mapping(Folder(kf))[doc]["fetch"]["last_modified"] == stamp
    assert [d["id"] for d in run_ok("refresh", "--all", "-n", "--json").json()["due"]] == [doc]
    r = run_ok("refresh", "--all", "--json")
    assert r.code == 0 and r.json()["unchanged"] == [doc]
    assert site.not_modified["/plain.txt"] == 1


def _derived_edges() -> list[tuple[str, str]]:
    rows = run_ok(
        "graph",
        "cypher",
        "MATCH (m:MemoryNote)-[:DERIVED_FROM]->(x) "
        "RETURN m.id AS note, x.id AS src ORDER BY note, src",
        "--json",
    ).json()
    return [(r["note"], r["src"]) for r in rows]


def test_derived_from_edges_survive_a_new_version(kf: Path, tmp_path: Path) -> None:
    """A note derived from a document keeps its edge when the document gets a new version
    (by re-ingest or by an edit picked up by `ok sync`): the graph matches a rebuild."""
    src = tmp_path / "tides.md"
    src.write_text("# Tides\n\n" + "\n\n".join(OLD) + "\n")
    r = run_ok("store", "ingest", str(src), "--json")
    assert r.code == 0, r.err
    doc = r.json()["added"][0]["id"]
    chunk = run_ok(
        "graph", "cypher", "MATCH (c:Chunk) RETURN c.id AS id ORDER BY c.ord LIMIT 1", "--json"
    ).json()[0]["id"]
    for nid, ref in (("m-20260110-dc01", chunk), ("m-20260110-dd01", doc)):
        note = kf / f"memories/by_date/2026-01/10/{nid}.md"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(
            f"---\nid: {nid}\nts: 2026-01-10T08:00:00Z\n"
            f"derived_from: ['{ref}']\n---\nGulls nest on the breakwater.\n"
        )
    assert run_ok("sync").code == 0
    assert _derived_edges() == [("m-20260110-dc01", chunk), ("m-20260110-dd01", doc)]

    # a new version by re-ingest: both notes now point at the old version's document
    src.write_text("# Tides\n\n" + "\n\n".join(NEW) + "\n")
    assert run_ok("store", "ingest", str(src)).code == 0
    after = _derived_edges()
    assert after == [("m-20260110-dc01", doc), ("m-20260110-dd01", doc)]
    # an edit in place, picked up by sync, of a version a third note derives from
    doc2 = run_ok("store", "list", "--json").json()[0]["id"]
    chunk2 = run_ok(
        "graph",
        "cypher",
        "MATCH (c:Chunk) WHERE c.doc_id = $d RETURN c.id AS id ORDER BY c.ord LIMIT 1",
        "-p",
        f"d={doc2}",
        "--json",
    ).json()[0]["id"]
    note = kf / "memories/by_date/2026-01/10/m-20260110-dn01.md"
    note.write_text(
        f"---\nid: m-20260110-dn01\nts: 2026-01-10T08:00:00Z\n"
        f"derived_from: ['{chunk2}']\n---\nMarmalade.\n"
    )
    assert run_ok("sync").code == 0
    assert ("m-20260110-dn01", chunk2) in _derived_edges()
    norm = next((kf / "store/normalized").rglob("tides*.ok.md"))
    norm.write_text(norm.read_text() + "\nOne more line about jars.\n")
    assert run_ok("sync").code == 0
    after = _derived_edges()
    assert run_ok("index", "--rebuild").code == 0
    assert (
        after
        == _derived_edges()
        == [("m-20260110-dc01", doc), ("m-20260110-dd01", doc), ("m-20260110-dn01", doc2)]
    )
    (kf / "memories/by_date/2026-01/10/m-20260110-dn01.md").unlink()
    assert run_ok("sync").code == 0
    # returning to the first text brings its chunks back: the chunk edge returns too
    src.write_text("# Tides\n\n" + "\n\n".join(OLD) + "\n")
    assert run_ok("store", "ingest", str(src)).code == 0
    after = _derived_edges()
    assert run_ok("index", "--rebuild").code == 0
    assert after == _derived_edges() == [("m-20260110-dc01", chunk), ("m-20260110-dd01", doc)]


def test_a_failing_source_backs_off_and_is_recorded_once_per_streak(
    kf: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OK_REFRESH_RETRY_AFTER", "3600")  # an hour, doubled per failure
    at(monkeypatch)
    doc = run_ok("store", "web", site.url("/tides"), "--refresh", "30m", "--json")
    doc_id = doc.json()["added"][0]["id"]
    site.pages["/tides"] = Page(b"refused", status=500)
    now = 1.0  # hours after T0: due since 08:30
    waits = []
    for _ in range(7):
        at(monkeypatch, hours=now)
        hits = site.hits.get("/tides", 0)
        r = run_ok("refresh", "--json")
        assert r.code == 2 and r.json()["failed"][0]["id"] == doc_id, r.out
        assert site.hits["/tides"] == hits + 1
        err = load_mapping(Folder(kf))[doc_id]["refresh_error"]
        retry = dt.datetime.fromisoformat(err["retry_at"].replace("Z", "+00:00"))
        wait = (retry - (T0 + dt.timedelta(hours=now))).total_seconds() / 3600
        waits.append(wait)
        assert r.json()["failed"][0]["retry_at"] == err["retry_at"]
        assert "due again at " + err["retry_at"] in r.err
        # not tried again before then: nothing is due, nothing is fetched
        at(monkeypatch, hours=now + wait - 0.1)
        r = run_ok("refresh", "--json")
        assert r.code == 0 and r.json()["due"] == [] and site.hits["/tides"] == hits + 1
        assert next_due(load_mapping(Folder(kf))[doc_id]) == retry
        now += wait
    assert waits == [1, 2, 4, 8, 16, 24, 24]  # doubled, capped at a day
    assert err["failures"] == 7 and err["since"] == "2026-01-10T09:00:00Z"
    assert "HTTP 500" in err["error"]
    # one event for the whole streak, with the reason
    [failed] = _events("--type", "refresh_failed")
    assert failed["doc"] == doc_id and "HTTP 500" in failed["error"]
    assert failed["path"] == load_mapping(Folder(kf))[doc_id]["path"]
    # asked for by name it is tried at once, still without another event
    r = run_ok("refresh", doc_id, "--json")
    assert r.code == 2 and len(_events("--type", "refresh_failed")) == 1
    assert load_mapping(Folder(kf))[doc_id]["refresh_error"]["failures"] == 8
    # the source is back: the recovery is recorded, and the error goes
    _page(site, NEW)
    at(monkeypatch, hours=now + 24)
    r = run_ok("refresh", "--json")
    assert r.code == 0 and r.json()["changed"][0]["id"] == doc_id, r.err
    [back] = _events("--type", "refresh_recovered")
    assert back["doc"] == doc_id and back["failures"] == 8 and "HTTP 500" in back["error"]
    assert back["since"] == "2026-01-10T09:00:00Z"
    entries = load_mapping(Folder(kf))
    assert "refresh_error" not in entries[doc_id]
    assert "refresh_error" not in entries[r.json()["changed"][0]["new"]]
    # a new streak is a new event
    site.pages["/tides"] = Page(b"", status=500)
    at(monkeypatch, hours=now + 25)
    assert run_ok("refresh").code == 2
    assert len(_events("--type", "refresh_failed")) == 2


def test_a_refused_connection_backs_off_too(kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OK_WEB_DELAY", "0")
    at(monkeypatch)
    gone = Site()
    gone.pages["/robots.txt"] = Page(b"User-agent: *\nAllow: /\n", "text/plain")
    _page(gone, OLD)
    with serve(gone):
        r = run_ok("store", "web", gone.url("/tides"), "--refresh", "1h", "--json")
        assert r.code == 0, r.err
    doc_id = r.json()["added"][0]["id"]  # the site is down now: connections are refused
    for hours in (2, 2.005, 2.01):  # one due run, then two before the first retry (60 s)
        at(monkeypatch, hours=hours)
        run_ok("refresh")
    err = load_mapping(Folder(kf))[doc_id]["refresh_error"]
    assert err["failures"] == 1 and "refused" in err["error"].lower(), err
    assert len(_events("--type", "refresh_failed")) == 1
    at(monkeypatch, hours=2.02)  # past the first retry
    run_ok("refresh")
    assert load_mapping(Folder(kf))[doc_id]["refresh_error"]["failures"] == 2
    assert len(_events("--type", "refresh_failed")) == 1


@pytest.mark.server
def test_the_servers_refresh_loop_backs_off_a_failing_source(
    kf: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.run import until
    from helpers.serve import Server

    doc = run_ok("store", "web", site.url("/tides"), "--refresh", "1s", "--json")
    doc_id = doc.json()["added"][0]["id"]
    site.pages["/tides"] = Page(b"refused", status=500)
    fetched = site.hits["/tides"]
    env = {"OK_SERVE_REFRESH_EVERY": "0.2", "OK_REFRESH_RETRY_AFTER": "0.5", "OK_WEB_DELAY": "0"}
    s = Server(kf, env=env)
    try:

        def failures() -> int:
            err = load_mapping(Folder(kf))[doc_id].get("refresh_error") or {}
            return int(err.get("failures") or 0)

        until(lambda: failures() >= 4, 120, every=0.1)  # waits 0.5, 1, 2 s: 3.5 s at least
        evs = s.http.get(f"/v1/{s.stack}/events", params={"type": "refresh_failed"}).json()
    finally:
        s.stop()
    tries = site.hits["/tides"] - fetched
    # one event for the streak; one fetch per failure, not one per cycle of 0.2 s
    assert [e["doc"] for e in evs] == [doc_id] and "HTTP 500" in evs[0]["error"]
    assert failures() <= tries <= failures() + 1
