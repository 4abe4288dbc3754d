"""The inference performance model: TTFT, inter-token latency and throughput. Pure (no torch).

For (model shape, accelerator, GPUs, tensor-parallel degree, precision, input tokens, output
tokens, concurrency):

- one forward pass (an iteration) over D decode tokens and P prompt tokens runs two kinds of
  kernels one after the other, each bound by its own roofline (a per-operator roofline, as in
  Yuan et al. 2024, "LLM Inference Unveiled: Survey and Roofline Model Insights", and
  LLM-Viewer): the GEMMs read the weights they touch (MoE: the expected distinct experts, below)
  and do 2 x active params x (D + P) FLOPs; attention reads the decode tokens' KV cache (each
  copy the TP ranks hold: sizing.kv_copies) and does 4 x layers x D x L x heads x head_dim
  (MLA: 2 x (latent + RoPE key + latent) for head_dim x 2, absorbed) + 2 x layers x P x I x
  heads x head_dim FLOPs (L = the mean decode context I + O / 2, I = the prompt length: causal
  attention over the prompt). Its time
  is max(weights / (TP x bandwidth x eff_bw), GEMM FLOPs / (TP x peak x eff_compute))
  + max(KV / (TP x bandwidth x eff_bw), attention FLOPs / (TP x peak x eff_compute)) plus the
  sampling of every token that needs logits (D + P / I: FP32 logits over the vocabulary,
  SAMPLING_PASSES times, at the same bandwidth), the all-reduces of D + P tokens, the kernels'
  launches (KERNELS_PER_LAYER a layer, KERNEL_LAUNCH_S each) and the per-layer time no GPU
  cost explains (UNEXPLAINED_LAYER_S, estimated); with a measured operator table, every term
  but the all-reduces and that unexplained time comes from the table instead (op_model.py);
- prefill of one prompt of I tokens (TTFT, at low load: no queueing modelled) is one iteration
  with D = 0 and P = I; the decode step of B sequences is one with D = B and P = 0;
- continuous (in-flight) batching packs the prompts of newly admitted sequences into the same
  iteration as the batch's decode tokens (Orca, Yu et al. OSDI 2022, iteration-level scheduling;
  TensorRT-LLM in-flight batching with chunked context; Sarathi-Serve, Agrawal et al. OSDI 2024,
  piggybacked prefill chunks): in steady state B sequences of O output tokens admit B / O new
  prompts per iteration, so the inter-token latency is one iteration with D = B and
  P = B x I / O (that iteration pays the weight reads and the per-layer time once, not once per
  prompt), and the output throughput of one replica is B / ITL. TensorRT-LLM's trtllm-bench
  sizes the engine's per-iteration token budget to exactly this, max_num_tokens =
  max_batch_size x (1 + I / O) (tensorrt_llm/bench/build/tuning.py, finetune_setting), and its
  max_batch_size to the KV-cache-bound request count, so neither limits the memory-bound
  concurrency below;
- tensor parallelism only inside one node: 2 all-reduces per layer (after attention and after
  the MLP, Megatron-LM, Shoeybi et al. 2019 section 3) of (D + P) x hidden x 2 bytes each, ring cost
  2(n-1)/n x bytes / link bandwidth + a latency per call (nccl-tests PERFORMANCE.md), which over
  PCIe (no GPU-to-GPU fabric) grows with the ring's n - 1 hops (PCIE_ALLREDUCE_LATENCY_S);
- concurrency is bounded by memory: per GPU, usable memory - weights / TP must hold the KV cache
  of B sequences of I + O tokens / TP; MoE memory holds every expert, compute uses active ones.

MoE weights touched by a batch: each token picks k of E experts per layer; with uniform,
independent routing the chance an expert is picked by none of B tokens is (1 - k/E)^B, so the
expected number of distinct experts read per layer is E x (1 - (1 - k/E)^B) (linearity of
expectation; the same estimate is used for expert load in the Switch Transformer analysis,
Fedus et al. 2021, and in MoE-Lightning / "Towards MoE deployment" memory-traffic models). At
B = 1 it is k: only active experts are read. B counts every token of the iteration (D + P).

Calibration constants: 2 per accelerator generation (compute efficiency, bandwidth efficiency),
in EFFICIENCY below, plus 4 shared ones (all-reduce latency over a GPU fabric and over PCIe,
PCIe fallback bandwidth, the per-layer time the kernels' launches do not explain; the PCIe
latency is a measured nccl-tests figure, not calibrated). The efficiencies were set from the
published TensorRT-LLM rows in tests/data/published.yaml (sources: docs/reference-figures.md
section 5) as one value per generation by hand, never per row; benchmarks/bench_calibration.py
prints every row's ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from advisor.catalog.corrections import stored_correction
from advisor.catalog.models import Accelerator, Generation
from advisor.errors import InputError, field_name
from advisor.perf.efficiency import BLACKWELL, CDNA3
from advisor.perf.headroom import usable_memory_gb
from advisor.perf.multi_lora import lora_pass_s
from advisor.perf.op_model import OpModel, TableIteration
from advisor.perf.precision import ComputePrecision, compute_precision
from advisor.perf.serving_sim import (
    Distribution,
    LoadResult,
    Request,
    Scheduler,
    poisson_arrivals,
    simulate,
)
from advisor.perf.sizing import (
    BYTES_PER_WEIGHT,
    Figure,
    Shape,
    inference_memory,
    kv_cache_bytes_per_token,
    kv_copies,
)
from advisor.perf.speculative import Speculation, iterations_for, per_token, verify_step
from advisor.perf.targets import Targets
from advisor.perf.trace_file import Trace
from advisor.units import GB, TERA

# (compute efficiency, memory-bandwidth efficiency) per generation. ESTIMATED: set by hand from
# the TensorRT-LLM 0.17 perf-overview rows (tests/data/published.yaml: Llama-3.1-8B FP8 on H100
# at max load implies ~47-49% of dense FP8 peak as model FLOPs; FP16 on A100 ~60-68%); memory
# bandwidth efficiency 0.8 is the usual STREAM-like fraction of HBM/GDDR peak reached by large
# reads (NVIDIA's own H100 decode guidance quotes ~80%; our H200 D2D measurement in
# docs/reference-figures.md section 1 reached 4,198/4,800 = 0.87). Blackwell and CDNA3/CDNA4
# compute: Hopper's times the per-generation factor training reads for the same GEMMs
# (advisor/perf/efficiency.py: a public end-to-end comparison against H100, estimated), so one
# operator has one efficiency in serving and training. Other generations: estimated at the
# Hopper figures, uncalibrated.
HOPPER_COMPUTE_EFFICIENCY = 0.50
EFFICIENCY: dict[Generation, tuple[float, float]] = {
    Generation.hopper: (HOPPER_COMPUTE_EFFICIENCY, 0.80),
    Generation.blackwell: (HOPPER_COMPUTE_EFFICIENCY * BLACKWELL.factor, 0.80),
    Generation.ampere: (0.60, 0.80),
    Generation.ada: (0.50, 0.80),
    Generation.turing: (0.50, 0.75),  # estimated, uncalibrated
    Generation.volta: (0.50, 0.75),  # estimated, uncalibrated
    Generation.cdna4: (HOPPER_COMPUTE_EFFICIENCY * CDNA3.factor, 0.70),  # bandwidth: estimated
    Generation.cdna3: (HOPPER_COMPUTE_EFFICIENCY * CDNA3.factor, 0.70),  # bandwidth: estimated
    Generation.cdna2: (0.40, 0.70),  # estimated, uncalibrated
}
# Where each generation's compute share comes from, for the figures' words.
EFFICIENCY_SOURCE: dict[Generation, str] = {
    Generation.blackwell: f"Hopper's {BLACKWELL.words()}",
    Generation.cdna4: f"Hopper's {CDNA3.words()}",
    Generation.cdna3: f"Hopper's {CDNA3.words()}",
}
DEFAULT_EFFICIENCY = (0.40, 0.70)  # estimated: generations not listed above
# A precision whose GEMM kernels reach a different share of their own peak than the generation's
# figure above. ESTIMATED, set by hand from the two compute-bound TensorRT-LLM 0.19 B200 FP4 rows
# (tests/data/published-2.yaml: Llama 3.3 70B at 128/128 and 2048/128, batch in the thousands,
# GEMM-bound) as one value: NVFP4 GEMMs at ~40% of the dense FP4 peak.
PRECISION_COMPUTE_EFFICIENCY: dict[tuple[Generation, str], float] = {
    (Generation.blackwell, "fp4"): 0.40,
}
ALLREDUCE_LATENCY_S = 8e-6  # estimated: NCCL small-message all-reduce latency inside a node
# All-reduce latency per call over PCIe for 8 GPUs, scaled by (n - 1) / 7 for n GPUs: a ring
# all-reduce takes 2(n - 1) steps, each paying a hop's latency (Patarasuk & Yuan 2009, "Bandwidth
# optimal all-reduce algorithms for clusters of workstations"). Measured 8-byte
# all_reduce_perf times on 8-GPU PCIe Gen4 hosts: 42.1 us on 8 x RTX 4090
# (github.com/NVIDIA/nccl issue 1530) and 54.2 us on 8 x RTX 3090 (NVIDIA/nccl issue 1439); the
# lower one taken.
# ESTIMATED for the L40S (same Ada generation and PCIe Gen4 x16, but not the same host).
PCIE_ALLREDUCE_LATENCY_S = 42e-6
# GPUs without a GPU-to-GPU fabric all-reduce over PCIe: Gen4 x16 ~ 25 GB/s per direction
# (estimated from docs/reference-figures.md section 1: Gen5 x16 pinned copies at 55 GB/s, Gen4
# is half).
PCIE_ALLREDUCE_GB_S = 25.0
# The bus bandwidth a large NCCL collective reaches over an NVLink/NVSwitch fabric, as a share of
# one direction of the link: nccl-tests maintainers, 8 x H100 ring all-reduce about 370 GB/s of
# the 450 (github.com/NVIDIA/nccl-tests/issues/212; docs/reference-figures.md section 2); our
# two H200s reached 335 of 450 at 4 GiB (section 1). The 8-GPU figure, the nodes the model plans
# on.
NVLINK_BUS_EFFICIENCY = 370 / 450


# Under a request rate the serving simulation (perf/serving_sim.py) runs each replica with vLLM
# V1's default scheduler limits for its OpenAI-compatible server (vllm/engine/arg_utils.py,
# EngineArgs defaults by usage context, v0.10): a chunked-prefill budget of 8,192 tokens per
# iteration and at most 1,024 sequences on GPUs of 70 GiB or more, 2,048 and 256 below.
LARGE_GPU_GB = 70 * 1.073741824  # 70 GiB in GB
SCHEDULER_LARGE = (8192, 1024)  # (max_num_batched_tokens, max_num_seqs)
SCHEDULER_SMALL = (2048, 256)
# Requests simulated for a reported figure and for each step of a rate search; the first tenth
# is the warm-up. Seeded: the same question gets the same answer.
LOAD_REQUESTS = 600
SEARCH_REQUESTS = 200
LOAD_SEED = 0
RATE_SEARCH_STEPS = 4  # bisections below the analytic rate: within 1/16 of it
_LOADS: dict[tuple[object, ...], LoadResult] = {}  # simulations by model and load, bounded
_LOADS_MAX = 4096


def scheduler_for(fit: int, tokens_per_sequence: int, device_memory_gb: float) -> Scheduler:
    """A replica's scheduler: the KV cache of `fit` sequences of `tokens_per_sequence` tokens
    (the memory model's bound) and vLLM's default budget and sequence cap for the GPU."""
    budget, seqs = SCHEDULER_LARGE if device_memory_gb >= LARGE_GPU_GB else SCHEDULER_SMALL
    return Scheduler(fit * tokens_per_sequence, min(fit, seqs), budget)


def one_way_gb_s(link_gb_s: float) -> float:
    """One direction of a per-GPU link figure (the catalog states both ways): the datasheet
    figure a probe's measurement is verified against; PCIe's when there is no GPU link."""
    return link_gb_s / 2 if link_gb_s else PCIE_ALLREDUCE_GB_S


def link_bus_gb_s(link_gb_s: float) -> float:
    """The bus bandwidth the model's collectives reach inside a node: the GPU link's one
    direction at NVLINK_BUS_EFFICIENCY, or the PCIe figure (already an achieved one)."""
    return link_gb_s / 2 * NVLINK_BUS_EFFICIENCY if link_gb_s else PCIE_ALLREDUCE_GB_S


ACTIVATION_BYTES = 2  # activations all-reduced in 16-bit
# Launch costs where the accelerator has no operator table (with one, every operator's measured
# time holds its own launch: advisor/perf/op_model.py). A kernel whose work is negligible still
# costs its launch: short kernels launched back to back into one stream take 3.8 us each, of
# which about 2.9 us is their own run (NVIDIA Technical Blog, A. Gray, "Getting Started with CUDA
# Graphs", 2019-09-05: 20 short kernels, V100, CUDA 10.1). ESTIMATED for other GPUs and drivers;
# the H200's own table measured 1.9 us a kernel replayed from a CUDA graph (catalog/ops, launch
# rows: 24.94 us for a layer of 13 kernels).
KERNEL_LAUNCH_S = 3.8e-6
# Kernels one transformer layer launches per decode pass in a serving engine (vLLM's Llama
# decoder layer, vllm/model_executor/models/llama.py, with its custom ops): add + RMSNorm
# (fused_add_rms_norm), QKV GEMM, rotary, the KV-cache write (reshape_and_cache), attention,
# output GEMM, add + RMSNorm, gate-up GEMM, SiLU x gate (silu_and_mul), down GEMM. FP8
# activations are quantised inside the norm and activation kernels (fused), not counted apart.
# The tensor-parallel all-reduces are the Ring's (their own latency). A mixture of experts adds
# the router GEMM, its top-k, and the tokens' permutation to and from the experts.
KERNELS_PER_LAYER = 10
MOE_EXTRA_KERNELS = 4
# What the launch count above does not explain of the per-layer time the roofline's published
# rows show. ESTIMATED: the former fitted 60 us per layer (three TensorRT-LLM 0.14 QPS=2 serving
# rows of tests/data/published.yaml) less the 10 launches of 3.8 us. Two GPU-side measurements
# agree on the launches alone: the H200's operator table puts a Llama-3.1-8B layer at one token
# 37 us above the bandwidth roofline at 0.8 (small GEMMs' fixed costs, norms, rotary; the
# table path, advisor/perf/op_model.py, needs no constant). The rest is what the engines spend
# outside the GPU's kernels (the HTTP server, scheduling and input preparation: 62% of a vLLM
# 0.5.3 step for Llama 3 8B on one H100, vLLM blog "vLLM v0.6.0: 2.7x Throughput Improvement
# and 5x Latency Reduction", 2024-09-05) and the low bandwidth small TP-sharded matrices reach;
# both depend on the engine and the GPU, which an ingested run's correction states
# (advisor calibrate ingest). Without it the published rows' median error rises from 8.5% to
# 10.6% (benchmarks/results/calibration-ops-2026-12-03.txt).
UNEXPLAINED_LAYER_S = 60e-6 - KERNELS_PER_LAYER * KERNEL_LAUNCH_S
# Sampling over the vocabulary, once per token that needs logits (every decode token, the last of
# each prompt): the logits are written in FP32 by the output head, read and written by the
# softmax and read by the sampler (the probe's sampling operator, probes/ops.py: FP32 softmax
# then argmax), 4 passes of 4 bytes per vocabulary entry, in 3 kernels.
SAMPLING_PASSES = 4
SAMPLING_KERNELS = 3
LOGIT_BYTES = 4


def scaled_formula(text: str, scale: float) -> str:
    """A pass's formula times a stored correction's factor (unchanged at 1)."""
    return text if scale == 1.0 else f"({text}) x {scale:.6g} stored correction"


def kv_precision_of(precision: str) -> str:
    """FP8 engines keep an FP8 KV cache (TensorRT-LLM perf-overview FP8 rows), and so do FP4 ones
    (NVIDIA's ModelOpt FP4 checkpoints quantise the KV cache to FP8, hf_quant_config.json
    kv_cache_quant_algo FP8, e.g. nvidia/Llama-3.3-70B-Instruct-FP4); else 16-bit."""
    return "fp8" if precision in ("fp8", "fp4") else "bf16"


def serving_memory(
    shape: Shape,
    precision: str,
    context_tokens: int,
    batch: int,
    tensor_parallel: int,
    kv_precision: str | None = None,
) -> list[Figure]:
    """Memory of one replica of `tensor_parallel` GPUs (sizing.inference_memory) serving `batch`
    sequences of `context_tokens` with weights in `precision` and the KV cache in
    `kv_precision` (by default the weights' rule, kv_precision_of); the last figure is the
    total."""
    return inference_memory(
        shape,
        precision=precision,
        context_tokens=context_tokens,
        batch=batch,
        kv_precision=kv_precision or kv_precision_of(precision),
        tensor_parallel=tensor_parallel,
    )


@dataclass(frozen=True, slots=True)
class Deployment:
    """What runs where: one replica is `tensor_parallel` GPUs of one node."""

    acc: Accelerator
    gpus: int
    tensor_parallel: int
    precision: str
    link_gb_s: float  # per-GPU GPU-to-GPU link (both directions), 0 when none (PCIe)
    gpus_per_node: int = 8
    kv_precision: str | None = None  # the KV cache's format; None: kv_precision_of(precision)
    # The share of each prompt's tokens found in the prefix cache (a shared system prompt, a
    # conversation's history): their prefill is skipped, their KV still held (not shared here).
    prefix_cache_hit_rate: float = 0.0
    # The serving engine: its stored correction for the accelerator (advisor calibrate ingest
    # --save) scales every iteration; None, or no stored correction: the model as it is.
    engine: str | None = None
    # Speculative decoding (advisor/perf/speculative.py): each iteration verifies d drafted
    # tokens a sequence and commits the acceptance length on average; None: one token a step.
    speculation: Speculation | None = None
    # Multi-LoRA (advisor/perf/multi_lora.py): (adapters in use, their rank), each sequence
    # using one; every pass adds their reads and FLOPs. None: the base model alone.
    lora: tuple[int, int] | None = None
    # A trace replayed by the load simulation instead of Poisson arrivals of one length
    # (advisor/perf/trace_file.py), its times scaled to the rate asked.
    trace: Trace | None = None

    @property
    def replicas(self) -> int:
        return self.gpus // self.tensor_parallel


@dataclass(frozen=True, slots=True)
class InferenceResult:
    ttft_ms: float
    itl_ms: float
    throughput_tokens_s: float  # output tokens/s of the whole deployment
    concurrency: int  # sequences in flight per replica
    max_concurrency: int  # the most that fit in memory per replica
    tensor_parallel: int
    replicas: int
    figures: tuple[Figure, ...]


def check_tensor_parallel(gpus: int, tp: int, gpus_per_node: int) -> None:
    """TP must divide the GPUs and the GPUs of a node (a node of 8 running replicas of TP 3
    leaves 2 GPUs idle, paid for); else InputError (exit 2) with the valid degrees."""
    fits = min(gpus, gpus_per_node)
    valid = [d for d in range(1, fits + 1) if gpus % d == 0 and gpus_per_node % d == 0]
    if tp < 1 or gpus % tp or gpus_per_node % tp or tp > gpus_per_node:
        raise InputError(
            f"tensor-parallel degree {tp} must divide {gpus} GPUs and the {gpus_per_node} of a "
            f"node: valid degrees are {', '.join(map(str, valid))}",
            field="tensor_parallel",
        )


def check_heads(tp: int, heads: int | None, model: str) -> None:
    """Tensor parallelism splits the attention heads evenly over the ranks (Megatron-LM; vLLM
    refuses a degree that does not divide them): InputError (exit 2) naming the degrees that do."""
    if heads is None or heads % tp == 0:
        return
    valid = [d for d in range(1, min(heads, 64) + 1) if heads % d == 0]  # 64: the request's cap
    raise InputError(
        f"{field_name('tensor_parallel')} {tp} must divide {model}'s {heads} attention heads: "
        f"valid degrees are {', '.join(map(str, valid))}",
        field="tensor_parallel",
    )


def _compute(dep: Deployment) -> ComputePrecision:
    got = compute_precision(dep.acc, dep.precision)
    if not isinstance(got, ComputePrecision):
        raise InputError(got.reason, field="precision")
    return got


def _efficiency(acc: Accelerator) -> tuple[float, float]:
    return EFFICIENCY.get(acc.generation, DEFAULT_EFFICIENCY)


def compute_efficiency(acc: Accelerator, precision: str) -> float:
    """The share of the dense peak of `precision` a GEMM reaches on `acc`."""
    return PRECISION_COMPUTE_EFFICIENCY.get((acc.generation, precision), _efficiency(acc)[0])


def compute_efficiency_source(acc: Accelerator, precision: str) -> str:
    """Where compute_efficiency's figure for `precision` on `acc` comes from."""
    if (acc.generation, precision) in PRECISION_COMPUTE_EFFICIENCY:
        return "TensorRT-LLM perf-overview rows"
    return EFFICIENCY_SOURCE.get(acc.generation, "TensorRT-LLM perf-overview rows")


def bandwidth_efficiency(acc: Accelerator) -> tuple[float, str]:
    """The share of memory bandwidth a decode step reaches on `acc`, and where it comes from:
    what a served model's options report as their efficiency."""
    return _efficiency(acc)[1], (
        f"decode share of {acc.generation.value} memory bandwidth "
        "(estimated: advisor/perf/inference.py EFFICIENCY)"
    )


def expected_experts(experts: int, per_token: int, batch: int) -> float:
    """Expected distinct experts a batch of `batch` tokens reads per layer: E(1 - (1 - k/E)^B)."""
    return experts * (1 - (1 - per_token / experts) ** batch)


def weight_bytes_touched(
    shape: Shape, bytes_per_weight: float, batch: int, moe: tuple[int, int] | None
) -> float:
    """Weight bytes one iteration of `batch` tokens reads: all of a dense model; the shared part
    plus the expected distinct experts of an MoE model (expert parameters X from total = D + X,
    active = D + X k/E); never an untied input embedding table, of which a pass reads one row
    per token (Shape.lookup_params)."""
    read = shape.params - shape.lookup_params
    if not moe or shape.params == shape.active_params:
        return read * bytes_per_weight
    experts, k = moe
    expert_params = (shape.params - shape.active_params) / (1 - k / experts)
    touched = expert_params * expected_experts(experts, k, batch) / experts
    return (read - expert_params + touched) * bytes_per_weight


@dataclass(frozen=True, slots=True)
class Ring:
    """The tensor-parallel all-reduces of a deployment: 2 per layer per forward pass (after
    attention and after the MLP) of tokens x hidden x 2 bytes over a ring of `ranks`, at
    `link_gb_s` one way plus `latency_s` a call (module doc)."""

    layers: int
    ranks: int
    hidden: int
    link_gb_s: float
    latency_s: float

    def seconds(self, tokens: float) -> float:
        n = self.ranks
        if n == 1:
            return 0.0
        per_call = 2 * (n - 1) / n * tokens * self.hidden * ACTIVATION_BYTES
        return 2 * self.layers * (per_call / (self.link_gb_s * GB) + self.latency_s)

    def formula(self, tokens: float) -> str:
        n = self.ranks
        if n == 1:
            return "0 s TP all-reduces"
        return (
            f"2 x {self.layers} layers x (2 x ({n} - 1) / {n} x {tokens:.6g} tokens x "
            f"{self.hidden} hidden x {ACTIVATION_BYTES} bytes / {self.link_gb_s:g} GB/s + "
            f"{self.latency_s:.3g} s) all-reduces"
        )


def _ring(dep: Deployment, shape: Shape) -> Ring:
    n = dep.tensor_parallel
    if n == 1:
        return Ring(0, 1, 0, 0.0, 0.0)
    layers, hidden, *_ = shape.need_layers("tensor parallelism")
    if dep.link_gb_s:
        link, latency = link_bus_gb_s(dep.link_gb_s), ALLREDUCE_LATENCY_S
    else:
        link, latency = PCIE_ALLREDUCE_GB_S, PCIE_ALLREDUCE_LATENCY_S * (n - 1) / 7
    return Ring(layers, n, hidden, link, latency)


class Iteration(NamedTuple):
    """The operands of one forward pass's time (InferenceModel.iteration): the value and the
    printed formula are both built from these, so neither can drift from the other. A named
    tuple: the model builds one per evaluated concurrency, in the engine's inner loop."""

    weight_bytes: float
    gemm_flops: float
    kv_bytes: float
    attention_flops: float
    bandwidth_bytes_s: float  # TP x bandwidth x eff_bw
    peak_flops: float  # TP x peak x eff_compute
    attention_peak_flops: float  # the same at the KV cache's precision (attention's matmuls)
    ring: Ring
    tokens: float  # decode + prompt tokens of the pass (what the all-reduces move)
    layers: int
    kernels_per_layer: int  # launched per layer (KERNELS_PER_LAYER, + MOE_EXTRA_KERNELS)
    sampling_bytes: float  # logits x vocabulary x LOGIT_BYTES x SAMPLING_PASSES (0: no sampling)
    scale: float = 1.0  # a stored correction's factor (advisor/perf/correction.py)

    @property
    def launch_s(self) -> float:
        sampling = SAMPLING_KERNELS if self.sampling_bytes else 0
        launches = (self.layers * self.kernels_per_layer + sampling) * KERNEL_LAUNCH_S
        return launches + self.layers * UNEXPLAINED_LAYER_S

    @property
    def seconds(self) -> float:
        bw, peak = self.bandwidth_bytes_s, self.peak_flops
        gemm = max(self.weight_bytes / bw, self.gemm_flops / peak)
        attention = max(self.kv_bytes / bw, self.attention_flops / self.attention_peak_flops)
        sampling = self.sampling_bytes / bw
        parts = gemm + attention + sampling + self.ring.seconds(self.tokens) + self.launch_s
        return parts * self.scale

    def formula(self) -> str:
        bw, peak = f"{self.bandwidth_bytes_s:.6g} bytes/s", f"{self.peak_flops:.6g} FLOP/s"
        sampling = ""
        if self.sampling_bytes:
            sampling = f"{self.sampling_bytes:.6g} sampling bytes / {bw} + "
        kernels = f"{self.layers} layers x {self.kernels_per_layer}"
        if self.sampling_bytes:
            kernels = f"({kernels} + {SAMPLING_KERNELS} sampling)"
        text = (
            f"max({self.weight_bytes:.6g} weight bytes / {bw}, {self.gemm_flops:.6g} GEMM FLOP "
            f"/ {peak}) + max({self.kv_bytes:.6g} KV bytes / {bw}, {self.attention_flops:.6g} "
            f"attention FLOP / {self.attention_peak_flops:.6g} FLOP/s) + {sampling}"
            f"{self.ring.formula(self.tokens)} + "
            f"{kernels} kernels x {KERNEL_LAUNCH_S:g} s launch + {self.layers} layers x "
            f"{UNEXPLAINED_LAYER_S:.3g} s unexplained"
        )
        return scaled_formula(text, self.scale)


class InferenceModel:
    """The model for one (shape, deployment, input, output): evaluate any concurrency."""

    def __init__(
        self,
        shape: Shape,
        dep: Deployment,
        input_tokens: int,
        output_tokens: int,
        moe: tuple[int, int] | None = None,
    ) -> None:
        check_tensor_parallel(dep.gpus, dep.tensor_parallel, dep.gpus_per_node)
        if input_tokens < 1 or output_tokens < 1:
            raise InputError(
                f"{field_name('input_tokens')} and {field_name('output_tokens')} must be at "
                "least 1",
                field="input_tokens",
            )
        self.shape, self.dep, self.moe = shape, dep, moe
        self.inp, self.out = input_tokens, output_tokens
        self.layers, _, self.heads, _, self.head_dim = shape.need_layers("the inference model")
        self.cp = _compute(dep)
        self.eff_c = compute_efficiency(dep.acc, self.cp.precision)
        self.eff_bw = _efficiency(dep.acc)[1]
        self.bpw = BYTES_PER_WEIGHT[dep.precision]
        self.kv_precision = dep.kv_precision or kv_precision_of(dep.precision)
        self.prefill_share = 1.0 - dep.prefix_cache_hit_rate
        self.kv_per_token = kv_cache_bytes_per_token(
            shape, self.kv_precision, input_tokens + output_tokens
        )
        tp = dep.tensor_parallel
        self.peak_flops = tp * self.cp.peak_tflops * TERA * self.eff_c
        # Attention's matmuls run in the KV cache's format (FP4 engines keep an FP8 cache and FP8
        # attention kernels), at that precision's rate where the chip has one.
        kv_peak = dep.acc.peak_tflops.get(self.kv_precision)
        self.attention_peak_flops = (
            tp * kv_peak * TERA * compute_efficiency(dep.acc, self.kv_precision)
            if kv_peak
            else self.peak_flops
        )
        self.bw_bytes_s = tp * dep.acc.memory_bandwidth_gbps * GB * self.eff_bw
        self.ring = _ring(dep, shape)
        self._e2e: dict[int, float] = {}
        self._top: int | None = None
        self._steps: dict[tuple[int, int], float] = {}
        self.lookup_params = shape.lookup_params
        self.vocab = shape.vocab or 0
        self.kernels_per_layer = KERNELS_PER_LAYER + (MOE_EXTRA_KERNELS if moe else 0)
        self.kv_copies = kv_copies(shape, tp)
        self.per_head = self.layers * self.heads * self.head_dim
        # Decode attention per head and context token: a score over the cached key dimension and
        # a weighted sum over the cached value one, 2 FLOPs per multiply-add. MLA decodes with the
        # up-projections absorbed (DeepSeek-V2 section 2.1.2): scores over the latent + RoPE key
        # (576 for V3), values over the latent (512), not 2 x the 128-wide head.
        if shape.mla_kv_dim and shape.mla_latent:
            self.decode_dims = shape.mla_kv_dim + shape.mla_latent
        else:
            self.decode_dims = 2 * self.head_dim
        # Where the accelerator has a measured operator table, each operator's time comes from it
        # (advisor/perf/op_model.py); else the roofline below. `speed_source` says which.
        built = OpModel.build(dep.acc.id, shape, tp, dep.precision, moe)
        self.op_model = built if isinstance(built, OpModel) else None
        self.kv_token_bytes = self.kv_per_token.value * self.kv_copies / tp / self.layers
        self.speed_source = (
            built.ops.source
            if isinstance(built, OpModel)
            else f"roofline: {dep.acc.name} datasheet peaks x estimated efficiencies "
            f"({dep.acc.generation.value}: {self.eff_c:g} of {self.cp.precision} compute, "
            f"{self.eff_bw:g} of memory bandwidth; advisor/perf/inference.py EFFICIENCY, set from "
            f"{compute_efficiency_source(dep.acc, self.cp.precision)}), "
            "kernel launches at "
            f"{KERNEL_LAUNCH_S * 1e6:g} us (NVIDIA, Getting Started with CUDA Graphs, 2019)"
            + (f"; the operator table is not used: {built}" if isinstance(built, str) else "")
        )
        self.spec = dep.speculation
        self.correction = stored_correction(dep.acc.id, dep.engine) if dep.engine else None
        self.scale = self.correction.itl_factor if self.correction is not None else 1.0
        if self.correction is not None:
            self.speed_source += f"; {self.correction.evidence()}"
        elif dep.engine:
            self.speed_source += f"; no stored correction for {dep.acc.id} x {dep.engine}"

    @property
    def efficiency_source(self) -> str:
        """Where the efficiency a served option reports (eff_bw, the roofline's decode share of
        the memory bandwidth) comes from, and what reads it: where an operator table times the
        passes, only what the table has no rows for (a LoRA adapter's reads, _lora_s)."""
        words = bandwidth_efficiency(self.dep.acc)[1]
        if self.op_model is None:
            return words
        return (
            f"{words}; the operator table timed the passes (see speeds): this share times only "
            "what it has no rows for (LoRA adapters)"
        )

    def on(self, dep: Deployment) -> InferenceModel:
        """The same model on another deployment (more replicas, say); one replica's figures are
        the same when only the replica count differs, so the searches' memos carry over."""
        other = InferenceModel(self.shape, dep, self.inp, self.out, self.moe)
        same = self.dep
        if (
            dep.acc,
            dep.tensor_parallel,
            dep.precision,
            dep.link_gb_s,
            dep.engine,
            dep.speculation,
            dep.lora,
            dep.trace,
        ) == (
            same.acc,
            same.tensor_parallel,
            same.precision,
            same.link_gb_s,
            same.engine,
            same.speculation,
            same.lora,
            same.trace,
        ):
            other._e2e, other._top = self._e2e, self._top
        return other

    def max_concurrency(self) -> int:
        """Sequences one replica holds: the largest B whose memory (below) per GPU stays within
        the usable memory: (weights + B x KV of I + O tokens x its copies) / TP."""
        tp = self.dep.tensor_parallel
        budget = usable_memory_gb(self.dep.acc.device_memory_gb) * GB * tp
        free = budget - self.shape.params * self.bpw
        per_seq = self.kv_per_token.value * (self.inp + self.out) * self.kv_copies
        return max(0, int(free // per_seq))

    def memory(self, batch: int) -> list[Figure]:
        """The one inference memory rule (serving_memory) for `batch` sequences of I + O tokens
        with this model's KV precision; the last figure is the replica's total."""
        return serving_memory(
            self.shape,
            self.dep.precision,
            self.inp + self.out,
            batch,
            self.dep.tensor_parallel,
            self.kv_precision,
        )

    def _table_ring(self, tokens: float) -> tuple[float, str]:
        """A pass's tensor-parallel all-reduces where the operator table is read: the table's
        all-reduce over this many GPUs at the pass's message (tokens x hidden x 2 bytes), where
        the node it was measured on had them; else the Ring's model."""
        n, ops = self.dep.tensor_parallel, self.op_model.ops if self.op_model else None
        nbytes = tokens * self.ring.hidden * ACTIVATION_BYTES
        timed = ops.collective_time("all_reduce", n, nbytes) if ops and n > 1 and tokens else None
        if timed is None:
            return self.ring.seconds(tokens), self.ring.formula(tokens)
        said = f"; beyond the measured sizes: {', '.join(timed.beyond)}" if timed.beyond else ""
        return 2 * self.ring.layers * timed.seconds, (
            f"2 x {self.ring.layers} layers x {timed.seconds:.6g} s all-reduces of "
            f"{nbytes:.6g} bytes over {n} GPUs (the operator table's{said})"
        )

    def iteration(
        self, decode: int, prompt_tokens: float, prompt_len: int
    ) -> Iteration | TableIteration:
        """One forward pass over `decode` decode tokens (each attending to the mean context
        I + O / 2) and `prompt_tokens` prompt tokens of prompts of `prompt_len` tokens: the
        operands of the GEMM roofline, the attention roofline, the all-reduces and the per-layer
        time (module doc)."""
        context = self.inp + self.out / 2  # mean context over a sequence's decode
        prompts = prompt_tokens / prompt_len if prompt_tokens else 0.0  # each samples once
        prompt_tokens *= self.prefill_share  # a prefix-cache hit is not computed again
        tokens = decode + prompt_tokens
        if self.op_model is not None:
            moe = self.moe
            return self.op_model.iteration(
                decode,
                prompt_tokens,
                prompt_len,
                context,
                self.kv_token_bytes,
                self._table_ring(tokens),
                (lambda b: expected_experts(moe[0], moe[1], b)) if moe else (lambda b: 1.0),
                UNEXPLAINED_LAYER_S,
                self.scale,
            )
        return Iteration(
            weight_bytes_touched(self.shape, self.bpw, max(1, round(tokens)), self.moe),
            2 * (self.shape.active_params - self.lookup_params) * tokens,
            decode * context * self.kv_per_token.value * self.kv_copies,
            self.layers * self.heads * 2 * self.decode_dims * decode * context
            + self.per_head * 2 * prompt_tokens * prompt_len,
            self.bw_bytes_s,
            self.peak_flops,
            self.attention_peak_flops,
            self.ring,
            tokens,
            self.layers,
            self.kernels_per_layer,
            (decode + prompts) * self.vocab * LOGIT_BYTES * SAMPLING_PASSES,
            self.scale,
        )

    def iteration_s(self, decode: int, prompt_tokens: float, prompt_len: int) -> float:
        seconds = self.iteration(decode, prompt_tokens, prompt_len).seconds
        return seconds + self._lora_s(decode, prompt_tokens, prompt_len)

    def _lora_s(self, decode: int, prompt_tokens: float, prompt_len: int) -> float:
        """What the adapters add to a pass: its sequences (decode ones and prompts) and tokens
        over the replica's bandwidth and compute (advisor/perf/multi_lora.py)."""
        if self.dep.lora is None:
            return 0.0
        adapters, rank = self.dep.lora
        prompts = prompt_tokens / prompt_len if prompt_tokens else 0.0
        sequences = max(1, round(decode + prompts))
        batch = (sequences, decode + prompt_tokens * self.prefill_share)
        rates = (self.bw_bytes_s, self.peak_flops)
        return lora_pass_s(self.shape, rank, adapters, batch, self.bpw, rates) * self.scale

    def prefill_s(self, prompt: int) -> float:
        """Time to first token at low load: one iteration over the prompt alone."""
        return self.iteration_s(0, prompt, prompt)

    def step_s(self, batch: int) -> float:
        """One decode step of `batch` sequences, no prompt in the iteration."""
        return self.iteration_s(batch, 0, self.inp)

    def itl_s(self, batch: int) -> float:
        """Steady-state in-flight batching: the decode step with the B / O prompts admitted per
        iteration packed into it (module doc). With speculation, the speculative iteration over
        the tokens it commits (B x acceptance / O prompts admitted each)."""
        if self.spec is None:
            return self.iteration_s(batch, batch * self.inp / self.out, self.inp)
        emitted = self.spec.acceptance_length
        packed = batch * emitted * self.inp / self.out
        return self._spec_step(batch, packed) / emitted

    def _lora_words(self, seconds: float) -> str:
        if self.dep.lora is None:
            return ""
        adapters, rank = self.dep.lora
        return (
            f" + {seconds:.6g} s of {adapters} LoRA adapters of rank {rank} (their distinct "
            "reads and FLOPs; advisor/perf/multi_lora.py)"
        )

    def _spec_words(self, batch: int, itl_s: float) -> str:
        assert self.spec is not None
        d, a = self.spec.draft_tokens, self.spec.acceptance_length
        packed = batch * a * self.inp / self.out
        return (
            f"speculative decoding (advisor/perf/speculative.py): (verify pass of {batch} x "
            f"{d + 1} positions + {packed:.6g} prompt tokens packed in + {d} MTP draft pass(es) "
            f"at {self.spec.draft_share:.4g} of a decode step) / acceptance length {a:g} = "
            f"{itl_s:.6g} s a token"
        )

    def _spec_step(self, decode: int, prompt_tokens: float, prompt_len: int = 0) -> float:
        """One speculative iteration (advisor/perf/speculative.py verify_step)."""
        assert self.spec is not None
        return verify_step(lambda d, p: self.iteration_s(d, p, prompt_len or self.inp), self.spec)(
            decode, prompt_tokens
        )

    # -- load as a request rate ---------------------------------------------------------------
    def ttft_at_s(self, batch: int) -> float:
        """Time to first token of a request joining `batch` sequences in flight: iteration-level
        scheduling (Orca) admits it at the next iteration boundary, on average half an
        iteration away, and prefills its whole prompt in one iteration beside the batch's
        decode tokens. At `batch` 0 the replica is idle: the prefill alone."""
        wait = self.itl_s(batch) / 2 if batch else 0.0
        return wait + self.iteration_s(batch, self.inp, self.inp)

    def e2e_s(self, batch: int) -> float:
        """A request's time in the system at `batch` in flight: its first token, then O - 1
        more, one an ITL (memoised: the rate searches ask the same concurrencies again)."""
        found = self._e2e.get(batch)
        if found is None:
            found = self._e2e[batch] = self.ttft_at_s(batch) + (self.out - 1) * self.itl_s(batch)
        return found

    def _fit_or_raise(self) -> int:
        fit = self.max_concurrency()
        if fit < 1:
            raise InputError(
                f"{self.shape.name} does not fit {self.dep.tensor_parallel} x "
                f"{self.dep.acc.name} at {self.dep.precision} with one sequence of "
                f"{self.inp + self.out} tokens: raise {field_name('tensor_parallel')} or the GPUs",
                field="tensor_parallel",
            )
        return fit

    def _capacity(self, fit: int) -> int:
        """The concurrency at which a replica completes the most requests per second, B / E2E(B)
        (Little's law), up to `fit`: quasi-concave in B, so a ternary search finds it (once per
        model: `fit` is the model's own)."""
        if self._top is not None:
            return self._top
        lo, hi = 1, fit
        while hi - lo > 2:
            a, b = lo + (hi - lo) // 3, hi - (hi - lo) // 3
            if a / self.e2e_s(a) < b / self.e2e_s(b):
                lo = a + 1
            else:
                hi = b
        self._top = max(range(lo, hi + 1), key=lambda b: b / self.e2e_s(b))
        return self._top

    def _analytic_rate(self, targets: Targets | None) -> tuple[float, int]:
        """(requests/s, concurrency) by Little's law alone: the largest concurrency up to the
        capacity point whose steady TTFT and ITL meet `targets` (both grow with concurrency, so a
        bisection finds it), at its rate B / E2E(B). No queueing: an upper bound."""
        top = self._capacity(self._fit_or_raise())
        if targets is not None and targets.any:

            def meets(b: int) -> bool:
                return targets.met(self.ttft_at_s(b) * 1e3, self.itl_s(b) * 1e3)

            if not meets(1):
                return 0.0, 0
            lo, hi = 1, top
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if meets(mid) else (lo, mid - 1)
            top = lo
        return top / self.e2e_s(top), top

    def max_request_rate(self, targets: Targets | None = None) -> tuple[float, int]:
        """(requests/s, concurrency) the most one replica sustains. Without targets, the rate it
        completes at its capacity point (Little's law; above it requests queue without bound).
        With targets, the highest Poisson rate whose simulated requests meet them at the targets'
        percentile without queueing without bound: the Little's-law rate within the targets is
        an upper bound (it ignores queueing), so it is tried first and, when it misses, bisected
        below (RATE_SEARCH_STEPS). (0.0, 0) when even one sequence misses a target."""
        rate, batch = self._analytic_rate(targets)
        if targets is None or not targets.any or rate == 0.0:
            return rate, batch

        def held(r: float) -> LoadResult | None:
            load = self.under_load(r, SEARCH_REQUESTS, targets)
            return None if load.saturated or not targets.met_under(load) else load

        found = held(rate)
        if found is not None:
            return rate, max(1, round(found.mean_batch))
        lo, hi, best = 0.0, rate, None
        for _ in range(RATE_SEARCH_STEPS):
            mid = (lo + hi) / 2
            load = held(mid)
            lo, hi, best = (mid, hi, load) if load is not None else (lo, mid, best)
        return (lo, max(1, round(best.mean_batch))) if best is not None else (0.0, 0)

    def concurrency_at_rate(self, rate_per_replica: float) -> int | None:
        """The sequences in flight at a steady arrival rate by Little's law alone: the least B
        with rate x E2E(B) <= B (the first crossing, below the capacity point); the simulation
        starts from it. None: the rate is above what the replica completes."""
        top = self._capacity(self._fit_or_raise())
        if rate_per_replica * self.e2e_s(top) > top:
            return None
        lo, hi = 1, top
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if rate_per_replica * self.e2e_s(mid) <= mid else (mid + 1, hi)
        return lo

    def _step_s(self, decode: int, prompt_tokens: int) -> float:
        """One iteration's time for the simulation, memoised (its runs repeat compositions).
        Its prompt tokens attend as prompts of the trace's token-weighted mean length (a token
        of a long prompt attends to more), else of the one input length."""
        key = (decode, prompt_tokens)
        found = self._steps.get(key)
        if found is None:
            trace = self.dep.trace
            plen = trace.attention_prompt_len if trace is not None else self.inp
            found = self._steps[key] = (
                self.iteration_s(decode, prompt_tokens, plen)
                if self.spec is None
                else self._spec_step(decode, prompt_tokens, plen)
            )
        return found

    def _load_key(self) -> tuple[object, ...]:
        acc, dep = self.dep.acc, self.dep
        return (
            self.speed_source,  # the same replica timed from an operator table or the roofline
            self.shape,
            self.moe,
            acc.id,
            acc.memory_bandwidth_gbps,
            acc.device_memory_gb,
            acc.peak_tflops,
            dep.tensor_parallel,
            dep.precision,
            dep.link_gb_s,
            self.kv_precision,
            dep.prefix_cache_hit_rate,
            self.spec,
            dep.lora,
            dep.trace,
            self.scale,
            self.inp,
            self.out,
        )

    def under_load(
        self, rate_per_replica: float, requests: int = LOAD_REQUESTS, targets: Targets | None = None
    ) -> LoadResult:
        """One replica under Poisson arrivals at `rate_per_replica` (seeded): the simulation of
        perf/serving_sim.py with this model's iteration time, KV bound and vLLM's scheduler
        limits. Memoised across models of the same replica (the engine asks again per type)."""
        ttft_ms = targets.max_ttft_ms if targets is not None else None
        itl_ms = targets.max_itl_ms if targets is not None else None
        key = (*self._load_key(), round(rate_per_replica, 12), requests, ttft_ms, itl_ms)
        found = _LOADS.get(key)
        if found is None:
            if len(_LOADS) >= _LOADS_MAX:
                _LOADS.clear()
            # with speculation a request takes fewer iterations than tokens: simulated in
            # iterations, read back per token (advisor/perf/speculative.py per_token)
            iters = self.out if self.spec is None else iterations_for(self.out, self.spec)
            gap = (self.out - 1) / (iters - 1) if iters > 1 else 1.0
            sched = scheduler_for(
                self._fit_or_raise(), self.inp + iters, self.dep.acc.device_memory_gb
            )
            accepted = self.spec.acceptance_length if self.spec is not None else 1.0
            trace = arrivals(
                self.dep.trace, rate_per_replica, requests, (self.inp, iters), accepted
            )
            steady = self.concurrency_at_rate(rate_per_replica)
            try:
                load = simulate(
                    self._step_s,
                    sched,
                    trace,
                    warm_batch=self._fit_or_raise() if steady is None else steady,
                    max_ttft_s=math.inf if ttft_ms is None else ttft_ms / 1e3,
                    max_itl_s=math.inf if itl_ms is None else itl_ms / 1e3 * gap,
                )
            except ValueError as e:  # a trace's request longer than the KV cache holds
                raise InputError(f"trace: {e}", field="trace") from None
            found = _LOADS[key] = per_token(load, self.out, iters)
        return found

    def burst(self, requests: int) -> LoadResult:
        """`requests` requests of this model's lengths arriving at once at one replica (a
        serving benchmark's unthrottled run, "QPS=INF"): the simulation over all of them, none
        left out as warm-up, so the figures are the run's own: its throughput over the whole
        run, its TTFT with the queue the burst builds, its token gaps at the batch it reaches."""
        if requests < 1:
            raise ValueError(f"a burst of {requests} requests")
        iters = self.out if self.spec is None else iterations_for(self.out, self.spec)
        sched = scheduler_for(self._fit_or_raise(), self.inp + iters, self.dep.acc.device_memory_gb)
        load = simulate(
            self._step_s, sched, [Request(0.0, self.inp, iters)] * requests, warmup_fraction=0.0
        )
        return per_token(load, self.out, iters)

    def _unbounded(self, rate: float, most: float, at: int) -> InputError:
        n = self.dep.replicas
        return InputError(
            f"{field_name('request_rate')} {rate:g}/s is above the {most * n:.3g} requests/s "
            f"{n} replica(s) complete (at {at} sequences each): requests would queue without "
            "bound; raise the GPUs or lower the rate",
            field="request_rate",
        )

    def at_rate(self, rate: float, targets: Targets | None = None) -> InferenceResult:
        """Figures at `rate` requests/s spread over the deployment's replicas, from the
        simulation of one replica under Poisson arrivals: TTFT and the mean token gap (TPOT,
        reported as the ITL) at the targets' percentile (p50 without targets), p50 / p90 / p99
        of each, the mean batch, the output tokens served and the most the replicas sustain
        within `targets`. InputError when the rate is above what the replicas complete
        (requests would queue without bound), naming the most they do."""
        n = self.dep.replicas
        per_replica = rate / n
        most, at = self.max_request_rate()
        if per_replica > most:
            raise self._unbounded(rate, most, at)
        load = self.under_load(per_replica, LOAD_REQUESTS, targets)
        if load.saturated:
            raise self._unbounded(rate, most, at)
        pct = targets.percentile if targets is not None else 50
        ttft, itl = load.ttft.at(pct), load.tpot.at(pct)
        batch = max(1, round(load.mean_batch))
        base = self._result(batch, self.max_concurrency())
        within = most
        capacity = (
            f"{n} replica(s) x {at} sequences / E2E {self.e2e_s(at):.6g} s: the most they "
            "complete; above it requests queue without bound"
        )
        if targets is not None and targets.any:
            within, _ = self.max_request_rate(targets)
            capacity = (
                f"the highest Poisson rate whose simulated requests meet TTFT "
                f"{targets.max_ttft_ms or math.inf:g} ms and ITL {targets.max_itl_ms or math.inf:g}"
                f" ms at p{pct}, x {n} replica(s); {most * n:.4g} requests/s is the most they "
                f"complete at all ({at} sequences each), above which requests queue without bound"
            )
        served = rate * self.out
        figures = (
            *(f for f in base.figures if f.name != "throughput_tokens_s"),
            *load_figures(
                load, per_replica, pct, targets, self.speed_source, self.dep.trace is not None
            ),
            Figure("max_request_rate", within * n, "requests/s", capacity),
            Figure(
                "throughput_tokens_s",
                served,
                "tokens/s",
                f"{rate:g} requests/s x {self.out} output tokens",
            ),
        )
        return InferenceResult(
            ttft * 1e3,
            itl * 1e3,
            served,
            batch,
            base.max_concurrency,
            base.tensor_parallel,
            base.replicas,
            figures,
        )

    def at(self, concurrency: int | None = None, targets: Targets | None = None) -> InferenceResult:
        """Figures at `concurrency` per replica, or else at the highest-throughput concurrency
        that fits in memory and keeps the ITL within `targets`; when no concurrency meets the
        ITL target, at one sequence (the lowest ITL this deployment reaches)."""
        fit = self._fit_or_raise()
        if concurrency is not None and concurrency > fit:
            raise InputError(
                f"{field_name('concurrency')} {concurrency} exceeds the {fit} sequences that fit",
                field="concurrency",
            )
        cap = fit
        if concurrency is None and targets is not None and targets.max_itl_ms is not None:
            cap = self._most_within(fit, targets.max_itl_ms / 1e3)
        return self._result(concurrency or self._best(cap), fit)

    def _most_within(self, fit: int, max_itl_s: float) -> int:
        """The largest concurrency up to `fit` whose ITL stays within `max_itl_s` (ITL grows with
        concurrency, so a bisection finds it); 1 when even one sequence misses it."""
        lo, hi = 1, fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.itl_s(mid) <= max_itl_s:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _best(self, fit: int) -> int:
        candidates: list[int] = sorted({fit, *(1 << i for i in range(fit.bit_length()))})
        return max(candidates, key=lambda b: b / self.itl_s(b))

    def _result(self, batch: int, fit: int) -> InferenceResult:
        dep = self.dep
        prefill = self.iteration(0, self.inp, self.inp)
        lora = self._lora_s(0, self.inp, self.inp)
        step = self.iteration(batch, 0, self.inp)
        packed = batch * self.inp / self.out
        iteration = self.iteration(batch, packed, self.inp)
        ttft, itl = prefill.seconds + lora, self.itl_s(batch)
        throughput = throughput_figure(dep.replicas, batch, itl, self.speed_source)
        total = throughput.value
        tp = dep.tensor_parallel
        bandwidth = (
            f"TP {tp} x {dep.acc.memory_bandwidth_gbps:g} GB/s x {self.eff_bw:g} "
            f"= {self.bw_bytes_s:.6g} bytes/s"
        )
        peak = (
            f"TP {tp} x {self.cp.peak_tflops:g} TFLOP/s {self.cp.precision} x {self.eff_c:g} "
            f"= {self.peak_flops:.6g} FLOP/s"
        )
        speeds = (  # a table's iteration names its source in its own formula
            "speeds as stated"
            if self.op_model is not None
            else f"speeds: {bandwidth}; {peak}; {self.speed_source}"
        )
        figures = (
            *self.memory(batch),
            Figure(
                "prefill_s",
                ttft,
                "s",
                f"{prefill.formula()}{self._lora_words(lora)} [one iteration over the "
                f"{self.inp}-token prompt; {speeds}]",
            ),
            Figure(
                "decode_step_s",
                step.seconds,
                "s",
                f"{step.formula()} [{batch} decode tokens attending to "
                f"{self.inp + self.out / 2:g} tokens each; {speeds}]",
            ),
            Figure(
                "itl_s",
                itl,
                "s",
                f"{iteration.formula()}{self._lora_words(self._lora_s(batch, packed, self.inp))}"
                f" [one iteration of {batch} decode tokens + {batch} x "
                f"{self.inp} / {self.out} = {packed:.6g} prompt tokens packed in (in-flight "
                f"batching); {speeds}]"
                if self.spec is None
                else self._spec_words(batch, itl),
            ),
            throughput,
        )
        return InferenceResult(ttft * 1e3, itl * 1e3, total, batch, fit, tp, dep.replicas, figures)


def arrivals(
    trace: Trace | None, rate_per_s: float, count: int, lengths: tuple[int, int], accepted: float
) -> list[Request]:
    """What the load simulation replays: `count` Poisson arrivals at `rate_per_s` of `lengths`
    = (input tokens, output iterations), seeded, or the trace's first `count` requests at that
    rate, each output counted in iterations of `accepted` tokens (speculative decoding)."""
    if trace is None:
        return poisson_arrivals(rate_per_s, count, *lengths, LOAD_SEED)
    return trace.arrivals(rate_per_s, count, accepted)


def throughput_figure(
    replicas: int, concurrency: int, itl_s: float, speed_source: str | None = None
) -> Figure:
    """Output tokens/s of a deployment: each replica emits `concurrency` tokens an ITL (whose
    speeds came from `speed_source`, named when given)."""
    where = f" [speeds: {speed_source}]" if speed_source else ""
    return Figure(
        "throughput_tokens_s",
        replicas * concurrency / itl_s,
        "tokens/s",
        f"{replicas} replicas x {concurrency} sequences / ITL {itl_s:.6g} s{where}",
    )


def moe_of(experts: int | None, per_token: int | None) -> tuple[int, int] | None:
    return (experts, per_token) if experts and per_token else None


def load_figures(
    load: LoadResult,
    per_replica: float,
    pct: int,
    targets: Targets | None,
    speed_source: str,
    traced: bool = False,
) -> tuple[Figure, ...]:
    """The simulated load's figures: the mean batch, each latency's percentiles, and, with
    targets, the goodput and whether the targets hold at p50 but not at the asked percentile.
    `traced`: the arrivals were a trace's (advisor/perf/trace_file.py), not Poisson's."""
    kind = "a trace's requests, times scaled to" if traced else "Poisson at"
    seed = "" if traced else f"seed {LOAD_SEED}; "
    how = (
        f"{load.requests} simulated requests after a warm-up, {kind} {per_replica:.6g}/s per "
        f"replica ({seed}perf/serving_sim.py)"
    )
    speeds = f" [speeds: {speed_source}]"

    def spread(d: Distribution) -> str:
        return (
            f"p50 {d.p50_s:.6g} s, p90 {d.p90_s:.6g} s, p99 {d.p99_s:.6g} s, mean {d.mean_s:.6g} s"
        )

    out = [
        Figure(
            "concurrency",
            max(1, round(load.mean_batch)),
            "sequences",
            f"mean decode batch {load.mean_batch:.4g} over the run; {how}{speeds}",
        ),
        Figure(
            "ttft_at_rate_s",
            load.ttft.at(pct),
            "s",
            f"p{pct} time to first token, queueing included: {spread(load.ttft)}{speeds}",
        ),
    ]
    for name, dist, what in (
        ("ttft_p99_s", load.ttft, "time to first token"),
        ("itl_p99_s", load.itl, "gap between consecutive tokens (every token)"),
        ("tpot_p99_s", load.tpot, "a request's mean token gap"),
        ("e2e_p99_s", load.e2e, "a request's time in the system"),
    ):
        out.append(Figure(name, dist.p99_s, "s", f"p99 {what}: {spread(dist)}{speeds}"))
    if targets is not None and targets.any:
        held = targets.met_under(load)
        note = ""
        if targets.met_under(load, 50) and not held:
            note = f"; the targets hold at p50 but not at p{pct}"
        out.append(
            Figure(
                "goodput_requests_s",
                load.goodput_rate,
                "requests/s",
                f"requests per second per replica meeting TTFT and ITL within the targets; "
                f"{'met' if held else 'missed'} at p{pct}{note}; {how}{speeds}",
            )
        )
    return tuple(out)
