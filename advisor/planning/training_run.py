"""The plan of a training run: the fewest data-parallel GPUs whose per-GPU memory (ZeRO-sharded
states of every weight + activations) fits within the usable memory (headroom.usable_memory_gb),
in the layout (data parallel, TP inside a node, PP when needed) and nodes that hold the work and
meet a deadline (training_plan.plan_training); then time and cost to completion from
advisor/perf/training.py. When no count fits: every figure at one node, with the reason and the
lighter methods that would fit. The ZeRO stage and recomputation, when not asked for, are
decided by which holds the work on fewer GPUs, then costs fewer GPU-hours."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping

from advisor.catalog.models import Accelerator, WorkloadProfile
from advisor.errors import InputError, field_name
from advisor.perf.calibration import MIN_FLEET_REPORTS, Calibration, calibrates
from advisor.perf.efficiency import (
    Efficiency,
    efficiency_bounds,
    relative_efficiency,
    shape_table,
    table_efficiency,
)
from advisor.perf.headroom import usable_memory_gb
from advisor.perf.op_model import table_for
from advisor.perf.sizing import (
    EVERY_WEIGHT,
    METHODS,
    OPTIMIZER_BYTES,
    TRAINING_STATE_BYTES,
    Figure,
    activation_memory,
    frozen_weights,
    lora_adapter_params,
    optimizer_bytes,
    training_memory,
    zero_split_bytes,
)
from advisor.perf.training import (
    TRAINING_PRECISIONS,
    Cluster,
    Job,
    Layout,
    Run,
    default_global_batch_tokens,
    expert_ridge_tokens,
    step_time,
    training_peaks,
)
from advisor.perf.work import DEFAULT_SEQ_LEN, Work
from advisor.planning.fit import Fit
from advisor.planning.limits import network_below_floor
from advisor.planning.plan import ModelOf, Plan
from advisor.planning.training_plan import (
    PP_DEGREES,
    deadline_hours,
    full_training_split,
    node_tp_degrees,
    over_max_gpus,
    plan_training,
    split_memory,
    training_layouts,
)
from advisor.units import GB

Lighter = tuple[tuple[str, float, int, int], ...]  # (method, GB per GPU, GPUs, nodes) each
# Shares of the layers recomputed whole that the planner weighs between none and all (Megatron-LM's
# --recompute-granularity full --recompute-method block --recompute-num-layers N: the first N
# layers of each pipeline stage recompute, the rest keep their activations).
PARTIAL_RECOMPUTE = (0.25, 0.5)


class TrainingRun(Plan):
    """Training every weight (method full); FineTune trains adapters instead."""

    def __init__(
        self,
        w: Work,
        profile: WorkloadProfile,
        model: ModelOf,
        fleet: Mapping[str, Calibration] | None = None,
        min_fleet_reports: int = MIN_FLEET_REPORTS,
    ) -> None:
        super().__init__(w, profile, model, fleet, min_fleet_reports)
        if w.precision not in TRAINING_PRECISIONS:
            raise InputError(
                f"{field_name('precision')} {w.precision}: training runs in "
                f"{', '.join(TRAINING_PRECISIONS)} (mixed precision; QLoRA's 4-bit base is "
                f"{field_name('method')} qlora)",
                field="precision",
            )
        self._check_method()
        self.seq_len = w.seq_len or min(self.context_limit or DEFAULT_SEQ_LEN, DEFAULT_SEQ_LEN)
        self.recompute_share = 1.0 if w.recompute else 0.0  # of the layers, recomputed whole
        self.recompute_asked = w.recompute  # as the request says (variants decide it one way)
        self.activations_gb = self._activations(self.recompute_share)
        self.deadline_h = deadline_hours(w)

    def _check_method(self) -> None:
        """What the method asks of the model (every weight: nothing)."""

    def _activations(self, recompute: float) -> float:
        """GB of one micro-batch's activations and logits (none without a model shape)."""
        if self.shape.layers is None:
            return 0.0
        act = activation_memory(self.shape, self.seq_len, self.batch, recompute)
        return sum(f.value for f in act)

    def _variant(
        self, recompute: float | None = None, zero_stage: int | None = None
    ) -> TrainingRun:
        """This plan with recomputation (the share of the layers recomputed whole), or the ZeRO
        stage, decided one way."""
        other = copy.copy(self)
        if recompute is not None:
            other.w = dataclasses.replace(other.w, recompute=recompute > 0)
            other.recompute_share = float(recompute)
            other.activations_gb = self._activations(recompute)
        if zero_stage is not None:
            other.w = dataclasses.replace(other.w, zero_stage=zero_stage)
        other._cache = {}
        return other

    @property
    def zero_stage(self) -> int:
        """The plan's ZeRO stage: as asked, or ZeRO-3 (the least memory) where it is not yet
        decided (`_place` tries 1 and 3)."""
        return 3 if self.w.zero_stage is None else self.w.zero_stage

    def _place(self, acc: Accelerator, per_node: int, link_gb_s: float, network: float) -> Fit:
        """The ZeRO stage as asked; unasked, of ZeRO-1 (Megatron's distributed optimizer: states
        sharded, weights and gradients whole, one gradient reduce-scatter and weight all-gather
        a step) and ZeRO-3 (FSDP: everything sharded, weights gathered every micro-batch) the
        plan that holds the work on fewer GPUs, then with fewer GPU-hours; ZeRO-3 among equals
        (it needs the least memory)."""
        gemm, attention, _ = training_peaks(acc, self.w.precision)
        cluster = Cluster(
            gemm,
            per_node,
            link_gb_s,
            network,
            attention,
            self.domain_gpus,
            expert_ridge_tokens(acc),
            table_for(acc.id),
            self.w.precision,
            shape_table(acc),
        )
        if self.w.zero_stage is not None:
            return self._with_recompute(acc, cluster)
        one, three = (self._variant(zero_stage=s)._with_recompute(acc, cluster) for s in (1, 3))
        if one.unfit is None and (
            three.unfit is not None
            or (one.rented_gpus, one.gpu_hours or 0.0) < (three.rented_gpus, three.gpu_hours or 0.0)
        ):
            return one
        return three

    def _with_recompute(self, acc: Accelerator, cluster: Cluster) -> Fit:
        """Recomputation as asked (full or none); unasked, as needed: of the plans without it,
        with PARTIAL_RECOMPUTE of the layers recomputed whole and with all of them that hold the
        work, the one on fewer GPUs, then with fewer GPU-hours (recomputing runs the forward
        again but may let fewer GPUs, or a narrower layout, hold the work), then recomputing
        less."""
        if self.w.recompute is not None:
            return self._as_asked(acc, cluster)  # (the ZeRO stage is decided)
        ends = [(r, self._variant(r)._as_asked(acc, cluster)) for r in (0.0, 1.0)]
        none, full = ends[0][1], ends[1][1]
        helps = none.unfit is not None or (full.unfit is None and _cost(full) < _cost(none))
        # recomputing part of the layers can only beat none where recomputing all of them does
        shares = PARTIAL_RECOMPUTE if helps else ()
        middle = [(r, self._variant(r)._as_asked(acc, cluster)) for r in shares]
        plans = [ends[0], *middle, ends[1]]
        fitting = [(r, f) for r, f in plans if f.unfit is None]
        share, chosen = min(fitting, key=lambda p: (_cost(p[1]), p[0])) if fitting else plans[-1]
        figure = Figure("recompute", share, "share of layers", _recompute_why(share, chosen, plans))
        return dataclasses.replace(chosen, figures=(*chosen.figures, figure))

    def _as_asked(self, acc: Accelerator, cluster: Cluster) -> Fit:
        """The layout (data parallel, TP inside a node, PP only when needed) and nodes that hold
        the work and, with a deadline, meet it at the lowest node-hours (plan_training); when no
        layout holds it, every figure at one whole node (or the GPUs asked for) and why."""
        w, per_node = self.w, cluster.per_node
        eff, source = self.training_efficiency(acc)
        layouts = self._layouts(w.method, usable_memory_gb(acc.device_memory_gb), cluster.domain)
        wanted = self.profile.default_gpu_count if w.gpu_count is None else w.gpu_count
        if not layouts:
            return self._unfit_training(acc, cluster, wanted, eff, source)
        job = self._job(eff) if w.tokens and cluster.peak_tflops else None
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
        one_node_only = nodes > 1 and self._one_node(cluster.network_gbps)
        lighter = self._lighter(acc, cluster) if one_node_only else ()
        placed = self._placed(layout, (nodes, per_node), (run, fastest), (eff, source), lighter)
        fit = with_hours_range(placed, acc, w.precision)
        if w.tokens or not cluster.peak_tflops:
            return fit
        return dataclasses.replace(
            fit, training_tokens_per_s=self._tokens_per_s(eff, cluster, layout)
        )

    def _tokens_per_s(self, eff: float, cluster: Cluster, layout: Layout) -> float:
        """Tokens a second `layout` trains (one optimizer step's tokens over its modelled time):
        what a job without a token count is ranked by, price-performance, since its length is
        unknown but its speed on each option is not."""
        job = self._job(eff)
        return job.sequences_per_step * job.seq_len / step_time(job, cluster, layout).seconds

    def training_efficiency(self, acc: Accelerator) -> tuple[float, str]:
        """The calibrated efficiency on `acc` in the request's precision: the FP8 or NVFP4
        factor and the vendor/generation factor (advisor/perf/efficiency.py) applied."""
        eff, source = self.efficiency(acc)
        precision = self.w.precision
        factor = training_peaks(acc, precision)[2]
        if factor != 1.0:
            kernels = "NVFP4 recipe" if precision == "fp4" else "FP8 kernels"
            eff, source = eff * factor, f"{source} x {factor:.3g} in {precision} ({kernels})"
        if calibrates(self.fleet.get(acc.id), self.min_fleet_reports) and table_efficiency(
            acc, gemm_precision(acc, precision)
        ):
            # the fleet's own GPUs' matmul against the catalog's expectation has replaced the
            # calibrated value: the lent GPU's table, the same GEMM against a reference, stays out
            return eff, source
        vendor = vendor_efficiency(acc, precision)
        if vendor.factor != 1.0:
            eff, source = min(eff * vendor.factor, 1.0), f"{source} {vendor.words()}"
        return eff, source

    def _job(self, eff: float) -> Job:
        """The training job the performance model times (advisor/perf/training.py)."""
        w, shape = self.w, self.shape
        return Job(
            shape,
            w.tokens or 0.0,
            self.seq_len,
            self.batch,
            self.recompute_share,
            eff,
            w.global_batch_tokens or default_global_batch_tokens(shape.params),
            method=w.method,
            lora_rank=w.lora_rank,
            expert_overlap=bool(w.dualpipe),
        )

    def _placed(
        self,
        layout: Layout,
        nodes: tuple[int, int],
        timed: tuple[Run | None, float | None],
        efficiency: tuple[float, str],
        lighter: Lighter,
    ) -> Fit:
        """The fit of a layout that holds the work on `nodes` (count, GPUs each), timed by
        `timed` (the run, None without tokens; the fastest hours when a deadline is missed),
        with the lighter methods a one-node job is told of."""
        w, rented, (run, fastest) = self.w, nodes[0] * nodes[1], timed
        ranks = layout.dp * layout.cp  # ZeRO shards over the DP and CP ranks
        figures = split_memory(
            self._memory(w.method, ranks), layout, self._expert_share(), self.shape.layers
        )
        trained_gb, frozen_gb = self._trained_and_frozen_gb()
        return Fit(
            gpus_needed=layout.gpus,
            nodes=nodes[0],
            rented_gpus=rented,
            spans_nodes=nodes[0] > 1,
            memory_per_gpu_gb=figures[-1].value,
            memory_total_gb=trained_gb + frozen_gb + self.activations_gb / layout.tp * rented,
            efficiency=efficiency[0],
            efficiency_source=efficiency[1],
            hours=run.hours if run else None,
            lighter_methods=lighter,
            gpu_hours=run.gpu_hours if run else None,
            mfu=run.mfu if run else None,
            hfu=run.hfu if run else None,
            layout=layout,
            deadline_met=self.deadline_h is None
            or (run is not None and run.hours <= self.deadline_h),
            fastest_hours=fastest,
            figures=(*self._shape_figures(), *figures, *(run.figures if run else ())),
        )

    def _expert_share(self) -> float:
        """The share of the trained weights that are experts (spread over expert parallelism)."""
        return self.shape.expert_params / self.shape.params

    def _trained_and_frozen_gb(self) -> tuple[float, float]:
        """GB of the trained weights' states (weights, gradients, optimizer) and of the frozen
        weights, one whole copy each."""
        state_bytes = TRAINING_STATE_BYTES - OPTIMIZER_BYTES + optimizer_bytes(self.w.method)
        return self.shape.params * state_bytes / GB, 0.0

    def _shape_figures(self) -> tuple[Figure, ...]:
        """The assumed shape of a bare parameter count, as a figure (Shape.assumed)."""
        if self.w.model is not None or self.shape.layers is None:
            return ()
        shape = self.shape
        assert shape.layers is not None
        if shape.experts:
            return (
                Figure(
                    "assumed_layers",
                    float(shape.layers),
                    "layers",
                    f"a mixture of experts assumed for --params-b with --active-params-b: "
                    f"{shape.layers} layers x hidden {shape.hidden} ({shape.heads} heads of "
                    f"{shape.head_dim}), {shape.experts} experts of width {shape.intermediate}, "
                    f"top-{shape.experts_per_token} (sizing.assumed_moe_shape); --model or "
                    "--hf-config gives a real shape",
                ),
            )
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
        tp = (
            node_tp_degrees(per_node)[-1] if self.shape.layers else 1
        )  # the least per GPU inside a node
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
            recompute=self.recompute_share,
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
        frozen weights) and GB that ZeRO shards over the ranks (divided by their count), for
        `method` (the one asked for, or a lighter one `_lighter` weighs)."""
        stage = self.zero_stage
        if method in EVERY_WEIGHT:
            return full_training_split(
                self.shape, stage, self.activations_gb, optimizer_bytes(method)
            )
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
        tp = node_tp_degrees(per_node)[-1] if layers else 1
        pp = max((p for p in PP_DEGREES if p <= (layers or 0)), default=1)
        states = (kept - act) / (tp * pp)
        what = (
            "unsharded states"
            if method in EVERY_WEIGHT
            else f"unsharded {method} weights and states"
        )
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

    def _lighter(self, acc: Accelerator, cluster: Cluster) -> Lighter:
        """The lighter methods (after the one asked for in METHODS) that fit on `acc`, on one
        node where the job must stay on one: what each needs per GPU and on how many GPUs."""
        per_node = cluster.per_node
        # no adapter count without the MLP width or with MLA (sizing.lora_adapter_params)
        adapters = self.shape.intermediate is not None and not self.shape.mla_kv_dim
        wanted = self.profile.default_gpu_count if self.w.gpu_count is None else self.w.gpu_count
        out = []
        for method in METHODS[METHODS.index(self.w.method) + 1 :]:
            if method not in EVERY_WEIGHT and not adapters:
                continue
            # every weight with a lighter optimizer: recomputing as needed, as the plan would
            unasked = self.recompute_asked is None
            probe = self._variant(1.0) if method in EVERY_WEIGHT and unasked else self
            ranks = probe._min_ranks(acc, method)
            if ranks is None:
                continue
            nodes = math.ceil(max(ranks, wanted, 1) / per_node)
            if nodes > 1 and self._one_node(cluster.network_gbps):
                continue
            rented = nodes * per_node
            out.append((method, probe._memory(method, rented)[-1].value, rented, nodes))
        return tuple(out)


def _recompute_why(share: float, chosen: Fit, plans: list[tuple[float, Fit]]) -> str:
    """The recompute figure's words: what was chosen (share of the layers) and why."""
    if share >= 1:
        word = "full activation recomputation"
    elif share > 0:
        word = (
            f"activation recomputation of {share:.0%} of the layers (whole layers, Megatron-LM's "
            "block method; attention's core is recomputed by FlashAttention anyway)"
        )
    else:
        word = "no activation recomputation"
    none = plans[0][1]
    if share == 0:
        why = "one micro-batch's activations fit without it"
    elif none.unfit is not None:
        less = [r for r, f in plans if f.unfit is not None and 0 < r < share]
        why = "the activations of one micro-batch do not fit without it" + (
            f" (nor recomputing {max(less):.0%})" if less else ""
        )
    elif chosen.rented_gpus < none.rented_gpus:
        why = f"it holds the work on {chosen.rented_gpus} GPUs, not {none.rented_gpus}"
    else:
        why = "fewer GPU-hours: the narrower layout it allows outweighs the recomputed forward"
    return f"{word}: {why}"


def _cost(f: Fit) -> tuple[int, float]:
    """What the choices between plans weigh: GPUs rented, then GPU-hours."""
    return f.rented_gpus, f.gpu_hours or 0.0


def with_hours_range(fit: Fit, acc: Accelerator, precision: str) -> Fit:
    """The fit with its hours at the optimistic and the pessimistic efficiency of `acc` (time
    taken as inversely proportional to the efficiency: an upper bound on the swing)."""
    if fit.hours is None:
        return fit
    low, high = efficiency_bounds(acc, precision)
    return dataclasses.replace(fit, hours_range=(fit.hours / high, fit.hours / low))


def gemm_precision(acc: Accelerator, precision: str) -> str:
    """The precision whose GEMMs measure `acc` against the reference in a `precision` step: the
    FP8 and NVFP4 factors are relative to a 16-bit step, so the GPU's own speed against the
    reference is its 16-bit GEMMs' (a table's fp8 share would count the slower FP8 kernels
    twice)."""
    return precision if training_peaks(acc, precision)[2] == 1.0 else "bf16"


def vendor_efficiency(acc: Accelerator, precision: str) -> Efficiency:
    """The factor on the calibrated efficiency for a `precision` training step on `acc` (its
    operator table's GEMMs, else its vendor and generation's sourced factor): what the plan
    reads and what benchmarks/calibration_training.py times the published rows with."""
    return relative_efficiency(acc, gemm_precision(acc, precision))
