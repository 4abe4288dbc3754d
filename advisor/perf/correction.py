"""A stored correction of the serving model for one accelerator x engine: the bounded factor on
every iteration that measured runs support (`advisor calibrate ingest --save`), with its
evidence. The file is data under a catalog directory's `corrections/`, validated here
(extra="forbid"); advisor/perf/inference.py applies it when a request names the engine.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.fleet.bench_results import FACTOR_BOUNDS


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class MeasuredItl(_Model):
    """One ingested run's ITL beside the model's at the run's load."""

    source: str = Field(max_length=500)
    predicted_itl_ms: float = Field(gt=0)
    measured_itl_ms: float = Field(gt=0)


class HeldOut(_Model):
    """A run's ITL error after the factor fitted on the other runs only."""

    source: str = Field(max_length=500)
    error: float


class StoredCorrection(_Model):
    schema_version: Literal[1] = 1
    accelerator: str = Field(min_length=1, max_length=100)
    engine: str = Field(min_length=1, max_length=100)
    itl_factor: float = Field(ge=FACTOR_BOUNDS[0], le=FACTOR_BOUNDS[1])
    bounded: bool
    created_at: dt.datetime
    runs: list[MeasuredItl] = Field(min_length=1, max_length=10_000)
    held_out: list[HeldOut] = Field(default_factory=list, max_length=10_000)

    def evidence(self) -> str:
        """What an estimate prints beside the corrected figures."""
        low, high = FACTOR_BOUNDS
        bounded = f", bounded to x{low:g}-x{high:g}" if self.bounded else ""
        held = ""
        if self.held_out:
            worst = max(self.held_out, key=lambda h: abs(h.error))
            held = (
                f"; each run held out, the factor of the others leaves its ITL within "
                f"{abs(worst.error):.1%} (worst: {worst.source})"
            )
        return (
            f"stored correction x{self.itl_factor:.3f} for {self.accelerator} x {self.engine}: "
            f"geometric mean of measured / predicted ITL over {len(self.runs)} run(s) ingested "
            f"{self.created_at.date().isoformat()} (advisor calibrate ingest){bounded}{held}"
        )
