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

import copy
import dataclasses
import math
from collections.abc import Mapping

from advisor.catalog.models import Accelerator, WorkloadProfile
from advisor.catalog.queries import Catalog
from advisor.did_you_mean import unknown
from advisor.errors import InputError, field_name, flag_name
from advisor.perf.calibration import MIN_FLEET_REPORTS, Calibration, efficiency
from advisor.perf.inference import (
    Deployment,
    bandwidth_efficiency,
    check_heads,
    moe_of,
    serving_memory,
    throughput_figure,
)
from advisor.perf.sizing import (
    METHODS,
    TRAINING_STATE_BYTES,
    Figure,
    Shape,
    activation_memory,
    frozen_weights,
    inference_memory,
    lora_adapter_params,
    min_gpus_for,
    training_memory,
    usable_memory_gb,
    zero_split_bytes,
)
from advisor.perf.training import (
    TRAINING_PRECISIONS,
    Cluster,
    Job,
    Layout,
    default_global_batch_tokens,
    training_peaks,
)
from advisor.perf.work import DEFAULT_SEQ_LEN, TP_DEGREES, Work
from advisor.planning.fit import Fit
from advisor.planning.serving import (
    choose_deployment,
    inference_nodes,
    latency_targets,
    next_pow2,
    per_replica_figure,
    refuse_serving_fields,
    replicas_figure,
    replicas_for,
    serving_degrees,
    unfit_inference,
)
from advisor.planning.training_plan import (
    PP_DEGREES,
    deadline_hours,
    full_training_split,
    network_below_floor,
    over_max_gpus,
    plan_training,
    split_memory,
    training_layouts,
)
from advisor.units import GB


class WorkPlan:
    """One sized workload (a request's model, tokens or throughput target) under its workload
    profile; `fit` places it on a kind of GPU node, cached per (accelerator, GPUs per node)."""

    def __init__(
        self,
        catalog: Catalog,
        w: Work,
        profile: WorkloadProfile,
        fleet: Mapping[str, Calibration] | None = None,
        min_fleet_reports: int = MIN_FLEET_REPORTS,
    ) -> None:
        if profile.sizing == "none":
            raise InputError(
                f"{profile.id} is not sized from a model: drop {field_name('model')} / "
                f"{field_name('params_b')}",
                field="model" if w.model is not None else "params_b",
            )
        if w.model is not None:
            preset = catalog.models.get(w.model)
            if preset is None:
                raise InputError(unknown("model", w.model, catalog.models), field="model")
            self.shape = Shape.of(preset)
            self.moe = moe_of(preset.experts, preset.experts_per_token)
            self.context_limit: int | None = preset.context_length
        else:
            assert w.params_b is not None
            # training lays out TP and PP from an assumed dense shape (stated in its figures);
            # serving keeps the bare size: its KV cache depends on heads no size implies
            training = profile.sizing == "training"
            self.shape = (Shape.assumed if training else Shape.bare)(w.params_b)
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
                f"context of {w.context_tokens} tokens is beyond {w.model}'s {self.context_limit}",
                field="context_tokens",
            )
        if self.kind == "inference" and self.shape.layers is None:
            refuse_serving_fields(w)
        if self.kind == "inference" and w.tensor_parallel is not None:
            check_heads(w.tensor_parallel, self.shape.heads, w.model or "the model")
        self._cache: dict[tuple[str, int, float, float], Fit] = {}
        if w.output_tokens == 1 and w.max_itl_ms is not None:
            raise InputError(
                f"{field_name('max_itl_ms')}: one output token has no inter-token latency; drop "
                f"it or raise {field_name('output_tokens')}",
                field="max_itl_ms",
            )
        self.targets = latency_targets(profile, w.max_ttft_ms, w.max_itl_ms, w.output_tokens)
        if self.kind == "training" and w.precision not in TRAINING_PRECISIONS:
            raise InputError(
                f"{field_name('precision')} {w.precision}: training runs in "
                f"{', '.join(TRAINING_PRECISIONS)} (mixed precision; QLoRA's 4-bit base is "
                f"{field_name('method')} qlora)",
                field="precision",
            )
        if w.method != "full":
            if self.kind != "training":
                raise InputError(
                    f"{field_name('method')} {w.method} is a training method: {profile.id} serves",
                    field="method",
                )
            lora_adapter_params(self.shape, w.lora_rank)  # refused without the shape: exit 2
        self.seq_len = w.seq_len or min(self.context_limit or DEFAULT_SEQ_LEN, DEFAULT_SEQ_LEN)
        self.activations_gb = self._activations(bool(w.recompute))
        self.deadline_h = deadline_hours(w, self.kind)

    def _activations(self, recompute: bool) -> float:
        """GB of one micro-batch's activations and logits (none without a model shape)."""
        if self.shape.layers is None:
            return 0.0
        act = activation_memory(self.shape, self.seq_len, self.batch, recompute)
        return sum(f.value for f in act)

    def _variant(self, recompute: bool | None = None, zero_stage: int | None = None) -> WorkPlan:
        """This plan with recomputation, or the ZeRO stage, decided one way."""
        other = copy.copy(self)
        if recompute is not None:
            other.w = dataclasses.replace(other.w, recompute=recompute)
            other.activations_gb = self._activations(recompute)
        if zero_stage is not None:
            other.w = dataclasses.replace(other.w, zero_stage=zero_stage)
        other._cache = {}
        return other

    @property
    def zero_stage(self) -> int:
        """The plan's ZeRO stage: as asked, or ZeRO-3 (the least memory) where it is not yet
        decided (`_training` tries 1 and 3)."""
        return 3 if self.w.zero_stage is None else self.w.zero_stage

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
            if self.kind == "training":
                gemm, attention, _ = training_peaks(acc, self.w.precision)
                cluster = Cluster(gemm, gpus_per_node, link, network, attention)
                self._cache[key] = self._training(acc, cluster)
            else:
                self._cache[key] = self._inference(acc, gpus_per_node, link)
        return self._cache[key]

    # -- training ---------------------------------------------------------------------------
    def _training(self, acc: Accelerator, cluster: Cluster) -> Fit:
        """The ZeRO stage as asked; unasked, of ZeRO-1 (Megatron's distributed optimizer: states
        sharded, weights and gradients whole, one gradient reduce-scatter and weight all-gather
        a step) and ZeRO-3 (FSDP: everything sharded, weights gathered every micro-batch) the
        plan that holds the work on fewer GPUs, then with fewer GPU-hours; ZeRO-3 among equals
        (it needs the least memory)."""
        if self.w.zero_stage is not None:
            return self._training_recompute(acc, cluster)
        one, three = (self._variant(zero_stage=s)._training_recompute(acc, cluster) for s in (1, 3))
        if one.unfit is None and (
            three.unfit is not None
            or (one.rented_gpus, one.gpu_hours or 0.0) < (three.rented_gpus, three.gpu_hours or 0.0)
        ):
            return one
        return three

    def _training_recompute(self, acc: Accelerator, cluster: Cluster) -> Fit:
        """Recomputation as asked; unasked, as needed: of the plans with and without it that
        hold the work, the one on fewer GPUs, then the one with fewer GPU-hours (recomputing runs
        the forward twice but may let fewer GPUs, or a narrower layout, hold the work), then
        without it."""
        if self.w.recompute is not None:
            return self._training_as_asked(acc, cluster)  # (the ZeRO stage is decided)
        without, with_ = (self._variant(r)._training_as_asked(acc, cluster) for r in (False, True))
        if without.unfit is None and with_.unfit is None:

            def key(f: Fit) -> tuple[int, float]:
                return f.rented_gpus, f.gpu_hours or 0.0

            if key(with_) < key(without):
                fewer = with_.rented_gpus < without.rented_gpus
                why = (
                    f"it holds the work on {with_.rented_gpus} GPUs, not {without.rented_gpus}"
                    if fewer
                    else "fewer GPU-hours: the narrower layout it allows outweighs the "
                    "recomputed forward"
                )
                chosen = with_
            else:
                chosen, why = without, "one micro-batch's activations fit without it"
        elif without.unfit is None:
            chosen, why = without, "one micro-batch's activations fit without it"
        else:
            chosen, why = with_, "the activations of one micro-batch do not fit without it"
        on = chosen is with_
        word = "full activation recomputation" if on else "no activation recomputation"
        figure = Figure("recompute", float(on), "on/off", f"{word}: {why}")
        return dataclasses.replace(chosen, figures=(*chosen.figures, figure))

    def _training_as_asked(self, acc: Accelerator, cluster: Cluster) -> Fit:
        """The layout (data parallel, TP inside a node, PP only when needed) and nodes that hold
        the work and, with a deadline, meet it at the lowest node-hours (plan_training); when no
        layout holds it, every figure at one whole node (or the GPUs asked for) and why."""
        w, shape, per_node = self.w, self.shape, cluster.per_node
        eff, source = self.efficiency(acc)
        factor = training_peaks(acc, w.precision)[2]
        if factor != 1.0:
            eff, source = eff * factor, f"{source} x {factor:g} in {w.precision} (FP8 kernels)"
        layouts = self._layouts(w.method, usable_memory_gb(acc.device_memory_gb), per_node)
        wanted = self.profile.default_gpu_count if w.gpu_count is None else w.gpu_count
        if not layouts:
            return self._unfit_training(acc, cluster, wanted, eff, source)
        job = (
            Job(
                shape,
                w.tokens,
                self.seq_len,
                self.batch,
                bool(w.recompute),
                eff,
                w.global_batch_tokens or default_global_batch_tokens(shape.params),
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
            lighter = tuple(
                m for m in self._lighter(acc, cluster) if w.max_gpus is None or m[2] <= w.max_gpus
            )
            return over_max_gpus(acc, layouts, wanted, per_node, w.max_gpus, eff, source, lighter)
        layout, nodes, run, fastest = plan
        rented = nodes * per_node
        experts = shape.expert_params / shape.params if w.method == "full" else 0.0
        ranks = layout.dp * layout.cp  # ZeRO shards over the DP and CP ranks
        figures = split_memory(self._memory(w.method, ranks), layout, experts)
        trainable = shape.params if w.method == "full" else self._adapters()
        frozen = 0.0 if w.method == "full" else self._frozen(w.method)
        one_node_only = nodes > 1 and self._one_node(cluster.network_gbps)
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
            lighter_methods=self._lighter(acc, cluster) if one_node_only else (),
            gpu_hours=run.gpu_hours if run else None,
            mfu=run.mfu if run else None,
            hfu=run.hfu if run else None,
            layout=layout,
            deadline_met=self.deadline_h is None
            or (run is not None and run.hours <= self.deadline_h),
            fastest_hours=fastest,
            figures=(*self._shape_figures(), *figures, *(run.figures if run else ())),
        )

    def _shape_figures(self) -> tuple[Figure, ...]:
        """The assumed shape of a bare parameter count, as a figure (Shape.assumed)."""
        if self.w.model is not None or self.shape.layers is None:
            return ()
        shape = self.shape
        assert shape.layers is not None
        return (
            Figure(
                "assumed_layers",
                float(shape.layers),
                "layers",
                f"a dense GPT-style shape assumed for --params-b: {shape.layers} layers x hidden "
                f"{shape.hidden} ({shape.heads} heads of {shape.head_dim}), the layers of the "
                "nearest GPT-3 size (Brown et al. 2020, Table 2.1) and the hidden size that "
                "makes 12 x layers x hidden^2 the parameters; --model gives a real shape",
            ),
        )

    def _unfit_training(
        self, acc: Accelerator, cluster: Cluster, wanted: int, eff: float, source: str
    ) -> Fit:
        """No layout holds the work: every memory figure at one whole node (or the GPUs asked
        for), the reason, and the lighter methods that would fit."""
        per_node = cluster.per_node
        nodes = math.ceil(max(per_node, wanted, 1) / per_node)
        rented = nodes * per_node
        widest = max(t for t in TP_DEGREES if t <= per_node and per_node % t == 0)
        tp = widest if self.shape.layers else 1  # the least per GPU inside a node
        layout = Layout(max(1, rented // tp), tp, 1, self.zero_stage)
        figures = split_memory(self._memory(self.w.method, layout.dp), layout)
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
            lighter_methods=self._lighter(acc, cluster),
            figures=tuple(figures),
        )

    def _layouts(self, method: str, budget_gb: float, per_node: int) -> list[Layout]:
        kept, sharded = self._split(method)
        return training_layouts(
            self.shape,
            self.zero_stage,
            kept,
            sharded,
            self.activations_gb,
            budget_gb,
            per_node,
            expert_parallel=method == "full",
            pipeline_beside=self.profile.scale_out,
        )

    def _memory(self, method: str, ranks: int) -> list[Figure]:
        """The one training memory rule (sizing.training_memory) for this request on `ranks`."""
        w = self.w
        return training_memory(
            self.shape,
            zero_stage=self.zero_stage,
            ranks=ranks,
            seq_len=self.seq_len if self.shape.layers is not None else None,
            micro_batch=self.batch,
            recompute=bool(w.recompute),
            method=method,
            lora_rank=w.lora_rank,
        )

    def _adapters(self) -> float:
        return lora_adapter_params(self.shape, self.w.lora_rank)[0].value

    def _frozen(self, method: str) -> float:
        """GB of the frozen base weights, one whole copy (sizing.frozen_weights)."""
        return frozen_weights(self.shape, method, self.zero_stage, 1).value

    def _split(self, method: str) -> tuple[float, float]:
        """GB per GPU that no data-parallel count removes (activations, unsharded states and
        frozen weights) and GB that ZeRO shards over the ranks (divided by their count)."""
        stage = self.zero_stage
        if method == "full":
            return full_training_split(self.shape, stage, self.activations_gb)
        adapters = self._adapters()
        kept_bytes, sharded_bytes = zero_split_bytes(stage)
        kept = adapters * kept_bytes / GB + self.activations_gb
        sharded = adapters * sharded_bytes / GB
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
        method, stage = self.w.method, self.zero_stage
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

    def _one_node(self, network_gbps: float) -> bool:
        """Whether a job must stay inside one node: the profile runs on one, or the nodes have
        no network fit for a job across them."""
        return not self.profile.scale_out or network_below_floor(self.profile, network_gbps)

    def _lighter(
        self, acc: Accelerator, cluster: Cluster
    ) -> tuple[tuple[str, float, int, int], ...]:
        """The lighter methods (after the one asked for in METHODS) that fit on `acc`, on one
        node where the job must stay on one: what each needs per GPU and on how many GPUs."""
        per_node = cluster.per_node
        if self.shape.intermediate is None or self.shape.mla_kv_dim:
            return ()  # no adapter count for this shape (sizing.lora_adapter_params)
        wanted = self.profile.default_gpu_count if self.w.gpu_count is None else self.w.gpu_count
        out = []
        for method in METHODS[METHODS.index(self.w.method) + 1 :]:
            ranks = self._min_ranks(acc, method)
            if ranks is None:
                continue
            nodes = math.ceil(max(ranks, wanted, 1) / per_node)
            if nodes > 1 and self._one_node(cluster.network_gbps):
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
            return self._unfit_modelled(acc, per_node, e.render(flag_name))
        got, model = choice.result, choice.model
        tp, per_replica = got.tensor_parallel, got.throughput_tokens_s / got.replicas
        wanted = max(got.replicas, replicas_for(w.throughput_tokens_s, per_replica))
        nodes, replicas = inference_nodes(tp, per_node, wanted)
        if w.request_rate is not None:
            if replicas != got.replicas:  # the rented nodes' replicas share the rate
                model = model.on(
                    Deployment(acc, tp * replicas, tp, w.precision, link_gb_s, per_node)
                )
                got = model.at_rate(w.request_rate, self.targets)
            # the rate's tokens, served by the replicas it sized
            throughput = next(f for f in got.figures if f.name == "throughput_tokens_s")
        else:
            throughput = throughput_figure(replicas, got.concurrency, got.itl_ms / 1e3)
        capacity = throughput.value
        per_gpu = model.memory(got.concurrency)[-1].value / tp
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
                *(f for f in got.figures if f.name != "throughput_tokens_s"),
                replicas_figure(
                    replicas,
                    wanted,
                    w.throughput_tokens_s,
                    per_replica,
                    tp,
                    per_node,
                    nodes,
                    (w.request_rate, choice.rate_per_replica),
                ),
                throughput,
            ),
        )

    def _unfit_modelled(self, acc: Accelerator, per_node: int, reason: str) -> Fit:
        """A served model no tensor-parallel degree inside one node holds: its memory (the one
        rule, InferenceModel.memory) at the widest degree, with the reason."""
        w = self.w
        tp = w.tensor_parallel or max(serving_degrees(per_node, w.gpu_count))
        inp, out = w.io_tokens()
        memory = serving_memory(
            self.shape, w.precision, inp + out, w.concurrency or w.batch or 1, tp
        )
        return unfit_inference(acc, reason, memory, tp, per_node)

    def _bare_inference(self, acc: Accelerator, per_node: int) -> Fit:
        """--params-b without a shape: the weights' memory and the GPUs (a power of two inside
        one node) that hold them. Latency and throughput need the architecture (layers, heads,
        KV heads) the inference model reads: not computed, and said so (BARE_INFERENCE)."""
        memory = inference_memory(self.shape, precision=self.w.precision)
        total = memory[-1].value
        eff, source = bandwidth_efficiency(acc)
        per_replica = next_pow2(min_gpus_for(total, acc.device_memory_gb))
        if per_replica > per_node:
            reason = (
                f"{total:,.0f} GB needs {per_replica} x {acc.device_memory_gb:g} GB GPUs, "
                f"beyond one node of {per_node}: a replica is served inside one node"
            )
            return unfit_inference(acc, reason, memory, next_pow2(per_node + 1) // 2, per_node)
        asked = replicas_for(self.w.gpu_count, per_replica)  # --gpu-count: at least that many
        nodes, replicas = inference_nodes(per_replica, per_node, asked)
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
            figures=(*memory, per_replica_figure(total, acc, per_replica)),
        )
