"""Training time: model FLOPs, per-step compute and communication, the parallel layout, goodput.

Pure. The time model beside advisor/perf/inference.py; advisor/planning/training_plan.py chooses the
layout (memory) and GPU count (deadline) and reads the time of each from here.

- Model FLOPs are 6·N·D (sizing.training_flops, recompute=False; Kaplan et al. 2020). The
  calibrated efficiency is a model-FLOPs utilisation (MFU), as the published figures it is
  calibrated on are (Llama 3 arXiv:2407.21783 Table 4, Megatron-LM README): time is 6·N·D at that
  MFU. Full recomputation runs 8·N·D hardware FLOPs (HFU = MFU x 8/6), reported separately,
  never put in the time a second time (shared/REFERENCE.md section 4).
- A step processes the global batch (Llama 2: "All models are trained with a global batch-size
  of 4M tokens", arXiv:2307.09288 / meta-llama/llama-models models/llama2/MODEL_CARD.md).
- Data-parallel communication per step (ZeRO, Rajbhandari et al. 2019, section 7): DP and ZeRO
  1/2 move 2Ψ (gradient reduce-scatter + parameter all-gather, or one all-reduce); ZeRO 3 / FSDP
  3Ψ (parameter all-gather in the forward and the backward, gradient reduce-scatter), Ψ the
  16-bit bytes of the parameters a rank holds. Ring time = bytes x (n-1)/n / busbw, the nccl-tests
  convention (shared/REFERENCE.md section 4: all-gather/reduce-scatter busbw = algbw x (n-1)/n).
- Tensor parallelism (Megatron-LM, Narayanan et al. 2021; Korthikanti et al. 2022 with sequence
  parallelism): per layer and token, 4 all-reduce-equivalents of the hidden state (2 forward, 2
  backward; 6 with full recomputation), inside one node. Pipeline parallelism: bubble (p-1)/(v m)
  of the compute, m micro-batches per step, v virtual stages (Narayanan et al. 2021 2.2).
- Bandwidth: inside a node the instance's GPU link per direction (link/2; PCIe when 0, the
  inference model's figure); across nodes the instance network per GPU (Gbit/s / 8 / GPUs per
  node) times the ring's GPUs on each node (one NCCL channel per NIC), at most the link.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.catalog.models import Accelerator
from advisor.perf.inference import PCIE_ALLREDUCE_GB_S
from advisor.perf.sizing import (
    DEFAULT_LORA_RANK,
    Figure,
    Shape,
    lora_adapter_params,
    training_flops,
)
from advisor.units import GB

GRAD_BYTES = 2  # 16-bit gradients and parameters on the wire (mixed precision, ZeRO paper)
# Llama 2 (arXiv:2307.09288 section 2.2; model card): global batch of 4M tokens = 1024 x 4096.
DEFAULT_GLOBAL_BATCH_TOKENS = 1024 * 4096
# Share of a phase's (forward or backward) communication that can run under its compute
# (bucketed all-reduce during the backward: PyTorch DDP, Li et al. VLDB 2020; FSDP/ZeRO-3
# prefetch of the next layer's parameters; Megatron-Core's DP/TP overlap). ESTIMATED: the rest
# cannot hide (the first gather before the first layer, the last bucket after the last layer's
# backward, collectives slowing the kernels they share the GPU with).
OVERLAP_FRACTION = 0.8
# Llama 3 (arXiv:2407.21783 section 3.3.4): 466 job interruptions in a 54-day snapshot on 16K
# H100s, "higher than 90% effective training time" (failures, restarts, evaluation). Applied to
# runs long enough to meet them: LONG_RUN_H is ESTIMATED (a run under a day rarely restarts).
GOODPUT = 0.90
LONG_RUN_H = 24.0
# TP all-reduce-equivalents of the hidden state per layer per token (Korthikanti et al. 2022,
# section 4.2.2: 4 without recomputation, 6 with full recomputation).
TP_COLLECTIVES = {False: 4, True: 6}
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

    peak_tflops: float  # dense, per GPU, at the training precision
    per_node: int
    link_gb_s: float  # per-GPU GPU link, both directions (catalog convention); 0: PCIe
    network_gbps: float  # per node, between nodes

    def intra_gb_s(self) -> float:
        """Bus bandwidth of a collective inside one node (one direction of the link)."""
        return self.link_gb_s / 2 if self.link_gb_s else PCIE_ALLREDUCE_GB_S

    def inter_gb_s(self) -> float:
        """Bus bandwidth per GPU of a collective across nodes: the network shared by the node."""
        return max(self.network_gbps, 1e-3) / 8 / self.per_node

    def ring_gb_s(self, ranks: int, stride: int) -> float:
        """Bus bandwidth of a ring of `ranks` GPUs `stride` apart (TP GPUs between DP peers):
        the link while the ring stays inside a node; across nodes, the network share of the
        ring's GPUs on each node (NCCL runs a channel per NIC, so a ring holding k GPUs of a
        node moves data over k GPUs' share of its network), at most the link."""
        if ranks * stride <= self.per_node:
            return self.intra_gb_s()
        on_node = max(1, self.per_node // stride)
        return min(self.intra_gb_s(), self.inter_gb_s() * on_node)


@dataclass(frozen=True, slots=True)
class Layout:
    """How GPUs split the work: data parallel x tensor parallel (inside a node) x pipeline."""

    dp: int
    tp: int = 1
    pp: int = 1
    zero_stage: int = 3

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp

    def words(self) -> str:
        return f"DP {self.dp} x TP {self.tp} x PP {self.pp}, ZeRO stage {self.zero_stage}"


@dataclass(frozen=True, slots=True)
class Job:
    """What one training run is: the model, tokens, sequence, micro-batch, recomputation, the
    global batch, and the calibrated MFU it runs at."""

    shape: Shape
    tokens: float
    seq_len: int
    micro_batch: int
    recompute: bool
    mfu: float  # calibrated model-FLOPs utilisation (workload profile / fleet)
    global_batch_tokens: int = DEFAULT_GLOBAL_BATCH_TOKENS
    method: str = "full"  # full, lora or qlora (sizing.training_flops / training_memory)
    lora_rank: int = DEFAULT_LORA_RANK

    def flops(self, tokens: float, recompute: bool = False) -> float:
        """Model FLOPs (hardware FLOPs with `recompute`) of `tokens` tokens for this method:
        the one FLOPs rule, sizing.training_flops."""
        return training_flops(self.shape, tokens, recompute, self.method, self.lora_rank).value

    @property
    def trainable_params(self) -> float:
        """Parameters with gradients: every weight, or the LoRA/QLoRA adapters."""
        if self.method == "full":
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

    compute_s: float  # at the calibrated MFU, with the pipeline bubble
    dp_comm_s: float
    tp_comm_s: float
    exposed_s: float  # communication not hidden under compute
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
    flops = job.flops(seqs * job.seq_len)  # model FLOPs: 6ND, or 4ND + 6AD with adapters
    compute = flops / (busy * layout.tp * layout.pp * cluster.peak_tflops * 1e12 * job.mfu)
    compute *= 1 + _bubble(job, layout, micro)
    dp = _dp_comm_s(job, cluster, layout, micro)
    tp = _tp_comm_s(job, cluster, layout, seqs * job.seq_len / busy)
    # The forward is 1/3 of the compute, the backward 2/3 (2ND vs 4ND). What runs under each:
    # ZeRO-3's parameter gather (1 of 3 passes) and ZeRO-1/2's parameter all-gather (1 of 2,
    # overlapped with the next forward) under the forward, gradient reduction under the
    # backward; TP's forward collectives (2 of 4, or of 6 with recomputation) under the
    # forward, the rest under the backward (Megatron-Core overlaps DP and TP communication).
    fwd = dp * DP_FORWARD_SHARE[min(layout.zero_stage, 3)] + tp * 2 / TP_COLLECTIVES[job.recompute]
    bwd = dp + tp - fwd
    exposed = _exposed(fwd, compute / 3) + _exposed(bwd, compute * 2 / 3)
    return Step(compute, dp, tp, exposed, busy)


def _exposed(comm_s: float, compute_s: float) -> float:
    """Communication of one phase left on the critical path: what the phase's compute cannot
    cover, and never less than the share that cannot overlap at all."""
    return max(comm_s - compute_s, (1 - OVERLAP_FRACTION) * comm_s)


def _bubble(job: Job, layout: Layout, micro_batches: int) -> float:
    """Pipeline bubble, a share of the compute: (p-1)/(v m) for the interleaved 1F1B schedule
    of v virtual stages per GPU (Narayanan et al. 2021 section 2.2.2)."""
    p = layout.pp
    if p == 1:
        return 0.0
    v = max(1, (job.shape.layers or p) // (p * LAYERS_PER_VIRTUAL_STAGE))
    return (p - 1) / (v * micro_batches)


def _dp_comm_s(job: Job, cluster: Cluster, layout: Layout, micro_batches: int) -> float:
    """Data-parallel bytes of one step over the ring's bus bandwidth. ZeRO-3 / FSDP gathers the
    parameters for the forward and the backward of every micro-batch and reduce-scatters its
    gradients (PyTorch FSDP and DeepSpeed ZeRO-3 keep no unsharded copy between them);
    DP and ZeRO-1/2 reduce accumulated gradients once per step. Only trained parameters have
    gradients (LoRA: the adapters); ZeRO-3 shards and gathers the frozen weights too (counted
    at 16 bits: QLoRA's 4-bit weights move less)."""
    n = layout.dp
    if n == 1:
        return 0.0
    grads, weights = _dp_bytes(job, layout)
    volume = micro_batches * (2 * weights + grads) if weights is not None else 2 * grads
    bw = cluster.ring_gb_s(n, layout.tp * layout.pp)
    return volume * (n - 1) / n / (bw * GB)


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
    volume = TP_COLLECTIVES[job.recompute] * per_token * tokens_per_rank * 2 * (t - 1) / t
    return volume / (cluster.intra_gb_s() * GB)


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
    figures: tuple[Figure, ...]

    @property
    def gpu_hours(self) -> float:
        return self.hours * self.gpus


def run_time(job: Job, cluster: Cluster, layout: Layout, rented_gpus: int) -> Run:
    """Wall time of `job` on `layout` (inside `rented_gpus` rented GPUs)."""
    step = step_time(job, cluster, layout)
    steps = job.steps
    raw_h = steps * step.seconds / 3600
    goodput = GOODPUT if raw_h > LONG_RUN_H else 1.0
    hours = raw_h / goodput
    model = training_flops(job.shape, job.tokens, False, job.method, job.lora_rank)
    peak = rented_gpus * cluster.peak_tflops * 1e12
    mfu = model.value / (peak * raw_h * 3600)
    hfu = mfu * (job.flops(1.0, True) / job.flops(1.0) if job.recompute else 1.0)
    return Run(
        layout,
        rented_gpus,
        hours,
        step,
        mfu,
        hfu,
        goodput,
        _figures(job, cluster, layout, rented_gpus, step, model, (raw_h, hours, mfu, hfu)),
    )


def _dp_formula(job: Job, cluster: Cluster, layout: Layout, micro: int) -> str:
    """_dp_comm_s's operands, as it uses them."""
    n = layout.dp
    if n == 1:
        return "one data-parallel rank: nothing to reduce"
    grads, weights = _dp_bytes(job, layout)
    bw = cluster.ring_gb_s(n, layout.tp * layout.pp)
    what = "adapter" if job.method != "full" else "all"
    volume = (
        f"{micro} micro-batches x (2 x {weights / GB:.4g} GB weights + {grads / GB:.4g} GB "
        f"{what} gradients)"
        if weights is not None
        else f"2 x {grads / GB:.4g} GB {what} gradients"
    )
    return f"{volume} x ({n}-1)/{n} / {bw:,.1f} GB/s bus bandwidth"


def _figures(
    job: Job,
    cluster: Cluster,
    layout: Layout,
    gpus: int,
    step: Step,
    model: Figure,
    times: tuple[float, float, float, float],
) -> tuple[Figure, ...]:
    raw_h, hours, mfu, hfu = times
    seqs = job.sequences_per_step
    busy, micro = _ranks(job, layout)
    step_flops = training_flops(job.shape, seqs * job.seq_len, False, job.method, job.lora_rank)
    bubble = _bubble(job, layout, micro)
    out = [
        model,
        Figure("parallel_layout", layout.gpus, "GPUs", layout.words()),
        Figure(
            "compute_s_per_step",
            step.compute_s,
            "s",
            f"{step_flops.value:.4g} FLOP per step [{step_flops.formula}] / ({busy} x "
            f"{layout.tp * layout.pp} GPUs x {cluster.peak_tflops:g} TFLOP/s x {job.mfu:.2f} MFU)"
            + (f" x (1 + pipeline bubble {bubble:.3g})" if bubble else ""),
        ),
        Figure("dp_comm_s_per_step", step.dp_comm_s, "s", _dp_formula(job, cluster, layout, micro)),
    ]
    if step.tp_comm_s:
        out.append(
            Figure(
                "tp_comm_s_per_step",
                step.tp_comm_s,
                "s",
                f"{TP_COLLECTIVES[job.recompute]} all-reduces x layers x hidden x 2 bytes per "
                f"token, TP {layout.tp}, at {cluster.intra_gb_s():g} GB/s",
            )
        )
    out += [
        Figure(
            "step_s",
            step.seconds,
            "s",
            f"compute {step.compute_s:.3g} + exposed communication {step.exposed_s:.3g} "
            f"(at least {1 - OVERLAP_FRACTION:.0%} of communication never hides)",
        ),
        Figure(
            "mfu",
            mfu,
            "fraction",
            f"{model.value:.4g} model FLOP / ({gpus} GPUs x {cluster.peak_tflops:g} TFLOP/s x "
            f"{raw_h * 3600:.4g} s)",
        ),
    ]
    if job.recompute:
        ratio = job.flops(1.0, True) / job.flops(1.0)
        out.append(
            Figure("hfu", hfu, "fraction", f"MFU x {ratio:.4g} (the recomputed forward's FLOPs)")
        )
    out.append(
        Figure(
            "hours",
            hours,
            "h",
            f"{job.steps:,.1f} steps of {seqs * job.seq_len:,} tokens x {step.seconds:.3g} s / 3600"
            + (f" / goodput {GOODPUT:.2f} (Llama 3: >90% effective)" if hours != raw_h else ""),
        )
    )
    return tuple(out)


def peak16_tflops(acc: Accelerator) -> float | None:
    """Dense 16-bit peak (bf16, else fp16) in TFLOP/s: what training and GPU fitting read."""
    return acc.peak_tflops.bf16 or acc.peak_tflops.fp16
