"""Where a request lands on one instance type: how many GPUs and nodes it takes."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from advisor.catalog.models import WorkloadProfile
from advisor.engine.candidates import CloudCandidate
from advisor.perf.headroom import min_gpus_for
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
    the work is serving (the engine's pass places every key at once: KeyPlacer)."""
    is_gpu, device_memory_gb, _, node_memory_gb = key
    size = (is_gpu, device_memory_gb if is_gpu else node_memory_gb)
    return _placed(key, _count_for(need_gb, size), wanted, serving)


# Placements a KeyPlacer keeps: one a band of memory needs (between two multiples of a GPU's or
# node's usable memory) per GPU count wanted and kind of work. The shipped catalog's fine-tuning
# keys (18 GPU memory sizes) have 84 bands for needs of 1 to 500 GB, 339 up to 2,000 GB.
PLACEMENTS_KEPT = 4096


class KeyPlacer:
    """place_by_key over a workload type's keys (the engine's pass places all of them, about
    40, on each request). A key's placement depends on the memory asked only through the GPUs
    (or CPU nodes) its memory size needs, and the keys share a few sizes (an accelerator in
    nodes of 1, 2, 4 and 8): the counts are worked out once a size, and the placements kept by
    the counts, which every need in the same band between two sizes' multiples shares."""

    __slots__ = ("_kept", "_key_size", "_keys", "_sizes")

    def __init__(self, keys: Sequence[tuple[bool, float, int, float]]) -> None:
        sizes: dict[tuple[bool, float], int] = {}
        self._key_size = tuple(
            sizes.setdefault((is_gpu, device_gb if is_gpu else node_gb), len(sizes))
            for is_gpu, device_gb, _, node_gb in keys
        )
        self._sizes = tuple(sizes)
        self._keys = tuple(keys)
        self._kept: dict[tuple[tuple[int, ...], int, bool], tuple[Placement, ...]] = {}

    def place(self, need_gb: float, wanted: int, serving: bool) -> tuple[Placement, ...]:
        """The keys' placements for the memory asked (0: none), the GPU count wanted and
        whether the work is serving (place_by_key's arguments)."""
        counts = tuple([_count_for(need_gb, size) for size in self._sizes])
        kept = self._kept.get((counts, wanted, serving))
        if kept is None:
            if len(self._kept) >= PLACEMENTS_KEPT:
                self._kept.clear()  # bounded; rebuilt from the requests that follow
            kept = self._kept[(counts, wanted, serving)] = tuple(
                _placed(key, counts[k], wanted, serving)
                for key, k in zip(self._keys, self._key_size, strict=True)
            )
        return kept


def _placed(
    key: tuple[bool, float, int, float], count: int, wanted: int, serving: bool
) -> Placement:
    """A key's placement from the GPUs (or CPU nodes) its memory size needs (_count_for)."""
    is_gpu, _, per_node, _ = key
    if not is_gpu:
        return Placement(0, count, count > 1)
    gpus = max(1, count, wanted)
    nodes = math.ceil(gpus / per_node)
    # Serving copies the model per replica: the memory sizes one replica, which lives inside one
    # node, and GPUs beyond it are more replicas on more nodes (the rule a sized request's
    # deployment follows, planning/serving.py). Other work is one copy over all.
    spans = count > per_node if serving else nodes > 1
    return Placement(gpus, nodes, spans, None, count)


def _count_for(need_gb: float, size: tuple[bool, float]) -> int:
    """GPUs of one memory size that hold `need_gb` (0: no memory asked), by the one headroom
    rule (perf/headroom.py min_gpus_for, as for a sized model); for a CPU node's RAM, the nodes,
    by the same rule (the OS, runtime and page cache take a share), at least one."""
    is_gpu, memory_gb = size
    if is_gpu:
        return min_gpus_for(need_gb, memory_gb) if need_gb else 0
    return min_gpus_for(need_gb, memory_gb)


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
