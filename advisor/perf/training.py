"""Training time: model FLOPs, per-step compute and communication, the parallel layout, goodput.

Pure. The time model beside advisor/perf/inference.py; advisor/planning/training_plan.py chooses the
layout (memory) and GPU count (deadline) and reads the time of each from here.

- FLOPs: the GEMMs' 6·N·D (sizing.training_flops; 8·N·D with full recomputation, which runs
  the forward twice) plus attention's score and value matmuls, 6·layers·s·heads·head_dim per
  token with a causal mask (sizing.attention_training_flops; 8 with recomputation), which
  dominate at 32k tokens and beyond. Time is the FLOPs a step executes at one efficiency, the
  share of the dense peak the step's kernels reach (the workload profile's `efficiency`, fleet-
  calibrated), plus the pipeline bubble and the communication left exposed, each counted once.
  MFU is reported on model FLOPs (6·N·D + attention, no recomputation; PaLM, Chowdhery et al.
  2022, appendix B) and HFU on what runs.
- Precision: bf16, or fp8 where the chip has FP8 tensor cores; in fp8 (Transformer Engine
  recipes, NeMo's FP8 rows) the linear layers' GEMMs run at the FP8 peak and attention stays in
  bf16 (Transformer Engine's DotProductAttention runs in BF16 unless FP8 attention is enabled);
  master weights, gradients and optimizer states keep their 16 bytes per parameter.
- A step processes the global batch (Llama 2: "All models are trained with a global batch-size
  of 4M tokens", arXiv:2307.09288 / meta-llama/llama-models models/llama2/MODEL_CARD.md).
- Data-parallel communication per step (ZeRO, Rajbhandari et al. 2019, section 7): DP and ZeRO
  1/2 move 2Ψ (gradient reduce-scatter + parameter all-gather, or one all-reduce); ZeRO 3 / FSDP
  3Ψ (parameter all-gather in the forward and the backward, gradient reduce-scatter), Ψ the
  16-bit bytes of the parameters a rank holds. Ring time = bytes x (n-1)/n / busbw, the nccl-tests
  convention (docs/reference-figures.md section 3: all-gather/reduce-scatter busbw =
  algbw x (n-1)/n), plus each collective's latency by NCCL's own model (alpha-beta: Ring.latency_s).
- Tensor parallelism (Megatron-LM, Narayanan et al. 2021; Korthikanti et al. 2022 with sequence
  parallelism): per layer and token, 4 all-reduce-equivalents of the hidden state (2 forward, 2
  backward; 6 with full recomputation), inside one node, on the critical path (each layer's
  GEMM waits for its input's all-gather). Pipeline parallelism: bubble (p-1)/(v m)
  of the compute, m micro-batches per step, v virtual stages (Narayanan et al. 2021 2.2);
  a stage holds whole layers and every stage waits for the fullest (126 layers over 8 stages:
  16 on some, 15.75 on average).
- Bandwidth: inside a node the instance's GPU link per direction at the bus efficiency NCCL
  reaches (inference.link_bus_gb_s: 370 of 450 GB/s on 8 H100s; PCIe when 0, the inference
  model's figure); across nodes the instance network per GPU (Gbit/s / 8 / GPUs per
  node) times the ring's GPUs on each node (one NCCL channel per NIC), at most the link.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from advisor.catalog.models import Accelerator
from advisor.perf.efficiency import REFERENCE_GEMM_SHARE
from advisor.perf.inference import bandwidth_efficiency, link_bus_gb_s
from advisor.perf.op_table import OperatorTable, Timed
from advisor.perf.sizing import (
    DEFAULT_LORA_RANK,
    EVERY_WEIGHT,
    Figure,
    Shape,
    attention_training_flops,
    attention_training_flops_value,
    lora_adapter_params,
    training_flops,
    training_flops_value,
)
from advisor.perf.train_gemms import shape_factor
from advisor.units import GB, SECONDS_PER_HOUR, TERA

GRAD_BYTES = 2  # 16-bit gradients and parameters on the wire (mixed precision, ZeRO paper)
# Llama 2 (arXiv:2307.09288 section 2.2; model card): global batch of 4M tokens = 1024 x 4096,
# for every size from 7B to 70B.
DEFAULT_GLOBAL_BATCH_TOKENS = 1024 * 4096
# Llama 3 (arXiv:2407.21783 Table 4): the 405B model trained on 16M-token batches at scale.
LARGE_MODEL_BATCH_TOKENS = 16 * 2**20
LARGE_MODEL_PARAMS = 100e9  # above this, the Llama 3 405B batch; up to it, Llama 2's


def default_global_batch_tokens(params: float) -> int:
    """The global batch when the request gives none, by model size: Llama 2's 4M tokens up to
    100B parameters (7B-70B), Llama 3 405B's 16M above (a larger batch keeps thousands of
    data-parallel ranks busy)."""
    return LARGE_MODEL_BATCH_TOKENS if params > LARGE_MODEL_PARAMS else DEFAULT_GLOBAL_BATCH_TOKENS


# Share of a phase's (forward or backward) communication that can run under its compute
# (bucketed all-reduce during the backward: PyTorch DDP, Li et al. VLDB 2020; FSDP/ZeRO-3
# prefetch of the next layer's parameters; Megatron-Core's DP/TP overlap). ESTIMATED: the rest
# cannot hide (the first gather before the first layer, the last bucket after the last layer's
# backward, collectives slowing the kernels they share the GPU with).
OVERLAP_FRACTION = 0.8
# Llama 3 (arXiv:2407.21783 section 3.3.4, Table 5): 419 unexpected interruptions in a 54-day
# snapshot of pre-training on 16,384 H100s, and "higher than 90% effective training time".
# Interruptions arrive at a rate per GPU-hour; each costs the run the hours it takes to restart
# and redo the work since the last checkpoint. Both together: a run of T hours on N GPUs meets
# FAILURES_PER_GPU_HOUR x N x T interruptions and spends INTERRUPTION_COST_H on each, so its
# goodput is 1 / (1 + rate x N x cost), smooth in N and in T (no step at any run length).
FAILURES_PER_GPU_HOUR = 419 / (54 * 24 * 16_384)  # 1.97e-5
# Hours lost per interruption: set so that Llama 3's 16,384 GPUs run at 90% goodput, the paper's
# figure (1/0.9 - 1) / (1.97e-5 x 16,384) = 0.34 h: a restart and half a checkpoint interval.
# ESTIMATED (one public run).
LLAMA3_GOODPUT, LLAMA3_GPUS = 0.90, 16_384
INTERRUPTION_COST_H = (1 / LLAMA3_GOODPUT - 1) / (FAILURES_PER_GPU_HOUR * LLAMA3_GPUS)


def goodput(gpus: int) -> float:
    """The share of a run's wall time spent training on `gpus` GPUs: the rest restarts after
    interruptions and redoes lost work (module constants; Llama 3 at 16,384 GPUs: 0.90)."""
    return 1 / (1 + FAILURES_PER_GPU_HOUR * gpus * INTERRUPTION_COST_H)


# TP all-reduce-equivalents of the hidden state per layer per token (Korthikanti et al. 2022,
# section 4.2.2: 4 without recomputation, 6 with full recomputation; a layer recomputed runs its
# forward's 2 again).
TP_COLLECTIVES = {False: 4, True: 6}
# Share of the TP collectives hidden under the GEMMs they feed with Megatron-Core / Transformer
# Engine's TP communication overlap (--tp-comm-overlap, userbuffers: the all-gather and
# reduce-scatter of sequence parallelism split into chunks pipelined with the dependent GEMM's
# chunks; Wang et al. ASPLOS 2023, "Overlap Communication with Dependent Computation via
# Decomposition"; the Megatron Bridge communication-overlap guide, on in the NeMo recipes of
# tests/data/published.yaml). ESTIMATED: the first chunk of each collective and the bandwidth
# the GEMMs lose to it stay exposed.
TP_OVERLAP_FRACTION = 0.6


def tp_collectives(recompute: float) -> float:
    """TP all-reduce-equivalents per layer and token with `recompute` of the layers recomputed."""
    return TP_COLLECTIVES[False] + (TP_COLLECTIVES[True] - TP_COLLECTIVES[False]) * recompute


# Share of the data-parallel bytes moved during the forward (the rest during the backward), by
# ZeRO stage: DDP all-reduces gradients in the backward; ZeRO-1/2 all-gather updated parameters
# (1 of 2 passes) before the next forward; ZeRO-3 gathers parameters in the forward (1 of 3).
DP_FORWARD_SHARE = {0: 0.0, 1: 1 / 2, 2: 1 / 2, 3: 1 / 3}
# Layers per virtual pipeline stage (interleaved schedule): the NeMo 24.07 recipes in
# published.yaml run 80 layers as PP4 VP5 (4 per stage), 80 as PP4 VP20 (1), 96 as PP8 VP6 (2):
# their median, 2.
LAYERS_PER_VIRTUAL_STAGE = 2


@dataclass(frozen=True, slots=True)
class Cluster:
    """Nodes of `per_node` GPUs of one kind: peak, link inside a node, network between nodes."""

    peak_tflops: float  # dense, per GPU, at the training precision (the linear layers' GEMMs)
    per_node: int
    link_gb_s: float  # per-GPU GPU link, both directions (catalog convention); 0: PCIe
    network_gbps: float  # per node, between nodes
    attention_peak_tflops: float | None = None  # attention's matmuls (bf16); None: peak_tflops
    # GPUs on one NVLink switch fabric (GB200/GB300 NVL72: 72 over 18 trays of 4); None: a node
    domain_gpus: int | None = None
    expert_ridge_tokens: float = 0.0  # expert_ridge_tokens of the GPU (0: not known, no bound)
    # The GPU's operator table (unless ADVISOR_OPERATOR_TABLES=off): attention's forward and
    # backward read from its training rows where it has them (_attention_s). Not part of
    # equality: the planners key their placements by accelerator, whose table this is.
    attention_table: OperatorTable | None = field(default=None, compare=False, repr=False)
    # The linear layers' GEMM precision, and the table their shapes are read from
    # (dense_shape_factor; efficiency.shape_table: the GPU's own, else the reference GPU's)
    precision: str = "bf16"
    gemm_table: OperatorTable | None = field(default=None, compare=False, repr=False)

    @property
    def domain(self) -> int:
        """GPUs that reach each other over the GPU link: the NVLink domain, else one node."""
        return max(self.per_node, self.domain_gpus or 0)

    @property
    def attention_peak(self) -> float:
        return self.attention_peak_tflops or self.peak_tflops

    def intra_gb_s(self) -> float:
        """Bus bandwidth of a collective inside one node (inference.link_bus_gb_s: the link's
        one direction at the bus efficiency NCCL reaches)."""
        return link_bus_gb_s(self.link_gb_s)

    def inter_gb_s(self) -> float:
        """Bus bandwidth per GPU of a collective across nodes: the network shared by the node."""
        return max(self.network_gbps, 1e-3) / 8 / self.per_node

    def ring_gb_s(self, ranks: int, stride: int) -> float:
        """Bus bandwidth of a ring of `ranks` GPUs `stride` apart (TP GPUs between DP peers):
        the link while the ring stays inside a node; across nodes, the network share of the
        ring's GPUs on each node (NCCL runs a channel per NIC, so a ring holding k GPUs of a
        node moves data over k GPUs' share of its network), at most the link."""
        if ranks * stride <= self.domain:
            return self.intra_gb_s()
        on_node = max(1, self.per_node // stride)
        return min(self.intra_gb_s(), self.inter_gb_s() * on_node)


@dataclass(frozen=True, slots=True)
class Layout:
    """How GPUs split the work: data parallel x tensor parallel (inside a node) x pipeline x
    context parallel (each sequence's tokens over `cp` ranks, which attend to each other's keys
    and values: ring attention, Liu et al. 2023; Megatron-Core context parallelism)."""

    dp: int
    tp: int = 1
    pp: int = 1
    zero_stage: int = 3
    cp: int = 1
    ep: int = 1  # expert parallel: a mixture of experts' experts split over `ep` of the DP ranks

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    def words(self) -> str:
        cp = f" x CP {self.cp}" if self.cp > 1 else ""
        ep = f" (EP {self.ep})" if self.ep > 1 else ""
        return f"DP {self.dp}{ep} x TP {self.tp} x PP {self.pp}{cp}, ZeRO stage {self.zero_stage}"


@dataclass(frozen=True, slots=True)
class Job:
    """What one training run is: the model, tokens, sequence, micro-batch, recomputation, the
    global batch, and the efficiency its kernels run at."""

    shape: Shape
    tokens: float
    seq_len: int
    micro_batch: int
    recompute: float  # share of the layers recomputed whole: 0 none, 1 full (True/False too)
    efficiency: float  # share of the dense peak the kernels reach (workload profile / fleet)
    global_batch_tokens: int = DEFAULT_GLOBAL_BATCH_TOKENS
    method: str = "full"  # sizing.METHODS (sizing.training_flops / training_memory)
    lora_rank: int = DEFAULT_LORA_RANK
    # experts' all-to-alls hidden under another micro-batch's compute (DeepSeek-V3's DualPipe,
    # Megatron-Core's --overlap-moe-expert-parallel-comm); False: on the critical path
    expert_overlap: bool = False
    # context parallelism that all-gathers the keys and values before attention and waits for
    # them (Llama 3's own, arXiv:2407.21783 section 3.3.2: "the all-gather communication latency
    # is exposed in the critical path"); False: Megatron-Core / Transformer Engine's ring, which
    # passes them while attention runs (_cp_comm_s)
    cp_all_gather: bool = False

    def flops(self, tokens: float, recompute: float = False) -> float:
        """GEMM FLOPs (the recomputed forward's too with `recompute`) of `tokens` tokens for
        this method: the one FLOPs rule, sizing.training_flops."""
        return training_flops_value(self.shape, tokens, recompute, self.method, self.lora_rank)

    def attention_flops(self, tokens: float, recompute: float = False) -> float:
        """Attention's matmul FLOPs of `tokens` tokens in sequences of seq_len (0 without a
        model shape): sizing.attention_training_flops."""
        return attention_training_flops_value(self.shape, tokens, self.seq_len, recompute)

    def model_flops(self, tokens: float) -> float:
        """What MFU counts: GEMMs and attention, no recomputation."""
        return self.flops(tokens) + self.attention_flops(tokens)

    @property
    def trainable_params(self) -> float:
        """Parameters with gradients: every weight, or the LoRA/QLoRA adapters."""
        if self.method in EVERY_WEIGHT:
            return self.shape.params
        return lora_adapter_params(self.shape, self.lora_rank)[0].value

    @property
    def sequences_per_step(self) -> int:
        return max(1, self.global_batch_tokens // self.seq_len)

    @property
    def steps(self) -> float:
        """Optimizer steps, fractional: the last, partial batch costs its share."""
        return self.tokens / (self.sequences_per_step * self.seq_len)


@dataclass(frozen=True, slots=True)
class Step:
    """Seconds of one optimizer step on a layout, by part."""

    compute_s: float  # the executed FLOPs at the kernels' efficiency, with the pipeline bubble
    dp_comm_s: float
    tp_comm_s: float
    cp_comm_s: float  # context parallel: the other ranks' keys and values, every layer
    a2a_comm_s: float  # expert parallel: tokens to their experts and back, every MoE layer
    pp_comm_s: float  # pipeline: activations to the next stage, gradients back, per virtual stage
    exposed_s: float  # communication not hidden under compute (TP's all of it)
    busy_ranks: int  # data-parallel ranks with a micro-batch (the rest idle)

    @property
    def seconds(self) -> float:
        return self.compute_s + self.exposed_s


def _ranks(job: Job, layout: Layout) -> tuple[int, int]:
    """(data-parallel ranks with a micro-batch, micro-batches per rank per step)."""
    seqs = job.sequences_per_step
    busy = min(layout.dp, max(1, seqs // job.micro_batch))
    return busy, math.ceil(seqs / (busy * job.micro_batch))


def step_time(job: Job, cluster: Cluster, layout: Layout) -> Step:
    """One optimizer step of `job` on `layout` over `cluster`."""
    seqs = job.sequences_per_step
    busy, micro = _ranks(job, layout)
    split = busy * layout.tp * layout.pp * layout.cp
    tokens = seqs * job.seq_len
    attention = _attention_s(job, cluster, tokens, layout.cp)
    compute = (
        (_gemm_s(job, cluster, tokens, layout) + attention)
        / split
        * _stage_imbalance(job, layout)
        * (1 + _bubble(job, layout, micro))
    )
    dp = _dp_comm_s(job, cluster, layout, micro)
    tp = _tp_comm_s(job, cluster, layout, tokens / busy / layout.cp)
    cp = _cp_comm_s(job, cluster, layout, micro)
    a2a = _a2a_comm_s(job, cluster, layout, micro)
    pp = _pp_comm_s(job, cluster, layout, micro)
    attention_s = attention / split
    # The forward is 1/3 of the compute, the backward 2/3 (2ND vs 4ND). What runs under each:
    # ZeRO-3's parameter gather (1 of 3 passes) and ZeRO-1/2's parameter all-gather (1 of 2,
    # overlapped with the next forward) under the forward, gradient reduction under the
    # backward. TP's collectives sit between a layer's GEMMs: TP overlap hides a share of them.
    # Context parallelism passes keys and values round the ring while each block's attention
    # runs, so only attention's compute can cover it; all-gathered before attention
    # (cp_all_gather), none of it hides. The experts' all-to-alls sit between the router and the
    # experts, on the critical path (Megatron-Core's default) unless the job overlaps them with
    # another micro-batch's compute (expert_overlap: DeepSeek's DualPipe).
    fwd = dp * DP_FORWARD_SHARE[min(layout.zero_stage, 3)]
    exposed = _exposed(fwd, compute / 3) + _exposed(dp - fwd, compute * 2 / 3)
    exposed += _tp_exposed_s(tp, compute) + _a2a_exposed_s(job, a2a, compute)
    exposed += (cp if job.cp_all_gather else _exposed(cp, attention_s)) + _exposed(pp, compute)
    return Step(compute, dp, tp, cp, a2a, pp, exposed, busy)


def _gemm_s(job: Job, cluster: Cluster, tokens: float, layout: Layout) -> float:
    """Seconds one GPU takes for `tokens` tokens' GEMMs (and what runs between them) at the
    training precision's peak and the step's efficiency, times gemm_factor; a step's compute
    adds attention (_attention_s)."""
    gemm = job.flops(tokens, job.recompute) / (cluster.peak_tflops * TERA * job.efficiency)
    return gemm * gemm_factor(job, cluster, layout)


def gemm_factor(job: Job, cluster: Cluster, layout: Layout) -> float:
    """The GEMMs' time over their FLOPs at the calibrated efficiency: the dense ones at their
    shapes (dense_shape_factor), the experts' share slowed by expert_gemm_factor."""
    return expert_gemm_factor(
        job.shape,
        tokens_per_expert(job, layout),
        cluster.expert_ridge_tokens,
        dense_shape_factor(job, cluster, layout),
        layout.tp if layout.ep == 1 else 1,  # experts run whole on their EP rank
    )


def dense_shape_factor(job: Job, cluster: Cluster, layout: Layout) -> float:
    """The layer's dense GEMMs at the layout's shapes (TP's widths, a rank's micro-batch tokens
    under CP) over the same FLOPs at the operator table's 8,192-cube rate, which the calibrated
    efficiency stands for (train_gemms.shape_factor); 1 without a table. LoRA's frozen weights
    have no weight gradient GEMMs."""
    table = cluster.gemm_table
    if table is None:
        return 1.0
    tokens = rank_tokens(job, layout)
    weight_grads = job.method in EVERY_WEIGHT
    return shape_factor(table, cluster.precision, job.shape, layout.tp, tokens, weight_grads)


# An expert's GEMM on few tokens reads its weights for little work: below the tokens at which its
# FLOPs (at the dense kernels' share of the peak, efficiency.REFERENCE_GEMM_SHARE) take as long as
# reading its weights (at the generation's achieved share of the memory bandwidth,
# inference.bandwidth_efficiency), the weight read sets its time and the grouped GEMM runs at
# tokens / ridge of the dense rate. The same at FP8 (half the bytes at twice the rate). The H200's
# own table shows exactly this: its grouped rows of DeepSeek-V3's 2,048 x 7,168 experts reach 0.10
# of the dense rate at 16 tokens an expert, 0.73 at 128 and the dense rate at 1,024, where this
# ridge (188 tokens on the H200, 270 on the H100) gives 0.085, 0.68 and 1; the experts of four
# presets measured on the H200 (benchmarks/expert_gemm_shapes.py, 144 shapes) sit at a median
# 1.04 of it (tests/test_training_recipes.py). The inputs read and the outputs written count with
# the weights (the roofline's bytes): alike for a whole expert, they weigh as much as its weights
# when TP ranks split a narrow one (expert_share).
# The busiest expert's tokens over the mean: a step waits for it. ESTIMATED: DeepSeek-V3's
# auxiliary-loss-free balancing (arXiv:2412.19437 section 2.1.2) and the auxiliary losses of
# Switch/GShard keep the experts' loads within about 10% of the mean over a batch.
EXPERT_LOAD_IMBALANCE = 1.1


def grouped_gemm_share(
    tokens_per_expert: float, ridge_tokens: float, n: float = 0.0, k: float = 0.0
) -> float:
    """The grouped GEMM's rate over the dense one at `tokens_per_expert`: tokens / ridge below
    the ridge (the weight read sets the time), the dense rate above; 1 where no ridge is known.
    Given the expert's GEMM widths (Y[m, n] = X[m, k] W[n, k]^T), its inputs and outputs count
    with its weights: m n k / ((n k + m k + m n) ridge), which matters where an expert is
    narrow (split over TP ranks: k n against m (n + k))."""
    if ridge_tokens <= 0:
        return 1.0
    m = tokens_per_expert
    if n <= 0 or k <= 0:
        return min(1.0, m / ridge_tokens)
    return min(1.0, m * n * k / ((n * k + m * k + m * n) * ridge_tokens))


def expert_share(shape: Shape, tokens: float, ridge_tokens: float, etp: int = 1) -> float:
    """The experts' MLP (gate and up, then down) at `tokens` tokens an expert, each expert's
    width over `etp` TP ranks (without expert parallelism they split it): its FLOPs over their
    time at grouped_gemm_share of the dense rate; the weights alone where widths are unknown."""
    h, w = shape.hidden, shape.intermediate
    if not h or not w:
        return grouped_gemm_share(tokens, ridge_tokens)
    gate = 2 if shape.gated_mlp else 1
    width = w / etp
    up = grouped_gemm_share(tokens, ridge_tokens, gate * width, h)
    down = grouped_gemm_share(tokens, ridge_tokens, h, width)
    return (gate + 1) / (gate / up + 1 / down)


def expert_ridge_tokens(acc: Accelerator) -> float:
    """Tokens an expert must get for its GEMM's FLOPs to take as long as reading its 16-bit
    weights on `acc` (2 FLOPs and 2 bytes a weight and token; module comment above)."""
    peak16 = peak16_tflops(acc) or 0.0
    bandwidth = acc.memory_bandwidth_gbps * GB * bandwidth_efficiency(acc)[0]
    return peak16 * TERA * REFERENCE_GEMM_SHARE / bandwidth if bandwidth else 0.0


def rank_tokens(job: Job, layout: Layout) -> float:
    """The tokens of one micro-batch on a rank: its sequence share under context parallelism
    (sequence parallelism gathers them over the TP ranks before each GEMM)."""
    return job.seq_len * job.micro_batch / layout.cp


def tokens_per_expert(job: Job, layout: Layout) -> float:
    """Tokens one expert gets in a micro-batch: each of the EP ranks' micro-batch tokens
    (rank_tokens) sends k / E of its token-expert pairs to it."""
    experts, k = job.shape.experts or 1, job.shape.experts_per_token or 1
    return rank_tokens(job, layout) * layout.ep * k / experts


def expert_gemm_factor(
    shape: Shape, tokens: float, ridge_tokens: float, dense: float = 1.0, etp: int = 1
) -> float:
    """Time of a model's GEMMs over the same FLOPs at the dense efficiency: the routed
    experts' share of the active parameters (X k / E of N) run at the grouped GEMM's share of
    the dense rate for `tokens` tokens an expert (grouped_gemm_share below the ridge) and wait
    for the busiest expert (EXPERT_LOAD_IMBALANCE); the rest at `dense` (dense_shape_factor)."""
    experts, k = shape.experts, shape.experts_per_token
    if not experts or not k or not shape.expert_params:
        return dense
    share = min(1.0, shape.expert_params * k / experts / shape.active_params)
    slower = EXPERT_LOAD_IMBALANCE / expert_share(shape, tokens, ridge_tokens, etp)
    return (1 - share) * dense + share * slower


def _attention_s(job: Job, cluster: Cluster, tokens: float, cp: int = 1) -> float:
    """Seconds of attention's forward and backward (a recomputed forward too) for `tokens`
    tokens on one GPU, each sequence over `cp` context-parallel ranks: the operator table's
    training rows where the GPU has them, else the matmul FLOPs at the 16-bit peak x
    ATTENTION_EFFICIENCY."""
    measured = _table_attention(job, cluster, cp)
    if measured is not None:
        return measured.seconds * tokens / job.seq_len
    rate = cluster.attention_peak * TERA * ATTENTION_EFFICIENCY
    return job.attention_flops(tokens, job.recompute) / rate


def _table_attention(job: Job, cluster: Cluster, cp: int = 1) -> Timed | None:
    """One sequence's attention over every layer from the table's training rows (the causal
    forward and backward of seq_len tokens, the model's heads and head dim); a recomputed
    forward adds its share, 2 of the 6 units of forward and backward (sizing's FLOP count).

    Context parallelism over a ring (Megatron-Core's, through Transformer Engine) runs each
    sequence as cp x cp blocks of seq_len / cp tokens a side: the sequence is cut into 2 cp
    chunks, each rank holds two (one from each end, so the causal work balances), and each ring
    step is one rank's queries against one rank's keys, as much work as a causal attention of
    seq_len / cp tokens: the first causal (the table's training row at that length), the other
    cp - 1 unmasked (its ring rows, which time them; a table without them, the causal row). The
    kernels see blocks that long, so short blocks run below the kernels' best rate: the shipped
    H100 table's 2,048-token row reaches 0.64 of its 8,192-token row's FLOP rate (measured
    against a rank's whole ring: benchmarks/cp_attention_blocks.py). Keys and values
    all-gathered before attention (cp_all_gather) leave each rank's queries one kernel against
    the whole gathered prefix: the whole sequence's row."""
    table, shape = cluster.attention_table, job.shape
    if table is None or shape.layers is None or shape.heads is None or shape.head_dim is None:
        return None
    blocks = 1 if job.cp_all_gather else cp
    block = job.seq_len / blocks
    one = table.train_attention_time(block, shape.heads, shape.head_dim)
    if one is None:
        return None
    step = table.ring_step_time(block, shape.heads, shape.head_dim) if blocks > 1 else None
    rest = step or one  # the cp - 1 unmasked steps of a rank
    per_layer = blocks * (one.seconds + (blocks - 1) * rest.seconds)
    beyond = tuple(dict.fromkeys(one.beyond + rest.beyond))
    return Timed(per_layer * shape.layers * (1 + float(job.recompute) / 3), beyond)


def _exposed(comm_s: float, compute_s: float) -> float:
    """Communication of one phase left on the critical path: what the phase's compute cannot
    cover, and never less than the share that cannot overlap at all."""
    return max(comm_s - compute_s, (1 - OVERLAP_FRACTION) * comm_s)


def _virtual_stages(job: Job, layout: Layout) -> int:
    """Virtual stages a GPU runs: its pipeline stage's layers in chunks of
    LAYERS_PER_VIRTUAL_STAGE, counted on the fullest stage (_stage_layers), not the mean: layers
    that do not divide over the stages are balanced by counting the embedding and the loss as a
    layer each (Megatron-Core's account_for_embedding_in_pipeline_split and
    account_for_loss_in_pipeline_split), so every rank holds whole chunks. Llama 3 405B's 126
    layers: the paper's PP 16 takes a layer from the first and the last stage (arXiv:2407.21783
    section 3.3.2, 2024-07), 8 slots a rank, 4 chunks of 2 (the mean's 7.875 / 2 floors to 3);
    at PP 8, 16 slots a rank, 8 chunks (not 7)."""
    return virtual_stages(job.shape.layers, layout.pp)


def virtual_stages(layers: int | None, pp: int) -> int:
    """_virtual_stages of a model of `layers` layers (None: one a stage) over `pp` stages."""
    return max(1, math.ceil((layers or pp) / pp) // LAYERS_PER_VIRTUAL_STAGE)


def interleaved_activation_factor(layers: int | None, pp: int) -> float:
    """What the interleaved schedule's first stage keeps against 1F1B's (a whole model's layers
    of activations, one micro-batch each): L (1 + (p-1)/(p m)) layers for m virtual stages a GPU
    (Korthikanti et al. 2022, arXiv:2205.05198 section 4.2.3). The plan takes that schedule's
    smaller bubble (_bubble) where a stage holds more than one chunk, so it holds its memory
    too: 1.109 at PP 8 of 8 chunks (Llama 3 405B), 1.234 at PP 16 of 4."""
    v = virtual_stages(layers, pp)
    return 1.0 if pp == 1 or v == 1 else 1 + (pp - 1) / (pp * v)


def _stage_layers(job: Job, layout: Layout) -> tuple[int, float]:
    """(the layers of the fullest pipeline stage, the mean): a stage holds whole layers, so
    126 layers over 8 stages put 16 on some (Llama 3 405B; its paper, arXiv:2407.21783
    section 3.3.2, balances its 16 stages by taking a layer from the first and the last)."""
    layers = job.shape.layers or layout.pp
    return math.ceil(layers / layout.pp), layers / layout.pp


def _stage_imbalance(job: Job, layout: Layout) -> float:
    """Every stage waits for the fullest one: its layers over the mean (1 when they divide)."""
    fullest, mean = _stage_layers(job, layout)
    return fullest / mean


def _stage_words(job: Job, layout: Layout) -> str:
    fullest, mean = _stage_layers(job, layout)
    if fullest == mean:
        return ""
    return f" x {fullest} / {mean:.4g} layers (the fullest pipeline stage over the mean)"


def _bubble(job: Job, layout: Layout, micro_batches: int) -> float:
    """Pipeline bubble, a share of the compute: (p-1)/(v m) for the interleaved 1F1B schedule
    of v virtual stages per GPU (Narayanan et al. 2021 section 2.2.2)."""
    p = layout.pp
    if p == 1:
        return 0.0
    return (p - 1) / (_virtual_stages(job, layout) * micro_batches)


def _pp_comm_s(job: Job, cluster: Cluster, layout: Layout, micro_batches: int) -> float:
    """Seconds one rank spends passing activations to the next pipeline stage and gradients
    back: per micro-batch and virtual stage, 2 x its share of a micro-batch's hidden states
    (s / CP x b x h x 2 bytes, split over TP by the scatter-gather of Narayanan et al. 2021
    section 4.1) - interleaving v stages multiplies the traffic by v (section 2.2.2). Over the
    link while one model replica fits a node, else the rank's share of the network."""
    if layout.pp == 1 or job.shape.hidden is None:
        return 0.0
    volume = 2 * _virtual_stages(job, layout) * micro_batches * _pp_message(job, layout)
    return volume / (_pp_bw(cluster, layout) * GB)


def _pp_message(job: Job, layout: Layout) -> float:
    """Bytes one TP rank passes a stage per micro-batch: its share of the hidden states."""
    hidden = job.shape.hidden or 0
    return rank_tokens(job, layout) * hidden * GRAD_BYTES / layout.tp


def _pp_bw(cluster: Cluster, layout: Layout) -> float:
    inside = layout.tp * layout.cp * layout.pp <= cluster.domain
    return cluster.intra_gb_s() if inside else cluster.inter_gb_s()


def _dp_comm_s(job: Job, cluster: Cluster, layout: Layout, micro_batches: int) -> float:
    """Data-parallel seconds of one step: each ring's bytes over its bus bandwidth plus its
    collectives' latency. ZeRO-3 / FSDP gathers the parameters for the forward and the backward
    of every micro-batch and reduce-scatters its gradients, layer by layer (PyTorch FSDP and
    DeepSpeed ZeRO-3 keep no unsharded copy between them); DP and ZeRO-1/2 reduce accumulated
    gradients once per step, bucket by bucket. Only trained parameters have gradients (LoRA: the
    adapters); ZeRO-3 shards and gathers the frozen weights too (counted at 16 bits: QLoRA's
    4-bit weights move less)."""
    return sum(ring.seconds(cluster) for ring in _dp_rings(job, layout, micro_batches))


# NCCL's latency model for the Simple protocol, which large messages use (src/graph/tuning.cc,
# NCCL 2.2x: baseLat, hwLat): a collective costs a base latency plus one per step of its
# algorithm, by the hop the step crosses. Ring: an all-reduce has 2(n-1) steps, an all-gather or
# reduce-scatter n-1, of which 2(nodes-1) resp. nodes-1 cross the network. Tree (all-reduce
# only): 2 x ((GPUs per node - 1) NVLink hops + log2(nodes) network hops). NCCL picks the
# algorithm with the lower time; at these sizes bandwidth is alike, so the lower latency.
NCCL_BASE_LATENCY_US = 8.4
NCCL_RING_HOP_US = {"nvlink": 3.4, "pcie": 5.7, "net": 14.0}
NCCL_TREE_HOP_US = {"nvlink": 4.0, "pcie": 4.0, "net": 14.0}
# PyTorch DDP's default gradient bucket (torch.nn.parallel.DistributedDataParallel,
# bucket_cap_mb=25): one all-reduce per 25 MiB of gradients.
DDP_BUCKET_BYTES = 25 * 2**20
# ZeRO-3 / FSDP collectives per layer and micro-batch: the parameters' all-gather in the forward
# and again in the backward, the gradients' reduce-scatter.
ZERO3_CALLS_PER_LAYER = 3


@dataclass(frozen=True, slots=True)
class Ring:
    """One data-parallel ring: the bytes each rank moves per step, its ranks, the stride between
    them (the TP x PP GPUs of a model replica), and the collectives it takes to move them."""

    volume: float
    ranks: int
    stride: int
    calls: int
    all_reduce: bool  # DDP / ZeRO-1/2 buckets; else ZeRO-3's all-gathers and reduce-scatters

    def latency_s(self, cluster: Cluster) -> float:
        """One collective's latency (NCCL's model above): on_node ranks of the ring share a
        node, the rest are across the network."""
        n = self.ranks
        on_node = min(n, max(1, cluster.per_node // self.stride))
        nodes = math.ceil(n / on_node)
        hop = "nvlink" if cluster.link_gb_s else "pcie"
        steps, inter = (2 * (n - 1), 2 * (nodes - 1)) if self.all_reduce else (n - 1, nodes - 1)
        ring = (steps - inter) * NCCL_RING_HOP_US[hop] + inter * NCCL_RING_HOP_US["net"]
        if self.all_reduce:
            tree = 2 * (
                (on_node - 1) * NCCL_TREE_HOP_US[hop] + math.log2(nodes) * NCCL_TREE_HOP_US["net"]
            )
            ring = min(ring, tree)
        return (NCCL_BASE_LATENCY_US + ring) * 1e-6

    def seconds(self, cluster: Cluster) -> float:
        n = self.ranks
        if n == 1:
            return 0.0
        bandwidth = self.volume * (n - 1) / n / (cluster.ring_gb_s(n, self.stride) * GB)
        return bandwidth + self.calls * self.latency_s(cluster)


def _dp_rings(job: Job, layout: Layout, micro: int) -> list[Ring]:
    """The data-parallel rings: the dense weights over every DP (and CP) rank; with expert
    parallelism, each expert's weights over the DP ranks holding the same experts (DP / EP of
    them, EP apart). Context-parallel ranks hold the same weights: they reduce too."""
    n = layout.dp * layout.cp
    stride = layout.tp * layout.pp
    grads, weights = _dp_bytes(job, layout)
    experts = job.shape.expert_params if job.method == "full" and layout.ep > 1 else 0.0
    share = experts / job.shape.params
    layers = math.ceil((job.shape.layers or layout.pp) / layout.pp)
    out = []
    for part, ranks, apart in (
        (1 - share, n, stride),
        (share / layout.ep, n // layout.ep, stride * layout.ep),
    ):
        if part:
            g = grads * part
            if weights is not None:
                volume = micro * (2 * weights * part + g)
                out.append(
                    Ring(volume, ranks, apart, micro * layers * ZERO3_CALLS_PER_LAYER, False)
                )
            else:
                calls = max(1, math.ceil(g / DDP_BUCKET_BYTES))
                out.append(Ring(2 * g, ranks, apart, calls, True))
    return out


# All-to-alls per MoE layer and micro-batch: the forward dispatches each token to its k experts and
# combines their outputs; the backward does both again (Megatron-Core's token dispatcher).
A2A_PER_LAYER = 4


def _a2a_comm_s(job: Job, cluster: Cluster, layout: Layout, micro_batches: int) -> float:
    """Seconds one rank spends in the experts' all-to-alls: per MoE layer of its pipeline stage
    and micro-batch, A2A_PER_LAYER times its tokens x hidden x 2 bytes x the copies each token
    sends: to the k experts' ranks, the share on its own node (or NVLink domain) over the GPU
    link and the rest over its share of the node's network (EP ranks sit next to TP and CP
    ones). With node-limited routing (DeepSeek-V3: a token's experts on at most M nodes, one
    copy per node forwarded over NVLink there, arXiv:2412.19437 section 3.2.2) at most M copies
    cross the network."""
    shape, ep = job.shape, layout.ep
    if ep == 1 or not shape.expert_params or shape.hidden is None or shape.layers is None:
        return 0.0
    # a rank dispatches its sequence-parallel share of the micro-batch's tokens
    tokens = rank_tokens(job, layout) / layout.tp
    per_copy = tokens * shape.hidden * GRAD_BYTES
    calls = A2A_PER_LAYER * shape.layers / layout.pp * micro_batches
    local, remote = _a2a_copies(job, cluster, layout)
    return (
        calls
        * per_copy
        * (local / (cluster.intra_gb_s() * GB) + remote / (max(cluster.inter_gb_s(), 1e-9) * GB))
    )


def _a2a_copies(job: Job, cluster: Cluster, layout: Layout) -> tuple[float, float]:
    """(copies of a token to experts on its own node or NVLink domain, copies across the
    network): k spread evenly over the EP ranks, the remote ones capped by node-limited
    routing."""
    ep, k = layout.ep, job.shape.experts_per_token or 1
    on_node = min(ep, max(1, cluster.domain // (layout.tp * layout.cp)))
    local = k * (on_node - 1) / ep
    remote = k * (ep - on_node) / ep
    if job.shape.route_nodes is not None:
        remote = min(remote, float(job.shape.route_nodes))
    return local, remote


def _a2a_exposed_s(job: Job, a2a_s: float, compute_s: float) -> float:
    """The experts' all-to-alls left on the critical path: all of them (they sit between the
    router and the experts), or with expert_overlap what the step's compute cannot cover and
    never less than the share that cannot overlap (as data-parallel communication)."""
    return _exposed(a2a_s, compute_s) if job.expert_overlap else a2a_s


# Key-value passes of context parallelism per layer and micro-batch: the forward receives the
# other ranks' K and V once; the backward receives them again and sends their gradients back
# (Megatron-Core's ring attention), 3 in all.
CP_KV_PASSES = 3


def _cp_comm_s(job: Job, cluster: Cluster, layout: Layout, micro_batches: int) -> float:
    """Seconds one rank spends receiving the keys and values of the rest of its context-parallel
    ring: per layer of its pipeline stage and micro-batch, (cp-1)/cp of a sequence's K and V of
    its TP share of the KV heads in 16 bits, CP_KV_PASSES times, over the ring's bus bandwidth
    (CP ranks sit next to TP ones)."""
    n = layout.cp
    shape = job.shape
    if n == 1 or shape.layers is None or shape.kv_heads is None or shape.head_dim is None:
        return 0.0
    kv = 2 * job.seq_len * job.micro_batch * _kv_heads_per_rank(job, layout) * shape.head_dim
    kv *= GRAD_BYTES
    volume = CP_KV_PASSES * shape.layers / layout.pp * micro_batches * kv * (n - 1) / n
    return volume / (cluster.ring_gb_s(n, layout.tp) * GB)


def _kv_heads_per_rank(job: Job, layout: Layout) -> int:
    """A TP rank's share of the KV heads (at least one)."""
    return max(1, (job.shape.kv_heads or 1) // layout.tp)


def _dp_bytes(job: Job, layout: Layout) -> tuple[float, float | None]:
    """(gradient bytes per rank, weight bytes ZeRO-3 gathers per pass or None without it)."""
    split = layout.tp * layout.pp
    grads = job.trainable_params / split * GRAD_BYTES
    weights = job.shape.params / split * GRAD_BYTES if layout.zero_stage == 3 else None
    return grads, weights


def _tp_comm_s(job: Job, cluster: Cluster, layout: Layout, tokens_per_rank: float) -> float:
    t = layout.tp
    if t == 1 or job.shape.layers is None or job.shape.hidden is None:
        return 0.0
    per_token = job.shape.layers / layout.pp * job.shape.hidden * GRAD_BYTES
    volume = tp_collectives(job.recompute) * per_token * tokens_per_rank * 2 * (t - 1) / t
    return volume * _tp_split_share(job, layout) / (cluster.intra_gb_s() * GB)


def _tp_split_share(job: Job, layout: Layout) -> float:
    """Share of a layer's TP collectives that remain: all of them, or with expert parallelism
    the attention block's half (2 of the 4 per layer and token, Korthikanti et al. 2022 section
    4.2.2): the experts run whole on their EP rank (expert tensor parallel 1, Megatron-Core's
    MoE parallel folding, Liu et al. 2025 arXiv:2504.14960), fed by the all-to-alls instead."""
    return 0.5 if layout.ep > 1 and job.shape.expert_params else 1.0


def _tp_exposed_s(tp_s: float, compute_s: float) -> float:
    """TP communication left on the critical path: all but TP_OVERLAP_FRACTION of it, and never
    less than what the step's compute cannot cover."""
    return max(tp_s - compute_s, (1 - TP_OVERLAP_FRACTION) * tp_s)


@dataclass(frozen=True, slots=True)
class Run:
    """A whole training run on one layout: wall time, GPU-hours, utilisation, the figures."""

    layout: Layout
    gpus: int  # rented (may exceed layout.gpus when a node's GPUs do not divide evenly)
    hours: float  # wall time including goodput
    step: Step
    mfu: float  # steady state, on model FLOPs (6ND; 4ND + 6AD with adapters)
    hfu: float  # hardware FLOPs utilisation (8ND with full recomputation)
    goodput: float
    # The figures' words are built when asked for: a layout search times tens of thousands of
    # runs and shows one.
    explain: Callable[[], tuple[Figure, ...]] = field(repr=False, compare=False)

    @property
    def gpu_hours(self) -> float:
        return self.hours * self.gpus

    @property
    def figures(self) -> tuple[Figure, ...]:
        return self.explain()


def _wall_hours(job: Job, step: Step, gpus: int) -> tuple[float, float, float]:
    """(hours without interruptions, the goodput, hours) of `job` at `step` seconds a step on
    `gpus` GPUs."""
    raw_h = job.steps * step.seconds / SECONDS_PER_HOUR
    share = goodput(gpus)
    return raw_h, share, raw_h / share


def gpu_hours(job: Job, cluster: Cluster, layout: Layout, rented_gpus: int) -> float:
    """run_time's GPU-hours alone, without its figures: what a layout search compares."""
    return _wall_hours(job, step_time(job, cluster, layout), rented_gpus)[2] * rented_gpus


def run_time(job: Job, cluster: Cluster, layout: Layout, rented_gpus: int) -> Run:
    """Wall time of `job` on `layout` (inside `rented_gpus` rented GPUs)."""
    step = step_time(job, cluster, layout)
    raw_h, share, hours = _wall_hours(job, step, rented_gpus)
    peak = rented_gpus * cluster.peak_tflops * TERA
    mfu = job.model_flops(job.tokens) / (peak * raw_h * SECONDS_PER_HOUR)
    executed = job.flops(job.tokens, job.recompute) + job.attention_flops(job.tokens, job.recompute)
    hfu = mfu * executed / job.model_flops(job.tokens)
    return Run(
        layout,
        rented_gpus,
        hours,
        step,
        mfu,
        hfu,
        share,
        partial(_figures, job, cluster, layout, rented_gpus, step, (raw_h, hours, mfu, hfu)),
    )


def _dp_formula(job: Job, cluster: Cluster, layout: Layout, micro: int) -> str:
    """_dp_comm_s's operands, as it uses them."""
    rings = [r for r in _dp_rings(job, layout, micro) if r.ranks > 1]
    if not rings:
        return "one data-parallel rank: nothing to reduce"
    what = "all" if job.method in EVERY_WEIGHT else "adapter"
    parts = []
    for ring, name in zip(rings, ("", " (experts, over EP)"), strict=False):
        n = ring.ranks
        kind = "all-reduces" if ring.all_reduce else "all-gathers/reduce-scatters"
        parts.append(
            f"{ring.volume / GB:.4g} GB{name} x ({n}-1)/{n} / "
            f"{cluster.ring_gb_s(n, ring.stride):,.1f} GB/s bus bandwidth + {ring.calls:,} "
            f"{kind} x {ring.latency_s(cluster):.4g} s latency"
        )
    how = (
        f"{micro} micro-batches x (2 x the weights + the {what} gradients) a rank holds, "
        f"{ZERO3_CALLS_PER_LAYER} collectives per layer"
        if layout.zero_stage == 3
        else f"2 x the {what} gradients a rank holds, in {DDP_BUCKET_BYTES // 2**20} MiB buckets"
    )
    return " + ".join(parts) + f" [{how}; NCCL latency model]"


def _figures(
    job: Job,
    cluster: Cluster,
    layout: Layout,
    gpus: int,
    step: Step,
    times: tuple[float, float, float, float],
) -> tuple[Figure, ...]:
    raw_h, hours, mfu, hfu = times
    model = training_flops(job.shape, job.tokens, False, job.method, job.lora_rank)
    seqs = job.sequences_per_step
    busy, micro = _ranks(job, layout)
    tokens = seqs * job.seq_len
    step_gemm = training_flops(job.shape, tokens, job.recompute, job.method, job.lora_rank)
    step_attention = attention_training_flops(job.shape, tokens, job.seq_len, job.recompute)
    attention = attention_training_flops(job.shape, job.tokens, job.seq_len)
    bubble = _bubble(job, layout, micro)
    attention_part = (
        f" + {step_attention.value:.4g} attention FLOP [{step_attention.formula}] / "
        + _attention_rate_words(job, cluster, layout.cp)
        if step_attention.value
        else ""
    )
    out = [
        model,
        attention,
        Figure("parallel_layout", layout.gpus, "GPUs", layout.words()),
        Figure(
            "compute_s_per_step",
            step.compute_s,
            "s",
            f"({step_gemm.value:.4g} GEMM FLOP [{step_gemm.formula}] / ({cluster.peak_tflops:g} "
            f"TFLOP/s x {job.efficiency:.4g} efficiency){_gemm_factor_words(job, cluster, layout)}"
            f"{attention_part}) / ({busy} x "
            f"{layout.tp * layout.pp * layout.cp} GPUs)"
            + _stage_words(job, layout)
            + (f" x (1 + pipeline bubble {bubble:.3g})" if bubble else ""),
        ),
        Figure("dp_comm_s_per_step", step.dp_comm_s, "s", _dp_formula(job, cluster, layout, micro)),
    ]
    if step.pp_comm_s:
        out.append(
            Figure(
                "pp_comm_s_per_step",
                step.pp_comm_s,
                "s",
                f"2 x {_virtual_stages(job, layout)} virtual stages x {micro} micro-batches x "
                f"{_pp_message(job, layout) / GB:.4g} GB of hidden states (s x b x h x 2 bytes "
                f"/ TP {layout.tp}) / {_pp_bw(cluster, layout):,.1f} GB/s (pipeline "
                "point-to-point)",
            )
        )
    if step.cp_comm_s:
        shape = job.shape
        out.append(
            Figure(
                "cp_comm_s_per_step",
                step.cp_comm_s,
                "s",
                f"{CP_KV_PASSES} passes x {shape.layers} layers / PP {layout.pp} x {micro} "
                f"micro-batches x (2 x {job.seq_len} tokens x {job.micro_batch} x "
                f"{_kv_heads_per_rank(job, layout)} KV heads per TP rank x "
                f"{shape.head_dim} x {GRAD_BYTES} bytes) x "
                f"({layout.cp}-1)/{layout.cp} / {cluster.ring_gb_s(layout.cp, layout.tp):,.1f} "
                "GB/s bus bandwidth "
                + (
                    "(keys and values all-gathered before attention, on the critical path)"
                    if job.cp_all_gather
                    else "(keys and values round the context-parallel ring)"
                ),
            )
        )
    if step.a2a_comm_s:
        shape = job.shape
        local, remote = _a2a_copies(job, cluster, layout)
        out.append(
            Figure(
                "a2a_comm_s_per_step",
                step.a2a_comm_s,
                "s",
                f"{A2A_PER_LAYER} all-to-alls x {shape.layers} layers / PP {layout.pp} x {micro} "
                f"micro-batches x {job.micro_batch * job.seq_len / layout.cp / layout.tp:.6g} "
                f"tokens (/ CP / TP) x {shape.hidden} hidden x {GRAD_BYTES} bytes x "
                f"({local:.3g} copies at {cluster.intra_gb_s():g} GB/s + {remote:.3g} at "
                f"{cluster.inter_gb_s():.3g} GB/s) over EP {layout.ep} of "
                f"top-{shape.experts_per_token}"
                + (f", node-limited to {shape.route_nodes} nodes" if shape.route_nodes else "")
                + (
                    " (hidden under compute: expert overlap)"
                    if job.expert_overlap
                    else " (on the critical path)"
                ),
            )
        )
    if step.tp_comm_s:
        out.append(
            Figure(
                "tp_comm_s_per_step",
                step.tp_comm_s,
                "s",
                f"{tp_collectives(job.recompute):g} all-reduces x layers x hidden x 2 bytes per "
                f"token, TP {layout.tp}, at {cluster.intra_gb_s():g} GB/s "
                f"({TP_OVERLAP_FRACTION:.0%} hidden under the GEMMs: TP communication overlap)",
            )
        )
    out += [
        Figure(
            "step_s",
            step.seconds,
            "s",
            f"compute {step.compute_s:.3g} + exposed communication {step.exposed_s:.3g} "
            f"(at least {1 - OVERLAP_FRACTION:.0%} of data-parallel communication never hides, "
            f"{1 - TP_OVERLAP_FRACTION:.0%} of TP's)",
        ),
        Figure(
            "mfu",
            mfu,
            "fraction",
            f"({model.value:.4g} + {attention.value:.4g} attention) model FLOP / ({gpus} GPUs x "
            f"{cluster.peak_tflops:g} TFLOP/s x "
            f"{raw_h * SECONDS_PER_HOUR:.4g} s)",
        ),
    ]
    if job.recompute:
        out.append(
            Figure(
                "hfu", hfu, "fraction", f"MFU x {hfu / mfu:.4g} (the recomputed forward's FLOPs)"
            )
        )
    out.append(
        Figure(
            "hours",
            hours,
            "h",
            f"{job.steps:,.1f} steps of {seqs * job.seq_len:,} tokens x {step.seconds:.3g} s / 3600"
            + f" / goodput {raw_h / hours:.4g} (1 / (1 + {FAILURES_PER_GPU_HOUR:.3g} "
            f"interruptions per GPU-hour x {gpus} GPUs x {INTERRUPTION_COST_H:.2f} h "
            "each); Llama 3: 419 in 54 days on 16,384 GPUs)",
        )
    )
    return tuple(out)


def _gemm_factor_words(job: Job, cluster: Cluster, layout: Layout) -> str:
    """The GEMM time's factor (gemm_factor) and where it comes from; nothing when it is 1."""
    factor = gemm_factor(job, cluster, layout)
    if factor == 1.0:
        return ""
    why = []
    dense = dense_shape_factor(job, cluster, layout)
    if dense != 1.0:
        tokens = rank_tokens(job, layout)
        why.append(
            f"the layer's GEMMs at TP {layout.tp} on {tokens:,.0f} tokens: {dense:.4g} x the "
            "8,192 cube's time for the same FLOPs, the operator table's"
        )
    if job.shape.experts and job.shape.expert_params:
        why.append(
            f"the experts' grouped GEMMs on {tokens_per_expert(job, layout):,.0f} tokens an "
            f"expert, x {EXPERT_LOAD_IMBALANCE:g} for the busiest"
        )
    return f" x {factor:.4g} ({'; '.join(why)})"


def _attention_rate_words(job: Job, cluster: Cluster, cp: int) -> str:
    """The attention rate a step's compute figure divides by, and where it comes from."""
    measured = _table_attention(job, cluster, cp)
    table = cluster.attention_table
    if measured is None or table is None:
        return f"({cluster.attention_peak:g} TFLOP/s x {ATTENTION_EFFICIENCY:g} attention kernels)"
    flops = job.attention_flops(job.seq_len, job.recompute)
    beyond = f", extrapolated: {'; '.join(measured.beyond)}" if measured.beyond else ""
    blocks = (
        f" in {cp} x {cp} blocks of {job.seq_len / cp:,.0f} tokens (context-parallel ring)"
        if cp > 1 and not job.cp_all_gather
        else ""
    )
    return (
        f"({flops / measured.seconds / TERA:.4g} TFLOP/s [a sequence's forward and backward"
        f"{blocks} as timed by the {table.source}{beyond}])"
    )


def peak16_tflops(acc: Accelerator) -> float | None:
    """Dense 16-bit peak (bf16, else fp16) in TFLOP/s: what training and GPU fitting read."""
    return acc.peak_tflops.bf16 or acc.peak_tflops.fp16


TRAINING_PRECISIONS = ("bf16", "fp16", "fp8", "fp4")
LOW_PRECISION_TRAINING = ("fp8", "fp4")  # on tensor cores the chip must have (refused elsewhere)
# The share of the 16-bit peak fused attention kernels reach over forward and backward, which
# dominate at long context. ESTIMATED from the published kernel figures, not from the rows:
# FlashAttention-2 reaches 50-73% of the A100's peak (Dao 2023, arXiv:2307.08691, abstract and
# section 4.1); FlashAttention-3 75% of the H100's in the forward (Shah et al. 2024,
# arXiv:2407.08608, abstract), its backward less. Measured on the lent H200 through torch 2.11's
# fused attention (benchmarks/attention_training_shapes.py, results under benchmarks/results/
# attention-training-2026-12-04-*): 0.46 of the peak in this count from 16k to 128k tokens, less
# below. Kept at 0.65: the long-context training rows (Transformer Engine's attention, 64k-1M
# tokens) fit with it and fall to 0.59-0.76 of their published speed with 0.42; the kernels set
# this share, so a measured one comes from the operator table of the stack in use: with tables on
# (unless ADVISOR_OPERATOR_TABLES=off) its training rows replace this constant (_attention_s).
ATTENTION_EFFICIENCY = 0.65
# The share of the FP8 dense peak an FP8 training step's kernels reach, relative to the share of
# the 16-bit peak a 16-bit step reaches. ESTIMATED, set by hand as one value from the NeMo FP8
# pretraining rows (tests/data/published.yaml nemo2407-*, published-2.yaml nemo2407b-*): FP8
# doubles the tensor-core rate of the linear layers' GEMMs, while the casts, amax bookkeeping
# and the memory-bound kernels between them do not speed up (Transformer Engine's FP8 recipes run
# at 1.3-1.5x of BF16 end to end, not 2x).
FP8_RELATIVE_EFFICIENCY = 0.78


# NVFP4 pretraining (NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv:2509.25149,
# 2025, section 4): the linear layers' forward, data-gradient and weight-gradient GEMMs run in
# NVFP4 on Blackwell's FP4 tensor cores, but a few sensitive linear layers stay in BF16 (about
# 15% of them: the final blocks of its 12B model), as do attention, the embeddings, the output
# head, master weights and optimizer states. The FP4 peak is 2x the FP8 one on B200/GB200 and 3x
# on B300/GB300 (NVIDIA's "up to 3x speedups over FP8" is that GEMM ratio; no end-to-end
# training throughput is published).
FP4_BF16_LINEAR_SHARE = 0.15
# The share of the FP4 peak an NVFP4 step's FP4 GEMMs reach, relative to a 16-bit step's share
# of the 16-bit peak. ESTIMATED below FP8's 0.78: NVFP4 adds a random Hadamard transform on the
# weight-gradient inputs, 2D block scaling and stochastic rounding of the gradients around every
# GEMM (arXiv:2509.25149 section 4), memory-bound kernels that do not speed up.
FP4_RELATIVE_EFFICIENCY = 0.6


def training_peaks(acc: Accelerator, precision: str) -> tuple[float, float, float]:
    """(GEMM peak, attention peak) in TFLOP/s and the efficiency factor of training in
    `precision` on `acc`: 16-bit at the bf16 (else fp16) rate; fp8 with the linear layers' GEMMs
    at the FP8 rate, attention at the 16-bit one (module doc). (0, 0, 1) where the chip has no
    rate for it."""
    peak16 = peak16_tflops(acc) or 0.0
    if precision == "fp4":
        return fp4_training_peaks(acc.peak_tflops.fp4 or 0.0, peak16)
    if precision == "fp8":
        fp8 = acc.peak_tflops.fp8
        return (fp8, peak16, FP8_RELATIVE_EFFICIENCY) if fp8 else (0.0, 0.0, 1.0)
    return peak16, peak16, 1.0


def fp4_training_peaks(fp4: float, peak16: float) -> tuple[float, float, float]:
    """training_peaks in fp4 (NVFP4): the FP4 peak, attention at the 16-bit one, and the factor
    that times the linear GEMMs as the recipe runs them: 1 - FP4_BF16_LINEAR_SHARE of their
    FLOPs at the FP4 peak x FP4_RELATIVE_EFFICIENCY, the rest at the 16-bit peak:
    1 / (fp4 x ((1 - s) / (fp4 x f) + s / bf16)). (0, 0, 1) without an FP4 rate."""
    if not fp4 or not peak16:
        return 0.0, 0.0, 1.0
    s = FP4_BF16_LINEAR_SHARE
    factor = 1 / (fp4 * ((1 - s) / (fp4 * FP4_RELATIVE_EFFICIENCY) + s / peak16))
    return fp4, peak16, factor
