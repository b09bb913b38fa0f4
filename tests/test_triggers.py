"""Semantic triggers: files in triggers/, checked against new chunks and notes only."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import run_cli, run_ok

from openkl import triggers

LOCKS = "database write locks and concurrent writers"


def _fired(trigger: str | None = None) -> list[dict]:
    evs = run_ok("events", "--type", "trigger_fired", "--json").json()
    return [e for e in evs if trigger is None or e["trigger"] == trigger]


def _wait_for(path: Path, timeout: float = 20.0) -> str:
    triggers.wait_pending(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written")


def test_add_list_test_remove(kf: Path) -> None:
    r = run_ok(
        "trigger",
        "add",
        "db-locks",
        "--example",
        LOCKS,
        "--threshold",
        "0.6",
        "--in",
        "mem",
        "--json",
    )
    assert r.code == 0, r.err
    assert r.json()["name"] == "db-locks" and r.json()["scope"] == "mem"
    saved = (kf / "triggers/db-locks.yml").read_text()
    assert "example: database write locks" in saved and "threshold: 0.6" in saved
    r = run_ok("trigger", "add", "db-locks", "--example", "again")
    assert r.code == 1 and "already exists" in r.err
    assert run_ok("trigger", "add", "db-locks", "--example", LOCKS, "--replace").code == 0
    assert [t["name"] for t in run_ok("trigger", "list", "--json").json()] == ["db-locks"]
    rows = run_ok("trigger", "test", "one writer holds the lock on the database", "--json").json()
    assert rows[0]["name"] == "db-locks" and rows[0]["fires"] and rows[0]["similarity"] > 0.6
    rows = run_ok("trigger", "test", "a recipe for banana bread", "--json").json()
    assert not rows[0]["fires"]
    assert run_ok("trigger", "remove", "db-locks").code == 0
    assert not (kf / "triggers/db-locks.yml").exists()
    r = run_ok("trigger", "remove", "db-locks")
    assert r.code == 1 and "no trigger named 'db-locks'" in r.err


@pytest.mark.parametrize(
    "args,message",
    [
        (["Bad Name", "--example", "x"], "trigger name 'Bad Name' is not valid"),
        (["ok1", "--example", "  "], "needs an example text"),
        (["ok1", "--example", "x", "--threshold", "1.5"], "threshold 1.5 must be in (0, 1]"),
        (["ok1", "--example", "x", "--in", "web"], "scope 'web' is not one of"),
    ],
)
def test_bad_triggers(kf: Path, args: list[str], message: str) -> None:
    r = run_ok("trigger", "add", *args)
    assert r.code == 1 and message in r.err, r.err
    assert not (kf / "triggers").exists() or not any((kf / "triggers").iterdir())


def test_fires_on_matching_note_and_runs_exec(kf: Path, tmp_path: Path) -> None:
    out = tmp_path / "event.json"
    r = run_ok(
        "trigger",
        "add",
        "db-locks",
        "--example",
        LOCKS,
        "--threshold",
        "0.6",
        "--exec",
        f"cat > {out}",
    )
    assert r.code == 0, r.err
    quiet = run_ok("mem", "add", "Banana bread wants very ripe bananas and brown sugar")
    loud = run_ok(
        "mem", "add", "Kùzu allows a single writer: concurrent writers wait for the database lock"
    )
    assert quiet.code == 0 and loud.code == 0
    [ev] = _fired()
    assert ev["note"] == loud.out.strip() and ev["kind"] == "memory"
    assert ev["similarity"] >= 0.6 and ev["threshold"] == 0.6 and ev["trigger"] == "db-locks"
    got = json.loads(_wait_for(out))
    assert got == ev  # the command received the event exactly as logged
    # rebuilding re-indexes everything, but what fired stays fired once
    assert run_ok("index", "--rebuild").code == 0
    assert len(_fired()) == 1
    # editing the note is a new version of it: it is checked again
    nid = loud.out.strip()
    assert (
        run_ok(
            "mem",
            "update",
            nid,
            "--text",
            "Writers queue on the database write lock; concurrent writers wait",
        ).code
        == 0
    )
    assert len(_fired()) == 2


def test_store_scope_fires_once_per_document(kf: Path, tmp_path: Path) -> None:
    assert (
        run_ok(
            "trigger", "add", "notes-only", "--example", LOCKS, "--threshold", "0.5", "--in", "mem"
        ).code
        == 0
    )
    assert (
        run_ok(
            "trigger", "add", "docs", "--example", LOCKS, "--threshold", "0.5", "--in", "store"
        ).code
        == 0
    )
    doc = tmp_path / "wal.md"
    doc.write_text(
        "# Locking\n\n"
        + "\n\n".join(
            f"Section {i}: the database write lock lets one writer in; concurrent writers wait."
            for i in range(40)
        )
        + "\n\n# Cooking\n\nBake the bread for forty minutes.\n"
    )
    r = run_ok("store", "ingest", str(doc), "--json")
    assert r.code == 0, r.err
    did = r.json()["added"][0]["id"]
    n_chunks = run_ok("graph", "cypher", "MATCH (c:Chunk) RETURN count(c) AS n", "--json").json()[
        0
    ]["n"]
    assert n_chunks > 1
    [ev] = _fired()
    assert ev["trigger"] == "docs" and ev["doc"] == did and ev["item"].startswith(did + "#char")
    assert ev["matches"] >= 2 and ev["path"].endswith("wal.ok.md")
    run_ok("mem", "add", "Concurrent writers wait for the database write lock")
    assert [e["trigger"] for e in _fired()] == ["docs", "notes-only"]


def test_exec_failure_and_timeout_keep_the_event(kf: Path) -> None:
    assert (
        run_ok(
            "trigger",
            "add",
            "fails",
            "--example",
            LOCKS,
            "--threshold",
            "0.5",
            "--exec",
            "echo broken >&2; exit 3",
        ).code
        == 0
    )
    assert (
        run_ok(
            "trigger",
            "add",
            "slow",
            "--example",
            LOCKS,
            "--threshold",
            "0.5",
            "--exec",
            "sleep 5",
            "--timeout",
            "0.5",
        ).code
        == 0
    )
    assert run_ok("mem", "add", "Concurrent writers wait for the database write lock").code == 0
    triggers.wait_pending(20)
    assert sorted(e["trigger"] for e in _fired()) == ["fails", "slow"]
    failed = run_ok("events", "--type", "trigger_exec_failed", "--json").json()
    by = {e["trigger"]: e["error"] for e in failed}
    assert by["fails"] == "exit status 3: broken"
    assert by["slow"] == "timed out after 0.5 s"
    log = (kf / ".ok/ops.log").read_text()
    assert '"op": "trigger.exec_failed"' in log


def test_no_triggers_is_free(kf: Path) -> None:
    assert run_ok("mem", "add", "Anything at all").code == 0
    assert not (kf / "triggers").exists()
    assert run_ok("trigger", "test", "anything", "--json").json() == []
    assert _fired() == []


def test_exec_gets_only_the_environment_it_names(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "env.txt"
    r = run_ok(
        "trigger",
        "add",
        "hook",
        "--example",
        LOCKS,
        "--threshold",
        "0.5",
        "--exec",
        f"env > {out}",
        "--env",
        "HOOK_URL",
        "--env",
        "HOOK_URL",
        "--json",
    )
    assert r.code == 0, r.err
    assert r.json()["env"] == ["HOOK_URL"]
    assert "env:\n- HOOK_URL" in (kf / "triggers/hook.yml").read_text()
    assert "env: HOOK_URL" in run_ok("trigger", "list").out
    secrets = {
        "OPENAI_API_KEY": "sk-do-not-leak",
        "AWS_SECRET_ACCESS_KEY": "aws-do-not-leak",
        "OK_LLM_API_KEY": "ok-do-not-leak",
    }
    # a real `ok` process, whose environment holds keys the command must not see
    r = run_cli(
        "mem",
        "add",
        "Concurrent writers wait for the database write lock",
        env={**secrets, "HOOK_URL": "https://hooks.example/x", "LANG": "C.UTF-8"},
    )
    assert r.code == 0, r.err
    env = dict(line.split("=", 1) for line in _wait_for(out).splitlines() if "=" in line)
    for name, value in secrets.items():
        assert name not in env and value not in out.read_text(), name
    assert env["HOOK_URL"] == "https://hooks.example/x"
    assert env["OK_ROOT"] == str(kf) and env["OK_TRIGGER"] == "hook"
    assert env["OK_EVENT_ID"] and env["PATH"] and env["LANG"] == "C.UTF-8"
    assert set(env) <= {
        *triggers.BASE_ENV,
        "HOOK_URL",
        "OK_ROOT",
        "OK_TRIGGER",
        "OK_EVENT_ID",
        "PWD",
        "SHLVL",
        "_",
        "OLDPWD",
    }, set(env)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--env", "HOOK_URL"], "there is no --exec"),
        (["--exec", "true", "--env", "NOT-A-NAME"], "env must be a list of variable names"),
        (["--exec", "true", "--env", "A=B"], "env must be a list of variable names"),
    ],
)
def test_bad_trigger_env(kf: Path, args: list[str], message: str) -> None:
    r = run_ok("trigger", "add", "t", "--example", LOCKS, *args)
    assert r.code == 1 and message in r.err, r.err
    assert not (kf / "triggers" / "t.yml").exists()


def test_hand_written_env_must_be_names(kf: Path) -> None:
    (kf / "triggers").mkdir()
    (kf / "triggers" / "a.yml").write_text(f"example: {LOCKS}\nexec: env\nenv: HOME\n")
    (kf / "triggers" / "b.yml").write_text(f"example: {LOCKS}\nexec: env\nenv:\n")
    r = run_ok("trigger", "list", "--json")
    assert [t["name"] for t in r.json()] == ["b"] and r.json()[0]["env"] == []
    assert "triggers/a.yml: env must be a list of variable names" in r.err
