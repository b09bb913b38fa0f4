"""`ok serve` under concurrent reads and writes, for crashes: does the server stay up?

    uv run python bench/serve_stress.py [--root DIR] [--runs 1] [--seconds 240]
        [--ingest-docs 0] [--searchers 8] [--writers 2] [--gdb]

Each run serves a fresh copy of the folder (default: the 10k SciFact one of
bench/mcp_latency.py, as bench/serve.py), optionally ingests `--ingest-docs` documents in
one multipart request while the searchers run, then for `--seconds` (and at most
`--max-requests` requests) keeps going at once:

- `--searchers` threads: `GET /v1/{stack}/search` (SciFact claims, k=10);
- `--writers` threads, each request drawn (seeded) from: note add (60%), citation of a
  chunk hit made, kept and verified (25%), single-document upload (15%);
- one thread reading what the writers made (a note, a document, the notes list, the
  stack's counts, the citations list).

A run fails if the server dies (its exit code or signal is reported, with the last lines
of its log; `--gdb` attaches gdb and keeps the stack of every thread at the crash in
bench/.work/stress-gdb-<port>.txt), a request fails, or the counts do not match at the end
(notes added = notes in the graph, citations made = citations listed, documents uploaded =
documents in the graph). Prints one JSON object per run and a summary; exits 1 if any run
failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
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
import serve  # noqa: E402


class Server:
    """`ok serve` on a free port, optionally with gdb attached once it is ready."""

    def __init__(self, root: Path, gdb: bool) -> None:
        self.proc, self.port, self.stack, self.log = serve.start_server(
            root, "stress-serve", PYTHONFAULTHANDLER="1"
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self.gdb: subprocess.Popen | None = None
        self.gdb_out = root.parent / f"stress-gdb-{self.port}.txt"
        if gdb:
            handled = "SIGPIPE SIGTERM SIGINT SIGUSR1 SIGUSR2 SIGCHLD"
            self.gdb = subprocess.Popen(
                [
                    "gdb", "-p", str(self.proc.pid), "-batch", "-nx",
                    "-ex", "set pagination off",
                    "-ex", f"handle {handled} nostop noprint pass",
                    "-ex", "continue",
                    "-ex", "echo \\n=== stopped: the crashing thread\\n",
                    "-ex", "bt 60",
                    "-ex", "info registers rip rsp rdi rsi rdx rcx",
                    "-ex", "echo \\n=== every thread\\n",
                    "-ex", "thread apply all bt 40",
                    "-ex", "kill",
                ],
                stdout=self.gdb_out.open("w"),
                stderr=subprocess.STDOUT,
            )  # fmt: skip
            time.sleep(3)  # attached before the load starts

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ended(self) -> str | None:
        """How the server ended, if it did (a signal's name, or its exit code)."""
        code = self.proc.poll()
        if code is None:
            return None
        if code < 0:
            return signal.Signals(-code).name
        return f"exit {code}"

    def caught(self) -> str | None:
        """The signal gdb saw the server get (it then prints the stacks and kills it)."""
        if self.gdb is None:
            return None
        m = re.search(r"received signal (SIG\w+)", self.gdb_out.read_text(errors="replace"))
        return m.group(1) if m else None

    def stop(self) -> str | None:
        """Stop it; what had ended it before, if anything."""
        if self.gdb is not None and self.caught():
            self.gdb.wait(timeout=300)  # the stacks written, the process killed
        ended = self.caught() or self.ended()
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.gdb is not None:
            self.gdb.wait(timeout=120)
        return ended


class Load:
    WRITES = [("note", 60), ("cite", 25), ("upload", 15)]

    def __init__(self, s: Server, qs: list[str], seed: int, deadline: float, cap: int) -> None:
        self.s, self.qs, self.deadline, self.cap = s, qs, deadline, cap
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.sents = serve._sentences()
        self.rng.shuffle(self.sents)
        self.n = 0
        self.counts: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.samples: list[str] = []
        self.notes: list[str] = []
        self.citations: list[str] = []
        self.docs: list[str] = []
        self.chunk_ids: list[str] = []
        self.stop = threading.Event()

    def _next(self) -> int | None:
        with self.lock:
            if (
                self.stop.is_set()
                or self.n >= self.cap
                or time.monotonic() > self.deadline
                or not self.s.alive()
            ):
                return None
            self.n += 1
            return self.n

    def _fail(self, what: str, r: httpx.Response | Exception) -> None:
        said = r.text[:300] if isinstance(r, httpx.Response) else repr(r)[:300]
        code = r.status_code if isinstance(r, httpx.Response) else type(r).__name__
        with self.lock:
            self.errors[f"{what}:{code}"] += 1
            if len(self.samples) < 20:
                self.samples.append(f"{what} {code}: {said}")

    def _loop(self, step) -> None:
        with httpx.Client(base_url=self.s.url, timeout=600) as c:
            while (i := self._next()) is not None:
                try:
                    step(c, i)
                except httpx.HTTPError as e:
                    self._fail(step.__name__, e)

    def search(self, c: httpx.Client, i: int) -> None:
        r = c.get(f"/v1/{self.s.stack}/search", params={"q": self.qs[i % len(self.qs)], "k": 10})
        if r.status_code != 200:
            return self._fail("search", r)
        hits = r.json()["hits"]
        with self.lock:
            self.counts["search"] += 1
            self.chunk_ids += [h["id"] for h in hits[:2] if h.get("type") == "chunk"]
            del self.chunk_ids[:-500]

    def write(self, c: httpx.Client, i: int) -> None:
        kinds, weights = zip(*self.WRITES, strict=True)
        with self.lock:
            kind = self.rng.choices(kinds, weights=weights)[0]
            target = self.chunk_ids[i % len(self.chunk_ids)] if self.chunk_ids else None
        v1 = f"/v1/{self.s.stack}"
        if kind == "cite" and target is None:
            kind = "note"
        if kind == "note":
            text = f"Stress note {i}: {self.sents[i % len(self.sents)]}"
            r = c.post(f"{v1}/notes", json={"text": text, "tags": ["stress"]})
            if r.status_code != 201:
                return self._fail(kind, r)
            with self.lock:
                self.notes.append(r.json()["id"])
        elif kind == "cite":
            r = c.post(f"{v1}/citations", json={"items": [target], "persist": True})
            if r.status_code != 201:
                return self._fail("cite make", r)
            cid = r.json()[0]["id"]
            with self.lock:
                self.citations.append(cid)
            r = c.post(f"{v1}/citations/verify", json={"items": [cid]})
            if r.status_code != 200 or r.json()["results"][0]["status"] != "verified":
                return self._fail("cite verify", r)
        else:
            name, body = serve._new_doc(i, f"stress{os.getpid()}")
            r = c.post(f"{v1}/documents", params={"name": name}, content=body)
            if r.status_code != 201 or len(r.json()["added"]) != 1:
                return self._fail(kind, r)
            with self.lock:
                self.docs.append(r.json()["added"][0]["id"])
        with self.lock:
            self.counts[kind] += 1

    def read(self, c: httpx.Client, i: int) -> None:
        v1 = f"/v1/{self.s.stack}"
        with self.lock:
            note = self.notes[i % len(self.notes)] if self.notes else None
            doc = self.docs[i % len(self.docs)] if self.docs else None
        path = serve.read_path(self.s.stack, i, note, doc)
        r = c.get(path)
        if r.status_code != 200:
            return self._fail("read " + path.split("?")[0].replace(v1, ""), r)
        with self.lock:
            self.counts["read"] += 1


def one_run(root: Path, args: argparse.Namespace, qs: list[str], seed: int) -> dict:
    work = serve.scratch_copy(root)
    s = Server(work, args.gdb)
    out: dict = {"port": s.port, "seed": seed, "load_1min": [serve.load()]}
    t0 = time.monotonic()
    with httpx.Client(base_url=s.url, timeout=600) as c:
        counts0 = c.get(f"/aks/v1/stacks/{s.stack}").json()
        cites0 = len(c.get(f"/v1/{s.stack}/citations").json()["citations"])
    if args.ingest_docs:
        try:
            out["ingest"] = serve.ingest_while_searching(s, qs, args.ingest_docs)  # type: ignore[arg-type]
        except (httpx.HTTPError, ValueError, KeyError) as e:
            out["ingest"] = {"problems": [f"{type(e).__name__}: {e}"]}
        counts0 = None  # the ingest's documents are counted by the phase itself
    load = Load(s, qs, seed, time.monotonic() + args.seconds, args.max_requests)
    threads = [
        threading.Thread(target=load._loop, args=(load.search,)) for _ in range(args.searchers)
    ]
    threads += [
        threading.Thread(target=load._loop, args=(load.write,)) for _ in range(args.writers)
    ]
    threads += [threading.Thread(target=load._loop, args=(load.read,))]
    if s.alive():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    problems: list[str] = list(out.get("ingest", {}).get("problems", []))
    if s.alive():
        with httpx.Client(base_url=s.url, timeout=600) as c:
            counts1 = c.get(f"/aks/v1/stacks/{s.stack}").json()
            cites = len(c.get(f"/v1/{s.stack}/citations").json()["citations"])
        if counts0 is not None:
            out["graph_delta"] = {k: counts1[k] - counts0[k] for k in ("notes", "docs")}
            if out["graph_delta"] != {"notes": len(load.notes), "docs": len(load.docs)}:
                problems.append(f"graph counts {out['graph_delta']} != what was added")
        # a citation's id is its content's hash: citing a passage again gives the same one
        made = len(set(load.citations))
        if cites - cites0 != made:
            problems.append(f"{cites - cites0} citations listed, {made} made")
    ended = s.stop()
    out.update(
        seconds=round(time.monotonic() - t0, 1),
        requests=dict(load.counts),
        errors=dict(load.errors),
        error_samples=load.samples,
        server_ended=ended,
        crashed=ended is not None,
        log=str(s.log),
    )
    out["load_1min"].append(serve.load())
    if out["crashed"]:
        tail = s.log.read_text(errors="replace").splitlines()[-30:]
        out["log_tail"] = [line for line in tail if not line.startswith("{")][-20:]
        if s.gdb is not None:
            out["gdb"] = str(s.gdb_out)
        problems.append(f"the server died ({ended})")
    if load.errors:
        problems.append(f"errors: {dict(load.errors)}")
    out["problems"] = problems
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root", type=Path, help="a folder to serve (default: the 10k SciFact one)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=240)
    ap.add_argument("--max-requests", type=int, default=20000, help="per run, all kinds")
    ap.add_argument("--ingest-docs", type=int, default=0, help="one upload of N first")
    ap.add_argument("--searchers", type=int, default=8)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gdb", action="store_true", help="attach gdb: the stacks at a crash")
    args = ap.parse_args()
    root = args.root or mcp_latency.build_folder().root
    qs = serve.claims()
    runs = []
    for k in range(args.runs):
        got = one_run(root, args, qs, args.seed + k)
        print(json.dumps(got), flush=True)
        runs.append(got)
    summary = {
        **provenance.stamp(),
        "folder": str(root),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "runs": len(runs),
        "crashed": sum(r["crashed"] for r in runs),
        "failed": sum(bool(r["problems"]) for r in runs),
    }
    print(json.dumps(summary))
    if summary["failed"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
