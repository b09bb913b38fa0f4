"""`ok mcp` driven by the real MCP client over stdio (the server runs as `ok mcp`)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from helpers.mcp import call, fail, serve
from helpers.run import OK_BIN, run_cli, run_ok

from openkl.errors import BadInput
from openkl.files.folder import Folder
from openkl.mcp.tools import limit, safe_path

READ_TOOLS = {
    "list_stacks",
    "search",
    "mem_search",
    "store_search",
    "cite_verify",
    "graph_cypher",
    "entities",
    "traverse",
    "context",
    "ask",
    "fs_list",
    "fs_read",
    "sh_grep",
}
WRITE_TOOLS = {"mem_add", "distill_create", "store_ingest"}


@pytest.mark.server
def test_lists_tools_resources_and_prompts(example_kf: Path) -> None:
    async def go(c: Any) -> None:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for name in READ_TOOLS:
            a = tools[name].annotations
            assert a.read_only_hint is True and a.destructive_hint is False, name
            assert tools[name].description
        for name in WRITE_TOOLS:
            assert tools[name].annotations.read_only_hint is False
            assert tools[name].annotations.destructive_hint is False
        schema = tools["search"].input_schema
        assert schema["required"] == ["query"]
        assert {"query", "k", "scope", "stack"} <= set(schema["properties"])
        assert "cite object" in tools["search"].description
        # choices and bounds are in the schemas, so a client can check a call before it is made
        props = {name: t.input_schema["properties"] for name, t in tools.items()}
        for name in ("search", "ask", "sh_grep"):
            assert props[name]["scope"]["enum"] == ["all", "mem", "store"], name
        assert {"hybrid", "vector", "fts"} <= set(json.dumps(props["search"]["mode"]).split('"'))
        for name in ("search", "mem_search", "store_search", "ask", "context"):
            assert '"minimum": 1' in json.dumps(props[name]["k"]), name
        assert (props["traverse"]["depth"]["minimum"], props["traverse"]["depth"]["maximum"]) == (
            0,
            4,
        )
        assert "list_stacks" in json.dumps(props["search"]["stack"])
        for tool, args in (
            ("ask", {"question": "who", "k": 0}),
            ("search", {"query": "x", "scope": "docs"}),
            ("traverse", {"name": "SQLite", "depth": 9}),
            ("fs_read", {"path": "x", "offset": -1}),
        ):
            err = await fail(c, tool, **args)
            assert "validation error" in err, (tool, err)

        templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
        assert {"ok://{stack}/memory/{note_id}", "ok://{stack}/doc/{doc_id}"} <= templates
        note = run_ok("mem", "list", "--json").json()[0]
        res = await c.read_resource(f"ok://kf/memory/{note['id']}")
        assert res.contents[0].text.startswith("---\nid: " + note["id"])
        doc = next(
            d for d in run_ok("store", "list", "--json").json() if "ada-lovelace" in d["path"]
        )
        res = await c.read_resource(f"ok://kf/doc/{doc['id']}")
        assert res.contents[0].text.startswith("# Ada Lovelace")

        prompts = {p.name for p in (await c.list_prompts()).prompts}
        assert prompts == {
            "extract-facts",
            "identify-patterns",
            "summarize-insights",
            "extract-relationships",
            "extract-entities",
            "memory-synthesis",
        }
        got = await c.get_prompt("extract-facts", {"text": "Kùzu is embedded."})
        text = got.messages[0].content.text
        assert "Extract the facts" in text and text.rstrip().endswith("Kùzu is embedded.")

    serve([example_kf], go)


@pytest.mark.server
def test_read_only_server_has_no_write_tools(example_kf: Path) -> None:
    async def go(c: Any) -> set[str]:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["cite_make"].annotations.read_only_hint is True
        hit = (await call(c, "search", query="Babbage", k=1))["results"][0]
        made = (await call(c, "cite_make", refs=[hit["id"]]))["results"][0]
        assert made["id"].startswith("c-")
        err = await fail(c, "cite_make", refs=[hit["id"]], persist=True)
        assert "read-only" in err
        return set(tools)

    names = serve([example_kf], go, "--read-only")
    assert names == READ_TOOLS | {"cite_make"}
    assert not list((example_kf / "citations").glob("*.json"))


@pytest.mark.server
def test_calls_every_tool(example_kf: Path) -> None:
    async def go(c: Any) -> None:
        stacks = (await call(c, "list_stacks"))["results"]
        assert [(s["name"], s["docs"], s["notes"]) for s in stacks] == [("kf", 5, 1)]

        hits = await call(c, "search", query="who wrote the first computer program", k=3)
        assert hits["k"] == 3 and "ada-lovelace" in hits["results"][0]["path"]
        assert {"type", "id", "path", "loc", "quote", "sha256"} <= set(hits["results"][0])

        mem = (await call(c, "mem_search", query="graph per call"))["results"]
        assert mem and all(h["type"] == "memory" for h in mem)
        store = (await call(c, "store_search", query="graph per call", k=2))["results"]
        assert store and all(h["type"] == "chunk" for h in store)

        rows = await call(c, "graph_cypher", query="MATCH (d:Doc) RETURN count(*) AS n")
        assert rows["results"] == [{"n": 5}]
        err = await fail(c, "graph_cypher", query="CREATE (:Topic {id: 'x', name: 'x'})")
        assert "read-only" in err

        ans = await call(c, "ask", question="who wrote the first computer program")
        assert "[1]" in ans["answer"] and ans["citations"][0]["n"] == 1
        assert "ada-lovelace" in ans["citations"][0]["path"]
        ver = await call(c, "cite_verify", items=ans["citations"])
        assert ver["ok"] and {r["status"] for r in ver["results"]} == {"verified"}

        made = (
            await call(c, "cite_make", refs=[hits["results"][0]["id"]], persist=True, tags=["mcp"])
        )["results"][0]
        assert made["id"].startswith("c-") and made["quote"] == hits["results"][0]["quote"]
        assert (example_kf / "citations" / f"{made['id']}.json").is_file()
        span = (
            await call(
                c, "cite_make", refs=["store/normalized/docs/ada-lovelace.html.ok.md"], lines="1-1"
            )
        )["results"][0]
        assert span["quote"] == "# Ada Lovelace and the Analytical Engine"
        ver = await call(c, "cite_verify", items=[made["id"], span])
        assert ver["ok"] and len(ver["results"]) == 2
        assert "outside the knowledge folder" in await fail(c, "cite_make", refs=["/etc/passwd"])

        ents = (await call(c, "entities", type="Person"))["results"]
        names = [e["name"] for e in ents]
        assert "Ada Lovelace" in names and all(e["type"] == "Person" for e in ents)
        one = await call(c, "entities", name="Ada Lovelace")
        assert one["name"] == "Ada Lovelace" and one["relationships"]
        walk = await call(c, "traverse", name="Ada Lovelace", depth=1)
        assert walk["start"]["name"] == "Ada Lovelace"
        assert "Charles Babbage" in [s["entity"] for s in walk["results"]]
        assert "no entity named" in await fail(c, "traverse", name="Nobody Atall")
        ctx = await call(c, "context", query="Who worked with Charles Babbage?")
        assert ctx["confidence"] in ("HIGH", "MEDIUM", "LOW") and ctx["reasoning"]
        assert "Charles Babbage" in [e["name"] for e in ctx["entities"]]
        assert any("ada-lovelace" in s["path"] for s in ctx["sources"])

        ls = (await call(c, "fs_list", path="store/normalized/docs"))["results"]
        assert {e["name"] for e in ls} >= {"ada-lovelace.html.ok.md", "write-ahead-logging.ok.md"}
        doc = await call(c, "fs_read", path="store/normalized/docs/write-ahead-logging.ok.md")
        assert doc["text"].startswith("# Write-ahead logging") and "truncated" not in doc

        g = (await call(c, "sh_grep", pattern="Babbage", scope="store"))["results"]
        assert g and all(m["match"] == "Babbage" for m in g)

        note = await call(c, "mem_add", text="The staging server is called heron.", tags=["infra"])
        assert note["id"].startswith("m-") and (example_kf / note["path"]).is_file()
        found = await call(c, "mem_search", query="what is the staging server called")
        assert found["results"][0]["id"] == note["id"]

        ing = await call(
            c, "store_ingest", text="Quokkas live on Rottnest Island.", name="quokka.md"
        )
        assert len(ing["added"]) == 1
        hits = (await call(c, "store_search", query="where do quokkas live", k=1))["results"]
        assert hits[0]["id"].startswith(ing["added"][0]["id"])
        # ingest of a file already inside the folder; paths outside are refused
        (example_kf / "inbox").mkdir()
        (example_kf / "inbox" / "otters.md").write_text("Sea otters hold hands while asleep.\n")
        ing = await call(c, "store_ingest", paths=["inbox/otters.md"])
        assert ing["added"][0]["path"].endswith("otters.ok.md")
        assert "absolute path" in await fail(c, "store_ingest", paths=["/etc/hostname"])

    serve([example_kf], go)
    log = (example_kf / ".ok" / "ops.log").read_text()
    assert '"op": "mem.add"' in log and '"via": "mcp"' in log


@pytest.mark.server
def test_the_rfc_distill_flow(example_kf: Path) -> None:
    """The RFC's distillation workflow (section 7.2) through MCP: search, cite what matters,
    get a prompt, distill, write the note that cites it, and find it again."""

    def notes() -> list[Path]:
        return sorted((example_kf / "memories").rglob("*.md"))

    async def go(c: Any) -> dict[str, Any]:
        # 1. search the grounding store; 2. cite the findings that matter
        wal = await call(c, "store_search", query="write-ahead logging crash recovery", k=1)
        rrf = await call(c, "store_search", query="reciprocal rank fusion", k=1)
        hits = [wal["results"][0], rrf["results"][0]]
        made = await call(
            c, "cite_make", refs=[h["id"] for h in hits], persist=True, tags=["patterns"]
        )
        cites = made["results"]
        # 3. the distillation prompt, over the cited passages
        material = "\n\n".join(f"[{i}] {x['quote']}" for i, x in enumerate(cites, 1))
        got = await c.get_prompt("identify-patterns", {"text": material})
        prompt = got.messages[0].content.text
        assert prompt.startswith("Identify patterns") and cites[0]["quote"] in prompt
        # 4. the agent distills (its model's reply, written here); refusals write nothing
        before = notes()
        err = await fail(
            c, "distill_create", text="Logs are robust; fused rankings are too.", citations=cites
        )
        assert "no claim carries an [N] marker" in err
        forged = {**hits[1], "quote": "Reciprocal rank fusion was first used on the Moon."}
        err = await fail(
            c, "distill_create", text="Log first [1]; fuse ranks [2].", citations=[cites[0], forged]
        )
        assert "citation [2]" in err and "does not verify" in err
        err = await fail(c, "distill_create", text="Log first [1].", citations=[])
        assert "validation error" in err
        assert notes() == before
        # 5. the memory, from the agent-distilled content
        text = (
            "- **Robustness through simple aggregation**: write-ahead logging recovers by "
            "replaying a log [1], and reciprocal rank fusion combines rankings by summing "
            "reciprocal ranks [2]."
        )
        note = await call(
            c,
            "distill_create",
            text=text,
            citations=[cites[0]["id"], hits[1]],
            tags=["patterns", "reliability"],
        )
        # 6. verify and refine: the note is found, and so are its sources
        found = await call(c, "mem_search", query="robustness through simple aggregation", k=1)
        assert found["results"][0]["id"] == note["id"]
        edges = await call(
            c,
            "graph_cypher",
            query="MATCH (m:MemoryNote {id: $id})-[:DERIVED_FROM]->(x) RETURN x.id AS id",
            params={"id": note["id"]},
        )
        ver = await call(c, "cite_verify", items=[x["id"] for x in note["citations"]])
        assert ver["ok"]
        return {"note": note, "hits": hits, "edges": edges["results"], "cites": cites}

    out = serve([example_kf], go)
    note, hits = out["note"], out["hits"]
    assert note["kind"] == "distilled" and note["tags"] == ["patterns", "reliability"]
    assert [c["n"] for c in note["citations"]] == [1, 2]
    assert [c["quote"] for c in note["citations"]] == [h["quote"] for h in hits]
    assert sorted(e["id"] for e in out["edges"]) == sorted(h["id"] for h in hits)
    # the citations are kept, and the note file says what it derives from
    for c in note["citations"]:
        assert (example_kf / "citations" / f"{c['id']}.json").is_file()
    fm = yaml.safe_load((example_kf / note["path"]).read_text().split("---\n")[1])
    assert fm["derived_from"] == [h["id"] for h in hits]
    assert fm["citations"] == [c["id"] for c in note["citations"]]
    log = (example_kf / ".ok" / "ops.log").read_text()
    assert '"op": "distill.create"' in log and '"via": "mcp"' in log
    # files are the truth: a rebuilt graph has the same edges
    assert run_ok("index", "--rebuild").code == 0
    r = run_ok(
        "graph",
        "cypher",
        "MATCH (m:MemoryNote {id: $id})-[:DERIVED_FROM]->(x) RETURN x.id AS id",
        "-p",
        f"id={note['id']}",
        "--json",
    )
    assert sorted(x["id"] for x in r.json()) == sorted(h["id"] for h in hits)


@pytest.mark.server
def test_cli_writes_while_the_server_runs(example_kf: Path) -> None:
    """The server holds no lock between calls: `ok mem add` and `ok store ingest` work from a
    shell, and the server's next call sees what they wrote."""

    async def go(c: Any) -> None:
        await call(c, "search", query="anything at all")
        t = time.monotonic()
        r = await anyio.to_thread.run_sync(
            lambda: run_cli("mem", "add", "The backup window opens at 02:00 UTC.", "--tags", "ops")
        )
        assert r.code == 0, r.err
        assert time.monotonic() - t < 120  # a lock held by the server fails it in 5 s
        nid = r.out.strip()
        hits = await call(c, "mem_search", query="when does the backup window open")
        assert hits["results"][0]["id"] == nid

        src = example_kf.parent / "walrus.txt"
        src.write_text("Walruses use their tusks to haul out onto ice.\n")
        r = await anyio.to_thread.run_sync(lambda: run_cli("store", "ingest", str(src)))
        assert r.code == 0, r.err
        hits = await call(c, "store_search", query="what do walruses use tusks for", k=1)
        assert "walrus" in hits["results"][0]["path"]

        # calls that arrive together are queued, not interleaved
        ids: list[str] = []

        async def add(i: int) -> None:
            ids.append(
                (await call(c, "mem_add", text=f"Parallel note number {i}.", allow_duplicate=True))[
                    "id"
                ]
            )

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(add, i)
        rows = (
            await call(
                c,
                "graph_cypher",
                query="MATCH (m:MemoryNote) WHERE m.text "
                "STARTS WITH 'Parallel note' RETURN m.id AS id",
            )
        )["results"]
        assert sorted(r["id"] for r in rows) == sorted(ids) and len(set(ids)) == 4

    serve([example_kf], go, env={"OK_ROOT": str(example_kf)})


@pytest.mark.server
def test_files_stay_inside_the_folder(example_kf: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (example_kf / "link-out").symlink_to(outside)
    (example_kf / "secret-link.txt").symlink_to(outside / "secret.txt")
    (example_kf / "inside-link.md").symlink_to(
        example_kf / "store" / "normalized" / "docs" / "crispr-gene-editing.ok.md"
    )

    async def go(c: Any) -> None:
        for p in (
            "../outside/secret.txt",
            "store/../../outside/secret.txt",
            "..",
            "memories/../..",
        ):
            assert "climbs out" in await fail(c, "fs_read", path=p)
        for p in (
            "/etc/passwd",
            str(outside / "secret.txt"),
            str(example_kf / ".gitignore"),
            "~/x",
        ):
            assert "absolute path" in await fail(c, "fs_read", path=p)
        assert "outside the knowledge folder" in await fail(c, "fs_read", path="secret-link.txt")
        assert "outside the knowledge folder" in await fail(c, "fs_list", path="link-out")
        assert "outside the knowledge folder" in await fail(
            c, "fs_read", path="link-out/secret.txt"
        )
        assert "NUL" in await fail(c, "fs_read", path="store/x\x00.md")
        assert "climbs out" in await fail(c, "fs_list", path="../")
        assert "not part of the knowledge" in await fail(c, "fs_read", path=".ok/kuzu/graph.kz")
        # what is inside is fine, including a link that stays inside
        ok = await call(c, "fs_read", path="inside-link.md")
        assert ok["path"].endswith("crispr-gene-editing.ok.md")
        top = {e["name"]: e for e in (await call(c, "fs_list"))["results"]}
        assert top["link-out"]["type"] == "link-outside" and "target" not in top["link-out"]
        assert top["inside-link.md"]["type"] == "link"

    serve([example_kf], go)


@pytest.mark.server
def test_oversized_results_are_truncated_with_a_marker(example_kf: Path) -> None:
    big = example_kf / "memories" / "big.md"
    big.write_text("".join(f"line {i}: lorem ipsum dolor sit amet\n" for i in range(2000)))

    async def go(c: Any) -> None:
        hits = await call(c, "search", query="computer program graph logging", k=10)
        assert hits["truncated"] is True and len(hits["results"]) < 10
        assert hits["marker"].startswith("[truncated: ") and "mcp.max_bytes" in hits["marker"]
        assert len(json.dumps(hits).encode()) <= 4000

        part = await call(c, "fs_read", path="memories/big.md")
        assert part["truncated"] is True and part["text"].startswith("line 0: lorem")
        assert part["text"].rstrip().endswith(f"offset={part['next_offset']} to continue]")
        rest = await call(c, "fs_read", path="memories/big.md", offset=part["next_offset"])
        joined = part["text"][: part["text"].rindex("\n[truncated")] + rest["text"]
        assert joined.startswith(big.read_text()[: len(joined) - 200])

    serve([example_kf], go, env={"OK_MCP_MAX_BYTES": "4000"})


@pytest.mark.server
def test_a_tool_over_its_time_cap_returns_an_error(example_kf: Path) -> None:
    slow = (
        "UNWIND range(1, 2000) AS a UNWIND range(1, 2000) AS b UNWIND range(1, 2000) AS c "
        "RETURN sum(a * b + c) AS s"
    )
    docs = run_ok("store", "list", "--json").json()

    async def go(c: Any) -> None:
        t = time.monotonic()
        err = await fail(c, "graph_cypher", query=slow)
        assert time.monotonic() - t < 30  # stopped at its 1 s cap, not at its end
        assert "exceeded its time cap of 1s" in err
        # the interrupted query released the graph: the server answers the next call, which
        # waits for the folder's graph and reads it. Not a second graph_cypher: its 1 s cap
        # would cover the wait for the first query's interrupt, opening the graph and the
        # query, more than a loaded machine does in 1 s (list_stacks has the default cap)
        [row] = (await call(c, "list_stacks"))["results"]
        assert "error" not in row and row["docs"] == len(docs) > 0, row

    serve([example_kf], go, env={"OK_MCP_TIMEOUTS_GRAPH_CYPHER": "1"})


@pytest.mark.server
def test_search_tools_check_their_arguments(example_kf: Path) -> None:
    """Bad dates are tool errors that say what is accepted; a huge k is clamped to
    mcp.max_k and the result says so; date spans work as in `ok events --since`."""

    async def go(c: Any) -> None:
        for tool in ("search", "mem_search", "store_search"):
            err = await fail(c, tool, query="writer", since="notadate")
            assert "since 'notadate' is neither a date nor a span" in err and "7d" in err, err
            err = await fail(c, tool, query="writer", until="2026-13-45")
            assert "until '2026-13-45' is neither a date nor a span" in err, err
            assert "k" in await fail(c, tool, query="writer", k=0)
            hits = await call(c, tool, query="writer", k=99999999999999999999)
            assert hits["k"] == 50 and hits["results"]
        mem = await call(c, "mem_search", query="writer", since="7d")
        assert mem["results"] and all(h["type"] == "memory" for h in mem["results"])
        assert (await call(c, "store_search", query="writer", until="2000-01-01"))["results"] == []

    serve([example_kf], go)


@pytest.mark.server
def test_several_stacks(example_kf: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    assert run_ok("init", str(other), "--domain", "lab").code == 0
    assert (
        run_ok("--root", str(other), "mem", "add", "The centrifuge in room 4 is broken.").code == 0
    )

    async def go(c: Any) -> None:
        names = [s["name"] for s in (await call(c, "list_stacks"))["results"]]
        assert names == ["kf", "lab"]
        hits = await call(c, "search", query="centrifuge", stack="lab")
        assert hits["stack"] == "lab" and "centrifuge" in hits["results"][0]["quote"]
        hits = await call(c, "search", query="centrifuge")
        assert hits["stack"] == "kf"
        assert "no stack named 'nope'" in await fail(c, "search", query="x", stack="nope")

    serve([example_kf, other], go)


# -- the caps and confinement themselves, without a server ----------------------------------
def test_limit_keeps_valid_json() -> None:
    res = {"results": [{"quote": "x" * 500, "n": i} for i in range(20)]}
    out = limit(res, 3000)
    assert 0 < len(out["results"]) < 20 and out["truncated"] is True
    assert len(json.dumps(out).encode()) <= 3000
    assert limit(res, 10**6) is res
    txt = limit({"path": "a", "text": "é" * 5000}, 2000)
    assert txt["truncated"] and len(json.dumps(txt, ensure_ascii=False).encode()) <= 2000
    two = limit(
        {"entities": [{"d": "e" * 300}] * 10, "sources": [{"q": "s" * 300}] * 30, "reasoning": "r"},
        4000,
    )
    assert two["truncated"] and two["reasoning"] == "r" and len(json.dumps(two)) <= 4000
    assert two["entities"] and len(two["sources"]) < 30 and "sources" in two["marker"]
    other = limit({"blob": "y" * 5000}, 1000)
    assert other["truncated"] and "partial_json" in other


def test_safe_path_rules(kf: Path) -> None:
    f = Folder(kf)
    assert safe_path(f, "memories") == kf / "memories"
    assert safe_path(f, "") == kf
    for bad in ("../x", "/etc", "a/../../b", "x\x00y", "C:/Windows", "\\\\server\\x"):
        with pytest.raises(BadInput):
            safe_path(f, bad)


@pytest.mark.slow
def test_client_leaving_during_warm_up_exits_cleanly(example_kf: Path) -> None:
    """A client may go away while the server still loads the embedding model: the server
    must exit 0, not abort inside onnxruntime's set-up. The window is narrow and depends on
    the machine, so the client leaves at many moments across the warm-up."""
    import subprocess

    init = (
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        )
        + "\n"
    )
    codes = {}
    for i in range(24):
        delay = 0.4 + i * 0.08
        p = subprocess.Popen(
            [OK_BIN, "mcp", "--root", str(example_kf)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert p.stdin is not None and p.stderr is not None
        p.stdin.write(init.encode())
        p.stdin.flush()
        time.sleep(delay)
        p.stdin.close()
        codes[round(delay, 2)] = (p.wait(timeout=60), p.stderr.read().decode()[-200:])
        p.stderr.close()
    assert {d: c for d, c in codes.items() if c[0] != 0} == {}
