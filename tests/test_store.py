"""Documents: ingest of files, directories and stdin; bad input is reported and skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.docgen import make_docx, make_pdf
from helpers.run import EXAMPLES, run_ok


def _mapping(kf: Path) -> list[dict]:
    return [json.loads(x) for x in (kf / ".ok/mapping.jsonl").read_text().splitlines()]


def test_ingest_files_of_every_kind(kf: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.md").write_text("# Field notes\n\nThe heron nests by the river.\n")
    (src / "paper.pdf").write_bytes(
        make_pdf(["Photosynthesis in desert succulents", "CAM plants open their stomata at night."])
    )
    (src / "memo.docx").write_bytes(
        make_docx(["Quarterly memo", "The budget grows by ten percent."])
    )
    (src / "page.html").write_text(
        "<html><head><title>Glaciers</title></head><body>"
        "<h1>Glaciers</h1><p>Glaciers carve U-shaped valleys.</p>"
        "</body></html>"
    )
    r = run_ok("store", "ingest", str(src), "--json")
    assert r.code == 0, r.err
    added = {Path(a["path"]).name: a for a in r.json()["added"]}
    assert set(added) == {"notes.ok.md", "paper.pdf.ok.md", "memo.docx.ok.md", "page.html.ok.md"}
    for a in added.values():
        norm = (kf / a["path"]).read_bytes()
        import hashlib

        assert a["id"] == hashlib.sha256(norm).hexdigest()[:16]
    assert (kf / "store/sources/src/paper.pdf").read_bytes() == (src / "paper.pdf").read_bytes()
    assert (
        "CAM plants open their stomata at night."
        in (kf / added["paper.pdf.ok.md"]["path"]).read_text()
    )
    m = {e["id"]: e for e in _mapping(kf)}
    assert m[added["page.html.ok.md"]["id"]]["title"] == "Glaciers"
    assert m[added["paper.pdf.ok.md"]["id"]]["source"] == {"path": "store/sources/src/paper.pdf"}
    hits = run_ok("search", "stomata at night", "--json", "-k", "1").json()
    assert hits[0]["doc_id"] == added["paper.pdf.ok.md"]["id"]
    hits = run_ok("search", "budget", "--mode", "fts", "--json").json()
    assert hits[0]["doc_id"] == added["memo.docx.ok.md"]["id"]


def test_reingest_is_a_noop(kf: Path) -> None:
    first = run_ok("store", "ingest", str(EXAMPLES), "--json").json()
    assert len(first["added"]) == 5
    log_before = (kf / ".ok/ops.log").read_text()
    again = run_ok("store", "ingest", str(EXAMPLES), "--json").json()
    assert again["added"] == [] and len(again["unchanged"]) == 5
    assert (kf / ".ok/ops.log").read_text() == log_before


def test_glob_and_stdin(kf: Path) -> None:
    r = run_ok("store", "ingest", str(EXAMPLES), "--glob", "*.md", "--json")
    assert {Path(a["path"]).suffix for a in r.json()["added"]} == {".md"}
    assert len(r.json()["added"]) == 3
    r = run_ok(
        "store",
        "ingest",
        "-",
        "--name",
        "clip.md",
        "--json",
        input="# Clipboard\n\nPasted from a chat about tidal power.\n",
    )
    assert r.code == 0, r.err
    assert r.json()["added"][0]["path"] == "store/normalized/stdin/clip.ok.md"
    assert run_ok("search", "tidal power", "--json").json()[0]["path"].endswith("clip.ok.md")


def test_bad_files_are_skipped_without_stopping_the_batch(kf: Path, tmp_path: Path) -> None:
    src = tmp_path / "mixed"
    src.mkdir()
    (src / "good.md").write_text("A good document about lighthouses.\n")
    (src / "empty.txt").write_text("")
    (src / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (src / "blob.txt").write_bytes(b"\x00\x01\x02\x03binary")
    (src / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (src / "blob.bin").write_bytes(b"\x7fELF\x00\x00\x01")
    r = run_ok(
        "store",
        "ingest",
        str(src),
        "--glob",
        "*",
        str(tmp_path / "missing.md"),
        "https://example.org/page",
        "--json",
    )
    assert r.code == 3
    rep = r.json()
    assert [Path(a["path"]).name for a in rep["added"]] == ["good.ok.md"]
    reasons = {Path(s["path"]).name: s["reason"] for s in rep["skipped"]}
    assert "empty file" in reasons["empty.txt"]
    assert "not valid UTF-8" in reasons["latin1.txt"] and "iconv" in reasons["latin1.txt"]
    assert "binary" in reasons["blob.txt"]
    assert "cannot extract text" in reasons["broken.pdf"]
    assert "unsupported binary file type '.bin'" in reasons["blob.bin"]
    assert "no such file" in reasons["missing.md"]
    assert "ok store web" in reasons["page"]
    assert all(line.startswith("warning: skipped") for line in r.err.strip().splitlines())
    # nothing of the skipped files was written
    assert sorted(p.name for p in (kf / "store/sources").rglob("*") if p.is_file()) == ["good.md"]


def test_oversized_file_is_skipped(kf: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OK_INGEST_MAX_FILE_MB", "0.001")
    big = tmp_path / "big.txt"
    big.write_text("word " * 1000)
    r = run_ok("store", "ingest", str(big), "--json")
    assert r.code == 2 and "limit" in r.json()["skipped"][0]["reason"]


def test_list_show_remove(kf: Path) -> None:
    run_ok("store", "ingest", str(EXAMPLES))
    docs = run_ok("store", "list", "--json").json()
    assert len(docs) == 5
    ada = next(d for d in docs if "ada-lovelace" in d["path"])
    r = run_ok("store", "show", ada["id"][:8])
    assert r.code == 0 and "Analytical Engine" in r.out
    meta = run_ok("store", "show", ada["id"], "--meta", "--json").json()
    assert meta["id"] == ada["id"] and "text" not in meta
    r = run_ok("store", "remove", ada["id"], "--json")
    assert r.code == 0, r.err
    assert not (kf / ada["path"]).exists()
    assert not (kf / "store/sources/docs/ada-lovelace.html").exists()
    assert len(run_ok("store", "list", "--json").json()) == 4
    hits = run_ok("search", "Analytical Engine Babbage", "--json").json()
    assert all(h["doc_id"] != ada["id"] for h in hits)
    r = run_ok("store", "show", ada["id"])
    assert r.code == 2 and "no document matches" in r.err


def test_changed_source_supersedes_old_version(kf: Path, tmp_path: Path) -> None:
    f = tmp_path / "policy.md"
    f.write_text("# Policy\n\nBackups run nightly at two.\n")
    old = run_ok("store", "ingest", str(f), "--json").json()["added"][0]["id"]
    f.write_text("# Policy\n\nBackups run hourly now.\n")
    new = run_ok("store", "ingest", str(f), "--json").json()["added"][0]
    assert new["supersedes"] == old
    assert (kf / f".ok/versions/{old}.ok.md").read_text().endswith("nightly at two.\n")
    rows = run_ok(
        "graph",
        "cypher",
        "MATCH (n:Doc)-[:SUPERSEDES]->(o:Doc) RETURN n.id AS new, o.id AS old, o.current AS cur",
        "--json",
    ).json()
    assert rows == [{"new": new["id"], "old": old, "cur": False}]
    hits = run_ok("search", "backups nightly", "--json").json()
    assert [h["doc_id"] for h in hits] == [new["id"]]


def test_version_replaced_by_a_hand_edit(kf: Path, tmp_path: Path) -> None:
    f = tmp_path / "rules.md"
    f.write_text("# Rules\n\nRule one: be kind.\n")
    old = run_ok("store", "ingest", str(f), "--json").json()["added"][0]
    target = kf / old["path"]
    target.write_text(target.read_text().replace("be kind", "be brief"))
    rep = run_ok("sync", "--json").json()
    new_id = rep["docs_added"][0]
    r = run_ok("store", "show", old["id"])
    assert r.code == 2
    assert f"replaced by {new_id}" in r.err and f"ok store show {new_id}" in r.err
    assert "be brief" in run_ok("store", "show", new_id).out


def test_images_need_ocr_and_ocr_reads_them(kf: Path, tmp_path: Path) -> None:
    from helpers.docgen import make_png

    from openkl.text.normalize import ocr_available

    img = tmp_path / "sign.png"
    img.write_bytes(make_png("Lighthouses guide ships at night"))
    r = run_ok("store", "ingest", str(img), "--json")
    assert r.code == 2
    assert "pass --ocr" in r.json()["skipped"][0]["reason"]
    assert ocr_available(), "tesseract is part of the test environment (.ci/run installs it)"
    r = run_ok("store", "ingest", str(img), "--ocr", "--json")
    assert r.code == 0, r.err
    doc = r.json()["added"][0]
    assert "lighthouses guide ships" in (kf / doc["path"]).read_text().lower()
    hits = run_ok("search", "lighthouse ships", "--json", "-k", "1").json()
    assert hits[0]["doc_id"] == doc["id"]


def test_ocr_without_tesseract_is_refused_before_any_work(
    kf: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no tesseract on PATH
    (tmp_path / "a.md").write_text("text\n")
    r = run_ok("store", "ingest", str(tmp_path / "a.md"), "--ocr")
    assert r.code == 2
    assert "tesseract is not installed" in r.err and "apt-get install" in r.err
    assert not list((kf / "store/normalized").rglob("*.ok.md"))


def test_sync_reports_the_original_of_a_deleted_normalized_file(example_kf: Path) -> None:
    norm = example_kf / "store/normalized/docs/crispr-gene-editing.ok.md"
    src = "store/sources/docs/crispr-gene-editing.txt"
    norm.unlink()
    r = run_ok("sync", "--json")
    assert r.code == 0, r.err
    assert r.json()["sources_kept"] == [src]
    assert f"{src} is kept" in r.err and (example_kf / src).exists()
    # said once: the next sync has nothing to say
    r = run_ok("sync")
    assert r.code == 0 and "is kept" not in r.err


def test_extensionless_text_is_ingested_and_other_files_are_reported(
    kf: Path, tmp_path: Path
) -> None:
    src = tmp_path / "pkg"
    src.mkdir()
    (src / "README").write_text("Lighthouses guide ships past the rocks at night.\n")
    (src / "README.Debian").write_text("Debian notes: the lamp package needs a keeper.\n")
    (src / "a.out").write_bytes(b"\x7fELF\x00\x00\x01")
    (src / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (src / "latin1.dat").write_bytes("caf\xe9 au lait".encode("latin-1"))
    r = run_ok("store", "ingest", str(src), "--json")
    assert r.code == 0
    rep = r.json()
    assert sorted(Path(a["origin"]).name for a in rep["added"]) == ["README", "README.Debian"]
    reasons = {Path(s["path"]).name: s["reason"] for s in rep["skipped"]}
    assert set(reasons) == {"a.out", "logo.png", "latin1.dat"}
    assert "not a supported file type ('.out')" in reasons["a.out"]
    assert "--ocr" in reasons["logo.png"]
    assert "not UTF-8 text" in reasons["latin1.dat"]
    plain = run_ok("store", "ingest", str(src))
    assert "0 added, 2 unchanged, 3 skipped" in plain.out
    assert "skipped " + str(src / "a.out") in plain.err


def test_ingest_matching_nothing_is_an_error(kf: Path, tmp_path: Path) -> None:
    src = tmp_path / "papers"
    src.mkdir()
    (src / "notes.md").write_text("Some notes about lighthouses.\n")
    before = sorted(p.relative_to(kf) for p in kf.rglob("*"))
    r = run_ok("store", "ingest", str(src), "--glob", "*.pdf")
    assert r.code == 2 and r.out == ""
    assert r.err.strip().splitlines() == [
        f"Error: no file in {src} matches --glob '*.pdf' (hint: a pattern matches a file's "
        "name or its path under the directory, e.g. --glob '*.pdf' or --glob 'docs/*.md')"
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_ok("store", "ingest", str(empty), "--json")
    assert r.code == 2 and "no files to ingest in" in r.err and "hint:" in r.err
    assert sorted(p.relative_to(kf) for p in kf.rglob("*")) == before


def test_markdown_frontmatter_is_title_and_tags_not_text(kf: Path, tmp_path: Path) -> None:
    doc = tmp_path / "keepers.md"
    doc.write_text(
        "---\ntitle: Keepers of the Light\ntags: [lighthouses, history]\n---\n\n"
        "Lighthouse keepers trimmed the wicks every night so ships could pass the reef.\n"
    )
    r = run_ok("store", "ingest", str(doc), "--json")
    assert r.code == 0, r.err
    [added] = r.json()["added"]
    assert added["title"] == "Keepers of the Light"
    meta = run_ok("store", "show", added["id"], "--meta").json()
    assert meta["title"] == "Keepers of the Light"
    assert meta["meta"]["tags"] == ["lighthouses", "history"]
    # the normalized file keeps the block (the id is its hash); the index does not see it
    text = (kf / added["path"]).read_text(encoding="utf-8")
    assert text.startswith("---\ntitle: Keepers of the Light\n")
    hits = run_ok("search", "lighthouse keepers wicks", "--json").json()
    assert hits
    for h in hits:
        assert "title:" not in h["quote"] and "tags:" not in h["quote"]
        assert h["quote"].startswith("Lighthouse keepers")
        assert text[h["loc"]["start"] : h["loc"]["end"]] == h["quote"]
    c = run_ok("cite", "make", hits[0]["id"], "--json").json()[0]
    assert text[c["loc"]["start"] : c["loc"]["end"]] == c["quote"]
    grep = run_ok("graph", "cypher", "MATCH (c:Chunk) RETURN c.text AS t", "--json")
    assert grep.code == 0, grep.err
    rows = grep.json()
    assert rows and all("tags:" not in row["t"] for row in rows)


@pytest.mark.parametrize(
    ("first_line", "title"),
    [
        ("Tide tables", "Tide tables"),
        (
            "The harbour log. Entries run from 1890 to 1932 and name every ship that "
            "passed the breakwater.",
            "The harbour log",
        ),
        (
            "Keepers of the northern lights recorded the weather, the passing ships, the "
            "state of the lamp and the oil they burnt every single night",
            "Keepers of the northern lights recorded the weather, the passing ships, the…",
        ),
        ("Was the lamp lit? The log says so.", "Was the lamp lit?"),
    ],
)
def test_txt_title_is_first_sentence_or_line_cut_at_a_word(
    kf: Path, tmp_path: Path, first_line: str, title: str
) -> None:
    doc = tmp_path / "log.txt"
    doc.write_text(first_line + "\n\nMore text about the lighthouse follows here.\n")
    r = run_ok("store", "ingest", str(doc), "--json")
    assert r.code == 0, r.err
    [added] = r.json()["added"]
    assert added["title"] == title
    assert len(added["title"]) <= 80


def test_embedding_progress_moves_batch_by_batch(kf: Path, tmp_path: Path) -> None:
    """On a terminal the embedding bar shows counts between 0 and the total, not just
    the two ends."""
    import os
    import pty
    import re
    import subprocess
    import threading
    import uuid

    from helpers.run import OK_BIN

    src = tmp_path / "many"
    src.mkdir()
    for i in range(6):
        words = " ".join(f"lamp{uuid.uuid4().hex[:8]}" for _ in range(400))
        (src / f"log{i}.md").write_text(f"# Log {i}\n\n{words}.\n")
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "OK_NO_PROGRESS"}
    env.update({"COLUMNS": "120", "TERM": "xterm"})
    seen: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            seen.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc = subprocess.run(
        [OK_BIN, "store", "ingest", str(src)],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        timeout=300,
    )
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    assert proc.returncode == 0, b"".join(seen).decode(errors="replace")
    shown = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", b"".join(seen).decode(errors="replace"))
    counts = {(int(a), int(b)) for a, b in re.findall(r"embedding\S*\s.*?(\d+)/(\d+)", shown)}
    assert counts, shown
    total = max(b for _, b in counts)
    assert total > 64
    assert any(0 < a < total for a, b in counts if b == total), counts
