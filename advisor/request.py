"""Requests: what to recommend hardware for, and the hardware an estimate is for, as the CLI flags
and the HTTP bodies state them; and turning outside input into these validated models.

Both requests are built from shared field groups so that each accepts exactly the fields its
endpoint uses (an estimate has no budget, no power limit, no result limit), and an unknown field
is answered with a hint from that request's own fields.

A field is declared once, here: its type, bounds and description (the HTTP body and the OpenAPI
schema), its Cli mark (the command-line option: advisor/cli/sizing_opts.py derives it), its
SizesWork mark (the groups the idle-field rules read) and the cross-field rules (validators).
"""

# No `from __future__ import annotations`: pydantic would evaluate each field's annotation from
# its text when the class is made (advisor/catalog/models.py says why that matters).

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, TypeVar, get_args

from pydantic import (
    AfterValidator,
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

from advisor.catalog.models import ModelPreset, Objective, Provider, Purchase
from advisor.catalog.queries import canonical_region
from advisor.errors import InputError, field_name
from advisor.perf.trace_file import TraceRow
from advisor.validation_errors import explain_validation

if TYPE_CHECKING:  # imported where a request is sized (work) or names a config.json: a request
    # without a model never reads them, and each import is part of every command's start-up
    from advisor.perf.work import Work

# A trace in a request body: more rows than a load simulation replays (600) by far; a file given
# to the CLI is read whole and bounded by advisor/perf/trace_file.py.
MAX_BODY_TRACE = 100_000

# The words each choice field takes, for the CLI's help and every error alike (valid_values).
PURCHASE_WORDS = (
    "on_demand",
    "spot",
    "reserved",
    "reserved_1y",
    "reserved_3y",
    "capacity_block",
    "any",
)
Precision = Literal["fp32", "bf16", "fp16", "fp8", "fp4", "int8", "int4"]
Method = Literal["full", "adam8bit", "lora", "qlora"]
KvPrecision = Literal["bf16", "fp16", "fp8"]
PERCENTILES = (50, 90, 99)  # what the serving simulation reports (perf/serving_sim.py)


def valid_values(field: str) -> tuple[str, ...]:
    """The values a choice field of a request takes, in the order help and errors list them."""
    if field == "purchase":
        return PURCHASE_WORDS
    kinds = {
        "objective": Objective,
        "precision": Precision,
        "method": Method,
        "kv_precision": KvPrecision,
    }
    return get_args(kinds[field])


def choice_words(field: str, last: str = "or") -> str:
    """A choice field's valid values in words, for --help: the same tuple its error lists."""
    values = valid_values(field)
    return f"{', '.join(values[:-1])} {last} {values[-1]}"


# The --help panels (groups) the command line shows a request's options in, in this order.
WORK = "What runs"
HARDWARE = "Hardware"
CONSTRAINTS = "Constraints"
TRAINING = "Training"
SERVING = "Serving (inference)"
OUTPUT = "Output"
PANELS = (WORK, HARDWARE, CONSTRAINTS, TRAINING, SERVING, OUTPUT)


# The two marks are plain classes, read by isinstance and their attributes: each command taking a
# request imports this module, and a frozen dataclass takes a few hundred microseconds to make (its
# methods are compiled when the class is).
class Cli:
    """How the command line offers a request field (advisor/cli/sizing_opts.py derives the
    option from it): the --help line, its panel and a short flag. The long flag is the field's
    name with dashes (--max-itl-ms); a yes/no field left unset by default is --x/--no-x."""

    __slots__ = ("help", "json_file", "panel", "short", "trace_file")

    def __init__(
        self,
        help: str,
        panel: str,
        short: str | None = None,
        json_file: bool = False,  # the option names a JSON file; the field holds its content
        trace_file: bool = False,  # the option names a trace file (perf/trace_file.py): its rows
    ) -> None:
        self.help = help
        self.panel = panel
        self.short = short
        self.json_file = json_file
        self.trace_file = trace_file


class SizesWork:
    """A field that sizes work from a model (idle without one). `job`: the only job that reads
    it ("training"; "serving": it also needs the model's architecture, which a bare size lacks),
    or None for both."""

    __slots__ = ("job",)

    def __init__(self, job: Literal["training", "serving"] | None = None) -> None:
        self.job = job


def _any_purchase(value: object) -> object:
    """ "any" is None (on demand or spot); a word outside PURCHASE_WORDS is refused here, naming
    every word (the enum alone would never name any)."""
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
            "anyOf": [{"enum": list(PURCHASE_WORDS), "type": "string"}, {"type": "null"}],
            "description": "on_demand (default), spot, reserved (1 or 3 years), reserved_1y, "
            "reserved_3y, capacity_block (AWS), or any (on demand or spot; null means the same)",
        }
    ),
]


class _Request(BaseModel):
    # allow_inf_nan=False: NaN compares false with every bound, so it would pass as a size
    # and be named by a bound's hint ("is the unit right?") rather than as not a number.
    # defer_build: each request model's validator is built when it first validates, so that a
    # command pays for its own request only (benchmarks/results/startup-2026-12-03.txt).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)


# An id a request names (workload type, model preset, provider, instance type, accelerator,
# engine): the catalog's longest is 30 characters. A longer one is refused naming the field
# before any lookup: an unknown id is echoed in the error and compared with every known one for
# a "did you mean", which for a 900 kB name cost an anonymous request 0.25 s of CPU.
ID_MAX_CHARS = 100


class SizedWork(_Request):
    """The field group every request shares: the workload type and, optionally, the model it
    is sized from (the performance model reads them as its own Work)."""

    workload: Annotated[
        str,
        Field(min_length=1, max_length=ID_MAX_CHARS, description="workload type id"),
        # the shipped workload types (catalog/workloads.yaml; tests/test_cli_help.py holds the
        # two to the same set): --help names them without loading the catalog
        Cli(
            "large_scale_training, fine_tuning, high_throughput_inference, "
            "low_latency_inference, edge_inference, batch_processing",
            WORK,
            "-w",
        ),
    ]
    gpu_count: Annotated[
        int | None,
        Field(ge=0, le=100_000, description="at least this many"),
        Cli("At least this many GPUs.", CONSTRAINTS, "-g"),
    ] = None
    model: Annotated[
        str | None,
        Field(min_length=1, max_length=ID_MAX_CHARS, description="model preset id"),
        Cli("Model preset id, e.g. llama-3-8b.", WORK, "-m"),
    ] = None
    # Lower bounds where the figures stop meaning anything: a model of under a million
    # parameters, under one token, a target under a microsecond (5e-324 once divided by zero).
    params_b: Annotated[
        float | None,
        Field(ge=0.001, le=100_000, description="free-form size (billions)"),
        Cli("Free-form model size in billions.", WORK),
    ] = None
    active_params_b: Annotated[
        float | None,
        Field(
            ge=0.001,
            le=100_000,
            description="with params_b: a mixture of experts' parameters per token (billions)",
        ),
        Cli("With --params-b: a mixture of experts' active parameters per token, billions.", WORK),
    ] = None
    hf_config: Annotated[
        dict[str, Any] | None,
        Field(
            description="a Hugging Face config.json's content: the model's architecture "
            "(instead of model or params_b)",
            json_schema_extra={"maxProperties": 1000},
        ),
        Cli(
            "A Hugging Face config.json: the model's architecture (dense, GQA, MLA, MoE), "
            "instead of --model or --params-b.",
            WORK,
            json_file=True,
        ),
    ] = None
    tokens: Annotated[
        float | None,
        Field(ge=1, le=1e16, description="training tokens"),
        Cli("Training tokens, e.g. 2e9.", WORK),
        SizesWork("training"),
    ] = None
    zero_stage: Annotated[
        int | None,
        Field(
            ge=0,
            le=3,
            description="ZeRO stage (3 = FSDP); null: the planner picks 1 or 3, whichever holds "
            "the work on fewer GPUs, then costs fewer GPU-hours",
        ),
        Cli("ZeRO stage 0-3 (3 = FSDP); default: 1 or 3, whichever plans better.", TRAINING),
        SizesWork("training"),
    ] = None
    seq_len: Annotated[
        int | None,
        Field(gt=0, le=10_000_000),
        Cli("Training sequence length.", TRAINING),
        SizesWork(),
    ] = None
    batch: Annotated[
        int | None,
        Field(ge=1, le=100_000, description="micro-batch / concurrent sequences"),
        Cli("Micro-batch (training) / sequences (inference).", TRAINING),
        SizesWork(),
    ] = None  # None = the workload profile's default
    recompute: Annotated[
        bool | None,
        Field(description="training: full activation recomputation; null: as needed"),
        Cli(
            "Full activation recomputation (training); default: as needed (without it when "
            "the activations fit, or whichever costs fewer GPU-hours).",
            TRAINING,
        ),
        SizesWork(),
    ] = None
    dualpipe: Annotated[
        bool | None,
        Field(
            description="training a mixture of experts: the experts' all-to-alls hidden under "
            "another micro-batch's compute (DeepSeek's DualPipe); null: on the critical path"
        ),
        Cli(
            "Mixture-of-experts training: overlap the experts' all-to-alls with compute "
            "(DualPipe-style); default: on the critical path, as Megatron-Core runs them.",
            TRAINING,
        ),
        SizesWork("training"),
    ] = None
    deadline_days: Annotated[
        float | None,
        Field(ge=1e-6, le=36_500, description="training: finish within (wall time)"),
        Cli("Training: finish within this many days (picks GPUs and nodes).", TRAINING),
        SizesWork("training"),
    ] = None
    budget_usd: Annotated[
        float | None,
        Field(gt=0, le=1e12, description="training: the most to spend on the whole run, USD"),
        Cli(
            "Training: the most to spend on the run, USD (recommend: options that cost more are "
            "ruled out; each says the tokens the budget buys).",
            TRAINING,
        ),
        SizesWork("training"),
    ] = None
    max_gpus: Annotated[
        int | None,
        Field(ge=1, le=1_000_000, description="rent at most this many GPUs"),
        Cli("Rent at most this many GPUs (whole nodes count all theirs).", CONSTRAINTS),
    ] = None
    global_batch_tokens: Annotated[
        int | None,
        Field(
            ge=1,
            le=10**10,
            description="training: tokens per optimizer step (default by model size: 4M up to "
            "100B parameters, Llama 2's; 16M above, Llama 3 405B's)",
        ),
        Cli(
            "Training: tokens per optimizer step (default: 4M up to 100B parameters, 16M above).",
            TRAINING,
        ),
        SizesWork("training"),
    ] = None
    precision: Annotated[
        Precision,
        Field(description="weights"),
        Cli(f"Weights: {choice_words('precision')} (fp4: Blackwell).", WORK),
    ] = "bf16"
    context_tokens: Annotated[
        int | None,
        Field(gt=0, le=100_000_000),
        Cli("Context length per sequence (inference).", SERVING),
        SizesWork("serving"),
    ] = None
    throughput_tokens_s: Annotated[
        float | None,
        Field(ge=1e-3, le=1e12),
        Cli("Target tokens/s (inference).", SERVING),
        SizesWork("serving"),
    ] = None
    input_tokens: Annotated[
        int | None,
        Field(gt=0, le=10_000_000, description="prompt"),
        Cli("Prompt tokens (inference).", SERVING),
        SizesWork("serving"),
    ] = None
    output_tokens: Annotated[
        int | None,
        Field(gt=0, le=10_000_000, description="generated"),
        Cli("Output tokens (inference).", SERVING),
        SizesWork("serving"),
    ] = None
    concurrency: Annotated[
        int | None,
        Field(ge=1, le=1_000_000, description="sequences in flight per replica"),
        Cli("Sequences per replica (default: best that fits).", SERVING),
        SizesWork("serving"),
    ] = None  # None: the highest-throughput concurrency that fits
    request_rate: Annotated[
        float | None,
        Field(
            ge=1e-6,
            le=1e9,
            description="inference: requests/s arriving at the deployment (sizes the replicas)",
        ),
        Cli(
            "Requests/s arriving (inference): sizes the replicas that sustain it within the "
            "latency targets; not with --concurrency.",
            SERVING,
        ),
        SizesWork("serving"),
    ] = None
    tensor_parallel: Annotated[
        int | None,
        Field(ge=1, le=64, description="GPUs per replica"),
        Cli("GPUs per replica, inside one node.", SERVING),
        SizesWork("serving"),
    ] = None
    max_ttft_ms: Annotated[
        float | None,
        Field(ge=1e-3, le=1e7, description="time to first token target"),
        Cli("Time-to-first-token target, ms (inference).", SERVING),
        SizesWork("serving"),
    ] = None  # None: the workload profile's default, if any
    max_itl_ms: Annotated[
        float | None,
        Field(ge=1e-3, le=1e7, description="inter-token latency target"),
        Cli("Inter-token latency target, ms (inference).", SERVING),
        SizesWork("serving"),
    ] = None
    percentile: Annotated[
        int | None,
        Field(
            ge=1,
            le=99,
            description="inference under a request rate: the latency targets hold for this "
            "percentile of requests (50, 90 or 99); null: 50",
        ),
        Cli(
            "Latency targets held at this percentile of requests: 50, 90 or 99 (with "
            "--request-rate; default 50).",
            SERVING,
        ),
        SizesWork("serving"),
    ] = None
    kv_precision: Annotated[
        KvPrecision | None,
        Field(description="the KV cache's format; null: fp8 with fp8/fp4 weights, else bf16"),
        Cli(
            f"KV cache format: {choice_words('kv_precision')} (default: fp8 with fp8/fp4 "
            "weights, else bf16).",
            SERVING,
        ),
        SizesWork("serving"),
    ] = None
    prefix_cache_hit_rate: Annotated[
        float | None,
        Field(
            ge=0,
            lt=1,
            description="inference: the share of prompt tokens found in the prefix cache "
            "(their prefill is skipped)",
        ),
        Cli("Share of prompt tokens served from the prefix cache, 0 to 1 (inference).", SERVING),
        SizesWork("serving"),
    ] = None
    trace: Annotated[
        list[TraceRow] | None,
        Field(
            min_length=2,
            max_length=MAX_BODY_TRACE,
            description="inference: a trace of requests replayed by the load simulation instead "
            "of Poisson arrivals of one length; its own rate unless request_rate scales its "
            "times; input and output tokens default to its means",
        ),
        Cli(
            "A trace file of requests (JSON lines or CSV of arrival_s, input_tokens, "
            "output_tokens) replayed instead of Poisson arrivals (its rate unless "
            "--request-rate scales it).",
            SERVING,
            trace_file=True,
        ),
        SizesWork("serving"),
    ] = None
    lora_adapters: Annotated[
        int | None,
        Field(
            ge=1,
            le=100_000,
            description="inference: LoRA adapters served on the base model, each sequence using "
            "one (their rank: lora_rank); their weights are paged from host memory, not held",
        ),
        Cli("Multi-LoRA serving: adapters in use, each sequence one (rank: --lora-rank).", SERVING),
        SizesWork("serving"),
    ] = None
    draft_tokens: Annotated[
        int | None,
        Field(
            ge=1,
            le=16,
            description="inference: speculative decoding, tokens drafted a step by MTP heads "
            "(one extra layer each pass) and verified together; null: none",
        ),
        Cli("Speculative decoding: tokens drafted a step (MTP heads), 1 to 16.", SERVING),
        SizesWork("serving"),
    ] = None
    acceptance_length: Annotated[
        float | None,
        Field(
            ge=1,
            le=17,
            description="inference: tokens committed a speculative step on average (the bonus "
            "token counted), at most draft_tokens + 1; null with one draft token: 1.85 "
            "(DeepSeek-V3 technical report 5.4.3)",
        ),
        Cli(
            "Speculative decoding: tokens committed a step on average (default with one draft "
            "token: 1.85, DeepSeek-V3's MTP).",
            SERVING,
        ),
        SizesWork("serving"),
    ] = None
    engine: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=ID_MAX_CHARS,
            description="inference: the serving engine (vllm, sglang, trtllm, ...) whose stored "
            "correction for the accelerator applies (advisor calibrate ingest --save); null: "
            "none",
        ),
        Cli(
            "Serving engine whose stored correction applies (advisor calibrate ingest --save).",
            SERVING,
        ),
        SizesWork("serving"),
    ] = None
    method: Annotated[
        Method,
        Field(
            description="training: every weight (full; adam8bit with 8-bit Adam states), LoRA "
            "adapters, or QLoRA (4-bit base)"
        ),
        Cli(
            f"Training: {choice_words('method')} (adam8bit: every weight, 8-bit Adam states; "
            "qlora: frozen 4-bit base + adapters).",
            WORK,
        ),
    ] = "full"
    lora_rank: Annotated[
        int,
        Field(ge=1, le=65_536, description="LoRA/QLoRA adapter rank"),
        Cli("LoRA/QLoRA adapter rank (--method lora/qlora).", WORK),
    ] = 16
    checkpoint_interval_h: Annotated[
        float | None,
        Field(ge=1e-4, le=1000, description="spot training: hours between checkpoints"),
        Cli("Spot training: hours between checkpoints (default: the workload's).", TRAINING),
    ] = None  # None: the workload profile's spot policy default

    @property
    def sized(self) -> bool:
        return self.model is not None or self.params_b is not None or self.hf_config is not None

    def work(self) -> "Work":
        """The sizing fields as the performance model's own description of the work; a model
        given as a config.json is its preset, named as its `_name_or_path` says."""
        from advisor.perf.serving_sim import Request
        from advisor.perf.trace_file import Trace
        from advisor.perf.work import Work

        names = (f.name for f in dataclasses.fields(Work) if f.name != "preset")
        fields = {name: getattr(self, name) for name in names}
        if self.trace is not None:
            trace = Trace(
                [Request(r.arrival_s, r.input_tokens, r.output_tokens) for r in self.trace]
            )
            fields["trace"] = trace
            fields["request_rate"] = self.request_rate or trace.rate_per_s
            fields["input_tokens"] = self.input_tokens or trace.input_tokens
            fields["output_tokens"] = self.output_tokens or trace.output_tokens
        preset = self.config_preset()
        if preset is not None:
            fields["model"] = preset.id
        return Work(**fields, preset=preset)

    @model_validator(mode="after")
    def _one_model(self) -> Self:
        given = [n for n in ("model", "params_b", "hf_config") if getattr(self, n) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of model, params_b or hf_config, not {' and '.join(given)}")
        return self

    @field_validator("acceptance_length")
    @classmethod
    def _accepted_of_drafts(cls, accepted: float | None, info: ValidationInfo) -> float | None:
        drafts = info.data.get("draft_tokens")
        if accepted is not None and (drafts is None or accepted > drafts + 1):
            raise PydanticCustomError(
                "acceptance_length",
                "goes with draft_tokens and is at most draft_tokens + 1 (the bonus token counted)",
            )
        if accepted is None and drafts is not None and drafts > 1:
            raise PydanticCustomError(
                "acceptance_length",
                "is needed with more than one draft token (a published acceptance is known "
                "for one MTP draft token only: 1.85, DeepSeek-V3)",
            )
        return accepted

    @field_validator("budget_usd")
    @classmethod
    def _a_budget_of_tokens(cls, budget: float | None, info: ValidationInfo) -> float | None:
        if budget is not None and info.data.get("tokens") is None:
            raise PydanticCustomError(
                "budget_of_tokens", "goes with tokens: a run's cost is the cost of its tokens"
            )
        return budget

    @field_validator("active_params_b")
    @classmethod
    def _active_of_a_size(cls, active: float | None, info: ValidationInfo) -> float | None:
        size = info.data.get("params_b")
        if active is not None and (size is None or active > size):
            raise PydanticCustomError(
                "active_params", "goes with params_b and is at most it (billions per token)"
            )
        return active

    @field_validator("hf_config")
    @classmethod
    def _a_readable_config(cls, cfg: dict[str, Any] | None) -> dict[str, Any] | None:
        if cfg is not None:
            _config_preset(cfg)  # a bad config is refused here, naming its key
        return cfg

    def model_label(self, size_words: str = "") -> str:
        """The model as a sentence names it: its preset id, its config's name, or its size."""
        preset = self.config_preset()
        if self.model is not None or preset is not None:
            return self.model or (preset.name if preset else "")
        return f"{self.params_b:g}B{size_words}"

    def config_preset(self) -> ModelPreset | None:
        """The preset `hf_config` describes (None without one)."""
        return None if self.hf_config is None else _config_preset(self.hf_config)

    @field_validator("request_rate")
    @classmethod
    def _one_load(cls, rate: float | None, info: ValidationInfo) -> float | None:
        if rate is not None and info.data.get("concurrency") is not None:
            raise ValueError(
                "the load is a rate or a concurrency, not both (a rate's concurrency follows "
                "from Little's law)"
            )
        return rate

    @field_validator("trace")
    @classmethod
    def _a_trace_is_a_rate(
        cls, trace: list[TraceRow] | None, info: ValidationInfo
    ) -> list[TraceRow] | None:
        if trace is not None and info.data.get("concurrency") is not None:
            raise ValueError("a trace is a load by its arrivals: leave concurrency out")
        if trace is not None and len({row.arrival_s for row in trace}) < 2:
            raise ValueError("the requests arrive at one instant: no rate to replay")
        return trace

    @field_validator("percentile")
    @classmethod
    def _a_reported_percentile(cls, p: int | None) -> int | None:
        if p is not None and p not in PERCENTILES:
            raise PydanticCustomError(
                "percentile", f"one of {', '.join(map(str, PERCENTILES))}, not {p}"
            )
        return p

    @field_validator("max_itl_ms")
    @classmethod
    def _itl_needs_two_tokens(cls, itl: float | None, info: ValidationInfo) -> float | None:
        if itl is not None and info.data.get("output_tokens") == 1:
            # named as the model's other rules name fields: a pydantic message reaches the API's
            # problem as it is (no field marks rendered there)
            raise PydanticCustomError(
                "one_output_token",
                "one output token has no inter-token latency; drop it or raise output_tokens",
            )
        return itl


def _config_preset(cfg: dict[str, Any]) -> ModelPreset:
    """The preset a config.json describes, named as its `_name_or_path` says; a bad config is a
    validation error naming its key."""
    from advisor.catalog.hf_config import ConfigError, preset_from_config

    name = str(cfg.get("_name_or_path") or "model-config").rsplit("/", 1)[-1]
    try:
        return preset_from_config(cfg, _preset_id(name), name, "hf_config")
    except ConfigError as e:
        raise PydanticCustomError("hf_config", f"config.json {e.field}: {e}") from None


def _preset_id(name: str) -> str:
    """A catalog-shaped id for a config's model name (lower case, letters, digits, . _ -)."""
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in name.lower()).strip("-._")
    return cleaned[:80] or "model-config"


def _sizing_fields(job: str | None = None) -> tuple[str, ...]:
    """The request fields marked SizesWork (those whose job is `job`, when given), in order."""
    return tuple(
        name
        for name, info in SizedWork.model_fields.items()
        for mark in info.metadata
        if isinstance(mark, SizesWork) and (job is None or mark.job == job)
    )


# Fields that size work from a model: without one they do nothing, and a request that gives
# them would be answered as if they were not there (`--tokens` without `--model`) ...
FROM_A_MODEL = _sizing_fields()
# ... of those, the ones only training reads (a serving plan has no tokens to process) ...
TRAINING_ONLY = _sizing_fields("training")
# ... and the serving ones a bare parameter count (no layers or heads) cannot answer.
SERVING_FIELDS = _sizing_fields("serving")


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
_GIVEN_GPUS = _given("gpus", "integer")


# A region list need name each catalog region once at most (the shipped 80 take 1,033
# characters joined): longer is refused, and the spelling is made canonical (queries.py
# canonical_region), so that a rejection's "not offered in <region>", repeated for every
# candidate a show_rejected answer lists, is never larger than the list itself (a region
# padded to 100 kB made a 3.3 MB answer).
REGION_MAX_CHARS = 2048


def _canonical_region(spec: str | None) -> str | None:
    return None if spec is None else canonical_region(spec)


class _PriceChoice(_Request):
    """Which prices count: where, and how bought."""

    region: Annotated[
        str | None,
        Field(min_length=1, max_length=REGION_MAX_CHARS),
        AfterValidator(_canonical_region),
        Cli(
            "Cloud region, e.g. us-east-1; several comma-separated (us-east-1,eu-west-1); a "
            "prefix ending in * (europe-*).",
            CONSTRAINTS,
            "-r",
        ),
    ] = None
    purchase: Annotated[
        PurchaseOption, Cli(f"{choice_words('purchase')} (either).", CONSTRAINTS, "-p")
    ] = Purchase.on_demand
    include_flagged_prices: Annotated[
        bool,
        Field(description="rank prices the catalog's sanity checks flag (left out by default)"),
        Cli(
            "Also use prices the catalog's sanity checks flag (`advisor catalog validate`).",
            CONSTRAINTS,
        ),
    ] = False


class RecommendRequest(_PriceChoice, SizedWork):
    """What to recommend hardware for. Every constraint is optional except the workload type."""

    # The contract states the rules of the validators below: model and params_b are never
    # both given, nor memory_gb with either (the model gives the memory), nor gpus (exact) with
    # gpu_count or max_gpus (the bounds it sets).
    model_config = ConfigDict(
        json_schema_extra={
            "not": {
                "anyOf": [
                    {"allOf": [_GIVEN_MODEL, _GIVEN_PARAMS]},
                    {"allOf": [_GIVEN_MEMORY, _GIVEN_MODEL]},
                    {"allOf": [_GIVEN_MEMORY, _GIVEN_PARAMS]},
                    {"allOf": [_GIVEN_GPUS, _given("gpu_count", "integer")]},
                    {"allOf": [_GIVEN_GPUS, _given("max_gpus", "integer")]},
                ]
            }
        }
    )

    memory_gb: Annotated[
        float | None,
        Field(ge=0, le=1_000_000, description="accelerator memory the job needs"),
        Cli("Accelerator memory the job needs.", CONSTRAINTS),
    ] = None
    power_budget_w: Annotated[
        float | None, Field(gt=0, le=1_000_000), Cli("Power budget in watts.", CONSTRAINTS)
    ] = None
    interconnect_gb_s: Annotated[
        float | None,
        Field(ge=0, le=100_000, description="per-GPU GPU-to-GPU bandwidth"),
        Cli("Per-GPU GPU-to-GPU bandwidth needed, GB/s.", CONSTRAINTS),
    ] = None
    provider: Annotated[
        str | None,
        Field(min_length=1, max_length=ID_MAX_CHARS),
        Cli(f"{', '.join(get_args(Provider))}: only its offerings.", CONSTRAINTS, "-P"),
    ] = None
    max_hourly_usd: Annotated[
        float | None, Field(gt=0), Cli("Budget in USD per hour.", CONSTRAINTS)
    ] = None
    objective: Annotated[
        Objective | None,
        Cli(f"{choice_words('objective')} (default: the workload's).", OUTPUT, "-o"),
    ] = None  # None = the workload profile's default
    limit: Annotated[int, Field(ge=1, le=1000), Cli("How many to show.", OUTPUT, "-n")] = 10
    each_offering: Annotated[
        bool,
        Field(
            description=(
                "list every priced offering (instance type x region x purchase option); by "
                "default each instance type appears once, at its best offering"
            )
        ),
        Cli("List every region and purchase option of a type (default: its best one).", OUTPUT),
    ] = False
    gpus: Annotated[
        int | None,
        Field(
            ge=1,
            le=100_000,
            description="exactly this many GPUs rented: gpu_count and max_gpus both this",
        ),
        Cli("Exactly this many GPUs (--gpu-count is at least).", CONSTRAINTS),
    ] = None
    show_rejected: Annotated[
        bool,
        Field(
            description="list every rejected candidate with its reasons; by default the result "
            "counts them per constraint (rejected_summary)"
        ),
        Cli("List every rejected candidate (in --json too; else counted).", OUTPUT),
    ] = False

    @model_validator(mode="before")
    @classmethod
    def _exactly(cls, data: Any) -> Any:
        """`gpus: N` is `gpu_count: N` (at least) with `max_gpus: N` (at most)."""
        gpus = data.get("gpus") if isinstance(data, dict) else None
        if not isinstance(gpus, int) or isinstance(gpus, bool):
            return data  # absent, or not a count: the field's own validation names it
        both = [n for n in ("gpu_count", "max_gpus") if data.get(n) is not None]
        if both:
            raise ValueError(f"gpus is exact: give it or {' and '.join(both)}, not both")
        return {**data, "gpu_count": gpus, "max_gpus": gpus}

    @model_validator(mode="after")
    def _memory_or_model(self) -> Self:
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

    instance_type: Annotated[
        str | None,
        Field(min_length=1, max_length=ID_MAX_CHARS),
        Cli("Priced instance type id.", HARDWARE, "-i"),
    ] = None
    accelerator: Annotated[
        str | None,
        Field(min_length=1, max_length=ID_MAX_CHARS, description="GPU, without a price"),
        Cli("Accelerator id (no price).", HARDWARE, "-a"),
    ] = None
    gpus_per_node: Annotated[
        int | None,
        Field(
            ge=1,
            le=64,
            description="with accelerator: GPUs per node (default: its reference system's, else 8)",
        ),
        Cli(
            "GPUs per node with --accelerator (default: its reference system's, else 8).",
            HARDWARE,
        ),
    ] = None
    # The fields an estimate reads its own way: the GPUs of the one deployment or job, and the
    # region its price is read in.
    gpu_count: Annotated[
        int | None,
        Field(ge=0, le=100_000, description="at least this many"),
        Cli(
            "GPUs of the deployment or job (with --accelerator: on nodes of min(this, the "
            "GPUs per node)); with --instance-type, whole nodes are rented.",
            HARDWARE,
            "-g",
        ),
    ] = None
    region: Annotated[
        str | None,
        Field(min_length=1, max_length=REGION_MAX_CHARS),
        Cli("Price region.", HARDWARE, "-r"),
    ] = None

    @model_validator(mode="after")
    def _one_kind_of_hardware(self) -> Self:
        if self.instance_type is not None and self.accelerator is not None:
            raise ValueError("give either instance_type or accelerator, not both")
        if self.max_gpus is not None and not self.sized:
            # an estimate is of the GPUs it names; the limit shapes a plan sized from a model
            raise ValueError("max_gpus sizes the work from a model: give model or params_b")
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
