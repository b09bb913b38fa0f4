"""Choose the documents of the reading-comprehension set and split them, reproducibly.

    uv run python bench/gold/qa/make_docs.py [--write]

Three kinds, 34 documents each, every document 100–600 words:

- scifact: abstracts from ../shared/bench/scifact/corpus.jsonl. 26 drawn at random
  (seed 31) among those of 100–600 words, then for 8 of them the abstract of the corpus
  closest to it in words, so that some questions need the right one of two similar
  abstracts.
- techdocs: 34 drawn (seed 31) from CANDIDATES, files of /usr/share/doc on Debian 12 that
  are prose of 100–600 words (READMEs, FAQs, notes), one per package.
- encyclopedic: 24 FOLDOC and 10 Jargon File entries of 100–600 words (dict-foldoc and
  dict-jargon, /usr/share/dictd), drawn at random (seed 31); the dictionaries'
  cross-reference braces `{term}` are turned into the plain term.

Each kind's documents are then shuffled (seed 31) and cut in half: the first half is
`dev`, the second `test`. Without --write it prints what it would choose; with it, it
writes docs/<kind>/… and split.json (the documents are committed, so this needs to run
only to re-derive them).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCIFACT = (
    Path(os.environ.get("OK_BENCH_DATA", HERE.parents[2].parent / "shared" / "bench" / "scifact"))
    / "corpus.jsonl"
)
DICTD = Path("/usr/share/dictd")
DOC = Path("/usr/share/doc")
SEED = 31
PER_KIND = 34
MIN_WORDS, MAX_WORDS = 100, 600

# prose files of /usr/share/doc, 100–600 words, one per package (Debian 12)
CANDIDATES = [
    "base-passwd/README",
    "bc/README",
    "ca-certificates/README.Debian",
    "chromium/README.Debian",
    "cscope/README",
    "dash/README.source",
    "dbus/README.Debian",
    "dict/README.Debian.gz",
    "dictd/README.Virtual_dictionaries.gz",
    "dpkg/spec/protected-field.txt",
    "fakeroot/README.saving",
    "fontconfig/README.Debian",
    "fonts-dejavu-core/README.md",
    "gettext/README",
    "git/README.md",
    "gpg-agent/README.Debian",
    "grep/README",
    "jq/README",
    "libalgorithm-diff-perl/README",
    "libcbor0.8/README.md",
    "libdconf1/README",
    "libfreetype6/README",
    "libglib2.0-0/README.md",
    "libmpfr6/README",
    "libnettle8/README",
    "libpango-1.0-0/README.md",
    "libxml2/README.md",
    "linux-perf/tips.txt",
    "man-db/FAQ",
    "mawk/README",
    "ncurses-base/FAQ",
    "openssh-client/README.dns",
    "openssl/README.Debian",
    "patch/README",
    "psmisc/README.md",
    "python3.11/README.venv",
    "systemd/DISTRO_PORTING.md",
    "tmux/README",
    "util-linux/cal.txt",
    "util-linux/deprecated.txt",
    "valgrind/README",
    "python3-pip/html/topics/repeatable-installs.md",
    "nodejs/contributing/technical-values.md",
    "python3-httplib2/README.md",
    "libjansson4/README.rst",
    "libsasl2-2/README.Debian",
    "procps/bugs.md",
    "gcc-12-base/README.ssp",
    "util-linux/modems-with-agetty.txt",
    "openssl/README.optimization",
    "libtasn1-6/README.md",
    "nodejs/api/string_decoder.md",
    "tzdata/README.Debian",
    "libidn2-0/README.md.gz",
]

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
WORD = re.compile(r"[a-z0-9]+")
STOP = set(
    [
        "the",
        "of",
        "and",
        "in",
        "to",
        "a",
        "with",
        "for",
        "was",
        "were",
        "is",
        "are",
        "by",
        "that",
        "as",
        "on",
        "from",
        "at",
        "this",
        "be",
        "we",
        "an",
        "or",
        "which",
        "these",
        "not",
        "have",
        "has",
        "had",
        "their",
        "its",
        "than",
        "but",
        "between",
        "after",
        "during",
        "been",
        "our",
    ]
)


def words(text: str) -> int:
    return len(text.split())


def scifact_docs(rng: random.Random) -> list[tuple[str, str, str]]:
    rows = [json.loads(line) for line in SCIFACT.read_text().splitlines() if line.strip()]
    fit = [r for r in rows if MIN_WORDS <= words(r["title"] + " " + r["text"]) <= MAX_WORDS]
    fit.sort(key=lambda r: r["_id"])
    drawn = rng.sample(fit, 26)
    bags = {r["_id"]: set(WORD.findall((r["title"] + " " + r["text"]).lower())) - STOP for r in fit}
    chosen = list(drawn)
    taken = {r["_id"] for r in drawn}
    for r in drawn[:8]:
        mine = bags[r["_id"]]
        best = max(
            (o for o in fit if o["_id"] not in taken),
            key=lambda o: len(mine & bags[o["_id"]]) / len(mine | bags[o["_id"]]),
        )
        taken.add(best["_id"])
        chosen.append(best)
    return [
        (f"{r['_id']}.md", f"# {r['title']}\n\n{r['text']}\n", f"SciFact corpus {r['_id']}")
        for r in chosen
    ]


def read_doc(rel: str) -> str:
    p = DOC / rel
    data = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
    return data.decode("utf-8", "replace")


def techdocs(rng: random.Random) -> list[tuple[str, str, str]]:
    picked = rng.sample(CANDIDATES, PER_KIND)
    out = []
    for rel in picked:
        text = read_doc(rel)
        assert MIN_WORDS <= words(text) <= MAX_WORDS, (rel, words(text))
        name = rel.removesuffix(".gz").replace("/", "--")
        if not name.endswith((".md", ".txt")):
            name += ".txt"
        out.append((name, text, f"/usr/share/doc/{rel}"))
    return out


def b64(s: str) -> int:
    n = 0
    for ch in s:
        n = n * 64 + B64.index(ch)
    return n


def dict_entries(name: str) -> list[tuple[str, str]]:
    data = gzip.decompress((DICTD / f"{name}.dict.dz").read_bytes())
    out = []
    seen = set()  # several headwords may point at one entry: keep the first
    for line in (DICTD / f"{name}.index").read_text(errors="replace").splitlines():
        head, off, size = line.split("\t")
        if head.startswith("00-database") or (off, size) in seen:
            continue
        seen.add((off, size))
        body = data[b64(off) : b64(off) + b64(size)].decode("utf-8", "replace")
        out.append((head, body))
    return out


def plain(body: str) -> str:
    body = re.sub(r"\{([^{}]*)\}", r"\1", body)
    lines = [ln.strip() for ln in body.strip("\n").splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def encyclopedic(rng: random.Random) -> list[tuple[str, str, str]]:
    out = []
    for name, n, label in (("foldoc", 24, "FOLDOC"), ("jargon", 10, "Jargon File")):
        fit = [(h, b) for h, b in dict_entries(name) if MIN_WORDS <= words(plain(b)) <= MAX_WORDS]
        for head, body in rng.sample(fit, n):
            slug = re.sub(r"[^a-z0-9]+", "-", head.lower()).strip("-")
            out.append((f"{name}-{slug}.txt", plain(body), f"{label}, entry {head!r}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    split: dict[str, str] = {}
    sources: dict[str, str] = {}
    for kind, make in (
        ("scifact", scifact_docs),
        ("techdocs", techdocs),
        ("encyclopedic", encyclopedic),
    ):
        docs = make(random.Random(SEED))
        assert len({d[0] for d in docs}) == len(docs) == PER_KIND
        order = sorted(d[0] for d in docs)
        random.Random(SEED).shuffle(order)
        half = len(order) // 2
        for i, name in enumerate(order):
            split[f"{kind}/{name}"] = "dev" if i < half else "test"
        for name, text, src in docs:
            sources[f"{kind}/{name}"] = src
            print(f"{split[f'{kind}/{name}']:4} {words(text):4} {kind}/{name}  ({src})")
            if args.write:
                dest = HERE / "docs" / kind / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(text)
    if args.write:
        out = {
            "seed": SEED,
            "split": dict(sorted(split.items())),
            "source": dict(sorted(sources.items())),
        }
        (HERE / "split.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
