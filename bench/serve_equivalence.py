"""Does `ok serve` answer the same hits before and after a change? Starts `ok serve` on a
folder, sends every SciFact test claim to `GET /v1/{stack}/search` (k=10) in each mode and
writes every hit's id and score, in the format of bench/search_equivalence.py.

    uv run python bench/serve_equivalence.py --root bench/.work/scifact --out a.json
    uv run python bench/search_equivalence.py --compare a.json b.json

`--also-cli N` checks the first N claims against `ok search --json` with no server
(OK_NO_ROUTE=1, the graph opened by the command itself) too, and exits 1 if any differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from search_equivalence import queries  # noqa: E402
from serve import OK, Serve  # noqa: E402

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--modes", default="hybrid,fts,vector")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--also-cli", type=int, default=0)
    args = ap.parse_args()
    qs = queries(args.limit)
    result: dict[str, dict[str, list[list[object]]]] = {}
    s = Serve(args.root)
    try:
        with httpx.Client(base_url=s.url, timeout=300) as c:
            for mode in args.modes.split(","):
                result[mode] = {}
                for qid, text in qs:
                    r = c.get(f"/v1/{s.stack}/search", params={"q": text, "k": 10, "mode": mode})
                    if r.status_code != 200:
                        sys.exit(f"search answered {r.status_code}: {r.text[:200]}")
                    result[mode][qid] = [[h["id"], h["score"]] for h in r.json()["hits"]]
    finally:
        s.stop()
    args.out.write_text(json.dumps(result, indent=1))
    bad = 0
    for qid, text in qs[: args.also_cli]:
        r = subprocess.run(
            [OK, "--root", str(args.root), "search", text, "-k", "10", "--json"],
            capture_output=True,
            text=True,
            env={**os.environ, "OK_NO_ROUTE": "1", "OK_NO_PROGRESS": "1"},
        )
        cli = [[h["id"], h["score"]] for h in json.loads(r.stdout)]
        if cli != result["hybrid"][qid]:
            bad += 1
            print(f"query {qid}: the CLI's hits differ from the server's", file=sys.stderr)
    n = sum(len(v) for v in result.values())
    print(f"{n} searches written to {args.out}; {bad} of {args.also_cli} differ from the CLI")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
