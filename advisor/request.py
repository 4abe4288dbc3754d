"""Requests: a workload and its constraints as the CLI flags and the HTTP bodies state them, the
hardware an estimate is for, and turning outside input into these validated models."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from advisor.catalog.models import Objective, Purchase
from advisor.errors import InputError
from advisor.validation_errors import explain_validation


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
    # Sizing from a model instead of --memory-gb (advisor/perf/fitting.py).
    model: Annotated[str | None, Field(min_length=1, description="model preset id")] = None
    params_b: Annotated[float | None, Field(gt=0, le=100_000, description="free-form size")] = None
    tokens: Annotated[float | None, Field(gt=0, le=1e16, description="training tokens")] = None
    zero_stage: Annotated[int, Field(ge=0, le=3, description="ZeRO stage (3 = FSDP)")] = 3
    seq_len: Annotated[int | None, Field(gt=0, le=10_000_000)] = None
    batch: Annotated[
        int | None, Field(ge=1, le=100_000, description="micro-batch / concurrent sequences")
    ] = None  # None = the workload profile's default
    recompute: bool = True
    precision: Annotated[
        Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"], Field(description="weights")
    ] = "bf16"
    context_tokens: Annotated[int | None, Field(gt=0, le=100_000_000)] = None
    throughput_tokens_s: Annotated[float | None, Field(gt=0, le=1e12)] = None

    @property
    def sized(self) -> bool:
        return self.model is not None or self.params_b is not None

    @model_validator(mode="after")
    def _one_model(self) -> Workload:
        if self.model is not None and self.params_b is not None:
            raise ValueError("give either model or params_b, not both")
        if self.sized and self.memory_gb is not None:
            raise ValueError("memory_gb is derived from the model: leave it out")
        return self


class EstimateRequest(Workload):
    """A sized workload and the hardware to estimate it on."""

    instance_type: Annotated[str | None, Field(min_length=1)] = None
    accelerator: Annotated[str | None, Field(min_length=1, description="GPU, without a price")] = (
        None
    )
    gpus_per_node: Annotated[int, Field(ge=1, le=64, description="with --accelerator")] = 8


M = TypeVar("M", bound=BaseModel)


def parse_request(model: type[M], data: dict[str, Any]) -> M:
    """Validate a request; errors become one InputError line naming each bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{f}: {m}" for f, m in explain_validation(exc, model))
        raise InputError(f"invalid request: {problems}") from None
