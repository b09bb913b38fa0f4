"""Every command follows the exit-code table of docs/commands.md (rg's): 0 success, 1
nothing found or a check that says no, 2 an error (usage errors too), 3 partly done. Each
command has its cases here, and a command without any fails the last test."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import typer
from helpers.localsite import Page, Site, make_pdf, make_repo, serve
from helpers.run import run_ok
from helpers.s3server import KEY_ID, SECRET, S3Server

from openkl.cli.root import app
from openkl.cli.vocabulary import EXIT_CODES

OK, NONE, ERROR, PARTIAL = 0, 1, 2, 3


@dataclass
class Ctx:
    """A copy of the example folder, the ids in it, and what a case made before it."""

    root: Path
    tmp: Path
    site: Site
    values: dict[str, str] = field(default_factory=dict)

    def ok(self, *args: str, input: str | None = None) -> Any:
        r = run_ok(*args, input=input)
        assert r.code == 0, (args, r.err)
        return r

    def __getitem__(self, key: str) -> str:
        return self.values[key]


# a case: (arguments, the exit code, stdin); `{key}` in an argument is a value of the Ctx.
# A function between cases changes the world (a web page breaks).
Setup = Callable[[Ctx], None]
Case = tuple[tuple[str, ...], int] | tuple[tuple[str, ...], int, str] | Setup


def _ids(c: Ctx) -> None:
    docs = c.ok("store", "list", "--json").json()
    c.values["doc"] = next(d["id"] for d in docs if "crispr" in d["path"])
    c.values["note"] = c.ok("mem", "list", "--json").json()[0]["id"]
    hit = c.ok("search", "gene editing", "--json", "-k", "1").json()[0]
    c.values["hit"] = hit["id"]
    c.values["cite"] = c.ok("cite", "make", hit["id"], "--persist", "--json").json()[0]["id"]


def _dir_with_a_bin(c: Ctx) -> None:
    d = c.tmp / "mixed"
    d.mkdir()
    (d / "tides.md").write_text("# Tides\n\nSpring tides follow the new moon.\n")
    (d / "blob.bin").write_bytes(bytes(range(256)) * 8)
    bad = c.tmp / "broken"
    bad.mkdir()
    (bad / "fog.md").write_text("# Fog\n\nFoghorns sound every thirty seconds.\n")
    (bad / "report.pdf").write_bytes(b"%PDF-1.4 this is not a PDF at all")


def _web(c: Ctx) -> None:
    c.site.html("/guide", "Harbour guide", "<p>Pilots board at the red buoy.</p>", nav="")
    c.site.html(
        "/start",
        "Start",
        "<p>Lighthouses guide ships past the reef.</p>",
        nav='<a href="/guide">guide</a> <a href="/missing">missing</a>',
    )
    c.site.pages["/paper.pdf"] = Page(make_pdf(["Buoys mark the channel."]), "application/pdf")
    c.values["site"] = c.site.base


def _repo(c: Ctx) -> None:
    make_repo(c.tmp / "repo", {"README.md": "# Tugs\n\nTugs push tankers off the quay.\n"})


def _trigger(c: Ctx) -> None:
    c.ok("trigger", "add", "tides", "-e", "tides and the moon", "--exec", "cat >/dev/null")


def _deleted(c: Ctx) -> None:
    _ids(c)
    c.ok("mem", "delete", c["note"])


def _changed(c: Ctx) -> None:
    _ids(c)
    p = c.root / "store/normalized/docs/crispr-gene-editing.ok.md"
    p.write_text("Nothing of what was cited is left here.\n")


def _export(c: Ctx) -> None:
    c.ok("graph", "export", "-o", str(c.tmp / "kb.aks.json"))
    (c.tmp / "bad.json").write_text('{"not": "a bundle"}')


def _backfeed(c: Ctx) -> None:
    proposal = {"entities": [{"name": "Tide table", "type": "Concept"}]}
    r = c.ok("backfeed", "flag", "--json", input=json.dumps(proposal))
    c.values["item"] = r.json()["id"]


def _key(c: Ctx) -> None:
    r = c.ok("serve", "keys", "add", "laptop", "--json")
    c.values["key"] = r.json()["id"]


PROPOSAL = json.dumps({"entities": [{"name": "Tide table", "type": "Concept"}]})

CASES: dict[str, tuple[Setup | None, list[Case]]] = {
    "init": (None, [(("init", "{tmp}/new"), OK), (("init", "{root}/.ok/config.yml"), ERROR)]),
    "index": (None, [(("index",), OK), (("index", "--backend", "mysql://x"), ERROR)]),
    "sync": (None, [(("sync",), OK), (("sync", "--watch", "--backend", "postgresql://x"), ERROR)]),
    "status": (None, [(("status",), OK), (("--root", "{tmp}/nowhere", "status"), ERROR)]),
    "doctor": (None, [(("doctor",), OK), (("--root", "{tmp}/nowhere", "doctor"), NONE)]),
    "search": (
        None,
        [
            (("search", "gene editing"), OK),
            (("search", "qwzx vbnm plokij"), NONE),
            (("search", "gene editing", "--until", "2000-01-01"), NONE),
            (("search", "gene editing", "--mode", "magic"), ERROR),
        ],
    ),
    "open": (
        None,
        [
            (("open", "{root}/store/normalized/docs/write-ahead-logging.ok.md:1-2"), OK),
            (("open", "{root}/nothing-here.md:1"), ERROR),
        ],
    ),
    "grep": (
        None,
        [(("grep", "Lovelace"), OK), (("grep", "qwzxvbnm"), NONE), (("grep", "("), ERROR)],
    ),
    "refresh": (
        _web,
        [
            (("refresh",), OK),
            (("store", "web", "{site}/guide", "--refresh", "1d"), OK),
            (("store", "web", "{site}/paper.pdf", "--refresh", "1d"), OK),
            (("refresh", "--all"), OK),
            lambda c: c.site.pages.update({"/guide": Page(b"down", status=500)}),
            (("refresh", "--all"), PARTIAL),  # the paper was refreshed, the guide failed
            lambda c: c.site.pages.update({"/paper.pdf": Page(b"down", status=500)}),
            (("refresh", "{site}/guide", "{site}/paper.pdf"), ERROR),  # none of them
            (("refresh", "no-such-doc"), ERROR),
        ],
    ),
    "events": (None, [(("events",), OK), (("events", "--since", "someday"), ERROR)]),
    "ask": (
        None,
        [
            (("ask", "what is write-ahead logging?", "--no-llm"), OK),
            (("ask", "qwzx vbnm plokij?", "--no-llm"), NONE),
            (("ask", "   "), ERROR),
        ],
    ),
    "mcp": (None, [(("mcp", "--list-tools"), OK), (("mcp", "--no-such-flag"), ERROR)]),
    "context": (
        None,
        [
            (("context", "Ada Lovelace and the Analytical Engine"), OK),
            (("context", "qwzx vbnm plokij"), NONE),
            (("context", "x", "--max-entities", "many"), ERROR),
        ],
    ),
    "completion": (None, [(("completion", "bash"), OK), (("completion", "tcsh"), ERROR)]),
    "mem add": (
        None,
        [(("mem", "add", "Buoys mark the channel."), OK), (("mem", "add", " "), ERROR)],
    ),
    "mem list": (
        None,
        [(("mem", "list"), OK), (("mem", "list", "--until", "2000-01-01"), OK)]
        + [(("mem", "list", "--since", "someday"), ERROR)]
        + [(("mem", "list", "--where", "kind=x"), OK), (("mem", "list", "--where", "=x"), ERROR)],
    ),
    "mem show": (_ids, [(("mem", "show", "{note}"), OK), (("mem", "show", "m-nope"), ERROR)]),
    "mem search": (
        None,
        [
            (("mem", "search", "one writer at a time"), OK),
            (("mem", "search", "qwzx vbnm plokij"), NONE),
            (("mem", "search", "x", "-k", "0"), ERROR),
        ],
    ),
    "mem update": (
        _ids,
        [(("mem", "update", "{note}", "--tags", "x"), OK), (("mem", "update", "{note}"), ERROR)],
    ),
    "mem edit": (_ids, [(("mem", "edit", "{note}"), OK), (("mem", "edit", "m-nope"), ERROR)]),
    "mem delete": (
        _ids,
        [(("mem", "delete", "m-2"), ERROR), (("mem", "delete", "{note}"), OK)]
        + [(("mem", "delete", "m-nope"), ERROR)],
    ),
    "mem topics": (None, [(("mem", "topics"), OK), (("mem", "topics", "extra"), ERROR)]),
    "mem dedupe": (None, [(("mem", "dedupe"), OK), (("mem", "dedupe", "extra"), ERROR)]),
    "mem gc": (None, [(("mem", "gc", "-n"), OK), (("mem", "gc", "extra"), ERROR)]),
    "mem restore": (
        _deleted,
        [(("mem", "restore", "{note}"), OK), (("mem", "restore", "m-nope"), ERROR)],
    ),
    "mem conflicts": (
        None,
        [(("mem", "conflicts"), OK), (("mem", "conflicts", "--in", "everything"), ERROR)],
    ),
    "store ingest": (
        _dir_with_a_bin,
        [
            (("store", "ingest", "{tmp}/mixed"), OK),  # the .bin is passed over
            (("store", "ingest", "{tmp}/broken"), PARTIAL),  # the .pdf does not read
            (("store", "ingest", "{tmp}/nowhere"), ERROR),
            (("store", "ingest", "{tmp}/mixed/tides.md", "{tmp}/gone.md"), PARTIAL),
        ],
    ),
    "store list": (None, [(("store", "list"), OK), (("store", "list", "--format", "xml"), ERROR)]),
    "store search": (
        None,
        [
            (("store", "search", "gene editing"), OK),
            (("store", "search", "qwzx vbnm plokij"), NONE),
            (("store", "search", "x", "--mode", "magic"), ERROR),
        ],
    ),
    "store show": (_ids, [(("store", "show", "{doc}"), OK), (("store", "show", "nope"), ERROR)]),
    "store remove": (
        _ids,
        [(("store", "remove", "{doc}"), OK), (("store", "remove", "{doc}"), ERROR)],
    ),
    "store web": (
        _web,
        [
            (("store", "web", "{site}/guide"), OK),
            (("store", "web", "{site}/start", "--depth", "1"), PARTIAL),  # /missing is a 404
            (("store", "web", "{site}/missing"), ERROR),
        ],
    ),
    "store s3": (
        None,
        [
            (("store", "s3", "s3://handbook/docs/", "--endpoint-url", "{s3}"), OK),
            (("store", "s3", "s3://handbook/nothing-here/", "--endpoint-url", "{s3}"), ERROR),
            (("store", "s3", "https://handbook/docs/"), ERROR),
        ],
    ),
    "store arxiv": (None, [(("store", "arxiv", "not-an-id"), ERROR)]),
    "store repo": (
        _repo,
        [(("store", "repo", "{tmp}/repo"), OK), (("store", "repo", "{tmp}/nowhere"), ERROR)],
    ),
    "store history": (
        _ids,
        [(("store", "history", "{doc}"), OK), (("store", "history", "nope"), ERROR)],
    ),
    "store policy": (
        _ids,
        [
            (("store", "policy", "{doc}", "--refresh", "1d"), OK),
            (("store", "policy", "{doc}"), ERROR),
        ],
    ),
    "graph cypher": (
        None,
        [
            (("graph", "cypher", "MATCH (d:Doc) RETURN d.title"), OK),
            (("graph", "cypher", "MATCH (d:Doc) WHERE false RETURN d.title"), OK),  # as SQL
            (("graph", "cypher", "MATCH (n:Nothing) RETURN n"), ERROR),
            (("graph", "cypher", "MATCH (d:Doc) DELETE d"), ERROR),
        ],
    ),
    "graph lineage": (
        _ids,
        [(("graph", "lineage", "{note}"), OK), (("graph", "lineage", "nope"), ERROR)],
    ),
    "graph entities": (
        None,
        [(("graph", "entities"), OK), (("graph", "entities", "--min-confidence", "x"), ERROR)],
    ),
    "graph entity": (
        None,
        [(("graph", "entity", "Ada Lovelace"), OK), (("graph", "entity", "Qwzx Vbnm"), ERROR)],
    ),
    "graph traverse": (
        None,
        [(("graph", "traverse", "Ada Lovelace"), OK), (("graph", "traverse", "Qwzx"), ERROR)],
    ),
    "graph page": (
        None,
        [(("graph", "page", "Ada Lovelace"), OK), (("graph", "page", "Qwzx Vbnm"), ERROR)],
    ),
    "graph export": (
        None,
        [
            (("graph", "export", "-o", "{tmp}/kb.aks.json"), OK),
            (("graph", "export", "--format", "xls"), ERROR),
        ],
    ),
    "graph add entity": (
        None,
        [
            (("graph", "add", "entity", "Tide table", "--type", "Concept"), OK),
            (("graph", "add", "entity", "Tide table", "--type", "Gadget"), ERROR),
        ],
    ),
    "graph add relation": (
        None,
        [
            (("graph", "add", "relation", "Ada Lovelace", "knew", "Charles Babbage"), OK),
            (("graph", "add", "relation", "Qwzx Vbnm", "knew", "Ada Lovelace", "--approve"), ERROR),
        ],
    ),
    "trigger add": (
        None,
        [
            (("trigger", "add", "tides", "-e", "tides"), OK),
            (("trigger", "add", "Bad Name", "-e", "x"), ERROR),
        ],
    ),
    "trigger approve": (
        _trigger,
        [(("trigger", "approve", "tides"), OK), (("trigger", "approve", "nope"), ERROR)],
    ),
    "trigger list": (
        _trigger,
        [(("trigger", "list"), OK), (("trigger", "list", "--format", "xml"), ERROR)],
    ),
    "trigger remove": (
        _trigger,
        [(("trigger", "remove", "tides"), OK), (("trigger", "remove", "tides"), ERROR)],
    ),
    "trigger scan": (
        _trigger,
        [(("trigger", "scan"), OK), (("trigger", "scan", "tides"), OK)]
        + [(("trigger", "scan", "nope"), ERROR)],
    ),
    "trigger test": (
        _trigger,
        [(("trigger", "test", "the moon pulls the tides"), OK), (("trigger", "test"), ERROR)],
    ),
    "distill prompts": (
        None,
        [(("distill", "prompts"), OK), (("distill", "prompts", "extra"), ERROR)],
    ),
    "distill get-prompt": (
        None,
        [
            (("distill", "get-prompt", "extract-facts"), OK),
            (("distill", "get-prompt", "nope"), ERROR),
        ],
    ),
    "distill create": (
        _ids,
        [
            (("distill", "create", "Gene editing cuts DNA [1].", "{hit}"), OK),
            (("distill", "create", "Nothing [1].", "nope#char0-5"), ERROR),
        ],
    ),
    "distill run": (None, [(("distill", "run", "extract-facts", "-q", "gene editing"), ERROR)]),
    "cite make": (_ids, [(("cite", "make", "{hit}"), OK), (("cite", "make", "nope"), ERROR)]),
    "cite verify": (
        _changed,
        [
            (("cite", "verify", "{cite}"), NONE),  # its passage was rewritten
            (("cite", "verify", "nope"), ERROR),
            (("cite", "verify"), ERROR),
        ],
    ),
    "cite open": (
        _ids,
        [(("cite", "open", "{cite}"), OK), (("cite", "open", "c-0000000000000000"), ERROR)],
    ),
    "cite list": (_ids, [(("cite", "list"), OK), (("cite", "list", "--status", "odd"), ERROR)]),
    "cite gc": (None, [(("cite", "gc", "-n"), OK), (("cite", "gc", "extra"), ERROR)]),
    "bundle import": (
        _export,
        [
            (("bundle", "import", "{tmp}/kb.aks.json"), OK),
            (("bundle", "import", "{tmp}/bad.json"), ERROR),
        ],
    ),
    "bundle validate": (
        _export,
        [
            (("bundle", "validate", "{tmp}/kb.aks.json"), OK),
            (("bundle", "validate", "{tmp}/bad.json"), ERROR),
        ],
    ),
    "backfeed flag": (
        None,
        [(("backfeed", "flag"), OK, PROPOSAL), (("backfeed", "flag"), ERROR, "not json")],
    ),
    "backfeed queue": (
        _backfeed,
        [(("backfeed", "queue"), OK), (("backfeed", "queue", "--status", "odd"), ERROR)],
    ),
    "backfeed show": (
        _backfeed,
        [(("backfeed", "show", "{item}"), OK), (("backfeed", "show", "nope"), ERROR)],
    ),
    "backfeed approve": (
        _backfeed,
        [(("backfeed", "approve", "{item}"), OK), (("backfeed", "approve", "nope"), ERROR)],
    ),
    "backfeed reject": (
        _backfeed,
        [
            (("backfeed", "reject", "{item}", "--reason", "no"), OK),
            (("backfeed", "reject", "{item}"), ERROR),
        ],
    ),
    "config list": (None, [(("config", "list"), OK), (("config", "list", "extra"), ERROR)]),
    "config get": (
        None,
        [(("config", "get", "search.k"), OK), (("config", "get", "search.kk"), ERROR)],
    ),
    "config set": (
        None,
        [(("config", "set", "search.k", "5"), OK), (("config", "set", "search.k", "five"), ERROR)],
    ),
    "config unset": (None, [(("config", "unset", "search.k"), OK), (("config", "unset"), ERROR)]),
    "serve keys add": (
        None,
        [
            (("serve", "keys", "add", "ci"), OK),
            (("serve", "keys", "add", "ci", "--scope", "god"), ERROR),
        ],
    ),
    "serve keys list": (
        _key,
        [(("serve", "keys", "list"), OK), (("serve", "keys", "list", "x"), ERROR)],
    ),
    "serve keys revoke": (
        _key,
        [(("serve", "keys", "revoke", "{key}"), OK), (("serve", "keys", "revoke", "nope"), ERROR)],
    ),
    "serve": (None, [(("serve", "--help"), OK), (("serve", "--port", "99999"), ERROR)]),
    "daemon start": (
        None,
        [
            (("daemon", "start", "--now"), ERROR),
            (("daemon", "start"), OK),
            (("daemon", "stop"), OK),
        ],
    ),
    "daemon stop": (None, [(("daemon", "stop"), NONE), (("daemon", "stop", "all"), ERROR)]),
    "daemon status": (None, [(("daemon", "status"), OK), (("daemon", "status", "all"), ERROR)]),
}


@pytest.fixture
def site() -> Iterator[Site]:
    with serve(Site()) as s:
        yield s


def _fill(arg: str, c: Ctx) -> str:
    return arg.format(tmp=c.tmp, root=c.root, **c.values)


@pytest.fixture
def s3_bucket(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A local S3 server with a `handbook` bucket holding one note, and its credentials."""
    srv = S3Server()
    try:
        for k in [k for k in os.environ if k.startswith("AWS_")]:
            monkeypatch.delenv(k)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        s3 = srv.client()
        s3.create_bucket(Bucket="handbook")
        s3.put_object(Bucket="handbook", Key="docs/tides.md", Body=b"# Tides\n\nHigh water.\n")
        yield srv.url
    finally:
        srv.stop()


@pytest.mark.parametrize("name", sorted(CASES))
def test_exit_codes(
    name: str,
    example_kf: Path,
    tmp_path: Path,
    site: Site,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.setenv("EDITOR", "true")
    monkeypatch.setenv("VISUAL", "true")
    c = Ctx(example_kf, tmp_path, site)
    if name == "store s3":  # the only command that needs an S3 server
        c.values["s3"] = request.getfixturevalue("s3_bucket")
    setup, cases = CASES[name]
    if setup is not None:
        setup(c)
    for case in cases:
        if callable(case):
            case(c)
            continue
        args, code = case[0], case[1]
        stdin = case[2] if len(case) > 2 else None  # type: ignore[misc]
        r = run_ok(*(_fill(a, c) for a in args), input=stdin)
        assert r.code == code, f"ok {' '.join(args)}: exit {r.code}, not {code}\n{r.err}"
        if code == ERROR:  # one line, naming the problem (click's usage text aside)
            assert "Error" in r.err, r.err


def _leaves() -> list[str]:
    root = typer.main.get_command(app)
    out: list[str] = []

    def walk(cmd: Any, path: list[str]) -> None:
        ctx = cmd.context_class(cmd, info_name=" ".join(path) or "ok")
        names = cmd.list_commands(ctx) if hasattr(cmd, "list_commands") else []
        for n in names:
            walk(cmd.get_command(ctx, n), [*path, n])
        if path and (not names or path == ["serve"]):
            out.append(" ".join(path))

    walk(root, [])
    return out


def test_every_command_has_its_cases() -> None:
    assert set(_leaves()) == set(CASES)
    codes = {c.code for c in EXIT_CODES}
    used = {c[1] for _, cases in CASES.values() for c in cases if not callable(c)}
    assert used <= codes and {OK, NONE, ERROR, PARTIAL} <= used


def test_a_routed_command_keeps_the_code(example_kf: Path) -> None:
    """Without the in-process runner: the installed `ok`, its code as the shell sees it."""
    from helpers.run import run_cli

    assert run_cli("search", "qwzx vbnm plokij", "--root", str(example_kf)).code == NONE
    r = run_cli("mem", "show", "m-nope", "--root", str(example_kf))
    assert r.code == ERROR and r.err.startswith("Error: ")
    assert (
        run_cli("--root", str(example_kf), "graph", "cypher", "MATCH (n:Nope) RETURN n").code
        == ERROR
    )
