"""The fleet's calibration: measured / expected matmul_bf16 per accelerator, from probe reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Calibration:
    """The fleet's median measured / expected matmul_bf16 for one accelerator."""

    ratio: float
    reports: int


def calibrations(fleet: list[dict[str, Any]]) -> dict[str, Calibration]:
    """Calibration per accelerator from fleet summaries (GET /v1/fleet/summary, or the store)."""
    out = {}
    for summary in fleet:
        acc = summary.get("accelerator")
        stats = (summary.get("checks") or {}).get("matmul_bf16") or {}
        ratio = stats.get("ratio_median")
        if acc and isinstance(ratio, int | float) and ratio > 0:
            out[str(acc)] = Calibration(float(ratio), int(stats.get("count") or 0))
    return out
