"""The OpenKL RFC's own examples (tests/data/rfc-0000-openkl-design.txt) run as written.

Every `ok …` line of the RFC is read out of it: the command lines of its examples run, in
the RFC's order, through a shell, on a real folder holding documents and notes about what
the RFC searches for; the commands its lists only name (`ok mem add/search/update/delete`)
must exist. Its placeholders (`<chunk_id>`, `m-20250919-abc123`, example.com, github.com)
become ids of the folder and local stand-ins for the network. A command may also answer
with one line naming the one that does it: a Cypher table spelt in the RFC's style
(`HasTopic`) is answered with "did you mean `HAS_TOPIC`?", and that query, so corrected,
gets past it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers.docgen import make_pptx, make_xlsx
from helpers.localsite import ArxivFeed, Paper, Site, make_pdf, make_repo, serve
from helpers.run import OK_BIN, run_ok

RFC = Path(__file__).resolve().parent / "data" / "rfc-0000-openkl-design.txt"
TABLE = re.compile(r"did you mean `(\w+)`\?")


def rfc_commands(text: str) -> tuple[list[str], list[list[str]]]:
    """The RFC's command lines (continuations joined), and the commands its lists name."""
    joined = re.sub(r"\\\n\s*", "", text)
    lines, names = [], []
    for raw in joined.splitlines():
        line = raw.strip().lstrip("•").strip()
        if not line.startswith("ok "):
            continue
        if "→" in line or line.endswith(")") and "(" in line and "cypher" in line.split()[:3]:
            line = re.split(r"\s+(?:→|\()", line)[0]  # a list item: the command, its gloss cut
            if '"' not in line and "<" not in line:
                names += _named(line)
                continue
        if "," in line and all(p.strip().startswith("ok ") for p in line.split(",")):
            names += [p.strip().split()[1:] for p in line.split(",")]
            continue
        if len(line.split()) <= 2 or re.fullmatch(r"ok \w+ [\w-]+[|/][\w|/-]+", line):
            names += _named(line)
            continue
        lines.append(line)
    return lines, names


def _named(line: str) -> list[list[str]]:
    """`ok mem add/search` and `ok cite make|verify`: each command they name."""
    words = line.split()[1:]
    if len(words) == 1:
        return [words]
    return [[words[0], sub] for sub in re.split(r"[/|]", words[1])]


def test_the_rfc_is_read() -> None:
    lines, names = rfc_commands(RFC.read_text())
    assert len(lines) >= 30 and ["store", "search"] in names and ["cite", "list"] in names
    assert any("--retention-class durable" in x for x in lines)
    assert any("--recursive --max-depth 3" in x for x in lines)


TRANSFORMER = "\n".join(
    [
        "# The Transformer architecture",
        "",
        "The transformer architecture replaces recurrence with self-attention, so every",
        "position of a sequence attends to every other position in parallel.",
        "",
    ]
    + [
        f"Layer {i}: multi-head attention and a feed-forward network, each with a residual "
        "connection and layer normalization."
        for i in range(1, 140)
    ]
)
PATTERNS = """# Distributed systems patterns

Patterns for reliability in distributed systems: retries with jitter, circuit breakers,
bulkheads and idempotent operations. A retry storm happens when every client retries at
once; jitter spreads the retries out. Circuit breakers stop calls to a failing service.
"""
ATTENTION = """# Attention mechanisms in NLP

Attention lets a model weigh the parts of its input. Self-attention relates positions of
one sequence, and scaled dot-product attention is the core of the transformer.
"""


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A working directory as the RFC's reader has one, a folder with documents and a
    note, a local web site, arXiv API and git repositories for the network."""
    work = tmp_path / "work"
    papers = work / "docs" / "whitepapers"
    papers.mkdir(parents=True)
    (papers / "transformer-architecture.md").write_text(TRANSFORMER + "\n")
    (papers / "distributed-patterns.md").write_text(PATTERNS)
    (papers / "attention.md").write_text(ATTENTION)
    (work / "document.pdf").write_bytes(make_pdf(["Positional encodings give word order."]))
    (work / "presentation.pptx").write_bytes(make_pptx(["Encoder and decoder stacks"]))
    (work / "spreadsheet.xlsx").write_bytes(make_xlsx([["model", "heads"], ["base", "8"]]))
    repo = make_repo(
        tmp_path / "repo",
        {
            "model.py": "class Transformer: ...\n",
            "app.js": "export const heads = 8;\n",
            "README.md": "# A transformer in a few files\n",
        },
    )
    root = tmp_path / "kb"
    monkeypatch.setenv("OK_ROOT", str(root))
    assert run_ok("init", str(root)).code == 0
    assert run_ok("store", "ingest", str(papers)).code == 0
    r = run_ok(
        "mem",
        "add",
        "Positional encodings tell a transformer the order of words.",
        "--topics",
        "nlp",
    )
    assert r.code == 0, r.err
    with serve(Site()) as site:
        site.html(
            "/article", "Article", "<p>Transformers scale with data.</p>", '<a href="/more">m</a>'
        )
        site.html("/more", "More", "<p>Attention heads specialise.</p>")
        site.html(
            "/",
            "Docs",
            "<p>Documentation of the transformer library.</p>",
            '<a href="/article">a</a>',
        )
        feed = ArxivFeed(site)
        feed.publish(
            Paper(
                "1706.03762",
                7,
                "Attention Is All You Need",
                ["Ashish Vaswani"],
                "The Transformer, based solely on attention mechanisms.",
                ["Attention Is All You Need", "The Transformer relies entirely on attention."],
            )
        )
        monkeypatch.setenv("OK_ARXIV_API_URL", site.url("/api/query?{}"))
        monkeypatch.setenv("OK_ARXIV_DELAY", "0")
        monkeypatch.setenv("OK_ARXIV_RETRIES", "0")
        yield {"work": work, "root": root, "site": site, "repo": repo}


def _shell(line: str, work: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(OK_BIN).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=600
    )


def _placeholders(line: str, w: dict, ids: dict[str, str]) -> str:  # type: ignore[type-arg]
    swaps = {
        "<chunk_id>": ids["chunk"],
        "<citation_ids>": ids.get("cite", ""),
        "<id|uri>": ids.get("cite", ""),
        "<id>": ids.get("cite", ""),
        "<path>": "store/normalized/whitepapers/transformer-architecture.ok.md",
        'ok search "query"': 'ok search "transformer architecture"',
        "m-20250919-abc123": ids.get("note", "m-20250919-abc123"),
        "https://example.com/article": w["site"].url("/article"),
        "https://docs.example.com": w["site"].url("/"),
        "https://github.com/user/repo": w["repo"].as_uri(),
        "/local/path/to/repo": str(w["repo"]),
    }
    for k, v in swaps.items():
        line = line.replace(k, v)
    return line


def test_every_rfc_command_runs_as_written(world: dict) -> None:  # type: ignore[type-arg]
    lines, names = rfc_commands(RFC.read_text())
    for words in names:
        r = run_ok(*words, "--help")
        assert r.code == 0, (words, r.err)
    hits = run_ok("search", "transformer architecture", "--json").json()
    ids = {"chunk": next(h["id"] for h in hits if h["type"] == "chunk")}
    ran = []
    for raw in lines:
        line = _placeholders(raw, world, ids)
        r = _shell(line, world["work"])
        ran.append(raw)
        if r.returncode != 0:
            _answered_with_the_command_that_does_it(raw, line, r, world["work"])
        if r.returncode == 0 and (raw.startswith("ok cite make") or "xargs" in raw):
            ids["cite"] = r.stdout.split("\t", 1)[0]  # the first citation made
        if raw.startswith("ok mem add"):
            ids["note"] = r.stdout.strip()
    assert len(ran) == len(lines)
    # what they did is there: the durable citations, the arXiv paper, the Office files
    cites = run_ok("cite", "list", "--json").json()
    assert any(c.get("retention_class") == "keep" and "transformer" in c["tags"] for c in cites)
    docs = {d["path"] for d in run_ok("store", "list", "--json").json()}
    for part in ("1706.03762", "document.pdf", "presentation.pptx", "spreadsheet.xlsx", "model.py"):
        assert any(part in p for p in docs), (part, sorted(docs))
    gone = run_ok("mem", "show", ids["note"])
    assert gone.code == 2 and "archived" in gone.err  # `ok mem delete` archived it


def _answered_with_the_command_that_does_it(
    raw: str, line: str, r: subprocess.CompletedProcess[str], work: Path
) -> None:
    """A command that does not run answers in one line naming what does; for a Cypher
    table in the RFC's spelling, the query with the name it suggests gets past it."""
    err = r.stderr.strip()
    assert r.returncode == 2 and err.count("\n") == 0 and err.startswith("Error: "), (raw, err)
    m = TABLE.search(err)
    assert m and "graph cypher" in raw, (raw, err)
    wrong = re.search(r"no table (\w+)", err)
    assert wrong, err
    fixed = re.sub(rf"\[:{wrong.group(1)}\b", f"[:{m.group(1)}", line)
    again = _shell(fixed, work)
    assert again.returncode == 0 or f"no table {wrong.group(1)}" not in again.stderr, (
        fixed,
        again.stderr,
    )


def test_durable_is_kept_and_tags_keep_a_citation(world: dict) -> None:  # type: ignore[type-arg]
    hit = run_ok("search", "retry storms", "--json", "-k", "1").json()[0]
    r = run_ok("cite", "make", hit["id"], "--retention-class", "durable", "--json")
    assert r.code == 0, r.err
    [c] = r.json()
    assert c["retention_class"] == "keep"
    assert (world["root"] / "citations" / f"{c['id']}.json").is_file()
    r = run_ok("cite", "make", hit["id"], "--retention-class", "forever")
    assert r.code == 2 and "durable is keep" in r.err
    saved = json.loads((world["root"] / "citations" / f"{c['id']}.json").read_text())
    assert saved["retention_class"] == "keep"
