"""`ok store s3` and its refresh, against a local S3-compatible server (moto's, on
127.0.0.1): objects under a prefix, versions by ETag, deletions, credentials and errors."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli, run_ok
from helpers.localsite import free_port
from helpers.s3server import KEY_ID, SECRET, S3Server

from openkl.files.folder import Folder
from openkl.files.mapping import load as load_mapping

BUCKET = "handbook"
OBJECTS = {
    "docs/harbour.md": "# Harbour\n\nThe harbour master assigns berths to arriving ships.\n",
    "docs/tides.txt": "Tide tables list high and low water for each day of the month.\n",
    "docs/deep/anchors.md": "# Anchors\n\nA fluke anchor digs into sand and mud.\n",
    "docs/logo.bin": "\x00\x01binary",
    "docs/WATCH": "Night watch: the lamp was lit at dusk.\n",
    "docs/": "",  # a folder marker, as consoles make them
    "docs2/other.md": "# Other\n\nNot under docs/.\n",
}


@pytest.fixture(scope="module")
def s3srv() -> Iterator[S3Server]:
    srv = S3Server()
    try:
        yield srv
    finally:
        srv.stop()


def _no_aws(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """No credentials but what a test gives; never the instance metadata service."""
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / ".aws" / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / ".aws" / "config"))


@pytest.fixture
def s3(s3srv: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> S3Server:
    """The server, emptied, with the handbook bucket and credentials in the environment."""
    s3srv.reset()
    _no_aws(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    c = s3srv.client()
    c.create_bucket(Bucket=BUCKET)
    for key, body in OBJECTS.items():
        c.put_object(Bucket=BUCKET, Key=key, Body=body.encode())
    s3srv.requests.clear()
    return s3srv


def _by_key(kf: Path) -> dict[str, dict]:
    return {
        str(e["source"]["s3"]).split("/", 3)[3]: e
        for e in load_mapping(Folder(kf)).values()
        if (e.get("source") or {}).get("s3") and e.get("current", True)
    }


def test_store_a_prefix_and_refresh_by_etag(kf: Path, s3: S3Server) -> None:
    r = run_ok(
        "store", "s3", f"s3://{BUCKET}/docs", "--endpoint-url", s3.url, "--refresh", "1h", "--json"
    )
    assert r.code == 0, r.err
    assert len(r.json()["added"]) == 3
    docs = _by_key(kf)
    # under docs/ only (not docs2/), of the types ok reads, no folder marker
    assert set(docs) == {"docs/harbour.md", "docs/tides.txt", "docs/deep/anchors.md"}
    harbour = docs["docs/harbour.md"]
    assert harbour["source"] == {"s3": f"s3://{BUCKET}/docs/harbour.md", "endpoint": s3.url}
    assert harbour["fetch"]["kind"] == "s3" and harbour["fetch"]["etag"].strip('"')
    assert harbour["fetch"]["prefix"] == f"s3://{BUCKET}/docs"
    assert harbour["refresh"] == {"interval": "1h"}
    assert harbour["path"].startswith(f"store/normalized/s3/127.0.0.1_{s3.port}/{BUCKET}/docs/")
    assert (kf / "store/sources" / f"s3/127.0.0.1_{s3.port}/{BUCKET}/docs/tides.txt").exists()
    hits = run_ok("search", "who assigns berths", "--json", "-k", "1").json()
    assert hits[0]["source"]["s3"] == f"s3://{BUCKET}/docs/harbour.md"
    assert run_ok("store", "show", f"s3://{BUCKET}/docs/tides.txt").out.startswith("Tide tables")

    # nothing changed upstream: one listing, no object read, nothing new
    s3.requests.clear()
    r = run_ok("refresh", "--all", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert sorted(out["unchanged"]) == sorted(e["id"] for e in docs.values())
    assert out["changed"] == out["added"] == out["removed"] == out["failed"] == []
    assert s3.downloads(BUCKET) == []

    # upstream moves on: one object changed, one deleted, one new
    c = s3.client()
    c.put_object(Bucket=BUCKET, Key="docs/tides.txt", Body=b"Spring tides come at new moon.\n")
    c.delete_object(Bucket=BUCKET, Key="docs/deep/anchors.md")
    c.put_object(Bucket=BUCKET, Key="docs/buoys.md", Body=b"# Buoys\n\nRed buoys mark port.\n")
    s3.requests.clear()
    r = run_ok("refresh", "--all", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert [c["id"] for c in out["changed"]] == [docs["docs/tides.txt"]["id"]]
    assert out["unchanged"] == [docs["docs/harbour.md"]["id"]]
    assert [a["path"].rsplit("/", 1)[1] for a in out["added"]] == ["buoys.ok.md"]
    assert out["removed"] == [
        {
            "id": docs["docs/deep/anchors.md"]["id"],
            "path": docs["docs/deep/anchors.md"]["path"],
            "reason": "deleted upstream",
        }
    ]
    assert sorted(s3.downloads(BUCKET)) == ["docs/buoys.md", "docs/tides.txt"]
    now = _by_key(kf)
    assert set(now) == {"docs/harbour.md", "docs/tides.txt", "docs/buoys.md"}
    assert now["docs/tides.txt"]["supersedes"] == docs["docs/tides.txt"]["id"]
    assert now["docs/tides.txt"]["fetch"]["etag"] != docs["docs/tides.txt"]["fetch"]["etag"]
    assert now["docs/buoys.md"]["refresh"] == {"interval": "1h"}  # the prefix's policy
    history = run_ok("store", "history", f"s3://{BUCKET}/docs/tides.txt", "--json").json()
    assert len(history) == 2
    [ev] = run_ok("events", "--type", "removed", "--json").json()
    assert ev["doc"] == docs["docs/deep/anchors.md"]["id"] and ev["reason"] == "deleted upstream"
    assert run_ok("search", "fluke anchor sand", "--mode", "fts", "--json").json() == []

    # an object named as the prefix now names that object alone: those under docs/ are
    # not re-read, and not removed either
    c.put_object(Bucket=BUCKET, Key="docs", Body=b"# Docs\n\nAn object named docs.\n")
    r = run_ok("refresh", "--all", "--json")
    assert r.code == 0, r.err
    assert r.json()["removed"] == [] and len(r.json()["skipped"]) == 3
    c.delete_object(Bucket=BUCKET, Key="docs")

    # the bucket is gone: a failure to retry, not a deletion of everything
    for key in [o["Key"] for o in c.list_objects_v2(Bucket=BUCKET)["Contents"]]:
        c.delete_object(Bucket=BUCKET, Key=key)
    c.delete_bucket(Bucket=BUCKET)
    r = run_ok("refresh", "--all", "--json")
    assert r.code != 0
    out = r.json()
    assert out["removed"] == [] and len(out["failed"]) == 3
    assert all("does not exist" in f["error"] for f in out["failed"])
    assert set(_by_key(kf)) == {"docs/harbour.md", "docs/tides.txt", "docs/buoys.md"}
    # the graph agrees with a rebuild
    before = run_ok("status", "--json").json()
    assert run_ok("index", "--rebuild").code == 0
    assert run_ok("status", "--json").json()["counts"] == before["counts"]


def test_one_object_include_and_the_endpoint_setting(
    kf: Path, s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OK_S3_ENDPOINT_URL", s3.url)
    r = run_ok("store", "s3", f"s3://{BUCKET}/docs/harbour.md", "--json")
    assert r.code == 0, r.err
    assert [a["origin"] for a in r.json()["added"]] == [f"s3://{BUCKET}/docs/harbour.md"]
    r = run_ok("store", "s3", f"s3://{BUCKET}/docs/", "--include", "*.txt,WATCH", "--json")
    assert r.code == 0, r.err
    assert sorted(a["origin"].rsplit("/", 1)[1] for a in r.json()["added"]) == [
        "WATCH",
        "tides.txt",
    ]
    # storing again lists the objects and reads none whose ETag is the one stored; a
    # policy given now is set on them
    s3.requests.clear()
    r = run_ok("store", "s3", f"s3://{BUCKET}/docs/harbour.md", "--refresh", "2h", "--json")
    assert r.code == 0 and r.json()["added"] == [] and len(r.json()["unchanged"]) == 1
    assert s3.downloads(BUCKET) == []
    assert _by_key(kf)["docs/harbour.md"]["refresh"] == {"interval": "2h"}
    # a refresh of one document lists its prefix: the others are left alone
    doc = _by_key(kf)["docs/harbour.md"]
    c = s3.client()
    c.put_object(Bucket=BUCKET, Key="docs/harbour.md", Body=b"# Harbour\n\nBerths by radio.\n")
    s3.requests.clear()
    r = run_ok("refresh", doc["id"], "--json")
    assert r.code == 0, r.err
    assert [x["id"] for x in r.json()["changed"]] == [doc["id"]]
    assert r.json()["added"] == []
    assert s3.downloads(BUCKET) == ["docs/harbour.md"]


def _error(r: object) -> str:
    err = r.err  # type: ignore[attr-defined]
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    return lines[0]


@pytest.mark.parametrize(
    "url,extra,message",
    [
        ("https://example.org/x", [], "is not an s3:// URL"),
        ("s3://", [], "names no bucket"),
        ("s3:///docs", [], "names no bucket"),
        ("s3://no_such!bucket/x", [], "is not a bucket name"),
        ("s3://missing-bucket/docs", [], "the bucket 'missing-bucket' does not exist"),
        (f"s3://{BUCKET}/nothing-here", [], "no object under s3://handbook/nothing-here"),
        (f"s3://{BUCKET}/docs", ["--include", "*.rs"], "no object under"),
        (f"s3://{BUCKET}/docs", ["--endpoint-url", "ftp://h"], "is not an http(s) URL"),
        (f"s3://{BUCKET}/docs", ["--profile", "nobody"], "profile 'nobody' is not configured"),
        (f"s3://{BUCKET}/docs", ["--refresh", "often"], "refresh interval 'often'"),
    ],
)
def test_bad_input_is_one_line_and_nothing_is_written(
    kf: Path, s3: S3Server, url: str, extra: list[str], message: str
) -> None:
    args = ["--endpoint-url", s3.url] if "--endpoint-url" not in extra else []
    r = run_ok("store", "s3", url, *args, *extra)
    assert r.code == 2, r
    assert message in _error(r), r.err
    assert load_mapping(Folder(kf)) == {}
    assert not any((kf / "store" / "sources").rglob("*"))


def test_no_credentials_and_no_server(
    kf: Path, s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    r = run_ok("store", "s3", f"s3://{BUCKET}/docs", "--endpoint-url", down)
    assert r.code == 2 and f"cannot reach {down}" in _error(r)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    r = run_ok("store", "s3", f"s3://{BUCKET}/docs", "--endpoint-url", s3.url)
    assert r.code == 2 and "no AWS credentials found" in _error(r)
    assert "~/.aws/credentials" in r.err
    assert load_mapping(Folder(kf)) == {}
    r = run_ok("store", "ingest", f"s3://{BUCKET}/docs")
    assert r.code == 2 and "use `ok store s3 URL`" in r.err
    # a public bucket is read unsigned, and so are its refreshes
    url = f"s3://{BUCKET}/docs/harbour.md"
    s3.client().put_object_acl(Bucket=BUCKET, Key="docs/harbour.md", ACL="public-read")
    r = run_ok("store", "s3", url, "--endpoint-url", s3.url, "--no-sign-request", "--profile", "x")
    assert r.code == 2 and "contradict each other" in _error(r)
    s3.requests.clear()
    r = run_ok("store", "s3", url, "--endpoint-url", s3.url, "--no-sign-request", "--json")
    assert r.code == 0, r.err
    assert s3.downloads(BUCKET) == ["docs/harbour.md"]
    assert _by_key(kf)["docs/harbour.md"]["fetch"]["anonymous"] is True
    r = run_ok("refresh", url, "--json")
    assert r.code == 0 and len(r.json()["unchanged"]) == 1, r.err


def test_profiles_and_access_denied(kf: Path, s3: S3Server, tmp_path: Path) -> None:
    """Credentials from a profile in ~/.aws/credentials; a server that checks them refuses
    unknown keys and keys without the right."""
    iam = s3.client("iam")
    keys = {}
    for user in ("reader", "nobody"):
        iam.create_user(UserName=user)
        keys[user] = iam.create_access_key(UserName=user)["AccessKey"]
    iam.put_user_policy(
        UserName="reader",
        PolicyName="read",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": ["s3:List*", "s3:GetObject"],
                        "Resource": "*",
                    }
                ],
            }
        ),
    )
    aws = tmp_path / "home" / ".aws"
    aws.mkdir(parents=True)
    (aws / "credentials").write_text(
        "".join(
            f"[{u}]\naws_access_key_id = {k['AccessKeyId']}\n"
            f"aws_secret_access_key = {k['SecretAccessKey']}\n\n"
            for u, k in keys.items()
        )
    )
    url = f"s3://{BUCKET}/docs"
    with s3.authenticating():
        # the key in the environment is not one the server knows
        r = run_ok("store", "s3", url, "--endpoint-url", s3.url)
        assert r.code == 2 and "refused the AWS credentials" in _error(r)
        r = run_ok("store", "s3", url, "--endpoint-url", s3.url, "--profile", "nobody")
        assert r.code == 2 and f"access denied to {url}" in _error(r)
        assert load_mapping(Folder(kf)) == {}
        r = run_ok("store", "s3", url, "--endpoint-url", s3.url, "--profile", "reader", "--json")
        assert r.code == 0, r.err
        assert len(r.json()["added"]) == 3
        docs = _by_key(kf)
        assert docs["docs/harbour.md"]["fetch"]["profile"] == "reader"
        # a refresh signs with the profile the documents were stored with
        r = run_ok("refresh", "--all", "--json")
        assert r.code == 0, r.err
        assert len(r.json()["unchanged"]) == 3


@pytest.mark.server
def test_routed_through_a_server_with_the_caller_s_credentials(
    kf: Path, s3: S3Server, tmp_path: Path
) -> None:
    """`ok store s3` run by `ok serve` uses the caller's AWS variables, not the server's; the
    server's HTTP refresh uses its own."""
    from helpers.serve import Server

    caller = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    server_env = {"AWS_ACCESS_KEY_ID": "server-own-key", "AWS_SECRET_ACCESS_KEY": "x"}
    srv = Server(kf, env=server_env)
    try:
        url = f"s3://{BUCKET}/docs/harbour.md"
        r = run_cli("store", "s3", url, "--endpoint-url", s3.url, "--json", env=caller)
        assert r.code == 0, r.err  # the server holds the writer lock: this ran there
        [added] = r.json()["added"]
        bare = {k: "" for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        r = run_cli("store", "s3", url, "--endpoint-url", s3.url, env={**caller, **bare})
        assert r.code == 2 and "no AWS credentials found" in _error(r)
        s3.client().put_object(Bucket=BUCKET, Key="docs/harbour.md", Body=b"# New berths\n")
        resp = srv.http.post(f"/v1/{srv.stack}/refresh", json={"all": True})
        assert resp.status_code == 200, resp.text
        assert [c["id"] for c in resp.json()["changed"]] == [added["id"]]
    finally:
        srv.stop()


def test_keys_of_any_shape_stay_under_store_sources(kf: Path, s3: S3Server) -> None:
    c = s3.client()
    hostile = {
        "odd/../../../escape.md": "# Escape\n\nDot segments go nowhere.\n",
        "odd/.hidden.md": "# Hidden\n\nA dotted name.\n",
        "odd/back\\slash.md": "# Slash\n\nA backslash in a key.\n",
        "odd/Ünïcode name.md": "# Unicode\n\nSpaces and accents.\n",
        "odd//double.md": "# Double\n\nAn empty segment.\n",
        "odd/" + "l" * 300 + ".md": "# Long\n\nA very long key.\n",
        "odd/" + "é" * 200 + ".md": "# Wide\n\nA long key of two-byte letters.\n",
    }
    for key, body in hostile.items():
        c.put_object(Bucket=BUCKET, Key=key, Body=body.encode())
    r = run_ok("store", "s3", f"s3://{BUCKET}/odd", "--endpoint-url", s3.url, "--json")
    assert r.code == 0, r.err
    assert len(r.json()["added"]) == len(hostile)
    top = (kf / "store").resolve()
    for e in load_mapping(Folder(kf)).values():
        assert (kf / e["path"]).resolve().is_relative_to(top / "normalized" / "s3")
    for f in (kf / "store/sources").rglob("*"):
        assert f.resolve().is_relative_to(top / "sources" / "s3")
        assert len(f.name.encode()) < 255
    got = {e["source"]["s3"] for e in load_mapping(Folder(kf)).values()}
    assert got == {f"s3://{BUCKET}/{k}" for k in hostile}


def test_a_due_refresh_and_an_object_that_cannot_be_read(kf: Path, s3: S3Server) -> None:
    r = run_ok("store", "s3", f"s3://{BUCKET}/docs", "--endpoint-url", s3.url, "--cron", "@hourly")
    assert r.code == 0, r.err
    assert run_ok("refresh", "--due", "--json").json()["due"] == []  # not due yet
    docs = _by_key(kf)
    assert {e["refresh"]["cron"] for e in docs.values()} == {"@hourly"}
    r = run_ok("store", "policy", docs["docs/tides.txt"]["id"], "--refresh", "1h", "--json")
    assert r.code == 0, r.err
    # a document that cannot be refreshed (its store is unreachable) fails and waits
    down = f"http://127.0.0.1:{free_port()}"
    r = run_ok("store", "s3", f"s3://{BUCKET}/docs2", "--endpoint-url", s3.url, "--json")
    assert r.code == 0, r.err
    [other] = r.json()["added"]
    r = run_ok("refresh", other["id"], "--json")
    assert r.code == 0 and r.json()["unchanged"] == [other["id"]]
    s3.client().put_object(Bucket=BUCKET, Key="docs2/other.md", Body=b"# Other\n\nNew.\n")
    entries = load_mapping(Folder(kf))
    entries[other["id"]]["source"]["endpoint"] = down
    from openkl.files.mapping import save

    save(Folder(kf), entries)
    r = run_ok("refresh", other["id"], "--json")
    assert r.code != 0
    [failed] = r.json()["failed"]
    assert failed["id"] == other["id"] and f"cannot reach {down}" in failed["error"]
    assert load_mapping(Folder(kf))[other["id"]]["refresh_error"]["failures"] == 1
