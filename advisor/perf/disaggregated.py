"""Aggregated against disaggregated (xPyD) serving of an MoE model on the same GPUs.

Aggregated: every GPU runs one expert-parallel deployment (perf/moe_serving.py) whose decode
steps carry the prompts admitted with them (I / O prompt tokens per decode token), so the
inter-token latency pays for prefill and the batch within an ITL target is smaller.

Disaggregated (DistServe, Zhong et al. OSDI 2024; Splitwise, Patel et al. ISCA 2024; the
DeepSeek-V3 and SGLang deployments): whole nodes of prefill and of decode, each its own EP
deployment. The prefill pool computes prompts in chunks with no decode in its passes; each
prompt's KV cache (I tokens x the KV bytes per token, one copy) crosses the network to a decode
node at the prefill GPUs' network share; the decode pool's steps carry no prompts. The rate a
split sustains is the smaller of the prefill pool's prompts per second, the network's KV
transfers per second and the decode pool's completions per second within the ITL target; the
split of nodes with the highest rate is taken.

The answer compares output tokens per second per GPU at the ITL target, and says why the winner
wins: the prompt tokens an aggregated step carries against the capacity a split of whole nodes
leaves unused in one pool (and the KV it moves, when that is the bound).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from advisor.catalog.models import Accelerator
from advisor.perf.moe_serving import (
    DEFAULT_KV_CACHE,
    NETWORK_A2A_EFFICIENCY,
    EpLayout,
    EpModel,
    KvCache,
    best_layout,
)
from advisor.perf.sizing import Shape, kv_cache_bytes_per_token
from advisor.units import GB

# Prompt tokens a prefill rank computes per pass: SGLang's default chunked-prefill size for
# large GPUs (server_args.py, chunked_prefill_size 8192 at 80 GB and above).
PREFILL_CHUNK_TOKENS = 8192


@dataclass(frozen=True, slots=True)
class Served:
    """One way of serving on the GPUs: the request rate it sustains within the ITL target and
    the figures that set it."""

    kind: str  # "aggregated" or "disaggregated"
    gpus: int
    requests_s: float
    itl_s: float
    output_tokens_per_gpu_s: float
    detail: str


@dataclass(frozen=True, slots=True)
class Comparison:
    aggregated: Served | None
    disaggregated: Served | None

    @property
    def winner(self) -> Served | None:
        options = [s for s in (self.aggregated, self.disaggregated) if s is not None]
        return max(options, key=lambda s: s.requests_s, default=None)

    def why(self) -> str:
        win = self.winner
        if win is None:
            return "neither layout holds the model within the ITL target"
        lose = self.disaggregated if win is self.aggregated else self.aggregated
        if lose is None and win.kind == "aggregated":
            return (
                "aggregated: no split into whole prefill and decode nodes holds the weights in "
                "both pools within the ITL target"
            )
        if lose is None:
            return "disaggregated: the GPUs as one deployment miss the ITL target"
        gain = win.requests_s / lose.requests_s
        if win.kind == "disaggregated":
            return (
                f"disaggregated serves {gain:.2f}x the requests: its decode steps carry no "
                f"prompt tokens, so more sequences fit in each step within the ITL target "
                f"({win.detail}); aggregated: {lose.detail}"
            )
        return (
            f"aggregated serves {gain:.2f}x the requests: whole nodes split between prefill and "
            f"decode bound the rate by one pool while the other has capacity to spare "
            f"({lose.detail}); aggregated: {win.detail}"
        )


def aggregated(
    shape: Shape,
    acc: Accelerator,
    precision: str,
    base: EpLayout,
    io_tokens: tuple[int, int],
    max_itl_s: float,
    cache: KvCache = DEFAULT_KV_CACHE,
) -> Served | None:
    """All GPUs one EP deployment with prompts packed in its steps, its best attention layout."""
    got = best_layout(shape, acc, precision, base, io_tokens, max_itl_s, cache)
    if got is None:
        return None
    layout, per_rank, itl = got
    inp, out = io_tokens
    sequences = per_rank * layout.dp_ranks
    rate = sequences / (out * itl)  # each sequence takes O steps of ITL
    return Served(
        "aggregated",
        layout.gpus,
        rate,
        itl,
        rate * out / layout.gpus,
        f"{layout.describe()}, {per_rank} sequences per rank, {inp / out:g} prompt tokens per "
        f"decode token in every step, ITL {itl * 1e3:.1f} ms",
    )


def prefill_requests_s(model: EpModel) -> float:
    """Prompts per second a prefill pool computes: chunks of PREFILL_CHUNK_TOKENS per rank."""
    chunk = PREFILL_CHUNK_TOKENS
    seconds = model.forward(0, chunk).seconds
    return model.layout.dp_ranks * chunk / seconds / model.inp


def kv_transfer_requests_s(
    shape: Shape, kv_precision: str, layout: EpLayout, inp: int, over_nvlink: bool = False
) -> float:
    """Prompts' KV caches per second the prefill GPUs' network shares carry to decode nodes;
    `over_nvlink`, both pools inside one NVLink domain (an NVL72 rack): one direction of each
    GPU's link instead, at the same achieved share."""
    kv = kv_cache_bytes_per_token(shape, kv_precision, inp).value * inp
    per_gpu = layout.nvlink_gb_s / 2 if over_nvlink else layout.network_gb_s
    return layout.gpus * per_gpu * NETWORK_A2A_EFFICIENCY * GB / kv


def disaggregated(
    shape: Shape,
    acc: Accelerator,
    precision: str,
    base: EpLayout,
    io_tokens: tuple[int, int],
    max_itl_s: float,
    cache: KvCache = DEFAULT_KV_CACHE,
) -> Served | None:
    """The best split of whole nodes into a prefill and a decode pool (module doc)."""
    g = base.gpus_per_node
    nodes = base.gpus // g
    inp, out = io_tokens
    best: Served | None = None
    for p_nodes in range(1, nodes):
        pre = _pool(base, p_nodes * g)
        dec = _pool(base, (nodes - p_nodes) * g)
        if not _holds(shape, pre) or not _holds(shape, dec):
            continue
        prefill = EpModel(shape, acc, precision, pre, inp, out, False, cache)
        decode = EpModel(shape, acc, precision, dec, inp, out, False, cache)
        got = decode.best(max_itl_s)
        if got is None or prefill.max_sequences_per_rank() < 1:
            continue
        per_rank, itl = got
        limits = {
            "prefill": prefill_requests_s(prefill),
            "KV transfer": kv_transfer_requests_s(
                shape, prefill.kv_precision, pre, inp, base.on_nvlink == base.gpus
            ),
            "decode": per_rank * dec.dp_ranks / (out * itl),
        }
        bound = min(limits, key=lambda name: limits[name])
        rate = limits[bound]
        if best is None or rate > best.requests_s:
            best = Served(
                "disaggregated",
                base.gpus,
                rate,
                itl,
                rate * out / base.gpus,
                f"{p_nodes} prefill node(s) + {nodes - p_nodes} decode node(s), decode "
                f"{per_rank} sequences per rank at ITL {itl * 1e3:.1f} ms, bound by {bound} ("
                + ", ".join(f"{k} {v:.1f} req/s" for k, v in limits.items())
                + ")",
            )
    return best


def _pool(base: EpLayout, gpus: int) -> EpLayout:
    return replace(base, gpus=gpus, attention_tp=1)


def _holds(shape: Shape, layout: EpLayout) -> bool:
    return layout.gpus <= (shape.experts or 0)


def compare(
    shape: Shape,
    acc: Accelerator,
    precision: str,
    base: EpLayout,
    io_tokens: tuple[int, int],
    max_itl_s: float,
    cache: KvCache = DEFAULT_KV_CACHE,
) -> Comparison:
    """Aggregated and disaggregated serving of the same GPUs at the same ITL target."""
    return Comparison(
        aggregated(shape, acc, precision, base, io_tokens, max_itl_s, cache),
        disaggregated(shape, acc, precision, base, io_tokens, max_itl_s, cache),
    )
