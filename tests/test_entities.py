"""The entity graph on real documents: extraction quality, consolidation, traverse, context,
pages, and rebuild determinism."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers.graph import entity_graph
from helpers.run import EXAMPLES, REPO, run_ok

sys.path.insert(0, str(REPO / "tests" / "gold"))


def _entities(*args: str) -> list[dict]:
    r = run_ok("graph", "entities", "--json", *args)
    assert r.code == 0, r.err
    return r.json()


def test_example_entities_are_the_ones_a_reader_would_name(example_ro: Path) -> None:
    ents = {e["name"]: e for e in _entities()}
    for name in (
        "Ada Lovelace",
        "Charles Babbage",
        "Analytical Engine",
        "Write-ahead logging",
        "SQLite",
        "PostgreSQL",
        "Retrieval-augmented generation",
        "BM25",
        "reciprocal rank fusion",
        "Jennifer Doudna",
        "Broad Institute",
        "Cas9",
    ):
        assert name in ents, name
    assert ents["Ada Lovelace"]["type"] == "Person"
    assert ents["Broad Institute"]["type"] == "Organization"
    assert "WAL" in ents["Write-ahead logging"]["aliases"]
    assert "RAG" in ents["Retrieval-augmented generation"]["aliases"]
    # two documents name SQLite: it is one entity with both, and more confident than one source
    assert len(ents["SQLite"]["docs"]) == 2
    assert ents["SQLite"]["confidence"] > 0.75
    assert all(e["confidence"] >= 0.4 for e in ents.values())
    people = _entities("--type", "person")
    assert {e["type"] for e in people} == {"Person"}
    lines = run_ok("graph", "entities", "--name", "sqlite").out.splitlines()
    assert lines[0].split("\t")[1:] == ["Software", "SQLite", "2 docs"]
    line = run_ok("graph", "entities", "--name", "Ada Lovelace", "-n", "1").out.strip()
    assert line.split("\t")[1:] == ["Person", "Ada Lovelace", "1 doc"]


def test_entity_detail_and_unknown_entity(example_kf: Path) -> None:
    r = run_ok("graph", "entity", "wal", "--json")  # by alias, any case
    assert r.code == 0, r.err
    d = r.json()
    assert d["name"] == "Write-ahead logging"
    assert d["sources"] and d["sources"][0]["path"].endswith("write-ahead-logging.ok.md")
    assert d["mentions"] and "log" in d["mentions"][0]["quote"].lower()
    assert any(r["from_name"] == "SQLite" and r["type"] == "uses" for r in d["relationships"])
    r = run_ok("graph", "entity", "Flux Capacitor")
    assert r.code == 2 and "no entity named 'Flux Capacitor'" in r.err


def test_traverse_gives_the_path_of_each_step(example_ro: Path) -> None:
    r = run_ok(
        "graph", "traverse", "Ada Lovelace", "--depth", "2", "--json", "--min-confidence", "0"
    )
    assert r.code == 0, r.err
    d = r.json()
    steps = {s["entity"]: s for s in d["steps"]}
    assert "Charles Babbage" in steps and steps["Charles Babbage"]["depth"] == 1
    for s in d["steps"]:
        assert s["path"][0] == "Ada Lovelace" and s["path"][-1] == s["entity"]
        assert len(s["hops"]) == s["depth"] == len(s["path"]) - 1
    assert max(s["depth"] for s in d["steps"]) == 2
    r = run_ok("graph", "traverse", "Ada Lovelace", "--rel", "works_with", "--json")
    assert {s["via"]["type"] for s in r.json()["steps"]} == {"works_with"}
    r = run_ok("graph", "traverse", "Ada Lovelace", "--depth", "1")
    assert r.code == 0 and "Charles Babbage" in r.out
    # a relationship type is matched the way people type it; an unknown one says which exist
    r = run_ok("graph", "traverse", "Ada Lovelace", "--rel", "Works With", "--json")
    assert [s["entity"] for s in r.json()["steps"]] == ["Charles Babbage"]
    r = run_ok("graph", "traverse", "Ada Lovelace", "--rel", "married_to")
    assert r.code == 2 and "no relationship has type 'married_to'" in r.err
    assert "related_to" in r.err and len(r.err.strip().splitlines()) == 1


def test_context_returns_a_subgraph_with_reasoning(example_kf: Path) -> None:
    r = run_ok("context", "how does write-ahead logging make databases durable", "--json")
    assert r.code == 0, r.err
    d = r.json()
    names = [e["name"] for e in d["entities"]]
    assert "Write-ahead logging" in names[:3]
    assert d["confidence"] in ("HIGH", "MEDIUM", "LOW") and d["confidence"] != "LOW"
    assert d["method"] == "ranked" and d["reasoning"]
    assert d["sources"][0]["path"].endswith("write-ahead-logging.ok.md")
    assert all(r["from_id"] in {e["id"] for e in d["entities"]} for r in d["relationships"])
    r = run_ok("context", "zebra migration patterns", "--json")
    assert r.code == 1 and r.json()["confidence"] == "LOW"  # nothing to go on exits 1


def test_consolidation_follows_removal_and_reingest(example_kf: Path) -> None:
    before = {e["id"]: e for e in _entities("--min-confidence", "0")}
    r = run_ok("store", "remove", "kuzu-embedded-graphs.ok.md")
    assert r.code == 0, r.err
    after = {e["id"]: e for e in _entities("--min-confidence", "0")}
    assert "neo4j" not in after and "cypher" not in after
    # the example note still names Kùzu: the entity stays, with the note as its only source
    assert len(before["kuzu"]["docs"]) == 2 and after["kuzu"]["docs"] == [
        d for d in before["kuzu"]["docs"] if d.startswith("m-")
    ]
    assert (
        len(after["sqlite"]["docs"]) == 1
        and after["sqlite"]["confidence"] < before["sqlite"]["confidence"]
    )
    # no orphans: every entity still has a source, every mention a live chunk
    r = run_ok(
        "graph", "cypher", "MATCH (e:Entity) WHERE size(e.docs) = 0 RETURN count(e) AS n", "--json"
    )
    assert r.json()[0]["n"] == 0
    r = run_ok("store", "ingest", str(EXAMPLES / "kuzu-embedded-graphs.md"))
    assert r.code == 0, r.err
    again = {e["id"]: e for e in _entities("--min-confidence", "0")}
    # the file came back under another path, which a description's (or mention's) citation
    # names
    for e in (*again.values(), *before.values()):
        for field in ("description_cite", "mention_cite"):
            if e[field]:
                e[field].pop("path")
    assert again == before  # no double counts after re-ingest
    r = run_ok("store", "ingest", str(EXAMPLES))  # unchanged content: a no-op
    now = {e["id"]: e for e in _entities("--min-confidence", "0")}
    for e in now.values():
        for field in ("description_cite", "mention_cite"):
            if e[field]:
                e[field].pop("path")
    assert now == before


def test_memory_notes_contribute_and_edits_update(example_kf: Path) -> None:
    r = run_ok(
        "mem", "add", "Grace Hopper wrote the first compiler for the Harvard Mark I.", "--json"
    )
    assert r.code == 0, r.err
    nid = r.json()["id"]
    ents = {e["name"]: e for e in _entities()}
    assert nid in ents["Grace Hopper"]["docs"]
    assert run_ok("mem", "delete", nid).code == 0
    assert "Grace Hopper" not in {e["name"] for e in _entities("--min-confidence", "0")}


def _export(root: Path) -> dict:
    r = run_ok("--root", str(root), "graph", "export", "--format", "aks", "--out", "-")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_rebuild_is_deterministic(example_kf: Path) -> None:
    before = _export(example_kf)
    rows = run_ok(
        "graph",
        "cypher",
        "MATCH (a:Entity)-[r:RELATED]->(b:Entity) RETURN a.id, b.id,"
        " r.type, r.confidence, r.evidence ORDER BY a.id, b.id, r.type",
        "--json",
    ).json()
    r = run_ok("index", "--rebuild")
    assert r.code == 0, r.err
    after = _export(example_kf)
    before.pop("compiled_at"), after.pop("compiled_at")
    assert json.dumps(before, sort_keys=True) == json.dumps(after, sort_keys=True)
    assert (
        rows
        == run_ok(
            "graph",
            "cypher",
            "MATCH (a:Entity)-[r:RELATED]->(b:Entity) RETURN "
            "a.id, b.id, r.type, r.confidence, r.evidence ORDER BY a.id, b.id, "
            "r.type",
            "--json",
        ).json()
    )


def test_page_is_cached_until_its_neighbourhood_changes(example_kf: Path, tmp_path: Path) -> None:
    r = run_ok("graph", "page", "SQLite", "--json")
    assert r.code == 0, r.err
    p1 = r.json()
    assert not p1["cached"] and p1["markdown"].startswith("# SQLite")
    assert "## Relationships" in p1["markdown"] and "## Sources" in p1["markdown"]
    assert "cite: `" in p1["markdown"]
    assert run_ok("graph", "page", "SQLite", "--json").json()["cached"]
    # an unrelated document leaves the page alone
    (tmp_path / "bees.md").write_text("# Honey bees\n\nHoney bees store nectar in combs.\n")
    assert run_ok("store", "ingest", str(tmp_path / "bees.md")).code == 0
    p2 = run_ok("graph", "page", "SQLite", "--json").json()
    assert p2["cached"] and p2["graph_version"] == p1["graph_version"]
    # a new relationship to a neighbour regenerates it
    (tmp_path / "litestream.md").write_text(
        "# Litestream\n\nLitestream uses SQLite and streams its WAL to object storage.\n"
    )
    assert run_ok("store", "ingest", str(tmp_path / "litestream.md")).code == 0
    p3 = run_ok("graph", "page", "SQLite", "--json").json()
    assert not p3["cached"] and p3["graph_version"] != p1["graph_version"]
    assert "Litestream" in p3["markdown"]
    r = run_ok("graph", "page", "--all", "--json")
    assert r.code == 0, r.err
    assert (example_kf / "graph" / "pages" / "sqlite.md").exists()
    assert (example_kf / "graph" / "pages" / "index.md").exists()


@pytest.mark.timeout(900)  # three commands for each of more than fifty entities
def test_page_all_writes_the_pages_one_at_a_time_would(example_kf: Path) -> None:
    """`--all` reads the graph for many pages at once; each page it writes is the page
    `ok graph page` gives for that entity alone, and `--force` rebuilds them all."""
    r = run_ok("graph", "page", "--all", "--min-confidence", "0", "--json")
    assert r.code == 0, r.err
    first = r.json()
    from openkl.knowledge.pages import page_file

    pages = example_kf / "graph" / "pages"
    ents = _entities("--min-confidence", "0")
    assert first["pages"] == len(ents) > 50 and first["regenerated"] == len(ents)
    for e in ents:
        one = run_ok("graph", "page", e["id"], "--json").json()
        assert one["cached"]  # the --all run cached the very page
        assert (pages / page_file(e["id"])).read_text() == one["markdown"], e["id"]
        forced = run_ok("graph", "page", e["id"], "--force", "--json").json()
        assert forced["markdown"] == one["markdown"] and not forced["cached"]
    again = run_ok("graph", "page", "--all", "--min-confidence", "0", "--force", "--json").json()
    assert again["regenerated"] == len(ents) and again["cached"] == 0


def test_page_all_reads_the_graph_a_few_times_not_per_entity(
    example_kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openkl.graph import Graph

    seen: list[str] = []
    query = Graph.query

    def counted(self: Graph, cypher: str, params: dict | None = None) -> list[dict]:
        seen.append(cypher)
        return query(self, cypher, params)

    monkeypatch.setattr(Graph, "query", counted)
    r = run_ok("graph", "page", "--all", "--min-confidence", "0", "--json")
    assert r.code == 0, r.err
    assert r.json()["pages"] > 50
    assert len(seen) < 40, len(seen)


def test_page_all_skips_entities_below_the_floor(example_kf: Path) -> None:
    """Only entities at or above the confidence floor get a page; pages an earlier run wrote
    for entities now below it are removed, so the folder holds what the index lists."""
    from openkl.knowledge.pages import page_file

    pages = example_kf / "graph" / "pages"
    assert run_ok("graph", "page", "--all", "--min-confidence", "0").code == 0
    low = {e["id"] for e in _entities("--min-confidence", "0")} - {e["id"] for e in _entities()}
    assert low and all((pages / page_file(eid)).exists() for eid in low)
    r = run_ok("graph", "page", "--all", "--json")
    assert r.code == 0, r.err
    kept = {e["id"] for e in _entities()}
    assert r.json()["pages"] == len(kept) and r.json()["removed"] == len(low)
    assert {p.name for p in pages.glob("*.md")} == {page_file(e) for e in kept} | {"index.md"}
    index = (pages / "index.md").read_text()
    assert all(f"]({page_file(eid)})" not in index for eid in low)
    assert "removed" in run_ok("graph", "page", "--all", "--min-confidence", "0.9").out


def test_page_describes_the_entity_from_a_defining_sentence(example_kf: Path) -> None:
    md = run_ok("graph", "page", "Write-ahead logging").out
    assert md.split("\n")[6] == (
        "Write-ahead logging (WAL) is a technique databases use to "
        "provide atomicity and durability."
    )
    md = run_ok("graph", "page", "Ada Lovelace").out
    assert "\nAda Lovelace (1815–1852) was an English mathematician and writer.\n" in md
    # no sentence defines him: the first naming him under the heading "Work with Charles
    # Babbage" does
    md = run_ok("graph", "page", "Charles Babbage").out
    assert "\nLovelace worked with Charles Babbage on the Analytical Engine, a proposed" in md


# Scores measured at confidence 0.4 (bench/entities.py --gold --sets gold,dev,dev2,mixed), less
# a margin of 0.02: a change that loses an entity, adds noise or loses a typed person fails
# here. Re-measured when section labels, headings, generic words and links stopped being
# entities and types were read from heads and morphology (dev2 recall 0.773 → 0.75: a
# heading's capitals no longer make a name; person typing rose on every set).
GOLD_FLOORS = {
    "tuning": {"entity_recall": 0.945, "entity_precision": 0.961, "person_typed_recall": 0.875},
    "dev": {"entity_recall": 0.972, "entity_precision": 0.862, "person_typed_recall": 0.875},
    "dev2": {"entity_recall": 0.75, "entity_precision": 0.804, "person_typed_recall": 0.75},
    "mixed": {"entity_recall": 0.93, "entity_precision": 0.795, "person_typed_recall": 0.85},
}


@pytest.mark.parametrize("name", list(GOLD_FLOORS))
def test_entity_quality(kf: Path, name: str) -> None:
    """Entity recall and precision on the development sets, all seen while the extractor
    was tuned. The held-out sets (tests/gold/heldout, tests/gold/mixed_heldout) are scored
    only by bench/entities.py."""
    from evaluate import DEV, DEV2, DOCS, GOLD, MIXED, evaluate

    from openkl.files.folder import open_folder
    from openkl.sync.indexer import open_graph

    docs, gold = {
        "tuning": (DOCS, GOLD),
        "dev": (DEV / "docs", DEV / "gold.json"),
        "dev2": (DEV2 / "docs", DEV2 / "gold.json"),
        "mixed": (MIXED / "docs", MIXED / "gold.json"),
    }[name]
    r = run_ok("store", "ingest", str(docs))
    assert r.code == 0, r.err
    f = open_folder(kf)
    with open_graph(f) as g:
        score = evaluate(f, g, 0.4, gold)
    for metric, measured in GOLD_FLOORS[name].items():
        assert score[metric] >= measured - 0.02, (metric, score)


def test_extraction_cache_is_used_on_rebuild(example_kf: Path) -> None:
    cache = example_kf / ".ok" / "cache" / "entities.sqlite"
    assert cache.exists()
    import sqlite3

    n = sqlite3.connect(cache).execute("SELECT count(*) FROM ext").fetchone()[0]
    assert n > 0
    shutil.rmtree(example_kf / ".ok" / "kuzu")
    assert run_ok("index").code == 0
    assert sqlite3.connect(cache).execute("SELECT count(*) FROM ext").fetchone()[0] == n


@pytest.mark.parametrize(
    "text,expect",
    [
        ("Write-ahead logging (WAL) keeps data safe.", ("Write-ahead logging", "WAL")),
        (
            "See arXiv:2005.11401 and https://example.org/a.html for details.",
            ("arXiv:2005.11401", "https://example.org/a.html"),
        ),
        ("Call `asyncio.gather()` to wait for tasks.", ("asyncio.gather()",)),
    ],
)
def test_local_extractor_signals(text: str, expect: tuple[str, ...]) -> None:
    from openkl.entities.local import extract, key_of

    res = extract(text)
    keys = {m.key for m in res.mentions}
    assert {key_of(x) for x in expect} <= keys
    assert {m.name for m in res.mentions} >= set(expect)


@pytest.mark.parametrize(
    "text,expect",
    [
        # a participle clause after a comma is passive: not "Ada developed the Department"
        (
            "The programming language Ada, developed for the United States Department of Defense, "
            "is named after her.",
            set(),
        ),
        (
            "Linux, developed by Linus Torvalds, is everywhere.",
            {("linus torvalds", "linux", "developed")},
        ),
        ("Kùzu implements Cypher.", {("kuzu", "cypher", "implements")}),
    ],
)
def test_local_relationship_direction(text: str, expect: set[tuple[str, str, str]]) -> None:
    from openkl.entities.local import extract

    res = extract(text)
    typed = {(a, b, t) for a, b, t, *_ in res.relations if t != "related_to"}
    assert typed == expect


API_REFERENCE = """# libfoo reference

## foo_open

Function: `int foo_open(const char* path, int flags)`

Opens the file at `path` and returns a handle. The function reads the header of the file and
checks its version. Each file holds a header, a data section and an index of every record.

Parameters:

- path: name of the file.
- flags: `FOO_READ` or `FOO_WRITE`.

Returns: a handle, or `NULL` on error. The VALUE of errno tells which error occurred.

Note: the data of a file is read lazily; the value of each record is read on first use.

## foo_read

Function: `size_t foo_read(int handle, void* buf, size_t len)`

Reads up to `len` bytes of data from the file into `buf`.

Returns: the number of bytes read, or 0 at the end of the file. On error the value is -1.

Output: the data in `buf`. Example: read the header of a file before its data. Note: the
version of the file decides the layout of the data section.
"""


def test_api_reference_labels_and_common_words_are_not_entities(kf: Path) -> None:
    """Section labels (Returns, Note, Output, Example, Function, Parameters), primitive types
    and common words repeated many times (file, data, value, bytes) stay below the floor;
    the functions and constants the reference documents do not."""
    from openkl.entities.local import key_of

    (kf.parent / "ref").mkdir()
    (kf.parent / "ref" / "libfoo.md").write_text(API_REFERENCE)
    r = run_ok("store", "ingest", str(kf.parent / "ref" / "libfoo.md"))
    assert r.code == 0, r.err
    listed = {key_of(e["name"]) for e in _entities("--min-confidence", "0.4")}
    for word in (
        "returns",
        "note",
        "output",
        "example",
        "function",
        "parameters",
        "file",
        "data",
        "value",
        "byte",
        "header",
        "record",
        "version",
        "error",
        "null",
        "size_t",
        "void",
        "const char",
        "int",
    ):
        assert word not in listed, word
    for name in ("foo_open()", "foo_read()", "FOO_READ", "FOO_WRITE", "errno"):
        assert key_of(name) in listed, (name, sorted(listed))


def test_small_writes_leave_the_entity_graph_a_rebuild_would_make(
    example_kf: Path, tmp_path: Path
) -> None:
    """Consolidation writes only what changed; after adds, edits and removals the graph holds
    exactly what a rebuild from the same files holds."""
    steps = [
        ("mem", "add", "Ada Lovelace met Charles Babbage in London; SQLite came much later."),
        ("mem", "add", "Jennifer Doudna worked on Cas9 at the Broad Institute with BM25."),
        ("store", "remove", "docs/ada-lovelace.html.ok.md"),
    ]
    for step in steps:
        r = run_ok(*step)
        assert r.code == 0, (step, r.err)
    note = next((example_kf / "memories").rglob("m-*.md"))
    note.write_text(note.read_text() + "\nPostgreSQL uses write-ahead logging too.\n")
    doc = next((example_kf / "store" / "normalized").rglob("*rag*.ok.md"), None) or next(
        (example_kf / "store" / "normalized").rglob("*.ok.md")
    )
    doc.write_text(doc.read_text().replace("BM25", "Okapi BM25 ranking by Stephen Robertson"))
    assert run_ok("sync").code == 0
    incremental = entity_graph(example_kf)
    assert incremental["related"] and incremental["mentions"]
    copy = tmp_path / "rebuilt"
    shutil.copytree(example_kf, copy, symlinks=True)
    assert run_ok("--root", str(copy), "index", "--rebuild").code == 0
    assert entity_graph(copy) == incremental


@pytest.mark.parametrize(
    "ids", [[], ["ee43fb66e85b241f"], ["a", "m-20261201-xh54"], ['q"x'], ["a\\b"], ["t\tx"], ["é"]]
)
def test_relationship_docs_are_stored_as_json(ids: list[str]) -> None:
    """RELATED.docs is a JSON list, whatever the ids hold (quotes, backslashes, tabs)."""
    from openkl.graph import rel_docs, rel_docs_text

    assert json.loads(rel_docs_text(ids)) == ids
    assert rel_docs(rel_docs_text(ids)) == ids


def test_licences_changelogs_and_key_lists_leave_their_boilerplate_out(kf: Path) -> None:
    """Real files from /usr/share/doc: a Debian copyright file (field labels, a licence's
    disclaimer in capitals, e-mail addresses), a changelog (dates, "Closes:", thanks) and
    gpg-agent's list of trusted keys (fingerprints, serial numbers, X.500 names). Their
    boilerplate is no entity; the people, licences and organizations they name are."""
    from evaluate import MIXED

    from openkl.entities.local import key_of

    docs = MIXED / "docs"
    for name in ("libgif7-copyright", "fakeroot-changelog", "gpg-agent-trustlist.txt"):
        r = run_ok("store", "ingest", str(docs / name))
        assert r.code == 0, r.err
    listed = {key_of(e["name"]): e for e in _entities()}
    for noise in (
        "WITHOUT WARRANTY OF ANY KIND",  # a disclaimer in capitals
        "MERCHANTABILITY AND FITNESS",
        "AS IS",
        "DIRECT",
        "Copyright",  # field labels and licence words
        "Upstream-Name",
        "Upstream-Contact",
        "Closes",
        "MIT Permission",  # a field's value run into the next line
        "Gershon Elber License: MIT",
        "esr@thyrsus.com",  # e-mail addresses
        "clint@debian.org",
        "Sat",  # the dates of changelog entries
        "Thu",
        "Mon",
        "Thanks Erik Pfannenstein",
        "Clint Adams <clint@debian.org> Mon",
        "00B3963E0E6C2D65125853E970665402E5",  # serial numbers and fingerprints
        "32D18D",
        "EA",
        "8D",
        "CN",
        "Telekommunikation und Post/C",
        "x2f",
        "Eric S",
        "substantial portions",  # licence phrases
    ):
        assert key_of(noise) not in listed, noise
    for name, typ in (
        ("Eric S. Raymond", "Person"),
        ("Gershon Elber", None),
        ("Otto Moerbeek", "Person"),
        ("Mattia Rizzolo", "Person"),  # typed by the e-mail address after the name
        ("Erik Pfannenstein", "Person"),
        ("Clint Adams", "Person"),
        ("Helge Kreutzmann", "Person"),
        ("MIT", None),
        ("ISC", None),
        ("giflib", None),
        ("Bundesnetzagentur", None),
        ("Deutscher Sparkassen Verlag GmbH", "Organization"),
        ("SHA-1", None),
    ):
        assert key_of(name) in listed, (name, sorted(listed))
        assert typ is None or listed[key_of(name)]["type"] == typ, (name, listed[key_of(name)])


README_DEBIAN = """\
Notes for the Debian package
----------------------------

The LibYAML-based parser is fast, and the Windows-related fixes landed in 2.1.
An event-driven design keeps the daemon small. Read the file THANKS and
install the package libquux2-dev for the headers.

See systemctl(1) for more details. To stop it, run

    gpgconf --launch dirmngr

Free Software Foundation, Inc., 51 Franklin St, Fifth Floor, Boston.

 -- Steve M. Robbins <smr@debian.org>, Sun, 20 Nov 2022 15:52:41 +0100
"""


def test_names_are_read_from_debian_style_prose(kf: Path) -> None:
    """A name before "-based"/"-related" is the entity; "the file THANKS" and "the package
    libquux2-dev" name THANKS and libquux2-dev; an imperative verb, a command-line option, a
    company's legal form, a street and a date are not entities."""
    from openkl.entities.local import key_of

    (kf.parent / "README.Debian").write_text(README_DEBIAN)
    r = run_ok("store", "ingest", str(kf.parent / "README.Debian"))
    assert r.code == 0, r.err
    listed = {key_of(e["name"]): e for e in _entities()}
    for name in ("LibYAML", "Windows", "event-driven design", "THANKS", "libquux2-dev"):
        assert key_of(name) in listed, (name, sorted(listed))
    assert listed[key_of("Steve M. Robbins")]["type"] == "Person"
    for noise in (
        "LibYAML-based parser",
        "Windows-related",
        "file THANKS",
        "package libquux2-dev",
        "see systemctl",
        "launch dirmngr",
        "Inc",
        "Sun",
        "Steve M",
        "smr@debian.org",
    ):
        assert key_of(noise) not in listed, noise
    assert listed.get(key_of("Franklin St"), {"type": "Place"})["type"] != "Person"


def _related() -> set[tuple[str, str, str]]:
    r = run_ok(
        "graph",
        "cypher",
        "MATCH (a:Entity)-[r:RELATED]->(b:Entity) RETURN a.id AS a, b.id AS b, r.type AS t",
        "--json",
    )
    assert r.code == 0, r.err
    return {(x["a"], x["b"], x["t"]) for x in r.json()}


def _reached(name: str) -> dict[str, int]:
    r = run_ok("graph", "traverse", name, "--min-confidence", "0", "--depth", "2", "--json")
    assert r.code == 0, r.err
    return {s["id"]: s["depth"] for s in r.json()["steps"]}


def test_cooccurrence_with_a_common_word_needs_two_sources(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pair named together in one sentence where one end is only a common word ("role",
    "group") is no `related_to` edge until two sources name it
    (entities.cooccurrence_min_sources, default 2); a pair of two terms is an edge from one
    source, typed relations too, traverse walks them, and a changed threshold applies at
    `ok sync` as a rebuild would."""
    docs = tmp_path / "trials"
    docs.mkdir()
    (docs / "a.md").write_text(
        "# Trial one\n\nInsulin resistance and metformin were studied in the Framingham cohort.\n"
    )
    (docs / "b.md").write_text(
        "# Trial two\n\nInsulin resistance and metformin were compared in the Rotterdam study.\n"
    )
    (docs / "c.md").write_text("# Trial three\n\nThe role of metformin in this group was small.\n")
    assert run_ok("store", "ingest", str(docs)).code == 0
    rels = _related()
    assert ("insulin-resistance", "metformin", "related_to") in rels  # two sources
    assert ("metformin", "rotterdam", "related_to") in rels  # two terms, one source
    assert ("metformin", "framingham", "studied") in rels  # typed
    weak = {("metformin", "role", "related_to"), ("group", "metformin", "related_to")}
    assert not weak & rels
    reached = _reached("metformin")
    assert {"insulin-resistance", "framingham", "rotterdam"} <= set(reached)
    assert not {"role", "group"} & set(reached)
    assert _reached("Rotterdam")["framingham"] == 2  # through metformin

    # a second source naming the role of metformin makes the pair an edge; removing it
    # takes the edge away again
    (docs / "d.md").write_text("# Trial four\n\nThe role of metformin was debated.\n")
    assert run_ok("store", "ingest", str(docs / "d.md")).code == 0
    assert ("metformin", "role", "related_to") in _related()
    assert _reached("metformin")["role"] == 1
    fourth = next((kf / "store" / "normalized").rglob("d.ok.md"))
    assert run_ok("store", "remove", str(fourth.relative_to(kf))).code == 0
    assert ("metformin", "role", "related_to") not in _related()

    # one source is enough at 1: `ok sync` re-consolidates with the new threshold
    monkeypatch.setenv("OK_ENTITIES_COOCCURRENCE_MIN_SOURCES", "1")
    assert run_ok("sync").code == 0
    assert weak <= _related()
    kept = entity_graph(kf)
    assert run_ok("index", "--rebuild").code == 0
    assert entity_graph(kf) == kept
    monkeypatch.delenv("OK_ENTITIES_COOCCURRENCE_MIN_SOURCES")
    assert run_ok("sync").code == 0
    assert not weak & _related()
    assert ("metformin", "rotterdam", "related_to") in _related()


def test_packed_cooccurrence_expands_to_the_pairs_extracted() -> None:
    """The graph holds a sentence's co-occurrence pairs as its terms; expanding them gives
    exactly the pairs the extractor made, and pairs that are not all-pairs-but-typed (as an
    LLM may give) stay as they are."""
    from openkl.entities import local
    from openkl.entities.consolidation import pack, relations

    docs = sorted(EXAMPLES.glob("*"))
    assert docs
    shrunk = 0
    for path in docs:
        res = local.extract(path.read_text()).as_json()
        packed = json.loads(json.dumps(pack(res)))
        assert {tuple(r) for r in relations(packed)} == {tuple(r) for r in res["r"]}
        pairs = sum(r[2] == "related_to" for r in res["r"])
        if pairs > 10:
            assert "c" in packed and len(json.dumps(packed)) < len(json.dumps(res))
            assert not any(r[2] == "related_to" for r in packed["r"])
            shrunk += 1
    assert shrunk
    odd = {
        "m": [],
        "a": [],
        "r": [
            ["a", "b", "related_to", 0.3, 0],
            ["b", "c", "related_to", 0.3, 0],  # a-c is missing: not every pair
            ["x", "y", "related_to", 0.5, 9],
            ["x", "z", "uses", 0.6, 9],
            ["x", "z", "related_to", 0.5, 9],  # beside a typed relation of the same pair
        ],
    }
    packed = pack(odd)
    assert "c" not in packed
    assert sorted(map(tuple, relations(packed))) == sorted(map(tuple, odd["r"]))


def test_a_few_keys_gather_the_extractions_a_full_read_gathers(example_kf: Path) -> None:
    """Consolidating a note or a document asks the graph for the extractions that name its
    keys (or aliases leading to them) rather than reading all of them: the same ones."""
    from openkl.entities import consolidation as c
    from openkl.files.folder import open_folder
    from openkl.graph.indexing import open_graph

    r = run_ok("mem", "add", "Ada Lovelace wrote notes on the Analytical Engine of Babbage.")
    assert r.code == 0, r.err
    folder = open_folder(example_kf)
    canon = c.Canonical.load(folder)
    with open_graph(folder) as g:
        rows = g.extraction_index()
        amap = c._alias_map(rows, canon)
        assert amap and c._alias_map(g.extraction_aliases(), canon) == amap
        resolve = c._resolver(amap)
        keys = sorted({k for row in rows for k in row["keys"] or []} | set(amap))
        assert len(keys) > 50
        for k in keys:
            affected = {k, resolve(k)}
            want = [x["id"] for x in rows if any(resolve(y) in affected for y in x["keys"] or [])]
            got = g.extractions_with_keys(sorted(c.keys_into(amap, resolve, affected)))
            assert sorted(got) == sorted(want), k
