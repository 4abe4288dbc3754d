"""The multi-node answer beside a tensor-parallel estimate that cannot hold a model in one node:
for a mixture of experts the expert-parallel layout advisor/perf/moe_serving.py finds for the
GPUs asked for, for a dense model TP inside each node and PP across them
(advisor/perf/pipeline_serving.py)."""

from __future__ import annotations

from advisor.catalog.models import Accelerator
from advisor.errors import InputError
from advisor.perf.moe_serving import EpLayout, EpModel, best_layout
from advisor.perf.pipeline_serving import PipelineServing
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
    if not shape.experts:
        return pipeline_note(shape, acc, precision, nodes, io_tokens, max_itl_ms)
    if gpus <= per_node or gpus % per_node or not network_gbps:
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


def pipeline_note(
    shape: Shape,
    acc: Accelerator,
    precision: str,
    nodes: tuple[int, int, float, float],
    io_tokens: tuple[int, int],
    max_itl_ms: float | None,
) -> str | None:
    """TP over each node and PP over the nodes of the GPUs asked for: its batch and figures;
    None on one node, without a known network or when no batch fits the target."""
    gpus, per_node, link_gb_s, network_gbps = nodes
    if gpus <= per_node or gpus % per_node or not network_gbps:
        return None
    stages = gpus // per_node
    network = network_gbps / per_node / BITS_PER_BYTE
    try:
        pp = PipelineServing.build(
            shape, acc, (per_node, link_gb_s, network), stages, io_tokens, precision
        )
        got = pp.best(max_itl_ms / 1e3 if max_itl_ms is not None else None)
    except InputError:
        return None
    if got is None:
        return None
    per_micro, itl_s = got
    return (
        f"pipeline parallelism serves it: TP {per_node} in each node x PP {stages} across "
        f"nodes, {stages} micro-batches of {per_micro} sequences, ITL {itl_s * 1e3:.1f} ms, "
        f"{pp.tokens_per_gpu_s(per_micro):,.0f} output tokens/s per GPU "
        "(advisor/perf/pipeline_serving.py)"
    )
