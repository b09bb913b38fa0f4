"""The shell side of `ok`: --version, colour, completion, paging."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from helpers.run import run_cli, run_ok
from helpers.terminal import bash_complete, on_tty


def test_version_flag_alone_prints_version() -> None:
    from importlib.metadata import version

    r = run_ok("--version")
    assert r.code == 0, r.err
    assert r.out == f"ok {version('openkl')}\n"
    assert run_cli("--version").out == r.out


def test_bold_on_a_terminal_and_none_with_no_color(kf: Path) -> None:
    env = {"OK_ROOT": str(kf), "OK_SEARCH_K": "5"}
    styled = on_tty("config", "list", "--changed", env=env)
    assert b"search.k" in styled and b"\x1b[1m" in styled
    for plain in (
        on_tty("config", "list", "--changed", env={**env, "NO_COLOR": "1"}),
        on_tty("--color", "never", "config", "list", "--changed", env=env),
    ):
        assert b"search.k" in plain and b"\x1b[" not in plain


def test_color_always_styles_a_pipe_and_bad_values_are_usage_errors(
    kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OK_SEARCH_K", "5")
    monkeypatch.setenv("NO_COLOR", "1")
    r = run_ok("--color", "always", "config", "list", "--changed")
    assert r.code == 0, r.err
    assert "\x1b[1m" in r.out and "search.k" in r.out
    r = run_ok("config", "list", "--changed")
    assert "\x1b[" not in r.out and "search.k\t5\tenv OK_SEARCH_K" in r.out
    r = run_ok("--color", "sometimes", "config", "list")
    assert r.code == 2 and "auto, always, never" in r.err


def test_bash_completion_offers_commands_options_and_ids(example_kf: Path, tmp_path: Path) -> None:
    r = run_ok("completion", "bash")
    assert r.code == 0, r.err
    assert "_OK_COMPLETE=complete_bash" in r.out and "complete -o default -F _ok_completion ok" in (
        r.out
    )
    script = tmp_path / "ok.bash"
    script.write_text(r.out)

    note = run_ok("mem", "add", "Completion finds this note").out.strip()
    docs = [d["id"] for d in run_ok("store", "list", "--json").json()]
    cite = run_ok("cite", "make", docs[0], "--persist", "--json").json()
    cid = (cite[0] if isinstance(cite, list) else cite)["id"]
    assert cid.startswith("c-")

    assert bash_complete(script, ["ok", "mem", "sh"], example_kf) == ["show"]
    assert "completion" in bash_complete(script, ["ok", "comp"], example_kf)
    assert bash_complete(script, ["ok", "--co"], example_kf) == ["--color"]
    assert note in bash_complete(script, ["ok", "mem", "show", "m-"], example_kf)
    assert bash_complete(script, ["ok", "mem", "show", note], example_kf) == [note]
    offered = bash_complete(script, ["ok", "store", "show", docs[0][:3]], example_kf)
    assert docs[0] in offered and not any(x.startswith("m-") for x in offered)
    assert bash_complete(script, ["ok", "cite", "verify", "c-"], example_kf) == [cid]
    assert cid in bash_complete(script, ["ok", "cite", "open", ""], example_kf)
    # outside a folder there are no ids, and TAB does not fail
    assert bash_complete(script, ["ok", "mem", "show", "m-"], tmp_path / "nowhere") == []


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts(shell: str) -> None:
    r = run_ok("completion", shell)
    assert r.code == 0, r.err
    assert f"_OK_COMPLETE=complete_{shell}" in r.out


def _in_bash(flag: str, home: Path | None) -> str:
    """`ok FLAG` run from a real bash (the shell typer detects is the parent process)."""
    import os
    import subprocess

    from helpers.run import OK_BIN

    env = {**os.environ, **({"HOME": str(home)} if home else {})}
    # `; exit $?` keeps bash as the parent instead of exec-ing ok in its place
    r = subprocess.run(
        ["bash", "-c", f"{shlex.quote(OK_BIN)} {flag}; exit $?"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_show_completion_prints_a_script_and_unknown_shells_are_named() -> None:
    out = _in_bash("--show-completion", home=None)  # for the shell it runs in
    assert "_OK_COMPLETE=complete_bash" in out
    r = run_ok("completion", "tcsh")
    assert r.code != 0 and "bash, zsh, fish" in r.err


def test_install_completion_writes_the_script_under_home(tmp_path: Path) -> None:
    assert "bash completion installed in" in _in_bash("--install-completion", home=tmp_path)
    installed = list(tmp_path.rglob("ok*"))
    assert installed and any("_OK_COMPLETE" in p.read_text() for p in installed if p.is_file())


PAGER = "sed 's/^/PAGED:/'"


def test_long_output_goes_through_the_pager_on_a_terminal_only(
    example_kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = run_ok("store", "list", "--json").json()[0]["id"]
    env = {"OK_ROOT": str(example_kf), "PAGER": PAGER}
    shown = on_tty("store", "show", doc, env=env)
    assert shown.startswith(b"PAGED:") and shown.count(b"PAGED:") > 1
    assert b"PAGED:" not in on_tty("store", "show", doc, "--json", env=env)
    assert b"PAGED:" not in on_tty("store", "show", doc, env={**env, "PAGER": "cat"})

    cid = run_ok("cite", "make", doc, "--json").json()
    cid = (cid[0] if isinstance(cid, list) else cid)["id"]
    assert b"PAGED:" in on_tty("cite", "open", cid, env=env)

    monkeypatch.setenv("PAGER", PAGER)  # a pipe is never paged
    r = run_ok("store", "show", doc)
    assert r.code == 0 and r.out and "PAGED:" not in r.out
    r = run_ok("cite", "open", cid)
    assert r.code == 0 and ">>> " in r.out and "PAGED:" not in r.out


def test_a_missing_pager_still_shows_the_text(example_ro: Path) -> None:
    doc = run_ok("store", "list", "--json").json()[0]["id"]
    env = {"OK_ROOT": str(example_ro), "PAGER": "no-such-pager-here"}
    text = run_ok("store", "show", doc).out
    assert on_tty("store", "show", doc, env=env).replace(b"\r\n", b"\n") == text.encode()


def test_graph_page_is_paged_on_a_terminal(example_kf: Path) -> None:
    ents = run_ok("graph", "entities", "--json")
    assert ents.code == 0, ents.err
    name = ents.json()[0]["name"]
    piped = run_ok("graph", "page", name)
    assert piped.code == 0 and "PAGED:" not in piped.out
    shown = on_tty("graph", "page", name, env={"OK_ROOT": str(example_kf), "PAGER": PAGER})
    assert shown.startswith(b"PAGED:") and name.encode() in shown
