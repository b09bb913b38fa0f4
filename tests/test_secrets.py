"""What a folder may not reach: the variables that hold secrets. A folder's `.ok/config.yml`
names the LLM key's and the JWT secret's variables only from an allow-list; anything else
comes from the environment of the process that reads it (the server's own settings)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers.openai_stub import chat_server
from helpers.run import OK_BIN, run_ok, until
from helpers.serve import Server, metric_value

SECRET = "jwt-secret-that-must-never-leave-the-server-0123456789"


def _config(root: Path, **sections: dict[str, object]) -> None:
    """Write settings into the folder's config file, as a pull or a hand edit would."""
    path = root / ".ok/config.yml"
    data = yaml.safe_load(path.read_text()) or {}
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    path.write_text(yaml.safe_dump(data))


def _llm(root: Path, url: str, key_env: str) -> None:
    _config(
        root, llm={"base_url": url, "model": "stub-model", "api_key_env": key_env, "retries": 0}
    )


def _sent(stub: object) -> str:
    return repr(stub.headers) + repr(stub.requests)  # type: ignore[attr-defined]


def test_a_folder_cannot_name_any_variable_as_the_llm_key(
    kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_ok("mem", "add", "The harbour pilot boards at the red buoy.").code == 0
    monkeypatch.setenv("MYJWT", SECRET)
    with chat_server(["The pilot boards at the red buoy [1]."]) as stub:
        _llm(kf, stub.url, "MYJWT")
        r = run_ok("ask", "where does the pilot board?")
        assert r.code != 0
        [line] = r.err.strip().splitlines()
        assert line.startswith("Error: llm.api_key_env") and "MYJWT" in line
        assert "_API_KEY" in line and "OK_LLM_API_KEY_ENV" in line  # the fixes
        assert SECRET not in _sent(stub) and not stub.requests
        # ok doctor says so too, on one line of its config check
        d = run_ok("doctor", "--json")
        config = next(c for c in d.json() if c["check"] == "config")
        assert not config["ok"] and "MYJWT" in config["detail"], config
        # and `ok config set` refuses to write it
        r = run_ok("config", "set", "llm.api_key_env", "MYJWT")
        assert r.code != 0 and "MYJWT" in r.err
        assert yaml.safe_load((kf / ".ok/config.yml").read_text())["llm"]["api_key_env"] == (
            "MYJWT"
        )  # left as it was
        # a name of the allow-list is taken from a folder, and its value sent
        assert run_ok("config", "set", "llm.api_key_env", "STUB_API_KEY").code == 0
        monkeypatch.setenv("STUB_API_KEY", "sk-stub")
        r = run_ok("ask", "where does the pilot board?")
        assert r.code == 0, r.err
        assert stub.headers[-1]["Authorization"] == "Bearer sk-stub"
        # the environment (the operator's own settings) may name any variable
        _llm(kf, stub.url, "MYJWT")
        monkeypatch.setenv("OK_LLM_API_KEY_ENV", "MYJWT")
        r = run_ok("ask", "where does the pilot board?")
        assert r.code == 0, r.err
        assert stub.headers[-1]["Authorization"] == f"Bearer {SECRET}"


@pytest.mark.server
def test_a_served_folder_never_sends_the_servers_jwt_secret_to_its_llm(
    example_kf: Path,
) -> None:
    with chat_server(["Lovelace wrote it [1]."]) as stub:
        _llm(example_kf, stub.url, "MYJWT")
        env = {"MYJWT": SECRET, "OK_SERVE_JWT_SECRET_ENV": "MYJWT"}
        s = Server(example_kf, env=env)
        try:
            r = s.http.post(f"/v1/{s.stack}/ask", json={"question": "who wrote the program?"})
            assert r.status_code == 400, r.text
            assert "MYJWT" in r.json()["error"] and r.json()["hint"]
            r = s.http.post(
                f"/v1/{s.stack}/ask", json={"question": "who wrote the program?", "stream": True}
            )
            assert SECRET not in r.text
        finally:
            s.stop()
        assert SECRET not in _sent(stub) and not stub.requests


@pytest.mark.parametrize("name", ["HOME", "MYJWT", "OPENAI_API_KEY"])
def test_a_folder_cannot_choose_the_variable_jwts_are_checked_with(kf: Path, name: str) -> None:
    # a guessable variable (HOME) would let anyone sign a token the server accepts
    _config(kf, serve={"jwt_secret_env": name})
    proc = subprocess.run(
        [OK_BIN, "serve", "--root", str(kf), "--auth", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MYJWT": SECRET},
    )
    assert proc.returncode != 0
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("Error: serve.jwt_secret_env") and name in line, line
    assert "_JWT_SECRET" in line


@pytest.mark.server
def test_the_allowed_jwt_secret_names_serve(kf: Path) -> None:
    _config(kf, serve={"jwt_secret_env": "KB_JWT_SECRET"})
    s = Server(kf, "--auth", env={"KB_JWT_SECRET": SECRET})
    try:
        assert s.http.get(f"/v1/{s.stack}/notes").status_code == 401
    finally:
        s.stop()


# -- trigger commands on a server --------------------------------------------------------------
LOCKS = "database write locks and concurrent writers"
SPY = (
    "{ echo '== env'; env; echo '== parent'; tr '\\0' '\\n' < /proc/$PPID/environ; "
    "echo '== server'; "
    "tr '\\0' '\\n' < /proc/$(sed -n 's/.*\"pid\": *\\([0-9]*\\).*/\\1/p' .ok/serve.json)/environ; "
    "echo '== stdin'; cat; echo; echo '== end'; } > {out} 2>&1"
)


def _sections(text: str) -> dict[str, str]:
    parts = text.split("== ")[1:]
    return {p.split("\n", 1)[0]: p.split("\n", 1)[1] for p in parts}


@pytest.mark.server
def test_a_trigger_command_never_sees_the_servers_secrets_nor_other_stacks(
    kf: Path, tmp_path: Path
) -> None:
    other = tmp_path / "elsewhere-stack"
    assert run_ok("init", str(other)).code == 0
    assert run_ok("--root", str(other), "mem", "add", "The other team's harbour plan.").code == 0
    out = tmp_path / "spy.txt"
    r = run_ok(
        "trigger", "add", "spy", "-e", LOCKS, "--threshold", "0.5",
        "--exec", SPY.replace("{out}", str(out)), "--env", "HOOK_URL",
    )  # fmt: skip
    assert r.code == 0, r.err
    env = {
        "T_SECRET": SECRET,
        "OK_SERVE_JWT_SECRET_ENV": "T_SECRET",
        "OPENAI_API_KEY": "sk-server-key-do-not-leak",
        "HOOK_URL": "https://hooks.example/x",
    }
    s = Server(kf, more=(other,), env=env)
    try:
        v1 = f"/v1/{s.stack}"
        # an exec trigger cannot be added over HTTP without the operator's flag
        spy = {"name": "spy2", "example": LOCKS, "exec": "cat /proc/$PPID/environ"}
        r = s.http.post(f"{v1}/triggers", json=spy)
        assert r.status_code == 403, r.text
        assert "--allow-exec-triggers" in r.json()["hint"]
        r = s.http.post(f"{v1}/triggers", json={**spy, "name": "spy", "replace": True})
        assert r.status_code == 403, r.text  # nor changed into one
        assert not (kf / "triggers/spy2.yml").exists()
        r = s.http.post(f"{v1}/triggers", json={"name": "quiet", "example": LOCKS})
        assert r.status_code == 201, r.text  # one without a command is added as before
        r = s.http.post(f"{v1}/notes", json={"text": "Concurrent writers wait for the lock."})
        assert r.status_code == 201, r.text
        text = until(lambda: out.exists() and "== end" in out.read_text() and out.read_text())
    finally:
        s.stop()
    seen = _sections(text)
    assert set(seen) == {"env", "parent", "server", "stdin", "end"}, text
    # the server's environment was read, and showed names without their values
    assert "T_SECRET=" in seen["parent"] and "T_SECRET=" in seen["server"], text
    for secret in (SECRET, env["OPENAI_API_KEY"], "OK_SERVE_JWT_SECRET_ENV=T_SECRET"):
        assert secret not in text, secret
    assert "HOOK_URL=https://hooks.example/x" in seen["env"]
    assert str(other) not in seen["env"] + seen["stdin"] and "elsewhere-stack" not in text
    assert f"OK_ROOT={kf}" in seen["env"] and '"trigger": "spy"' in seen["stdin"]


@pytest.mark.server
def test_exec_triggers_over_http_with_the_operators_flag(example_kf: Path, tmp_path: Path) -> None:
    out = tmp_path / "ran.txt"
    s = Server(example_kf, "--allow-exec-triggers")
    try:
        v1 = f"/v1/{s.stack}"
        hook = {"name": "hook", "example": LOCKS, "threshold": 0.5, "exec": f"cat > {out}"}
        pager = {"name": "pager", "example": LOCKS, "threshold": 0.5, "exec": "exit 3"}
        for bad in ("OPENAI_API_KEY", "OK_SERVE_JWT_SECRET_ENV", "KB_JWT_SECRET"):
            r = s.http.post(f"{v1}/triggers", json={**hook, "env": [bad]})
            assert r.status_code == 400 and "never given to a command" in r.json()["error"]
        for t in (hook, pager):
            r = s.http.post(f"{v1}/triggers", json=t)
            assert r.status_code == 201, r.text
        # what an admin adds on this server is approved by that act
        assert "exec_waiting" not in s.http.get(f"{v1}/status").json()
        r = s.http.post(f"{v1}/notes", json={"text": "Concurrent writers wait for the lock."})
        assert r.status_code == 201, r.text
        got = until(lambda: out.exists() and out.read_text())
        assert '"trigger": "hook"' in got

        def failed() -> list[dict[str, object]]:
            evs = s.http.get(f"{v1}/events", params={"type": "trigger_exec_failed"}).json()
            return [e for e in evs if e["trigger"] == "pager"]

        assert until(failed)[0]["error"] == "exit status 3"

        def counted() -> list[float]:
            text = s.http.get("/metrics").text
            return [
                metric_value(text, "ok_trigger_fires_total", stack=s.stack, trigger=t, outcome=o)
                for t, o in (("hook", "fired"), ("pager", "fired"), ("pager", "exec_failed"))
            ]

        until(lambda: counted() == [1, 1, 1], 30)
        # a hand edit of the command makes it wait, as anywhere
        path = example_kf / "triggers/hook.yml"
        path.write_text(path.read_text().replace("cat >", "tee"))
        [w] = s.http.get(f"{v1}/status").json()["exec_waiting"]
        assert w["name"] == "hook" and w["approve"] == "ok trigger approve hook"
    finally:
        s.stop()


def test_no_mcp_tool_writes_a_trigger(kf: Path) -> None:
    """MCP (stdio or /mcp) offers no way to add a command to run: no trigger tool, no
    argument that is one. A triggers/*.yml arriving by any other way waits for approval."""
    import inspect

    from openkl.mcp.tools import KnowledgeServer

    for fn, _ in KnowledgeServer([kf]).tool_specs():
        params = set(inspect.signature(fn).parameters)
        assert "trigger" not in fn.__name__ and not params & {"exec", "command", "env"}, fn
