"""Entity pages: markdown built from the compiled graph, cached by a graph-version hash.

A page shows what the graph knows about one entity — description, relationships, and the
sources that contributed, with a citation (chunk span and quote) for each. The cache key
is a hash of the entity, its relationships (with the neighbours' names) and its
documents, so a page is regenerated exactly when one of those changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from ..entities.consolidation import min_confidence
from ..entities.queries import EntityReader, find_entity, list_entities
from ..files.folder import Folder, atomic_write, iso
from ..graph.protocol import GraphStore
from ..records import (
    Cite,
    Description,
    DescriptionCite,
    EntityDetail,
    EntityPage,
    PageBuilt,
    PagesWritten,
)
from .descriptions import EVIDENCE, describe_with, describer, split

RENDER = "5"  # bump when `render` changes, so cached pages are rebuilt


def _cache_path(folder: Folder, eid: str) -> Path:
    h = hashlib.sha256(eid.encode()).hexdigest()[:20]
    return folder.cache_dir / "pages" / f"{h}.json"


def confidence_label(c: float) -> str:
    return "HIGH" if c >= 0.75 else "MEDIUM" if c >= 0.5 else "LOW"


def page(folder: Folder, g: GraphStore, name: str, *, force: bool = False) -> EntityPage:
    """The page of one entity: {entity_name, markdown, generated_at, graph_version, cached, …}."""
    e = find_entity(g, name)
    return _pages(folder, g, [e["id"]], force=force)[e["id"]]


def _pages(
    folder: Folder, g: GraphStore, ids: list[str], *, force: bool = False
) -> dict[str, EntityPage]:
    """The pages of these entities, reading the graph once for all of them."""
    from .aks import entity_uuid

    reader = EntityReader(g, ids)
    floor = min_confidence(folder)
    # a page shows its description, and its relationships at least as confident as the floor
    render_key = f"{RENDER}:{describer(folder)}:{floor}"
    out: dict[str, EntityPage] = {}
    stale: dict[str, str] = {}
    for eid in ids:
        version = reader.version(eid)
        cp = _cache_path(folder, eid)
        if not force and cp.exists():
            try:
                cached = json.loads(cp.read_text(encoding="utf-8"))
                if cached.get("graph_version") == version and cached.get("render") == render_key:
                    out[eid] = cast(EntityPage, {**cached, "cached": True})
                    continue
            except ValueError:
                pass
        stale[eid] = version
    details = reader.details(folder, list(stale), cites=EVIDENCE)
    described = describe_with(folder, reader, list(stale), lambda s: details)
    for eid, version in stale.items():
        detail = details[eid]
        built: PageBuilt = {
            "entity_name": detail["name"],
            "markdown": render(detail, described[eid], floor),
            "generated_at": iso(),
            "source_entity_id": reader.rows[eid].get("ext_id") or entity_uuid(eid),
            "entity_id": eid,
            "graph_version": version,
            "source_type": "compiled",
            "render": render_key,
        }
        # a cache: losing it to a crash costs a rebuild, so it is not synced to disk
        atomic_write(
            _cache_path(folder, eid),
            json.dumps(built, ensure_ascii=False, sort_keys=True),
            durable=False,
        )
        out[eid] = {**built, "cached": False}
    return {eid: out[eid] for eid in ids}


def page_file(eid: str) -> str:
    """The file name of an entity's page in graph/pages/. The entity "index" cannot have
    index.md, the list of pages: its page is index-.md (no id ends in a hyphen)."""
    return "index-.md" if eid == "index" else f"{eid}.md"


def _link(name: str, eid: str) -> str:
    return f"[{name}]({page_file(eid)})"


def _cited(dc: DescriptionCite) -> str:
    loc = dc["loc"]
    return f"— cite: `{dc['id']}` ({dc['path']}, chars {loc['start']}–{loc['end']})"


def render(d: EntityDetail, desc: Description | None = None, floor: float = 0.0) -> str:
    """The page's markdown; relationships less confident than `floor` are left out, as
    every other view of the graph leaves them out."""
    lines = [f"# {d['name']}", ""]
    meta = [
        f"*{d['type']}*",
        f"confidence {d['confidence']:.2f} ({confidence_label(d['confidence'])})",
    ]
    if d["verified"]:
        meta.append("verified")
    meta.append(f"{len(d['docs'])} source{'s' if len(d['docs']) != 1 else ''}")
    lines += [" · ".join(meta), ""]
    if d["aliases"]:
        lines += ["Also known as: " + ", ".join(d["aliases"]), ""]
    desc, mention = split(desc)
    if desc is not None:
        lines += [desc["text"], "", _cited(desc["cite"]), ""]
    elif d["description"]:
        lines += [d["description"], ""]
    else:
        lines += ["_No source says what this entity is._", ""]
        if mention is not None:
            lines += [f"Named in: {mention['text']}", "", _cited(mention["cite"]), ""]
    rels = [r for r in d["relationships"] if r["confidence"] >= floor]
    if rels:
        lines += ["## Relationships", ""]
        for r in rels:
            if r["direction"] == "out":
                lines.append(
                    f"- {r['type'].replace('_', ' ')} → {_link(r['to_name'], r['to_id'])}"
                    f" ({r['confidence']:.2f})"
                )
            else:
                lines.append(
                    f"- ← {_link(r['from_name'], r['from_id'])} "
                    f"{r['type'].replace('_', ' ')} this ({r['confidence']:.2f})"
                )
        lines.append("")
    if d["sources"]:
        lines += ["## Sources", ""]
        quotes: dict[str, Cite] = {}
        for c in d["mentions"]:
            quotes.setdefault(c["doc_id"], c)
        for i, s in enumerate(d["sources"], 1):
            title = s["title"] or s["path"] or s["id"]
            where = f" — `{s['path']}`" if s["path"] else ""
            lines.append(f"{i}. {title}{where} ({s['kind']} {s['id']})")
            cite = quotes.get(s["id"])
            if cite:
                quote = _sentence_with(cite["quote"], d["name"], d["aliases"])
                lines.append(f"   > {quote}")
                lines.append(
                    f"   — cite: `{cite['id']}` ({cite['path']}, chars "
                    f"{cite['loc']['start']}–{cite['loc']['end']})"
                )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _sentence_with(text: str, name: str, aliases: list[str], width: int = 280) -> str:
    import re

    flat = " ".join(text.split())
    for n in [name, *aliases]:
        i = flat.lower().find(n.lower())
        if i >= 0:
            start = max(flat.rfind(". ", 0, i) + 2, 0) if flat.rfind(". ", 0, i) >= 0 else 0
            m = re.search(r"[.!?](\s|$)", flat[i:])
            end = i + m.end() if m else len(flat)
            s = flat[start:end].strip()
            return s if len(s) <= width else s[: width - 1] + "…"
    return flat if len(flat) <= width else flat[: width - 1] + "…"


BATCH = 256  # pages read from the graph at once: a few queries each, bounded memory


def all_pages(
    folder: Folder, g: GraphStore, min_confidence: float = 0.0, *, force: bool = False
) -> Iterator[tuple[str, str, bool | None]]:
    """Every page of an entity at or above a confidence, by name, as (file name in
    graph/pages/, markdown, whether it came from the cache), built a batch at a time; then
    the index of them, as ("index.md", markdown, None)."""
    ents = sorted(
        list_entities(g, min_confidence=min_confidence), key=lambda e: (e["name"].lower(), e["id"])
    )
    index = ["# Entities", ""]
    for i in range(0, len(ents), BATCH):
        batch = ents[i : i + BATCH]
        built = _pages(folder, g, [e["id"] for e in batch], force=force)
        for e in batch:
            p = built[e["id"]]
            yield page_file(e["id"]), p["markdown"], p["cached"]
            index.append(f"- {_link(e['name'], e['id'])} — {e['type']}, {e['confidence']:.2f}")
    yield "index.md", "\n".join(index) + "\n", None


def write_all(
    folder: Folder,
    g: GraphStore,
    min_confidence: float = 0.0,
    out_dir: Path | None = None,
    *,
    force: bool = False,
) -> PagesWritten:
    """Every page of an entity at or above a confidence into graph/pages/, plus an index.
    Pages left from an earlier run whose entity is gone or now below the confidence are
    removed, so the folder holds what the index lists."""
    out_dir = out_dir or folder.graph_dir / "pages"
    regenerated = cached = 0
    written: set[str] = set()
    for name, text, was_cached in all_pages(folder, g, min_confidence, force=force):
        path = out_dir / name
        written.add(name)
        if was_cached is None:  # the index
            atomic_write(path, text)
            continue
        cached += was_cached
        regenerated += not was_cached
        if not _holds(path, text):
            # derived from the graph, like the cache: rebuilt by the next run if lost
            atomic_write(path, text, durable=False)
    removed = 0
    for old in out_dir.glob("*.md"):
        if old.name not in written:
            old.unlink(missing_ok=True)
            removed += 1
    return {
        "dir": folder.rel(out_dir),
        "pages": len(written) - 1,
        "regenerated": regenerated,
        "cached": cached,
        "removed": removed,
    }


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        return False
