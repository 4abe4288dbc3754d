"""Requests: what to recommend hardware for, and the hardware an estimate is for, as the CLI flags
and the HTTP bodies state them; and turning outside input into these validated models.

Both requests are built from shared field groups so that each accepts exactly the fields its
endpoint uses (an estimate has no budget, no power limit, no result limit), and an unknown field
is answered with a hint from that request's own fields.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from advisor.catalog.models import Objective, Purchase
from advisor.errors import InputError
from advisor.perf.work import Work
from advisor.validation_errors import explain_validation


def _any_purchase(value: object) -> object:
    return None if value == "any" else value


# One rule for every caller (CLI, estimate, API): "any" and null both mean either purchase
# option; leaving the field out means on_demand.
PurchaseOption = Annotated[
    Purchase | None,
    BeforeValidator(_any_purchase),
    WithJsonSchema(
        {
            "anyOf": [{"enum": ["on_demand", "spot", "any"], "type": "string"}, {"type": "null"}],
            "description": "on_demand (default), spot, or any (either; null means the same)",
        }
    ),
]


def purchase_matches(wanted: Purchase | None, offered: Purchase) -> bool:
    """Whether an offering's purchase option satisfies the request's (None = any)."""
    return wanted is None or offered == wanted


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SizedWork(_Request):
    """The field group every request shares: the workload type and, optionally, the model it
    is sized from (the performance model reads them as its own Work)."""

    workload: Annotated[str, Field(min_length=1, description="workload type id")]
    gpu_count: Annotated[int | None, Field(ge=0, le=100_000, description="at least this many")] = (
        None
    )
    model: Annotated[str | None, Field(min_length=1, description="model preset id")] = None
    # Lower bounds where the figures stop meaning anything: a model of under a million
    # parameters, under one token, a target under a microsecond (5e-324 once divided by zero).
    params_b: Annotated[
        float | None, Field(ge=0.001, le=100_000, description="free-form size (billions)")
    ] = None
    tokens: Annotated[float | None, Field(ge=1, le=1e16, description="training tokens")] = None
    zero_stage: Annotated[
        int | None,
        Field(
            ge=0,
            le=3,
            description="ZeRO stage (3 = FSDP); null: the planner picks 1 or 3, whichever holds "
            "the work on fewer GPUs, then costs fewer GPU-hours",
        ),
    ] = None
    global_batch_tokens: Annotated[
        int | None,
        Field(
            ge=1,
            le=10**10,
            description="training: tokens per optimizer step (default by model size: 4M up to "
            "100B parameters, Llama 2's; 16M above, Llama 3 405B's)",
        ),
    ] = None
    seq_len: Annotated[int | None, Field(gt=0, le=10_000_000)] = None
    batch: Annotated[
        int | None, Field(ge=1, le=100_000, description="micro-batch / concurrent sequences")
    ] = None  # None = the workload profile's default
    recompute: Annotated[
        bool | None,
        Field(description="training: full activation recomputation; null: as needed"),
    ] = None
    precision: Annotated[
        Literal["fp32", "bf16", "fp16", "fp8", "fp4", "int8", "int4"], Field(description="weights")
    ] = "bf16"
    context_tokens: Annotated[int | None, Field(gt=0, le=100_000_000)] = None
    throughput_tokens_s: Annotated[float | None, Field(ge=1e-3, le=1e12)] = None
    input_tokens: Annotated[int | None, Field(gt=0, le=10_000_000, description="prompt")] = None
    output_tokens: Annotated[int | None, Field(gt=0, le=10_000_000, description="generated")] = None
    concurrency: Annotated[
        int | None, Field(ge=1, le=1_000_000, description="sequences in flight per replica")
    ] = None  # None: the highest-throughput concurrency that fits
    request_rate: Annotated[
        float | None,
        Field(
            ge=1e-6,
            le=1e9,
            description="inference: requests/s arriving at the deployment (sizes the replicas)",
        ),
    ] = None
    tensor_parallel: Annotated[int | None, Field(ge=1, le=64, description="GPUs per replica")] = (
        None
    )
    max_ttft_ms: Annotated[
        float | None, Field(ge=1e-3, le=1e7, description="time to first token target")
    ] = None  # None: the workload profile's default, if any
    max_itl_ms: Annotated[
        float | None, Field(ge=1e-3, le=1e7, description="inter-token latency target")
    ] = None
    method: Annotated[
        Literal["full", "lora", "qlora"],
        Field(description="training: every weight (full), LoRA adapters, or QLoRA (4-bit base)"),
    ] = "full"
    lora_rank: Annotated[int, Field(ge=1, le=65_536, description="LoRA/QLoRA adapter rank")] = 16
    deadline_days: Annotated[
        float | None,
        Field(ge=1e-6, le=36_500, description="training: finish within (wall time)"),
    ] = None
    max_gpus: Annotated[
        int | None, Field(ge=1, le=1_000_000, description="training: rent at most this many GPUs")
    ] = None
    checkpoint_interval_h: Annotated[
        float | None,
        Field(ge=1e-4, le=1000, description="spot training: hours between checkpoints"),
    ] = None  # None: the workload profile's spot policy default

    @property
    def sized(self) -> bool:
        return self.model is not None or self.params_b is not None

    def work(self) -> Work:
        """The sizing fields as the performance model's own description of the work."""
        return Work(**{name: getattr(self, name) for name in _WORK_FIELDS})

    @model_validator(mode="after")
    def _one_model(self) -> SizedWork:
        if self.model is not None and self.params_b is not None:
            raise ValueError("give either model or params_b, not both")
        return self

    @field_validator("request_rate")
    @classmethod
    def _one_load(cls, rate: float | None, info: ValidationInfo) -> float | None:
        if rate is not None and info.data.get("concurrency") is not None:
            raise ValueError(
                "the load is a rate or a concurrency, not both (a rate's concurrency follows "
                "from Little's law)"
            )
        return rate


_WORK_FIELDS = tuple(f.name for f in dataclasses.fields(Work))


def _given(name: str, kind: str) -> dict[str, Any]:
    """JSON Schema: `name` is present and not null."""
    return {"required": [name], "properties": {name: {"type": kind}}}


_GIVEN_MODEL = _given("model", "string")
_GIVEN_PARAMS = _given("params_b", "number")
_GIVEN_MEMORY = _given("memory_gb", "number")


class _PriceChoice(_Request):
    """Which prices count: where, and how bought."""

    region: Annotated[str | None, Field(min_length=1)] = None
    purchase: PurchaseOption = Purchase.on_demand
    include_flagged_prices: Annotated[
        bool,
        Field(description="rank prices the catalog's sanity checks flag (left out by default)"),
    ] = False


class RecommendRequest(_PriceChoice, SizedWork):
    """What to recommend hardware for. Every constraint is optional except the workload type."""

    # The contract states the rules of the validators below: model and params_b are never
    # both given, nor memory_gb with either (the model gives the memory).
    model_config = ConfigDict(
        json_schema_extra={
            "not": {
                "anyOf": [
                    {"allOf": [_GIVEN_MODEL, _GIVEN_PARAMS]},
                    {"allOf": [_GIVEN_MEMORY, _GIVEN_MODEL]},
                    {"allOf": [_GIVEN_MEMORY, _GIVEN_PARAMS]},
                ]
            }
        }
    )

    memory_gb: Annotated[
        float | None, Field(ge=0, le=1_000_000, description="accelerator memory the job needs")
    ] = None
    power_budget_w: Annotated[float | None, Field(gt=0, le=1_000_000)] = None
    interconnect_gb_s: Annotated[
        float | None, Field(ge=0, le=100_000, description="per-GPU GPU-to-GPU bandwidth")
    ] = None
    provider: Annotated[str | None, Field(min_length=1)] = None
    max_hourly_usd: Annotated[float | None, Field(gt=0)] = None
    objective: Objective | None = None  # None = the workload profile's default
    limit: Annotated[int, Field(ge=1, le=1000)] = 10
    each_offering: Annotated[
        bool,
        Field(
            description=(
                "list every priced offering (instance type x region x purchase option); by "
                "default each instance type appears once, at its best offering"
            )
        ),
    ] = False
    show_rejected: Annotated[
        bool,
        Field(
            description="list every rejected candidate with its reasons; by default the result "
            "counts them per constraint (rejected_summary)"
        ),
    ] = False

    @model_validator(mode="after")
    def _memory_or_model(self) -> RecommendRequest:
        if self.sized and self.memory_gb is not None:
            raise ValueError("memory_gb is derived from the model: leave it out")
        return self


# The public name the README and earlier releases use for the recommendation request.
Workload = RecommendRequest


class EstimateRequest(_PriceChoice, SizedWork):
    """A sized workload and the hardware to estimate it on."""

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {"oneOf": [_GIVEN_MODEL, _GIVEN_PARAMS]},  # exactly one of them
                {"oneOf": [_given("instance_type", "string"), _given("accelerator", "string")]},
            ]
        }
    )

    instance_type: Annotated[str | None, Field(min_length=1)] = None
    accelerator: Annotated[str | None, Field(min_length=1, description="GPU, without a price")] = (
        None
    )
    gpus_per_node: Annotated[
        int | None,
        Field(
            ge=1,
            le=64,
            description="with accelerator: GPUs per node (default: its reference system's, else 8)",
        ),
    ] = None

    @model_validator(mode="after")
    def _one_kind_of_hardware(self) -> EstimateRequest:
        if self.instance_type is not None and self.accelerator is not None:
            raise ValueError("give either instance_type or accelerator, not both")
        return self


M = TypeVar("M", bound=BaseModel)


def parse_request(model: type[M], data: dict[str, Any]) -> M:
    """Validate a request; errors become one InputError line naming each bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"invalid request: {field_sentences(explain_validation(exc, model))}"
        ) from None


def field_sentences(problems: list[tuple[str, str]]) -> str:
    """The one wording of a list of field problems, shared by the CLI and the HTTP API."""
    return "; ".join(f"{field}: {message}" for field, message in problems)
