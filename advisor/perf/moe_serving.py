"""Serving a mixture-of-experts model with expert parallelism (EP) within and across nodes.

The layout (DeepSeek-V3 technical report section 3.4.2, "Decoding"; SGLang's large-scale EP
deployment, lmsys.org blog 2025-05-05): the routed experts are spread over every GPU of the
deployment (EP = GPUs, ceil(E / EP) expert slots per GPU, the extra slots holding redundant
copies of hot experts), and attention runs data-parallel: DP ranks of `attention_tp` GPUs inside
one node, each holding the dense part of the model (attention, shared experts, dense layers,
embeddings) and its own sequences' KV cache. With MLA, attention TP 1 keeps one copy of the KV
latent per sequence instead of TP copies (sizing.kv_copies): DP attention multiplies the KV
capacity by the TP degree it replaces.

One forward pass per GPU, over b decode sequences per DP rank with the b x I / O prompt tokens
packed into it (continuous batching, as in perf/inference.py), t = b (1 + I / O) / attention_tp
tokens per GPU and T = GPUs x t tokens over the deployment:

- dense GEMMs: max(dense weights / TP / bandwidth, 2 x dense active params x t / peak);
- expert GEMMs: each GPU computes T x k / EP token-expert pairs, times the expert load imbalance
  (the busiest GPU sets the pace), and reads the distinct experts of its slots those tokens pick
  (inference.expected_experts over T tokens);
- attention: the decode KV reads and the attention FLOPs of its own sequences (the same terms as
  perf/inference.py);
- dispatch and combine (all-to-all) per layer: each token goes to k experts, FP8 out and BF16
  back (DeepEP's decoding setting); with uniform routing (EP - 1) / EP of the pairs leave the GPU,
  (EP - g) / EP leave the node of g GPUs over its network share, the rest stay on NVLink (g is
  every GPU of a deployment inside one NVLink domain larger than a node: an NVL72 rack); the
  slower of the two paths at its achieved bandwidth, plus a latency per call; not overlapped
  with compute (two-batch overlap would hide part of it: this is the conservative bound);
- the per-layer fixed time of perf/inference.py.

Memory per GPU: dense weights / TP + slots x one expert's weights + the KV of b sequences of
I + O tokens x kv_copies / TP within the usable memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from advisor.catalog.models import Accelerator
from advisor.errors import InputError
from advisor.perf.headroom import usable_memory_gb
from advisor.perf.inference import (
    KERNEL_LAUNCH_S,
    KERNELS_PER_LAYER,
    MOE_EXTRA_KERNELS,
    UNEXPLAINED_LAYER_S,
    bandwidth_efficiency,
    compute_efficiency,
    expected_experts,
    kv_precision_of,
    link_bus_gb_s,
)
from advisor.perf.precision import ComputePrecision, compute_precision
from advisor.perf.sizing import BYTES_PER_WEIGHT, Shape, kv_cache_bytes_per_token, kv_copies
from advisor.units import GB, TERA

# The share of a GPU's NIC an all-to-all reaches across nodes: DeepEP README (github.com/
# deepseek-ai/DeepEP, "Normal kernels with NVLink and RDMA forwarding", H800 with a 400 Gb/s CX7
# per GPU, ~50 GB/s): 43 GB/s bottleneck bandwidth at EP 16, 51-58 at EP 32-64; the EP 16 figure.
NETWORK_A2A_EFFICIENCY = 43 / 50
# Fixed time of one dispatch or combine call. ESTIMATED from the same README's low-latency
# kernels: dispatch at EP 8 of 128 tokens x 8 experts x 7,168 FP8 bytes (7.3 MB) takes 77 us, of
# which 48 us is the transfer at the 153 GB/s its normal kernels reach on NVLink: ~30 us.
A2A_LATENCY_S = 30e-6
DISPATCH_BYTES = 1  # FP8 dispatch (DeepEP decoding setting)
COMBINE_BYTES = 2  # BF16 combine
# The busiest GPU's token-expert pairs over the mean. ESTIMATED, a stated factor: DeepSeek-V3
# serves with redundant copies of the hottest experts rebalanced periodically (technical report
# section 3.4.2, EPLB) to bring GPUs near the mean; 1.2 leaves the residual skew. Stated in every
# answer, and an input.
EXPERT_IMBALANCE = 1.2

# An MoE layer's fixed time, as advisor/perf/inference.py counts it: its kernels' launches and
# the per-layer time no GPU cost explains.
LAYER_FIXED_S = (KERNELS_PER_LAYER + MOE_EXTRA_KERNELS) * KERNEL_LAUNCH_S + UNEXPLAINED_LAYER_S


@dataclass(frozen=True, slots=True)
class EpLayout:
    """Where the pieces run: `gpus` GPUs in nodes of `gpus_per_node`, experts over all of them,
    attention in DP ranks of `attention_tp` GPUs of one node."""

    gpus: int
    gpus_per_node: int
    attention_tp: int = 1
    network_gb_s: float = 50.0  # one GPU's share of its node's scale-out network, one way
    nvlink_gb_s: float = 900.0  # the catalog's per-GPU link, both directions
    imbalance: float = EXPERT_IMBALANCE
    # GPUs one NVLink switch fabric reaches beyond a node (GB200/GB300 NVL72: 72 over 18 trays
    # of 4); 0: a node's own
    domain_gpus: int = 0

    @property
    def nodes(self) -> int:
        return math.ceil(self.gpus / self.gpus_per_node)

    @property
    def on_nvlink(self) -> int:
        """GPUs of the deployment that reach each other over NVLink: a node's, or the whole
        NVLink domain's (every GPU of a deployment inside one NVL72 rack)."""
        return min(self.gpus, max(self.gpus_per_node, self.domain_gpus))

    @property
    def dp_ranks(self) -> int:
        return self.gpus // self.attention_tp

    def describe(self) -> str:
        attention = (
            "DP attention" if self.attention_tp == 1 else f"attention TP {self.attention_tp}"
        )
        fabric = (
            f" in one NVLink domain of {self.domain_gpus} GPUs"
            if self.nodes > 1 and self.on_nvlink == self.gpus
            else ""
        )
        return (
            f"EP {self.gpus} over {self.nodes} node(s) of {self.gpus_per_node}{fabric}, "
            f"{attention} x {self.dp_ranks} ranks, expert imbalance {self.imbalance:g}"
        )


def check_layout(layout: EpLayout, experts: int) -> None:
    """A layout that can run: attention TP divides a node and the GPUs; experts over every GPU;
    else InputError naming the field."""
    tp, g = layout.attention_tp, layout.gpus_per_node
    if tp < 1 or g % tp or layout.gpus % tp:
        raise InputError(
            f"attention tensor-parallel degree {tp} must divide the {g} GPUs of a node and the "
            f"{layout.gpus} GPUs",
            field="tensor_parallel",
        )
    if layout.gpus > experts:
        raise InputError(
            f"expert parallelism over {layout.gpus} GPUs leaves GPUs without one of the "
            f"{experts} experts",
            field="gpus",
        )
    if layout.imbalance < 1:
        raise InputError("expert imbalance must be at least 1 (the busiest GPU)", "imbalance")


@dataclass(frozen=True, slots=True)
class EpStep:
    """One forward pass on the busiest GPU, by part (seconds)."""

    dense_s: float
    experts_s: float
    attention_s: float
    all_to_all_s: float
    fixed_s: float
    sequences: int  # decode sequences of the deployment

    @property
    def seconds(self) -> float:
        return self.dense_s + self.experts_s + self.attention_s + self.all_to_all_s + self.fixed_s


@dataclass(frozen=True, slots=True)
class KvCache:
    """The KV cache as a request asks it: its format (None: the weights' rule,
    kv_precision_of) and the share of prompt tokens a prefix cache already holds, which a
    prefill does not compute again (advisor/perf/inference.py reads both the same way)."""

    precision: str | None = None
    prefix_hit_rate: float = 0.0


DEFAULT_KV_CACHE = KvCache()  # the weights' format rule, no prefix cache


class EpModel:
    """One MoE model on one EP layout serving I-token prompts and O-token outputs."""

    def __init__(
        self,
        shape: Shape,
        acc: Accelerator,
        precision: str,
        layout: EpLayout,
        input_tokens: int,
        output_tokens: int,
        packed_prefill: bool = True,
        cache: KvCache = DEFAULT_KV_CACHE,
    ) -> None:
        if not shape.experts or not shape.experts_per_token:
            raise InputError(f"{shape.name} is not a mixture of experts", field="model")
        check_layout(layout, shape.experts)
        self.layers, self.hidden, self.heads, _, self.head_dim = shape.need_layers(
            "expert parallelism"
        )
        cp = compute_precision(acc, precision)
        if not isinstance(cp, ComputePrecision):
            raise InputError(cp.reason, field="precision")
        self.shape, self.acc, self.layout = shape, acc, layout
        self.inp, self.out = input_tokens, output_tokens
        # A decode pool of a disaggregated deployment runs no prompts: none packed in its steps.
        self.prompt_share = input_tokens / output_tokens if packed_prefill else 0.0
        e, k = shape.experts, shape.experts_per_token
        bpw = BYTES_PER_WEIGHT[precision]
        # Routed expert parameters X from total = D + X and active = D + X k / E
        # (inference.weight_bytes_touched's split).
        self.expert_params = (shape.params - shape.active_params) / (1 - k / e)
        self.per_expert_params = self.expert_params / e
        self.per_expert_bytes = self.per_expert_params * bpw
        self.slots = math.ceil(e / layout.gpus)
        tp = layout.attention_tp
        dense = shape.params - self.expert_params
        self.dense_bytes = dense * bpw / tp  # held per GPU
        self.dense_read_bytes = (dense - shape.lookup_params) * bpw / tp
        self.dense_active = shape.active_params - self.expert_params * k / e - shape.lookup_params
        self.peak = cp.peak_tflops * TERA * compute_efficiency(acc, cp.precision)
        self.bw = acc.memory_bandwidth_gbps * GB * bandwidth_efficiency(acc)[0]
        self.kv_precision = cache.precision or kv_precision_of(precision)
        self.prefill_share = 1.0 - cache.prefix_hit_rate  # a prefix-cache hit is not computed
        kv = kv_cache_bytes_per_token(shape, self.kv_precision, input_tokens + output_tokens).value
        self.kv_gpu_token = kv * kv_copies(shape, tp) / tp  # one context token, one GPU
        if shape.mla_kv_dim and shape.mla_latent:
            self.decode_dims = shape.mla_kv_dim + shape.mla_latent
        else:
            self.decode_dims = 2 * self.head_dim

    def max_sequences_per_rank(self) -> int:
        """Sequences one DP rank holds: the KV of I + O tokens each in what weights leave."""
        free = (
            usable_memory_gb(self.acc.device_memory_gb) * GB
            - self.dense_bytes
            - self.slots * self.per_expert_bytes
        )
        return max(0, int(free // (self.kv_gpu_token * (self.inp + self.out))))

    def step(self, per_rank: int) -> EpStep:
        """The forward pass with `per_rank` decode sequences on every DP rank and their share of
        prompts packed in (module doc)."""
        return self.forward(per_rank, per_rank * self.prompt_share)

    def forward(self, decode: int, prompt_tokens: float) -> EpStep:
        """One forward pass with `decode` decode sequences and `prompt_tokens` prompt tokens of
        I-token prompts on every DP rank (module doc)."""
        lay, shape = self.layout, self.shape
        e, k = shape.experts or 1, shape.experts_per_token or 1
        tp = lay.attention_tp
        prompt_tokens *= self.prefill_share
        tokens_rank = decode + prompt_tokens
        t = tokens_rank / tp
        total = lay.dp_ranks * tokens_rank
        dense = max(self.dense_read_bytes / self.bw, 2 * self.dense_active * t / self.peak)
        pairs = total * k / lay.gpus * lay.imbalance
        touched = self.slots * (expected_experts(e, k, max(1, round(total))) / e)
        experts = max(
            touched * self.per_expert_bytes / self.bw,
            2 * self.per_expert_params * pairs / self.peak,
        )
        context = self.inp + self.out / 2
        # Decode attention over the mean context, prefill attention over the prompt (causal).
        per_rank_dims = (
            self.decode_dims * context * decode + self.head_dim * self.inp * prompt_tokens
        )
        attn_flops = self.layers * self.heads / tp * 2 * per_rank_dims
        attention = max(decode * context * self.kv_gpu_token / self.bw, attn_flops / self.peak)
        return EpStep(
            dense,
            experts,
            attention,
            self.layers * self.all_to_all_s(t, forwarded=decode == 0),
            self.layers * LAYER_FIXED_S,
            decode * lay.dp_ranks,
        )

    def all_to_all_s(self, tokens: float, forwarded: bool = False) -> float:
        """Dispatch and combine of one layer for `tokens` tokens per GPU (module doc). Decode
        sends each token to each of its k experts (DeepEP's low-latency kernels, pure RDMA);
        `forwarded` passes (prefill, DeepEP's normal kernels) send it once to each other node
        one of its experts is on, and NVLink forwards it there: the expected distinct other
        nodes of k uniform picks, (n - 1)(1 - (1 - 1/n)^k) for n nodes."""
        lay = self.layout
        k = self.shape.experts_per_token or 1
        per_copy = tokens * self.hidden * (DISPATCH_BYTES + COMBINE_BYTES) * lay.imbalance
        g = lay.on_nvlink
        n = lay.gpus / g
        off_copies = (
            (n - 1) * (1 - (1 - 1 / n) ** k) if forwarded else k * (lay.gpus - g) / lay.gpus
        )
        off_node = per_copy * off_copies
        on_node = per_copy * k * (g - 1) / lay.gpus
        network = off_node / (lay.network_gb_s * NETWORK_A2A_EFFICIENCY * GB)
        nvlink = on_node / (link_bus_gb_s(lay.nvlink_gb_s) * GB)
        return max(network, nvlink) + 2 * A2A_LATENCY_S

    def itl_s(self, per_rank: int) -> float:
        return self.step(per_rank).seconds

    def tokens_per_gpu_s(self, per_rank: int) -> float:
        """Output tokens per second per GPU at `per_rank` sequences per DP rank."""
        return per_rank * self.layout.dp_ranks / self.itl_s(per_rank) / self.layout.gpus

    def best(self, max_itl_s: float | None = None) -> tuple[int, float] | None:
        """The most sequences per DP rank that fit in memory with the ITL within `max_itl_s`
        (the step time grows with the batch: bisection), and the ITL there; None if none."""
        top = self.max_sequences_per_rank()
        if top < 1 or (max_itl_s is not None and self.itl_s(1) > max_itl_s):
            return None
        lo, hi = 1, top
        while max_itl_s is not None and lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.itl_s(mid) <= max_itl_s else (lo, mid - 1)
        b = lo if max_itl_s is not None else top
        return b, self.itl_s(b)


def attention_degrees(gpus: int, gpus_per_node: int, heads: int) -> list[int]:
    """Attention TP degrees a layout may take: divisors of a node that divide the GPUs and the
    heads (1 is DP attention)."""
    return [
        d
        for d in range(1, gpus_per_node + 1)
        if gpus_per_node % d == 0 and gpus % d == 0 and heads % d == 0
    ]


def best_layout(
    shape: Shape,
    acc: Accelerator,
    precision: str,
    base: EpLayout,
    io_tokens: tuple[int, int],
    max_itl_s: float | None = None,
    cache: KvCache = DEFAULT_KV_CACHE,
) -> tuple[EpLayout, int, float] | None:
    """Of the attention degrees of `base`'s GPUs, the layout with the most output tokens/s per
    GPU within the ITL target: (layout, sequences per DP rank, ITL s); None when none fits."""
    _, _, heads, _, _ = shape.need_layers("expert parallelism")
    found: list[tuple[float, EpLayout, int, float]] = []
    for tp in attention_degrees(base.gpus, base.gpus_per_node, heads):
        layout = replace(base, attention_tp=tp)
        model = EpModel(shape, acc, precision, layout, *io_tokens, cache=cache)
        got = model.best(max_itl_s)
        if got is not None:
            found.append((model.tokens_per_gpu_s(got[0]), layout, *got))
    if not found:
        return None
    _, layout, per_rank, itl = max(found, key=lambda f: f[0])
    return layout, per_rank, itl
