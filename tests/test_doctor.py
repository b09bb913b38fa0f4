"""`ok doctor` and `ok status`: what is checked, and the fixes they print."""

from __future__ import annotations

from pathlib import Path

from helpers.run import run_ok


def test_doctor_on_a_healthy_folder(example_kf: Path) -> None:
    r = run_ok("doctor", "--json")
    assert r.code == 0, r.out + r.err
    checks = {c["check"]: c for c in r.json()}
    assert {"folder", "layout", "embedding model", "ripgrep", "kreuzberg", "lock", "index"} <= set(
        checks
    )
    assert all(c["ok"] for c in checks.values())
    assert "all-MiniLM-L6-v2" in checks["embedding model"]["detail"]
    assert "ripgrep 14.1.0" in checks["ripgrep"]["detail"]


def test_doctor_finds_stale_index_and_bad_files(example_kf: Path) -> None:
    (example_kf / "store/normalized/docs/write-ahead-logging.ok.md").unlink()
    d = example_kf / "memories/by_date/2026-03/03"
    d.mkdir(parents=True)
    (d / "m-20260303-zzzz.md").write_text("---\nid: [broken\n---\nx\n")
    r = run_ok("doctor")
    assert r.code == 1
    assert "FAIL index: stale: 1 docs_removed" in r.out
    assert "fix: run `ok sync`" in r.out
    assert "m-20260303-zzzz.md" in r.out and "broken YAML" in r.out
    assert run_ok("sync").code == 3  # done, but the broken note is still not indexed
    st = run_ok("status", "--json").json()
    assert st["in_sync"] is True and st["counts"]["Doc"] == 4
    assert st["unreadable"] == ["memories/by_date/2026-03/03/m-20260303-zzzz.md"]


def test_doctor_outside_a_folder(tmp_path: Path) -> None:
    r = run_ok("doctor", "--json", cwd=tmp_path)
    assert r.code == 1
    checks = {c["check"]: c for c in r.json()}
    assert checks["folder"]["ok"] is False and "ok init" in checks["folder"]["fix"]
    assert checks["embedding model"]["ok"] is True


def test_paths_outside_the_folder_are_refused(example_kf: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.md"
    outside.write_text("---\nid: m-20260101-aaaa\n---\nnot in the folder\n")
    for ref in (str(outside), "../elsewhere.md", "memories/../../elsewhere.md"):
        r = run_ok("mem", "show", ref)
        assert r.code == 2, ref
        assert "outside the knowledge folder" in r.err, (ref, r.err)
