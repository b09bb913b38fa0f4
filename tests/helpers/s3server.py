"""A local S3-compatible server for the tests: moto's, on 127.0.0.1 and a free port, with a
record of the requests it answered (so a test can tell a listing from a download)."""

from __future__ import annotations

import logging
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from helpers.localsite import free_port

KEY_ID, SECRET = "AKIATESTKEY000000000", "test-secret-key"


class S3Server:
    def __init__(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[tuple[str, str]] = []  # (method, path?query)
        app = DomainDispatcherApplication(create_backend_app)

        def recorded(environ: dict[str, Any], start: Callable[..., Any]) -> Any:
            query = environ.get("QUERY_STRING") or ""
            self.requests.append(
                (environ["REQUEST_METHOD"], environ["PATH_INFO"] + ("?" + query if query else ""))
            )
            return app(environ, start)

        self._server = make_server(
            "127.0.0.1", self.port, recorded, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=30)

    def _post(self, path: str, body: bytes = b"") -> None:
        req = urllib.request.Request(
            self.url + path, data=body, method="POST", headers={"Content-Type": "text/plain"}
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()

    def reset(self) -> None:
        """Forget every bucket, object and user (moto's own reset)."""
        self._post("/moto-api/reset")
        self.requests.clear()

    @contextmanager
    def authenticating(self) -> Iterator[None]:
        """Check credentials and IAM policies (moto lets everything through otherwise)."""
        self._post("/moto-api/reset-auth", b"0")
        try:
            yield
        finally:
            self._post("/moto-api/reset-auth", b"inf")

    def client(self, service: str = "s3", **kw: Any) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=kw.pop("key", KEY_ID),
            aws_secret_access_key=kw.pop("secret", SECRET),
            **kw,
        )

    def downloads(self, bucket: str) -> list[str]:
        """The keys read (GET of an object) since the last `requests.clear()`."""
        return [
            p.split("?")[0][len(bucket) + 2 :]
            for m, p in self.requests
            if m == "GET" and p.startswith(f"/{bucket}/") and "list-type" not in p
        ]
