"""Write the documents of the entity gold sets and their dev/test split (run once; kept to
show how they were chosen).

    uv run python bench/gold/entities/collect.py [--check]

- scifact: abstracts of 150–300 words from ../shared/bench/scifact/corpus.jsonl, drawn with
  a fixed seed, 8 structured (with section labels such as RESULTS) and 14 plain, so that the
  heading measure has headings to find;
- techdocs: whole README/NEWS-like files from /usr/share/doc of installed Debian packages;
- prose: entries about people, companies, machines and history from FOLDOC (dict-foldoc)
  and the Jargon File (dict-jargon), with the dictionaries' {cross-reference} braces
  removed.

Each kind is split into dev and test halves by a seeded shuffle (per stratum), written to
split.json. --check rewrites nothing and says whether the files on disk are what this
script would write.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCIFACT = (
    Path(os.environ.get("OK_BENCH_DATA", HERE.parents[2].parent / "shared" / "bench" / "scifact"))
    / "corpus.jsonl"
)
SEED = 20261204

STRUCTURED = re.compile(
    r"\b(BACKGROUND|METHODS?|RESULTS|CONCLUSIONS?|OBJECTIVES?|DESIGN|SETTING|PURPOSE)\b"
)

TECHDOCS = [
    "cscope/README",
    "net-tools/README",
    "openssh-client/README.dns",
    "tk8.6/README.md",
    "libsodium23/README.markdown",
    "avahi-daemon/README",
    "libjansson4/README.rst",
    "dbus/README.Debian",
    "postgresql-common/README.systemd",
    "base-files/README.FHS",
    "libdouble-conversion3/README.md",
    "git/contrib/persistent-https/README",
    "libipt2/README",
    "libdatrie1/README",
    "libksba8/README",
    "libxmlsec1/README.md",
    "valgrind/README.Debian",
    "groff-base/README.Debian",
    "perl/README.Debian",
    "util-linux/getopt.txt",
    "nodejs/contributing/distribution.md",
    "git/RelNotes/2.36.1.txt",
]

FOLDOC = [
    "alan turing",
    "atanasoff, john vincent",
    "berners-lee, tim",
    "boole, george",
    "bush, vannevar",
    "cerf, vint",
    "hamming, richard",
    "von neumann, john",
    "acorn computers ltd.",
    "sinclair research",
    "digital equipment corporation",
    "free software foundation",
]
JARGON = [
    "tmrc",
    "mars",
    "multics",
    "twenex",
    "foonly",
    "kremvax",
    "waits",
    "ibm",
    "unix",
    "internet",
]

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _b64(s: str) -> int:
    n = 0
    for c in s:
        n = n * 64 + B64.index(c)
    return n


def dict_entry(name: str, headword: str) -> str:
    """One entry of a dictd dictionary under /usr/share/dictd, braces removed."""
    with gzip.open(f"/usr/share/dictd/{name}.dict.dz") as f:
        data = f.read()
    for line in Path(f"/usr/share/dictd/{name}.index").read_text(encoding="utf-8").splitlines():
        hw, off, ln = line.split("\t")[:3]
        if hw == headword:
            raw = data[_b64(off) : _b64(off) + _b64(ln)].decode("utf-8")
            head, _, body = raw.partition("\n")
            text = head + "\n" + textwrap.dedent(body)
            return re.sub(r"[{}]", "", text).strip() + "\n"
    raise SystemExit(f"no entry {headword!r} in {name}")


def slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


def scifact_docs() -> tuple[dict[str, str], dict[str, list[str]]]:
    rows = [json.loads(x) for x in SCIFACT.read_text().splitlines()]
    ok = [r for r in rows if 150 <= len(r["text"].split()) <= 300]
    structured = sorted((r for r in ok if STRUCTURED.search(r["text"])), key=lambda r: r["_id"])
    plain = sorted((r for r in ok if not STRUCTURED.search(r["text"])), key=lambda r: r["_id"])
    rng = random.Random(SEED)
    strata = [rng.sample(structured, 8), rng.sample(plain, 14)]
    docs = {}
    for stratum in strata:
        for r in stratum:
            docs[f"scifact-{r['_id']}.txt"] = f"{r['title']}\n\n{r['text']}\n"
    return docs, {"strata": [[f"scifact-{r['_id']}.txt" for r in s] for s in strata]}


def techdocs_docs() -> tuple[dict[str, str], dict[str, list[str]]]:
    docs = {}
    for rel in TECHDOCS:
        pkg, _, rest = rel.partition("/")
        docs[f"{pkg}-{rest.replace('/', '-')}"] = (Path("/usr/share/doc") / rel).read_text()
    return docs, {"strata": [list(docs)]}


def prose_docs() -> tuple[dict[str, str], dict[str, list[str]]]:
    f = {f"foldoc-{slug(h)}.txt": dict_entry("foldoc", h) for h in FOLDOC}
    j = {f"jargon-{slug(h)}.txt": dict_entry("jargon", h) for h in JARGON}
    return {**f, **j}, {"strata": [list(f), list(j)]}


def split(strata: list[list[str]], seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    dev: list[str] = []
    test: list[str] = []
    for s in strata:
        s = sorted(s)
        rng.shuffle(s)
        half = (len(s) + 1) // 2 if len(dev) <= len(test) else len(s) // 2
        dev += s[:half]
        test += s[half:]
    return {"dev": sorted(dev), "test": sorted(test)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    plan = {}
    for kind, make in (
        ("scifact", scifact_docs),
        ("techdocs", techdocs_docs),
        ("prose", prose_docs),
    ):
        docs, info = make()
        plan[kind] = (docs, split(info["strata"], SEED))
    differ = []
    for kind, (docs, _) in plan.items():
        d = HERE / kind / "docs"
        for name, text in docs.items():
            p = d / name
            if a.check:
                if not p.exists() or p.read_text() != text:
                    differ.append(str(p))
            else:
                d.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
    splits = {kind: s for kind, (_, s) in plan.items()}
    sp = HERE / "split.json"
    if a.check:
        if json.loads(sp.read_text()) != splits:
            differ.append(str(sp))
        print("differ: " + ", ".join(differ) if differ else "all documents and the split agree")
        sys.exit(1 if differ else 0)
    sp.write_text(json.dumps(splits, indent=2) + "\n")
    for kind, (docs, s) in plan.items():
        print(kind, len(docs), "docs;", len(s["dev"]), "dev,", len(s["test"]), "test")


if __name__ == "__main__":
    main()
