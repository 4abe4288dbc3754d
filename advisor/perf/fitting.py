"""Fits a sized workload (a model, tokens, a throughput target) onto one kind of GPU node.

Pure. For training: the fewest data-parallel GPUs whose per-GPU memory (ZeRO-sharded states +
activations) fits, then time and cost to completion. For inference: GPUs per replica to hold
weights + KV cache, replicas for the throughput target, and cost per million tokens.
The efficiency is the workload profile's (catalog) unless the fleet's probe reports calibrate it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from advisor.catalog.models import Accelerator, WorkloadProfile
from advisor.catalog.queries import Catalog
from advisor.did_you_mean import unknown
from advisor.errors import InputError
from advisor.perf.calibration import MIN_FLEET_REPORTS, Calibration, efficiency
from advisor.perf.inference import (
    USABLE_MEMORY,
    Deployment,
    InferenceModel,
    InferenceResult,
    Targets,
    bandwidth_efficiency,
    moe_of,
)
from advisor.perf.sizing import (
    TRAINING_STATE_BYTES,
    Figure,
    Shape,
    compute_hours,
    inference_memory,
    min_gpus_for,
    training_flops,
    training_memory,
    zero_state_bytes_per_param,
)
from advisor.request import SizedWork

# Without --input-tokens / --output-tokens: 1000 in, 1000 out, the shape of the TensorRT-LLM
# perf-overview rows the inference model is calibrated on (tests/data/published.yaml).
DEFAULT_INPUT_TOKENS = 1000
DEFAULT_OUTPUT_TOKENS = 1000
DEFAULT_SEQ_LEN = 4096


@dataclass(frozen=True)
class Fit:
    """How one sized workload lands on one kind of GPU node: GPUs, memory, time or throughput."""

    gpus_needed: int  # by memory (training: data-parallel ranks; inference: per replica x replicas)
    nodes: int
    rented_gpus: int
    spans_nodes: bool  # one model copy split across nodes (only training may)
    memory_per_gpu_gb: float
    memory_total_gb: float  # what the work needs, all GPUs together
    efficiency: float
    efficiency_source: str
    hours: float | None = None  # training with a token count
    tokens_per_s: float | None = None  # inference capacity of what is rented
    served_tokens_per_s: float | None = None  # what is paid for: the target, or the capacity
    replicas: int | None = None
    ttft_ms: float | None = None  # inference with a model preset (advisor/perf/inference.py)
    itl_ms: float | None = None
    concurrency: int | None = None  # sequences in flight per replica
    tensor_parallel: int | None = None
    # modelled inference: the lowest (TTFT, ITL) ms reachable here, and whether the latency
    # targets are met (when not, the figures above are the lowest-ITL deployment's)
    latency_floor: tuple[float, float] | None = None
    latency_met: bool = True
    unfit: str | None = None  # why this GPU cannot hold the work at all
    figures: tuple[Figure, ...] = field(default=(), compare=False)


class WorkPlan:
    """One sized workload (a request's model, tokens or throughput target) under its workload
    profile; `fit` places it on a kind of GPU node, cached per (accelerator, GPUs per node)."""

    def __init__(
        self,
        catalog: Catalog,
        w: SizedWork,
        profile: WorkloadProfile,
        fleet: Mapping[str, Calibration] | None = None,
        min_fleet_reports: int = MIN_FLEET_REPORTS,
    ) -> None:
        if profile.sizing == "none":
            raise InputError(f"{profile.id} is not sized from a model: drop --model / --params-b")
        if w.model is not None:
            preset = catalog.models.get(w.model)
            if preset is None:
                raise InputError(unknown("model", w.model, catalog.models))
            self.shape = Shape.of(preset)
            self.moe = moe_of(preset.experts, preset.experts_per_token)
            self.context_limit: int | None = preset.context_length
        else:
            assert w.params_b is not None
            self.shape = Shape.bare(w.params_b)
            self.moe = None
            self.context_limit = None
        self.kind = profile.sizing
        self.w, self.profile = w, profile
        self.batch = w.batch or profile.default_batch
        self.fleet = fleet or {}
        self.min_fleet_reports = min_fleet_reports
        too_long = bool(self.context_limit and (w.context_tokens or 0) > self.context_limit)
        if self.kind == "inference" and too_long:
            raise InputError(
                f"context of {w.context_tokens} tokens is beyond {w.model}'s {self.context_limit}"
            )
        if self.kind == "inference" and self.shape.layers is None:
            _refuse_serving_fields(w)
        self._cache: dict[tuple[str, int, float], Fit] = {}
        self.targets = latency_targets(w, profile)

    def efficiency(self, acc: Accelerator) -> tuple[float, str]:
        """The one efficiency rule (advisor.perf.calibration) for this profile on `acc`."""
        eff = efficiency(
            self.profile.efficiency, self.profile.id, self.fleet.get(acc.id), self.min_fleet_reports
        )
        return eff.value, eff.source

    def fit(self, acc: Accelerator, gpus_per_node: int, link_gb_s: float | None = None) -> Fit:
        """The work on nodes of `gpus_per_node` x `acc` whose GPUs talk at `link_gb_s` per GPU
        (an instance type's link; the accelerator's own when None; 0: over PCIe)."""
        link = acc.interconnect_gb_s if link_gb_s is None else link_gb_s
        key = (acc.id, gpus_per_node, link)
        if key not in self._cache:
            self._cache[key] = (
                self._training(acc, gpus_per_node)
                if self.kind == "training"
                else self._inference(acc, gpus_per_node, link)
            )
        return self._cache[key]

    # -- training ---------------------------------------------------------------------------
    def _training(self, acc: Accelerator, per_node: int) -> Fit:
        w, shape = self.w, self.shape
        seq = w.seq_len or min(self.context_limit or DEFAULT_SEQ_LEN, DEFAULT_SEQ_LEN)
        has_shape = shape.layers is not None
        act = _activations(shape, seq, self.batch, w.recompute, has_shape)
        ranks = _min_ranks(w.zero_stage, shape.params, acc.memory_gb * USABLE_MEMORY - act)
        eff, source = self.efficiency(acc)
        if ranks is None:
            return _unfit(acc, w.zero_stage, shape.params, act, eff, source)
        wanted = self.profile.default_gpu_count if w.gpu_count is None else w.gpu_count
        needed = max(ranks, wanted, 1)
        nodes = math.ceil(needed / per_node)
        rented = nodes * per_node  # every rented GPU joins data parallelism
        figures = training_memory(
            shape,
            zero_stage=w.zero_stage,
            ranks=rented,
            seq_len=seq if has_shape else None,
            micro_batch=self.batch,
            recompute=w.recompute,
        )
        time = self._training_time(acc, rented, eff)
        return Fit(
            gpus_needed=needed,
            nodes=nodes,
            rented_gpus=rented,
            spans_nodes=nodes > 1,
            memory_per_gpu_gb=figures[-1].value,
            memory_total_gb=shape.params * TRAINING_STATE_BYTES / 1e9 + act * rented,
            efficiency=eff,
            efficiency_source=source,
            hours=time[-1].value if time else None,
            figures=(*figures, *time),
        )

    def _training_time(self, acc: Accelerator, gpus: int, eff: float) -> tuple[Figure, ...]:
        """Training FLOPs and hours on `gpus` GPUs; none without a token count or a 16-bit peak."""
        peak = peak16_tflops(acc)
        if not self.w.tokens or not peak:
            return ()
        flops = training_flops(self.shape, self.w.tokens, self.w.recompute)
        return flops, compute_hours(flops.value, gpus, peak, eff)

    # -- inference --------------------------------------------------------------------------
    def _inference(self, acc: Accelerator, per_node: int, link_gb_s: float) -> Fit:
        if self.shape.layers is not None:  # a preset: the inference performance model
            return self._modelled(acc, per_node, link_gb_s)
        return self._bare_inference(acc, per_node)

    def _modelled(self, acc: Accelerator, per_node: int, link_gb_s: float) -> Fit:
        """TTFT, ITL and throughput from advisor/perf/inference.py on TP GPUs per replica."""
        w = self.w
        try:
            choice = choose_deployment(
                self.shape, self.moe, acc, per_node, link_gb_s, w, self.targets
            )
        except InputError as e:
            return _unfit_inference(acc, str(e))
        got, model = choice.result, choice.model
        tp, per_replica = got.tensor_parallel, got.throughput_tokens_s / got.replicas
        replicas = max(got.replicas, _replicas_for(w.throughput_tokens_s, per_replica))
        nodes, replicas = _inference_nodes(tp, per_node, replicas)
        per_gpu = model.memory(got.concurrency)[-1].value / tp
        capacity = per_replica * replicas
        return Fit(
            gpus_needed=tp * replicas,
            nodes=nodes,
            rented_gpus=nodes * per_node,
            spans_nodes=False,
            memory_per_gpu_gb=per_gpu,
            memory_total_gb=per_gpu * tp * replicas,
            efficiency=model.eff_bw,
            efficiency_source=bandwidth_efficiency(acc)[1],
            tokens_per_s=capacity,
            served_tokens_per_s=min(capacity, w.throughput_tokens_s or math.inf),
            replicas=replicas,
            ttft_ms=got.ttft_ms,
            itl_ms=got.itl_ms,
            concurrency=got.concurrency,
            tensor_parallel=tp,
            latency_floor=choice.floor,
            latency_met=choice.met,
            figures=(
                *got.figures,
                _replicas_figure(replicas, w.throughput_tokens_s, per_replica),
            ),
        )

    def _bare_inference(self, acc: Accelerator, per_node: int) -> Fit:
        """--params-b without a shape: the weights' memory and the GPUs (a power of two inside
        one node) that hold them. Latency and throughput need the architecture (layers, heads,
        KV heads) the inference model reads: not computed, and said so (BARE_INFERENCE)."""
        memory = inference_memory(self.shape, precision=self.w.precision)
        total = memory[-1].value
        eff, source = bandwidth_efficiency(acc)
        per_replica = _next_pow2(min_gpus_for(total, acc.memory_gb, USABLE_MEMORY))
        if per_replica > per_node:
            reason = (
                f"{total:,.0f} GB needs {per_replica} x {acc.memory_gb:g} GB GPUs, beyond one "
                f"node of {per_node}: a replica is served inside one node"
            )
            return _unfit_inference(acc, reason)
        nodes, replicas = _inference_nodes(per_replica, per_node, 1)
        return Fit(
            gpus_needed=per_replica * replicas,
            nodes=nodes,
            rented_gpus=nodes * per_node,
            spans_nodes=False,
            memory_per_gpu_gb=total / per_replica,
            memory_total_gb=total * replicas,
            efficiency=eff,
            efficiency_source=source,
            replicas=replicas,
            figures=(*memory, _per_replica_figure(total, acc, per_replica)),
        )


# What `advisor estimate` says of a model given as --params-b for inference.
BARE_INFERENCE = (
    "memory only: TTFT, ITL and throughput need the model's architecture (layers, heads, KV "
    "heads): give --model (a preset)"
)


def _refuse_serving_fields(w: SizedWork) -> None:
    """Serving figures asked of a model without a shape: exit 2 rather than a silent guess."""
    asked = [
        name
        for name in (
            "throughput_tokens_s",
            "input_tokens",
            "output_tokens",
            "concurrency",
            "tensor_parallel",
            "max_ttft_ms",
            "max_itl_ms",
            "context_tokens",
        )
        if getattr(w, name) is not None
    ]
    if asked:
        raise InputError(f"{', '.join(asked)}: {BARE_INFERENCE}")


def _io_tokens(w: SizedWork) -> tuple[int, int]:
    """Input and output tokens: as asked; else a --context-tokens split with at most the default
    output; else the defaults."""
    if w.input_tokens or w.output_tokens or not w.context_tokens:
        return w.input_tokens or DEFAULT_INPUT_TOKENS, w.output_tokens or DEFAULT_OUTPUT_TOKENS
    out = max(1, min(DEFAULT_OUTPUT_TOKENS, w.context_tokens // 2))
    return max(1, w.context_tokens - out), out


def _unfit_inference(acc: Accelerator, reason: str) -> Fit:
    eff, source = bandwidth_efficiency(acc)
    return Fit(0, 0, 0, False, 0.0, 0.0, eff, source, unfit=f"{acc.id}: {reason}")


@dataclass(frozen=True, slots=True)
class DeploymentChoice:
    """The deployment chosen for a request on one kind of node: the highest throughput per GPU
    among those that meet the latency targets; when none does (`met` False), the one with the
    lowest ITL. `floor` is the lowest (TTFT, ITL) in ms any tensor-parallel degree reaches."""

    result: InferenceResult
    model: InferenceModel
    floor: tuple[float, float]
    met: bool


def latency_targets(w: SizedWork, profile: WorkloadProfile) -> Targets:
    """The request's latency targets, each falling back to the workload profile's default."""
    default = profile.latency_targets
    if default is None:
        return Targets(w.max_ttft_ms, w.max_itl_ms)
    return Targets(
        default.max_ttft_ms if w.max_ttft_ms is None else w.max_ttft_ms,
        default.max_itl_ms if w.max_itl_ms is None else w.max_itl_ms,
    )


def choose_deployment(
    shape: Shape,
    moe: tuple[int, int] | None,
    acc: Accelerator,
    per_node: int,
    link_gb_s: float,
    w: SizedWork,
    targets: Targets,
) -> DeploymentChoice:
    """The inference model for a request on `acc`: TP as asked, else every power of two inside
    one node (that divides the GPUs asked for) that holds the weights and the sequences asked
    for; GPUs as asked, else one replica of TP GPUs. InputError when no degree holds them."""
    inp, out = _io_tokens(w)
    asked = w.concurrency or w.batch
    degrees = (
        [w.tensor_parallel]
        if w.tensor_parallel
        else [d for d in (1, 2, 4, 8, 16, 32, 64) if d <= per_node and (w.gpu_count or d) % d == 0]
    )
    met: list[tuple[float, InferenceResult, InferenceModel]] = []
    missed: list[tuple[InferenceResult, InferenceModel]] = []
    floors: list[tuple[float, float]] = []
    model: InferenceModel | None = None
    for tp in degrees:
        dep = Deployment(acc, w.gpu_count or tp, tp, w.precision, link_gb_s, per_node)
        model = InferenceModel(shape, dep, inp, out, moe)
        if model.max_concurrency() < (asked or 1):
            continue
        got = model.at(asked, targets)
        floors.append((model.prefill_s(inp) * 1e3, model.itl_s(asked or 1) * 1e3))
        if targets.met(got.ttft_ms, got.itl_ms):
            met.append((got.throughput_tokens_s / dep.gpus, got, model))
        else:
            missed.append((got, model))
    if not floors:
        assert model is not None
        model.at(asked)  # raises: why the largest degree tried holds nothing
        raise AssertionError("unreachable: a degree that holds the work was skipped")
    floor = (min(f[0] for f in floors), min(f[1] for f in floors))
    if met:
        _, got, model = max(met, key=lambda m: m[0])  # ties: the first, the fewest GPUs
        return DeploymentChoice(got, model, floor, True)
    got, model = min(missed, key=lambda m: (m[0].itl_ms, m[0].ttft_ms))
    return DeploymentChoice(got, model, floor, False)


def peak16_tflops(acc: Accelerator) -> float | None:
    """Dense 16-bit peak (bf16, else fp16) in TFLOP/s: what training and GPU fitting read."""
    return acc.peak_tflops.bf16 or acc.peak_tflops.fp16


def network_below_floor(profile: WorkloadProfile, network_gbps: float) -> bool:
    """Whether a scale-out network is too slow for one job spread over several nodes: the one
    rule `estimate` and the engine's NETWORK_TOO_SLOW constraint both apply."""
    return network_gbps < profile.min_multi_node_network_gbps


def _unfit(
    acc: Accelerator, stage: int, params: float, activations_gb: float, eff: float, source: str
) -> Fit:
    """A training Fit for a GPU that cannot hold the work at any GPU count: what no sharding
    removes (the unsharded states and one micro-batch's activations) is above its memory."""
    cap = acc.memory_gb * USABLE_MEMORY
    floor = _stage_floor(stage, params)
    parts = [f"ZeRO stage {stage} keeps {floor:.0f} GB of unsharded states"]
    if activations_gb:
        parts.append(f"{activations_gb:.0f} GB of activations")
    return Fit(
        gpus_needed=0,
        nodes=0,
        rented_gpus=0,
        spans_nodes=False,
        memory_per_gpu_gb=floor + activations_gb,  # the least any GPU count leaves per GPU
        memory_total_gb=0,
        efficiency=eff,
        efficiency_source=source,
        unfit=(
            f"{' + '.join(parts)} per GPU whatever the GPU count: "
            f"{floor + activations_gb:.0f} GB, above {cap:.0f} GB usable of {acc.memory_gb:g} GB"
        ),
    )


def _replicas_for(target_tokens_s: float | None, per_replica_tokens_s: float) -> int:
    return math.ceil(target_tokens_s / per_replica_tokens_s) if target_tokens_s else 1


def _inference_nodes(per_replica: int, per_node: int, replicas: int) -> tuple[int, int]:
    """Nodes to rent and replicas to run (a replica lives inside one node): rented GPUs are
    paid for, so a node runs as many replicas as it holds."""
    per_node_replicas = max(1, per_node // per_replica)
    nodes = math.ceil(replicas / per_node_replicas)
    return nodes, nodes * per_node_replicas


def _per_replica_figure(total_gb: float, acc: Accelerator, per_replica: int) -> Figure:
    return Figure(
        "gpus_per_replica",
        per_replica,
        "GPUs",
        f"{total_gb:.1f} GB / ({acc.memory_gb:g} GB x {USABLE_MEMORY:.0%} usable), "
        "rounded up to a power of two (tensor parallel)",
    )


def _replicas_figure(replicas: int, target_tokens_s: float | None, rate: float) -> Figure:
    return Figure(
        "replicas",
        replicas,
        "replicas",
        f"ceil({target_tokens_s:g} tokens/s / {rate:,.0f} per replica)"
        if target_tokens_s
        else "no throughput target: one replica",
    )


def _activations(shape: Shape, seq: int, batch: int, recompute: bool, has_shape: bool) -> float:
    if not has_shape:
        return 0.0
    figures = training_memory(
        shape, zero_stage=3, ranks=1, seq_len=seq, micro_batch=batch, recompute=recompute
    )
    return next(f.value for f in figures if f.name == "activations_per_gpu_gb")


def _stage_floor(stage: int, params: float) -> float:
    """GB per GPU that sharding cannot remove (the unsharded part of the states)."""
    return params * {0: 16, 1: 4, 2: 2, 3: 0}[stage] / 1e9


def _min_ranks(stage: int, params: float, budget_gb: float) -> int | None:
    """Fewest data-parallel ranks whose per-GPU states fit `budget_gb`; None if none can."""
    floor = _stage_floor(stage, params)
    sharded = params * {0: 0, 1: 12, 2: 14, 3: 16}[stage] / 1e9
    room = budget_gb - floor
    if room <= 0:
        return None
    ranks = max(1, math.ceil(sharded / room - 1e-9)) if sharded else 1
    per_param, _ = zero_state_bytes_per_param(stage, ranks)
    assert params * per_param / 1e9 <= budget_gb + 1e-6
    return ranks


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()
