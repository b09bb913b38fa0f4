"""What `ok serve` counts, for Prometheus at `/metrics`, and its access log."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from ..files.folder import iso

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# cosine distance between a document's versions (0: the same, 2: opposite)
_DRIFT = (0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)
# what a refresh does with each source it looks at (the lists of its report)
REFRESH_OUTCOMES = ("changed", "unchanged", "added", "removed", "failed", "skipped")


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
            "Chunks indexed by writes through the server and its syncs, by stack "
            "(its rate is chunks/s).",
            ["stack"],
            registry=self.registry,
        )
        self.refresh_outcomes = Counter(
            "ok_refresh_sources",
            "Sources looked at by refreshes, by stack and outcome: " + ", ".join(REFRESH_OUTCOMES),
            ["stack", "outcome"],
            registry=self.registry,
        )
        self.drift = Histogram(
            "ok_refresh_drift",
            "Drift (cosine distance) between a refreshed document's old and new version.",
            ["stack"],
            buckets=_DRIFT,
            registry=self.registry,
        )
        self.watch_bursts = Counter(
            "ok_watch_bursts",
            "Bursts of file changes the watch saw, by stack and outcome: synced, or own (the "
            "server's own writes, indexed already: no sync).",
            ["stack", "outcome"],
            registry=self.registry,
        )
        self.watch_failures = Counter(
            "ok_watch_failures",
            "Failures of a stack's watch, by stack and stage: watch (watching the files broke; "
            "it is set up again) or sync (a sync after changes failed; it is tried again), "
            "each after a pause that doubles, up to a minute.",
            ["stack", "stage"],
            registry=self.registry,
        )
        self.trigger_fires = Counter(
            "ok_trigger_fires",
            "Triggers fired, by stack, trigger and outcome: fired (the event), exec_failed "
            "(its command failed or timed out).",
            ["stack", "trigger", "outcome"],
            registry=self.registry,
        )

    def refreshed(self, stack: str, rep: Any) -> None:
        """Count a refresh's outcomes and observe each changed document's drift."""
        for outcome in REFRESH_OUTCOMES:
            n = len(getattr(rep, outcome))
            if n:
                self.refresh_outcomes.labels(stack, outcome).inc(n)
        for change in rep.changed:
            if change.get("drift") is not None:
                self.drift.labels(stack).observe(change["drift"])

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
