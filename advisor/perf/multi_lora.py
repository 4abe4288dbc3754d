"""Serving many LoRA adapters on one base model: what a forward pass adds.

Batched LoRA kernels (Punica's SGMV, Chen et al. 2023; S-LoRA, Sheng et al. MLSys 2024) run each
sequence's adapter beside the shared base GEMMs: every linear layer W (in x out) gains
x A B with A in x r and B r x out. A pass over B sequences of A adapters, each sequence's adapter
drawn uniformly, reads the distinct adapters among them, A (1 - (1 - 1/A)^B) by linearity of
expectation (the estimate inference.expected_experts makes for experts), and does
2 r (in + out) FLOPs per token per layer. The extra time is max(adapter bytes / bandwidth,
FLOPs / peak), added to the pass (a separate kernel in Punica and S-LoRA).

Adapters are taken on every linear layer of attention and the MLP ("all-linear"): q, k, v, o,
gate, up, down.
"""

from __future__ import annotations

from advisor.errors import InputError
from advisor.perf.sizing import Shape


def lora_width(shape: Shape) -> int:
    """Sum over one layer's linear layers of (in + out): what r multiplies."""
    _, hidden, heads, kv_heads, head_dim = shape.need_layers("multi-LoRA serving")
    if shape.intermediate is None:
        raise InputError(f"{shape.name} has no MLP width for LoRA adapters", field="model")
    q, kv = heads * head_dim, kv_heads * head_dim
    attention = (hidden + q) + 2 * (hidden + kv) + (q + hidden)
    mlp = (3 if shape.gated_mlp else 2) * (hidden + shape.intermediate)
    return attention + mlp


def distinct_adapters(adapters: int, sequences: int) -> float:
    """Expected distinct adapters among `sequences` each using one of `adapters` uniformly."""
    return adapters * (1 - (1 - 1 / adapters) ** sequences)


def lora_pass_s(
    shape: Shape,
    rank: int,
    adapters: int,
    batch: tuple[int, float],
    bytes_per_weight: float,
    rates: tuple[float, float],
) -> float:
    """Seconds multi-LoRA adds to a pass over `batch` = (sequences, tokens) on a device of
    `rates` = (bandwidth bytes/s, peak FLOP/s) (module doc)."""
    if rank < 1 or adapters < 1:
        raise InputError("LoRA rank and adapters must be at least 1", field="lora_rank")
    sequences, tokens = batch
    bandwidth, peak = rates
    layers = shape.need_layers("multi-LoRA serving")[0]
    per_adapter = rank * lora_width(shape) * layers * bytes_per_weight
    read = distinct_adapters(adapters, sequences) * per_adapter
    flops = 2 * rank * lora_width(shape) * layers * tokens
    return max(read / bandwidth, flops / peak)
