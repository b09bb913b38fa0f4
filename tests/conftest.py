"""Shared fixtures: every test gets its own knowledge folder and a clean environment.

The real engine, embedding model and parsers are used. The empty folder and the example
folder are built once per run (shared by the xdist workers) and copied for each test that
needs one, so the suite stays fast; the tests that only read share one example folder.
What the test modules share besides fixtures is in tests/helpers/.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.pg import pg_server, pg_uri  # noqa: F401  (fixtures for every module)

# what test modules imported from here before tests/helpers/ held it
from helpers.run import EXAMPLES, OK_BIN, REPO, Result, run_cli, run_ok, until  # noqa: F401
from helpers.serve import Server

# no `ok` process a test starts leaves a resident process behind (tests/test_daemon.py
# starts them where it means to)
os.environ["OK_NO_DAEMON"] = "1"


def pytest_configure(config: pytest.Config) -> None:
    # a shell starts a background job (`.ci/run &`, nohup) with SIGINT ignored, and every
    # process a test starts inherits that: the tests that press Ctrl-C need it heard
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# the expensive kinds of test (markers in pyproject.toml); a test of none of them is `fast`
EXPENSIVE = ("server", "postgres", "browser", "terminal", "crash", "slow")


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.get_closest_marker(kind) for kind in EXPENSIVE):
            item.add_marker(pytest.mark.fast)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for k in list(os.environ):
        if k.startswith("OK_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("OK_NO_PROGRESS", "1")
    monkeypatch.setenv("OK_NO_DAEMON", "1")
    monkeypatch.setenv("OK_LOCK_TIMEOUT", "5")
    monkeypatch.chdir(tmp_path)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name`, made by `build(root)` once per run: every xdist worker of the run
    shares it (their temporary directories have one parent). Read it or copy it; a test
    never writes into it."""
    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / f"built-{name}" / "kf"
    done = shared / f"built-{name}.done"
    with _locked(shared / f"built-{name}.lock"):
        if not done.exists():
            shutil.rmtree(root.parent, ignore_errors=True)
            root.parent.mkdir()
            build(root)
            done.touch()
    return root


def _init(root: Path) -> None:
    r = run_ok("init", str(root))
    assert r.code == 0, r.err


@pytest.fixture(scope="session")
def _empty_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "empty", _init)


@pytest.fixture
def kf(_empty_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty knowledge folder; OK_ROOT points at it. A copy of one `ok init` made
    once per run, with what `ok init` writes of its own: its id and its path in the log."""
    root = tmp_path / "kf"
    shutil.copytree(_empty_template, root, symlinks=True)
    (root / ".ok" / "folder_id").write_text(uuid.uuid4().hex + "\n", encoding="utf-8")
    log = root / ".ok" / "ops.log"
    log.write_text(log.read_text(encoding="utf-8").replace(str(_empty_template), str(root)))
    monkeypatch.setenv("OK_ROOT", str(root))
    return root


def _example(root: Path) -> None:
    _init(root)
    r = run_ok("--root", str(root), "store", "ingest", str(EXAMPLES))
    assert r.code == 0, r.err
    r = run_ok(
        "--root",
        str(root),
        "mem",
        "add",
        "Kùzu keeps one writer at a time, so the MCP server opens the graph per call.",
        "--tags",
        "kuzu,concurrency",
        "--topics",
        "design",
    )
    assert r.code == 0, r.err


@pytest.fixture(scope="session")
def _example_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "example", _example)


@pytest.fixture
def example_kf(_example_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of a folder holding the example documents and one note; OK_ROOT points at it."""
    root = tmp_path / "example"
    shutil.copytree(_example_template, root, symlinks=True)
    monkeypatch.setenv("OK_ROOT", str(root))
    return root


def _fingerprint(root: Path) -> dict[str, tuple[int, int]]:
    """Each file's size and modification time, but for the caches (a search keeps its hits
    in `.ok/cache` for `ok open N`) and the writer lock's holder record (a command that takes
    the lock and then refuses its input leaves the lock file emptied again, a new mtime)."""
    cache, lock = root / ".ok" / "cache", root / ".ok" / "lock"
    return {
        str(p.relative_to(root)): (st.st_size, st.st_mtime_ns)
        for p in root.rglob("*")
        if cache not in p.parents and p != lock and not (st := p.lstat()).st_mode & 0o040000
    }


@pytest.fixture(scope="session")
def _example_shared(_example_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shared") / "example"
    shutil.copytree(_example_template, root, symlinks=True)
    return root


@pytest.fixture
def example_ro(_example_shared: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The example folder, shared by the tests that only read it (one per worker, nothing
    copied); OK_ROOT points at it. A test that changes it fails: give it `example_kf`."""
    before = _fingerprint(_example_shared)
    monkeypatch.setenv("OK_ROOT", str(_example_shared))
    yield _example_shared
    assert _fingerprint(_example_shared) == before, "a test changed the shared example folder"


@pytest.fixture
def ok():
    return run_ok


@pytest.fixture(scope="module")
def served(_example_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One `ok serve` of a copy of the example folder for the whole module."""
    root = tmp_path_factory.mktemp("served") / "kf"
    shutil.copytree(_example_template, root, symlinks=True)
    s = Server(root)
    try:
        yield s
    finally:
        s.stop()
