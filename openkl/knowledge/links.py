"""Links between notes: `[[target]]`, `[[target|alias]]`, `[[target#heading]]` (Obsidian,
basic-memory) in a note become `LINKS_TO` edges.

The files are the truth: the edges are derived from the notes on disk whenever the graph
is brought in line with them, so `ok index` rebuilds them and `ok sync` after any change
sets every note's links again (a link whose target appears, is renamed or goes away
changes with it, in whichever note it stands).

A target is matched, in this order, as a note id, a note title, a document id, a document
title. A note's titles are its frontmatter `title`, its first `# heading` and its file
name without `.md` (a target written as a path, `[[folder/Note.md]]`, is matched by its
last part); titles are compared case-insensitively with runs of whitespace made
one. When several notes share a title the oldest note (then the smallest id) wins.
Links inside fenced code blocks and inline code are not links.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import OkError, UsageError
from ..files import notes as notes_mod
from ..files.folder import Folder
from ..graph.protocol import GraphStore
from ..records import (
    Backlink,
    Hop,
    LinkEdge,
    LinkEnd,
    NoteLink,
    NoteLinks,
    NoteRefsRow,
    Step,
    Traversal,
    WalkStart,
)

_LINK = re.compile(r"!?\[\[([^\[\]\n]+?)\]\]")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_H1 = re.compile(r"^#[ \t]+(.+?)[ \t#]*$")


@dataclass(frozen=True)
class Link:
    """One `[[…]]` as written in a note."""

    raw: str  # between the brackets
    target: str
    heading: str
    alias: str
    line: int  # in the note's file, from 1


def key(text: str) -> str:
    """How titles are compared: case-insensitive, runs of whitespace made one space."""
    return " ".join(text.split()).casefold()


def _prose_lines(body: str) -> Iterable[tuple[int, str]]:
    """(index, line) of the body's lines outside fenced code, inline code blanked out."""
    fence = ""
    for i, line in enumerate(body.split("\n")):
        m = _FENCE.match(line)
        if fence:
            if (
                m
                and m[1][0] == fence[0]
                and len(m[1]) >= len(fence)
                and not line[m.end() :].strip()
            ):
                fence = ""
            continue
        if m:
            fence = m[1]
            continue
        yield i, _CODE_SPAN.sub(lambda s: " " * len(s[0]), line)


def parse(body: str, first_line: int = 1) -> list[Link]:
    """The links in a note's body; `first_line` is the body's first line in the file."""
    out: list[Link] = []
    for i, line in _prose_lines(body):
        for m in _LINK.finditer(line):
            raw = m[1]
            target, _, alias = raw.partition("|")
            target = target.rstrip("\\")  # `[[a\|b]]` in a markdown table
            target, _, heading = target.partition("#")
            if not target.strip():
                continue  # `[[#heading]]` points into the note itself
            out.append(Link(raw, target.strip(), heading.strip(), alias.strip(), first_line + i))
    return out


def titles(note: notes_mod.Note) -> list[str]:
    """The names a `[[Title]]` link may give a note (see the module doc)."""
    out = []
    fm = note.extra.get("title")
    if isinstance(fm, str | int | float) and str(fm).strip():
        out.append(str(fm))
    for _, line in _prose_lines(note.body):
        m = _H1.match(line)
        if m:
            out.append(m[1])
            break
    if note.path is not None:
        out.append(note.path.stem)
    return out


class Named(NamedTuple):
    """What links need of a note: its id, `ts` (the oldest of a shared title wins), titles
    and the links in it."""

    id: str
    ts: str
    titles: list[str]
    links: list[Link]


def named(note: notes_mod.Note) -> Named:
    return Named(note.id, note.ts, titles(note), parse(note.body, note.body_line))


class Resolver:
    """Finds what a link's target names: a note id, note title, document id or title."""

    def __init__(
        self,
        notes: Iterable[Named],
        note_ids: Iterable[str] = (),
        doc_titles: dict[str, str] | None = None,
        doc_ids: Iterable[str] = (),
        docs: Callable[[], tuple[dict[str, str], Iterable[str]]] | None = None,
    ) -> None:
        """`docs`, instead of `doc_titles` and `doc_ids`: reads them when a link first
        names no note (most notes link to nothing, and a folder may hold many documents)."""
        notes = list(notes)
        self.note_ids = {n.id for n in notes} | set(note_ids)
        self.note_titles: dict[str, str] = {}
        for n in sorted(notes, key=lambda n: (n.ts, n.id)):
            for t in n.titles:
                self.note_titles.setdefault(key(t), n.id)
        self._docs = docs
        self.doc_ids: set[str] = set()
        self.doc_titles: dict[str, str] = {}
        if docs is None:
            self._know_docs(doc_titles or {}, doc_ids)

    def _know_docs(self, titles: dict[str, str], ids: Iterable[str]) -> None:
        self.doc_ids = set(titles) | set(ids)
        for did, t in sorted(titles.items()):
            if t.strip():
                self.doc_titles.setdefault(key(t), did)

    def resolve(self, target: str) -> tuple[str, str] | None:
        """(kind, id) of what `target` names, or None."""
        if target in self.note_ids:
            return "memory", target
        k = key(target)
        if k in self.note_titles:
            return "memory", self.note_titles[k]
        if self._docs is not None:
            read, self._docs = self._docs, None
            self._know_docs(*read())
        if target in self.doc_ids:
            return "doc", target
        if k in self.doc_titles:
            return "doc", self.doc_titles[k]
        # Obsidian writes `[[folder/Note]]` when a name is not unique in the vault
        name = target.rsplit("/", 1)[-1].removesuffix(".md")
        if name != target and name.strip():
            return self.resolve(name)
        return None


# -- in the graph ----------------------------------------------------------------------------
# Each indexed note's titles and links are kept beside it (`NoteRefs`), written with the
# note from its file: the edges can then be derived again from the graph alone, without
# reading every note's file, whenever a note or document comes or goes.
def record(g: GraphStore, notes: list[notes_mod.Note]) -> None:
    """Keep these notes' titles and links in the graph (their notes were just indexed)."""
    rows: list[NoteRefsRow] = []
    for n in notes:
        nm = named(n)
        rows.append(
            {
                "id": n.id,
                "titles": json.dumps(nm.titles, ensure_ascii=False),
                "links": json.dumps(
                    [[k.raw, k.target, k.heading, k.alias, k.line] for k in nm.links],
                    ensure_ascii=False,
                ),
            }
        )
    g.set_note_refs(rows)


def _from_graph(g: GraphStore) -> tuple[list[Named], Resolver]:
    ts = {r["id"]: r["ts"] for r in g.note_times()}
    notes = [
        Named(
            r["id"],
            ts[r["id"]],
            list(json.loads(r["titles"] or "[]")),
            [Link(*x) for x in json.loads(r["links"] or "[]")],
        )
        for r in g.note_refs()
        if r["id"] in ts
    ]
    return notes, Resolver(notes, ts, docs=lambda: (g.doc_titles(), g.docs()))


def edges(notes: Iterable[Named], res: Resolver) -> list[LinkEdge]:
    """The link edges these notes should have."""
    out: list[LinkEdge] = []
    for n in sorted(notes, key=lambda n: n.id):
        for link in n.links:
            hit = res.resolve(link.target)
            if hit is None:
                continue
            out.append(
                {
                    "src": n.id,
                    "kind": hit[0],
                    "dst": hit[1],
                    "text": link.target,
                    "heading": link.heading,
                    "alias": link.alias,
                    "line": link.line,
                }
            )
    return out


def _shape(e: LinkEdge) -> tuple[str, str, str, str, str, int]:
    return (e["kind"], e["dst"], e["text"], e["heading"], e["alias"], int(e["line"]))


def relink(g: GraphStore) -> None:
    """Make the link edges what the notes' recorded links name now, after any note or
    document came, changed or went. Only the notes whose edges differ are rewritten."""
    notes, res = _from_graph(g)
    want: dict[str, list[LinkEdge]] = {n.id: [] for n in notes}
    for e in edges(notes, res):
        want[e["src"]].append(e)
    have: dict[str, list[LinkEdge]] = {}
    for e in g.all_links():
        have.setdefault(e["src"], []).append(e)
    stale = [
        n
        for n in set(want) | set(have)
        if sorted(map(_shape, want.get(n, []))) != sorted(map(_shape, have.get(n, [])))
    ]
    if stale:
        g.unlink_notes(sorted(stale))
        g.add_links([e for n in sorted(stale) for e in want.get(n, [])])


@dataclass(frozen=True)
class Broken:
    """A link that matches no note (nor document)."""

    path: str
    line: int
    link: str  # as written, between the brackets

    def message(self) -> str:
        return f"{self.path}:{self.line}: [[{self.link}]] matches no note"


def broken(folder: Folder) -> list[Broken]:
    """Every link in the folder's notes (their files) that matches nothing, by path and
    line. Documents are known from the graph when it can be read, else from the mapping."""
    from ..files.mapping import load
    from ..graph.indexing import open_graph

    notes, _ = notes_mod.scan(folder)
    found = [named(n) for n in notes.values()]
    try:
        with open_graph(folder, write=False) as g:
            res = Resolver(found, (), g.doc_titles(), g.docs())
    except OkError:
        entries = load(folder)
        res = Resolver(
            found,
            doc_titles={
                d: e.get("title") or "" for d, e in entries.items() if e.get("current", True)
            },
            doc_ids=entries,
        )
    out = []
    for n in notes.values():
        assert n.path is not None
        for link in parse(n.body, n.body_line):
            if res.resolve(link.target) is None:
                out.append(Broken(folder.rel(n.path), link.line, link.raw))
    return sorted(out, key=lambda b: (b.path, b.line))


# -- reading the links ----------------------------------------------------------------------
def of_note(g: GraphStore, note: notes_mod.Note) -> NoteLinks:
    """A note's links as its file has them, each with what it points to (`to`, None when it
    matches nothing), and its backlinks: the links in other notes that point to it."""
    out_edges = {(e["line"], e["text"]): e for e in g.links_from([note.id])}
    back = g.links_to([note.id])
    ends = g.link_ends(
        sorted(
            {e["dst"] for e in out_edges.values() if e["kind"] == "memory"}
            | {e["src"] for e in back}
        ),
        sorted({e["dst"] for e in out_edges.values() if e["kind"] == "doc"}),
    )
    links: list[NoteLink] = []
    for link in parse(note.body, note.body_line):
        e = out_edges.get((link.line, link.target))
        to: LinkEnd | None = ends.get(e["dst"]) if e else None
        links.append(
            {
                "target": link.target,
                "heading": link.heading,
                "alias": link.alias,
                "line": link.line,
                "to": to,
            }
        )
    backlinks: list[Backlink] = []
    for e in back:
        src = ends.get(e["src"])
        backlinks.append(
            {
                "from": e["src"],
                "path": src["path"] if src else "",
                "title": src["title"] if src else "",
                "line": e["line"],
                "target": e["text"],
            }
        )
    return {"links": links, "backlinks": backlinks}


def find_note(g: GraphStore, name: str) -> LinkEnd | None:
    """The note `name` names as a link would (its id, else a title), if the graph has it."""
    found = _from_graph(g)[1].resolve(name)
    if found is None or found[0] != "memory":
        return None
    return g.link_ends([found[1]], []).get(found[1])


def walk(g: GraphStore, start: LinkEnd, depth: int = 2, limit: int = 200) -> Traversal:
    """Breadth-first walk from a note over LINKS_TO, both directions: the notes and
    documents it links to (`out`) and the notes that link to it (`in`)."""
    if depth < 0:
        raise UsageError("--depth must be 0 or more")
    ends: dict[tuple[str, str], LinkEnd] = {("memory", start["id"]): start}
    paths: dict[tuple[str, str], list[Hop]] = {("memory", start["id"]): []}
    steps: list[Step] = []
    frontier = [("memory", start["id"])]
    for d in range(1, depth + 1):
        if not frontier or len(steps) >= limit:
            break
        here_ids = {i for _, i in frontier}
        found: list[tuple[tuple[str, str], tuple[str, str], str, LinkEdge]] = []
        for e in g.links_from(sorted(i for k, i in frontier if k == "memory")):
            found.append((("memory", e["src"]), (e["kind"], e["dst"]), "out", e))
        for e in g.links_to(sorted(here_ids)):
            if (e["kind"], e["dst"]) in frontier:
                found.append(((e["kind"], e["dst"]), ("memory", e["src"]), "in", e))
        new = {there for _, there, _, _ in found if there not in paths}
        ends.update(
            {
                (v["kind"], v["id"]): v
                for v in g.link_ends(
                    sorted(i for k, i in new if k == "memory"),
                    sorted(i for k, i in new if k == "doc"),
                ).values()
            }
        )
        nxt: list[tuple[str, str]] = []
        for here, there, direction, e in found:
            if there in paths or there not in ends:
                continue
            a, b = ends[here], ends[there]
            hop: Hop = {
                "from": a["title"] or a["id"],
                "from_id": a["id"],
                "to": b["title"] or b["id"],
                "to_id": b["id"],
                "type": "LINKS_TO",
                "direction": direction,
                "confidence": 1.0,
                "evidence": f"line {e['line']}: [[{e['text']}]]",
            }
            paths[there] = paths[here] + [hop]
            steps.append(
                {
                    "entity": hop["to"],
                    "id": b["id"],
                    "kind": b["kind"],
                    "depth": d,
                    "via": hop,
                    "path": [start["title"] or start["id"]] + [h["to"] for h in paths[there]],
                    "hops": paths[there],
                }
            )
            nxt.append(there)
            if len(steps) >= limit:
                break
        frontier = nxt
    first: WalkStart = {
        "id": start["id"],
        "name": start["title"] or start["id"],
        "type": "note",
        "path": start["path"],
    }
    return {
        "start": first,
        "depth": depth,
        "rel": "LINKS_TO",
        "min_confidence": 0.0,
        "steps": steps,
        "truncated": len(steps) >= limit,
    }
