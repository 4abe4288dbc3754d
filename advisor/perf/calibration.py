"""The one efficiency rule, and the fleet's calibration it reads (from probe reports).

Efficiency (model FLOP utilisation for training, share of memory bandwidth for decode) is the
workload profile's base efficiency (catalog), times the fleet's median measured / expected
matmul_bf16 for the accelerator when at least `min_reports` probe reports give that ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIN_FLEET_REPORTS = 5  # fewer measured reports than this: the fleet's median is noise


@dataclass(frozen=True)
class Calibration:
    """The fleet's median measured / expected matmul_bf16 for one accelerator."""

    ratio: float
    reports: int


@dataclass(frozen=True)
class Efficiency:
    value: float
    source: str  # one sentence: which rule gave the value
    calibrated: bool  # True when the fleet's ratio was applied


def calibrates(cal: Calibration | None, min_reports: int = MIN_FLEET_REPORTS) -> bool:
    """Whether the fleet's ratio is trusted: enough reports measured it."""
    return cal is not None and cal.reports >= min_reports


def efficiency(
    base: float,
    workload: str,
    cal: Calibration | None,
    min_reports: int = MIN_FLEET_REPORTS,
) -> Efficiency:
    """`base` (the profile of `workload`) x the fleet's ratio when `calibrates`, else `base`."""
    if cal is not None and calibrates(cal, min_reports):
        return Efficiency(
            base * cal.ratio,
            f"fleet-calibrated: {base:.2f} x the fleet's median measured/expected matmul_bf16 "
            f"{cal.ratio:.2f} over {cal.reports} probe reports",
            True,
        )
    why = f"catalog default for {workload}"
    if cal is not None:
        why += f" (the fleet has only {cal.reports} report(s), {min_reports} needed)"
    return Efficiency(base, why, False)


CALIBRATION_CHECK = "matmul_bf16"  # the probe check whose measured / expected scales efficiency


def calibration_from(ratio_median: object, runs: int) -> Calibration | None:
    """One accelerator's calibration from its CALIBRATION_CHECK statistics over the fleet (the
    store's summary and the review's rows alike); None without a positive median."""
    if isinstance(ratio_median, bool) or not isinstance(ratio_median, int | float):
        return None
    return Calibration(float(ratio_median), runs) if ratio_median > 0 else None


def calibrations(fleet: list[dict[str, Any]]) -> dict[str, Calibration]:
    """Calibration per accelerator from fleet summaries (GET /v1/fleet/summary, or the store)."""
    out = {}
    for summary in fleet:
        acc = summary.get("accelerator")
        stats = (summary.get("checks") or {}).get(CALIBRATION_CHECK) or {}
        # the runs whose ratio the median is of (a service before "ratios": every run)
        measured = stats.get("ratios", stats.get("count"))
        cal = calibration_from(stats.get("ratio_median"), int(measured or 0))
        if acc and cal is not None:
            out[str(acc)] = cal
    return out
