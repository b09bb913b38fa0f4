"""The LLM extractor and LLM-assisted context against a local chat-completions server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers.run import run_ok

GOOD = {
    "entities": [
        {
            "name": "Grace Hopper",
            "type": "Person",
            "confidence": 0.9,
            "description": "Computer scientist.",
        },
        {"name": "COBOL", "type": "System", "confidence": 0.85},
    ],
    "relationships": [
        {"from": "Grace Hopper", "to": "COBOL", "type": "influenced", "confidence": 0.8},
        {"from": "Grace Hopper", "to": "Nobody", "type": "knows"},
    ],
}


class Server:
    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        srv = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                srv.requests.append(body)
                data = json.dumps(
                    {
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": srv.reply}}
                        ]
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch):
    servers: list[Server] = []

    def start(reply: str) -> Server:
        s = Server(reply)
        servers.append(s)
        monkeypatch.setenv("OK_LLM_BASE_URL", s.url)
        monkeypatch.setenv("OK_LLM_MODEL", "stub")
        monkeypatch.setenv("OK_LLM_RETRIES", "0")
        monkeypatch.setenv("OK_ENTITIES_EXTRACTOR", "llm")
        return s

    yield start
    for s in servers:
        s.close()


def test_llm_extractor_types_and_caches(kf: Path, llm) -> None:
    s = llm(json.dumps(GOOD))
    r = run_ok("mem", "add", "Grace Hopper led the design of COBOL.")
    assert r.code == 0, r.err
    assert len(s.requests) == 1 and s.requests[0]["response_format"] == {"type": "json_object"}
    e = run_ok("graph", "entity", "grace hopper", "--json").json()
    assert e["type"] == "Person" and e["description"] == "Computer scientist."
    assert [(r["type"], r["to_name"]) for r in e["relationships"]] == [("influenced", "COBOL")]
    # rebuilds read the cache (chunk hash + prompt version + model): no new calls
    assert run_ok("index", "--rebuild").code == 0
    assert len(s.requests) == 1
    assert run_ok("graph", "entity", "COBOL", "--json").json()["type"] == "System"


def test_invalid_json_falls_back_to_the_local_extractor(kf: Path, llm) -> None:
    s = llm("this is not json")
    r = run_ok("mem", "add", "Grace Hopper worked on the Harvard Mark I.")
    assert r.code == 0, r.err
    assert "used the local extractor" in r.err
    assert len(s.requests) == 2  # one retry of the invalid reply
    assert run_ok("graph", "entity", "Grace Hopper", "--json").code == 0
    s.reply = json.dumps(GOOD)  # not cached: the next run asks again
    assert run_ok("index", "--rebuild").code == 0
    assert len(s.requests) == 3


def test_endpoint_down_falls_back(kf: Path, llm, monkeypatch: pytest.MonkeyPatch) -> None:
    s = llm("{}")
    s.close()
    r = run_ok("mem", "add", "Grace Hopper found a moth in the Harvard Mark II.")
    assert r.code == 0, r.err
    assert "cannot reach the LLM endpoint" in r.err
    assert run_ok("graph", "entity", "Grace Hopper").code == 0


def test_context_uses_the_llm_and_checks_its_names(
    example_kf: Path, llm, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = llm(
        json.dumps(
            {
                "entities": ["SQLite", "Write-ahead logging", "Made Up Thing"],
                "reasoning": "WAL is how SQLite stays durable.",
                "confidence": "HIGH",
            }
        )
    )
    monkeypatch.setenv("OK_ENTITIES_EXTRACTOR", "local")
    r = run_ok("context", "how does SQLite stay durable", "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["method"] == "llm"
    assert [e["name"] for e in d["entities"]] == ["SQLite", "Write-ahead logging"]
    # the model's own word is reported; the label is calibrated on the evidence alone
    assert d["reasoning"] == "WAL is how SQLite stays durable. (the model's confidence: HIGH)"
    s.reply = "nope"
    ranked = run_ok("context", "how does SQLite stay durable", "--json").json()
    assert ranked["method"] == "ranked" and ranked["warnings"]
    assert (d["confidence"], d["confidence_score"]) == (
        ranked["confidence"],
        ranked["confidence_score"],
    )


def test_switching_the_extractor_is_reported_until_a_rebuild(kf: Path, llm) -> None:
    assert run_ok("mem", "add", "Grace Hopper led the design of COBOL.").code == 0
    st = run_ok("status", "--json").json()
    assert st["extractor_mismatch"] is None
    s = llm(json.dumps(GOOD))  # the folder now asks for the LLM extractor
    assert run_ok("mem", "add", "Grace Hopper taught at Vassar.").code == 0
    st = run_ok("status", "--json").json()
    assert st["extractor_mismatch"]["graph"].startswith("local-")
    assert st["extractor_mismatch"]["config"].endswith(":stub")
    assert "run `ok index --rebuild`" in run_ok("status").out
    r = run_ok("doctor", "--json")
    [check] = [c for c in r.json() if c["check"] == "entities"]
    assert r.code == 1 and not check["ok"] and "ok index --rebuild" in check["fix"]
    assert run_ok("index", "--rebuild").code == 0
    assert len(s.requests) == 2  # the first note extracted by the LLM too (the second is cached)
    assert run_ok("status", "--json").json()["extractor_mismatch"] is None
    assert not [c for c in run_ok("doctor", "--json").json() if c["check"] == "entities"]
