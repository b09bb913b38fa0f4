"""Entity description coverage: the share of entities at or above `entities.min_confidence`
that have a cited description, the share that have a description or else a mention (a
sentence that only names the entity, `descriptions.MENTIONS`), and how each was found.

    uv run python bench/descriptions.py [--root DIR | --gold KINDS --split dev|test] [--show N]
        [--keep DIR] [--save]

Without `--root` it builds a folder from examples/docs in a temporary directory (as the
tests do). `--gold scifact,techdocs,prose` builds one folder per gold set of
bench/gold/entities from the documents of `--split` (as bench/entity_gold.py does) and
reports each; `--keep DIR` keeps those folders (reuse one with `--root DIR/<kind>-kf`). `--show N` prints N described entities and N undescribed ones, picked at
random with a fixed seed, to read by eye.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import provenance  # noqa: E402

from openkl.entities.queries import list_entities  # noqa: E402
from openkl.files.folder import Folder  # noqa: E402
from openkl.knowledge.descriptions import MENTIONS, describe  # noqa: E402
from openkl.sync import indexer  # noqa: E402

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")

OK = str(Path(sys.executable).parent / "ok")


def build(tmp: Path) -> Path:
    root = tmp / "kf"
    env = {"OK_NO_PROGRESS": "1", "OK_NO_ROUTE": "1", "PATH": "/usr/bin:/bin"}
    subprocess.run([OK, "init", str(root)], check=True, capture_output=True, env=env)
    subprocess.run(
        [OK, "--root", str(root), "store", "ingest", str(HERE.parent / "examples" / "docs")],
        check=True,
        capture_output=True,
        env=env,
    )
    return root


def measure(root: Path, show: int) -> dict:
    folder = Folder(root)
    floor = float(folder.setting("entities.min_confidence"))
    with indexer.open_graph(folder) as g:
        ents = list_entities(g, min_confidence=floor)
        got: dict = {}
        ids = [e["id"] for e in ents]
        for i in range(0, len(ids), 256):
            got.update(describe(folder, g, ids[i : i + 256]))
    methods: dict[str, int] = {}
    for d in got.values():
        if d is not None:
            methods[d["method"]] = methods.get(d["method"], 0) + 1
    mentioned = sum(n for m, n in methods.items() if m in MENTIONS)
    described = sum(methods.values()) - mentioned
    out = {
        "folder": str(root),
        "min_confidence": floor,
        "entities": len(ents),
        "described": described,
        "coverage": round(described / len(ents), 4) if ents else None,
        "mentioned": mentioned,  # no description, a mention
        "coverage_with_mention": round((described + mentioned) / len(ents), 4) if ents else None,
        "by_method": dict(sorted(methods.items())),
    }
    if show:
        rng = random.Random(7)
        names = {e["id"]: e["name"] for e in ents}
        yes = [eid for eid, d in got.items() if d is not None]
        no = [eid for eid, d in got.items() if d is None]
        out["sample_described"] = [
            {"entity": names[e], **{k: got[e][k] for k in ("method", "text")}}
            for e in rng.sample(yes, min(show, len(yes)))
        ]
        out["sample_undescribed"] = [names[e] for e in rng.sample(no, min(show, len(no)))]
    return out


def gold(args: argparse.Namespace) -> None:
    import entity_gold

    out: dict = {**provenance.stamp(), "split": args.split, "kinds": {}}
    with tempfile.TemporaryDirectory(prefix="descriptions-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for kind in [k for k in args.gold.split(",") if k]:
            if kind not in entity_gold.KINDS:
                raise SystemExit(f"unknown gold set {kind} (hint: one of scifact,techdocs,prose)")
            root = work / f"{kind}-kf"
            if not root.exists():
                entity_gold.build(kind, entity_gold.split_docs(kind, args.split), work)
            got = measure(root, args.show)
            got["folder"] = f"bench/gold/entities/{kind} ({args.split})"
            out["kinds"][kind] = got
            print(
                f"{kind}: {got['described']}/{got['entities']} = {got['coverage']}, with a "
                f"mention {got['coverage_with_mention']}",
                file=sys.stderr,
            )
    n = sum(v["entities"] for v in out["kinds"].values())
    d = sum(v["described"] for v in out["kinds"].values())
    m = sum(v["mentioned"] for v in out["kinds"].values())
    out["overall"] = {
        "entities": n,
        "described": d,
        "coverage": round(d / n, 4) if n else None,
        "mentioned": m,
        "coverage_with_mention": round((d + m) / n, 4) if n else None,
    }
    print(json.dumps(out, indent=2, ensure_ascii=False))
    if args.save:
        provenance.save(out, f"gold-{args.split}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root", type=Path)
    ap.add_argument("--show", type=int, default=0)
    ap.add_argument("--save", action="store_true")
    ap.add_argument("--gold", help="comma-separated gold sets: scifact,techdocs,prose")
    ap.add_argument("--split", choices=["dev", "test", "all"], default="dev")
    ap.add_argument("--keep", type=Path, help="build the gold folders here and keep them")
    args = ap.parse_args()
    if args.gold:
        gold(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = args.root or build(Path(tmp))
        out = {**provenance.stamp(), **measure(root, args.show)}
        if not args.root:
            out["folder"] = "examples/docs"
    print(json.dumps(out, indent=2, ensure_ascii=False))
    if args.save:
        provenance.save(out)


if __name__ == "__main__":
    main()
