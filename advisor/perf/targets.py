"""Latency targets a deployment is held to: pure, and light enough for the engine to import on
every request (the serving model, advisor/perf/inference.py, loads only for sized work)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.perf.serving_sim import LoadResult


@dataclass(frozen=True, slots=True)
class Targets:
    """Latency targets a deployment must meet (None: no target)."""

    max_ttft_ms: float | None = None
    max_itl_ms: float | None = None
    percentile: int = 50  # under a request rate: the share of requests held to the targets

    def met(self, ttft_ms: float, itl_ms: float) -> bool:
        return (self.max_ttft_ms is None or ttft_ms <= self.max_ttft_ms) and (
            self.max_itl_ms is None or itl_ms <= self.max_itl_ms
        )

    @property
    def any(self) -> bool:
        return self.max_ttft_ms is not None or self.max_itl_ms is not None

    def met_under(self, load: LoadResult, percentile: int | None = None) -> bool:
        """The targets at a percentile of simulated requests: TTFT and the mean token gap of a
        request (TPOT), each at that percentile (the targets' own by default)."""
        p = self.percentile if percentile is None else percentile
        return self.met(load.ttft.at(p) * 1e3, load.tpot.at(p) * 1e3)
