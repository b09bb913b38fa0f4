"""The web explorer, headless in Debian's chromium: time to the first search results, time
to draw a ~500-entity neighbourhood, and the size of the shipped assets.

    uv run python bench/ui.py [--root FOLDER] [--query Q] [--entity NAME] [--runs N] [--save]

`--root` is served with `ok serve` (default: the SciFact folder bench/scifact.py builds, if
it is there, else a new folder of examples/docs). The neighbourhood is the entity's (depth
3, at most 500 entities) when the folder has that many within reach; the drawing is also
timed on a generated 500-entity neighbourhood in an exported page (`synthetic_500`), so
the number exists for small folders too. Times are medians over `--runs` page loads.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import provenance  # noqa: E402

from openkl.knowledge import explorer as web  # noqa: E402

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")

OK = str(Path(sys.executable).parent / "ok")
SCIFACT = Path(os.environ.get("OK_BENCH_WORK", HERE / ".work")) / "scifact"
CHROMIUM = "/usr/bin/chromium"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _examples(tmp: Path) -> Path:
    root = tmp / "examples"
    env = {**os.environ, "OK_NO_PROGRESS": "1"}
    subprocess.run([OK, "init", str(root)], check=True, env=env, capture_output=True)
    subprocess.run(
        [OK, "--root", str(root), "store", "ingest", str(HERE.parent / "examples/docs")],
        check=True,
        env=env,
        capture_output=True,
    )
    return root


def _serve(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    port = _port()
    proc = subprocess.Popen(
        [OK, "serve", "--root", str(root), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "OK_NO_PROGRESS": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/ready").status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    proc.terminate()
    raise SystemExit("ok serve did not become ready")


def _timed(page: Any, url: str, ready: str, runs: int) -> float:
    """Median seconds from navigating to `url` until the `ready` selector shows."""
    took = []
    for _ in range(runs):
        page.goto("about:blank")
        started = time.perf_counter()
        page.goto(url)
        page.locator(ready).first.wait_for(timeout=120_000)
        took.append(time.perf_counter() - started)
    return round(statistics.median(took), 3)


def _synthetic(n: int) -> dict[str, Any]:
    """A neighbourhood of `n` entities in a few types, each tied to two or three others."""
    rng = random.Random(7)
    types = ["Person", "Organization", "Concept", "Place", "Event"]
    nodes = [
        {"id": f"e{i}", "name": f"Entity {i}", "type": types[i % 5], "confidence": 0.8}
        | {"depth": min(3, i % 4), "docs": []}
        for i in range(n)
    ]
    edges = [
        {"from_id": f"e{i}", "from_name": "", "to_id": f"e{j}", "to_name": "", "type": "related_to"}
        | {"confidence": round(rng.uniform(0.3, 1), 2), "evidence": ""}
        for i in range(1, n)
        for j in {rng.randrange(i), rng.randrange(i)}
    ]
    return {"seeds": ["e0"], "depth": 3, "min_confidence": 0.3, "types": [], "nodes": nodes} | {
        "edges": edges,
        "capped": False,
        "limit": n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, help="The folder to serve.")
    ap.add_argument("--query", default="gene editing")
    ap.add_argument("--entity", help="The neighbourhood to draw (default: the most mentioned).")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--save", action="store_true", help="Write bench/results/ui-<commit>.json.")
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="ok-bench-ui-"))
    root = args.root or (SCIFACT if (SCIFACT / ".ok").exists() else _examples(tmp))
    proc, url = _serve(root)
    report: dict[str, Any] = provenance.stamp()
    report["folder"] = str(root)
    try:
        import httpx

        stack = httpx.get(url + "/ready").json()["stacks"][0]
        entity = args.entity or httpx.get(url + "/aks/v1/entities?limit=1").json()[0]["name"]
        t_route = time.perf_counter()
        nb = httpx.get(
            f"{url}/v1/{stack}/neighbourhood",
            params={"entity": entity, "depth": 3, "min_confidence": 0, "limit": 500},
            timeout=120,
        ).json()
        route_s = round(time.perf_counter() - t_route, 3)  # the server's part of a render
        page_file = tmp / "synthetic.html"
        page_file.write_text(web.standalone_page("bench", _synthetic(500)))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            q = httpx.QueryParams({"q": args.query})
            report["first_results_s"] = _timed(page, f"{url}/#/search?{q}", ".hit", args.runs)
            g = httpx.QueryParams({"entity": entity, "depth": 3, "min": 0, "limit": 500})
            report["neighbourhood"] = {
                "entity": entity,
                "entities": len(nb["nodes"]),
                "relationships": len(nb["edges"]),
                "capped": nb["capped"],
                "route_s": route_s,
                "render_s": _timed(page, f"{url}/#/graph?{g}", "#node-list li", args.runs),
            }
            report["synthetic_500"] = {
                "entities": 500,
                "relationships": sum(1 for _ in _synthetic(500)["edges"]),
                "render_s": _timed(page, page_file.as_uri(), "#node-list li", args.runs),
            }
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
    report["assets_bytes"] = {name: len(web.asset(name).encode()) for name in web.ASSETS} | {
        "app.js.gz": len(gzip.compress(web.asset("app.js").encode()))
    }
    print(json.dumps(report, indent=1))
    if args.save:
        provenance.save(report)


if __name__ == "__main__":
    main()
