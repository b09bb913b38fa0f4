"""Semantic triggers: files in triggers/, checked against new chunks and notes only."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import yaml
from helpers.run import run_cli, run_ok

from openkl.knowledge import triggers

LOCKS = "database write locks and concurrent writers"


def _fired(trigger: str | None = None) -> list[dict]:
    evs = run_ok("events", "--type", "trigger_fired", "--json").json()
    return [e for e in evs if trigger is None or e["trigger"] == trigger]


def _wait_for(path: Path, timeout: float = 120.0) -> str:
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
    assert r.code == 2 and "already exists" in r.err
    assert run_ok("trigger", "add", "db-locks", "--example", LOCKS, "--replace").code == 0
    assert [t["name"] for t in run_ok("trigger", "list", "--json").json()] == ["db-locks"]
    rows = run_ok("trigger", "test", "one writer holds the lock on the database", "--json").json()
    assert rows[0]["name"] == "db-locks" and rows[0]["fires"] and rows[0]["similarity"] > 0.6
    rows = run_ok("trigger", "test", "a recipe for banana bread", "--json").json()
    assert not rows[0]["fires"]
    assert run_ok("trigger", "remove", "db-locks").code == 0
    assert not (kf / "triggers/db-locks.yml").exists()
    r = run_ok("trigger", "remove", "db-locks")
    assert r.code == 2 and "no trigger named 'db-locks'" in r.err


@pytest.mark.parametrize(
    "args,message",
    [
        (["Bad Name", "--example", "x"], "trigger name 'Bad Name' is not valid"),
        (["ok1", "--example", "  "], "needs an example text"),
        (["ok1", "--example", "x", "--threshold", "1.5"], "threshold 1.5 must be in (0, 1]"),
        (["ok1", "--example", "x", "--in", "web"], "unknown scope 'web'"),
    ],
)
def test_bad_triggers(kf: Path, args: list[str], message: str) -> None:
    r = run_ok("trigger", "add", *args)
    assert r.code == 2 and message in r.err, r.err
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
    triggers.wait_pending(120)
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
        (["--exec", "true", "--env", "OPENAI_API_KEY"], "env names OPENAI_API_KEY, which holds"),
        (["--exec", "true", "--env", "OK_LLM_API_KEY"], "never given to a command"),
        (["--exec", "true", "--env", "KB_JWT_SECRET"], "never given to a command"),
        (["--exec", "true", "--env", "OK_ROOT"], "never given to a command"),
    ],
)
def test_bad_trigger_env(kf: Path, args: list[str], message: str) -> None:
    r = run_ok("trigger", "add", "t", "--example", LOCKS, *args)
    assert r.code == 2 and message in r.err, r.err
    assert not (kf / "triggers" / "t.yml").exists()


def test_hand_written_env_must_be_names(kf: Path) -> None:
    (kf / "triggers").mkdir()
    (kf / "triggers" / "a.yml").write_text(f"example: {LOCKS}\nexec: env\nenv: HOME\n")
    (kf / "triggers" / "b.yml").write_text(f"example: {LOCKS}\nexec: env\nenv:\n")
    r = run_ok("trigger", "list", "--json")
    assert [t["name"] for t in r.json()] == ["b"] and r.json()[0]["env"] == []
    assert "triggers/a.yml: env must be a list of variable names" in r.err


def _hand_written(kf: Path, name: str, command: str, env: str = "") -> Path:
    """A trigger file as a pull or a hand edit leaves it: nobody approved its command."""
    (kf / "triggers").mkdir(exist_ok=True)
    path = kf / "triggers" / f"{name}.yml"
    path.write_text(
        yaml.safe_dump({"example": LOCKS, "threshold": 0.5, "exec": command})
        + (f"env:\n- {env}\n" if env else "")
    )
    return path


def test_a_command_that_arrives_unapproved_waits_for_approval(kf: Path, tmp_path: Path) -> None:
    out = tmp_path / "ran.txt"
    trig = _hand_written(kf, "hook", f"cat >> {out}")
    [row] = run_ok("trigger", "list", "--json").json()
    assert row["approved"] is False
    assert "waits for approval (ok trigger approve hook)" in run_ok("trigger", "list").out
    # ok status and ok doctor say so, with the command that approves it
    st = run_ok("status")
    assert st.code == 0, st.err
    assert f"trigger hook waits for approval to run `cat >> {out}`" in st.out
    assert "`ok trigger approve hook`" in st.out
    assert run_ok("status", "--json").json()["exec_waiting"] == [
        {"name": "hook", "exec": f"cat >> {out}", "env": [], "approve": "ok trigger approve hook"}
    ]
    doc = run_ok("doctor", "--json")
    assert doc.code == 1
    [check] = [c for c in doc.json() if c["check"] == "trigger"]
    assert not check["ok"] and "hook waits for approval" in check["detail"]
    assert "ok trigger approve hook" in check["fix"]
    # it fires its event, which says why the command did not run; stderr says so once
    r = run_ok("mem", "add", "Concurrent writers wait for the database write lock")
    assert r.code == 0, r.err
    assert "trigger hook: its command did not run" in r.err and "ok trigger approve hook" in r.err
    triggers.wait_pending(20)
    [ev] = _fired("hook")
    assert "not approved on this machine" in ev["exec_waiting"]
    assert not out.exists()
    assert '"op": "trigger.exec_waiting"' in (kf / ".ok/ops.log").read_text()
    # approved: it runs from now on; the approval is not in git
    r = run_ok("trigger", "approve", "hook")
    assert r.code == 0, r.err
    assert r.out.strip() == f"approved trigger hook: runs `cat >> {out}`"
    assert ".ok/approved-triggers.json" in (kf / ".gitignore").read_text().splitlines()
    assert "exec_waiting" not in run_ok("status", "--json").json()
    assert run_ok("doctor").out.count("FAIL trigger") == 0
    assert run_ok("mem", "add", "The lock lets one writer in", "--allow-duplicate").code == 0
    fired = json.loads(_wait_for(out))
    assert fired["trigger"] == "hook" and "exec_waiting" not in fired
    # a changed command waits again, and so does the same one with other variables
    trig.write_text(trig.read_text().replace("cat >>", "tee -a"))
    assert run_ok("status", "--json").json()["exec_waiting"][0]["exec"] == f"tee -a {out}"
    assert run_ok("mem", "add", "Writers queue for the lock", "--allow-duplicate").code == 0
    triggers.wait_pending(20)
    assert len(out.read_text().splitlines()) == 1  # the new command did not run
    assert len(_fired("hook")) == 3 and "exec_waiting" in _fired("hook")[-1]
    run_ok("trigger", "approve", "hook")
    assert "exec_waiting" not in run_ok("status", "--json").json()
    trig.write_text(trig.read_text() + "env:\n- HOOK_URL\n")
    assert run_ok("status", "--json").json()["exec_waiting"][0]["env"] == ["HOOK_URL"]


def test_an_approval_does_not_travel_with_a_copy_of_the_folder(kf: Path, tmp_path: Path) -> None:
    assert run_ok("trigger", "add", "hook", "-e", LOCKS, "--exec", "true").code == 0
    assert run_ok("trigger", "list", "--json").json()[0]["approved"] is True
    copy = tmp_path / "copy"
    shutil.copytree(kf, copy, symlinks=True)  # .ok/ and its approvals with it
    rows = run_ok("--root", str(copy), "trigger", "list", "--json").json()
    assert rows[0]["approved"] is False
    # removing a trigger forgets its approval: the same command added by hand waits
    assert run_ok("trigger", "remove", "hook").code == 0
    _hand_written(kf, "hook", "true")
    assert run_ok("trigger", "list", "--json").json()[0]["approved"] is False


def test_approve_refuses_what_it_cannot_approve(kf: Path) -> None:
    assert run_ok("trigger", "add", "quiet", "-e", LOCKS).code == 0
    r = run_ok("trigger", "approve", "quiet")
    assert r.code == 2 and "trigger 'quiet' has no command to approve" in r.err
    r = run_ok("trigger", "approve", "nothing")
    assert r.code == 2 and "no trigger named 'nothing'" in r.err
    assert not (kf / ".ok/approved-triggers.json").exists()


# -- scans: what was there before a trigger ------------------------------------------------------
def test_scan_fires_on_what_was_there_before_and_only_once(kf: Path, tmp_path: Path) -> None:
    lock = run_ok("mem", "add", "Only one writer may hold the database lock at a time.", "--json")
    run_ok("mem", "add", "Banana bread needs very ripe bananas.")
    doc = tmp_path / "locks.md"
    doc.write_text("# Locks\n\nConcurrent writers wait for the database write lock.\n")
    assert run_ok("store", "ingest", str(doc)).code == 0
    out = tmp_path / "scanned.jsonl"
    r = run_ok(
        "trigger", "add", "locks", "-e", LOCKS, "--threshold", "0.55",
        "--exec", f"cat >> {out}",
    )  # fmt: skip
    assert r.code == 0, r.err
    run_ok("trigger", "add", "bread", "-e", "ripe bananas for banana bread", "--threshold", "0.6")
    assert _fired() == []  # a trigger checks only what is indexed after it
    r = run_ok("trigger", "scan", "locks", "--json")
    assert r.code == 0, r.err
    rep = r.json()
    assert rep["triggers"] == ["locks"] and rep["docs"] == 1 and rep["notes"] == 2
    got = {(e["kind"], e["trigger"]) for e in rep["fired"]}
    assert got == {("memory", "locks"), ("chunk", "locks")}
    assert lock.json()["id"] in [e.get("note") for e in rep["fired"]]
    assert "checked 1 document(s) and 2 note(s) against 1 trigger(s): 2 fired" in r.err
    # the trigger's command ran for each, as after a write
    _wait_for(out)
    triggers.wait_pending(60)
    assert len(out.read_text().splitlines()) == 2
    # every trigger now; what fired stays fired, so only bread fires
    r = run_ok("trigger", "scan")
    assert r.code == 0 and "bread" in r.out and "locks" not in r.out, r.out
    assert sorted(e["trigger"] for e in _fired()) == ["bread", "locks", "locks"]
    again = run_ok("trigger", "scan", "--json").json()
    assert again["fired"] == [] and again["triggers"] == ["bread", "locks"]
    # a new version of the note is new knowledge: it fires again
    nid = lock.json()["id"]
    assert run_ok("mem", "update", nid, "--text", "One writer holds the database lock.").code == 0
    assert [e["note"] for e in _fired("locks") if e["kind"] == "memory"] == [nid, nid]
    log = (kf / ".ok/ops.log").read_text()
    assert '"op": "trigger.scan"' in log
    r = run_ok("trigger", "scan", "nope")
    assert r.code == 2 and "no trigger named 'nope'" in r.err


@pytest.mark.server
def test_ok_serve_scans_on_schedule_and_over_http(kf: Path) -> None:
    from helpers.run import until
    from helpers.serve import Server

    run_ok("mem", "add", "Only one writer may hold the database lock at a time.")
    s = Server(kf, env={"OK_TRIGGERS_SCAN_EVERY": "0.5"})
    try:
        v1 = f"/v1/{s.stack}"
        r = s.http.post(
            f"{v1}/triggers", json={"name": "locks", "example": LOCKS, "threshold": 0.55}
        )
        assert r.status_code == 201, r.text

        def fired() -> list[dict]:
            return s.http.get(f"{v1}/events", params={"type": "trigger_fired"}).json()

        # the scheduled scan finds the note written before the trigger, once
        got = until(fired)
        assert [(e["trigger"], e["kind"]) for e in got] == [("locks", "memory")]
        r = s.http.post(f"{v1}/triggers/scan", json={"name": "locks"})
        assert r.status_code == 200, r.text
        assert r.json()["fired"] == [] and r.json()["notes"] == 1
        r = s.http.post(
            f"{v1}/triggers", json={"name": "again", "example": LOCKS, "threshold": 0.55}
        )
        assert r.status_code == 201, r.text
        r = s.http.post(f"{v1}/triggers/scan")  # no body: every trigger
        assert r.status_code == 200, r.text
        scanned = r.json()
        assert scanned["triggers"] == ["again", "locks"]
        # the scheduler may have found it first: either way it fired once
        assert len([e for e in fired() if e["trigger"] == "again"]) <= 1
        until(lambda: [e for e in fired() if e["trigger"] == "again"])
        assert s.http.post(f"{v1}/triggers/scan", json={"name": "nope"}).status_code == 404
        assert s.http.post(f"{v1}/triggers/scan", json={"names": ["x"]}).status_code == 422
        assert len(fired()) == 2
    finally:
        s.stop()
