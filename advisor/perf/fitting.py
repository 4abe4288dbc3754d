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
    frozen_weights,
    inference_memory,
    lora_adapter_params,
    min_gpus_for,
    training_memory,
    usable_memory_gb,
)
from advisor.perf.training import Cluster, Job, Layout, Run, run_time
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
    # training with a token count (advisor/perf/training.py): GPU-hours, steady-state MFU on
    # model FLOPs, HFU (the recomputed forward counted), the parallel layout; with a deadline,
    # whether it is met and the fastest wall time any GPU count reaches on this node kind
    gpu_hours: float | None = None
    mfu: float | None = None
    hfu: float | None = None
    layout: Layout | None = None
    deadline_met: bool = True
    fastest_hours: float | None = None
    least_gpus: int | None = None  # set when max_gpus is below the fewest GPUs that hold it
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
        self._cache: dict[tuple[str, int, float, float], Fit] = {}
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
        self.deadline_h = _deadline_hours(w, self.kind)

    def efficiency(self, acc: Accelerator) -> tuple[float, str]:
        """The one efficiency rule (advisor.perf.calibration) for this profile on `acc`."""
        eff = efficiency(
            self.profile.efficiency, self.profile.id, self.fleet.get(acc.id), self.min_fleet_reports
        )
        return eff.value, eff.source

    def fit(
        self,
        acc: Accelerator,
        gpus_per_node: int,
        link_gb_s: float | None = None,
        network_gbps: float | None = None,
    ) -> Fit:
        """The work on nodes of `gpus_per_node` x `acc` whose GPUs talk at `link_gb_s` per GPU
        (an instance type's link; the accelerator's own when None; 0: over PCIe) and whose nodes
        talk at `network_gbps` (an instance type's network; the profile's multi-node floor when
        None)."""
        link = acc.interconnect_gb_s if link_gb_s is None else link_gb_s
        network = self.profile.min_multi_node_network_gbps if network_gbps is None else network_gbps
        key = (acc.id, gpus_per_node, link, network)
        if key not in self._cache:
            self._cache[key] = (
                self._training(
                    acc, Cluster(peak16_tflops(acc) or 0.0, gpus_per_node, link, network)
                )
                if self.kind == "training"
                else self._inference(acc, gpus_per_node, link)
            )
        return self._cache[key]

    # -- training ---------------------------------------------------------------------------
    def _training(self, acc: Accelerator, cluster: Cluster) -> Fit:
        """The layout (data parallel, TP inside a node, PP only when needed) and nodes that hold
        the work and, with a deadline, meet it at the lowest node-hours (plan_training); when no
        layout holds it, every figure at one whole node (or the GPUs asked for) and why."""
        w, shape, per_node = self.w, self.shape, cluster.per_node
        eff, source = self.efficiency(acc)
        layouts = self._layouts(w.method, usable_memory_gb(acc.device_memory_gb), per_node)
        wanted = self.profile.default_gpu_count if w.gpu_count is None else w.gpu_count
        if not layouts:
            return self._unfit_training(acc, per_node, wanted, eff, source)
        job = (
            Job(
                shape,
                w.tokens,
                self.seq_len,
                self.batch,
                w.recompute,
                eff,
                method=w.method,
                lora_rank=w.lora_rank,
            )
            if w.tokens and cluster.peak_tflops
            else None
        )
        plan = None
        if self.deadline_h is not None and not self.profile.scale_out:
            # a one-node workload meets its deadline on one node, or names the fastest there
            one_node = min(w.max_gpus or per_node, per_node)
            plan = plan_training(job, cluster, layouts, wanted, self.deadline_h, one_node)
        plan = plan or plan_training(job, cluster, layouts, wanted, self.deadline_h, w.max_gpus)
        if plan is None:
            return _over_max_gpus(acc, layouts, wanted, per_node, w.max_gpus, eff, source)
        layout, nodes, run, fastest = plan
        rented = nodes * per_node
        figures = _split_memory(self._memory(w.method, layout.dp), layout)
        trainable = shape.params if w.method == "full" else self._adapters()
        frozen = 0.0 if w.method == "full" else self._frozen(w.method)
        one_node_only = nodes > 1 and not self.profile.scale_out
        return Fit(
            gpus_needed=layout.gpus,
            nodes=nodes,
            rented_gpus=rented,
            spans_nodes=nodes > 1,
            memory_per_gpu_gb=figures[-1].value,
            memory_total_gb=trainable * TRAINING_STATE_BYTES / GB
            + frozen
            + self.activations_gb / layout.tp * rented,
            efficiency=eff,
            efficiency_source=source,
            hours=run.hours if run else None,
            lighter_methods=self._lighter(acc, per_node) if one_node_only else (),
            gpu_hours=run.gpu_hours if run else None,
            mfu=run.mfu if run else None,
            hfu=run.hfu if run else None,
            layout=layout,
            deadline_met=self.deadline_h is None
            or (run is not None and run.hours <= self.deadline_h),
            fastest_hours=fastest,
            figures=(*figures, *(run.figures if run else ())),
        )

    def _unfit_training(
        self, acc: Accelerator, per_node: int, wanted: int, eff: float, source: str
    ) -> Fit:
        """No layout holds the work: every memory figure at one whole node (or the GPUs asked
        for), the reason, and the lighter methods that would fit."""
        nodes = math.ceil(max(per_node, wanted, 1) / per_node)
        rented = nodes * per_node
        widest = max(t for t in TP_DEGREES if t <= per_node and per_node % t == 0)
        tp = widest if self.shape.layers else 1  # the least per GPU inside a node
        layout = Layout(max(1, rented // tp), tp, 1, self.w.zero_stage)
        figures = _split_memory(self._memory(self.w.method, layout.dp), layout)
        return Fit(
            gpus_needed=rented,
            nodes=nodes,
            rented_gpus=rented,
            spans_nodes=nodes > 1,
            memory_per_gpu_gb=figures[-1].value,
            memory_total_gb=figures[-1].value * rented,
            efficiency=eff,
            efficiency_source=source,
            unfit=self._unfit(acc, per_node),
            lighter_methods=self._lighter(acc, per_node),
            figures=tuple(figures),
        )

    def _layouts(self, method: str, budget_gb: float, per_node: int) -> list[Layout]:
        kept, sharded = self._split(method)
        return training_layouts(
            self.shape, self.w.zero_stage, kept, sharded, self.activations_gb, budget_gb, per_node
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
        if method == "full":
            return full_training_split(self.shape, stage, self.activations_gb)
        adapters = self._adapters()
        kept = adapters * _stage_floor(stage) / GB + self.activations_gb
        sharded = adapters * (TRAINING_STATE_BYTES - _stage_floor(stage)) / GB
        frozen = self._frozen(method)
        return (kept, sharded + frozen) if stage == 3 else (kept + frozen, sharded)

    def _min_ranks(self, acc: Accelerator, method: str) -> int | None:
        """Fewest data-parallel ranks whose memory per GPU fits the usable memory; None if none
        can (what no sharding removes is above it)."""
        budget = usable_memory_gb(acc.device_memory_gb)
        kept, sharded = self._split(method)
        room = budget - kept
        if room <= 0:
            return None
        ranks = max(1, math.ceil(sharded / room - 1e-9)) if sharded else 1
        assert self._memory(method, ranks)[-1].value <= budget + 1e-6
        return ranks

    def _unfit(self, acc: Accelerator, per_node: int) -> str:
        """Why no layout holds the work: what no sharding removes, even over the widest TP
        inside a node and the deepest pipeline, is above the GPU's usable memory."""
        method, stage = self.w.method, self.w.zero_stage
        kept, _ = self._split(method)
        act, layers = self.activations_gb, self.shape.layers
        tp = max(t for t in TP_DEGREES if t <= per_node and per_node % t == 0) if layers else 1
        pp = max((p for p in PP_DEGREES if p <= (layers or 0)), default=1)
        states = (kept - act) / (tp * pp)
        what = "unsharded states" if method == "full" else f"unsharded {method} weights and states"
        split = f" over TP {tp} x PP {pp}" if tp * pp > 1 else ""
        parts = [f"ZeRO stage {stage} keeps {states:.0f} GB of {what}{split}"]
        if act:
            parts.append(f"{act / tp:.0f} GB of activations" + (f" over TP {tp}" if tp > 1 else ""))
        return (
            f"{' + '.join(parts)} per GPU whatever the GPU count: {states + act / tp:.0f} GB, "
            f"above {usable_memory_gb(acc.device_memory_gb):.0f} GB usable of "
            f"{acc.device_memory_gb:g} GB"
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
        per_replica = _next_pow2(min_gpus_for(total, acc.device_memory_gb))
        if per_replica > per_node:
            reason = (
                f"{total:,.0f} GB needs {per_replica} x {acc.device_memory_gb:g} GB GPUs, "
                f"beyond one node of {per_node}: a replica is served inside one node"
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
                f"{total:.1f} GB / {gpus} GPUs, above "
                f"{usable_memory_gb(acc.device_memory_gb):.1f} GB usable of "
                f"{acc.device_memory_gb:g} GB",
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
        f"{total_gb:.1f} GB / ({acc.device_memory_gb:g} GB x {USABLE_MEMORY:.0%} usable), "
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


# -- training plans: layout and GPU count --------------------------------------------------------

# Most GPUs a plan considers without --max-gpus: Llama 3 405B ran on 16,384 H100s
# (arXiv:2407.21783 section 3.3), the largest published synchronous run in the calibration data.
MAX_PLAN_GPUS = 16384
TP_DEGREES = (1, 2, 4, 8, 16, 32, 64)
PP_DEGREES = (2, 4, 8, 16, 32, 64, 128)
LONG_PLAN_DAYS = 90  # a plan longer than this is flagged in the reasons (issue 10)

# (layout, nodes, run or None without a token count, fastest hours reached when the deadline is
# missed, else None)
Plan = tuple[Layout, int, Run | None, float | None]


def _deadline_hours(w: SizedWork, kind: str) -> float | None:
    if w.deadline_days is None:
        return None
    if kind != "training":
        raise InputError("deadline_days is for training and fine-tuning workloads")
    if not w.tokens:
        raise InputError("deadline_days needs tokens: the time to meet it is the tokens' time")
    return w.deadline_days * 24


def training_layouts(
    shape: Shape,
    stage: int,
    kept_gb: float,
    sharded_gb: float,
    activations_gb: float,
    budget_gb: float,
    per_node: int,
) -> list[Layout]:
    """Every layout that holds the work at its fewest data-parallel ranks (dp = that minimum):
    data parallel alone, TP inside one node (a model shape is needed), and, only when no TP
    degree fits, pipeline stages of the widest TP over nodes. `kept_gb` per GPU is what no
    data-parallel count removes (activations included), `sharded_gb` what ZeRO shards over the
    ranks; TP x PP split the states and weights, TP (sequence parallel) the activations."""

    def ranks(tp: int, pp: int) -> int | None:
        room = budget_gb - ((kept_gb - activations_gb) / (tp * pp) + activations_gb / tp)
        if room <= 0:
            return None
        return max(1, math.ceil(sharded_gb / (tp * pp) / room - 1e-9)) if sharded_gb else 1

    layers = shape.layers
    degrees = [t for t in TP_DEGREES if t <= per_node and per_node % t == 0] if layers else [1]
    out = [Layout(r, tp, 1, stage) for tp in degrees if (r := ranks(tp, 1)) is not None]
    if out or layers is None:
        return out
    tp = degrees[-1]
    for pp in (p for p in PP_DEGREES if p <= layers):
        r = ranks(tp, pp)
        if r is not None:
            return [Layout(r, tp, pp, stage)]
    return []


def full_training_split(shape: Shape, stage: int, activations_gb: float) -> tuple[float, float]:
    """(kept, sharded) GB per GPU of training every weight at ZeRO `stage` (training_layouts)."""
    floor = _stage_floor(stage)
    kept = shape.params * floor / GB + activations_gb
    return kept, shape.params * (TRAINING_STATE_BYTES - floor) / GB


def plan_training(
    job: Job | None,
    cluster: Cluster,
    layouts: list[Layout],
    wanted_gpus: int,
    deadline_h: float | None,
    max_gpus: int | None,
) -> Plan | None:
    """The layout and node count. Without a deadline: the narrowest layout that holds the work
    (data parallel alone when it fits; TP, then PP, only when needed) and keeps every GPU
    asked for busy (else the lowest node-hours of all), on its fewest nodes. With
    one: of every layout, the fewest nodes that meet it, and of those the lowest node-hours
    (cost); wider TP also lets more GPUs share a fixed global batch. When none meets it, the
    fastest plan found, with that time. None: no layout within `max_gpus`."""
    options = []
    for layout in layouts:
        span = _node_span(job, cluster, layout, wanted_gpus, max_gpus)
        if span is not None:
            options.append((layout, *span))
    if not options:
        return None
    if job is None or deadline_h is None:  # the narrowest layout that keeps every GPU busy
        busy = [o for o in options if job is None or _all_busy(job, cluster, o[0], o[1])]
        options = busy[:1] or options
    if job is None:
        layout, lo, _ = options[0]
        return _at(layout, cluster, lo), lo, None, None
    met: list[tuple[float, float, Layout, int, Run]] = []
    fastest: tuple[float, Layout, int, Run] | None = None
    for layout, lo, hi in options:
        found, best = _search(job, cluster, layout, lo, hi, deadline_h)
        if found is not None:
            n, run = found
            met.append((n * run.hours, run.hours, run.layout, n, run))
        if fastest is None or best[1].hours < fastest[0]:
            fastest = (best[1].hours, best[1].layout, best[0], best[1])
    if met:
        _, _, layout, n, run = min(met, key=lambda m: (m[0], m[1]))
        return layout, n, run, None
    assert fastest is not None
    _, layout, n, run = fastest
    return layout, n, run, run.hours


def _node_span(
    job: Job | None, cluster: Cluster, layout: Layout, wanted: int, max_gpus: int | None
) -> tuple[int, int] | None:
    """Fewest and most nodes worth renting for `layout`: the fewest hold it (and the GPUs
    wanted); beyond the most, ranks would idle (no micro-batch left) or --max-gpus is passed."""
    per = cluster.per_node
    lo = math.ceil(max(layout.gpus, wanted, 1) / per)
    useful = MAX_PLAN_GPUS
    if job is not None:
        useful = min(useful, job.sequences_per_step // job.micro_batch * layout.tp * layout.pp)
    hi = max(lo, math.ceil(useful / per))
    if max_gpus is not None:
        hi = min(hi, max_gpus // per)
    return (lo, hi) if lo <= hi else None


def _all_busy(job: Job, cluster: Cluster, layout: Layout, nodes: int) -> bool:
    """Whether every data-parallel rank on `nodes` nodes gets a micro-batch of the global batch."""
    return _at(layout, cluster, nodes).dp * job.micro_batch <= job.sequences_per_step


def _at(layout: Layout, cluster: Cluster, nodes: int) -> Layout:
    """`layout` widened over `nodes` nodes: every rented GPU joins data parallelism."""
    dp = nodes * cluster.per_node // (layout.tp * layout.pp)
    return Layout(dp, layout.tp, layout.pp, layout.zero_stage)


def _search(
    job: Job, cluster: Cluster, layout: Layout, lo: int, hi: int, deadline_h: float | None
) -> tuple[tuple[int, Run] | None, tuple[int, Run]]:
    """(the fewest nodes in [lo, hi] meeting the deadline and its run, or None; the fastest run
    seen). Without a deadline: `lo` nodes. Wall time falls with nodes until communication binds
    (advisor/perf/training.py), so the search bisects above one node."""

    def run_on(n: int) -> Run:
        return run_time(job, cluster, _at(layout, cluster, n), n * cluster.per_node)

    first = run_on(lo)
    if deadline_h is None or first.hours <= deadline_h:
        return (lo, first), (lo, first)
    seen = [(lo, first)]
    low, high = lo + 1, hi
    found: tuple[int, Run] | None = None
    while low <= high:
        mid = (low + high) // 2
        r = run_on(mid)
        seen.append((mid, r))
        if r.hours <= deadline_h:
            found, high = (mid, r), mid - 1
        else:
            low = mid + 1
    if found is None and hi > lo:
        seen.append((hi, run_on(hi)))
    best = min(seen, key=lambda s: (s[1].hours, s[0]))
    return found, best


# Per-GPU memory figures that tensor parallelism (sequence parallel) splits; every other figure
# in GB is a weight or optimizer state, split by TP x PP.
_ACTIVATION_FIGURES = frozenset({"activations_per_gpu_gb", "logits_per_gpu_gb"})


def _split_memory(figures: list[Figure], layout: Layout) -> list[Figure]:
    """Per-GPU memory with tensor (and pipeline) parallelism: states and weights over TP x PP,
    activations and logits over TP (sequence parallel, Korthikanti et al. 2022; 1F1B keeps a
    full model's worth of layers' activations on the first stage). Unchanged without either."""
    if layout.tp * layout.pp == 1:
        return figures
    out = []
    for f in figures[:-1]:  # the last is the total, summed again below
        if f.unit != "GB":
            out.append(f)
        elif f.name in _ACTIVATION_FIGURES:
            out.append(Figure(f.name, f.value / layout.tp, "GB", f"{f.formula} / TP {layout.tp}"))
        else:
            split = layout.tp * layout.pp
            why = f"{f.formula} / (TP {layout.tp} x PP {layout.pp})"
            out.append(Figure(f.name, f.value / split, "GB", why))
    parts = [f for f in out if f.unit == "GB"]
    total = sum(f.value for f in parts)
    out.append(Figure("memory_per_gpu_gb", total, "GB", " + ".join(f.name for f in parts)))
    return out


def _over_max_gpus(
    acc: Accelerator,
    layouts: list[Layout],
    wanted: int,
    per_node: int,
    max_gpus: int | None,
    eff: float,
    source: str,
) -> Fit:
    least = min(math.ceil(max(lay.gpus, wanted, 1) / per_node) * per_node for lay in layouts)
    return Fit(
        0,
        0,
        0,
        False,
        0.0,
        0.0,
        eff,
        source,
        unfit=(
            f"{acc.id}: needs at least {least} GPUs ({per_node} per node), above the "
            f"{max_gpus} GPUs allowed (max_gpus)"
        ),
        least_gpus=least,
    )
