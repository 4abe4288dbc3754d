"""What the engine returns: typed data, independent of how it is shown (CLI table, JSON, HTTP).

These models are the HTTP API's response schema too (advisor/api/routes/recommend.py), so the
OpenAPI contract is generated from the same classes the engine builds.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, SkipValidation

if TYPE_CHECKING:
    from pydantic import GetJsonSchemaHandler
    from pydantic.json_schema import JsonSchemaValue
    from pydantic_core import CoreSchema


class _Out(BaseModel):
    # defer_build: built on first use, not when `advisor --help` or a command imports the engine
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


Out = TypeVar("Out", bound=_Out)
_set = object.__setattr__


def built(model: type[Out], values: dict[str, Any]) -> Out:
    """`model` from `values` that the engine made from validated catalog data, every field given
    in the model's order, not validated again: what model_construct does without its Python loop
    over the fields. Validating each ranked option and the answer was a tenth of an answer's
    time (model_construct took longer still); tests/test_engine.py holds every answer built so
    to its validated copy, value by value, type by type, and field order."""
    out = model.__new__(model)
    _set(out, "__dict__", values)
    _set(out, "__pydantic_fields_set__", set(values))
    _set(out, "__pydantic_extra__", None)
    _set(out, "__pydantic_private__", None)
    return out


class SizedFigures(_Out):
    """The numbers behind a recommendation sized from a model (advisor/planning/)."""

    gpus_needed: int
    rented_gpus: int
    memory_per_gpu_gb: float
    memory_total_gb: float
    efficiency: float = Field(description="share of the dense peak the work reaches")
    efficiency_source: str
    hours: float | None = Field(None, description="training: time to process the tokens")
    cost_to_completion_usd: float | None = None
    replicas: int | None = Field(None, description="inference: copies of the model served")
    tokens_per_s: float | None = None
    cost_per_million_tokens_usd: float | None = None
    ttft_ms: float | None = Field(None, description="inference: time to first token")
    itl_ms: float | None = Field(None, description="inference: inter-token latency")
    concurrency: int | None = Field(None, description="inference: sequences per replica")
    tensor_parallel: int | None = Field(
        None,
        description="inference: a replica's tensor-parallel degree (its GPUs inside one node; "
        "over several nodes, attention's degree (expert parallel) or a stage's (pipeline))",
    )
    gpu_hours: float | None = Field(None, description="training: GPUs x wall hours")
    mfu: float | None = Field(
        None, description="training: model FLOPs utilisation (6ND; 4ND + 6AD with LoRA adapters)"
    )
    layout: str | None = Field(
        None,
        description="training: data/tensor/pipeline parallel, ZeRO; serving over several nodes: "
        "a replica's expert- or pipeline-parallel layout",
    )
    training_tokens_per_s: float | None = Field(
        None, description="training without a token count: tokens a second trained here"
    )
    cost_per_million_trained_tokens_usd: float | None = Field(
        None, description="training without a token count: $/h over the tokens trained an hour"
    )
    hours_range: tuple[float, float] | None = Field(
        None, description="training: hours at the optimistic and the pessimistic efficiency"
    )


class Recommendation(_Out):
    instance_type: str | None = Field(description="None for an edge device")
    device: str | None = Field(description="edge device id; None for a cloud offering")
    provider: str | None
    accelerator: str = Field(description="accelerator id, or the CPU class for CPU-only")
    gpu_count: int = Field(description="GPUs rented in total (nodes x GPUs per node)")
    nodes: int
    region: str | None
    purchase: str | None
    hourly_usd: float | None = Field(description="all nodes together; None for an edge device")
    power_w: float
    power_mode: str | None
    score: float = Field(description="1.0 = the best candidate under the objective")
    ranked_value: float = Field(
        description="the figure the options are sorted by: the objective's figure (hourly or "
        "yearly $, $ to completion, hours, $ per million tokens, TFLOP/s, TFLOP/s per $/h) "
        "with the soft-preference penalty applied"
    )
    penalty_factor: float = Field(
        1.0,
        description="the soft-preference penalty in ranked_value: 1.0 = none, 1.1 = ranked 10% "
        "worse (its reason names the preference)",
    )
    reasons: tuple[str, ...]
    sizing: SizedFigures | None = None
    cost_per_year_usd: float | None = Field(
        default=None,
        description="edge devices: purchase over the stated lifetime + energy for a year of "
        "operation (advisor/perf/cost.py); None for a cloud offering",
    )
    price_flag: str | None = Field(
        None,
        description="why the catalog's price sanity checks doubt this price (ranked only with "
        "include_flagged_prices); None for a sound price",
    )


class Rejection(NamedTuple):
    """A candidate ruled out, with a code and a sentence per failed constraint.

    A NamedTuple rather than a model: one query rejects up to thousands of candidates, and
    building each as a validated model cost the engine a third of its time. In a Result it
    serialises as the object `RejectionJson` describes."""

    id: str
    codes: tuple[str, ...]
    reasons: tuple[str, ...]


class RejectionJson(_Out):
    """The JSON shape of a Rejection (its schema in the HTTP contract)."""

    id: str
    codes: list[str]
    reasons: list[str]


def _rejection_json(r: Rejection) -> dict[str, Any]:
    return {"id": r.id, "codes": r.codes, "reasons": r.reasons}


@functools.cache
def _rejection_schema() -> JsonSchemaValue:
    return RejectionJson.model_json_schema()


class _AsRejectionJson:
    """WithJsonSchema(RejectionJson.model_json_schema()), the schema made when a JSON schema is
    first asked for (the HTTP contract), not when a command imports the engine (about 1 ms of
    every command's start-up, benchmarks/bench_startup.py)."""

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return _rejection_schema().copy()  # as WithJsonSchema gives its schema


# Built by the engine from validated catalog data: not validated again; written as an object.
_RejectionField = Annotated[
    Rejection,
    SkipValidation,
    PlainSerializer(_rejection_json, return_type=dict[str, Any]),
    _AsRejectionJson(),
]


class Alternative(_Out):
    constraint: str = Field(description="the request field to relax")
    relax_to: float | str | None = Field(description="None = drop the constraint")
    candidate: str
    sentence: str


class RejectedCount(_Out):
    """How many candidates one constraint rules out."""

    code: str
    words: str = Field(description="the constraint, in words")
    count: int


class Result(_Out):
    workload: str
    objective: str
    explanation: str = Field(description="what was chosen and why, or why nothing fits")
    feasible_count: int = Field(description="feasible priced offerings (type x region x purchase)")
    feasible_types: int = Field(
        description="feasible instance types (and edge devices): the rows a listing without "
        "each_offering can show"
    )
    recommendations: tuple[Recommendation, ...]
    rejected_count: int = Field(description="candidates ruled out, every one counted")
    rejected_summary: tuple[RejectedCount, ...] = Field(
        description="per constraint, how many candidates it rules out, most first"
    )
    rejected: tuple[_RejectionField, ...] = Field(
        description="every rejected candidate with its reasons: listed with show_rejected, "
        "else empty (rejected_summary counts them)"
    )
    alternatives: tuple[Alternative, ...]

    @property
    def ok(self) -> bool:
        return bool(self.recommendations)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
