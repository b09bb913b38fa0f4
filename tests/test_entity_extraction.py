"""The local extractor on short texts: section headings, generic words, merged names, types
and stated relations (one chunk each, no folder)."""

from __future__ import annotations

import pytest

from openkl.entities.local import extract, key_of


def _listed(text: str, floor: float = 0.4) -> dict[str, str]:
    """key → name of the mentions at or above the floor."""
    return {m.key: m.name for m in extract(text).mentions if m.conf >= floor}


ABSTRACT = """\
Duration of androgen suppression in the treatment of prostate cancer.

BACKGROUND The combination of radiotherapy plus androgen suppression improves survival in \
prostate cancer. METHODS We randomly assigned patients to two groups. RESULTS We found that \
the data suggest a profound impact of tumour necrosis factor (TNF). CONCLUSIONS In this \
analysis, TNF predicted survival. OBJECTIVE To compare the groups. DESIGN Randomised trial. \
SETTING Forty hospitals in Canada. METHODS AND FINDINGS We used a model. GENERAL \
SIGNIFICANCE Genlisea aurea has a small genome.
"""


def test_section_headings_and_the_word_after_them_are_not_entities() -> None:
    listed = _listed(ABSTRACT)
    names = set(listed.values())
    for label in ("RESULTS", "METHODS", "CONCLUSIONS", "OBJECTIVE", "DESIGN", "SETTING"):
        assert not any(n.split()[0] == label for n in names), (label, names)
    for noise in (
        "RESULTS We",
        "METHODS We",
        "CONCLUSIONS In",
        "OBJECTIVE To",
        "DESIGN",
        "SETTING Forty",
        "METHODS AND FINDINGS We",
        "GENERAL SIGNIFICANCE",
        "GENERAL SIGNIFICANCE Genlisea",
    ):
        assert key_of(noise) not in listed, noise
    # the thing after a label is still read: a name starting its sentence
    assert key_of("Genlisea aurea") in listed or key_of("Genlisea") in listed, names
    assert key_of("Canada") in listed, names
    assert key_of("prostate cancer") in listed, names


def test_generic_words_are_not_entities() -> None:
    listed = _listed(ABSTRACT)
    for noise in (
        "analysis",
        "data suggest",
        "profound impact",
        "groups",
        "group",
        "method",
        "findings",
        "data",
    ):
        assert key_of(noise) not in listed, noise


@pytest.mark.parametrize(
    "text,noise,kept",
    [
        (  # a line in capitals standing alone, and an underlined heading of a README
            "HIGHLIGHTS\n\nThe libfoo library parses XML.\n\nUSAGE\n\nRun xmllint.\n",
            ["HIGHLIGHTS", "USAGE"],
            ["libfoo"],
        ),
        (
            "KSBA Overview\n=============\n\nKSBA is a library to parse X.509 certificates.\n",
            ["KSBA Overview", "Overview"],
            ["KSBA"],
        ),
        (  # a title in Title Case: its capitals name nothing the text writes in lower case
            "Normal Cardiac Outflow Tract Development Needs Dishevelled\n\nThe cardiac "
            "outflow tract forms early; normal development of the outflow tract needs "
            "Dishevelled genes.\n",
            ["Normal Cardiac Outflow Tract Development", "Normal Cardiac Outflow Tract"],
            ["Dishevelled"],
        ),
    ],
)
def test_document_headings_are_not_entities(text: str, noise: list[str], kept: list[str]) -> None:
    listed = _listed(text)
    for n in noise:
        assert key_of(n) not in listed, (n, listed)
    for k in kept:
        assert key_of(k) in listed, (k, listed)


def test_links_stay_under_the_floor() -> None:
    res = extract("Read https://example.org/guide.html for the details of libfoo.")
    urls = [m for m in res.mentions if m.type == "Reference"]
    assert urls and all(m.conf < 0.4 for m in urls)


@pytest.mark.parametrize(
    "forms",
    [
        ["mRNA", "mRNAs"],
        ["microRNA", "microRNAs"],
        ["T cell", "T cells", "T-cell", "T-cells"],
        ["tumour necrosis factor", "tumor necrosis factor", "tumour necrosis factors"],
        ["PDP-10", "PDP-10s"],
        ["signalling pathway", "signaling pathways"],
    ],
)
def test_plural_hyphen_case_and_spelling_are_one_name(forms: list[str]) -> None:
    assert len({key_of(f) for f in forms}) == 1, {f: key_of(f) for f in forms}


def test_different_things_keep_different_names() -> None:
    assert key_of("MRI") != key_of("MRI scanner")
    assert key_of("Java") != key_of("JavaScript")
    assert key_of("iOS") != key_of("IO")


@pytest.mark.parametrize(
    "text,long,short",
    [
        (
            "Levels of tumour necrosis factor (TNF) rose after TNF was given.",
            "tumour necrosis factor",
            "TNF",
        ),
        ("Serum interleukin-6 (IL-6) was high.", "interleukin-6", "IL-6"),
        ("Inhibitors of neutral endopeptidase (NEP) were used.", "neutral endopeptidase", "NEP"),
        ("The World Health Organization (WHO) recommends it.", "World Health Organization", "WHO"),
    ],
)
def test_an_abbreviation_is_an_alias_of_its_long_form(text: str, long: str, short: str) -> None:
    res = extract(text)
    assert (key_of(short), key_of(long)) in res.aliases, res.aliases
    assert any(m.name == long and m.conf >= 0.4 for m in res.mentions)


def test_abbreviations_merge_into_one_entity_in_the_graph(kf) -> None:  # type: ignore[no-untyped-def]
    from helpers.run import run_ok

    (kf.parent / "a.md").write_text(
        "# Cytokines\n\nTumour necrosis factor (TNF) drives inflammation. TNF and T cells "
        "were measured; T-cell counts and mRNAs of TNF rose, and each mRNA was read.\n"
    )
    assert run_ok("store", "ingest", str(kf.parent / "a.md")).code == 0
    ents = run_ok("graph", "entities", "--json", "--min-confidence", "0").json()
    by_key = {key_of(n): e for e in ents for n in [e["name"], *e["aliases"]]}
    tnf = by_key[key_of("TNF")]
    assert by_key[key_of("tumor necrosis factor")]["id"] == tnf["id"]
    assert "TNF" in tnf["aliases"] or tnf["name"] == "TNF"
    assert by_key[key_of("T cells")]["id"] == by_key[key_of("T-cell")]["id"]
    assert by_key[key_of("mRNAs")]["id"] == by_key[key_of("mRNA")]["id"]


def test_a_column_of_terms_and_a_name_pair() -> None:
    listed = _listed(
        "Tools\n\n  ptxed         Example implementation of a trace disassembler\n\n"
        "Units for PostgreSQL on Debian/Ubuntu are here; Debian ships them.\n"
    )
    assert key_of("ptxed") in listed, listed
    assert key_of("Example") not in listed
    assert key_of("Debian") in listed and key_of("Ubuntu") in listed, listed


BIO = """\
Patients with breast cancer and sepsis were treated with cisplatin and cetuximab. \
Expression of BRCA1 protein in T cells and macrophages of mice was measured by mass \
spectrometry and flow cytometry; tumour necrosis factor (TNF) levels rose, and \
Escherichia coli infection caused inflammation of the liver.
"""

TECH = """\
The dpkg command installs packages on Debian. Configure it with the JSON file, then run \
git format-patch and build libfoo with CMake on Linux. The library speaks HTTP and TLS, \
and Tk 8.6 draws the interface. It was developed at the Free Software Foundation in Boston \
by Richard Stallman.
"""


@pytest.mark.parametrize(
    "text,expect",
    [
        (
            BIO,
            {
                "breast cancer": "Disease",
                "sepsis": "Disease",
                "cisplatin": "Chemical",
                "cetuximab": "Chemical",
                "BRCA1": "GeneProtein",
                "T cells": "Anatomy",
                "mice": "Organism",
                "mass spectrometry": "Method",
                "flow cytometry": "Method",
                "tumour necrosis factor": "GeneProtein",
                "TNF": "GeneProtein",
                "Escherichia coli": "Organism",
            },
        ),
        (
            TECH,
            {
                "dpkg": "Software",
                "Debian": "Software",
                "JSON": "Software",
                "git format-patch": "Software",
                "Linux": "Software",
                "HTTP": "Software",
                "Tk 8.6": "Software",
                "Free Software Foundation": "Organization",
                "Boston": "Place",
                "Richard Stallman": "Person",
            },
        ),
    ],
)
def test_types_say_what_a_thing_is(text: str, expect: dict[str, str]) -> None:
    got: dict[str, set[str]] = {}
    for m in extract(text).mentions:
        got.setdefault(m.key, set()).add(m.type)
    wrong = {
        n: (t, got.get(key_of(n))) for n, t in expect.items() if t not in got.get(key_of(n), set())
    }
    assert not wrong, wrong


def test_a_verb_with_words_between_its_subject_and_object_states_a_relation() -> None:
    r = extract(
        "In 1946 Richard Hamming joined the Bell Telephone Laboratories in New Jersey. "
        "Treatment with intetumumab also significantly reduced lung metastasis in rats. "
        "The release of ET-1 was inhibited by phosphoramidon in these cells."
    )
    names = {m.key: m.name for m in r.mentions}
    stated = {
        (names.get(a, a), t, names.get(b, b)) for a, b, t, *_ in r.relations if t != "related_to"
    }
    assert ("Richard Hamming", "member_of", "Bell Telephone Laboratories") in stated, stated
    assert any(s == "intetumumab" and t == "reduces" for s, t, _ in stated), stated
    # passive: the agent after "by" is the subject
    assert any(s == "phosphoramidon" and t == "inhibits" for s, t, _ in stated), stated
    # never the pair both ways, nor a stated pair also as co-occurrence
    pairs = [(a, b) for a, b, t, *_ in r.relations if t != "related_to"]
    cooc = {frozenset((a, b)) for a, b, t, *_ in r.relations if t == "related_to"}
    assert not any(frozenset(p) in cooc for p in pairs)


FRAGMENTS = """\
Deaths due to cancer fell in the 1960s. The underpowered terminals ran today's web, and the \
code clean-ups read mathematical journals. Originally the lab was joining CERN with twenty \
TENEX machines; KSHV-positive cells and cytokines were counted. Cells expressing CD4 and \
the primary mechanism sorting cells were studied.
"""


def test_fragments_stay_under_the_floor_and_the_things_in_them_do_not() -> None:
    res = extract(FRAGMENTS)
    conf: dict[str, float] = {}
    for m in res.mentions:
        conf[m.key] = max(conf.get(m.key, 0.0), m.conf)
    for noise in (
        "deaths due",
        "1960s",
        "underpowered",
        "today's web",
        "read mathematical journals",
        "joining CERN",
        "twenty TENEX",
        "KSHV-positive",
        "primary mechanism sorting cells",
    ):
        assert conf.get(key_of(noise), 0.0) < 0.4, (noise, conf.get(key_of(noise)))
    listed = set(_listed(FRAGMENTS))
    for thing in ("CERN", "KSHV", "cytokines", "CD4"):
        assert key_of(thing) in listed, (thing, sorted(listed))


def test_a_name_ends_at_a_title_line_and_at_a_possessive() -> None:
    listed = set(
        _listed(
            "George Boole\nBoole, George\n\n   A mathematician. He read Gene Roddenberry's "
            "Earth: Final Conflict in Cambridge.\n"
        ).values()
    )
    assert "George Boole" in listed and "George Boole Boole" not in listed, listed
    assert not any("Roddenberry's Earth" in n for n in listed), listed


@pytest.mark.parametrize(
    ("text", "name", "typ"),
    [
        ("He was born in Ballintemple and lived there.", "Ballintemple", "Place"),
        ("The lab moved to Monterey, California in 1970.", "Monterey", "Place"),
        ("The case came before US President Bush in 1990.", "US President Bush", "Person"),
    ],
)
def test_the_words_around_a_name_type_it(text: str, name: str, typ: str) -> None:
    got = {m.name: m.type for m in extract(text).mentions if m.conf >= 0.4}
    assert got.get(name) == typ, got


def test_a_kind_raises_a_mention_and_title_case_without_one_is_weaker() -> None:
    res = extract(
        "Patients received cisplatin. The Insidious Black Magic of the Final Conflict "
        "was shown at the Swiss Federal Institute of Technology."
    )
    conf = {m.name: (m.type, m.conf) for m in res.mentions}
    assert conf["cisplatin"][0] == "Chemical" and conf["cisplatin"][1] > 0.5, conf
    assert conf["Insidious Black Magic"] == ("Concept", 0.6), conf
    assert conf["Swiss Federal Institute of Technology"][1] >= 0.8, conf


def test_a_fragment_is_in_the_graph_under_the_floor(kf) -> None:  # type: ignore[no-untyped-def]
    from helpers.run import run_ok

    (kf.parent / "f.txt").write_text(FRAGMENTS)
    assert run_ok("store", "ingest", str(kf.parent / "f.txt")).code == 0
    every = run_ok("graph", "entities", "--json", "--min-confidence", "0").json()
    listed = run_ok("graph", "entities", "--json").json()
    below = {key_of(e["name"]): e["confidence"] for e in every}
    assert below[key_of("deaths due")] < 0.4, below
    assert key_of("deaths due") not in {key_of(e["name"]) for e in listed}
    assert key_of("CERN") in {key_of(e["name"]) for e in listed}


@pytest.mark.parametrize(
    ("text", "name", "typ"),
    [
        (
            "He was a member of the Institute of Electrical and Electronics Engineers.",
            "Institute of Electrical and Electronics Engineers",
            "Organization",
        ),
        (
            "TOPS-20 began in 1969 as Bolt, Beranek & Newman's TENEX.",
            "Bolt, Beranek & Newman's",
            "Organization",
        ),
        ("The book came out at Simon & Schuster in 1990.", "Simon & Schuster", "Organization"),
        ("He graduated from the Queen's College at Oxford.", "Queen's College", "Organization"),
        ("We measured the T cell receptor signal in mice.", "T cell receptor", "GeneProtein"),
    ],
)
def test_one_name_across_and_ampersand_possessive_and_a_cell_letter(
    text: str, name: str, typ: str
) -> None:
    got = {m.name: m.type for m in extract(text).mentions if m.conf >= 0.4}
    assert got.get(name) == typ, got


def test_the_kind_of_an_institution_alone_is_no_name() -> None:
    listed = set(
        _listed("He taught at the University for years. The University of Cork hired him.")
    )
    assert key_of("University of Cork") in listed, listed
    assert key_of("University") not in listed, listed


def test_english_words_made_from_common_ones_are_no_program_names() -> None:
    text = (
        "Install the package with apt. The build puts the objects in subdirectories and "
        "reloads the daemon; usability improved and incompatibilities were fixed. Run "
        "pgbackrest or systemd to restore the cluster from the server."
    )
    res = extract(text)
    best: dict[str, tuple[str, float]] = {}
    for m in res.mentions:
        if m.conf >= best.get(m.key, ("", 0.0))[1]:
            best[m.key] = (m.type, m.conf)
    for word in ("subdirectories", "reloads", "usability", "incompatibilities"):
        assert best.get(key_of(word), ("", 0.0))[1] < 0.4, (word, best.get(key_of(word)))
    for program in ("pgbackrest", "systemd"):
        assert best[key_of(program)][1] >= 0.4, (program, best.get(key_of(program)))


def test_an_everyday_word_in_title_case_and_a_word_before_an_abbreviation_are_no_names() -> None:
    text = (
        "John Vincent Atanasoff and the Birth of the Digital Computer. He sat on the Board "
        "and won the Medal. In the 1980s IBM had troubles. He left, rejoining MCI in 1994. "
        "We found significant HSPC expansion. Ultimately Microsoft won; Yeltsin spoke."
    )
    listed = _listed(text)
    for noise in ("Birth", "Board", "1980s IBM", "rejoining MCI", "significant HSPC"):
        assert key_of(noise) not in listed, (noise, sorted(listed.values()))
    assert not any(n.startswith("Ultimately") for n in listed.values()), listed
    for thing in ("IBM", "MCI", "HSPC", "Microsoft", "Yeltsin", "John Vincent Atanasoff"):
        assert key_of(thing) in listed, (thing, sorted(listed.values()))
