"""Citations anyone can verify, even after the files change.

A citation is a cite object (the same shape search hits have) with a deterministic id
(`c-` + hash of what it cites: doc id + char span). It carries the exact quote and a bit of
text on either side, so verification never depends on offsets alone: `verify` re-opens the
files and looks for the quote where it was, in the same content under another path, in the
newer versions linked by `superseded_by` (mapping.jsonl), and in a file edited in place.
It reports one of:

- **verified**: the quote is at the recorded span of the recorded file, whose hash matches;
- **moved**: the exact quote was found, but the path, the span or the document version
  differs (listed in `changes`);
- **changed**: only a close fuzzy match remains (`similarity`, the new span and quote);
- **missing**: nothing close enough; `reason` says whether the document or the quote went.

Everything here works from the files: the graph is never consulted. Persisted citations
live in `citations/<id>.json`; transient ones (printed by `ok cite make`) are remembered in
`.ok/cache/citations/` so that `ok cite open ID` works right after, until `ok cite gc`.
"""

from __future__ import annotations

import bisect
import difflib
import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..errors import BadInput, NotFound, UsageError
from ..files import ids
from ..files import mapping as mapping_mod
from ..files.folder import LINK_OUT, Folder, atomic_write, check_path, iso, shown
from ..records import (
    Cite,
    CiteContext,
    CiteGcReport,
    CitePassage,
    CiteStatus,
    FileProblem,
    FoundAt,
    MappingEntry,
    Source,
    new_cite,
    note_title,
    with_abs_path,
)
from ..text.chunking import _strip as _strip_span  # whitespace trimmed off a span

TYPES = ("doc", "chunk", "memory")
STATUSES = ("verified", "moved", "changed", "missing")
PASSING = frozenset({"verified", "moved"})
RETENTION_CLASSES = ("standard", "keep", "ephemeral")
# other names for them: the OpenKL RFC's `--retention-class durable` is keep
RETENTION_ALIASES = {"durable": "keep"}


def retention_named(name: str | None) -> str | None:
    """A retention class by any of its names (None stays None); unknown ones are refused."""
    if name is None:
        return None
    got = RETENTION_ALIASES.get(name.strip().lower(), name.strip().lower())
    if got not in RETENTION_CLASSES:
        raise UsageError(
            f"unknown retention class {name!r}",
            "use one of: " + ", ".join(RETENTION_CLASSES) + " (durable is keep)",
        )
    return got


CONTEXT_CHARS = 120  # same as search.CONTEXT_CHARS, kept here so search stays unimported

CITE_ID = re.compile(r"^c-[0-9a-f]{16}\Z")
DOC_ID = re.compile(r"^[0-9a-f]{16}\Z")
NOTE_ID = re.compile(r"^m-\d{8}-[a-z0-9]{4}\Z")
SPAN_REF = re.compile(r"^(?P<owner>[0-9a-f]{16}|m-\d{8}-[a-z0-9]{4})#char(?P<s>\d+)-(?P<e>\d+)\Z")
_RANGE = re.compile(r"^\s*(\d+)\s*(?:[-:]\s*(\d+))?\s*$")
_WORD = re.compile(r"\w+", re.U)
_HASH_HINT = "list citations with `ok cite list`; transient ones last until `ok cite gc`"


def cite_id(owner: str, start: int, end: int) -> str:
    """The deterministic id of a citation of `owner` (doc or memory id), chars [start, end)."""
    return "c-" + hashlib.sha256(f"{owner}#char{start}-{end}".encode()).hexdigest()[:16]


def is_ref(value: str) -> bool:
    """Whether `value` looks like something `make` can cite by id (not a path)."""
    return bool(
        CITE_ID.match(value) or DOC_ID.match(value) or NOTE_ID.match(value) or SPAN_REF.match(value)
    )


# -- reading files ------------------------------------------------------------------------
@dataclass
class FileText:
    """One file's text as citations see it (docs: universal newlines, like the indexer)."""

    path: str
    text: str
    sha256: str
    doc_id: str
    _tokens: list[tuple[str, int, int]] | None = field(default=None, repr=False)
    _index: dict[str, list[int]] | None = field(default=None, repr=False)

    @property
    def tokens(self) -> list[tuple[str, int, int]]:
        if self._tokens is None:
            self._tokens = _tokenize(self.text)
        return self._tokens

    @property
    def index(self) -> dict[str, list[int]]:
        if self._index is None:
            idx: dict[str, list[int]] = defaultdict(list)
            for i, (w, _, _) in enumerate(self.tokens):
                idx[w].append(i)
            self._index = dict(idx)
        return self._index


def _tokenize(text: str) -> list[tuple[str, int, int]]:
    return [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(text)]


def _decode(raw: bytes, kind: str) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if kind == "doc":
        # the indexer reads docs with universal newlines; chunk offsets are into that text
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


class Files:
    """Cached reads of the folder's files for one operation (make, verify, gc …)."""

    def __init__(self, folder: Folder) -> None:
        self.folder = folder
        self._read: dict[tuple[str, str], FileText | None] = {}
        self._entries: dict[str, MappingEntry] | None = None
        self._by_hash: dict[str, str] | None = None
        self._notes: dict[str, str] | None = None

    @property
    def entries(self) -> dict[str, MappingEntry]:
        if self._entries is None:
            self._entries = mapping_mod.load(self.folder)
        return self._entries

    def read(self, rel: str, kind: str = "doc") -> FileText | None:
        """The file at `rel` (relative to the root), or None when it is absent or unreadable."""
        key = (rel, kind)
        if key not in self._read:
            self._read[key] = None
            p = self.folder.root / rel
            try:
                raw = p.read_bytes() if rel and p.is_file() else None
            except OSError:
                raw = None
            if raw is not None:
                text = _decode(raw, kind)
                if text is not None:
                    self._read[key] = FileText(
                        path=rel,
                        text=text,
                        doc_id=hashlib.sha256(raw).hexdigest()[:16],
                        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                    )
        return self._read[key]

    def forget(self, rel: str) -> None:
        for kind in ("doc", "memory"):
            self._read.pop((rel, kind), None)

    def by_hash(self) -> dict[str, str]:
        """{doc id: path} of every normalized doc and kept old version (built once, lazily)."""
        if self._by_hash is None:
            found: dict[str, str] = {}
            dirs = [self.folder.normalized_dir, versions_dir(self.folder)]
            for d in dirs:
                for p in self.folder.files_under(d, ".ok.md").files:
                    try:
                        did = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
                    except OSError:
                        continue
                    found.setdefault(did, self.folder.rel(p))
            self._by_hash = found
        return self._by_hash

    def doc(self, doc_id: str) -> FileText | None:
        """The text whose content hash is `doc_id`, wherever it lives now."""
        e = self.entries.get(doc_id)
        if e and e.get("path"):
            ft = self.read(e["path"])
            if ft and ft.doc_id == doc_id:
                return ft
        rel = self.by_hash().get(doc_id)
        return self.read(rel) if rel else None

    def note_path(self, note_id: str) -> str | None:
        """Where the note with this id lives (ids survive edits; paths normally do too)."""
        from ..files.notes import guessed_path

        guess = guessed_path(self.folder, note_id)
        if guess is not None and guess.is_file():
            return self.folder.rel(guess)
        if self._notes is None:
            from ..files import notes as notes_mod

            found, _ = notes_mod.scan(self.folder)
            self._notes = {
                i: self.folder.rel(n.path) for i, n in found.items() if n.path is not None
            }
        return self._notes.get(note_id)


def supersede_chain(entries: dict[str, MappingEntry], doc_id: str) -> list[str]:
    """The ids of the versions that replaced `doc_id`, oldest first (empty when current)."""
    did, chain, seen = doc_id, [], {doc_id}
    while (e := entries.get(did)) and e.get("superseded_by"):
        nxt = e["superseded_by"]
        if nxt in seen:
            break
        seen.add(nxt)
        chain.append(nxt)
        did = nxt
    return chain


def versions_dir(folder: Folder) -> Path:
    return folder.ok_dir / "versions"


def transient_dir(folder: Folder) -> Path:
    return folder.cache_dir / "citations"


# -- making citations ------------------------------------------------------------------------
def parse_range(value: str, what: str) -> tuple[int, int]:
    """`a-b` (or `a`) as two ints; a usage error names the option when it is not a range."""
    m = _RANGE.match(value or "")
    if not m:
        raise UsageError(f"{what} {value!r} is not a range", f"write {what} 3-7")
    a = int(m[1])
    b = int(m[2]) if m[2] is not None else a
    if b < a:
        raise UsageError(f"{what} {value}: the end comes before the start", f"write {what} {b}-{a}")
    return a, b


def line_span(text: str, first: int, last: int, where: str) -> tuple[int, int]:
    """Char span of lines `first`..`last` (1-based, inclusive), without the final newline."""
    lines = text.splitlines(keepends=True)
    if first < 1:
        raise BadInput(f"--lines {first}-{last}: lines are numbered from 1", "use --lines 1-…")
    if last > len(lines):
        raise BadInput(
            f"--lines {first}-{last} is past the end of {where} ({len(lines)} lines)",
            f"use line numbers up to {len(lines)}",
        )
    start = sum(len(x) for x in lines[: first - 1])
    end = start + sum(len(x) for x in lines[first - 1 : last])
    while end > start and text[end - 1] in "\r\n":
        end -= 1
    return start, end


def _check_span(text: str, start: int, end: int, where: str, what: str) -> None:
    if not 0 <= start < end <= len(text):
        raise BadInput(
            f"{what} {start}-{end} is out of range for {where} ({len(text)} chars)",
            f"use a span within 0-{len(text)}, start before end",
        )
    if not text[start:end].strip():
        raise BadInput(
            f"{what} {start}-{end} of {where} holds only whitespace",
            "cite a span with some text in it",
        )


def _context(text: str, start: int, end: int) -> CiteContext:
    return {
        "pre": text[max(0, start - CONTEXT_CHARS) : start],
        "post": text[end : end + CONTEXT_CHARS],
    }


def _doc_meta(files: Files, doc_id: str, ft: FileText) -> tuple[str, Source]:
    from ..text.normalize import title_of

    entry = files.entries.get(doc_id) or {"id": doc_id, "path": ft.path}
    source = entry.get("source") or {"path": ft.path}
    return entry.get("title") or title_of(ft.text, Path(ft.path).name), source.copy()


def _doc_cite(files: Files, ft: FileText, start: int, end: int, whole: bool) -> Cite:
    title, source = _doc_meta(files, ft.doc_id, ft)
    return new_cite(
        "doc" if whole else "chunk",
        cite_id(ft.doc_id, start, end),
        ft.doc_id,
        ft.path,
        ft.sha256,
        title,
        start,
        end,
        ft.text[start:end],
        _context(ft.text, start, end),
        source,
        iso(),
        ref=ft.doc_id if whole else f"{ft.doc_id}#char{start}-{end}",
        root=files.folder.root,
    )


def _note_cite(files: Files, ft: FileText, note_id: str, start: int, end: int, whole: bool) -> Cite:
    quote = ft.text[start:end]
    return new_cite(
        "memory",
        cite_id(note_id, start, end),
        note_id,
        ft.path,
        ft.sha256,
        note_title(quote),
        start,
        end,
        quote,
        _context(ft.text, start, end),
        {"path": ft.path},
        iso(),
        ref=note_id if whole else f"{note_id}#char{start}-{end}",
        root=files.folder.root,
    )


def make(
    folder: Folder,
    ref: str,
    *,
    lines: str | None = None,
    chars: str | None = None,
    files: Files | None = None,
    cwd: Path | None = None,
) -> Cite:
    """A citation of `ref`: a citation id, chunk id, doc id, memory id, or a path.

    `lines` ("a-b", 1-based inclusive) or `chars` ("a-b", 0-based, end exclusive) pick a
    span of a doc, a note or a path. Nothing is written.
    """
    files = files or Files(folder)
    if lines and chars:
        raise UsageError("give --lines or --chars, not both")
    ref = ref.strip()
    if not ref:
        raise BadInput("empty citation reference", "pass an id or a path")
    if CITE_ID.match(ref):
        if lines or chars:
            raise UsageError(f"{ref} is already a citation; --lines/--chars do not apply")
        return load(folder, ref)
    m = SPAN_REF.match(ref)
    if m:
        if lines or chars:
            raise UsageError(
                f"{ref} already names a span; drop --lines/--chars",
                f"or cite {m['owner']} --lines …",
            )
        owner, span = m["owner"], (int(m["s"]), int(m["e"]))
    elif DOC_ID.match(ref) or NOTE_ID.match(ref):
        owner, span = ref, None
    elif "#char" in ref:
        raise BadInput(
            f"'{shown(ref)}' is not a valid chunk id",
            "chunk ids look like <16 hex digits>#char<start>-<end>",
        )
    else:
        return _make_from_path(folder, files, ref, lines, chars, cwd)
    if NOTE_ID.match(owner):
        rel = files.note_path(owner)
        ft = files.read(rel, "memory") if rel else None
        if ft is None:
            raise NotFound(f"no memory note with id {owner}", "list notes with `ok mem list`")
        return _span_of_note(folder, files, ft, owner, span, lines, chars)
    ft = files.doc(owner)
    if ft is None:
        entry = files.entries.get(owner)
        if entry and entry.get("superseded_by"):
            newest = supersede_chain(files.entries, owner)[-1]
            raise NotFound(
                f"document {owner} was replaced by {newest} and the text of the old "
                "version was not kept (it was edited in place)",
                f"cite the current version: `ok cite make {newest} --lines …`, or "
                "search again for fresh ids",
            )
        if entry:
            raise BadInput(
                f"document {owner} changed on disk since it was indexed ({entry.get('path')})",
                "run `ok sync`, then search again for fresh ids",
            )
        raise NotFound(f"no document with id {owner}", "list documents with `ok store list`")
    return _span_of_doc(folder, files, ft, span, lines, chars)


def _span_of_doc(
    folder: Folder,
    files: Files,
    ft: FileText,
    span: tuple[int, int] | None,
    lines: str | None,
    chars: str | None,
) -> Cite:
    if span is not None:
        _check_span(ft.text, span[0], span[1], ft.path, "span")
        return _doc_cite(files, ft, span[0], span[1], whole=False)
    if lines:
        s, e = line_span(ft.text, *parse_range(lines, "--lines"), ft.path)
        _check_span(ft.text, s, e, ft.path, "--lines")
        return _doc_cite(files, ft, s, e, whole=False)
    if chars:
        s, e = parse_range(chars, "--chars")
        _check_span(ft.text, s, e, ft.path, "--chars")
        return _doc_cite(files, ft, s, e, whole=False)
    s, e = _strip_span(ft.text, 0, len(ft.text))
    if s >= e:
        raise BadInput(f"{ft.path} is empty", "cite a document with some text in it")
    return _doc_cite(files, ft, s, e, whole=True)


def _span_of_note(
    folder: Folder,
    files: Files,
    ft: FileText,
    note_id: str,
    span: tuple[int, int] | None,
    lines: str | None,
    chars: str | None,
) -> Cite:
    from ..files.notes import parse_note

    if span is None and lines:
        span = line_span(ft.text, *parse_range(lines, "--lines"), ft.path)
        what = "--lines"
    elif span is None and chars:
        span = parse_range(chars, "--chars")
        what = "--chars"
    else:
        what = "span"
    if span is not None:
        _check_span(ft.text, span[0], span[1], ft.path, what)
        return _note_cite(files, ft, note_id, span[0], span[1], whole=False)
    note = parse_note(ft.text, ft.path)
    s = note.body_start
    e = s + len(note.body)
    if not note.body.strip() or ft.text[s:e] != note.body:
        raise BadInput(f"{ft.path} has no body to cite", "cite a span with --lines or --chars")
    return _note_cite(files, ft, note_id, s, e, whole=True)


def _make_from_path(
    folder: Folder, files: Files, ref: str, lines: str | None, chars: str | None, cwd: Path | None
) -> Cite:
    from ..files.notes import parse_note

    check_path(ref, "reference")
    p = Path(ref).expanduser()
    if not p.is_absolute() and (Path(cwd or Path.cwd()) / p).exists():
        p = Path(cwd or Path.cwd()) / p
    full = folder.inside(p)
    if not full.is_file():
        if ref.startswith("c-") and "/" not in ref:
            raise NotFound(
                f"no citation with id {ref}",
                "list citations with `ok cite list`; ids look like c-<16 hex digits>",
            )
        if ref.startswith("m-") and "/" not in ref:
            raise NotFound(
                f"no memory note with id {ref}",
                "list notes with `ok mem list`; ids look like m-YYYYMMDD-xxxx",
            )
        raise NotFound(
            f"no such file: {shown(ref)}",
            "pass a normalized doc (store/normalized/…), "
            "a memory note, or an id from `ok search --json`",
        )
    rel = folder.rel(full)
    in_docs = folder.normalized_dir in full.parents or versions_dir(folder) in full.parents
    if in_docs and full.name.endswith(".ok.md"):
        ft = files.read(rel)
        if ft is None:
            raise BadInput(f"{rel} is not valid UTF-8", "re-save it as UTF-8, then `ok sync`")
        return _span_of_doc(folder, files, ft, None, lines, chars)
    if folder.by_date_dir in full.parents and full.suffix == ".md":
        ft = files.read(rel, "memory")
        if ft is None:
            raise BadInput(f"{rel} is not valid UTF-8", "re-save the note as UTF-8")
        note = parse_note(ft.text, rel, full)
        return _span_of_note(folder, files, ft, note.id, None, lines, chars)
    raise BadInput(
        f"{rel} is neither a normalized document nor a memory note",
        "cite store/normalized/…/*.ok.md or memories/by_date/…/*.md "
        "(ingest other files with `ok store ingest` first)",
    )


# -- persisted and transient citations -----------------------------------------------------------
def citation_path(folder: Folder, cid: str) -> Path:
    """Where citation `cid` is kept (an id that is not a citation id is a `BadInput`)."""
    return folder.citations_dir / f"{ids.CITATION.check(cid)}.json"


def _dump(cite: Cite) -> str:
    # stored citations stay portable: paths relative to the root, no `abs_path`
    return json.dumps(with_abs_path(cite, None), ensure_ascii=False, indent=2) + "\n"


def _read_json_file(folder: Folder, p: Path) -> Cite:
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput(f"{folder.rel(p)} is not valid JSON", "fix or delete the file") from e
    return check(folder, data, folder.rel(p))


def load(folder: Folder, cid: str) -> Cite:
    """A persisted citation by id (or a transient one still in the cache)."""
    ids.CITATION.check(cid)
    for p in (citation_path(folder, cid), transient_dir(folder) / f"{cid}.json"):
        if p.is_file():
            return _read_json_file(folder, p)
    raise NotFound(f"no citation with id {cid}", _HASH_HINT)


def is_persisted(folder: Folder, cid: str) -> bool:
    return ids.CITATION.valid(cid) and citation_path(folder, cid).is_file()


def persist(
    folder: Folder,
    cite: Cite,
    tags: list[str] | None = None,
    retention_class: str | None = None,
    moved: bool = False,
) -> Cite:
    """Write `citations/<id>.json` (the caller holds the writer lock).

    Re-persisting the same citation keeps its created_at and history and merges the tags;
    a `moved` one (from `updated`) takes its new place, as `verify --update` writes it.
    """
    retention_class = retention_named(retention_class)
    out = cite.copy()
    p = citation_path(folder, cite["id"])
    old: dict[str, Any] = {}
    if p.is_file():
        try:
            old = json.loads(p.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            old = {}
    if old:
        newer = cite.items() if moved else ((k, v) for k, v in cite.items() if k not in old)
        out = cast(Cite, {**old, **dict(newer)})
    merged = list(
        dict.fromkeys([*(old.get("tags") or []), *(cite.get("tags") or []), *(tags or [])])
    )
    out["tags"] = merged
    out["retention_class"] = (
        retention_class or old.get("retention_class") or cite.get("retention_class") or "standard"
    )
    atomic_write(p, _dump(out))
    transient = transient_dir(folder) / p.name
    if transient.exists():
        transient.unlink()
    return with_abs_path(out, folder.root)


def remember(folder: Folder, cite: Cite) -> None:
    """Keep a transient citation in the cache so `ok cite open ID` finds it (one whose id
    is not a citation id, a search hit's, cannot be opened by it, and is not kept)."""
    if ids.CITATION.valid(cite["id"]) and not is_persisted(folder, cite["id"]):
        atomic_write(transient_dir(folder) / f"{cite['id']}.json", _dump(cite))


def list_citations(folder: Folder) -> tuple[list[Cite], list[FileProblem]]:
    """Every persisted citation, plus (path, problem) for files that cannot be read."""
    out: list[Cite] = []
    listing = folder.files_under(folder.citations_dir, ".json", recursive=False)
    problems: list[FileProblem] = [
        {"path": folder.named(p), "problem": LINK_OUT} for p in listing.outside
    ]
    for p in listing.files:
        try:
            cite = _read_json_file(folder, p)
            # gc removes a citation by its id: the file must be the one its id names
            if cite["id"] != p.stem:
                raise BadInput(
                    f"{folder.rel(p)} holds citation {shown(cite['id'])}, not {p.stem}",
                    "rename the file after the id it holds, or make the citation again",
                )
        except BadInput as e:
            problems.append({"path": folder.rel(p), "problem": str(e)})
            continue
        out.append(cite)
    return out, problems


# -- validating cite objects ------------------------------------------------------------------
def check(folder: Folder, obj: Any, where: str) -> Cite:
    """Validate a cite object from a file or stdin; returns a normalized copy."""
    hint = "pass cite objects as printed by `ok cite make --json` or `ok search --json`"
    if not isinstance(obj, dict):
        raise BadInput(f"{where}: a cite object must be a JSON object", hint)
    for key, typ in (("quote", str), ("path", str), ("sha256", str), ("loc", dict)):
        if not isinstance(obj.get(key), typ) or not obj.get(key):
            raise BadInput(f"{where}: cite object has no valid `{key}`", hint)
    loc = obj["loc"]
    s, e = loc.get("start"), loc.get("end")
    if not (
        isinstance(s, int)
        and isinstance(e, int)
        and not isinstance(s, bool)
        and not isinstance(e, bool)
        and 0 <= s < e
    ):
        raise BadInput(f"{where}: `loc` needs integer start < end", hint)
    if loc.get("kind", "char") != "char":
        raise BadInput(f"{where}: only char spans are supported (loc.kind = char)", hint)
    type_ = obj.get("type") or "chunk"
    if type_ not in TYPES:
        raise BadInput(f"{where}: unknown cite type {type_!r}", "use one of: " + ", ".join(TYPES))
    try:
        full = folder.inside(obj["path"])
    except BadInput as err:
        raise BadInput(
            f"{where}: the citation points outside the knowledge folder ({obj['path']})",
            "cite files inside the folder",
        ) from err
    doc_id = obj.get("doc_id")
    if type_ == "memory":
        doc_id = doc_id or (obj.get("id") if NOTE_ID.match(str(obj.get("id"))) else None)
        if not (isinstance(doc_id, str) and NOTE_ID.match(doc_id)):
            raise BadInput(f"{where}: memory citation without a valid note id in `doc_id`", hint)
    else:
        doc_id = doc_id or obj["sha256"][:16]
        if not (isinstance(doc_id, str) and DOC_ID.match(doc_id)):
            raise BadInput(f"{where}: `doc_id` must be 16 hex digits", hint)
    out = cast(Cite, dict(obj))  # keys beyond the checked ones are kept as given
    out.update(
        {
            "type": type_,
            "doc_id": doc_id,
            "path": folder.rel(full),
            "loc": {"kind": "char", "start": s, "end": e},
        }
    )
    given = obj.get("id")
    if given is not None and not (isinstance(given, str) and is_ref(given)):
        # it names the file the citation is kept in: nothing else may
        raise BadInput(f"{where}: {ids.CITATION.problem(given)}", ids.CITATION.form)
    out["id"] = given or cite_id(doc_id, s, e)
    ctx: dict[str, Any] = obj["context"] if isinstance(obj.get("context"), dict) else {}
    out["context"] = {"pre": str(ctx.get("pre") or ""), "post": str(ctx.get("post") or "")}
    return with_abs_path(out, folder.root)  # this folder's, whatever the input said


def parse_input(folder: Folder, text: str, where: str) -> list[str | Cite]:
    """Items from stdin or a file: a JSON array or object, JSON lines, or one id per line.

    Lines that are not JSON contribute their first field that is an id, so the plain output
    of `ok cite make`, `ok cite list`, `ok cite verify` or `ok search` pipes straight in;
    lines that start with a tab continue the line before (snippets, diagnostics) and are
    skipped.
    """
    stripped = text.strip()
    if not stripped:
        return []
    if stripped[0] in "[{":
        try:
            data = json.loads(stripped)
        except ValueError:
            data = None
        if data is not None:
            items = data if isinstance(data, list) else [data]
            return [_item(folder, x, f"{where} item {i}") for i, x in enumerate(items, 1)]
    out: list[str | Cite] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or raw.startswith("\t"):
            continue
        if line[0] in '[{"':
            try:
                data = json.loads(line)
            except json.JSONDecodeError as e:
                raise BadInput(
                    f"{where} line {n} is not valid JSON ({e.msg})",
                    "pass one cite object per line, a JSON array, or one id per line",
                ) from e
            for x in data if isinstance(data, list) else [data]:
                out.append(_item(folder, x, f"{where} line {n}"))
            continue
        fields = [line.split()[0], *(f.strip() for f in line.split("\t"))]
        token = next((t for t in fields if is_ref(t)), None)
        if token is None:
            raise BadInput(
                f"{where} line {n}: {line.split()[0]!r} is neither an id nor JSON",
                "pass ids (c-…, <doc>#char…, m-…) or cite objects",
            )
        out.append(token)
    return out


def _item(folder: Folder, x: Any, where: str) -> str | Cite:
    if isinstance(x, str):
        if not is_ref(x.strip()):
            raise BadInput(f"{where}: {x!r} is not an id", "pass ids or cite objects")
        return x.strip()
    return check(folder, x, where)


# -- finding quotes ------------------------------------------------------------------------------
def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _common_suffix(a: str, b: str) -> int:
    return _common_prefix(a[::-1], b[::-1])


def find_exact(
    text: str, quote: str, hint: int = 0, pre: str = "", post: str = "", limit: int = 10000
) -> int | None:
    """Start of the occurrence of `quote` that best fits its old context (then position)."""
    occ: list[int] = []
    i = text.find(quote)
    while i != -1 and len(occ) < limit:
        occ.append(i)
        i = text.find(quote, i + 1)
    if not occ:
        return None
    if len(occ) == 1:
        return occ[0]
    n = len(quote)

    def fit(i: int) -> tuple[int, int]:
        before = _common_suffix(pre, text[max(0, i - len(pre)) : i])
        after = _common_prefix(post, text[i + n : i + n + len(post)])
        return before + after, -abs(i - hint)

    return max(occ, key=fit)


def similarity(a: str, b: str) -> float:
    """difflib ratio of two strings (by words when both are long, to stay fast)."""
    if a == b:
        return 1.0
    if len(a) + len(b) > 8000:
        return difflib.SequenceMatcher(
            None, _WORD.findall(a), _WORD.findall(b), autojunk=False
        ).ratio()
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def find_fuzzy(ft: FileText, quote: str, hint: int = 0) -> tuple[int, int, float] | None:
    """The passage of `ft` closest to `quote`: (start, end, similarity), or None.

    Candidate places come from word votes (each quote word found in the text votes for where
    the quote would start), plus the old position; each is aligned word by word and scored
    with difflib's ratio on characters.
    """
    qt = _tokenize(quote)
    tt = ft.tokens
    if not qt or not tt:
        return None
    nq, nt = len(qt), len(tt)
    votes: dict[int, float] = defaultdict(float)
    cap = max(50, nt // 20)
    for i, (w, _, _) in enumerate(qt):
        occ = ft.index.get(w)
        if not occ or len(occ) > cap:
            continue
        weight = 1.0 / len(occ) ** 0.5
        for j in occ:
            votes[j - i] += weight
    tol = max(2, nq // 5)
    keys = sorted(votes)
    sums = [0.0]
    for k in keys:
        sums.append(sums[-1] + votes[k])
    ranked = sorted(votes, key=lambda o: -votes[o])[:40]
    # votes near each other count together: insertions and deletions shift the start a bit
    smooth = {
        o: sums[bisect.bisect_right(keys, o + tol)] - sums[bisect.bisect_left(keys, o - tol)]
        for o in ranked
    }
    starts: list[int] = []
    for o in sorted(smooth, key=lambda o: (-smooth[o], o)):
        if all(abs(o - s) > max(tol, nq // 2) for s in starts):
            starts.append(o)
        if len(starts) >= 3:
            break
    starts.append(bisect.bisect_left([s for _, s, _ in tt], hint))
    best: tuple[int, int, float] | None = None
    slack = max(3, nq // 3)
    for o in starts:
        a, b = max(0, o - slack), min(nt, o + nq + slack)
        if a >= b:
            continue
        cand = _align(ft.text, tt, a, b, qt, quote)
        if cand and (best is None or cand[2] > best[2]):
            best = cand
    return best


def _align(
    text: str,
    tt: list[tuple[str, int, int]],
    a: int,
    b: int,
    qt: list[tuple[str, int, int]],
    quote: str,
) -> tuple[int, int, float] | None:
    window = [w for w, _, _ in tt[a:b]]
    qwords = [w for w, _, _ in qt]
    blocks = [
        m
        for m in difflib.SequenceMatcher(None, window, qwords, autojunk=False).get_matching_blocks()
        if m.size
    ]
    if not blocks:
        return None
    first, last = blocks[0], blocks[-1]
    spans = {(first.a, last.a + last.size)}
    # words of the quote that no longer match at either end were probably replaced there
    spans.add(
        (
            max(0, first.a - first.b),
            min(b - a, last.a + last.size + (len(qwords) - last.b - last.size)),
        )
    )
    best: tuple[int, int, float] | None = None
    lead, trail = quote[: qt[0][1]], quote[qt[-1][2] :]
    for n, (ws, we) in enumerate(sorted(spans, key=lambda x: x[0] - x[1])):
        if we <= ws:
            continue
        s, e = tt[a + ws][1], tt[a + we - 1][2]
        if lead and text[max(0, s - len(lead)) : s] == lead:
            s -= len(lead)
        if trail and text[e : e + len(trail)] == trail:
            e += len(trail)
        sim = similarity(text[s:e], quote)
        # the widest span keeps the words that replaced the quote's own; a narrower one must
        # be clearly closer to win (a ratio favours dropping a replaced word by a hair)
        if best is None or sim > best[2] + (0.05 if n else 0.0):
            best = (s, e, sim)
    return best


# -- verification ----------------------------------------------------------------------------------
@dataclass
class Target:
    """The text a citation's quote is looked for in, and how it relates to the cited one."""

    ft: FileText
    relation: str  # "same" (same content) or "newer" (a later version)
    notes: list[str] = field(default_factory=list)


class Verifier:
    """Verifies cite objects against the folder's files (one instance per batch: it caches)."""

    def __init__(self, folder: Folder, min_similarity: float | None = None) -> None:
        self.folder = folder
        self.files = Files(folder)
        self.min_similarity = float(
            min_similarity if min_similarity is not None else folder.setting("cite.min_similarity")
        )

    # locating texts
    def _original(self, cite: Cite) -> FileText | None:
        kind = "memory" if cite["type"] == "memory" else "doc"
        ft = self.files.read(cite["path"], kind)
        if ft and ft.sha256 == cite["sha256"]:
            return ft
        if kind == "memory":
            rel = self.files.note_path(cite["doc_id"])
            ft = self.files.read(rel, kind) if rel else None
            return ft if ft and ft.sha256 == cite["sha256"] else None
        return self.files.doc(cite["doc_id"])

    def _newer(self, cite: Cite) -> Target | None:
        """The latest version of a doc whose content changed, or None when it is gone."""
        if cite["type"] == "memory":
            rel = self.files.note_path(cite["doc_id"])
            ft = self.files.read(rel, "memory") if rel else None
            return Target(ft, "newer", ["note edited"]) if ft else None
        entries = self.files.entries
        chain = supersede_chain(entries, cite["doc_id"])
        if chain:
            did = chain[-1]
            notes = ["superseded by " + " -> ".join(chain)]
            e = entries.get(did)
            ft = self.files.doc(did)
            if ft is None and e and e.get("path"):
                ft = self.files.read(e["path"])
                if ft is not None:
                    notes.append(f"{e['path']} was edited again since the last sync")
            if ft is not None:
                return Target(ft, "newer", notes)
        # not linked (yet): a file edited in place at the cited path, or at its mapped path
        paths = [cite["path"]]
        cur = entries.get(cite["doc_id"])
        if cur and cur.get("current", True) and cur.get("path") not in (None, cite["path"]):
            paths.append(cur["path"])
        for rel in paths:
            ft = self.files.read(rel)
            if ft is not None:
                return Target(ft, "newer", [f"{rel} was edited in place (content hash changed)"])
        return None

    def _target(self, cite: Cite) -> Target | None:
        orig = self._original(cite)
        if orig is not None and cite["type"] != "memory":
            entry = self.files.entries.get(cite["doc_id"])
            superseded = entry.get("superseded_by") if entry else None
            archived = versions_dir(self.folder) in (self.folder.root / orig.path).parents
            if superseded and archived:
                # the cited text only survives as an old version: look in the newest one
                return self._newer(cite) or Target(orig, "same")
        return Target(orig, "same") if orig else self._newer(cite)

    def _elsewhere(self, cite: Cite) -> Target | None:
        """When the cited doc is gone entirely (say renamed and edited, then synced): a doc
        that holds the exact quote, preferring one from the same source."""
        src = cite.get("source") or {}
        by_src = {
            d
            for d, e in self.files.entries.items()
            if e.get("current", True) and src and e.get("source") == src
        }
        docs = sorted(self.files.by_hash().items(), key=lambda kv: (kv[0] not in by_src, kv[1]))
        for _did, rel in docs:
            if versions_dir(self.folder) in (self.folder.root / rel).parents:
                continue
            ft = self.files.read(rel)
            if ft is not None and cite["quote"] in ft.text:
                return Target(
                    ft, "elsewhere", [f"the cited document is gone; {rel} holds the exact quote"]
                )
        return None

    def verify(self, cite: Cite) -> CiteStatus:
        """Check one (validated) cite object; returns the status record."""
        quote = cite["quote"]
        s0, e0 = cite["loc"]["start"], cite["loc"]["end"]
        ctx = cite.get("context") or {}
        res: CiteStatus = {
            "id": cite["id"],
            "status": "missing",
            "type": cite["type"],
            "ref": cite.get("ref"),
            "cited": {
                "doc_id": cite["doc_id"],
                "path": cite["path"],
                "loc": {"kind": "char", "start": s0, "end": e0},
            },
            "found": None,
            "similarity": 0.0,
            "changes": [],
            "diagnostics": [],
        }
        target = self._target(cite)
        if target is None and cite["type"] != "memory":
            target = self._elsewhere(cite)
        if target is None:
            what = "note" if cite["type"] == "memory" else "document"
            res["reason"] = f"{what}_gone"
            res["diagnostics"].append(
                f"the {what} is gone: nothing at {cite['path']}, no file with its content"
                + ("" if cite["type"] == "memory" else ", no newer version")
            )
            return res
        ft = target.ft
        res["diagnostics"] += target.notes
        at = find_exact(ft.text, quote, s0, ctx.get("pre", ""), ctx.get("post", ""))
        if at is not None:
            s, e, sim = at, at + len(quote), 1.0
        else:
            fz = find_fuzzy(ft, quote, s0)
            if fz is None or fz[2] < self.min_similarity:
                res["reason"] = "quote_gone"
                res["diagnostics"].append(f"the quote is no longer in {ft.path}")
                if fz:
                    res["similarity"] = round(fz[2], 3)
                    res["diagnostics"].append(
                        f"closest passage: chars {fz[0]}-{fz[1]}, similarity {fz[2]:.2f} "
                        f"(below {self.min_similarity:.2f})"
                    )
                self._archived(cite, res)
                return res
            s, e, sim = fz
        if target.relation == "elsewhere" and at is None:
            res["reason"] = "document_gone"
            return res
        changes = []
        if target.relation == "elsewhere":
            changes.append("document")
        if ft.path != cite["path"]:
            changes.append("path")
            res["diagnostics"].append(f"now at {ft.path} (was {cite['path']})")
        if target.relation == "newer" or ft.sha256 != cite["sha256"]:
            changes.append("version")
        if (s, e) != (s0, e0):
            changes.append("span")
            res["diagnostics"].append(f"span now {s}-{e} (was {s0}-{e0})")
        res["changes"] = changes
        res["similarity"] = round(sim, 3)
        found: FoundAt = {
            "doc_id": cite["doc_id"] if cite["type"] == "memory" else ft.doc_id,
            "path": ft.path,
            "sha256": ft.sha256,
            "loc": {"kind": "char", "start": s, "end": e},
        }
        if at is None:
            res["status"] = "changed"
            found["quote"] = ft.text[s:e]
            res["diagnostics"].append(
                f"quote edited (similarity {sim:.2f}): " + _describe_edit(quote, ft.text[s:e])
            )
            self._archived(cite, res)
        else:
            res["status"] = "moved" if changes else "verified"
        res["found"] = found
        return res

    def _archived(self, cite: Cite, res: CiteStatus) -> None:
        """Note when the exact quote still exists in the cited (now superseded) version."""
        if cite["type"] == "memory":
            return
        old = self.files.doc(cite["doc_id"])
        if old is not None and cite["quote"] in old.text:
            res["archived"] = {"path": old.path, "doc_id": old.doc_id}
            res["diagnostics"].append(f"the cited version still holds the exact quote: {old.path}")


def _describe_edit(old: str, new: str, limit: int = 4) -> str:
    a, b = old.split(), new.split()
    parts = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        was, now = " ".join(a[i1:i2]), " ".join(b[j1:j2])
        parts.append(
            {
                "replace": f"{_short(was)!r} -> {_short(now)!r}",
                "delete": f"removed {_short(was)!r}",
                "insert": f"added {_short(now)!r}",
            }[op]
        )
    more = f" (+{len(parts) - limit} more)" if len(parts) > limit else ""
    return "; ".join(parts[:limit]) + more if parts else "whitespace only"


def _short(s: str, n: int = 40) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def updated(cite: Cite, result: CiteStatus, files: Files | None = None) -> Cite:
    """The cite object moved to where `result` found its quote (id and quote unchanged)."""
    found = result["found"]
    assert found is not None
    new = cite.copy()
    s, e = found["loc"]["start"], found["loc"]["end"]
    new.update(
        {
            "doc_id": found["doc_id"],
            "path": found["path"],
            "sha256": found["sha256"],
            "loc": found["loc"].copy(),
        }
    )
    if files is not None:
        ft = files.read(found["path"], "memory" if cite["type"] == "memory" else "doc")
        if ft is not None:
            new["context"] = _context(ft.text, s, e)
    ref = str(cite.get("ref") or "")
    if cite["type"] == "doc":
        new["ref"] = found["doc_id"]
    elif "#char" in ref or cite["type"] == "chunk":
        new["ref"] = f"{found['doc_id']}#char{s}-{e}"
    history = list(cite.get("history") or [])
    history.append(
        {
            "at": iso(),
            "status": result["status"],
            "changes": result["changes"],
            "from": {
                "doc_id": cite["doc_id"],
                "path": cite["path"],
                "sha256": cite["sha256"],
                "loc": cite["loc"],
            },
        }
    )
    new["history"] = history
    new["updated_at"] = iso()
    return with_abs_path(new, files.folder.root) if files is not None else new


def verify_many(
    folder: Folder,
    items: Iterable[str | Mapping[str, Any]],
    *,
    update: bool = False,
    min_similarity: float | None = None,
) -> list[CiteStatus]:
    """Verify ids and cite objects. With `update`, persisted citations that moved are
    rewritten to their new place (the caller holds the writer lock).

    Every item is resolved before anything is written, so bad input writes nothing.
    """
    v = Verifier(folder, min_similarity)
    cites = [resolve(folder, x, v.files) for x in items]
    out = []
    for cite in cites:
        res = v.verify(cite)
        res["persisted"] = is_persisted(folder, cite["id"])
        res["updated"] = False
        if update and res["status"] == "moved" and res["persisted"]:
            atomic_write(citation_path(folder, cite["id"]), _dump(updated(cite, res, v.files)))
            res["updated"] = True
        out.append(res)
    return out


def resolve(folder: Folder, item: str | Mapping[str, Any], files: Files | None = None) -> Cite:
    """A cite object from an id (citation, chunk, doc or memory) or a cite object (which
    is checked: it may come from anywhere)."""
    if not isinstance(item, str):
        return check(folder, item, "cite object")
    if CITE_ID.match(item):
        return load(folder, item)
    return check(folder, make(folder, item, files=files), item)


def all_ids(folder: Folder) -> list[str]:
    return (
        [p.stem for p in sorted(folder.citations_dir.glob("c-*.json"))]
        if folder.citations_dir.exists()
        else []
    )


# -- showing a passage --------------------------------------------------------------------------
def passage(folder: Folder, item: str | Mapping[str, Any], context_lines: int = 2) -> CitePassage:
    """Where a citation's quote is now, with `context_lines` lines around it."""
    if context_lines < 0:
        raise UsageError("--context must be 0 or more")
    v = Verifier(folder)
    cite = resolve(folder, item, v.files)
    res = v.verify(cite)
    if res["found"] is None:
        # nothing left in the files: show what the citation itself recorded
        pre, post = cite["context"]["pre"], cite["context"]["post"]
        return {
            "id": cite["id"],
            "status": res["status"],
            "verification": res,
            "path": cite["path"],
            "lines": None,
            "text": pre + cite["quote"] + post,
            "highlight": {"start": len(pre), "end": len(pre) + len(cite["quote"])},
            "from_citation": True,
        }
    f = res["found"]
    ft = v.files.read(f["path"], "memory" if cite["type"] == "memory" else "doc")
    assert ft is not None
    s, e = f["loc"]["start"], f["loc"]["end"]
    text = ft.text
    line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
    first, last = (n - 1 for n in lines_of(text, s, e))
    lo_line = max(0, first - context_lines)
    hi_line = min(len(line_starts) - 1, last + context_lines)
    lo = line_starts[lo_line]
    hi = line_starts[hi_line + 1] if hi_line + 1 < len(line_starts) else len(text)
    return {
        "id": cite["id"],
        "status": res["status"],
        "verification": res,
        "path": f["path"],
        "lines": {"start": first + 1, "end": last + 1},
        "text": text[lo:hi].rstrip("\n"),
        "highlight": {"start": s - lo, "end": e - lo},
        "first_line": lo_line + 1,
        "from_citation": False,
    }


def lines_of(text: str, start: int, end: int) -> tuple[int, int]:
    """The first and last line (1-based) of the characters `start`…`end` of `text`."""
    first = text.count("\n", 0, start) + 1
    return first, first + text.count("\n", start, max(start, end - 1))


def shown_lines(first: int, last: int) -> str:
    """`L` for one line, `L1-L2` for more, as grep and editors read `path:…`."""
    return str(first) if last <= first else f"{first}-{last}"


def where(folder: Folder, items: Sequence[Mapping[str, Any]]) -> list[str]:
    """`path:L` or `path:L1-L2` for each cite-like item (`path`, `loc` in characters; a
    memory when `type` says so), in its file as it is now. An item with a `quote` gets its
    lines only while the quote is still at `loc`; `path` alone otherwise."""
    files = Files(folder)
    out = []
    for it in items:
        path, loc = it["path"], it.get("loc") or {}
        ft = files.read(path, "memory" if it.get("type") == "memory" else "doc") if path else None
        start, end = loc.get("start"), loc.get("end")
        quote = it.get("quote")
        if (
            ft is None
            or not isinstance(start, int)
            or not isinstance(end, int)
            or not 0 <= start <= end <= len(ft.text)
            or (quote is not None and ft.text[start:end] != quote)
        ):
            out.append(path)
            continue
        out.append(f"{path}:{shown_lines(*lines_of(ft.text, start, end))}")
    return out


# -- housekeeping ----------------------------------------------------------------------------------
def select(
    folder: Folder,
    cites: list[Cite],
    *,
    tags: list[str] | None = None,
    doc: str | None = None,
) -> list[Cite]:
    """Citations carrying all `tags`, and citing `doc` (doc/note id prefix or path part)."""
    out = []
    for c in cites:
        if tags and not set(tags) <= set(c.get("tags") or []):
            continue
        if doc and not (
            c["doc_id"].startswith(doc)
            or doc in c["path"]
            or str(c.get("ref") or "").startswith(doc)
        ):
            continue
        out.append(c)
    return out


def gc(folder: Folder, dry_run: bool = False) -> CiteGcReport:
    """Remove transient citations and persisted ones nothing supports any more.

    Orphaned: the cited document (or note) is gone entirely. Ephemeral citations
    (`--retention-class ephemeral`) also go once they are changed or missing. Citations of
    class `keep` are never removed. The caller holds the writer lock.
    """
    removed: dict[str, list[str]] = {"transient": [], "orphaned": [], "expired": []}
    td = transient_dir(folder)
    transient = sorted(td.glob("*.json")) if td.exists() else []
    cites, problems = list_citations(folder)
    v = Verifier(folder)
    doomed: list[Path] = list(transient)
    removed["transient"] = [p.stem for p in transient]
    kept = 0
    for c in cites:
        if c.get("retention_class") == "keep":
            kept += 1
            continue
        res = v.verify(c)
        if res["status"] == "missing" and res.get("reason") in ("document_gone", "note_gone"):
            removed["orphaned"].append(c["id"])
        elif c.get("retention_class") == "ephemeral" and res["status"] not in PASSING:
            removed["expired"].append(c["id"])
        else:
            kept += 1
            continue
        doomed.append(citation_path(folder, c["id"]))
    if not dry_run:
        for p in doomed:
            p.unlink(missing_ok=True)
    return {
        "transient": removed["transient"],
        "orphaned": removed["orphaned"],
        "expired": removed["expired"],
        "kept": kept,
        "problems": problems,
        "dry_run": dry_run,
    }
