"""`ok serve` under load: HTTP search latency with 1, 8 and 32 clients, a routed `ok search`
process against the same command alone, a 1,000-document ingest while clients search, and
10,000 mixed requests.

    uv run python bench/serve.py [--requests 300] [--ingest-docs 1000] [--mixed 10000] [--save]

Uses the ~10k-chunk SciFact folder of bench/mcp_latency.py (bench/.work/mcp-10k, built
when missing) or `--root DIR`. The folder is copied first (to bench/.work/serve-scratch,
`--in-place` to skip), so the writes below never change it and every run starts alike. It
starts `ok serve` on a free 127.0.0.1 port, warms it, then:

- `http_search`: `--requests` `GET /v1/{stack}/search` calls (k=10, hybrid) spread over
  1, 8 and 32 client threads, each with its own keep-alive connection; latency per request
  and requests per second for each client count. Each client count gets claims that no
  earlier phase sent (SciFact's 300 test claims, then its 809 train claims), so no answer
  comes from what the server keeps of an earlier query; `http_search_repeated` sends the
  1-client phase's claims again, one client, for what a repeated query costs;
- `routed_cli` / `alone_cli`: `ok search CLAIM --json` in a fresh process, `--cli-calls`
  times with the server running (the command runs in the server) and, after it stops,
  with no server (the process opens the graph and loads the model itself);
- `ingest_while_searching`: 8 client threads search while one request uploads
  `--ingest-docs` new documents at once (`POST /v1/{stack}/documents`, multipart: one
  ingest). The documents are SciFact abstracts with a changed first line, so each is new
  and its first chunk is embedded for real. Reported: the ingest's seconds and chunks per
  second, and the searches' latency during it (errors must be none);
- `mixed`: `--mixed` requests from `--mixed-clients` threads, each request drawn (seeded)
  from: search (50%), other reads (25%: a note, a document, the notes list, the stack's
  counts, the citations list), note add (15%), citation made and kept then verified (8%,
  two requests), single-document upload (2%); `--mix` sets other weights. Errors must be none, and at the end the
  counts must match: notes added = notes found in the folder's files, in the notes list
  and in the graph; citations made = citations listed = citations verified (each
  `verified`); documents uploaded = documents added to the graph.

An empty `--clients`, `--cli-calls 0`, `--ingest-docs 0` or `--mixed 0` skips that phase.

Prints one JSON object (p50/p95/mean/max in milliseconds, load averages) and exits 1 if
any phase saw an error or a count that does not match.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import mcp_latency  # noqa: E402
import provenance  # noqa: E402
from mcp_latency import DATA, OK, stats  # noqa: E402

# each `ok` command here runs in a process of its own, as it is meant to be measured:
# none starts the folder's resident process (OK_NO_DAEMON)
os.environ.setdefault("OK_NO_DAEMON", "1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load() -> float:
    return round(os.getloadavg()[0], 2)


def start_server(
    root: Path, log_name: str, **env: str
) -> tuple[subprocess.Popen[bytes], int, str, Path]:
    """`ok serve --root root` on a free port of 127.0.0.1, its output in
    `<root's parent>/<log_name>-<port>.log`, once ready: (the process, its port, the
    folder's stack, the log). `env`: variables added to the server's environment."""
    port = _free_port()
    log = root.parent / f"{log_name}-{port}.log"
    proc = subprocess.Popen(
        [OK, "serve", "--root", str(root), "--port", str(port)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "OK_NO_PROGRESS": "1", **env},
    )
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"ok serve exited with {proc.returncode}: see {log}")
        try:
            r = httpx.get(f"http://127.0.0.1:{port}/ready", timeout=5)
            if r.status_code == 200:
                return proc, port, str(r.json()["stacks"][0]), log
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit("ok serve did not become ready in 900 s")


class Serve:
    def __init__(self, root: Path) -> None:
        self.proc, self.port, self.stack, self.log = start_server(root, "serve-bench")
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=300)


def claims() -> list[str]:
    """SciFact's test claims, then its train claims: 1,109 distinct queries."""
    out: list[str] = []
    for name in ("queries.jsonl", "queries_train.jsonl"):
        with open(DATA / name) as f:
            out += [json.loads(line)["text"] for line in f]
    seen: set[str] = set()
    return [q for q in out if not (q in seen or seen.add(q))]  # type: ignore[func-returns-value]


class Queries:
    """Hands out claims no earlier phase used (wrapping around when they run out)."""

    def __init__(self) -> None:
        self.all = claims()
        self.next = 0

    def take(self, n: int) -> list[str]:
        got = [self.all[(self.next + i) % len(self.all)] for i in range(n)]
        self.next += n
        return got


def _searchers(url: str, stack: str, qs: list[str], clients: int, stop: threading.Event | None):
    """`clients` threads searching `qs` round-robin (until `stop` when given, else once
    through `qs` between them); returns (threads, times in ms of the answered requests,
    count of the failed ones by status)."""
    times: list[float] = []
    errors: Counter[str] = Counter()
    lock = threading.Lock()
    nxt = iter(range(10**9))

    def work() -> None:
        with httpx.Client(base_url=url, timeout=300) as c:
            while True:
                with lock:
                    i = next(nxt)
                if stop is None and i >= len(qs):
                    return
                if stop is not None and stop.is_set():
                    return
                t = time.perf_counter()
                try:
                    r = c.get(f"/v1/{stack}/search", params={"q": qs[i % len(qs)], "k": 10})
                    status = str(r.status_code)
                except httpx.HTTPError as e:
                    status = type(e).__name__
                ms = (time.perf_counter() - t) * 1000
                with lock:
                    if status == "200":
                        times.append(ms)
                    else:  # counted, not timed: a refusal is no answer
                        errors[status] += 1

    threads = [threading.Thread(target=work, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    return threads, times, errors


def http_search(s: Serve, qs: list[str], clients: int) -> dict:
    before = load()
    t0 = time.perf_counter()
    threads, times, errors = _searchers(s.url, s.stack, qs, clients, None)
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {
        "clients": clients,
        **stats(times),
        "requests_per_s": round(len(times) / wall, 1),
        "errors": dict(errors),
        "load_1min": [before, load()],
    }


def cli_search(root: Path, qs: list[str], env: dict[str, str]) -> dict:
    before = load()
    times = []
    for q in qs:
        t = time.perf_counter()
        r = subprocess.run(
            [OK, "search", q, "-k", "10", "--json"],
            capture_output=True,
            env={**os.environ, "OK_ROOT": str(root), "OK_NO_PROGRESS": "1", **env},
        )
        times.append((time.perf_counter() - t) * 1000)
        if r.returncode != 0:
            raise SystemExit(f"ok search failed: {r.stderr.decode()[:300]}")
    return {**stats(times), "load_1min": [before, load()]}


@functools.cache
def _abstracts() -> list[tuple[str, str]]:
    """SciFact's abstracts as (id, `title\\n\\ntext\\n`), as bench/scifact.py writes them."""
    with open(DATA / "corpus.jsonl") as f:
        docs = [json.loads(line) for line in f]
    return [
        (str(d["_id"]), f"{d.get('title', '').strip()}\n\n{d.get('text', '').strip()}\n")
        for d in docs
    ]


def _new_doc(i: int, tag: str) -> tuple[str, bytes]:
    """A document that is not in the folder: an abstract with a first line of its own."""
    docs = _abstracts()
    return f"{tag}-{i:05d}.md", f"# {tag} {i}: {docs[i % len(docs)][1]}".encode()


def _new_docs(n: int, tag: str) -> list[tuple[str, bytes]]:
    return [_new_doc(i, tag) for i in range(n)]


def ingest_while_searching(s: Serve, qs: list[str], n_docs: int, clients: int = 8) -> dict:
    docs = _new_docs(n_docs, "bulk")
    before = load()
    with httpx.Client(base_url=s.url, timeout=300) as c:
        counts0 = c.get(f"/aks/v1/stacks/{s.stack}").json()
    stop = threading.Event()
    threads, times, errors = _searchers(s.url, s.stack, qs, clients, stop)
    time.sleep(2)  # the searchers are under way before the ingest starts
    warm = len(times)
    t0 = time.perf_counter()
    with httpx.Client(base_url=s.url, timeout=3600) as c:
        r = c.post(
            f"/v1/{s.stack}/documents",
            files=[("file", (name, body, "text/markdown")) for name, body in docs],
        )
    wall = time.perf_counter() - t0
    during = list(times[warm:])
    stop.set()
    for t in threads:
        t.join()
    rep = r.json() if r.status_code == 201 else {}
    with httpx.Client(base_url=s.url, timeout=300) as c:
        counts1 = c.get(f"/aks/v1/stacks/{s.stack}").json()
    chunks = int(rep.get("chunks", 0))
    added = len(rep.get("added", []))
    problems = []
    if r.status_code != 201:
        problems.append(f"the ingest answered {r.status_code}: {r.text[:300]}")
    if added != n_docs:
        problems.append(f"{added} of {n_docs} documents added")
    if (
        counts1["docs"] - counts0["docs"] != added
        or counts1["chunks"] - counts0["chunks"] != chunks
    ):
        problems.append(f"graph counts {counts0} -> {counts1} do not match the report")
    if errors:
        problems.append(f"searches failed during the ingest: {dict(errors)}")
    return {
        "docs": n_docs,
        "added": added,
        "chunks": chunks,
        "ingest_s": round(wall, 1),
        "chunks_per_s": round(chunks / wall, 1) if wall else None,
        "search_clients": clients,
        "search_during": {**stats(during or [0.0]), "errors": dict(errors)},
        "load_1min": [before, load()],
        "problems": problems,
    }


def _sentences() -> list[str]:
    out = []
    for _, text in _abstracts():
        body = text.split("\n\n", 1)[-1]
        out += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", body.strip()) if 60 < len(s) < 400]
    return out


def read_path(stack: str, i: int, note: str | None, doc: str | None) -> str:
    """The `i`th read of the mixed workloads, in turn: a note, a document (each when one
    was added), the notes list, the stack's counts, the citations list."""
    v1 = f"/v1/{stack}"
    which = i % 5
    if which == 0 and note:
        return f"{v1}/notes/{note}"
    if which == 1 and doc:
        return f"{v1}/documents/{doc}"
    if which == 2:
        return f"{v1}/notes?limit=20"
    if which == 3:
        return f"/aks/v1/stacks/{stack}"
    return f"{v1}/citations"


class Mixed:
    """The mixed workload: each request's kind drawn from a seeded generator."""

    KINDS = [
        ("search", 50),
        ("read", 25),
        ("note", 15),
        ("cite", 8),
        ("upload", 2),
    ]

    def __init__(
        self,
        s: Serve,
        root: Path,
        qs: list[str],
        n: int,
        clients: int,
        seed: int,
        mix: list[tuple[str, int]] | None = None,
    ):
        self.s, self.root, self.qs, self.n, self.clients = s, root, qs, n, clients
        rng = random.Random(seed)
        self.mix = mix or self.KINDS
        kinds, weights = zip(*self.mix, strict=True)
        self.plan = rng.choices(kinds, weights=weights, k=n)
        sents = _sentences()
        rng.shuffle(sents)
        self.sents = sents
        self.lock = threading.Lock()
        self.i = 0
        self.times: dict[str, list[float]] = {k: [] for k, _ in self.KINDS}
        self.errors: Counter[str] = Counter()
        self.error_samples: list[str] = []
        self.notes: list[str] = []
        self.citations: list[str] = []
        self.verified = 0
        self.docs: list[str] = []
        self.chunk_ids: list[str] = []
        self.requests = 0

    def _take(self) -> int | None:
        with self.lock:
            if self.i >= self.n:
                return None
            self.i += 1
            return self.i - 1

    def _fail(self, what: str, r: httpx.Response | Exception) -> None:
        said = r.text[:200] if isinstance(r, httpx.Response) else repr(r)
        code = r.status_code if isinstance(r, httpx.Response) else type(r).__name__
        with self.lock:
            self.errors[f"{what}:{code}"] += 1
            if len(self.error_samples) < 20:
                self.error_samples.append(f"{what} {code}: {said}")

    def _sent(self) -> None:
        with self.lock:
            self.requests += 1

    def _timed(self, kind: str, t: float) -> None:
        with self.lock:
            self.times[kind].append((time.perf_counter() - t) * 1000)

    def one(self, c: httpx.Client, i: int, kind: str) -> None:
        v1 = f"/v1/{self.s.stack}"
        t = time.perf_counter()
        if kind == "search":
            r = c.get(f"{v1}/search", params={"q": self.qs[i % len(self.qs)], "k": 10})
            self._sent()
            if r.status_code != 200:
                return self._fail(kind, r)
            self._timed(kind, t)
            hits = r.json()["hits"]
            with self.lock:
                self.chunk_ids += [h["id"] for h in hits[:2] if h.get("type") == "chunk"]
                del self.chunk_ids[:-500]
        elif kind == "read":
            with self.lock:
                note = self.notes[i % len(self.notes)] if self.notes else None
                doc = self.docs[i % len(self.docs)] if self.docs else None
            path = read_path(self.s.stack, i, note, doc)
            r = c.get(path)
            self._sent()
            if r.status_code != 200:
                return self._fail(f"read {path.split('?')[0].replace(v1, '')}", r)
            self._timed(kind, t)
        elif kind == "note":
            text = f"Field note {i}: {self.sents[i % len(self.sents)]}"
            r = c.post(f"{v1}/notes", json={"text": text, "tags": ["bench-mixed"]})
            self._sent()
            if r.status_code != 201:
                return self._fail(kind, r)
            self._timed(kind, t)
            with self.lock:
                self.notes.append(r.json()["id"])
        elif kind == "cite":
            with self.lock:
                target = self.chunk_ids[i % len(self.chunk_ids)] if self.chunk_ids else None
            if target is None:
                return self.one(c, i, "search")
            r = c.post(
                f"{v1}/citations", json={"items": [target], "persist": True, "tags": ["bench"]}
            )
            self._sent()
            if r.status_code != 201:
                return self._fail("cite make", r)
            cid = r.json()[0]["id"]
            with self.lock:
                self.citations.append(cid)
            r = c.post(f"{v1}/citations/verify", json={"items": [cid]})
            self._sent()
            if r.status_code != 200:
                return self._fail("cite verify", r)
            got = r.json()
            if not got["ok"] or got["results"][0]["status"] != "verified":
                return self._fail("cite verify status", r)
            self._timed(kind, t)
            with self.lock:
                self.verified += 1
        elif kind == "upload":
            name, body = _new_doc(i, "mixed")
            r = c.post(f"{v1}/documents", params={"name": name}, content=body)
            self._sent()
            if r.status_code != 201 or len(r.json()["added"]) != 1:
                return self._fail(kind, r)
            self._timed(kind, t)
            with self.lock:
                self.docs.append(r.json()["added"][0]["id"])

    def work(self) -> None:
        with httpx.Client(base_url=self.s.url, timeout=600) as c:
            while (i := self._take()) is not None:
                try:
                    self.one(c, i, self.plan[i])
                except httpx.HTTPError as e:
                    self._fail(self.plan[i], e)

    def run(self) -> dict:
        v1 = f"/v1/{self.s.stack}"
        with httpx.Client(base_url=self.s.url, timeout=600) as c:
            counts0 = c.get(f"/aks/v1/stacks/{self.s.stack}").json()
            cites0 = len(c.get(f"{v1}/citations").json()["citations"])
        files0 = _note_files(self.root)
        before = load()
        t0 = time.perf_counter()
        threads = [threading.Thread(target=self.work) for _ in range(self.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        with httpx.Client(base_url=self.s.url, timeout=600) as c:
            counts1 = c.get(f"/aks/v1/stacks/{self.s.stack}").json()
            listed = {n["id"] for n in c.get(f"{v1}/notes").json()}
            cites = c.get(f"{v1}/citations").json()["citations"]
            verify = c.post(f"{v1}/citations/verify", json={"items": self.citations}).json()
        files1 = _note_files(self.root)
        added_files = files1 - files0
        checks = {
            "notes_added": len(self.notes),
            "notes_in_files": len(added_files),
            "notes_listed": len(set(self.notes) & listed),
            "notes_in_graph": counts1["notes"] - counts0["notes"],
            # a citation's id is its content's hash: citing a passage again gives the same one
            "citation_requests": len(self.citations),
            "citations_made": len(set(self.citations)),
            "citations_listed": len(cites) - cites0,
            "citations_verified": self.verified,
            "citations_verified_at_end": sum(
                1 for x in verify.get("results", []) if x["status"] == "verified"
            ),
            "docs_uploaded": len(self.docs),
            "docs_in_graph": counts1["docs"] - counts0["docs"],
        }
        problems = []
        if set(self.notes) != added_files:
            problems.append("the notes added are not the note files that appeared")
        for a, b in (
            ("notes_added", "notes_in_files"),
            ("notes_added", "notes_listed"),
            ("notes_added", "notes_in_graph"),
            ("citations_made", "citations_listed"),
            ("citation_requests", "citations_verified"),
            ("citation_requests", "citations_verified_at_end"),
            ("docs_uploaded", "docs_in_graph"),
        ):
            if checks[a] != checks[b]:
                problems.append(f"{a} {checks[a]} != {b} {checks[b]}")
        if self.errors:
            problems.append(f"errors: {dict(self.errors)}")
        return {
            "requests": self.requests,
            "clients": self.clients,
            "mix": dict(self.mix),
            "seconds": round(wall, 1),
            "requests_per_s": round(self.requests / wall, 1),
            "by_kind": {k: stats(v) for k, v in self.times.items() if v},
            "errors": dict(self.errors),
            "error_samples": self.error_samples,
            "counts": checks,
            "load_1min": [before, load()],
            "problems": problems,
        }


def _note_files(root: Path) -> set[str]:
    return {p.stem for p in (root / "memories" / "by_date").rglob("m-*.md")}


def scratch_copy(root: Path) -> Path:
    """A fresh copy of the folder to run on (its claim and lock files left behind)."""
    dst = Path(mcp_latency.WORK) / "serve-scratch"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(
        root,
        dst,
        symlinks=True,
        ignore=lambda d, names: [
            n for n in names if n in ("serve.json", "lock", "serve.sock", "run")
        ],
    )
    return dst


def _parse_mix(ap: argparse.ArgumentParser, text: str) -> list[tuple[str, int]]:
    known = {k for k, _ in Mixed.KINDS}
    mix = []
    for part in filter(None, text.split(",")):
        kind, _, weight = part.partition("=")
        if kind not in known or not weight.isdigit():
            ap.error(f"--mix: {part!r} is not KIND=WEIGHT with KIND one of {sorted(known)}")
        mix.append((kind, int(weight)))
    if not sum(w for _, w in mix):
        ap.error("--mix: give at least one kind a weight above 0")
    return mix


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root", type=Path, help="a folder to serve (default: the 10k SciFact one)")
    ap.add_argument("--in-place", action="store_true", help="run on --root itself, not a copy")
    ap.add_argument("--requests", type=int, default=300, help="HTTP searches per client count")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--cli-calls", type=int, default=20)
    ap.add_argument("--ingest-docs", type=int, default=1000, help="0: no ingest phase")
    ap.add_argument("--mixed", type=int, default=10000, help="mixed requests (0: none)")
    ap.add_argument("--mixed-clients", type=int, default=8)
    ap.add_argument(
        "--mix",
        default=",".join(f"{k}={w}" for k, w in Mixed.KINDS),
        help="the mixed phase's weights, KIND=WEIGHT,... (kinds: search read note cite upload)",
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--save", action="store_true", help="write bench/results/serve-<commit>.json")
    args = ap.parse_args()
    mix = _parse_mix(ap, args.mix)
    base = args.root or mcp_latency.build_folder().root
    out: dict = {**provenance.stamp(), "folder": str(base)}
    root = base if args.in_place else scratch_copy(base)
    qs = Queries()
    warmup = qs.all[-10:]
    s = Serve(root)
    failed: list[str] = []
    try:
        with httpx.Client(base_url=s.url, timeout=300) as c:
            out["counts"] = c.get(f"/aks/v1/stacks/{s.stack}").json()
            for q in warmup:
                c.get(f"/v1/{s.stack}/search", params={"q": q, "k": 10})
        phases = []
        first: list[str] = []
        for n in filter(None, args.clients.split(",")):
            batch = qs.take(args.requests)
            first = first or batch
            phases.append(http_search(s, batch, int(n)))
        out["http_search"] = phases
        if first:
            out["http_search_repeated"] = http_search(s, first, 1)
        if args.cli_calls:
            out["routed_cli"] = cli_search(root, qs.take(args.cli_calls), {})
        if args.ingest_docs:
            out["ingest_while_searching"] = ingest_while_searching(
                s, qs.take(2000), args.ingest_docs
            )
        if args.mixed:
            out["mixed"] = Mixed(
                s, root, qs.take(args.mixed), args.mixed, args.mixed_clients, args.seed, mix
            ).run()
    except (httpx.HTTPError, OSError, KeyError, ValueError) as e:
        # what was measured is still reported, with how the run ended
        failed.append(f"the run stopped: {type(e).__name__}: {e}")
    finally:
        code = s.proc.poll()
        if code is not None:
            failed.append(f"ok serve had exited with {code} (see its log)")
        s.stop()
    if not failed and args.cli_calls:
        out["alone_cli"] = cli_search(root, qs.take(args.cli_calls), {"OK_NO_ROUTE": "1"})
    problems = [
        *failed,
        *out.get("ingest_while_searching", {}).get("problems", []),
        *out.get("mixed", {}).get("problems", []),
        *[
            f"{p['clients']} clients: errors {p['errors']}"
            for p in out.get("http_search", [])
            if p["errors"]
        ],
    ]
    out["ok"] = not problems
    print(json.dumps(out, indent=2))
    if args.save:
        provenance.save(out)
    if problems:
        sys.exit("problems: " + "; ".join(problems))


if __name__ == "__main__":
    main()
