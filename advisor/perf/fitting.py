"""Fits a sized workload (a model, tokens, a throughput target) onto one kind of GPU node.

Pure. For training: the fewest data-parallel GPUs whose per-GPU memory (ZeRO-sharded states of
what is trained, every weight or LoRA/QLoRA adapters, + frozen base weights + activations) fits
within the usable memory (sizing.usable_memory_gb), then time and cost to completion; when no
count fits, every figure at one node with the reason and the lighter methods that would fit.
For inference: GPUs per replica to hold weights + KV cache, replicas for the throughput target,
and cost per million tokens.
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
    Deployment,
    InferenceModel,
    InferenceResult,
    Targets,
    bandwidth_efficiency,
    moe_of,
    serving_memory,
)
from advisor.perf.sizing import (
    GB,
    METHODS,
    TRAINING_STATE_BYTES,
    USABLE_MEMORY,
    Figure,
    Shape,
    activation_memory,
    compute_hours,
    frozen_weights,
    inference_memory,
    lora_adapter_params,
    min_gpus_for,
    training_flops,
    training_memory,
    usable_memory_gb,
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
    # training that does not fit here (or not on one node where the profile runs on one): the
    # lighter fine-tuning methods that would, each as (method, memory per GPU GB, GPUs, nodes)
    lighter_methods: tuple[tuple[str, float, int, int], ...] = ()
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
        if w.method != "full":
            if self.kind != "training":
                raise InputError(f"--method {w.method} is a training method: {profile.id} serves")
            lora_adapter_params(self.shape, w.lora_rank)  # refused without the shape: exit 2
        self.seq_len = w.seq_len or min(self.context_limit or DEFAULT_SEQ_LEN, DEFAULT_SEQ_LEN)
        self.activations_gb = 0.0  # one micro-batch's, and the logits: none without a shape
        if self.shape.layers is not None:
            act = activation_memory(self.shape, self.seq_len, self.batch, w.recompute)
            self.activations_gb = sum(f.value for f in act)

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
        """The fewest data-parallel ranks that hold the work (at least the GPUs asked for);
        when no count does, every figure at one whole node (or the GPUs asked for) and why."""
        w, shape = self.w, self.shape
        ranks = self._min_ranks(acc, w.method)
        wanted = self.profile.default_gpu_count if w.gpu_count is None else w.gpu_count
        needed = max(ranks or per_node, wanted, 1)
        nodes = math.ceil(needed / per_node)
        rented = nodes * per_node  # every rented GPU joins data parallelism
        figures = self._memory(w.method, rented)
        eff, source = self.efficiency(acc)
        time = self._training_time(acc, rented, eff)
        one_node_only = nodes > 1 and not self.profile.scale_out
        trainable = shape.params if w.method == "full" else self._adapters()
        frozen = 0.0 if w.method == "full" else self._frozen(w.method)
        return Fit(
            gpus_needed=needed,
            nodes=nodes,
            rented_gpus=rented,
            spans_nodes=nodes > 1,
            memory_per_gpu_gb=figures[-1].value,
            memory_total_gb=trainable * TRAINING_STATE_BYTES / GB
            + frozen
            + self.activations_gb * rented,
            efficiency=eff,
            efficiency_source=source,
            hours=time[-1].value if time else None,
            unfit=None if ranks is not None else self._unfit(acc),
            lighter_methods=self._lighter(acc, per_node) if ranks is None or one_node_only else (),
            figures=(*figures, *time),
        )

    def _memory(self, method: str, ranks: int) -> list[Figure]:
        """The one training memory rule (sizing.training_memory) for this request on `ranks`."""
        w = self.w
        return training_memory(
            self.shape,
            zero_stage=w.zero_stage,
            ranks=ranks,
            seq_len=self.seq_len if self.shape.layers is not None else None,
            micro_batch=self.batch,
            recompute=w.recompute,
            method=method,
            lora_rank=w.lora_rank,
        )

    def _adapters(self) -> float:
        return lora_adapter_params(self.shape, self.w.lora_rank)[0].value

    def _frozen(self, method: str) -> float:
        """GB of the frozen base weights, one whole copy (sizing.frozen_weights)."""
        return frozen_weights(self.shape, method, self.w.zero_stage, 1).value

    def _split(self, method: str) -> tuple[float, float]:
        """GB per GPU that no data-parallel count removes (activations, unsharded states and
        frozen weights) and GB that ZeRO shards over the ranks (divided by their count)."""
        stage = self.w.zero_stage
        trainable = self.shape.params if method == "full" else self._adapters()
        kept = trainable * _stage_floor(stage) / GB + self.activations_gb
        sharded = trainable * (TRAINING_STATE_BYTES - _stage_floor(stage)) / GB
        if method != "full":
            frozen = self._frozen(method)
            kept, sharded = (kept, sharded + frozen) if stage == 3 else (kept + frozen, sharded)
        return kept, sharded

    def _min_ranks(self, acc: Accelerator, method: str) -> int | None:
        """Fewest data-parallel ranks whose memory per GPU fits the usable memory; None if none
        can (what no sharding removes is above it)."""
        budget = usable_memory_gb(acc.memory_gb)
        kept, sharded = self._split(method)
        room = budget - kept
        if room <= 0:
            return None
        ranks = max(1, math.ceil(sharded / room - 1e-9)) if sharded else 1
        assert self._memory(method, ranks)[-1].value <= budget + 1e-6
        return ranks

    def _unfit(self, acc: Accelerator) -> str:
        """Why no GPU count holds the work: what no sharding removes is above the GPU's usable
        memory."""
        method, stage = self.w.method, self.w.zero_stage
        kept, _ = self._split(method)
        states = kept - self.activations_gb
        what = "unsharded states" if method == "full" else f"unsharded {method} weights and states"
        parts = [f"ZeRO stage {stage} keeps {states:.0f} GB of {what}"]
        if self.activations_gb:
            parts.append(f"{self.activations_gb:.0f} GB of activations")
        return (
            f"{' + '.join(parts)} per GPU whatever the GPU count: {kept:.0f} GB, above "
            f"{usable_memory_gb(acc.memory_gb):.0f} GB usable of {acc.memory_gb:g} GB"
        )

    def _lighter(self, acc: Accelerator, per_node: int) -> tuple[tuple[str, float, int, int], ...]:
        """The lighter methods (after the one asked for in METHODS) that fit on `acc`, on one
        node where the profile runs on one: what each needs per GPU and on how many GPUs."""
        if self.shape.intermediate is None or self.shape.mla_kv_dim:
            return ()  # no adapter count for this shape (sizing.lora_adapter_params)
        wanted = self.profile.default_gpu_count if self.w.gpu_count is None else self.w.gpu_count
        out = []
        for method in METHODS[METHODS.index(self.w.method) + 1 :]:
            ranks = self._min_ranks(acc, method)
            if ranks is None:
                continue
            nodes = math.ceil(max(ranks, wanted, 1) / per_node)
            if nodes > 1 and not self.profile.scale_out:
                continue
            rented = nodes * per_node
            out.append((method, self._memory(method, rented)[-1].value, rented, nodes))
        return tuple(out)

    def _training_time(self, acc: Accelerator, gpus: int, eff: float) -> tuple[Figure, ...]:
        """Training FLOPs and hours on `gpus` GPUs; none without a token count or a 16-bit peak."""
        peak = peak16_tflops(acc)
        w = self.w
        if not w.tokens or not peak:
            return ()
        flops = training_flops(self.shape, w.tokens, w.recompute, w.method, w.lora_rank)
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
            return self._unfit_modelled(acc, per_node, str(e))
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

    def _unfit_modelled(self, acc: Accelerator, per_node: int, reason: str) -> Fit:
        """A served model no tensor-parallel degree inside one node holds: its memory (the one
        rule, InferenceModel.memory) at the widest degree, with the reason."""
        w = self.w
        tp = w.tensor_parallel or max(
            d for d in (1, 2, 4, 8, 16, 32, 64) if d <= per_node and (w.gpu_count or d) % d == 0
        )
        inp, out = _io_tokens(w)
        memory = serving_memory(self.shape, w.precision, inp + out, w.concurrency or w.batch or 1)
        return _unfit_inference(acc, reason, memory, tp, per_node)

    def _bare_inference(self, acc: Accelerator, per_node: int) -> Fit:
        """--params-b without a shape: the weights' memory and the GPUs (a power of two inside
        one node) that hold them. Latency and throughput need the architecture (layers, heads,
        KV heads) the inference model reads: not computed, and said so (BARE_INFERENCE)."""
        memory = inference_memory(self.shape, precision=self.w.precision)
        total = memory[-1].value
        eff, source = bandwidth_efficiency(acc)
        per_replica = _next_pow2(min_gpus_for(total, acc.memory_gb))
        if per_replica > per_node:
            reason = (
                f"{total:,.0f} GB needs {per_replica} x {acc.memory_gb:g} GB GPUs, beyond one "
                f"node of {per_node}: a replica is served inside one node"
            )
            return _unfit_inference(acc, reason, memory, _next_pow2(per_node + 1) // 2, per_node)
        asked = _replicas_for(self.w.gpu_count, per_replica)  # --gpu-count: at least that many
        nodes, replicas = _inference_nodes(per_replica, per_node, asked)
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


def _unfit_inference(
    acc: Accelerator, reason: str, memory: list[Figure], gpus: int, per_node: int
) -> Fit:
    """Serving that does not fit `acc`: every memory figure, the memory per GPU it would need
    on `gpus` GPUs of one node (the most it may use), and why."""
    eff, source = bandwidth_efficiency(acc)
    total = memory[-1].value
    return Fit(
        gpus_needed=gpus,
        nodes=1,
        rented_gpus=per_node,
        spans_nodes=False,
        memory_per_gpu_gb=total / gpus,
        memory_total_gb=total,
        efficiency=eff,
        efficiency_source=source,
        tensor_parallel=gpus,
        unfit=f"{acc.id}: {reason}",
        figures=(
            *memory,
            Figure(
                "memory_per_gpu_gb",
                total / gpus,
                "GB",
                f"{total:.1f} GB / {gpus} GPUs, above {usable_memory_gb(acc.memory_gb):.1f} GB "
                f"usable of {acc.memory_gb:g} GB",
            ),
        ),
    )


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


def _stage_floor(stage: int) -> float:
    """Bytes per trainable parameter that ZeRO's `stage` keeps on every GPU (unsharded): the
    rest of the 16 is sharded (sizing.zero_state_bytes_per_param)."""
    return {0: 16, 1: 4, 2: 2, 3: 0}[stage]


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()
