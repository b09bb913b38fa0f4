"""Verifying 1,000 persisted citations after 10% of the cited documents were edited.

    uv run python bench/cite_verify.py [--docs 200] [--per-doc 5] [--edited 0.1] [--seed 7]

Builds a fresh folder in a temporary directory from SciFact abstracts (one document each,
ingested without the graph: verification reads only the files), persists `--per-doc`
sentence citations per document, then edits 10% of the cited documents the ways people
do: a paragraph inserted at the top, a word changed inside a cited sentence, a cited
sentence deleted, the document renamed and edited, the source re-ingested as a new version.
It then times `verify_many` over every persisted citation in-process, and `ok cite verify
--all --json` through the real executable.

Each edit says what it did to every quote of its document (kept, altered or deleted, and
whether the document changed at all), and from that each citation's expected status
follows: a quote in an untouched document is `verified`; a quote kept word for word in an
edited, renamed or re-ingested document is `moved` (span, path or version differ); an
altered quote is `changed`; a deleted one is `missing`. The run prints the confusion table
(expected status -> status found) and exits non-zero if any citation, in-process or through
the CLI, has a status other than the one its edit implies.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import provenance  # noqa: E402

from openkl.collect.store import Candidate, ingest  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402
from openkl.knowledge import citations as cit  # noqa: E402

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")

DATA = Path(os.environ.get("OK_BENCH_DATA", HERE.parent.parent / "shared" / "bench" / "scifact"))
KINDS = ("insert_top", "reword", "delete_sentence", "rename_and_edit", "new_version")
SENT = re.compile(r"[^.!?]+[.!?]")


def corpus(n: int, per_doc: int) -> list[tuple[str, str]]:
    """(name, markdown) for the first `n` abstracts with at least `per_doc` + 1 sentences."""
    out = []
    with open(DATA / "corpus.jsonl") as f:
        for line in f:
            d = json.loads(line)
            if len(SENT.findall(d["text"])) > per_doc and len(d["text"]) > 400:
                out.append((f"{d['_id']}.md", f"# {d['title']}\n\n{d['text']}\n"))
            if len(out) >= n:
                break
    return out


def edit(
    folder: Folder,
    rng: random.Random,
    kind: str,
    path: Path,
    quotes: list[str],
    src: dict[str, str],
    rel: str,
) -> dict[str, str]:
    """Apply one edit of `kind` to the document at `path`; returns what it did to each of
    its cited quotes: "kept", "altered" or "deleted" ("untouched" when the document did not
    change at all). A quote said to be kept is checked to be in the new text word for word,
    an altered or deleted one to be gone from it."""
    text = path.read_text()
    fate = {q: "kept" for q in quotes}
    if kind == "insert_top":
        new = "An editor's note, added after the citations were made.\n\n" + text
        path.write_text(new)
    elif kind == "reword":
        q = rng.choice(quotes)
        words = q.split()
        i = rng.randrange(len(words))
        new_q = " ".join(words[:i] + ["substantially"] + words[i + 1 :])
        new = text.replace(q, new_q, 1)
        if new_q != q:
            fate[q] = "altered"
        path.write_text(new)
    elif kind == "delete_sentence":
        q = rng.choice(quotes)
        new = text.replace(q, "", 1)
        fate[q] = "deleted"
        path.write_text(new)
    elif kind == "rename_and_edit":
        new = "Moved here.\n\n" + text
        path.unlink()
        path.with_name("renamed-" + path.name).write_text(new)
    else:  # new_version: the source changed and was ingested again
        # a sentence added before the first cited one moves every quote and alters none
        at = min(text.index(q) for q in quotes)
        new = text[:at] + "Revised abstract, second edition. " + text[at:]
        ingest(
            folder, [Candidate(data=new.encode(), rel=rel, origin="bench", source=src)], index=False
        )
    if new == text:
        return {q: "untouched" for q in quotes}
    for q, f in fate.items():
        assert (q in new) == (f == "kept"), (kind, f, q)
    return fate


# the status each fate implies
EXPECTED = {"untouched": "verified", "kept": "moved", "altered": "changed", "deleted": "missing"}


def confusion(expected: dict[str, str], found: dict[str, str]) -> dict[str, dict[str, int]]:
    """{expected status: {status found: count}} over every citation."""
    cols = list(cit.STATUSES) + ["absent"] * any(c not in found for c in expected)
    table = {s: dict.fromkeys(cols, 0) for s in cit.STATUSES}
    for cid, want in expected.items():
        table[want][found.get(cid, "absent")] += 1
    return {s: row for s, row in table.items() if any(row.values())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--per-doc", type=int, default=5)
    ap.add_argument("--edited", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--save", action="store_true", help="write bench/results/<script>-<commit>")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="ok-cite-bench-") as tmp:
        folder = Folder.init(Path(tmp) / "kf")
        docs = corpus(args.docs, args.per_doc)
        cands = [
            Candidate(
                data=md.encode(),
                rel=f"scifact/{name}",
                origin="bench",
                source={"path": f"store/sources/scifact/{name}"},
            )
            for name, md in docs
        ]
        t0 = time.perf_counter()
        rep = ingest(folder, cands, index=False)
        print(
            f"ingested {len(rep.added)} docs (files only) in {time.perf_counter() - t0:.1f} s",
            file=sys.stderr,
        )
        files = cit.Files(folder)
        by_doc: dict[str, list[tuple[str, str]]] = {}  # doc path -> [(citation id, quote)]
        t0 = time.perf_counter()
        with folder.write_lock("bench"):
            for a in rep.added:
                text = (folder.root / a["path"]).read_text()
                sents = [m for m in SENT.finditer(text) if len(m.group().strip()) > 30]
                picked = rng.sample(sents, min(args.per_doc, len(sents)))
                for m in picked:
                    s, e = m.start(), m.end()
                    while text[s].isspace():
                        s += 1
                    c = cit.make(folder, a["path"], chars=f"{s}-{e}", files=files)
                    cit.persist(folder, c, ["bench"])
                    by_doc.setdefault(a["path"], []).append((c["id"], c["quote"]))
        n_cites = len(cit.all_ids(folder))
        print(f"persisted {n_cites} citations in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        edited = rng.sample(sorted(by_doc), max(1, round(len(by_doc) * args.edited)))
        kinds: Counter[str] = Counter()
        fates: dict[str, dict[str, str]] = {}  # doc path -> {quote: what its edit did}
        edit_of: dict[str, str] = {}
        for i, rel in enumerate(edited):
            kind = KINDS[i % len(KINDS)]
            kinds[kind] += 1
            name = rel.split("/")[-1].replace(".ok.md", ".md")
            fates[rel] = edit(
                folder,
                rng,
                kind,
                folder.root / rel,
                [q for _, q in by_doc[rel]],
                {"path": f"store/sources/scifact/{name}"},
                f"scifact/{name}",
            )
            edit_of[rel] = kind
        print(f"edited {len(edited)} of {len(by_doc)} cited docs: {dict(kinds)}", file=sys.stderr)
        expected = {
            cid: EXPECTED[fates.get(rel, {}).get(q, "untouched")]
            for rel, cites in by_doc.items()
            for cid, q in cites
        }
        kind_of = {cid: edit_of.get(rel, "none") for rel, cs in by_doc.items() for cid, _ in cs}

        ids = cit.all_ids(folder)
        t0 = time.perf_counter()
        results = cit.verify_many(folder, ids)
        lib_s = time.perf_counter() - t0
        found = {r["id"]: r["status"] for r in results}
        detail = {r["id"]: r for r in results}

        env = {**os.environ, "OK_ROOT": str(folder.root), "OK_NO_PROGRESS": "1"}
        ok = str(Path(sys.executable).parent / "ok")
        t0 = time.perf_counter()
        proc = subprocess.run(
            [ok, "cite", "verify", "--all", "--json"], capture_output=True, env=env
        )
        cli_s = time.perf_counter() - t0
        cli_found = {r["id"]: r["status"] for r in json.loads(proc.stdout)}
        wrong: list[dict[str, Any]] = []
        for cid, want in sorted(expected.items()):
            for where, got in (("library", found.get(cid)), ("cli", cli_found.get(cid))):
                if got != want:
                    wrong.append({"id": cid, "edit": kind_of[cid], "expected": want, where: got})
                    if where == "library" and cid in detail:
                        wrong[-1]["similarity"] = detail[cid]["similarity"]
                        wrong[-1]["diagnostics"] = detail[cid]["diagnostics"]
        counts = Counter(found.values())
        by_edit: dict[str, Counter[str]] = {}
        for cid, kind in kind_of.items():
            by_edit.setdefault(kind, Counter())[found.get(cid, "absent")] += 1
        report: dict[str, Any] = provenance.stamp()
        report.update(
            {
                "citations": len(results),
                "docs": len(by_doc),
                "edited_docs": len(edited),
                "edits": dict(kinds),
                "status": {s: counts.get(s, 0) for s in cit.STATUSES},
                "expected_status": {
                    s: sum(1 for x in expected.values() if x == s) for s in cit.STATUSES
                },
                "confusion_expected_to_found": confusion(expected, found),
                "status_by_edit": {k: dict(v) for k, v in sorted(by_edit.items())},
                "unexpected": wrong,
                "library_seconds": round(lib_s, 3),
                "per_citation_ms": round(1000 * lib_s / max(1, len(results)), 3),
                "cli_seconds": round(cli_s, 3),
                "cli_exit": proc.returncode,
            }
        )
        print(json.dumps(report, indent=2))
        # the CLI fails when any citation does not pass, and only then
        want_exit = int(any(s not in cit.PASSING for s in expected.values()))
        if wrong or set(found) != set(expected) or proc.returncode != want_exit:
            sys.exit(
                f"{len(wrong)} citation statuses differ from what their edits imply;"
                f" `ok cite verify` exited {proc.returncode}, expected {want_exit}"
            )
        if args.save:
            provenance.save(report)


if __name__ == "__main__":
    main()
