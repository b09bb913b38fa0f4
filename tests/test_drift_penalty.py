"""`--drift-penalty`: documents whose latest version drifted far are held back, opt-in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.mcp import call, fail, serve
from helpers.run import run_ok
from helpers.serve import Server

QUERY = "harbour pilot boards ships at the red buoy"


@pytest.fixture
def drifted(kf: Path) -> dict[str, Any]:
    """Three documents; `a.md` was rewritten on another subject (a large drift) and is now
    the best match for QUERY."""
    src = kf.parent / "src"
    src.mkdir()
    (src / "a.md").write_text("# Steel\n\nTariffs on imported steel rose sharply last year.\n")
    (src / "b.md").write_text("# Pilots\n\nA harbour pilot guides ships into port.\n")
    (src / "c.md").write_text("# Lighthouses\n\nLighthouses warn ships away from rocks.\n")
    assert run_ok("store", "ingest", str(src)).code == 0
    (src / "a.md").write_text(
        "# Harbour pilots\n\nThe harbour pilot boards ships at the red buoy and guides them "
        "into port.\n"
    )
    assert run_ok("store", "ingest", str(src / "a.md")).code == 0
    docs = {Path(d["path"]).name: d for d in run_ok("store", "list", "--json").json()}
    a = docs["a.ok.md"]
    history = run_ok("store", "history", a["path"], "--json").json()
    drift = next(v["drift"] for v in history if v["id"] == a["id"])
    assert drift > 0.3, history
    return {"a": a["id"], "b": docs["b.ok.md"]["id"], "drift": drift}


def _docs(hits: list[dict[str, Any]]) -> list[str]:
    return [h["doc_id"] for h in hits]


def test_off_by_default_and_held_back_when_asked(drifted: dict[str, Any]) -> None:
    plain = run_ok("search", QUERY, "--json", "--explain").json()
    assert _docs(plain)[:2] == [drifted["a"], drifted["b"]]
    assert all("drift" not in h for h in plain)
    # 0 is off: the same hits, the same scores
    assert run_ok("search", QUERY, "--json", "--explain", "--drift-penalty", "0").json() == plain
    held = run_ok("search", QUERY, "--json", "--explain", "--drift-penalty", "1").json()
    assert _docs(held)[:2] == [drifted["b"], drifted["a"]]
    a = next(h for h in held if h["doc_id"] == drifted["a"])
    factor = round(max(0.0, 1 - drifted["drift"]), 6)
    assert a["drift"] == {"drift": drifted["drift"], "factor": factor}
    before = next(h for h in plain if h["doc_id"] == drifted["a"])
    assert a["score"] == pytest.approx(before["score"] * factor, abs=1e-6)
    # documents with one version, and notes, are as they were
    b = next(h for h in held if h["doc_id"] == drifted["b"])
    assert "drift" not in b and b["score"] == next(
        h["score"] for h in plain if h["doc_id"] == drifted["b"]
    )
    # --explain on a terminal or a pipe shows it; the setting turns it on too
    r = run_ok("search", QUERY, "--explain", "--drift-penalty", "1")
    assert f"drift={drifted['drift']:.4f},factor={factor:.4f}" in r.out
    assert run_ok("config", "set", "search.drift_penalty", "1").code == 0
    assert _docs(run_ok("search", QUERY, "--json").json())[:2] == [drifted["b"], drifted["a"]]
    r = run_ok("store", "search", QUERY, "--json", "--drift-penalty", "0")
    assert _docs(r.json())[:2] == [drifted["a"], drifted["b"]]
    for bad in ("-1", "11", "nan"):
        r = run_ok("search", QUERY, "--drift-penalty", bad)
        assert r.code == 2 and r.err.count("\n") == 1, (bad, r.err)
    assert run_ok("config", "set", "search.drift_penalty", "12").code == 0
    r = run_ok("search", QUERY)
    assert r.code == 2 and "search.drift_penalty 12 is out of range" in r.err


@pytest.mark.server
def test_mcp_and_http_take_drift_penalty(drifted: dict[str, Any], kf: Path) -> None:
    async def go(c: Any) -> dict[str, Any]:
        off = await call(c, "search", query=QUERY, k=2)
        on = await call(c, "store_search", query=QUERY, k=2, drift_penalty=1)
        err = await fail(c, "search", query=QUERY, drift_penalty=20)
        return {"off": off["results"], "on": on["results"], "err": err}

    got = serve([kf], go)
    assert _docs(got["off"]) == [drifted["a"], drifted["b"]]
    assert _docs(got["on"]) == [drifted["b"], drifted["a"]]
    assert "validation error" in got["err"]
    s = Server(kf)
    try:
        url = f"/v1/{s.stack}/search"
        off = s.http.get(url, params={"q": QUERY, "k": 2}).json()["hits"]
        on = s.http.get(url, params={"q": QUERY, "k": 2, "drift_penalty": 1, "explain": True})
        assert _docs(off) == [drifted["a"], drifted["b"]]
        assert _docs(on.json()["hits"]) == [drifted["b"], drifted["a"]]
        assert on.json()["hits"][1]["drift"]["drift"] == drifted["drift"]
        assert s.http.get(url, params={"q": QUERY, "drift_penalty": -1}).status_code == 422
    finally:
        s.stop()
