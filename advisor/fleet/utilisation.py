"""Classification of monitored GPU utilisation in AWS Compute Optimizer's vocabulary: pure, no I/O.

Findings: idle, under_provisioned, over_provisioned, optimized (None: the readings cannot tell).
The rules are data (RULES, below), checked in order; the first that holds is the finding, and
every reason code whose condition held is reported with a sentence citing the figures.

A condition on a figure NVML could not read is unknown, neither true nor false: when a rule
can neither be confirmed nor ruled out, the finding is None rather than a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from advisor.catalog import Catalog
from advisor.fleet.verification import match_by_name
from probes.monitor import LIMIT_REASONS, format_span
from probes.report import Finding, GpuUtilisation, UtilisationReport

GPU_UTIL_LOW = "GPU_UTIL_LOW"
GPU_MEMORY_LOW = "GPU_MEMORY_LOW"
GPU_UTIL_HIGH = "GPU_UTIL_HIGH"
GPU_MEMORY_HIGH = "GPU_MEMORY_HIGH"
THROTTLED = "THROTTLED"


def _memory_share(g: GpuUtilisation) -> float | None:
    if g.memory_used_max_mib is None or not g.memory_total_mib:
        return None
    return g.memory_used_max_mib / g.memory_total_mib


METRICS: dict[str, Callable[[GpuUtilisation], float | None]] = {
    "util_p95": lambda g: g.util_gpu_p95_pct,
    "util_mean": lambda g: g.util_gpu_mean_pct,
    "memory_share": _memory_share,  # peak memory used / total: allocations must fit at peak
    "throttled": lambda g: g.throttled_fraction,
}


@dataclass(frozen=True)
class Condition:
    code: str  # the reason code reported when the condition holds
    metric: str  # a key of METRICS
    above: bool  # holds when the figure is above the limit (else: below it); strict both ways
    limit: float
    if_unknown: bool | None = None  # the outcome when NVML could not read the figure


@dataclass(frozen=True)
class Rule:
    finding: Finding
    groups: tuple[tuple[Condition, ...], ...]  # the rule holds when every condition of a group does


RULES: tuple[Rule, ...] = (
    # idle: nothing ran. The p95, not the mean, so that a burst now and then is not "idle", and
    # memory too, so that a process holding data between bursts is not "idle" either.
    Rule(
        "idle",
        (
            (
                Condition(GPU_UTIL_LOW, "util_p95", above=False, limit=5.0),
                Condition(GPU_MEMORY_LOW, "memory_share", above=False, limit=0.05),
            ),
        ),
    ),
    # under_provisioned, checked before over_provisioned (Compute Optimizer: a resource is
    # over-provisioned only when no specification is under-provisioned). Busy time and memory
    # must both be near full: NVML's utilisation is the share of time a kernel ran, not of the
    # SMs used, and caching allocators hold memory they do not use, so neither alone shows a GPU
    # too small. Or power or thermal limits held the clocks back most of the time.
    Rule(
        "under_provisioned",
        (
            (
                Condition(GPU_UTIL_HIGH, "util_mean", above=True, limit=90.0),
                Condition(GPU_MEMORY_HIGH, "memory_share", above=True, limit=0.90),
            ),
            # Some GPUs (vGPUs, older drivers) report no clock-event reasons: none seen, none taken.
            (Condition(THROTTLED, "throttled", above=True, limit=0.5, if_unknown=False),),
        ),
    ),
    # over_provisioned: either resource could be smaller. Memory judged at its peak.
    Rule(
        "over_provisioned",
        (
            (Condition(GPU_UTIL_LOW, "util_mean", above=False, limit=30.0),),
            (Condition(GPU_MEMORY_LOW, "memory_share", above=False, limit=0.40),),
        ),
    ),
)

_RULE_NAME = {
    "idle": "idle",
    "under_provisioned": "under-provisioning",
    "over_provisioned": "over-provisioning",
}
_FIGURE = {"util_p95": "p95", "util_mean": "average", "memory_share": "peak", "throttled": "share"}


@dataclass(frozen=True)
class Classification:
    finding: Finding | None
    reason_codes: list[str]
    evidence: list[str]


def _holds(c: Condition, g: GpuUtilisation) -> bool | None:
    value = METRICS[c.metric](g)
    if value is None:
        return c.if_unknown
    return value > c.limit if c.above else value < c.limit


def _group(conditions: tuple[Condition, ...], g: GpuUtilisation) -> bool | None:
    results = [_holds(c, g) for c in conditions]
    if False in results:
        return False
    return True if all(results) else None


def assess(g: GpuUtilisation, window_s: float) -> Classification:
    """The finding for one GPU over a window of `window_s` seconds, with codes and evidence."""
    if g.samples == 0:
        return Classification(None, [], ["no readings were taken"])
    finding: Finding | None = "optimized"
    held: list[Condition] = []
    for rule in RULES:
        outcomes = [(_group(group, g), group) for group in rule.groups]
        if any(ok for ok, _ in outcomes):
            finding = rule.finding
            held = [c for ok, group in outcomes if ok for c in group]
            break
        if any(ok is None for ok, _ in outcomes):
            finding = None  # this rule can be neither confirmed nor ruled out
            break
    codes = list(dict.fromkeys(c.code for c in held))
    return Classification(finding, codes, _evidence(g, window_s, finding, held))


def _evidence(
    g: GpuUtilisation, window_s: float, finding: Finding | None, held: list[Condition]
) -> list[str]:
    def clause(*metrics: str) -> str:
        parts = [
            f"{_FIGURE[c.metric]} {'above' if c.above else 'below'} the "
            f"{_RULE_NAME[str(finding)]} threshold of {_limit(c)}"
            for c in held
            if c.metric in metrics
        ]
        return "; " + "; ".join(parts) if parts else ""

    window = format_span(window_s)
    out = []
    if g.util_gpu_mean_pct is None:
        out.append(f"NVML reported no GPU utilisation over {window} (not supported, e.g. MIG)")
    else:
        p95 = f" (p95 {_pct(g.util_gpu_p95_pct)})" if g.util_gpu_p95_pct is not None else ""
        out.append(
            f"GPU utilisation averaged {_pct(g.util_gpu_mean_pct)}{p95} over {window}"
            + clause("util_mean", "util_p95")
        )
    share = _memory_share(g)
    if share is None or g.memory_used_max_mib is None or g.memory_total_mib is None:
        out.append("NVML reported no memory use for this GPU")
    else:
        out.append(
            f"memory used peaked at {_gib(g.memory_used_max_mib)} of "
            f"{_gib(g.memory_total_mib)} ({_pct(share * 100)})" + clause("memory_share")
        )
    if g.throttled_fraction:
        limits = [r for r in g.throttle_reasons if r in LIMIT_REASONS]
        reasons = f" ({', '.join(limits)})" if limits else ""
        out.append(
            "power or thermal limits held the clocks back in "
            f"{_pct(g.throttled_fraction * 100)} of readings{reasons}" + clause("throttled")
        )
    if g.power_mean_w is not None and g.power_limit_w:
        out.append(
            f"power draw averaged {g.power_mean_w:.0f} W of a {g.power_limit_w:.0f} W limit "
            f"({_pct(g.power_mean_w / g.power_limit_w * 100)})"
        )
    if finding is None:
        out.append("not classified: the readings NVML gave cannot decide the finding")
    return out


def classify(g: GpuUtilisation, window_s: float, catalog: Catalog | None = None) -> GpuUtilisation:
    """A copy of `g` with its finding, reason codes, evidence and matched catalog accelerator."""
    result = assess(g, window_s)
    update: dict[str, object] = {
        "finding": result.finding,
        "reason_codes": result.reason_codes,
        "evidence": result.evidence,
    }
    if catalog is not None:
        matched = match_by_name(catalog, g.name)
        update["accelerator"] = matched.id if matched else None
    return g.model_copy(update=update)


def classify_report(report: UtilisationReport, catalog: Catalog | None = None) -> UtilisationReport:
    gpus = [classify(g, report.duration_s, catalog) for g in report.gpus]
    return report.model_copy(update={"gpus": gpus})


def _limit(c: Condition) -> str:
    return _pct(c.limit * 100) if c.metric in ("memory_share", "throttled") else _pct(c.limit)


def _pct(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}".removesuffix(".0") + "%"  # 3%, 4.6%, 90.4%: never rounds across a limit


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"
