"""Verifying 1,000 persisted citations after 10% of the cited documents were edited.

    uv run python bench/cite_verify.py [--docs 200] [--per-doc 5] [--edited 0.1] [--seed 7]

Builds a fresh folder in a temporary directory from SciFact abstracts (one document each,
ingested without the graph: verification reads only the files), persists `--per-doc`
sentence citations per document, then edits 10% of the cited documents the ways people
do: a paragraph inserted at the top, a word changed inside a cited sentence, a cited
sentence deleted, the document renamed and edited, the source re-ingested as a new version.
It then times `verify_many` over every persisted citation in-process, and `ok cite verify
--all --json` through the real executable, and prints the status counts.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from openkl import citations as cit  # noqa: E402
from openkl.folder import Folder  # noqa: E402
from openkl.store import Candidate, ingest  # noqa: E402

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
) -> None:
    text = path.read_text()
    if kind == "insert_top":
        path.write_text("An editor's note, added after the citations were made.\n\n" + text)
    elif kind == "reword":
        q = rng.choice(quotes)
        words = q.split()
        i = rng.randrange(len(words))
        new_q = " ".join(words[:i] + ["substantially"] + words[i + 1 :])
        path.write_text(text.replace(q, new_q, 1))
    elif kind == "delete_sentence":
        path.write_text(text.replace(rng.choice(quotes), "", 1))
    elif kind == "rename_and_edit":
        path.unlink()
        path.with_name("renamed-" + path.name).write_text("Moved here.\n\n" + text)
    else:  # new_version: the source changed and was ingested again
        new = text.replace("\n\n", "\n\nRevised abstract, second edition.\n\n", 1)
        ingest(
            folder, [Candidate(data=new.encode(), rel=rel, origin="bench", source=src)], index=False
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--per-doc", type=int, default=5)
    ap.add_argument("--edited", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=7)
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
        by_doc: dict[str, list[str]] = {}
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
                    by_doc.setdefault(a["path"], []).append(c["quote"])
        n_cites = len(cit.all_ids(folder))
        print(f"persisted {n_cites} citations in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        edited = rng.sample(sorted(by_doc), max(1, round(len(by_doc) * args.edited)))
        kinds = Counter()
        for i, rel in enumerate(edited):
            kind = KINDS[i % len(KINDS)]
            kinds[kind] += 1
            name = rel.split("/")[-1].replace(".ok.md", ".md")
            edit(
                folder,
                rng,
                kind,
                folder.root / rel,
                by_doc[rel],
                {"path": f"store/sources/scifact/{name}"},
                f"scifact/{name}",
            )
        print(f"edited {len(edited)} of {len(by_doc)} cited docs: {dict(kinds)}", file=sys.stderr)

        ids = cit.all_ids(folder)
        t0 = time.perf_counter()
        results = cit.verify_many(folder, ids)
        lib_s = time.perf_counter() - t0
        counts = Counter(r["status"] for r in results)

        env = {**os.environ, "OK_ROOT": str(folder.root), "OK_NO_PROGRESS": "1"}
        ok = str(Path(sys.executable).parent / "ok")
        t0 = time.perf_counter()
        proc = subprocess.run(
            [ok, "cite", "verify", "--all", "--json"], capture_output=True, env=env
        )
        cli_s = time.perf_counter() - t0
        cli_counts = Counter(r["status"] for r in json.loads(proc.stdout))
        assert cli_counts == counts, (cli_counts, counts)
        report = {
            "citations": len(results),
            "docs": len(by_doc),
            "edited_docs": len(edited),
            "edits": dict(kinds),
            "status": {s: counts.get(s, 0) for s in cit.STATUSES},
            "library_seconds": round(lib_s, 3),
            "per_citation_ms": round(1000 * lib_s / max(1, len(results)), 3),
            "cli_seconds": round(cli_s, 3),
            "cli_exit": proc.returncode,
        }
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
