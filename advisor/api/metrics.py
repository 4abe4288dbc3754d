"""Prometheus metrics, kept in-process and rendered in the text exposition format.

A pure ASGI middleware counts requests and observes latencies per route template (never the raw
path: ids would explode the label set).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import defaultdict
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, str], int] = defaultdict(int)
        self.latency_buckets: dict[tuple[str, str], list[int]] = defaultdict(
            lambda: [0] * (len(BUCKETS_S) + 1)
        )
        self.latency_sum: dict[tuple[str, str], float] = defaultdict(float)
        self.reports_stored = 0
        self.verdicts: dict[str, int] = defaultdict(int)
        self.recommendations: dict[str, int] = defaultdict(int)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(method, route, str(status))] += 1
            self.latency_buckets[(method, route)][bisect.bisect_left(BUCKETS_S, seconds)] += 1
            self.latency_sum[(method, route)] += seconds

    def report_stored(self, verdict: str) -> None:
        with self._lock:
            self.reports_stored += 1
            self.verdicts[verdict] += 1

    def render(self, extra: dict[str, float]) -> str:
        lines = [
            "# HELP advisor_http_requests_total HTTP requests by method, route and status.",
            "# TYPE advisor_http_requests_total counter",
        ]
        with self._lock:
            for (method, route, status), n in sorted(self.requests.items()):
                lines.append(
                    f'advisor_http_requests_total{{method="{method}",route="{_esc(route)}",'
                    f'status="{status}"}} {n}'
                )
            lines += [
                "# HELP advisor_http_request_duration_seconds Request latency by route.",
                "# TYPE advisor_http_request_duration_seconds histogram",
            ]
            for (method, route), counts in sorted(self.latency_buckets.items()):
                labels = f'method="{method}",route="{_esc(route)}"'
                total = 0
                for bound, n in zip((*BUCKETS_S, float("inf")), counts, strict=True):
                    total += n
                    le = "+Inf" if bound == float("inf") else f"{bound:g}"
                    bucket = f'{labels},le="{le}"'
                    lines.append(
                        f"advisor_http_request_duration_seconds_bucket{{{bucket}}} {total}"
                    )
                seconds = self.latency_sum[(method, route)]
                lines.append(f"advisor_http_request_duration_seconds_sum{{{labels}}} {seconds:.6f}")
                lines.append(f"advisor_http_request_duration_seconds_count{{{labels}}} {total}")
            lines += [
                "# HELP advisor_probe_reports_stored_total Probe reports stored since start.",
                "# TYPE advisor_probe_reports_stored_total counter",
                f"advisor_probe_reports_stored_total {self.reports_stored}",
                "# HELP advisor_probe_report_verdicts_total Stored probe reports by verdict.",
                "# TYPE advisor_probe_report_verdicts_total counter",
            ]
            for verdict, n in sorted(self.verdicts.items()):
                lines.append(
                    f'advisor_probe_report_verdicts_total{{verdict="{_esc(verdict)}"}} {n}'
                )
        for name, value in sorted(extra.items()):
            lines += [f"# TYPE {name} gauge", f"{name} {value:g}"]
        return "\n".join(lines) + "\n"


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


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
            route: Any = scope.get("route")
            template = getattr(route, "path", None) or "(unmatched)"
            self.metrics.observe(scope["method"], template, status, time.perf_counter() - start)
