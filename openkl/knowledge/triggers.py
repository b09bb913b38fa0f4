"""Semantic triggers: named example texts that fire an event when new knowledge is close to them.

A trigger is a file, `triggers/<name>.yml` (name, example, threshold, scope, exec, env,
timeout), versioned with the folder. After every index write the new or changed chunks and notes (and
only those: the indexer hands us their ids) are compared with each trigger's example by
cosine similarity; at or above the threshold a `trigger_fired` event is appended, once per
trigger and document version (or note version). `ok trigger scan` (and `ok serve` every
`triggers.scan_every` seconds) checks everything already indexed the same way, so a trigger
added later finds what was there before it; what fired once never fires again. With `exec`, the command then runs with the
event JSON on stdin, in the background so it can itself call `ok`; a failure or timeout is
logged and recorded as a `trigger_exec_failed` event, never losing the `trigger_fired` one.

A command is code run on this machine, so it runs only once approved here: `ok trigger add
--exec` approves what it writes, `ok trigger approve NAME` what arrived otherwise (a pull, a
hand edit). The approval, in `.ok/approved-triggers.json` (git-ignored), holds the hash of
the command and its `env` list and the identity of this copy of the folder: a changed
command, or a copy of the folder made elsewhere, waits for approval again. A trigger that
waits still fires its event, which says why its command did not run.

The command gets a minimal environment (PATH, HOME, locale, OK_ROOT …) plus the variables
the trigger names in `env`, never openkl's own secrets (API keys, JWT secrets, OK_*).
This is no sandbox: the command runs as the user who runs `ok`, so approve only commands
you trust.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from ..errors import BadInput, NotFound
from ..files import events, ids
from ..files.folder import LINK_OUT, PRIVATE, Folder, atomic_write, iso
from ..graph.protocol import GraphStore
from ..records import (
    Event,
    ExecWaiting,
    TriggerDict,
    TriggerMatch,
    TriggerScan,
    TriggerTest,
)
from ..settings import SECRET_ENV

TRIGGERS_DIR = "triggers"
SCOPES = ("all", "mem", "store")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# what every command gets; none of these carries a secret
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
QUOTE_CHARS = 300
APPROVALS = "approved-triggers.json"  # under .ok/, git-ignored: approvals are this machine's

_pending: list[threading.Thread] = []
# variables a process holds secrets in, beyond the names SECRET_ENV allows (`ok serve`
# adds the one its JWT secret came from): no command is given them
_withheld: set[str] = set()
# (folder, trigger, command hash) whose waiting for approval was said already
_said_waiting: set[tuple[str, str, str]] = set()


@dataclass
class Trigger:
    name: str
    example: str
    threshold: float = 0.8
    scope: str = "all"
    exec: str | None = None
    env: list[str] = field(default_factory=list)  # variables passed on to `exec`
    timeout: float = 30.0
    created_at: str = ""

    def as_dict(self) -> TriggerDict:
        return cast(TriggerDict, asdict(self))


def triggers_dir(folder: Folder) -> Path:
    return folder.root / TRIGGERS_DIR


def _path(folder: Folder, name: str) -> Path:
    return triggers_dir(folder) / f"{ids.TRIGGER.check(name)}.yml"


def _validate(t: Trigger, where: str) -> Trigger:
    if not ids.TRIGGER.valid(t.name):
        raise BadInput(
            f"{where}: trigger name {t.name!r} is not valid",
            ids.TRIGGER.form,
        )
    if not str(t.example or "").strip():
        raise BadInput(f"{where}: the trigger needs an example text", "pass --example TEXT")
    if not 0.0 < float(t.threshold) <= 1.0:
        raise BadInput(
            f"{where}: threshold {t.threshold} must be in (0, 1]",
            "cosine similarity: 0.8 is strict, 0.5 is loose",
        )
    if t.scope not in SCOPES:
        raise BadInput(
            f"{where}: scope {t.scope!r} is not one of {', '.join(SCOPES)}",
            "--in mem, store or all",
        )
    if not 0 < float(t.timeout) <= 86400:  # also refuses nan and inf
        raise BadInput(
            f"{where}: timeout {t.timeout} must be a number of seconds in (0, 86400]",
            "e.g. --timeout 30",
        )
    if not isinstance(t.env, list) or not all(
        isinstance(n, str) and ENV_NAME.match(n) for n in t.env
    ):
        raise BadInput(
            f"{where}: env must be a list of variable names",
            "e.g. --env SLACK_WEBHOOK_URL (letters, digits and _)",
        )
    secret = next((n for n in t.env if is_secret_name(n)), None)
    if secret:
        raise BadInput(
            f"{where}: env names {secret}, which holds a secret of openkl's and is never "
            "given to a command",
            "API keys (*_API_KEY), JWT secrets (*_JWT_SECRET) and OK_* settings stay with "
            "openkl; give the command what it needs under a name of its own",
        )
    return t


def is_secret_name(name: str) -> bool:
    """Whether a variable holds one of openkl's secrets or settings, by its name: no
    trigger command is given it."""
    if name.startswith("OK_") or name in _withheld:
        return True
    return any(name in exact or name.endswith(ends) for ends, exact in SECRET_ENV.values())


def withhold(*names: str | None) -> None:
    """Never give these variables to a command (a process's own secrets, e.g. the one
    `ok serve` read its JWT secret from)."""
    _withheld.update(n for n in names if n)


# parsed trigger files by path, keyed on (mtime, size): checks after every write stay cheap
_parsed: dict[Path, tuple[tuple[int, int], Trigger | str]] = {}


def _read(folder: Folder, p: Path) -> Trigger | str:
    st = p.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _parsed.get(p)
    if hit and hit[0] == stamp:
        return hit[1]
    where = folder.rel(p)
    result: Trigger | str
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=loader) or {}  # noqa: S506
        if not isinstance(data, dict):
            raise BadInput(f"{where}: not a YAML mapping", "fix or remove the file")
        known = {k: data[k] for k in Trigger.__dataclass_fields__ if k in data}
        known.setdefault("name", p.stem)
        if known.get("env") is None:  # `env:` left empty
            known.pop("env", None)
        result = _validate(Trigger(**known), where)
    except (yaml.YAMLError, BadInput, TypeError, ValueError) as e:
        result = e.message if isinstance(e, BadInput) else f"{where}: {e}"
    _parsed[p] = (stamp, result)
    return result


def load(folder: Folder) -> tuple[list[Trigger], list[str]]:
    """All triggers, and problems with files that could not be read."""
    d = triggers_dir(folder)
    out: list[Trigger] = []
    problems: list[str] = []
    if not d.is_dir():
        return out, problems
    listing = folder.files_under(d, ".yml", recursive=False)
    problems += [f"{folder.named(p)}: {LINK_OUT}" for p in listing.outside]
    for p in listing.files:
        try:
            t = _read(folder, p)
        except OSError as e:  # removed while we looked
            problems.append(f"{folder.rel(p)}: {e.strerror or e}")
            continue
        if isinstance(t, Trigger):
            out.append(t)
        else:
            problems.append(t)
    return out, problems


def get(folder: Folder, name: str) -> Trigger:
    for t in load(folder)[0]:
        if t.name == name:
            return t
    raise NotFound(f"no trigger named {name!r}", "list them with `ok trigger list`")


def add(
    folder: Folder,
    name: str,
    example: str,
    threshold: float = 0.8,
    scope: str = "all",
    exec_: str | None = None,
    timeout: float = 30.0,
    replace: bool = False,
    env: list[str] | None = None,
    approved_by: str | None = None,
) -> Trigger:
    """Write `triggers/<name>.yml`. A command is approved on this machine when
    `approved_by` says who added it (else it waits for `ok trigger approve`). The caller
    holds the writer lock."""
    if env and not exec_:
        raise BadInput(
            "--env names variables for --exec, and there is no --exec",
            "add --exec CMD, or drop --env",
        )
    t = _validate(
        Trigger(
            name=name,
            example=example.strip(),
            threshold=float(threshold),
            scope=scope,
            exec=exec_ or None,
            env=list(dict.fromkeys(env or [])),
            timeout=float(timeout),
            created_at=iso(),
        ),
        "trigger",
    )
    path = _path(folder, name)
    if path.exists() and not replace:
        raise BadInput(
            f"a trigger named {name!r} already exists", "remove it first, or pass --replace"
        )
    atomic_write(path, yaml.safe_dump(t.as_dict(), sort_keys=False, allow_unicode=True))
    folder.log_op("trigger.add", name=name, threshold=t.threshold, scope=t.scope)
    if t.exec and approved_by:
        approve(folder, t, approved_by)
    elif replace:
        _forget(folder, name)
    return t


def remove(folder: Folder, name: str) -> Trigger:
    t = get(folder, name)
    _path(folder, name).unlink()
    _forget(folder, name)
    folder.log_op("trigger.remove", name=name)
    return t


# -- approval of commands, on this machine -----------------------------------------------------
def command_hash(t: Trigger) -> str:
    """What an approval is of: the command and the variables it is given."""
    what = json.dumps({"exec": t.exec or "", "env": sorted(set(t.env))}, sort_keys=True)
    return hashlib.sha256(what.encode("utf-8")).hexdigest()


def _copy_id(folder: Folder) -> str:
    """This copy of the folder: its root directory's inode. A clone, or a copy made with
    its `.ok/`, has another, so approvals that came with it count for nothing."""
    return str(folder.root.stat().st_ino)


def approvals(folder: Folder) -> dict[str, dict[str, Any]]:
    """The approved commands by trigger name (none when the file is missing, unreadable or
    was made for another copy of the folder)."""
    try:
        data = json.loads((folder.ok_dir / APPROVALS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("folder") != _copy_id(folder):
        return {}
    got = data.get("triggers")
    return {k: v for k, v in got.items() if isinstance(v, dict)} if isinstance(got, dict) else {}


def is_approved(folder: Folder, t: Trigger, known: dict[str, dict[str, Any]] | None = None) -> bool:
    """Whether the trigger's command (as it is now) was approved on this machine."""
    got = (approvals(folder) if known is None else known).get(t.name) or {}
    return bool(t.exec) and got.get("sha256") == command_hash(t)


def _save_approvals(folder: Folder, approved: dict[str, dict[str, Any]]) -> None:
    _ignore(folder, f".ok/{APPROVALS}")
    data = {"folder": _copy_id(folder), "triggers": approved}
    atomic_write(
        folder.ok_dir / APPROVALS,
        json.dumps(data, indent=2, sort_keys=True) + "\n",
        mode=PRIVATE,  # which commands may run here is this user's business
    )


def _ignore(folder: Folder, line: str) -> None:
    """Keep a path out of git: a folder made before it was in `ok init`'s .gitignore gets
    the line added."""
    gi = folder.root / ".gitignore"
    with contextlib.suppress(OSError):
        text = gi.read_text(encoding="utf-8") if gi.exists() else ""
        if line not in text.splitlines():
            atomic_write(gi, (text.rstrip("\n") + "\n" if text.strip() else "") + line + "\n")


def approve(folder: Folder, t: Trigger, by: str) -> dict[str, Any]:
    """Approve the trigger's command as it is now, on this machine. The caller holds the
    writer lock."""
    if not t.exec:
        raise BadInput(
            f"trigger {t.name!r} has no command to approve", "only triggers with exec run one"
        )
    approved = approvals(folder)
    rec = {"sha256": command_hash(t), "exec": t.exec, "env": list(t.env), "at": iso(), "by": by}
    approved[t.name] = rec
    _save_approvals(folder, approved)
    folder.log_op("trigger.approve", name=t.name, exec=t.exec, env=t.env, by=by)
    return rec


def _forget(folder: Folder, name: str) -> None:
    approved = approvals(folder)
    if approved.pop(name, None) is not None:
        _save_approvals(folder, approved)


def waiting(folder: Folder) -> list[ExecWaiting]:
    """Triggers whose command waits for approval on this machine, and how to approve each."""
    trigs, _ = load(folder)
    if not any(t.exec for t in trigs):
        return []
    known = approvals(folder)
    return [
        {
            "name": t.name,
            "exec": t.exec or "",
            "env": list(t.env),
            "approve": f"ok trigger approve {t.name}",
        }
        for t in trigs
        if t.exec and not is_approved(folder, t, known)
    ]


def _waiting_reason(t: Trigger) -> str:
    return (
        f"its command is not approved on this machine: check it, then `ok trigger approve {t.name}`"
    )


def _say_waiting(folder: Folder, t: Trigger) -> None:
    """Say once per process and command that a trigger's command did not run."""
    key = (str(folder.root), t.name, command_hash(t))
    if key in _said_waiting:
        return
    _said_waiting.add(key)
    print(
        f"warning: trigger {t.name}: its command did not run, as it is not approved on this "
        f"machine (hint: check `{t.exec}`, then `ok trigger approve {t.name}`)",
        file=sys.stderr,
    )
    folder.log_op("trigger.exec_waiting", trigger=t.name, exec=t.exec, env=t.env)


def _example_vectors(folder: Folder, trigs: list[Trigger]) -> Any:
    from ..graph.indexing import embedder

    # embed() (not embed_query) so the examples come from the content-keyed cache
    return embedder(folder).embed([t.example for t in trigs])


def test(folder: Folder, text: str) -> list[TriggerTest]:
    """How close `text` is to every trigger, and whether it would fire."""
    from ..graph.indexing import embedder

    trigs, _ = load(folder)
    if not trigs:
        return []
    if not text.strip():
        raise BadInput("the text to test is empty", "pass some text")
    tv = _example_vectors(folder, trigs)
    v = embedder(folder).embed([text])[0]
    sims = tv @ v
    return [
        {
            "name": t.name,
            "similarity": round(float(s), 6),
            "threshold": t.threshold,
            "fires": bool(s >= t.threshold),
            "scope": t.scope,
        }
        for t, s in sorted(zip(trigs, sims, strict=True), key=lambda x: -float(x[1]))
    ]


# -- the check after each index write ----------------------------------------------------------
def _rows(
    g: GraphStore, doc_ids: list[str], note_ids: list[str], want_docs: bool, want_notes: bool
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if want_docs and doc_ids:
        paths = g.doc_paths(doc_ids)
        for r in g.current_chunks_of(doc_ids):
            rows.append(
                {
                    "kind": "chunk",
                    "id": r["id"],
                    "doc": r["doc"],
                    "text": r["text"],
                    "vec": r["vec"],
                    "path": paths.get(r["doc"], ""),
                }
            )
    if want_notes and note_ids:
        for n in g.notes_with_vectors(note_ids):
            rows.append(
                {
                    "kind": "memory",
                    "id": n["id"],
                    "note": n["id"],
                    "sha256": n["sha"],
                    "text": n["text"],
                    "vec": n["vec"],
                    "path": n["path"],
                }
            )
    return rows


def _key(ev: TriggerMatch | Event) -> tuple[str, ...]:
    if ev.get("kind") == "memory":
        return (str(ev.get("trigger")), "memory", str(ev.get("note")), str(ev.get("sha256")))
    return (str(ev.get("trigger")), "chunk", str(ev.get("doc")))


def matches(folder: Folder, trigs: list[Trigger], rows: list[dict[str, Any]]) -> list[TriggerMatch]:
    """The events the rows fire: one per trigger and document (its best chunk) or note."""
    import numpy as np

    if not trigs or not rows:
        return []
    tv = np.asarray(_example_vectors(folder, trigs), dtype=np.float32)
    mv = np.asarray([r["vec"] for r in rows], dtype=np.float32)
    norms = np.linalg.norm(mv, axis=1, keepdims=True)
    sims = (mv / np.where(norms == 0, 1, norms)) @ tv.T  # rows x triggers
    thresholds = np.asarray([t.threshold for t in trigs], dtype=np.float32)
    scope_ok = np.asarray(
        [
            [t.scope in ("all", "store" if r["kind"] == "chunk" else "mem") for t in trigs]
            for r in rows
        ],
        dtype=bool,
    )
    hit = (sims >= thresholds) & scope_ok
    best: dict[tuple[str, ...], TriggerMatch] = {}
    for i, j in zip(*np.nonzero(hit), strict=True):
        r, t, s = rows[i], trigs[j], float(sims[i, j])
        ev: TriggerMatch = {
            "trigger": t.name,
            "threshold": t.threshold,
            "similarity": round(s, 6),
            "kind": r["kind"],
            "item": r["id"],
            "path": r["path"],
            "quote": r["text"][:QUOTE_CHARS],
        }
        if r["kind"] == "chunk":
            ev["doc"] = r["doc"]
        else:
            ev["note"] = r["note"]
            ev["sha256"] = r["sha256"]
        k = _key(ev)
        if k in best:
            best[k]["matches"] += 1
            if s <= best[k]["similarity"]:
                continue
            ev["matches"] = best[k]["matches"]
        else:
            ev["matches"] = 1
        best[k] = ev
    return sorted(best.values(), key=lambda e: (e["trigger"], -e["similarity"], e["item"]))


def check(folder: Folder, g: Any, doc_ids: list[str], note_ids: list[str]) -> list[Event]:
    """Compare newly indexed chunks and notes with the triggers; append `trigger_fired` events
    (each trigger fires once per document version or note version) and start `exec` commands.
    """
    d = triggers_dir(folder)
    if not (doc_ids or note_ids) or not d.is_dir() or not any(d.glob("*.yml")):
        return []
    trigs, problems = load(folder)
    for p in problems:
        print(f"warning: trigger skipped: {p}", file=sys.stderr)
    return _fire(folder, g, trigs, doc_ids, note_ids)


def _fire(
    folder: Folder, g: Any, trigs: list[Trigger], doc_ids: list[str], note_ids: list[str]
) -> list[Event]:
    want_docs = any(t.scope in ("all", "store") for t in trigs)
    want_notes = any(t.scope in ("all", "mem") for t in trigs)
    found = matches(folder, trigs, _rows(g, doc_ids, note_ids, want_docs, want_notes))
    if not found:
        return []
    # a rebuild re-indexes old content, a scan reads it all: what already fired stays fired
    fired = {_key(e) for e in events.read(folder, types=["trigger_fired"])}
    new = [e for e in found if _key(e) not in fired]
    by_name = {t.name: t for t in trigs}
    known = approvals(folder) if any(by_name[e["trigger"]].exec for e in new) else {}
    for e in new:
        t = by_name[e["trigger"]]
        if t.exec and not is_approved(folder, t, known):
            e["exec_waiting"] = _waiting_reason(t)
    evs = events.emit_many(folder, [("trigger_fired", e) for e in new])
    for ev in evs:
        t = by_name[ev["trigger"]]
        if ev.get("exec_waiting"):
            _say_waiting(folder, t)
        elif t.exec:
            run_exec(folder, t, ev)
    return evs


SCAN_BATCH = 256  # documents (and notes) whose vectors are read at a time


def scan(folder: Folder, g: Any, name: str | None = None) -> TriggerScan:
    """Check what the folder holds now (current documents, live notes) against every
    trigger, or the one named: what was indexed before a trigger was added too. As after an
    index write, each trigger fires once per document version or note version, and what
    fired before, by a write or an earlier scan, does not fire again. The caller holds the
    writer lock."""
    trigs, problems = load(folder)
    if name is not None:
        trigs = [get(folder, name)]
    else:
        for p in problems:
            print(f"warning: trigger skipped: {p}", file=sys.stderr)
    docs = sorted(i for i, d in g.docs().items() if d["current"])
    notes = sorted(set(g.notes()) - g.hidden_notes(iso(), True))
    fired: list[Event] = []
    if trigs:
        for at in range(0, max(len(docs), len(notes)), SCAN_BATCH):
            batch = slice(at, at + SCAN_BATCH)
            fired += _fire(folder, g, trigs, docs[batch], notes[batch])
    return {
        "triggers": [t.name for t in trigs],
        "docs": len(docs),
        "notes": len(notes),
        "fired": fired,
    }


def run_exec(folder: Folder, t: Trigger, event: Event) -> threading.Thread:
    """Run the trigger's command with the event JSON on stdin, in a background thread.

    It runs after the event is safely written, in the folder's root with OK_ROOT set, so
    the command may call `ok` (it waits for this process to release the graph). Its
    environment is made here, from the environment of the command that wrote (a routed
    command's caller's, in `ok serve`).
    """
    env = exec_env(folder, t, event)

    def work() -> None:
        error = None
        try:
            # its own process group, so a timeout also stops whatever the shell started
            proc = subprocess.Popen(
                t.exec or "",
                shell=True,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=folder.root,
                start_new_session=True,
                env=env,
            )
            try:
                _, err = proc.communicate(json.dumps(event) + "\n", timeout=t.timeout)
                if proc.returncode != 0:
                    last = (err.strip().splitlines() or [""])[-1][:300]
                    error = f"exit status {proc.returncode}" + (f": {last}" if last else "")
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                error = f"timed out after {t.timeout:g} s"
        except OSError as e:
            error = str(e)
        if error:
            print(f"warning: trigger {t.name}: command failed ({error})", file=sys.stderr)
            folder.log_op("trigger.exec_failed", trigger=t.name, event=event["id"], error=error)
            events.emit(
                folder, "trigger_exec_failed", trigger=t.name, event=event["id"], error=error
            )

    th = threading.Thread(target=work, name=f"ok-trigger-{t.name}", daemon=False)
    th.start()
    _pending.append(th)
    return th


def exec_env(folder: Folder, t: Trigger, event: Event) -> dict[str, str]:
    """The environment of a trigger's command: BASE_ENV, the variables the trigger names
    but for the ones holding secrets (`is_secret_name`, and those the folder's settings name
    for its LLM key and JWT secret), and OK_ROOT, OK_TRIGGER and OK_EVENT_ID."""
    secret = set()
    for key in SECRET_ENV:
        with contextlib.suppress(BadInput):
            secret.add(folder.secret_env(key))
    names = [k for k in (*BASE_ENV, *t.env) if not is_secret_name(k) and k not in secret]
    env = {k: os.environ[k] for k in names if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update({"OK_ROOT": str(folder.root), "OK_TRIGGER": t.name, "OK_EVENT_ID": event["id"]})
    return env


def wait_pending(timeout: float | None = None) -> None:
    """Wait for trigger commands still running (the interpreter also waits at exit)."""
    while _pending:
        _pending.pop().join(timeout)
