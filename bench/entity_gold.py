"""The entity graph against the labelled gold sets of bench/gold/entities (three kinds of text).

    uv run python bench/entity_gold.py [--split dev|test|all] [--kinds scifact,techdocs,prose]
        [--save] [--keep DIR]

For each kind it builds a fresh knowledge folder from the split's documents with the CLI
(`ok init`, `ok store ingest`), reads the graph back through the CLI (`ok graph entities`,
`ok graph cypher`) and scores it against `<kind>/gold.json`, labelled by
bench/gold/entities/GUIDE.md before the extractor ran on these documents. Tune on dev;
report test.

What is measured, per kind and over all three (micro-averaged over documents' entities):
- entity precision and recall above the confidence floor (`entities.min_confidence`): an
  extracted entity of a document is correct when one of its names (name or alias) matches
  a gold entity of that document or one of its `acceptable` extras; a gold entity is found
  when an extracted entity of its document matches it;
- typed accuracy: the share of extracted entities matched to a required gold entity whose
  type, mapped by TYPE_MAP to the guide's types, is the gold type;
- relations, stated only: gold relations against the extractor's relations between
  entities above the floor, co-occurrence links (COOCCURRENCE) left out; matched as
  unordered pairs, and typed (REL_MAP); co-occurrence pair recall is reported apart;
- headings among the 200 most confident entities above the floor (and among all of them);
- entities per 1,000 chunks, above the floor and in all;
- a reliability table: each confidence bucket, the share of its (document, entity) pairs
  that are correct (buckets under the floor are shown too, marked).

Names are compared by `norm` (case, accents, punctuation, hyphens, a leading article, a
possessive and a final plural folded), fixed here rather than taken from the extractor, so
that a change to how the extractor merges names cannot move the scale it is measured on.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GOLD = HERE / "gold" / "entities"
KINDS = ("scifact", "techdocs", "prose")
sys.path.insert(0, str(HERE))

import provenance  # noqa: E402

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")

# the extractor's entity types, and likely names of future ones, to the guide's thirteen
TYPE_MAP: dict[str, str] = {
    "person": "Person",
    "organization": "Organization",
    "organisation": "Organization",
    "org": "Organization",
    "company": "Organization",
    "place": "Place",
    "location": "Place",
    "gpe": "Place",
    "event": "Event",
    "work": "Work",
    "reference": "Work",
    "document": "Work",
    "software": "Software",
    "product": "Software",
    "code": "Software",
    "technology": "Software",
    "method": "Method",
    "technique": "Method",
    "procedure": "Method",
    "chemical": "Chemical",
    "substance": "Chemical",
    "drug": "Chemical",
    "geneprotein": "GeneProtein",
    "gene": "GeneProtein",
    "protein": "GeneProtein",
    "disease": "Disease",
    "condition": "Disease",
    "organism": "Organism",
    "species": "Organism",
    "anatomy": "Anatomy",
    "celltype": "Anatomy",
    "concept": "Concept",
}

# relation types that only say two names were seen together: never a stated relation
COOCCURRENCE = frozenset(
    {"related_to", "co_occurs", "cooccurs", "co_occurs_with", "co_occurrence", "mentioned_with"}
)

# the extractor's stated relation types (verbs and patterns) to the guide's twelve; any
# other stated type counts as `related_to` (a stated link of no named kind)
REL_MAP: dict[str, str] = {
    **dict.fromkeys(["is_a", "instance_of", "kind_of", "type_of", "is"], "is_a"),
    **dict.fromkeys(
        ["part_of", "contains", "includes", "has_part", "component_of", "consists_of"],
        "part_of",
    ),
    **dict.fromkeys(["located_in", "based_in", "location_of"], "located_in"),
    **dict.fromkeys(
        ["member_of", "works_at", "works_for", "employed_by", "studied_at", "affiliated_with"]
        + ["leads", "directs", "manages", "owns", "works_with"],
        "member_of",
    ),
    **dict.fromkeys(
        ["created", "developed", "designed", "proposed", "founded", "introduced", "invented"]
        + ["wrote", "authored", "published", "built", "popularized", "discovered", "taught"],
        "created",
    ),
    **dict.fromkeys(
        ["uses", "built_on", "requires", "depends_on", "runs", "implements", "wraps"]
        + ["supports", "measures", "written_in", "runs_on"],
        "uses",
    ),
    **dict.fromkeys(
        ["causes", "triggers", "produces", "induces", "increases", "activates", "initiates"]
        + ["leads_to"],
        "causes",
    ),
    **dict.fromkeys(
        ["inhibits", "reduces", "suppresses", "prevents", "blocks", "protects", "treats"],
        "inhibits",
    ),
    **dict.fromkeys(
        ["regulates", "modulates", "binds", "encodes", "targets", "expresses", "interacts_with"],
        "regulates",
    ),
    **dict.fromkeys(["associated_with", "correlates_with"], "associated_with"),
    **dict.fromkeys(["replaces", "succeeds", "supersedes", "extends", "version_of"], "replaces"),
}

# the section labels of structured abstracts: an entity whose name starts with one in capitals
# and has at most one word more ("DESIGN", "RESULTS We", "OBJECTIVE To") is a heading
SECTION_LABELS = (
    "background",
    "method",
    "methods",
    "results",
    "conclusion",
    "conclusions",
    "objective",
    "objectives",
    "design",
    "setting",
    "settings",
    "participants",
    "patients",
    "interventions",
    "measurements",
    "main outcome measures",
    "outcome measures",
    "purpose",
    "introduction",
    "discussion",
    "findings",
    "context",
    "aims",
    "data sources",
    "review methods",
    "study selection",
    "data extraction",
    "data synthesis",
    "general significance",
    "methods and findings",
    "methods and finding",
    "principal findings",
    "methodology",
    "rationale",
    "limitations",
)


_ARTICLE = re.compile(r"^(the|a|an)\s+")
_POSSESSIVE = re.compile(r"'s\b")
_PUNCT = re.compile(r"[^\w+#]+")


def norm(name: str) -> str:
    """The form two names are compared in: case, accents, punctuation, hyphens, a leading
    article, a possessive and a final plural folded (not the s of a word with no vowel
    before it: "https" stays)."""
    s = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", name))
    s = "".join(c for c in s if not unicodedata.combining(c)).casefold().replace("’", "'")
    s = _ARTICLE.sub("", s.strip())
    s = _POSSESSIVE.sub("", s)
    words = _PUNCT.sub(" ", s).replace("_", " ").split()
    if words and words[-1].isalpha() and len(words[-1]) > 3:
        words[-1] = _singular(words[-1])
    return " ".join(words)


def _singular(w: str) -> str:
    if w in ("series", "species"):
        return w
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("yses"):
        return w[:-4] + "ysis"
    if w.endswith(("sses", "xes", "ches", "shes")) or (
        w.endswith("uses") and not w.endswith(("auses", "ouses"))  # viruses, not causes
    ):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")) and re.search("[aeiouy]", w[:-1]):
        return w[:-1]
    return w


# -- gold ---------------------------------------------------------------------------------
@dataclass
class GoldEntity:
    name: str
    type: str
    keys: set[str]


@dataclass
class GoldDoc:
    entities: list[GoldEntity]
    acceptable: set[str]
    relations: list[tuple[str, str, str]]

    @property
    def ok_keys(self) -> set[str]:
        return set().union(*(e.keys for e in self.entities)) | self.acceptable


def load_gold(kind: str, names: list[str]) -> dict[str, GoldDoc]:
    raw = json.loads((GOLD / kind / "gold.json").read_text())
    out = {}
    for name in names:
        d = raw[name]
        ents = [
            GoldEntity(e["name"], e["type"], {norm(x) for x in [e["name"], *e.get("aliases", [])]})
            for e in d["entities"]
        ]
        out[name] = GoldDoc(
            ents, {norm(x) for x in d["acceptable"]}, [tuple(r) for r in d["relations"]]
        )
    return out


def split_docs(kind: str, split: str) -> list[str]:
    s = json.loads((GOLD / "split.json").read_text())[kind]
    return sorted(s["dev"] + s["test"]) if split == "all" else list(s[split])


# -- the folder ---------------------------------------------------------------------------
@dataclass
class Built:
    floor: float
    chunks: int
    ingest_s: float
    doc_ids: dict[str, str]  # file name -> document id
    entities: list[dict[str, Any]]  # every entity, whatever its confidence
    relations: list[dict[str, Any]] = field(default_factory=list)


def _ok_bin() -> str:
    local = Path(sys.executable).parent / "ok"
    return str(local) if local.exists() else (shutil.which("ok") or "ok")


def ok(root: Path, *args: str) -> Any:
    """Run `ok --json ARGS` on a folder and return its JSON."""
    p = subprocess.run(
        [_ok_bin(), "--json", "-C", str(root), *args], capture_output=True, text=True
    )
    if p.returncode:
        raise SystemExit(f"ok {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout) if p.stdout.strip() else None


def build(kind: str, names: list[str], work: Path) -> Built:
    src = work / f"{kind}-docs"
    src.mkdir(parents=True)
    for n in names:
        shutil.copy(GOLD / kind / "docs" / n, src / n)
    root = work / f"{kind}-kf"
    subprocess.run([_ok_bin(), "init", str(root)], check=True, capture_output=True)
    t = time.perf_counter()
    ok(root, "store", "ingest", str(src))
    ingest_s = time.perf_counter() - t
    docs = {Path(d["origin"]).name: d["id"] for d in ok(root, "store", "list") if d["current"]}
    missing = sorted(set(names) - set(docs))
    if missing:
        raise SystemExit(f"{kind}: not ingested: {', '.join(missing)}")
    floor = float(ok(root, "config", "get", "entities.min_confidence")["value"])
    chunks = int(ok(root, "status")["counts"]["Chunk"])
    ents = ok(root, "graph", "entities", "--min-confidence", "0")
    rels = ok(
        root,
        "graph",
        "cypher",
        "MATCH (a:Entity)-[r:RELATED]->(b:Entity) RETURN a.id AS a, b.id AS b,"
        " r.type AS type, r.confidence AS confidence, r.docs AS docs",
    )
    return Built(floor, chunks, round(ingest_s, 2), docs, ents, rels or [])


# -- scoring ------------------------------------------------------------------------------
def entity_keys(e: dict[str, Any]) -> set[str]:
    return {k for k in (norm(x) for x in [e["name"], *e.get("aliases", [])]) if k}


def score_entities(gold: dict[str, GoldDoc], b: Built) -> dict[str, Any]:
    """Precision, recall, typed accuracy, the reliability pairs and what each document
    missed and added."""
    tot = Counter[str]()
    pairs: list[tuple[float, bool]] = []
    per_doc: dict[str, Any] = {}
    unmapped: Counter[str] = Counter()
    for name, gd in gold.items():
        did = b.doc_ids[name]
        mine = [e for e in b.entities if did in e.get("docs", [])]
        ok_keys = gd.ok_keys
        for e in mine:
            pairs.append((float(e["confidence"]), bool(entity_keys(e) & ok_keys)))
        above = [e for e in mine if e["confidence"] >= b.floor]
        keys = {e["id"]: entity_keys(e) for e in above}
        found = [any(ks & g.keys for ks in keys.values()) for g in gd.entities]
        correct = [e for e in above if keys[e["id"]] & ok_keys]
        matched = typed = 0
        for e in above:
            hits = [g for g in gd.entities if keys[e["id"]] & g.keys]
            if not hits:
                continue
            matched += 1
            mapped = TYPE_MAP.get(str(e["type"]).lower().replace("_", "").replace("/", ""))
            if mapped is None:
                unmapped[e["type"]] += 1
            typed += any(mapped == g.type for g in hits)
        tot.update(
            gold=len(found),
            found=sum(found),
            extracted=len(above),
            correct=len(correct),
            matched=matched,
            typed=typed,
        )
        per_doc[name] = {
            "recall": round(sum(found) / max(1, len(found)), 3),
            "precision": round(len(correct) / max(1, len(above)), 3),
            "missed": [g.name for g, f in zip(gd.entities, found, strict=True) if not f],
            "noise": sorted(e["name"] for e in above if not keys[e["id"]] & ok_keys),
        }
    return {
        "entity_precision": round(tot["correct"] / max(1, tot["extracted"]), 3),
        "entity_recall": round(tot["found"] / max(1, tot["gold"]), 3),
        "typed_accuracy": round(tot["typed"] / max(1, tot["matched"]), 3),
        "counts": dict(tot),
        "unmapped_types": dict(unmapped),
        "_pairs": pairs,
        "docs": per_doc,
    }


def score_relations(gold: dict[str, GoldDoc], b: Built) -> dict[str, Any]:
    """Stated relations (co-occurrence left out) between entities above the floor, as
    unordered pairs and typed; co-occurrence pair recall apart."""
    above = {e["id"]: entity_keys(e) for e in b.entities if e["confidence"] >= b.floor}
    tot = Counter[str]()
    types: Counter[str] = Counter()
    for name, gd in gold.items():
        did = b.doc_ids[name]
        keys_of = {g.name: g.keys for g in gd.entities}
        stated, cooc = [], []
        for r in b.relations:
            if r["a"] not in above or r["b"] not in above or did not in _docs(r["docs"]):
                continue
            t = str(r["type"])
            (cooc if t in COOCCURRENCE else stated).append(
                (above[r["a"]], above[r["b"]], REL_MAP.get(t, "related_to"))
            )
            if t not in COOCCURRENCE:
                types[t] += 1

        def hit(x: set[str], y: set[str], a: str, c: str, k: dict = keys_of) -> bool:
            return bool((x & k[a] and y & k[c]) or (x & k[c] and y & k[a]))

        g_rels = gd.relations
        tot["gold"] += len(g_rels)
        tot["stated"] += len(stated)
        tot["stated_correct"] += sum(
            any(hit(x, y, a, c) for a, _, c in g_rels) for x, y, _ in stated
        )
        tot["stated_typed_correct"] += sum(
            any(hit(x, y, a, c) and t == gt for a, gt, c in g_rels) for x, y, t in stated
        )
        tot["found"] += sum(any(hit(x, y, a, c) for x, y, _ in stated) for a, _, c in g_rels)
        tot["found_typed"] += sum(
            any(hit(x, y, a, c) and t == gt for x, y, t in stated) for a, gt, c in g_rels
        )
        tot["found_cooccurrence"] += sum(
            any(hit(x, y, a, c) for x, y, _ in cooc) for a, _, c in g_rels
        )
        tot["cooccurrence"] += len(cooc)
    return {
        "relation_precision": round(tot["stated_correct"] / max(1, tot["stated"]), 3),
        "relation_recall": round(tot["found"] / max(1, tot["gold"]), 3),
        "relation_precision_typed": round(tot["stated_typed_correct"] / max(1, tot["stated"]), 3),
        "relation_recall_typed": round(tot["found_typed"] / max(1, tot["gold"]), 3),
        "cooccurrence_pair_recall": round(tot["found_cooccurrence"] / max(1, tot["gold"]), 3),
        "relation_counts": dict(tot),
        "stated_types": dict(types.most_common()),
    }


def _docs(raw: Any) -> list[str]:
    if isinstance(raw, list):
        return raw
    try:
        return list(json.loads(raw or "[]"))
    except ValueError:
        return []


def heading_keys(kind: str, names: list[str]) -> set[str]:
    """The headings of the documents: markdown headings, underlined lines and lines in
    capitals standing alone."""
    out = set()
    for n in names:
        lines = (GOLD / kind / "docs" / n).read_text().splitlines()
        for i, line in enumerate(lines):
            s = re.sub(r"<[^>]+>|^#+\s*|^\d+\.\s*", "", line.strip()).strip("#:= -")
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            underlined = len(nxt) >= 3 and set(nxt) <= set("=-~") and line.strip()
            capitals = s and s.upper() == s and re.search(r"[A-Z]{3}", s) and len(s) < 60
            if line.lstrip().startswith("#") or underlined or capitals:
                out.add(norm(s))
    return {k for k in out if k}


def is_heading(name: str, heads: set[str]) -> bool:
    """A document's heading (or one and a word more), or a section label in capitals and
    at most one word more."""
    raw = name.split()
    if norm(name) in heads or (len(raw) > 1 and norm(" ".join(raw[:-1])) in heads):
        return True
    caps = 0
    while caps < len(raw) and raw[caps].isupper():
        caps += 1
    labels = {norm(x) for x in SECTION_LABELS}
    return any(norm(" ".join(raw[:n])) in labels and len(raw) - n <= 1 for n in range(caps, 0, -1))


def heading_report(kind: str, gold: dict[str, GoldDoc], b: Built) -> dict[str, Any]:
    things = set().union(*(gd.ok_keys for gd in gold.values()))
    heads = heading_keys(kind, list(gold)) - things  # "IBM" heads its entry, yet is a thing
    above = sorted(
        (e for e in b.entities if e["confidence"] >= b.floor),
        key=lambda e: (-e["confidence"], e["name"]),
    )

    def heads_in(es: list[dict[str, Any]]) -> list[str]:
        return [
            e["name"]
            for e in es
            if not entity_keys(e) & things
            and any(is_heading(x, heads) for x in [e["name"], *e.get("aliases", [])])
        ]

    top = heads_in(above[:200])
    return {
        "headings_top200": len(top),
        "headings_top200_names": top,
        "headings_above_floor": len(heads_in(above)),
    }


BUCKETS = [round(x * 0.1, 1) for x in range(11)]


def reliability(pairs: list[tuple[float, bool]], floor: float) -> list[dict[str, Any]]:
    """Confidence bucket -> (document, entity) pairs in it and the share correct."""
    rows = []
    for lo, hi in zip(BUCKETS, BUCKETS[1:], strict=False):
        inb = [c for conf, c in pairs if lo <= conf < hi or (hi == 1.0 and conf == 1.0)]
        rows.append(
            {
                "bucket": f"{lo:.1f}-{hi:.1f}",
                "above_floor": lo >= floor,
                "n": len(inb),
                "correct": round(sum(inb) / len(inb), 3) if inb else None,
            }
        )
    return rows


def run_kind(kind: str, split: str, work: Path) -> dict[str, Any]:
    names = split_docs(kind, split)
    gold = load_gold(kind, names)
    b = build(kind, names, work)
    ents = score_entities(gold, b)
    pairs = ents.pop("_pairs")
    above = [e for e in b.entities if e["confidence"] >= b.floor]
    return {
        "docs": len(names),
        "chunks": b.chunks,
        "floor": b.floor,
        "ingest_s": b.ingest_s,
        **{k: v for k, v in ents.items() if k != "docs"},
        **score_relations(gold, b),
        **heading_report(kind, gold, b),
        "entities_above_floor": len(above),
        "entities_all": len(b.entities),
        "entities_per_1000_chunks": round(1000 * len(above) / max(1, b.chunks), 1),
        "entities_all_per_1000_chunks": round(1000 * len(b.entities) / max(1, b.chunks), 1),
        "reliability": reliability(pairs, b.floor),
        "_pairs": pairs,
        "per_doc": ents["docs"],
    }


def overall(res: dict[str, dict[str, Any]], floor: float) -> dict[str, Any]:
    """Micro averages over the kinds."""
    e = Counter[str]()
    rel = Counter[str]()
    pairs: list[tuple[float, bool]] = []
    for v in res.values():
        e.update(v["counts"])
        rel.update(v["relation_counts"])
        pairs += v["_pairs"]
    return {
        "entity_precision": round(e["correct"] / max(1, e["extracted"]), 3),
        "entity_recall": round(e["found"] / max(1, e["gold"]), 3),
        "typed_accuracy": round(e["typed"] / max(1, e["matched"]), 3),
        "relation_precision": round(rel["stated_correct"] / max(1, rel["stated"]), 3),
        "relation_recall": round(rel["found"] / max(1, rel["gold"]), 3),
        "relation_recall_typed": round(rel["found_typed"] / max(1, rel["gold"]), 3),
        "cooccurrence_pair_recall": round(rel["found_cooccurrence"] / max(1, rel["gold"]), 3),
        "reliability": reliability(pairs, floor),
    }


def table(res: dict[str, dict[str, Any]]) -> str:
    cols = [
        ("P", "entity_precision"),
        ("R", "entity_recall"),
        ("typed", "typed_accuracy"),
        ("relP", "relation_precision"),
        ("relR", "relation_recall"),
        ("relR typed", "relation_recall_typed"),
        ("head@200", "headings_top200"),
        ("ents/1k chunks", "entities_per_1000_chunks"),
    ]
    lines = ["kind      " + "".join(f"{c:>15}" for c, _ in cols)]
    for kind, v in res.items():
        lines.append(f"{kind:<10}" + "".join(f"{v.get(k, ''):>15}" for _, k in cols))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=["dev", "test", "all"], default="dev")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds")
    ap.add_argument(
        "--save", action="store_true", help="write bench/results/entity_gold-<commit>-<split>.json"
    )
    ap.add_argument("--keep", metavar="DIR", help="build the folders here and keep them")
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    bad = sorted(set(kinds) - set(KINDS))
    if bad:
        ap.error(f"unknown kind {', '.join(bad)} (hint: one of {', '.join(KINDS)})")
    out: dict[str, Any] = provenance.stamp()
    out["split"] = a.split
    res: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="entity-gold-") as tmp:
        work = Path(a.keep) if a.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for kind in kinds:
            res[kind] = run_kind(kind, a.split, work)
            print(f"{kind}: done", file=sys.stderr)
    floor = next(iter(res.values()))["floor"]
    out["overall"] = overall(res, floor)
    for v in res.values():
        v.pop("_pairs")
    out["kinds"] = res
    print(table(res), file=sys.stderr)
    print(json.dumps(out, indent=2, ensure_ascii=False))
    if a.save:
        provenance.save(out, a.split)


if __name__ == "__main__":
    main()
