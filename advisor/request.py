"""Requests: what to recommend hardware for, and the hardware an estimate is for, as the CLI flags
and the HTTP bodies state them; and turning outside input into these validated models.

Both requests are built from shared field groups so that each accepts exactly the fields its
endpoint uses (an estimate has no budget, no power limit, no result limit), and an unknown field
is answered with a hint from that request's own fields.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal, TypeVar, get_args

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
from pydantic_core import PydanticCustomError

from advisor.catalog.models import Objective, Purchase
from advisor.errors import InputError, field_name
from advisor.perf.work import Work
from advisor.validation_errors import explain_validation

# The words each choice field takes, for the CLI's help and every error alike (valid_values).
PURCHASE_WORDS = ("on_demand", "spot", "any")
Precision = Literal["fp32", "bf16", "fp16", "fp8", "fp4", "int8", "int4"]
Method = Literal["full", "lora", "qlora"]


def valid_values(field: str) -> tuple[str, ...]:
    """The values a choice field of a request takes, in the order help and errors list them."""
    if field == "purchase":
        return PURCHASE_WORDS
    return get_args({"objective": Objective, "precision": Precision, "method": Method}[field])


def _any_purchase(value: object) -> object:
    """ "any" is None (either purchase); a word outside PURCHASE_WORDS is refused here, naming
    all three (the enum alone would name on_demand and spot, never any)."""
    if value == "any":
        return None
    if isinstance(value, str) and value not in PURCHASE_WORDS:
        expected = ", ".join(f"'{w}'" for w in PURCHASE_WORDS)
        message = "Input should be one of {expected}"
        raise PydanticCustomError("enum", message, {"expected": expected})
    return value


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


class _Request(BaseModel):
    # allow_inf_nan=False: NaN compares false with every bound, so it would pass as a size
    # and be named by a bound's hint ("is the unit right?") rather than as not a number
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


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
    precision: Annotated[Precision, Field(description="weights")] = "bf16"
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
        Method,
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

# Fields that size work from a model: without one they do nothing, and a request that gives
# them would be answered as if they were not there (the issue's `--tokens` without `--model`).
FROM_A_MODEL = (
    "tokens",
    "zero_stage",
    "seq_len",
    "batch",
    "recompute",
    "deadline_days",
    "max_gpus",
    "global_batch_tokens",
    "context_tokens",
    "throughput_tokens_s",
    "input_tokens",
    "output_tokens",
    "concurrency",
    "request_rate",
    "tensor_parallel",
    "max_ttft_ms",
    "max_itl_ms",
)
# ... and of those, the ones only training reads (a serving plan has no tokens to process).
TRAINING_ONLY = ("tokens", "zero_stage", "deadline_days", "global_batch_tokens")


def refuse_idle_fields(w: object, sized: bool, sizing: str) -> None:
    """InputError (exit 2, HTTP 422) for a field that would do nothing: a sizing field without
    a model, or a training field on a workload that serves (`sizing` is the profile's)."""
    if not sized:
        idle = [name for name in FROM_A_MODEL if getattr(w, name, None) is not None]
        if idle:
            names = ", ".join(field_name(n) for n in idle)
            raise InputError(
                f"{names} {'sizes' if len(idle) == 1 else 'size'} the work from a model: give "
                f"{field_name('model')} or "
                f"{field_name('params_b')}, or drop {'it' if len(idle) == 1 else 'them'}",
                field=idle[0],
            )
    elif sizing == "inference":
        idle = [name for name in TRAINING_ONLY if getattr(w, name, None) is not None]
        if idle:
            names = ", ".join(field_name(n) for n in idle)
            raise InputError(
                f"{names}: training only, and this workload serves a model; drop "
                f"{'it' if len(idle) == 1 else 'them'}",
                field=idle[0],
            )


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
        problems = explain_validation(exc, model)
        # a top-level field is marked so that the CLI names it --flag and the API its key; the
        # first one is the error's field (JSON errors carry it)
        marked = [(field_name(f) if f in model.model_fields else f, m) for f, m in problems]
        first = next((f for f, _ in problems if f in model.model_fields), None)
        raise InputError(f"invalid request: {field_sentences(marked)}", field=first) from None


def field_sentences(problems: list[tuple[str, str]]) -> str:
    """The one wording of a list of field problems, shared by the CLI and the HTTP API."""
    return "; ".join(f"{field}: {message}" for field, message in problems)
