"""A probe report as the verdicts fleet tools act on: one node health (ok / problem / unknown
with a reason), node-problem-detector's custom-plugin line and exit code, a Kubernetes node
condition, a Slurm drain reason, and Prometheus metrics. Pure: no I/O.

node-problem-detector's custom plugin protocol (its docs/custom_plugin_monitor.md, the plugin
interface proposal): exit 0 OK, 1 NonOK (the problem is present), any other code Unknown; the
message is stdout, cut to the plugin's `max_output_length` (80 by default).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

from prometheus_client import CollectorRegistry, Gauge

from probes.report import Check, ProbeReport

NPD_OUTPUT_CHARS = 80
EXIT_OK, EXIT_PROBLEM, EXIT_UNKNOWN = 0, 1, 3
CONDITION_TYPE = "AdvisorGPUProblem"  # problem-typed as node-problem-detector's: True = bad
Health = Literal["ok", "problem", "unknown"]
_CONDITION_STATUS = {"ok": "False", "problem": "True", "unknown": "Unknown"}


@dataclass(frozen=True)
class NodeHealth:
    status: Health
    reason: str  # CamelCase, a node condition's reason
    message: str  # one sentence naming the failing checks
    failing: tuple[Check, ...] = ()

    @property
    def exit_code(self) -> int:
        return {"ok": EXIT_OK, "problem": EXIT_PROBLEM, "unknown": EXIT_UNKNOWN}[self.status]

    def npd_line(self) -> str:
        word = {"ok": "OK", "problem": "NonOK", "unknown": "Unknown"}[self.status]
        return f"{word}: {self.message}"[:NPD_OUTPUT_CHARS]

    def drain_reason(self) -> str:
        return f"advisor: {self.message}"[:200]


def node_health(report: ProbeReport, gpus_expected: bool) -> NodeHealth:
    """The node's health from its report. No GPU measured: a problem where GPUs are expected
    (--expect named GPU hardware: a GPU fallen off the bus looks like this), else unknown."""
    if report.diagnosis:
        said = "; ".join(d.message for d in report.diagnosis[:2])
        if gpus_expected:
            return NodeHealth("problem", "GpuMissing", f"no GPU could be measured: {said}")
        return NodeHealth("unknown", "CheckCouldNotRun", f"no GPU could be measured: {said}")
    failing = tuple(c for c in report.checks if c.status in ("fail", "error"))
    if failing:
        names = ", ".join(_where(c) for c in failing[:4])
        more = f" and {len(failing) - 4} more" if len(failing) > 4 else ""
        message = f"{len(failing)} check(s) failed: {names}{more}"
        return NodeHealth("problem", "ChecksFailed", message, failing)
    if report.verdict in ("fail", "error"):
        return NodeHealth("problem", "ProbeFailed", f"the probe's verdict is {report.verdict}")
    passed = sum(c.status in ("pass", "warn") for c in report.checks)
    gpus = len(report.gpu_verdicts)
    return NodeHealth("ok", "ChecksPassed", f"{passed} checks passed on {gpus} GPU(s)")


def _where(c: Check) -> str:
    if c.gpu is None:
        return c.name
    return f"{c.name} gpu {c.gpu}" + (f"->{c.peer}" if c.peer is not None else "")


def node_condition(
    health: NodeHealth, now: dt.datetime, previous: dict[str, str] | None
) -> dict[str, str]:
    """The node condition (status True when there is a problem, as node-problem-detector's).
    Its lastTransitionTime moves only when its status changes."""
    status = _CONDITION_STATUS[health.status]
    stamp = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    same = previous is not None and previous.get("status") == status
    since = previous.get("lastTransitionTime", stamp) if previous and same else stamp
    return {
        "type": CONDITION_TYPE,
        "status": status,
        "reason": health.reason,
        "message": health.message,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": since,
    }


def health_registry(report: ProbeReport, health: NodeHealth) -> CollectorRegistry:
    """Prometheus gauges of one report: the node's health, each GPU's, and each check's measured
    and expected (planned) figures with their ratio, so alerts compare like with like."""
    reg = CollectorRegistry()
    labels = {"host": report.inventory.hostname}
    Gauge(
        "advisor_node_healthy",
        "1: every check passed; 0: a problem or not known",
        ["host"],
        registry=reg,
    ).labels(**labels).set(1.0 if health.status == "ok" else 0.0)
    Gauge(
        "advisor_node_problem",
        "1: a check failed (the node condition is True)",
        ["host"],
        registry=reg,
    ).labels(**labels).set(1.0 if health.status == "problem" else 0.0)
    Gauge(
        "advisor_probe_duration_seconds", "How long the last probe took", ["host"], registry=reg
    ).labels(**labels).set(report.duration_s)
    Gauge(
        "advisor_probe_timestamp_seconds",
        "When the last probe started (Unix time)",
        ["host"],
        registry=reg,
    ).labels(**labels).set(report.created_at.timestamp())
    gpu = Gauge(
        "advisor_gpu_healthy",
        "1: the GPU's checks passed or warned",
        ["host", "gpu", "uuid"],
        registry=reg,
    )
    for v in report.gpu_verdicts:
        gpu.labels(labels["host"], str(v.gpu), v.uuid or "").set(
            1.0 if v.verdict in ("pass", "warn") else 0.0
        )
    _check_gauges(reg, report)
    return reg


def _check_gauges(reg: CollectorRegistry, report: ProbeReport) -> None:
    names = ["host", "check", "gpu", "peer", "unit"]
    ok = Gauge("advisor_check_ok", "1: the check passed or warned; 0: failed", names, registry=reg)
    measured = Gauge("advisor_check_measured", "The check's measured figure", names, registry=reg)
    expected = Gauge(
        "advisor_check_expected", "The figure planned for this hardware", names, registry=reg
    )
    ratio = Gauge("advisor_check_ratio", "measured / expected", names, registry=reg)
    for c in report.checks:
        if c.status == "skip":
            continue
        key = (
            c.host or report.inventory.hostname,
            c.name,
            "" if c.gpu is None else str(c.gpu),
            "" if c.peer is None else str(c.peer),
            c.unit or "",
        )
        ok.labels(*key).set(1.0 if c.status in ("pass", "warn") else 0.0)
        if c.measured is not None:
            measured.labels(*key).set(c.measured)
        if c.expected is not None:
            expected.labels(*key).set(c.expected)
            if c.measured is not None and c.expected > 0:
                ratio.labels(*key).set(c.measured / c.expected)
