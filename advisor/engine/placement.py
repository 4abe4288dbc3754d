"""Where a request lands on one instance type: how many GPUs and nodes it takes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from advisor.catalog.models import WorkloadProfile
from advisor.engine.candidates import CloudCandidate
from advisor.perf.headroom import min_gpus_for, usable_memory_gb
from advisor.request import Workload

if TYPE_CHECKING:  # annotations only: the planners load with the first sized request
    from advisor.planning.fit import Fit
    from advisor.planning.plans import Plan

# The candidate attributes placement reads: part of the candidate-group signature.
PLACEMENT_READS = (
    "is_gpu",
    "hardware.id",
    "hardware.device_memory_gb",
    "instance.gpu_count",
    "per_node_memory_gb",
    "instance.interconnect_gb_s",  # tensor parallelism's all-reduces (perf/inference.py)
    "instance.network_gbps",  # training's data-parallel collectives across nodes (perf/training.py)
    "instance.nvlink_domain_gpus",  # training's collectives and layout inside an NVL72 rack
)
# What placement reads without a model (CloudCandidate.placement_key holds their values):
# candidates equal on these are placed alike by one request.
UNSIZED_READS = ("is_gpu", "hardware.device_memory_gb", "instance.gpu_count", "per_node_memory_gb")


class Placement(NamedTuple):
    gpus: int  # GPUs needed (0 for CPU-only)
    nodes: int
    spans_nodes: bool = False  # one copy of the work split across nodes (needs scale-out)
    fit: Fit | None = None  # when sized from a model (advisor/planning/)
    # GPUs the memory requirement alone needs (0 when none was given): reasons state this count,
    # not one that came from a requested count or the profile's default.
    gpus_for_memory: int = 0


_new = tuple.__new__


def place(
    c: CloudCandidate, w: Workload, p: WorkloadProfile, plan: Plan | None = None
) -> Placement:
    """GPUs and nodes: fill GPUs inside one node first, spill to more nodes only when needed."""
    if plan is not None:
        if not c.is_gpu:
            return Placement(0, 1)
        it = c.instance
        fit = plan.fit(
            c.hardware, it.gpu_count, it.interconnect_gb_s, it.network_gbps, it.nvlink_domain_gpus
        )
        return Placement(fit.gpus_needed, max(fit.nodes, 1), fit.spans_nodes, fit)
    wanted = p.default_gpu_count if w.gpu_count is None else w.gpu_count
    return place_by_key(c.placement_key, w.memory_gb or 0.0, wanted, p.sizing == "inference")


def place_by_key(
    key: tuple[bool, float, int, float], need_gb: float, wanted: int, serving: bool
) -> Placement:
    """place() without a model, from the candidate's placement key (UNSIZED_READS' values), the
    memory asked (0: none), the GPU count wanted (asked, else the profile's default) and whether
    the work is serving: the engine's pass calls it once per key."""
    is_gpu, device_memory_gb, per_node, node_memory_gb = key
    if is_gpu:
        # the one headroom rule (perf/headroom.py usable_memory_gb), as for a sized model
        by_memory = min_gpus_for(need_gb, device_memory_gb) if need_gb else 0
        gpus = max(1, by_memory, wanted)
        nodes = math.ceil(gpus / per_node)
        # Serving copies the model per replica: the memory sizes one replica, which lives inside
        # one node, and GPUs beyond it are more replicas on more nodes (the rule a sized
        # request's deployment follows, planning/serving.py). Other work is one copy over all.
        spans = by_memory > per_node if serving else nodes > 1
        # tuple.__new__ as the NamedTuple's own __new__ calls it, without that Python frame:
        # the unsized pass places every key of a workload type (about 40) on each request
        return _new(Placement, (gpus, nodes, spans, None, by_memory))
    # RAM keeps the same headroom as GPU memory (the OS, runtime and page cache take a share)
    nodes = max(1, math.ceil(need_gb / usable_memory_gb(node_memory_gb) - 1e-9))
    return Placement(0, nodes, nodes > 1)


def placer(
    w: Workload, p: WorkloadProfile, plan: Plan | None = None
) -> Callable[[CloudCandidate], Placement]:
    """place() for one request over every candidate: without a model, candidates with one
    placement key (UNSIZED_READS) share one placement, worked out once (a catalog's groups hold
    about a third as many keys)."""
    if plan is not None:
        return lambda c: place(c, w, p, plan)
    memo: dict[tuple[object, ...], Placement] = {}

    def placed(c: CloudCandidate) -> Placement:
        found = memo.get(c.placement_key)
        if found is None:
            found = memo[c.placement_key] = place(c, w, p)
        return found

    return placed
