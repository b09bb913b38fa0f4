"""What `ok serve` counts, for Prometheus at `/metrics`, and its access log."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from ..folder import iso

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The server's counters, histograms and gauges, in a registry of its own."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ok_http_requests",
            "HTTP requests answered, by route, stack and status.",
            ["method", "route", "stack", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ok_http_request_seconds",
            "Time to answer an HTTP request, by route and stack.",
            ["method", "route", "stack"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.search = Histogram(
            "ok_search_seconds",
            "Time a search took, by mode.",
            ["mode"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.writers_waiting = Gauge(
            "ok_writer_queue_depth",
            "Writes waiting for their stack's writer, by stack.",
            ["stack"],
            registry=self.registry,
        )
        self.chunks_indexed = Counter(
            "ok_ingest_chunks",
            "Chunks indexed by writes through the server, by stack.",
            ["stack"],
            registry=self.registry,
        )

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class AccessLog:
    """One JSON line per request on stderr: when, who, what, how it went, how long."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._lock = threading.Lock()

    def write(self, **fields: Any) -> None:
        if not self.enabled:
            return
        line = json.dumps({"ts": iso(), **fields}, ensure_ascii=False)
        with self._lock:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
