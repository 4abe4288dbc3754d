"""What the engine returns: plain data, independent of how it is shown (CLI table, JSON, HTTP)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NamedTuple


@dataclass(frozen=True, slots=True)
class Recommendation:
    instance_type: str | None  # None for an edge device
    device: str | None  # edge device id; None for a cloud offering
    provider: str | None
    accelerator: str  # accelerator id, or the CPU class id for CPU-only offerings
    gpu_count: int  # GPUs rented in total (nodes x GPUs per node)
    nodes: int
    region: str | None
    purchase: str | None
    hourly_usd: float | None  # for all nodes together; None for an edge device
    power_w: float
    power_mode: str | None
    score: float  # 1.0 = the best candidate under the objective; lower is worse
    reasons: tuple[str, ...]
    sizing: dict[str, Any] | None = None  # GPUs, memory, hours, cost when sized from a model


class Rejection(NamedTuple):
    id: str
    codes: tuple[str, ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Alternative:
    constraint: str  # the request field to relax
    relax_to: float | str | None  # None = drop the constraint
    candidate: str
    sentence: str


@dataclass(frozen=True, slots=True)
class Result:
    workload: str
    objective: str
    recommendations: tuple[Recommendation, ...]
    rejected: tuple[Rejection, ...]
    alternatives: tuple[Alternative, ...]
    explanation: str  # one paragraph: what was chosen and why, or why nothing fits
    feasible_count: int

    @property
    def ok(self) -> bool:
        return bool(self.recommendations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "objective": self.objective,
            "explanation": self.explanation,
            "feasible_count": self.feasible_count,
            "recommendations": [_shallow(r) for r in self.recommendations],
            "rejected": [r._asdict() for r in self.rejected],
            "alternatives": [_shallow(a) for a in self.alternatives],
        }


def _shallow(obj: Any) -> dict[str, Any]:
    """Field dict without dataclasses.asdict's recursive deep copy (tuples of str stay as they
    are: json encodes them as lists)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}
