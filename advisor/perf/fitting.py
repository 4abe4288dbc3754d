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
from advisor.perf.calibration import Calibration
from advisor.perf.sizing import (
    Figure,
    Shape,
    compute_hours,
    decode_tokens_per_second,
    inference_memory,
    min_gpus_for,
    training_flops,
    training_memory,
    zero_state_bytes_per_param,
)
from advisor.request import SizedWork

USABLE_MEMORY = 0.90  # of each GPU's memory: the rest for fragmentation and the CUDA context
DEFAULT_SEQ_LEN = 4096


@dataclass(frozen=True)
class Fit:
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
    unfit: str | None = None  # why this GPU cannot hold the work at all
    figures: tuple[Figure, ...] = field(default=(), compare=False)


class WorkPlan:
    def __init__(
        self,
        catalog: Catalog,
        w: SizedWork,
        profile: WorkloadProfile,
        fleet: Mapping[str, Calibration] | None = None,
        min_fleet_reports: int = 5,
    ) -> None:
        if profile.sizing == "none":
            raise InputError(f"{profile.id} is not sized from a model: drop --model / --params-b")
        if w.model is not None:
            preset = catalog.models.get(w.model)
            if preset is None:
                raise InputError(unknown("model", w.model, catalog.models))
            self.shape = Shape.of(preset)
            self.context_limit: int | None = preset.context_length
        else:
            assert w.params_b is not None
            self.shape = Shape.bare(w.params_b)
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
        self._cache: dict[tuple[str, int], Fit] = {}

    def efficiency(self, acc: Accelerator) -> tuple[float, str]:
        base = self.profile.efficiency
        cal = self.fleet.get(acc.id)
        if cal is not None and cal.reports >= self.min_fleet_reports:
            return base * cal.ratio, (
                f"fleet-calibrated: {base:.2f} x the fleet's median measured/expected matmul_bf16 "
                f"{cal.ratio:.2f} over {cal.reports} probe reports"
            )
        why = f"catalog default for {self.profile.id}"
        if cal is not None:
            why += f" (the fleet has only {cal.reports} report(s), {self.min_fleet_reports} needed)"
        return base, why

    def fit(self, acc: Accelerator, gpus_per_node: int) -> Fit:
        key = (acc.id, gpus_per_node)
        if key not in self._cache:
            self._cache[key] = (
                self._training(acc, gpus_per_node)
                if self.kind == "training"
                else self._inference(acc, gpus_per_node)
            )
        return self._cache[key]

    # -- training ---------------------------------------------------------------------------
    def _training(self, acc: Accelerator, per_node: int) -> Fit:
        w, shape = self.w, self.shape
        seq = w.seq_len or min(self.context_limit or DEFAULT_SEQ_LEN, DEFAULT_SEQ_LEN)
        has_shape = shape.layers is not None
        cap = acc.memory_gb * USABLE_MEMORY
        act = _activations(shape, seq, self.batch, w.recompute, has_shape)
        ranks = _min_ranks(w.zero_stage, shape.params, cap - act)
        eff, source = self.efficiency(acc)
        if ranks is None:
            return Fit(
                0,
                0,
                0,
                False,
                0,
                0,
                eff,
                source,
                unfit=(
                    f"ZeRO stage {w.zero_stage} keeps "
                    f"{_stage_floor(w.zero_stage, shape.params):.0f} GB per GPU whatever the GPU "
                    f"count, above {cap:.0f} GB usable of {acc.memory_gb:g} GB"
                ),
            )
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
        per_gpu = figures[-1].value
        out = list(figures)
        hours = None
        peak = acc.peak_tflops.bf16 or acc.peak_tflops.fp16 or 0.0
        if w.tokens and peak:
            flops = training_flops(shape, w.tokens, w.recompute)
            time = compute_hours(flops.value, rented, peak, eff)
            out += [flops, time]
            hours = time.value
        total = shape.params * 16 / 1e9 + (act * rented)
        return Fit(
            needed,
            nodes,
            rented,
            nodes > 1,
            per_gpu,
            total,
            eff,
            source,
            hours=hours,
            figures=tuple(out),
        )

    # -- inference --------------------------------------------------------------------------
    def _inference(self, acc: Accelerator, per_node: int) -> Fit:
        w, shape = self.w, self.shape
        figures = inference_memory(
            shape, precision=w.precision, context_tokens=w.context_tokens or 0, batch=self.batch
        )
        total = figures[-1].value
        eff, source = self.efficiency(acc)
        per_replica = _next_pow2(min_gpus_for(total, acc.memory_gb, USABLE_MEMORY))
        spans = per_replica > per_node
        weights = next(f.value for f in figures if f.name == "weights_gb")
        kv_total = next((f.value for f in figures if f.name == "kv_cache_gb"), 0.0)
        rate = decode_tokens_per_second(
            weights, kv_total / self.batch, self.batch, acc.memory_bandwidth_gbps * per_replica, eff
        )
        replicas = math.ceil(w.throughput_tokens_s / rate.value) if w.throughput_tokens_s else 1
        per_node_replicas = max(1, per_node // per_replica)
        nodes = (
            math.ceil(per_replica / per_node) if spans else math.ceil(replicas / per_node_replicas)
        )
        rented = nodes * per_node
        if not spans:  # rented GPUs are paid for: run as many replicas as the nodes hold
            replicas = nodes * per_node_replicas
        out = [
            *figures,
            rate,
            Figure(
                "gpus_per_replica",
                per_replica,
                "GPUs",
                f"{total:.1f} GB / ({acc.memory_gb:g} GB x {USABLE_MEMORY:.0%} usable), "
                "rounded up to a power of two (tensor parallel)",
            ),
            Figure(
                "replicas",
                replicas,
                "replicas",
                f"ceil({w.throughput_tokens_s:g} tokens/s / {rate.value:,.0f} per replica)"
                if w.throughput_tokens_s
                else "no throughput target: one replica",
            ),
        ]
        return Fit(
            per_replica * replicas,
            nodes,
            rented,
            spans,
            total / per_replica,
            total,
            eff,
            source,
            tokens_per_s=rate.value * replicas,
            served_tokens_per_s=min(rate.value * replicas, w.throughput_tokens_s or math.inf),
            replicas=replicas,
            figures=tuple(out),
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
