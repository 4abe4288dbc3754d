"""The inference performance model: TTFT, inter-token latency and throughput. Pure (no torch).

For (model shape, accelerator, GPUs, tensor-parallel degree, precision, input tokens, output
tokens, concurrency):

- prefill of one prompt of I tokens is compute-bound: 2 x active parameters x I + causal
  attention 2 x layers x I^2 x heads x head_dim FLOPs, over TP x dense peak x the compute
  efficiency, plus the tensor-parallel all-reduces -> TTFT (at low load: no queueing modelled);
- one decode step of a batch of B sequences reads the weights it touches (MoE: the expected
  distinct experts, below) and the batch's KV cache, and does 2 x active x B + attention
  4 x layers x B x L x heads x head_dim FLOPs; its time is max(bytes / (TP x bandwidth x eff_bw),
  FLOPs / (TP x peak x eff_compute)) plus the all-reduces;
- continuous (in-flight) batching interleaves each sequence's prefill with the batch's decode
  steps, so over one sequence's life of O steps the batch also prefills B prompts: the
  inter-token latency is step + B x prefill / O, and the output throughput of one replica is
  B / ITL (Orca, Yu et al. OSDI 2022, iteration-level scheduling; TensorRT-LLM in-flight
  batching);
- tensor parallelism only inside one node: 2 all-reduces per layer (after attention and after
  the MLP, Megatron-LM, Shoeybi et al. 2019 section 3) of B x hidden x 2 bytes each, ring cost
  2(n-1)/n x bytes / link bandwidth + a latency per call (nccl-tests PERFORMANCE.md);
- concurrency is bounded by memory: per GPU, usable memory - weights / TP must hold the KV cache
  of B sequences of I + O tokens / TP; MoE memory holds every expert, compute uses active ones.

MoE weights touched by a batch: each token picks k of E experts per layer; with uniform,
independent routing the chance an expert is picked by none of B tokens is (1 - k/E)^B, so the
expected number of distinct experts read per layer is E x (1 - (1 - k/E)^B) (linearity of
expectation; the same estimate is used for expert load in the Switch Transformer analysis,
Fedus et al. 2021, and in MoE-Lightning / "Towards MoE deployment" memory-traffic models). At
B = 1 it is k: only active experts are read.

Calibration constants: 2 per accelerator generation (compute efficiency, bandwidth efficiency),
in EFFICIENCY below, plus 3 shared ones (all-reduce latency, PCIe fallback bandwidth, a
per-layer overhead per forward pass). They were set from the published TensorRT-LLM rows in
tests/data/published.yaml (a copy of ../shared/calibration/published.yaml) as one value per
generation by hand, never per row; benchmarks/bench_calibration.py prints every row's ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.catalog.models import Accelerator, Generation
from advisor.errors import InputError
from advisor.perf.precision import ComputePrecision, compute_precision
from advisor.perf.sizing import (
    BYTES_PER_WEIGHT,
    GB,
    Figure,
    Shape,
    inference_memory,
    kv_cache_bytes_per_token,
    usable_memory_gb,
)

# (compute efficiency, memory-bandwidth efficiency) per generation. ESTIMATED: set by hand from
# the TensorRT-LLM 0.17 perf-overview rows (tests/data/published.yaml: Llama-3.1-8B FP8 on H100
# at max load implies ~47-49% of dense FP8 peak as model FLOPs; FP16 on A100 ~60-68%); memory
# bandwidth efficiency 0.8 is the usual STREAM-like fraction of HBM/GDDR peak reached by large
# reads (NVIDIA's own H100 decode guidance quotes ~80%; our H200 D2D measurement in
# ../shared/REFERENCE.md section 1 reached 4,198/4,800 = 0.87). Other generations: estimated at
# the Hopper figures, uncalibrated.
EFFICIENCY: dict[Generation, tuple[float, float]] = {
    Generation.hopper: (0.50, 0.80),
    Generation.blackwell: (0.50, 0.80),  # estimated, uncalibrated
    Generation.ampere: (0.60, 0.80),
    Generation.ada: (0.50, 0.80),
    Generation.turing: (0.50, 0.75),  # estimated, uncalibrated
    Generation.volta: (0.50, 0.75),  # estimated, uncalibrated
    Generation.cdna3: (0.40, 0.70),  # estimated, uncalibrated
    Generation.cdna2: (0.40, 0.70),  # estimated, uncalibrated
}
DEFAULT_EFFICIENCY = (0.40, 0.70)  # estimated: generations not listed above
ALLREDUCE_LATENCY_S = 8e-6  # estimated: NCCL small-message all-reduce latency inside a node
# GPUs without a GPU-to-GPU fabric all-reduce over PCIe: Gen4 x16 ~ 25 GB/s per direction
# (estimated from REFERENCE.md section 1: Gen5 x16 pinned copies at 55 GB/s, Gen4 is half).
PCIE_ALLREDUCE_GB_S = 25.0
RUNTIME_OVERHEAD = 0.10  # on weights + KV: activations, workspace (sizing.inference_memory)
ACTIVATION_BYTES = 2  # activations all-reduced in 16-bit
# Fixed time per layer per forward pass (kernel launches, norms, sampling, scheduling) that no
# roofline term covers. ESTIMATED: one value set from the three TensorRT-LLM 0.14 QPS=2 serving
# rows of published.yaml, whose ITL exceeds the bandwidth bound by 1.8-6 ms, about 60 us/layer.
LAYER_OVERHEAD_S = 60e-6


def kv_precision_of(precision: str) -> str:
    """FP8 engines keep an FP8 KV cache (TensorRT-LLM perf-overview FP8 rows); else 16-bit."""
    return "fp8" if precision == "fp8" else "bf16"


def serving_memory(shape: Shape, precision: str, context_tokens: int, batch: int) -> list[Figure]:
    """Memory of one replica (sizing.inference_memory) serving `batch` sequences of
    `context_tokens` with weights in `precision`; the last figure is the total."""
    return inference_memory(
        shape,
        precision=precision,
        context_tokens=context_tokens,
        batch=batch,
        kv_precision=kv_precision_of(precision),
        overhead_fraction=RUNTIME_OVERHEAD,
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

    @property
    def replicas(self) -> int:
        return self.gpus // self.tensor_parallel


@dataclass(frozen=True, slots=True)
class Targets:
    """Latency targets a deployment must meet (None: no target)."""

    max_ttft_ms: float | None = None
    max_itl_ms: float | None = None

    def met(self, ttft_ms: float, itl_ms: float) -> bool:
        return (self.max_ttft_ms is None or ttft_ms <= self.max_ttft_ms) and (
            self.max_itl_ms is None or itl_ms <= self.max_itl_ms
        )


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
    """TP must divide the GPUs and stay inside one node; else InputError (exit 2) with options."""
    valid = [d for d in range(1, min(gpus, gpus_per_node) + 1) if gpus % d == 0]
    if tp < 1 or gpus % tp or tp > gpus_per_node:
        raise InputError(
            f"tensor-parallel degree {tp} must divide {gpus} GPUs and fit one node of "
            f"{gpus_per_node}: valid degrees are {', '.join(map(str, valid))}"
        )


def _compute(dep: Deployment) -> ComputePrecision:
    got = compute_precision(dep.acc, dep.precision)
    if not isinstance(got, ComputePrecision):
        raise InputError(got.reason)
    return got


def _efficiency(acc: Accelerator) -> tuple[float, float]:
    return EFFICIENCY.get(acc.generation, DEFAULT_EFFICIENCY)


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
    """Weight bytes one decode step reads: all of a dense model; the shared part plus the
    expected distinct experts of an MoE model (expert parameters X from total = D + X,
    active = D + X k/E)."""
    if not moe or shape.params == shape.active_params:
        return shape.params * bytes_per_weight
    experts, k = moe
    expert_params = (shape.params - shape.active_params) / (1 - k / experts)
    dense = shape.params - expert_params
    touched = expert_params * expected_experts(experts, k, batch) / experts
    return (dense + touched) * bytes_per_weight


def _allreduce_s(dep: Deployment, shape: Shape, tokens: int) -> float:
    n = dep.tensor_parallel
    if n == 1:
        return 0.0
    layers, hidden, *_ = shape.need_layers("tensor parallelism")
    link = dep.link_gb_s / 2 if dep.link_gb_s else PCIE_ALLREDUCE_GB_S  # one direction
    per_call = 2 * (n - 1) / n * tokens * hidden * ACTIVATION_BYTES / (link * GB)
    return 2 * layers * (per_call + ALLREDUCE_LATENCY_S)


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
            raise InputError("input and output tokens must be at least 1")
        self.shape, self.dep, self.moe = shape, dep, moe
        self.inp, self.out = input_tokens, output_tokens
        self.layers, _, self.heads, _, self.head_dim = shape.need_layers("the inference model")
        self.cp = _compute(dep)
        self.eff_c, self.eff_bw = _efficiency(dep.acc)
        self.bpw = BYTES_PER_WEIGHT[dep.precision]
        self.kv_precision = kv_precision_of(dep.precision)
        self.kv_per_token = kv_cache_bytes_per_token(
            shape, self.kv_precision, input_tokens + output_tokens
        )
        tp = dep.tensor_parallel
        self.peak_flops = tp * self.cp.peak_tflops * 1e12 * self.eff_c
        self.bw_bytes_s = tp * dep.acc.memory_bandwidth_gbps * GB * self.eff_bw

    def max_concurrency(self) -> int:
        """Sequences one replica holds: the largest B whose memory (below) per GPU stays within
        the usable memory: (weights + B x KV of I + O tokens) x (1 + overhead) / TP."""
        tp = self.dep.tensor_parallel
        budget = usable_memory_gb(self.dep.acc.memory_gb) * GB * tp / (1 + RUNTIME_OVERHEAD)
        free = budget - self.shape.params * self.bpw
        per_seq = self.kv_per_token.value * (self.inp + self.out)
        return max(0, int(free // per_seq))

    def memory(self, batch: int) -> list[Figure]:
        """The one inference memory rule (serving_memory) for `batch` sequences of I + O tokens
        with this model's KV precision; the last figure is the replica's total."""
        return serving_memory(self.shape, self.dep.precision, self.inp + self.out, batch)

    def prefill_s(self, prompt: int) -> float:
        flops = 2 * self.shape.active_params * prompt
        flops += 2 * self.layers * prompt * prompt * self.heads * self.head_dim
        overhead = self.layers * LAYER_OVERHEAD_S
        return flops / self.peak_flops + _allreduce_s(self.dep, self.shape, prompt) + overhead

    def step_s(self, batch: int) -> float:
        context = self.inp + self.out / 2  # mean context over a sequence's decode
        weights = weight_bytes_touched(self.shape, self.bpw, batch, self.moe)
        kv = batch * context * self.kv_per_token.value
        flops = 2 * self.shape.active_params * batch
        flops += 4 * self.layers * batch * context * self.heads * self.head_dim
        bound = max((weights + kv) / self.bw_bytes_s, flops / self.peak_flops)
        return bound + _allreduce_s(self.dep, self.shape, batch) + self.layers * LAYER_OVERHEAD_S

    def itl_s(self, batch: int) -> float:
        return self.step_s(batch) + batch * self.prefill_s(self.inp) / self.out

    def at(self, concurrency: int | None = None, targets: Targets | None = None) -> InferenceResult:
        """Figures at `concurrency` per replica, or else at the highest-throughput concurrency
        that fits in memory and keeps the ITL within `targets`; when no concurrency meets the
        ITL target, at one sequence (the lowest ITL this deployment reaches)."""
        fit = self.max_concurrency()
        if fit < 1:
            raise InputError(
                f"{self.shape.name} does not fit {self.dep.tensor_parallel} x "
                f"{self.dep.acc.name} at {self.dep.precision} with one sequence of "
                f"{self.inp + self.out} tokens: raise --tensor-parallel or the GPUs"
            )
        if concurrency is not None and concurrency > fit:
            raise InputError(f"concurrency {concurrency} exceeds the {fit} sequences that fit")
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
        ttft = self.prefill_s(self.inp)
        step, itl = self.step_s(batch), self.itl_s(batch)
        total = dep.replicas * batch / itl
        tp = dep.tensor_parallel
        figures = (
            *self.memory(batch),
            Figure(
                "prefill_s",
                ttft,
                "s",
                f"(2 x {self.shape.active_params:.4g} active params x {self.inp} + attention "
                f"2 x {self.layers} x {self.inp}^2 x {self.heads} x {self.head_dim}) / ({tp} x "
                f"{self.cp.peak_tflops:g} TFLOP/s {self.cp.precision} x {self.eff_c:g}) "
                "+ TP all-reduces",
            ),
            Figure(
                "decode_step_s",
                step,
                "s",
                f"max((weights touched + {batch} x KV of {self.inp + self.out / 2:g} tokens) / "
                f"({tp} x {dep.acc.memory_bandwidth_gbps:g} GB/s x {self.eff_bw:g}), FLOPs / "
                f"({tp} x {self.cp.peak_tflops:g} TFLOP/s x {self.eff_c:g})) + TP all-reduces",
            ),
            Figure(
                "itl_s",
                itl,
                "s",
                f"decode step + {batch} prompts' prefill spread over {self.out} output tokens",
            ),
            Figure(
                "throughput_tokens_s",
                total,
                "tokens/s",
                f"{dep.replicas} replicas x {batch} sequences / ITL {itl * 1e3:.4g} ms",
            ),
        )
        return InferenceResult(ttft * 1e3, itl * 1e3, total, batch, fit, tp, dep.replicas, figures)


def moe_of(experts: int | None, per_token: int | None) -> tuple[int, int] | None:
    return (experts, per_token) if experts and per_token else None
