"""Entity descriptions: the best defining sentence of an entity's evidence, or the LLM's
sentence, cited to its span, cached by graph version, in pages and AKS bundles."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.openai_stub import chat_server
from helpers.run import run_ok
from helpers.serve import Server

from openkl import ops
from openkl.files.folder import open_folder
from openkl.knowledge.descriptions import MENTIONS

DOC = """# Harbour notes

Mira Osei, a marine biologist, joined the Tidewater Institute in 2021.
The Tidewater Institute is a research station on the northern coast.
Osei studies kelp forests near the station.

## Kelpwatch

The survey counts urchins on twelve transects every spring.
Volunteers from the town help Kelpwatch with the dives.
"""


@pytest.fixture
def harbour(kf: Path) -> Path:
    (kf / "harbour.md").write_text(DOC, encoding="utf-8")
    r = run_ok("store", "ingest", str(kf / "harbour.md"))
    assert r.code == 0, r.err
    return kf


def _description(md: str) -> tuple[str, str]:
    """The description paragraph of a page and the citation id under it."""
    lines = md.split("\n")
    at = next(i for i, ln in enumerate(lines) if ln.startswith("— cite: `c-"))
    cite = re.match(r"— cite: `(c-[0-9a-f]{16})`", lines[at])
    assert cite, lines[at]
    return lines[at - 2], cite.group(1)


def _bundle_entity(name: str) -> dict:
    r = run_ok("graph", "export", "--format", "aks", "-o", "-")
    assert r.code == 0, r.err
    bundle = json.loads(r.out)
    return next(e for e in bundle["entities"] if e["name"] == name)


def test_defining_sentences_apposition_and_heading(harbour: Path) -> None:
    text, cid = _description(run_ok("graph", "page", "Tidewater Institute").out)
    assert text == "The Tidewater Institute is a research station on the northern coast."
    # the citation is a real one: `ok cite make` of its ref gives the same span and quote
    text, cid = _description(run_ok("graph", "page", "Mira Osei").out)
    assert text == "Mira Osei, a marine biologist, joined the Tidewater Institute in 2021."
    ent = _bundle_entity("Mira Osei")
    cite = ent["properties"]["description_cite"]
    assert ent["description"] == text and cite["citation"] == cid and cite["quote"] == text
    made = run_ok("cite", "make", cite["ref"], "--json").json()[0]
    assert made["id"] == cid and made["quote"] == text
    body = (harbour / made["path"]).read_text(encoding="utf-8")
    assert body[cite["start"] : cite["end"]] == text
    # no copula or apposition: the first sentence of the section titled with its name
    text, _ = _description(run_ok("graph", "page", "Kelpwatch").out)
    assert text == "The survey counts urchins on twelve transects every spring."


def test_a_description_follows_its_evidence(harbour: Path) -> None:
    text, _ = _description(run_ok("graph", "page", "Tidewater Institute").out)
    assert "research station" in text
    cached = run_ok("graph", "page", "Tidewater Institute", "--json").json()
    assert cached["cached"] is True
    edited = DOC.replace(
        "is a research station on the northern coast", "is a field laboratory on the east coast"
    )
    (harbour / "harbour.md").write_text(edited, encoding="utf-8")
    assert run_ok("store", "ingest", str(harbour / "harbour.md")).code == 0
    text, _ = _description(run_ok("graph", "page", "Tidewater Institute").out)
    assert text == "The Tidewater Institute is a field laboratory on the east coast."
    assert "field laboratory" in _bundle_entity("Tidewater Institute")["description"]


def test_a_name_said_only_in_passing_gets_a_mention_not_a_description(harbour: Path) -> None:
    (harbour / "plain.md").write_text(
        "Quentin Marlowe arrived on Tuesday.\nQuentin Marlowe left on Friday.\n",
        encoding="utf-8",
    )
    assert run_ok("store", "ingest", str(harbour / "plain.md")).code == 0
    said = ops.synthesize_descriptions(ops.Call(open_folder(harbour)), ["Quentin Marlowe"])[
        "results"
    ][0]
    assert said["description"] is None
    # no sentence says what it is: the first sentence naming it is where it is named
    m = said["mention"]
    assert m["method"] in MENTIONS
    assert m["text"] in ("Quentin Marlowe arrived on Tuesday.", "Quentin Marlowe left on Friday.")
    assert m["cite"]["quote"] == m["text"]
    md = run_ok("graph", "page", "Quentin Marlowe").out
    assert "_No source says what this entity is._" in md
    assert _description(md) == ("Named in: " + m["text"], m["cite"]["id"])
    ent = _bundle_entity("Quentin Marlowe")
    assert not ent.get("description") and "description_cite" not in ent["properties"]


def test_the_llm_describer_cites_its_passage(
    harbour: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OK_ENTITIES_DESCRIBER", "llm")
    monkeypatch.setenv("OK_LLM_MODEL", "stub-model")
    # an answer citing nothing is not kept: the defining sentence stands instead
    with chat_server(["A marine biologist."]) as stub:
        monkeypatch.setenv("OK_LLM_BASE_URL", stub.url)
        md = run_ok("graph", "page", "Mira Osei").out
        assert len(stub.requests) == 1
    assert _description(md)[0].startswith("Mira Osei, a marine biologist")
    with chat_server(["A coastal research station that studies kelp [1]."]) as stub:
        monkeypatch.setenv("OK_LLM_BASE_URL", stub.url)
        md = run_ok("graph", "page", "Tidewater Institute").out
        asked = stub.requests[0]["messages"][1]["content"]
        cite = _bundle_entity("Tidewater Institute")["properties"]["description_cite"]
    text, cid = _description(md)
    assert text == "A coastal research station that studies kelp."
    assert "Entity: Tidewater Institute" in asked and "[1]" in asked
    made = run_ok("cite", "make", cite["ref"], "--json").json()[0]
    assert made["id"] == cid and "research station" in made["quote"]


def test_known_as_long_form_noun_before_name_and_what_it_does(kf: Path) -> None:
    (kf / "station.md").write_text(
        "The coastal survey, also known as Reefwatch, began in 1998.\n"
        "Samples were frozen by the research technician Ilse Varga, and shipped inland.\n"
        "Dissolved inorganic carbon (DIC) was measured weekly at the pier.\n"
        "Nordhavn Labs builds the buoys that carry the sensors.\n"
        "Quentin Marlowe was seen at the harbour on Tuesday.\n",
        encoding="utf-8",
    )
    assert run_ok("store", "ingest", str(kf / "station.md")).code == 0
    text, _ = _description(run_ok("graph", "page", "Reefwatch").out)
    assert text == "The coastal survey, also known as Reefwatch, began in 1998."
    text, _ = _description(run_ok("graph", "page", "Ilse Varga").out)
    assert text.startswith("Samples were frozen by the research technician Ilse Varga")
    # what it does only names it
    text, _ = _description(run_ok("graph", "page", "Nordhavn Labs").out)
    assert text == "Named in: Nordhavn Labs builds the buoys that carry the sensors."
    # a copula before a participle states an event, not what the thing is: the sentence
    # stands only as where it is named
    said = ops.synthesize_descriptions(ops.Call(open_folder(kf)), ["Quentin Marlowe"])["results"][0]
    assert said["description"] is None
    assert said["mention"]["text"] == "Quentin Marlowe was seen at the harbour on Tuesday."


DEFS = """# Lab notes

TNF, a cytokine that drives inflammation, was raised in every sample.
On Tuesday the samples went to Quentin Marlowe at the pier.
The sampler, also known as Kelpie, logs water temperature every ten minutes.

## Tidegauge

Readings come from a float in the inner harbour, sent every hour to the town server.
The Tidegauge data were compared with satellite altimetry from the same week.
"""

WANT = {
    # a definitional apposition
    "TNF": ("apposition", "TNF, a cytokine that drives inflammation, was raised in every sample."),
    # "also known as"
    "Kelpie": (
        "known as",
        "The sampler, also known as Kelpie, logs water temperature every ten minutes.",
    ),
    # the first sentence of the section titled with the name, though it does not name it
    "Tidegauge": (
        "heading",
        "Readings come from a float in the inner harbour, sent every hour to the town server.",
    ),
}


# a sentence that only names the entity: a mention, not a description
MENTIONED = ("Quentin Marlowe", "On Tuesday the samples went to Quentin Marlowe at the pier.")


def _assert_cited(kf: Path, e: dict, text: str, field: str = "description") -> None:
    """The entity JSON carries `text` in `field` (description or mention), cited to the
    exact span of the file saying it; the other field is empty."""
    other = "mention" if field == "description" else "description"
    assert not e[other] and e[f"{other}_cite"] is None, e
    cite = e[f"{field}_cite"]
    assert e[field] == text and cite["quote"] == text, e
    made = run_ok("cite", "make", cite["ref"], "--json").json()[0]
    assert made["id"] == cite["id"] and made["quote"] == text
    body = (kf / made["path"]).read_text(encoding="utf-8")
    assert body[made["loc"]["start"] : made["loc"]["end"]] == text


def test_apposition_known_as_and_section_descriptions_on_the_cli(kf: Path) -> None:
    (kf / "lab.md").write_text(DEFS, encoding="utf-8")
    assert run_ok("store", "ingest", str(kf / "lab.md")).code == 0
    rows = {e["name"]: e for e in run_ok("graph", "entities", "--json").json()}
    made = ops.synthesize_descriptions(ops.Call(open_folder(kf)), list(WANT))["results"]
    how = {r["name"]: (r["description"] or {}).get("method") for r in made}
    for name, (method, text) in WANT.items():
        _assert_cited(kf, rows[name], text)
        _assert_cited(kf, run_ok("graph", "entity", name, "--json").json(), text)
        assert how[name] == method, (name, how[name])


@pytest.mark.server
def test_a_context_sentence_is_a_mention_on_the_cli_and_http_entity_json(kf: Path) -> None:
    (kf / "lab.md").write_text(DEFS, encoding="utf-8")
    assert run_ok("store", "ingest", str(kf / "lab.md")).code == 0
    name, text = MENTIONED
    said = ops.synthesize_descriptions(ops.Call(open_folder(kf)), [name])["results"][0]
    assert said["description"] is None and said["mention"]["method"] == "context"
    rows = {e["name"]: e for e in run_ok("graph", "entities", "--json").json()}
    _assert_cited(kf, rows[name], text, "mention")
    _assert_cited(kf, run_ok("graph", "entity", name, "--json").json(), text, "mention")
    assert "Named in: " + text in run_ok("graph", "entity", name).out
    s = Server(kf)
    try:
        dom = {"domain": s.stack}
        one = s.http.get(f"/aks/v1/entities/{name}", params=dom)
        assert one.status_code == 200, one.text
        _assert_cited(kf, one.json(), text, "mention")
        listed = s.http.get("/aks/v1/entities", params=dom)
        assert listed.status_code == 200, listed.text
        got = listed.json()
        got = got.get("entities", got) if isinstance(got, dict) else got
        _assert_cited(kf, next(e for e in got if e["name"] == name), text, "mention")
    finally:
        s.stop()


@pytest.mark.server
def test_descriptions_on_the_http_entity_json(kf: Path) -> None:
    (kf / "lab.md").write_text(DEFS, encoding="utf-8")
    assert run_ok("store", "ingest", str(kf / "lab.md")).code == 0
    s = Server(kf)
    try:
        dom = {"domain": s.stack}
        listed = s.http.get("/aks/v1/entities", params=dom)
        assert listed.status_code == 200, listed.text
        rows = listed.json()
        rows = (
            {e["name"]: e for e in rows.get("entities", rows)}
            if isinstance(rows, dict)
            else {e["name"]: e for e in rows}
        )
        for name, (_, text) in WANT.items():
            one = s.http.get(f"/aks/v1/entities/{name}", params=dom)
            assert one.status_code == 200, one.text
            _assert_cited(kf, one.json(), text)
            _assert_cited(kf, rows[name], text)
    finally:
        s.stop()
