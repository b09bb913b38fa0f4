"""Acting on a hit: absolute paths, `ok open`, one line per piped hit, the 80-column table,
and `--format` on the list-like commands."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from helpers.run import OK_BIN, run_cli, run_ok

QUERY = "who wrote the first computer program"


def test_hits_carry_an_absolute_path_that_works_from_a_subfolder(
    example_kf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OK_ROOT")  # the folder is found from the working directory
    here = example_kf / "memories"
    r = run_cli("search", QUERY, "--json", cwd=here)
    assert r.code == 0, r.err
    hits = r.json()
    keys = list(hits[0])
    assert keys[keys.index("path") + 1] == "abs_path"
    for h in hits:
        assert h["abs_path"] == str(example_kf.resolve() / h["path"])
    # the pipeline, with the new field, from inside the folder
    line = subprocess.run(
        [
            "bash",
            "-o",
            "pipefail",
            "-c",
            f"{OK_BIN} search {shlex.quote(QUERY)} --json"
            " | jq -r '.[0].abs_path' | xargs head -n 1",
        ],
        cwd=here,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert line.returncode == 0, line.stderr
    assert line.stdout == Path(hits[0]["abs_path"]).read_text().splitlines(True)[0]


def test_kept_citations_stay_relative_and_are_printed_with_abs_path(example_kf: Path) -> None:
    hit = run_ok("search", QUERY, "-k", "1", "--json").json()[0]
    made = run_ok("cite", "make", hit["id"], "--persist", "--json").json()
    made = made[0] if isinstance(made, list) else made
    assert made["abs_path"] == str(example_kf.resolve() / made["path"])
    stored = json.loads((example_kf / "citations" / f"{made['id']}.json").read_text())
    assert "abs_path" not in stored and stored["path"] == made["path"]
    listed = run_ok("cite", "list", "--json").json()
    assert [c["abs_path"] for c in listed] == [made["abs_path"]]
    keys = list(listed[0])
    assert keys[keys.index("path") + 1] == "abs_path"
    # a cite object from elsewhere gets this folder's absolute path, not the one it carried
    moved = {**hit, "abs_path": "/nowhere/else.md"}
    r = run_ok("cite", "verify", "-", "--json", input=json.dumps(moved))
    assert r.code == 0 and r.json()[0]["status"] == "verified"
    r = run_ok("cite", "make", "-", "--json", input=json.dumps(moved))
    assert r.code == 0 and "/nowhere" not in r.out


def test_piped_search_prints_one_tab_separated_line_per_hit(example_kf: Path) -> None:
    hits = run_ok("search", QUERY, "-k", "3", "--json").json()
    r = run_ok("search", QUERY, "-k", "3")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert len(lines) == len(hits) >= 2  # unrelated neighbours are not listed (tail_floor)
    rows = [line.split("\t") for line in lines]
    assert all(len(f) == 5 for f in rows)
    assert [f[0] for f in rows] == [str(n) for n in range(1, len(hits) + 1)]
    assert [f[2] for f in rows] == [h["id"] for h in hits]
    assert [f[3].rpartition(":")[0] for f in rows] == [h["path"] for h in hits]  # path:L1-L2
    assert all(f[4] and "\n" not in f[4] for f in rows)
    cut = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{OK_BIN} search {shlex.quote(QUERY)} -k 3 | cut -f3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cut.returncode == 0 and cut.stdout.split() == [h["id"] for h in hits]
    explained = run_ok("search", QUERY, "-k", "3", "--explain").out.splitlines()
    assert len(explained) == len(hits)
    assert all(len(x.split("\t")) == 6 and "vector=" in x.split("\t")[5] for x in explained)
    mem = run_ok("mem", "search", "writer").out.splitlines()
    assert len(mem) == 1 and mem[0].split("\t")[2].startswith("m-")


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_open_prints_the_span_when_piped(example_kf: Path) -> None:
    hits = run_ok("search", QUERY, "-k", "3", "--json").json()
    r = run_ok("open", "2")  # a rank of the last search
    assert r.code == 0, r.err
    head, *body = r.out.splitlines()
    where, span = head.rsplit(":", 1)
    first, last = (int(x) for x in span.split("-")) if "-" in span else (int(span),) * 2
    assert Path(where).resolve() == Path(hits[1]["abs_path"])
    assert body == _lines(Path(hits[1]["abs_path"]))[first - 1 : last]
    assert hits[1]["quote"].split("\n")[0] in "\n".join(body)
    # the id itself, and the spot as JSON
    spot = run_ok("open", hits[1]["id"], "--json").json()
    assert (spot["abs_path"], spot["line"], spot["end_line"]) == (hits[1]["abs_path"], first, last)
    assert spot["status"] == "verified"
    # a note's id opens its file at the note's text
    note = next(h for h in run_ok("search", "writer", "--in", "mem", "--json").json())
    spot = run_ok("open", note["id"], "--json").json()
    assert _lines(Path(spot["abs_path"]))[spot["line"] - 1].startswith("Kùzu keeps one writer")


def test_open_takes_path_and_line_from_here_or_the_root(example_ro: Path) -> None:
    hit = run_ok("search", QUERY, "-k", "1", "--json").json()[0]
    r = run_ok("open", f"{hit['path']}:3", cwd=example_ro)  # the header: a path from here
    assert r.code == 0, r.err
    assert r.out == f"{hit['path']}:3\n{_lines(Path(hit['abs_path']))[2]}\n"
    sub = Path(hit["abs_path"]).parent
    r = run_ok("open", f"{Path(hit['path']).name}:2", "--json", cwd=sub)
    assert r.code == 0 and r.json()["line"] == 2 and r.json()["path"] == hit["path"]
    bad = [
        (["open", "no/such/file.md:3"], "no file no/such/file.md"),
        (["open", f"{hit['path']}:9999"], "lines, not 9999"),
        (["open", "7"], "has no hit 7"),
        (["open", "c-0000000000000000"], "no citation with id"),
    ]
    for args, message in bad:
        r = run_ok(*args)
        assert r.code != 0 and message in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_open_without_a_search_says_what_to_do(kf: Path) -> None:
    r = run_ok("open", "1")
    assert r.code == 2 and "no search to take hit 1 from" in r.err and "ok search" in r.err


def _on_tty(*args: str, env: dict[str, str], cwd: Path | None = None) -> int:
    """Run the installed `ok` with stdin and stdout on a pseudo-terminal."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [OK_BIN, *args],
        stdin=slave,
        stdout=slave,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env={**os.environ, "TERM": "xterm-256color", **env},
    )
    os.close(slave)
    while True:
        try:
            if not os.read(master, 65536):
                break
        except OSError:  # EIO: the child closed the terminal
            break
    os.close(master)
    return proc.wait(timeout=120)


def _editor(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A small editor that writes its arguments, one per line, to a file."""
    log = tmp_path / f"{name}.argv"
    script = tmp_path / "bin" / name
    script.parent.mkdir(exist_ok=True)
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {shlex.quote(str(log))}\n')
    script.chmod(0o755)
    return script, log


def test_open_starts_the_editor_at_the_line_on_a_terminal(example_kf: Path, tmp_path: Path) -> None:
    hits = run_ok("search", QUERY, "-k", "2", "--json").json()
    spot = run_ok("open", "2", "--json").json()
    vim, vim_log = _editor(tmp_path, "vim")
    code, code_log = _editor(tmp_path, "code")
    env = {"OK_ROOT": str(example_kf), "VISUAL": "", "EDITOR": f"{vim} -n"}
    assert _on_tty("open", "2", env=env) == 0
    # at the line of the passage's best sentence for the search, else its first line
    line = spot.get("best_line", spot["line"])
    assert vim_log.read_text().splitlines() == ["-n", f"+{line}", hits[1]["abs_path"]]
    # VISUAL wins over EDITOR; VS Code takes --goto file:line
    assert _on_tty("open", hits[0]["id"], env={**env, "VISUAL": f"{code} -w"}) == 0
    first = run_ok("open", hits[0]["id"], "--json").json()
    assert code_log.read_text().splitlines() == [
        "-w",
        "--goto",
        f"{hits[0]['abs_path']}:{first['line']}",
    ]
    # the editor's failure is the command's
    env_fail = {**env, "EDITOR": "false"}
    assert _on_tty("open", "1", env=env_fail) == 2  # the editor failed: an error


def _tmux() -> str:
    tmux = shutil.which("tmux")
    assert tmux, "tmux is needed for the terminal test (.ci/run installs it)"
    return tmux


@pytest.mark.terminal
def test_terminal_table_at_80_columns_keeps_ids_whole(example_kf: Path, tmp_path: Path) -> None:
    """Through tmux at 80 columns: each id on one line, the path beside or under it relative
    to the working directory, the passage wrapped."""
    hits = run_ok("search", QUERY, "-k", "4", "--json").json()
    tmux = _tmux()
    sock = str(tmp_path / "tmux.sock")
    out = tmp_path / "done"
    env = f"OK_ROOT={shlex.quote(str(example_kf))} OK_NO_PROGRESS=1 COLUMNS= LINES="
    cmd = (
        f"cd {shlex.quote(str(example_kf / 'memories'))} && clear && "
        f"{env} {OK_BIN} search {shlex.quote(QUERY)} -k 4; echo $? > {shlex.quote(str(out))}"
    )
    base = [tmux, "-S", sock, "-f", "/dev/null"]
    subprocess.run(
        [*base, "new-session", "-d", "-x", "80", "-y", "60", "sh"],
        check=True,
        env={**os.environ, "TERM": "xterm-256color"},
    )
    try:
        subprocess.run([*base, "send-keys", "-t", "0", cmd, "Enter"], check=True)
        # the shell writes the exit code once `ok` has ended (the file may be made empty first)
        deadline = time.monotonic() + 180
        while not (out.exists() and out.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert out.exists() and out.read_text().strip() == "0"
        screen = subprocess.run(
            [*base, "capture-pane", "-p", "-t", "0", "-S", "-60"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        subprocess.run([*base, "kill-server"], check=False)
    lines = screen.splitlines()
    assert all(len(x) <= 80 for x in lines)
    for h in hits:
        with_id = [x for x in lines if h["id"] in x]
        assert len(with_id) == 1, (h["id"], screen)
        shown = os.path.relpath(h["abs_path"], example_kf / "memories")
        assert shown.startswith("../store/") or shown.startswith("by_date/")
        assert any(shown in x for x in lines), (shown, screen)
    # the first hit's passage wraps onto several lines under its id, before the next hit
    at = [next(i for i, x in enumerate(lines) if h["id"] in x) for h in hits[:2]]
    under = [x for x in lines[at[0] + 1 : at[1]] if x.strip()]
    assert len(under) >= 4 and "Lovelace" in " ".join(under), screen
    indent = len(lines[at[0]]) - len(lines[at[0]].lstrip())
    assert all(x.startswith(" " * (indent + 8)) for x in under), screen


def _formats(*args: str) -> dict[str, str]:
    out = {}
    for fmt in ("json", "jsonl", "csv", "tsv"):
        r = run_ok(*args, "--format", fmt)
        assert r.code == 0, (args, fmt, r.err)
        out[fmt] = r.out
    return out


def _tsv_cell(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value):
            out.append({"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[value[i + 1]])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def _flat(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


@pytest.mark.parametrize(
    "args",
    [
        ("search", QUERY, "-k", "3"),
        ("mem", "list"),
        ("store", "list"),
        ("graph", "entities", "-n", "5"),
        ("events",),
        ("cite", "list"),
    ],
)
def test_format_prints_the_same_records_four_ways(example_kf: Path, args: tuple[str, ...]) -> None:
    if args[0] == "cite":
        doc = run_ok("store", "list", "--json").json()[0]["id"]
        assert run_ok("cite", "make", doc, "--lines", "1-2", "--persist").code == 0
    as_json = run_ok(*args, "--json")
    assert as_json.code == 0, as_json.err
    rows = as_json.json()
    assert rows, args
    got = _formats(*args)
    assert json.loads(got["json"]) == rows
    assert [json.loads(x) for x in got["jsonl"].splitlines()] == rows
    columns = list(dict.fromkeys(k for r in rows for k in r))
    table = list(csv.reader(io.StringIO(got["csv"])))
    assert table[0] == columns and len(table) == len(rows) + 1
    tsv = [[_tsv_cell(c) for c in line.split("\t")] for line in got["tsv"].splitlines()]
    assert tsv == table  # same cells, tabs and newlines escaped
    for row, cells in zip(rows, table[1:], strict=True):
        assert cells == [_flat(row.get(c)) for c in columns]


def test_format_errors_and_the_json_alias(example_ro: Path) -> None:
    r = run_ok("store", "list", "--format", "xml")
    assert r.code == 2 and "'xml' is not one of json, jsonl, csv, tsv" in r.err
    r = run_ok("store", "list", "--json", "--format", "csv")
    assert r.code == 2 and "--json and --format csv disagree" in r.err
    assert (
        run_ok("store", "list", "--json", "--format", "json").out
        == run_ok("store", "list", "--json").out
    )
    assert run_ok("--json", "store", "list").out == run_ok("store", "list", "--format", "json").out
    r = run_ok("events", "--follow", "--timeout", "0.1", "--format", "csv")
    assert r.code == 2 and "--format jsonl" in r.err
    r = run_ok("events", "--follow", "--timeout", "0.1", "--format", "jsonl")
    assert r.code == 0 and all(json.loads(x) for x in r.out.splitlines())
    empty = run_ok("events", "--type", "no_such_type", "--format", "csv")
    assert empty.code == 0 and empty.out == ""


def test_open_completes_the_last_search_ids(example_kf: Path, tmp_path: Path) -> None:
    from helpers.terminal import bash_complete

    script = tmp_path / "ok.bash"
    script.write_text(run_ok("completion", "bash").out)
    hits = run_ok("search", QUERY, "-k", "2", "--json").json()
    offered = bash_complete(script, ["ok", "open", hits[1]["id"][:6]], example_kf)
    assert hits[1]["id"] in offered
