"""The work the performance model sizes, in its own words: a frozen description with the same
field names as the requests' JSON (so an error names the field the API and the CLI each render
their way), built from a request by `advisor.request.SizedWork.work`, never the request itself."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.catalog.models import ModelPreset
from advisor.perf.trace_file import Trace

# Without input / output tokens: 1000 in, 1000 out, the shape of the TensorRT-LLM
# perf-overview rows the inference model is calibrated on (tests/data/published.yaml).
DEFAULT_INPUT_TOKENS = 1000
DEFAULT_OUTPUT_TOKENS = 1000
DEFAULT_SEQ_LEN = 4096
# Tensor-parallel degrees considered: powers of two (attention heads and MLP widths split evenly).
TP_DEGREES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True, slots=True)
class Work:
    """One workload sized from a model preset (`model`) or a bare size (`params_b`)."""

    workload: str
    model: str | None = None
    params_b: float | None = None
    active_params_b: float | None = None  # with params_b: a mixture of experts' per token
    gpu_count: int | None = None  # at least this many
    tokens: float | None = None  # training tokens
    zero_stage: int | None = None  # training; None: the planner picks ZeRO-1 or ZeRO-3
    global_batch_tokens: int | None = None  # training; None: by model size (perf/training.py)
    seq_len: int | None = None
    batch: int | None = None  # micro-batch / concurrent sequences; None: the profile's
    recompute: bool | None = None  # None: as needed (planning/training_run.py)
    dualpipe: bool | None = None  # MoE training: all-to-alls under compute (DualPipe)
    precision: str = "bf16"  # of the served weights
    context_tokens: int | None = None
    throughput_tokens_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    concurrency: int | None = None  # sequences in flight per replica
    request_rate: float | None = None  # requests/s arriving at the deployment
    tensor_parallel: int | None = None
    max_ttft_ms: float | None = None
    max_itl_ms: float | None = None
    method: str = "full"  # full, adam8bit, lora or qlora (sizing.METHODS)
    lora_rank: int = 16
    deadline_days: float | None = None
    max_gpus: int | None = None
    checkpoint_interval_h: float | None = None
    percentile: int | None = None  # serving targets held at this percentile; None: p50
    kv_precision: str | None = None  # None: follows the weights (perf/inference.kv_precision_of)
    prefix_cache_hit_rate: float | None = None  # share of prompt tokens served from the cache
    trace: Trace | None = None  # a trace of requests replayed instead of Poisson arrivals
    lora_adapters: int | None = None  # multi-LoRA serving: adapters in use (rank: lora_rank)
    draft_tokens: int | None = None  # speculative decoding: tokens drafted a step (MTP heads)
    acceptance_length: float | None = None  # tokens committed a speculative step on average
    engine: str | None = None  # the serving engine whose stored correction applies (if any)
    preset: ModelPreset | None = None  # a model given by its config.json (`model` is its id)

    def io_tokens(self) -> tuple[int, int]:
        """Input and output tokens: as asked; else a context split with at most the default
        output; else the defaults."""
        if self.input_tokens or self.output_tokens or not self.context_tokens:
            return (
                self.input_tokens or DEFAULT_INPUT_TOKENS,
                self.output_tokens or DEFAULT_OUTPUT_TOKENS,
            )
        out = max(1, min(DEFAULT_OUTPUT_TOKENS, self.context_tokens // 2))
        return max(1, self.context_tokens - out), out
