"""Settings: one registry (openkl/settings.py), `ok config`, and docs/config.md."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml
from helpers.run import run_ok

from openkl import settings
from openkl.files.folder import Folder

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "openkl"
REGENERATE = "uv run python -m openkl.settings --markdown > docs/config.md"


def _calls(name: str) -> list[tuple[Path, ast.Call]]:
    """Every call of a function or method called `name` in openkl/."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if called == name:
                out.append((path, node))
    return out


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"


# -- the registry ------------------------------------------------------------------------
def test_no_call_site_keeps_its_own_default() -> None:
    calls = _calls("setting")
    assert len(calls) > 30
    for path, node in calls:
        assert len(node.args) == 1 and not node.keywords, (
            f"{_where(path, node)}: setting() takes only the key; "
            "the default belongs in openkl/settings.py"
        )
        key = node.args[0]
        if isinstance(key, ast.Constant):
            assert key.value in settings.SETTINGS, f"{_where(path, node)}: {key.value!r}"
            assert not settings.SETTINGS[key.value].env_only, _where(path, node)


LIGHT = {"cli/route.py"}


def test_environment_is_read_through_the_registry() -> None:
    """Env-only variables are read with settings.env(NAME), and NAME is declared."""
    for path, node in _calls("env"):
        f = node.func
        if isinstance(f, ast.Attribute) and getattr(f.value, "id", "") == "settings":
            name = node.args[0]
            assert isinstance(name, ast.Constant), _where(path, node)
            assert settings.SETTINGS[name.value].env_only, _where(path, node)
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "settings.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            # os.environ.get("X"), os.getenv("X"), os.environ["X"] with a literal name
            literal = None
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("get", "getenv")
                and ast.unparse(node.func.value) in ("os.environ", "os")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                literal = node.args[0].value
            if (
                isinstance(node, ast.Subscript)
                and ast.unparse(node.value) == "os.environ"
                and isinstance(node.slice, ast.Constant)
            ):
                literal = node.slice.value
            if literal is not None and path.relative_to(PACKAGE).as_posix() in LIGHT:
                # the light entry point imports only the standard library; it may read
                # a declared env-only variable itself
                assert settings.SETTINGS[literal].env_only, _where(path, node)
                continue
            assert literal is None, (
                f"{_where(path, node)} reads {literal} directly; declare it in "
                "openkl/settings.py and read it with settings.env()"
            )


def test_declarations_are_sound() -> None:
    envs = [s.env for s in settings.DECLARED]
    assert len(envs) == len(set(envs)), "two settings share an environment variable"
    assert len(settings.SETTINGS) == len(settings.DECLARED), "a key is declared twice"
    for s in settings.DECLARED:
        assert s.help.endswith("."), s.key
        assert s.type in (int, float, bool, str), s.key
        if s.default is None:
            assert s.nullable, f"{s.key}: a None default needs nullable=True"
        else:
            assert settings.resolve(s, {}, environ={}).value == s.default
            # the default, typed back in, is the default
            assert s.parse(settings.render(s.default), "", "") == s.default, s.key
            assert isinstance(s.default, s.type), s.key
        if s.choices:
            assert s.default in s.choices, s.key


def test_every_mcp_tool_has_a_time_cap(kf: Path) -> None:
    from openkl.mcp.tools import KnowledgeServer

    names = {fn.__name__ for fn, _ in KnowledgeServer([kf]).tool_specs()}
    assert names == set(settings.MCP_TOOLS)
    for name in names:
        assert f"mcp.timeouts.{name}" in settings.SETTINGS


def test_undeclared_key_is_a_programming_error(kf: Path) -> None:
    f = Folder(kf)
    with pytest.raises(KeyError, match="not a declared setting"):
        f.setting("search.kk")
    with pytest.raises(KeyError):
        f.setting("OK_NOW")  # env-only: read with settings.env
    with pytest.raises(KeyError):
        settings.env("OK_SEARCH_K")


def test_env_values_are_coerced_to_the_declared_type(
    kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = Folder(kf)
    assert f.setting("search.k") == 10 and f.explain("search.k").source == "default"
    for key, raw, want in [
        ("search.k", " 3 ", 3),
        ("lock_timeout", "5", 5.0),
        ("mcp.read_only", "yes", True),
        ("mcp.read_only", "off", False),
        ("search.mode", "fts", "fts"),
        ("llm.base_url", "", None),
        ("mcp.timeouts.graph_cypher", "1", 1.0),
    ]:
        monkeypatch.setenv(settings.env_name(key), raw)
        v = f.explain(key)
        assert (v.value, v.source) == (want, "env"), key
        assert type(v.value) is type(want), key


# -- the reference page ------------------------------------------------------------------
def test_config_reference_is_current() -> None:
    page = REPO / "docs" / "config.md"
    assert page.exists() and page.read_text(encoding="utf-8") == settings.markdown(), (
        f"docs/config.md is out of date: run `{REGENERATE}`"
    )
    text = page.read_text(encoding="utf-8")
    for s in settings.DECLARED:
        assert f"`{s.key}`" in text
    assert "docs/config.md" in (REPO / "README.md").read_text(encoding="utf-8")


# -- ok config ---------------------------------------------------------------------------
def test_list_shows_value_source_type_and_help(kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_ok("config", "set", "search.per_doc", "2").code == 0
    monkeypatch.setenv("OK_SEARCH_K", "3")
    r = run_ok("config", "list", "--json")
    assert r.code == 0, r.err
    rows = {d["key"]: d for d in r.json()}
    assert set(rows) == set(settings.SETTINGS)
    assert rows["search.k"] == {
        "key": "search.k",
        "value": 3,
        "source": "env",
        "type": "int",
        "default": 10,
        "env": "OK_SEARCH_K",
        "help": settings.SETTINGS["search.k"].help,
    }
    assert (rows["search.per_doc"]["value"], rows["search.per_doc"]["source"]) == (2, "config")
    assert rows["search.mode"]["source"] == "default"
    assert rows["search.mode"]["choices"] == ["hybrid", "vector", "fts"]
    assert rows["OK_NO_PROGRESS"]["source"] == "env" and rows["OK_NO_PROGRESS"]["env_only"]
    # plain: one tab-separated line per setting
    r = run_ok("config", "list")
    line = next(x for x in r.out.splitlines() if x.startswith("search.k\t"))
    assert line.split("\t")[:4] == ["search.k", "3", "env OK_SEARCH_K", "int"]
    r = run_ok("config", "list", "--changed", "--json")
    changed = {d["key"] for d in r.json()}
    assert {"search.k", "search.per_doc", "domain"} <= changed
    assert "search.mode" not in changed


def test_get(kf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_ok("config", "get", "search.k")
    assert (r.code, r.out) == (0, "10\n")
    r = run_ok("config", "get", "mcp.read_only")
    assert r.out == "false\n"
    r = run_ok("config", "get", "llm.base_url")
    assert (r.code, r.out) == (0, "")
    monkeypatch.setenv("OK_LLM_MODEL", "qwen3")
    d = run_ok("config", "get", "llm.model", "--json").json()
    assert (d["value"], d["source"], d["env"]) == ("qwen3", "env", "OK_LLM_MODEL")
    d = run_ok("config", "get", "ok_now", "--json").json()
    assert (d["key"], d["source"], d["env_only"]) == ("OK_NOW", "default", True)


def test_set_writes_the_file_atomically_keeping_other_keys(kf: Path) -> None:
    cfg = kf / ".ok" / "config.yml"
    text = cfg.read_text()
    assert text.startswith("# ") and "ok config list" in text  # a header that teaches
    cfg.write_text(text + yaml.safe_dump({"llm": {"model": "qwen3"}}))
    r = run_ok("config", "set", "search.k", "5", "--json")
    assert r.code == 0, r.err
    assert (r.json()["value"], r.json()["source"]) == (5, "config")
    r = run_ok("config", "set", "search.vector_weight", "0.25")
    assert (r.code, r.out) == (0, "search.vector_weight = 0.25\n")
    assert run_ok("config", "set", "mcp.read_only", "true").code == 0
    assert run_ok("config", "set", "mcp.timeouts.ask", "300").code == 0
    after = cfg.read_text()
    assert after.startswith(text.split("\n")[0])  # the opening comments are kept
    got = yaml.safe_load(after)
    assert got["version"] == 1 and got["domain"] == "kf"
    assert got["llm"] == {"model": "qwen3"}
    assert got["search"] == {"k": 5, "vector_weight": 0.25}
    assert got["mcp"] == {"read_only": True, "timeouts": {"ask": 300.0}}
    assert not list(cfg.parent.glob(".config.yml.*"))  # no temp file left behind
    assert Folder(kf).setting("search.k") == 5
    ops = (kf / ".ok" / "ops.log").read_text()
    assert '"op": "config.set"' in ops


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("search.k", "ten", "an integer"),
        ("search.k", "2.5", "an integer"),
        ("lock_timeout", "soon", "a number"),
        ("mcp.read_only", "maybe", "true or false"),
        ("search.mode", "semantic", "one of hybrid, vector, fts"),
    ],
)
def test_set_refuses_a_value_of_the_wrong_type(
    kf: Path, key: str, value: str, expected: str
) -> None:
    before = (kf / ".ok" / "config.yml").read_text()
    r = run_ok("config", "set", key, value)
    assert r.code == 2 and r.out == ""
    assert r.err.count("\n") == 1
    assert r.err.startswith(f"Error: {key} = {value!r} is not {expected}")
    assert "(hint: " in r.err and f"ok config set {key} " in r.err
    assert (kf / ".ok" / "config.yml").read_text() == before


def test_unknown_key_is_refused_with_close_matches(kf: Path) -> None:
    for cmd in (["set", "search.kk", "5"], ["get", "search.kk"], ["unset", "search.kk"]):
        r = run_ok("config", *cmd)
        assert r.code == 2, cmd
        assert r.err.count("\n") == 1
        assert "unknown setting 'search.kk'" in r.err and "did you mean search.k" in r.err
    r = run_ok("config", "get", "lock_timout")
    assert "did you mean lock_timeout" in r.err
    r = run_ok("config", "set", "OK_NOW", "2026-01-01")
    assert r.code == 2 and "environment only" in r.err and "export OK_NOW=" in r.err


def test_env_override_is_shown_and_warned_about_on_set(
    kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OK_SEARCH_K", "3")
    r = run_ok("config", "set", "search.k", "5", "--json")
    assert r.code == 0
    assert (r.json()["value"], r.json()["source"]) == (3, "env")
    assert "OK_SEARCH_K is set in the environment and wins" in r.err
    assert yaml.safe_load((kf / ".ok/config.yml").read_text())["search"]["k"] == 5


def test_bad_values_in_env_or_file_are_one_line_naming_key_value_and_type(
    kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OK_SEARCH_K", "lots")
    r = run_ok("search", "anything")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "search.k = 'lots' (from OK_SEARCH_K) is not an integer" in r.err
    assert "OK_SEARCH_K=10" in r.err
    monkeypatch.delenv("OK_SEARCH_K")
    cfg = kf / ".ok" / "config.yml"
    cfg.write_text(cfg.read_text() + "search:\n  k: many\n")
    r = run_ok("config", "get", "search.k")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "search.k = 'many' (in .ok/config.yml) is not an integer" in r.err
    assert "ok config set search.k 10" in r.err


def test_unset_goes_back_to_the_default(kf: Path) -> None:
    assert run_ok("config", "set", "search.k", "4").code == 0
    r = run_ok("config", "unset", "search.k", "--json")
    assert r.code == 0
    d = r.json()
    assert (d["removed"], d["value"], d["source"]) == (True, 10, "default")
    assert "search" not in yaml.safe_load((kf / ".ok/config.yml").read_text())
    r = run_ok("config", "unset", "search.k")
    assert (r.code, r.out) == (0, "search.k is not set in .ok/config.yml\n")


def test_unknown_keys_in_the_file_are_warned_about_and_can_be_removed(kf: Path) -> None:
    cfg = kf / ".ok" / "config.yml"
    cfg.write_text(cfg.read_text() + "search:\n  k: 4\n  topk: 3\n")
    r = run_ok("config", "list")
    assert r.code == 0
    assert "'search.topk', which is not a setting" in r.err
    assert "ok config unset search.topk" in r.err
    r = run_ok("config", "unset", "search.topk")
    assert (r.code, r.out) == (0, "removed search.topk\n")
    assert yaml.safe_load(cfg.read_text())["search"] == {"k": 4}
    assert run_ok("config", "list").err == ""


def test_a_set_value_changes_what_search_returns(example_kf: Path) -> None:
    # one document is about gene editing; with the tail floor off the rest are listed too
    assert len(run_ok("search", "gene editing", "--json").json()) == 1
    assert run_ok("config", "set", "search.tail_floor", "0").code == 0
    assert len(run_ok("search", "gene editing", "--json").json()) > 2
    assert run_ok("config", "set", "search.k", "2").code == 0
    hits = run_ok("search", "gene editing", "--json").json()
    assert len(hits) == 2
    # a flag still wins over the file
    assert len(run_ok("search", "gene editing", "-k", "3", "--json").json()) == 3


def test_keys_can_be_named_by_their_environment_variable(kf: Path) -> None:
    d = run_ok("config", "get", "OK_SEARCH_K", "--json").json()
    assert d["key"] == "search.k"
    assert run_ok("config", "set", "OK_SEARCH_K", "7").code == 0
    assert run_ok("config", "get", "search.k").out == "7\n"
    assert run_ok("config", "unset", "ok_search_k").out.startswith("removed search.k")


def test_doctor_checks_the_settings(kf: Path) -> None:
    checks = {c["check"]: c for c in run_ok("doctor", "--json").json()}
    assert checks["config"]["ok"] is True
    cfg = kf / ".ok" / "config.yml"
    cfg.write_text(cfg.read_text() + "search:\n  k: many\n  kk: 3\n")
    r = run_ok("doctor", "--json")
    assert r.code == 1
    c = {c["check"]: c for c in r.json()}["config"]
    assert c["ok"] is False
    assert "search.k = 'many'" in c["detail"] and "'search.kk'" in c["detail"]
    assert "ok config set search.k 10" in c["fix"] and "ok config unset search.kk" in c["fix"]


OLD_INIT_CONFIG = """\
version: 1
domain: kb
embedding: {model: default, batch_size: 32}
chunking: {max_tokens: 256, overlap: 64}
search: {k: 10, mode: hybrid, per_doc: 1, vector_index: exact, fusion: wsum,
  vector_weight: 0.5, rrf_k: 60, diversity: 0.5}
lock_timeout: 30.0
llm: {base_url: null, model: null, api_key_env: OPENAI_API_KEY, timeout: 60.0, retries: 2}
ingest: {max_file_mb: 64}
graph: {buffer_pool_mb: 512, min_free_mb: 64}
mcp:
  max_k: 50
  max_bytes: 100000
  timeout: 30.0
  timeouts: {ask: 120.0, store_ingest: 300.0, context: 60.0}
  fs_max_entries: 500
  grep_max: 200
  cypher_max_rows: 500
  read_only: false
"""


def test_a_config_an_older_init_wrote_is_valid_and_means_the_defaults(kf: Path) -> None:
    (kf / ".ok" / "config.yml").write_text(OLD_INIT_CONFIG)
    r = run_ok("config", "list", "--json")
    assert r.code == 0 and r.err == ""  # the retired search.vector_index is not warned about
    for d in r.json():
        if d["key"] != "domain" and d["source"] != "env":
            assert d["value"] == d["default"], d["key"]
    checks = {c["check"]: c for c in run_ok("doctor", "--json").json()}
    assert checks["config"]["ok"] is True, checks["config"]
    assert run_ok("config", "unset", "search.vector_index").out == "removed search.vector_index\n"
