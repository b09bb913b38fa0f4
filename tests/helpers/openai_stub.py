"""A local HTTP server that speaks OpenAI chat completions (plain and streaming SSE).

Tests give it the replies to send, in order (the last one repeats), and read back the
requests it received. Nothing here leaves the machine.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatStub:
    def __init__(
        self,
        replies: list[str],
        chunk: int = 7,
        delay: float = 0.0,
        hold: threading.Event | None = None,
    ) -> None:
        self.replies = list(replies)
        self.delay = delay  # seconds to think before answering
        self.hold = hold  # if given, answers wait until it is set (at most 5 minutes)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.chunk = chunk
        self.url = ""

    def next_reply(self) -> str:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]


@contextmanager
def chat_server(
    replies: list[str],
    chunk: int = 7,
    delay: float = 0.0,
    hold: threading.Event | None = None,
) -> Iterator[ChatStub]:
    """Serve on 127.0.0.1 (a free port); `stub.url` is the base URL ending in /v1."""
    stub = ChatStub(replies, chunk, delay, hold)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            if not self.path.endswith("/chat/completions"):
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            stub.requests.append(body)
            stub.headers.append(dict(self.headers))
            reply = stub.next_reply()
            time.sleep(stub.delay)
            if stub.hold is not None:
                stub.hold.wait(300)
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for i in range(0, len(reply), stub.chunk):
                    ev = {
                        "choices": [{"index": 0, "delta": {"content": reply[i : i + stub.chunk]}}]
                    }
                    self.wfile.write(f"data: {json.dumps(ev)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                return
            data = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": reply},
                        }
                    ],
                }
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stub.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield stub
    finally:
        srv.shutdown()
        srv.server_close()
