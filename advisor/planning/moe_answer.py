"""The expert-parallel answer beside a tensor-parallel estimate that cannot hold a mixture of
experts in one node: the layout advisor/perf/moe_serving.py finds for the GPUs asked for."""

from __future__ import annotations

from advisor.catalog.models import Accelerator
from advisor.errors import InputError
from advisor.perf.moe_serving import EpLayout, EpModel, best_layout
from advisor.perf.sizing import Shape

BITS_PER_BYTE = 8


def expert_parallel_note(
    shape: Shape,
    acc: Accelerator,
    precision: str,
    nodes: tuple[int, int, float, float],
    io_tokens: tuple[int, int],
    max_itl_ms: float | None,
) -> str | None:
    """`nodes` is (GPUs asked for, GPUs per node, GPU link GB/s, network Gbit/s per node). The
    best EP layout over more than one node and its figures; None when the model is not a
    mixture of experts, the GPUs fit in one node, no network is known or no layout holds it."""
    gpus, per_node, link_gb_s, network_gbps = nodes
    if not shape.experts or gpus <= per_node or gpus % per_node or not network_gbps:
        return None
    base = EpLayout(gpus, per_node, 1, network_gbps / per_node / BITS_PER_BYTE, link_gb_s)
    target_s = max_itl_ms / 1e3 if max_itl_ms is not None else None
    try:
        got = best_layout(shape, acc, precision, base, io_tokens, target_s)
    except InputError:
        return None
    if got is None:
        return None
    layout, per_rank, itl_s = got
    model = EpModel(shape, acc, precision, layout, *io_tokens)
    return (
        f"expert parallelism serves it: {layout.describe()}, {per_rank} sequences per rank, "
        f"ITL {itl_s * 1e3:.1f} ms, {model.tokens_per_gpu_s(per_rank):,.0f} output tokens/s "
        "per GPU (advisor/perf/moe_serving.py; compute and all-to-all not overlapped)"
    )
