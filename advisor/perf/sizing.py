"""Workload sizing: memory, compute, time and cost from a model's shape. Pure functions.

Every result is a list of Figures: a name, a value with its unit, and the formula with the numbers
that produced it, so a planner can check each step. Sources:
- ZeRO (Rajbhandari et al. 2019): mixed-precision Adam keeps 16 bytes per parameter (2 weights,
  2 gradients, 12 optimizer: fp32 master weights, momentum, variance); stages 1/2/3 shard the
  optimizer states / + gradients / + parameters over the data-parallel ranks (FSDP = stage 3).
- Korthikanti et al. 2022 (Reducing Activation Recomputation): activations of one transformer layer
  in 16-bit are s·b·h·(34 + 5·a·s/h) bytes; with full recomputation only the layer input, 2·s·b·h.
- Kaplan et al. 2020: training compute 6·N·D (forward 2·N·D + backward 4·N·D); recomputing the
  forward pass adds 2·N·D (8·N·D). Inference: prefill 2·N FLOPs per token; decode reads every
  weight and the KV cache once per generated token, so it is bound by memory bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass as pydantic_dataclass

from advisor.catalog.models import ModelPreset
from advisor.errors import InputError

GB = 1e9
BYTES_PER_WEIGHT = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
TRAINING_STATE_BYTES = 16  # 2 weights + 2 gradients + 12 optimizer (ZeRO paper, section 3)


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class Figure:
    """One step of an estimate: what it is, its value and unit, and the formula with numbers."""

    name: str
    value: float
    unit: str
    formula: str


@dataclass(frozen=True)
class Shape:
    """What sizing needs to know of a model; layers etc. are None for a bare parameter count."""

    name: str
    params: float  # total
    active_params: float  # per token (= params unless mixture of experts)
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    sliding_window: int | None = None  # tokens of K/V each layer keeps (None: all of them)
    mla_kv_dim: int | None = None  # MLA: values cached per layer and token (latent + RoPE key)

    @classmethod
    def of(cls, preset: ModelPreset) -> Shape:
        active = (preset.active_params_b or preset.params_b) * 1e9
        return cls(
            preset.id,
            preset.params_b * 1e9,
            active,
            preset.layers,
            preset.hidden_size,
            preset.attention_heads,
            preset.kv_heads,
            preset.head_size,
            preset.sliding_window,
            (preset.kv_lora_rank or 0) + (preset.qk_rope_head_dim or 0) or None,
        )

    @classmethod
    def bare(cls, params_b: float) -> Shape:
        return cls(f"{params_b:g}B parameters", params_b * 1e9, params_b * 1e9)

    def need_layers(self, what: str) -> tuple[int, int, int, int, int]:
        if None in (self.layers, self.hidden, self.heads, self.kv_heads, self.head_dim):
            raise InputError(
                f"{what} needs the model's shape: give --model (a preset), not --params-b"
            )
        assert self.layers and self.hidden and self.heads and self.kv_heads and self.head_dim
        return self.layers, self.hidden, self.heads, self.kv_heads, self.head_dim


def zero_state_bytes_per_param(stage: int, ranks: int) -> tuple[float, str]:
    """Bytes of weights + gradients + optimizer states per parameter on one GPU."""
    n = ranks
    if stage == 0:
        return 16.0, "2 + 2 + 12"
    if stage == 1:
        return 4 + 12 / n, f"2 + 2 + 12/{n}"
    if stage == 2:
        return 2 + 14 / n, f"2 + (2 + 12)/{n}"
    if stage == 3:
        return 16 / n, f"(2 + 2 + 12)/{n}"
    raise InputError(f"ZeRO stage {stage} does not exist; valid: 0, 1, 2, 3 (3 = FSDP)")


def training_memory(
    shape: Shape,
    *,
    zero_stage: int,
    ranks: int,
    seq_len: int | None = None,
    micro_batch: int = 1,
    recompute: bool = True,
) -> list[Figure]:
    """Memory per GPU for mixed-precision Adam training, data parallel over `ranks` GPUs."""
    per_param, expr = zero_state_bytes_per_param(zero_stage, ranks)
    states = shape.params * per_param / GB
    out = [
        Figure(
            "model_states_per_gpu_gb",
            states,
            "GB",
            f"{shape.params:.4g} params x ({expr}) bytes (ZeRO stage {zero_stage}, {ranks} GPUs)",
        )
    ]
    if seq_len:
        layers, hidden, heads, _, _ = shape.need_layers("activation memory")
        s, b, h, a = seq_len, micro_batch, hidden, heads
        if recompute:
            act = 2 * s * b * h * layers / GB
            formula = f"2 x s {s} x b {b} x h {h} x {layers} layers (full recomputation)"
        else:
            act = s * b * h * (34 + 5 * a * s / h) * layers / GB
            formula = f"s {s} x b {b} x h {h} x (34 + 5 x a {a} x s / h) x {layers} layers"
        out.append(Figure("activations_per_gpu_gb", act, "GB", formula))
    total = sum(f.value for f in out)
    out.append(Figure("memory_per_gpu_gb", total, "GB", " + ".join(f.name for f in out)))
    return out


def kv_cache_bytes_per_token(
    shape: Shape, kv_precision: str = "bf16", context_tokens: int | None = None
) -> Figure:
    """KV-cache bytes per token of context. Grouped-query attention caches K and V of every KV
    head in every layer; multi-head latent attention (DeepSeek-V2 arXiv:2405.04434 section 2.1,
    V3 arXiv:2412.19437 section 2.1.1) caches one latent of kv_lora_rank plus the decoupled RoPE
    key per layer. With a sliding window (Mistral 7B, arXiv:2310.06825 section 2: a rolling
    buffer of W tokens) a sequence of `context_tokens` > W keeps only W tokens, so the bytes per
    token of context are the cached bytes x W / context."""
    layers, _, _, kv_heads, head_dim = shape.need_layers("the KV cache")
    per_elem = BYTES_PER_WEIGHT[kv_precision]
    if shape.mla_kv_dim:
        value = layers * shape.mla_kv_dim * per_elem
        formula = (
            f"{layers} layers x {shape.mla_kv_dim} MLA latent + RoPE-key values x "
            f"{per_elem:g} bytes ({kv_precision})"
        )
    else:
        value = 2 * layers * kv_heads * head_dim * per_elem
        formula = (
            f"2 (K and V) x {layers} layers x {kv_heads} KV heads x {head_dim} head dim x "
            f"{per_elem:g} bytes ({kv_precision})"
        )
    window = shape.sliding_window
    if window and context_tokens and context_tokens > window:
        value *= window / context_tokens
        formula += f" x sliding window {window} / {context_tokens} context tokens"
    return Figure("kv_cache_bytes_per_token", value, "bytes", formula)


def inference_memory(
    shape: Shape,
    *,
    precision: str,
    context_tokens: int = 0,
    batch: int = 1,
    kv_precision: str = "bf16",
    overhead_fraction: float = 0.10,
) -> list[Figure]:
    """Total memory to serve: weights + KV cache for `batch` sequences of `context_tokens`."""
    if precision not in BYTES_PER_WEIGHT:
        raise InputError(f"unknown precision {precision!r}; valid: {', '.join(BYTES_PER_WEIGHT)}")
    wb = BYTES_PER_WEIGHT[precision]
    weights = shape.params * wb / GB
    out = [
        Figure(
            "weights_gb", weights, "GB", f"{shape.params:.4g} params x {wb:g} bytes ({precision})"
        )
    ]
    if context_tokens:
        per_token = kv_cache_bytes_per_token(shape, kv_precision, context_tokens)
        out.append(per_token)
        kv = per_token.value * context_tokens * batch / GB
        out.append(
            Figure(
                "kv_cache_gb",
                kv,
                "GB",
                f"{per_token.value:,.0f} bytes x {context_tokens} tokens x batch {batch}",
            )
        )
    else:
        kv = 0.0
    overhead = overhead_fraction * (weights + kv)
    out.append(
        Figure(
            "runtime_overhead_gb",
            overhead,
            "GB",
            f"{overhead_fraction:.0%} of weights + KV (CUDA context, activations, allocator)",
        )
    )
    out.append(
        Figure("memory_total_gb", weights + kv + overhead, "GB", "weights + KV cache + overhead")
    )
    return out


def training_flops(shape: Shape, tokens: float, recompute: bool = False) -> Figure:
    k = 8 if recompute else 6
    flops = k * shape.active_params * tokens
    why = "forward + backward + recomputed forward" if recompute else "forward 2ND + backward 4ND"
    return Figure(
        "training_flops",
        flops,
        "FLOP",
        f"{k} x N {shape.active_params:.4g} x D {tokens:.4g} tokens ({why})",
    )


def compute_hours(flops: float, gpus: int, peak_tflops: float, efficiency: float) -> Figure:
    seconds = flops / (gpus * peak_tflops * 1e12 * efficiency)
    return Figure(
        "hours",
        seconds / 3600,
        "h",
        f"{flops:.4g} FLOP / ({gpus} GPUs x {peak_tflops:g} TFLOP/s dense peak x "
        f"{efficiency:.2f} efficiency) / 3600",
    )


def min_gpus_for(per_gpu_gb: float, gpu_memory_gb: float, usable: float = 0.9) -> int:
    """GPUs needed to hold `per_gpu_gb`-style totals, keeping 10% headroom per GPU."""
    return max(1, math.ceil(per_gpu_gb / (gpu_memory_gb * usable) - 1e-9))
