"""Prometheus metrics through prometheus_client, one registry per app.

Every label comes from a closed set, so that no client can grow the exposition: the method is
one of the standard ones or "OTHER", the route is the matched route's template (never the raw
path: ids would explode the label set) or "(unmatched)", the status is one the app answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER_METHOD = "OTHER"  # any other method, made up or not (30,000 of them once made 940 MB)
UNMATCHED = "(unmatched)"


class _Gauges(Collector):
    """Gauges read at scrape time (catalog, caches, store), from the app's state."""

    def __init__(self, read: Callable[[], dict[str, tuple[str, float]]]) -> None:
        self.read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        for name, (doc, value) in sorted(self.read().items()):
            yield GaugeMetricFamily(name, doc, value=value)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "advisor_http_requests",
            "HTTP requests by method, route and status.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "advisor_http_request_duration_seconds",
            "Request latency by route.",
            ("method", "route"),
            buckets=BUCKETS_S,
            registry=self.registry,
        )
        self.reports_stored = Counter(
            "advisor_probe_reports_stored",
            "Probe reports stored since start.",
            registry=self.registry,
        )
        self.verdicts = Counter(
            "advisor_probe_report_verdicts",
            "Stored probe reports by verdict.",
            ("verdict",),
            registry=self.registry,
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        label = method if method in METHODS else OTHER_METHOD
        self.requests.labels(label, route, str(status)).inc()
        self.latency.labels(label, route).observe(seconds)

    def report_stored(self, verdict: str) -> None:
        self.reports_stored.inc()
        self.verdicts.labels(verdict).inc()

    def add_gauges(self, read: Callable[[], dict[str, tuple[str, float]]]) -> None:
        """`read` gives {name: (help, value)} at each scrape."""
        self.registry.register(_Gauges(read))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self.metrics.observe(
                scope["method"], _template(scope), status, time.perf_counter() - start
            )


def _template(scope: Scope) -> str:
    """The matched route's template; a plain Starlette route (/openapi.json, which sets no
    "route") by its path when it has no parameters; else UNMATCHED."""
    route: Any = scope.get("route")
    template = getattr(route, "path", None)
    if template:
        return str(template)
    if scope.get("endpoint") is not None and not scope.get("path_params"):
        return str(scope["path"])
    return UNMATCHED
