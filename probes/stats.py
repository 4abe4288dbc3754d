"""A measurement as data: raw samples, what was measured, median, spread, and a noise warning.

Separate from how it is timed (probes/device.py) and how it is shown (advisor's CLI).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

NOISY_CV = 0.05  # relative spread above which a figure is flagged as noisy


class Measurement(BaseModel):
    # strings bounded as every string of a report is (probes.report.MAX_TEXT_CHARS)
    model_config = ConfigDict(extra="forbid", str_max_length=4096)

    name: str
    unit: str
    value: float | None = Field(description="the reported figure (see statistic); None if failed")
    statistic: Literal["max", "median", "formula"] = "median"
    median: float | None = None
    samples: list[float] = Field(
        default_factory=list, max_length=100_000, description="one rate per timed sample"
    )
    min: float | None = None
    max: float | None = None
    iqr: float | None = None  # interquartile range of the samples, same unit
    cv: float | None = None  # coefficient of variation (stdev / mean)
    noisy: bool = False
    params: dict[str, Any] = Field(default_factory=dict)  # sizes, dtypes, repeats, conventions
    error: str | None = None
    gpu: int | None = None  # the CUDA index on its node of the GPU measured (a node report's)
    peer: int | None = None  # the other GPU of a peer-link measurement


def summarize(
    name: str,
    unit: str,
    samples: Sequence[float],
    statistic: Literal["max", "median"] = "median",
    **params: Any,
) -> Measurement:
    """Median and spread of per-sample figures (already in `unit`).

    statistic="max" reports the best sample: for a throughput, no sample can beat what the
    hardware can do, while interference only ever slows samples down (STREAM reports best-of-N
    for the same reason). The median stays in the data beside it.
    """
    values = [float(s) for s in samples]
    if not values:
        return Measurement(name=name, unit=unit, value=None, params=params, error="no samples")
    median = statistics.median(values)
    mean = statistics.fmean(values)
    cv = statistics.pstdev(values) / abs(mean) if len(values) > 1 and mean else 0.0
    if len(values) >= 4:
        q = statistics.quantiles(values, n=4)
        iqr = q[2] - q[0]
    else:
        iqr = max(values) - min(values)
    return Measurement(
        name=name,
        unit=unit,
        value=max(values) if statistic == "max" else median,
        statistic=statistic,
        median=median,
        samples=values,
        min=min(values),
        max=max(values),
        iqr=iqr,
        cv=cv,
        noisy=cv > NOISY_CV,
        params=params,
    )


def failed(name: str, unit: str, error: str, **params: Any) -> Measurement:
    return Measurement(name=name, unit=unit, value=None, params=params, error=error)


def quantile(sorted_values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None when empty."""
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)
