"""Notes written in the editor (`ok mem add` without text, `--edit`, `ok mem edit`) and
read from a pipe (`echo x | ok mem add`). The editor is a real shell script; the terminal
tests drive a real tmux."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.run import OK_BIN, run_cli, run_ok


def _editor(tmp_path: Path, body: str, name: str = "ed.sh") -> Path:
    """A shell-script editor: keeps what it was shown in `<name>.seen`, then writes `body`
    into the file it is given."""
    script = tmp_path / name
    content = tmp_path / f"{name}.content"
    content.write_text(body, encoding="utf-8")
    script.write_text(
        f'#!/bin/sh\ncp "$1" {shlex.quote(str(script))}.seen\n'
        f'cat {shlex.quote(str(content))} > "$1"\n'
    )
    script.chmod(0o755)
    return script


def _notes(kf: Path) -> list[Path]:
    return sorted(kf.glob("memories/by_date/*/*/*.md"))


def _drafts(kf: Path) -> list[Path]:
    return sorted((kf / ".ok" / "drafts").glob("*"))


NOTE = """---
title: Writer lock
tags: [kuzu, locks]
topics: [design]
scope: project
---
# One writer

Only one process writes the graph; the others wait for the lock.
"""


def test_add_in_the_editor_from_a_template(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ed = _editor(tmp_path, NOTE)
    monkeypatch.setenv("EDITOR", str(ed))
    r = run_ok("mem", "add", "--edit", "--tags", "first", "--json")
    assert r.code == 0, r.err
    note = r.json()
    # the template: frontmatter to fill (with the tags given), then comment lines
    seen = Path(f"{ed}.seen").read_text()
    assert seen.startswith("---\ntitle:\ntags: [first]\ntopics: []\n---\n")
    assert "# ------------------------ >8 ------------------------" in seen
    assert "everything below it are removed" in seen
    # what the editor left is the note: its frontmatter kept, `#` headings kept
    assert note["tags"] == ["kuzu", "locks"] and note["topics"] == ["design"]
    assert note["title"] == "Writer lock" and note["scope"] == "project"
    assert (
        note["text"]
        == "# One writer\n\nOnly one process writes the graph; the others wait for the lock."
    )
    text = (kf / note["path"]).read_text()
    assert text.startswith(f"---\nid: {note['id']}\n") and ">8" not in text
    assert _drafts(kf) == []
    hits = run_ok("search", "others wait for the lock", "--mode", "fts", "--json").json()
    assert [h["id"] for h in hits] == [note["id"]]


def test_the_editor_starts_from_the_text_and_drops_the_comments(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TEXT starts the body; the editor appends below the comments and deletes nothing: the
    comment lines go, what was written above the scissors stays, no frontmatter is fine."""
    script = tmp_path / "append.sh"
    script.write_text('#!/bin/sh\nprintf "appended below\\n" >> "$1"\n')
    script.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(script))
    r = run_ok("mem", "add", "--edit", "started on the command line", "--json")
    assert r.code == 0, r.err
    assert r.json()["text"] == "started on the command line"
    assert r.json()["tags"] == [] and "title" not in r.json()


def test_a_draft_saved_with_a_bom_and_crlf(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "\ufeff---\r\ntags: [windows]\r\n---\r\nSaved by a Windows editor.\r\n"
    monkeypatch.setenv("EDITOR", str(_editor(tmp_path, body)))
    r = run_ok("mem", "add", "--edit", "--json")
    assert r.code == 0, r.err
    assert r.json()["tags"] == ["windows"] and r.json()["text"] == "Saved by a Windows editor."


def test_visual_wins_and_the_editor_runs_through_the_shell(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = _editor(tmp_path, "from EDITOR\n", "wrong.sh")
    script = tmp_path / "with-args.sh"
    # `code --wait` style: the editor command has its own arguments before the file
    script.write_text('#!/bin/sh\n[ "$1" = --wait ] || exit 3\nprintf "from %s\\n" "$2" > "$3"\n')
    script.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(wrong))
    monkeypatch.setenv("VISUAL", f"{script} --wait VISUAL")
    r = run_ok("mem", "add", "--edit", "--json")
    assert r.code == 0, r.err
    assert r.json()["text"] == "from VISUAL"
    monkeypatch.delenv("VISUAL")
    r = run_ok("mem", "add", "--edit", "--json")
    assert r.code == 0, r.err
    assert r.json()["text"] == "from EDITOR"


def test_an_empty_note_aborts_and_writes_nothing(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # saving the template as it is: frontmatter and comments only
    monkeypatch.setenv("EDITOR", "true")
    r = run_ok("mem", "add", "--edit", "--tags", "x")
    assert r.code == 2
    assert r.err.startswith("Error: Aborting: empty note, nothing was saved")
    assert len(r.err.strip().splitlines()) == 1 and r.out == ""
    # blank frontmatter and a blank body, the comments deleted
    monkeypatch.setenv("EDITOR", str(_editor(tmp_path, "---\ntitle:\n---\n\n  \n")))
    r = run_ok("mem", "add", "--edit")
    assert r.code == 2 and "Aborting: empty note" in r.err
    assert _notes(kf) == [] and _drafts(kf) == []


def test_an_editor_that_fails_aborts(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "fail.sh"
    script.write_text('#!/bin/sh\nprintf "half a note\\n" > "$1"\nexit 1\n')
    script.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(script))
    r = run_ok("mem", "add", "--edit")
    assert r.code == 2
    assert f"the editor `{script}` exited with status 1; nothing was saved" in r.err
    monkeypatch.setenv("EDITOR", "no-such-editor-here")
    r = run_ok("mem", "add", "--edit")
    assert r.code == 2 and "`no-such-editor-here` was not found" in r.err and "EDITOR" in r.err
    assert _notes(kf) == [] and _drafts(kf) == []


def test_a_failed_save_keeps_the_text(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDITOR", str(_editor(tmp_path, "---\ntags: [a\n---\nworth keeping\n")))
    r = run_ok("mem", "add", "--edit", cwd=kf)
    assert r.code == 2
    [draft] = _drafts(kf)
    rel = f".ok/drafts/{draft.name}"
    assert "broken YAML frontmatter" in r.err
    assert f"your text is kept in {rel}" in r.err and f"`ok mem add --from {rel}`" in r.err
    assert "worth keeping" in draft.read_text() and _notes(kf) == []
    # `id` is set on save, not written
    monkeypatch.setenv("EDITOR", str(_editor(tmp_path, "---\nid: m-1\n---\ntext\n", "id.sh")))
    r = run_ok("mem", "add", "--edit")
    assert r.code == 2 and "`id` is set when the note is saved" in r.err
    assert len(_drafts(kf)) == 2
    # fixed, the kept draft is added and goes
    draft.write_text(draft.read_text().replace("[a\n", "[a]\n"))
    r = run_ok("mem", "add", "--from", rel, "--json", cwd=kf)
    assert r.code == 0, r.err
    assert r.json()["text"] == "worth keeping" and r.json()["tags"] == ["a"]
    assert not draft.exists()


HOLD_LOCK = """
import sys, time
from openkl.files.folder import Folder
with Folder(__import__("pathlib").Path(sys.argv[1])).write_lock("a test holder"):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_the_lock_is_not_held_while_the_editor_is_open(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer may write while the note is being written; if the folder is locked
    when the editor closes, the save fails and says where the text is kept."""
    script = tmp_path / "busy.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'{shlex.quote(OK_BIN)} mem add "another writer meanwhile" || exit 5\n'
        'printf "written in the editor\\n" > "$1"\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(script))
    r = run_ok("mem", "add", "--edit", "--json")
    assert r.code == 0, r.err
    assert r.json()["text"] == "written in the editor" and len(_notes(kf)) == 2
    # now the folder is locked from inside the editor (until the test ends it), and we wait 1 s
    holder = tmp_path / "holder.py"
    holder.write_text(HOLD_LOCK)
    pid_file = tmp_path / "holder.pid"
    script.write_text(
        "#!/bin/sh\n"
        f"{shlex.quote(sys.executable)} {holder} {kf} 600 > {tmp_path}/held &\n"
        f"echo $! > {pid_file}\n"
        f"until grep -q locked {tmp_path}/held; do kill -0 $! || exit 6; sleep 0.1; done\n"
        'printf "kept while locked\\n" > "$1"\n'
    )
    monkeypatch.setenv("OK_LOCK_TIMEOUT", "1")
    try:
        r = run_ok("mem", "add", "--edit", cwd=kf)
    finally:
        with contextlib.suppress(ProcessLookupError, FileNotFoundError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
    assert r.code == 2 and "locked by another writer" in r.err
    [draft] = _drafts(kf)
    assert f"your text is kept in .ok/drafts/{draft.name}" in r.err
    assert "kept while locked" in draft.read_text() and len(_notes(kf)) == 2


def test_add_from_a_file_of_ones_own(kf: Path, tmp_path: Path) -> None:
    own = tmp_path / "idea.md"
    own.write_text("---\ntitle: An idea\n---\nWrite it down first.\n")
    r = run_ok("mem", "add", "--from", str(own), "--tags", "ideas", "--json")
    assert r.code == 0, r.err
    assert r.json()["title"] == "An idea" and r.json()["tags"] == ["ideas"]
    assert own.exists()  # not ours to remove
    r = run_ok("mem", "add", "text too", "--from", str(own))
    assert r.code == 2 and "not both" in r.err


def test_piped_stdin_is_the_note(kf: Path) -> None:
    # stdin is not a terminal here: with no text, it is read
    r = run_ok("mem", "add", "--tags", "piped", "--json", input="read from the pipe\n")
    assert r.code == 0, r.err
    assert r.json()["text"] == "read from the pipe" and r.json()["tags"] == ["piped"]
    # a real pipe, as `echo x | ok mem add`
    r = run_cli("mem", "add", "--json", input="through a real pipe\n", env={"OK_ROOT": str(kf)})
    assert r.code == 0, r.err
    assert r.json()["text"] == "through a real pipe"
    # text given: stdin is not read, whatever it holds
    r = run_ok("mem", "add", "from the argument", "--json", input="not this\n")
    assert r.code == 0 and r.json()["text"] == "from the argument"
    # an empty pipe is an empty note, not an editor
    r = run_ok("mem", "add", input="")
    assert r.code == 2 and "the note is empty" in r.err
    assert len(_notes(kf)) == 3


def _add(text: str) -> str:
    r = run_ok("mem", "add", text, "--tags", "old", "--json")
    assert r.code == 0, r.err
    return str(r.json()["id"])


def test_edit_a_note_and_index_it_again(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nid = _add("The first version mentions aardvarks.")
    path = _notes(kf)[0]
    script = tmp_path / "sed.sh"
    # change the text and the tags, and (wrongly) the id
    script.write_text(
        "#!/bin/sh\nsed -i 's/aardvarks/zebras/; s/^tags: .*/tags: [new]/; "
        's/^id: .*/id: m-20990101-zzzz/\' "$1"\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(script))
    r = run_ok("mem", "edit", nid, "--json")
    assert r.code == 0, r.err
    assert r.json()["id"] == nid and r.json()["tags"] == ["new"]
    assert "mentions zebras" in r.json()["text"]
    assert f"has `id: {nid}` again" in r.err
    assert path.read_text().startswith(f"---\nid: {nid}\n") and _notes(kf) == [path]
    fts = ("--in", "mem", "--mode", "fts", "--json")
    assert [h["id"] for h in run_ok("search", "zebras", *fts).json()] == [nid]
    assert run_ok("search", "aardvarks", *fts).json() == []
    assert (kf / "memories/topics/new" / path.name).is_symlink()
    assert not (kf / "memories/topics/old").exists()
    # the editor changes nothing: said, and nothing breaks
    monkeypatch.setenv("EDITOR", "true")
    r = run_ok("mem", "edit", nid)
    assert r.code == 0 and r.out.strip() == nid and f"no changes to {nid}" in r.err


def test_edit_leaving_broken_frontmatter(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nid = _add("Kept through a broken edit.")
    path = _notes(kf)[0]
    script = tmp_path / "break.sh"
    script.write_text("#!/bin/sh\nsed -i 's/^tags: .*/tags: [old, broken/' \"$1\"\n")
    script.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(script))
    r = run_ok("mem", "edit", nid)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    rel = f"memories/by_date/{path.parent.parent.name}/{path.parent.name}/{path.name}"
    assert f"{rel}: broken YAML frontmatter" in r.err
    assert f"your edit stays in {rel}" in r.err and "`ok sync` indexes it" in r.err
    assert "tags: [old, broken" in path.read_text()  # the user's edit is not thrown away
    # a broken file can still be opened by its id, and fixed
    script.write_text("#!/bin/sh\nsed -i 's/^tags: .*/tags: [fixed]/' \"$1\"\n")
    r = run_ok("mem", "edit", nid, "--json")
    assert r.code == 0, r.err
    assert r.json()["tags"] == ["fixed"]
    assert run_ok("sync").code == 0


def test_edit_an_empty_body_or_an_unknown_id(
    kf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nid = _add("Soon emptied.")
    monkeypatch.setenv("EDITOR", str(_editor(tmp_path, f"---\nid: {nid}\n---\n\n")))
    r = run_ok("mem", "edit", nid)
    assert r.code == 2 and "the note is empty" in r.err
    r = run_ok("mem", "edit", "m-20990101-none")
    assert r.code == 2 and r.err.startswith("Error: no memory note with id m-20990101-none")
    assert "(hint: " in r.err


# -- in a real terminal -------------------------------------------------------------------


def _tmux(sock: Path, *args: str) -> str:
    out = subprocess.run(
        ["tmux", "-S", str(sock), *args], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _wait_for(sock: Path, pattern: str, timeout: float = 120) -> str:
    """The pane's text once `pattern` (a regular expression) shows on it."""
    end = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < end:
        screen = _tmux(sock, "capture-pane", "-p", "-J", "-t", "t")
        if re.search(pattern, screen):
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} not on the screen:\n{screen}")


@pytest.fixture
def terminal(tmp_path: Path, kf: Path):  # type: ignore[no-untyped-def]
    """Start a command in a tmux pane of its own server; yields (start, socket)."""
    assert shutil.which("tmux"), "tmux is needed (.ci/run installs it)"
    sock = tmp_path / "tmux.sock"

    def start(command: str, editor: Path) -> None:
        env = {
            "OK_ROOT": str(kf),
            "OK_NO_PROGRESS": "1",
            "OK_NO_DAEMON": "1",
            "EDITOR": str(editor),
            "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", str(tmp_path)),
            "TERM": "xterm",
        }
        if "XDG_CACHE_HOME" in os.environ:  # where the model is unpacked
            env["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"]
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        script = tmp_path / "in-terminal.sh"
        script.write_text(f"{command}\n")
        line = f"env -i {envs} bash {shlex.quote(str(script))}; echo EXIT=$?; sleep 600"
        _tmux(sock, "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "200", "-y", "50")
        _tmux(sock, "send-keys", "-t", "t", line, "Enter")

    yield start, sock
    subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, timeout=30)


@pytest.mark.terminal
@pytest.mark.parametrize("captured", [False, True], ids=["plain", "output-captured"])
def test_mem_add_opens_the_editor_in_the_terminal(  # type: ignore[no-untyped-def]
    terminal, kf: Path, tmp_path: Path, captured: bool
) -> None:
    """No text and a terminal: the editor opens there, reads what is typed, and its text
    is the note; also when the output is captured (`id=$(ok mem add)`), where the editor
    still has the terminal and only the id is captured."""
    start, sock = terminal
    ed = tmp_path / "tty-editor.sh"
    ed.write_text(
        "#!/bin/sh\n"
        '[ -t 0 ] && [ -t 1 ] && echo "EDITOR ON A TTY: $(basename "$1")"\n'
        "read -r line\n"
        'printf -- "---\\ntags: [tmux]\\n---\\n%s\\n" "$line" > "$1"\n'
    )
    ed.chmod(0o755)
    cmd = f"{shlex.quote(OK_BIN)} mem add"
    start(f'id=$({cmd}) && echo "ID=[$id]"' if captured else cmd, ed)
    _wait_for(sock, r"EDITOR ON A TTY: note-\w+\.md")
    _tmux(sock, "send-keys", "-t", "t", "typed in the terminal about quokkas", "Enter")
    screen = _wait_for(sock, r"EXIT=\d")
    assert "EXIT=0" in screen, screen
    [path] = _notes(kf)
    assert (f"ID=[{path.stem}]" if captured else path.stem) in screen
    text = path.read_text()
    assert "tags: [tmux]" in text and "typed in the terminal about quokkas" in text
    hits = run_ok("search", "quokkas", "--in", "mem", "--mode", "fts", "--json").json()
    assert [h["id"] for h in hits] == [path.stem]


# an editor that breaks the frontmatter the first time and mends it the second
BREAK_THEN_MEND = (
    "#!/bin/sh\n"
    'if grep -q "tags: \\[a$" "$1"; then sed -i "s/tags: \\[a$/tags: [a]/" "$1"\n'
    'else printf -- "---\\ntags: [a\\n---\\nsecond try\\n" > "$1"; fi\n'
)


@pytest.mark.terminal
@pytest.mark.parametrize("answer", ["y", "n"])
def test_a_bad_save_asks_to_edit_again(  # type: ignore[no-untyped-def]
    terminal, kf: Path, tmp_path: Path, answer: str
) -> None:
    """At a terminal, broken frontmatter asks `Edit again?` (as `crontab -e`): yes reopens
    the same text, no keeps it in the draft and says where."""
    start, sock = terminal
    ed = tmp_path / "twice.sh"
    ed.write_text(BREAK_THEN_MEND)
    ed.chmod(0o755)
    start(f"cd {shlex.quote(str(kf))} && {shlex.quote(OK_BIN)} mem add", ed)
    screen = _wait_for(sock, r"Edit again\? \[Y/n\]")
    assert "broken YAML frontmatter" in screen
    _tmux(sock, "send-keys", "-t", "t", answer, "Enter")
    screen = _wait_for(sock, r"EXIT=\d")
    if answer == "y":
        assert "EXIT=0" in screen, screen
        [path] = _notes(kf)
        assert "second try" in path.read_text() and _drafts(kf) == []
    else:
        assert "EXIT=2" in screen, screen  # broken input kept as a draft is an error
        [draft] = _drafts(kf)
        assert f"your text is kept in .ok/drafts/{draft.name}" in screen
        assert _notes(kf) == [] and "second try" in draft.read_text()


@pytest.mark.terminal
def test_mem_edit_asks_to_edit_again(terminal, kf: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    start, sock = terminal
    nid = _add("Edited at a terminal.")
    ed = tmp_path / "twice.sh"
    ed.write_text(
        "#!/bin/sh\n"
        'if grep -q "^tags: \\[old$" "$1"; then sed -i "s/^tags: \\[old$/tags: [mended]/" "$1"\n'
        'else sed -i "s/^tags: .*/tags: [old/" "$1"; fi\n'
    )
    ed.chmod(0o755)
    start(f"{shlex.quote(OK_BIN)} mem edit {nid}", ed)
    screen = _wait_for(sock, r"Edit again\? \[Y/n\]")
    assert "broken YAML frontmatter" in screen
    _tmux(sock, "send-keys", "-t", "t", "Enter")  # the default is yes
    screen = _wait_for(sock, r"EXIT=\d")
    assert "EXIT=0" in screen, screen
    shown = run_ok("mem", "show", nid, "--json").json()
    assert shown["tags"] == ["mended"] and shown["text"] == "Edited at a terminal."
