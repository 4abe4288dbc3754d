"""The request: a workload and its constraints, as the CLI flags and the HTTP body state them."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from advisor.models import Objective, Purchase


class Workload(BaseModel):
    """What to recommend hardware for. Every constraint is optional except the workload type."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: Annotated[str, Field(min_length=1, description="workload type id")]
    memory_gb: Annotated[
        float | None, Field(ge=0, le=1_000_000, description="accelerator memory the job needs")
    ] = None
    power_budget_w: Annotated[float | None, Field(gt=0, le=1_000_000)] = None
    interconnect_gb_s: Annotated[
        float | None, Field(ge=0, le=100_000, description="per-GPU GPU-to-GPU bandwidth")
    ] = None
    region: Annotated[str | None, Field(min_length=1)] = None
    provider: Annotated[str | None, Field(min_length=1)] = None
    max_hourly_usd: Annotated[float | None, Field(gt=0)] = None
    purchase: Annotated[
        Purchase | None, Field(description="on_demand (default) or spot; null = either")
    ] = Purchase.on_demand
    gpu_count: Annotated[int | None, Field(ge=0, le=4096, description="at least this many")] = None
    objective: Objective | None = None  # None = the workload profile's default
    limit: Annotated[int, Field(ge=1, le=1000)] = 10
