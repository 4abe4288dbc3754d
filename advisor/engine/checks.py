"""Stage 1, feasibility: the registry of hard constraints, one entry and one small check each.

Three scopes: what depends on the instance type alone (`STATIC`, worked out once per candidate
group), what depends on one priced offering (`OFFERING`), and edge devices (`EDGE`).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any, NamedTuple

from advisor.catalog.capability import mismatch_sentence, runs
from advisor.catalog.models import (
    Price,
    Purchase,
    SpotPolicy,
    WorkloadProfile,
)
from advisor.catalog.queries import price_usable, purchase_matches, region_matches
from advisor.engine.candidates import CloudCandidate, EdgeCandidate, Offer, per_filter
from advisor.engine.constraints import Constraint, Finding, Violation, violations
from advisor.engine.placement import PLACEMENT_READS, Placement
from advisor.engine.spot_risk import risk_sentence
from advisor.perf.cost import option_hourly_usd
from advisor.perf.headroom import usable_memory_gb
from advisor.perf.precision import Unsupported
from advisor.perf.spot import SpotPlan, too_risky
from advisor.planning.limits import latency_targets, network_below_floor
from advisor.request import Workload


class StaticCase(NamedTuple):
    c: CloudCandidate
    s: Placement
    w: Workload
    p: WorkloadProfile


class OfferCase(NamedTuple):
    price: Price
    nodes: int
    w: Workload
    # The option's spot plan (advisor/engine/spot_risk.py option_spot_plan) and the workload's
    # spot policy, with the candidate they are for: None where no spot plan is costed.
    spot: tuple[CloudCandidate, SpotPlan, SpotPolicy] | None = None


class EdgeCase(NamedTuple):
    e: EdgeCandidate
    w: Workload
    p: WorkloadProfile


# --- instance-type checks -------------------------------------------------------------------


def _workload_mismatch(k: StaticCase) -> Finding | None:
    if runs(k.c.hardware, k.p):
        return None
    return Finding(mismatch_sentence(k.c.hardware, k.p))


def _gpu_memory_too_small(k: StaticCase) -> Finding | None:
    hw, p = k.c.hardware, k.p
    if not k.c.is_gpu or hw.device_memory_gb >= p.min_gpu_memory_gb:
        return None
    return Finding(
        f"{hw.device_memory_gb:g} GB per GPU is below the {p.min_gpu_memory_gb:g} GB "
        f"that {p.id} needs on each GPU"
    )


def _model_does_not_fit(k: StaticCase) -> Finding | None:
    fit = k.s.fit
    if fit is None or not fit.unfit or fit.least_gpus is not None:
        return None
    return _lighter_method(k, fit.unfit) or Finding(fit.unfit)


def _lighter_method(k: StaticCase, sentence: str) -> Finding | None:
    """A training method lighter than the one asked for that fits here: the nearest relaxation
    of a fine-tune that does not fit (advisor/planning/fit.py Fit.lighter_methods)."""
    fit = k.s.fit
    if fit is None or not fit.lighter_methods:
        return None
    return Finding(sentence, fit.lighter_methods[0][0], field="method")


def _gpu_limit_exceeded(k: StaticCase) -> Finding | None:
    """max_gpus below the fewest GPUs (whole nodes) that hold the training work here."""
    fit = k.s.fit
    if fit is None or fit.least_gpus is None or not fit.unfit:
        return None
    return Finding(fit.unfit, fit.least_gpus)


def _gpus_over_limit(k: StaticCase) -> Finding | None:
    """More GPUs rented here than --max-gpus allows: a whole node rents all its GPUs, so an
    8-GPU type is out under --max-gpus 1 even when one GPU would hold the work. A sized
    training plan is kept within the limit by its planner (_gpu_limit_exceeded)."""
    limit, rented = k.w.max_gpus, k.s.nodes * k.c.instance.gpu_count
    if limit is None or not k.c.is_gpu or rented <= limit:
        return None
    if k.s.fit is not None and k.s.fit.least_gpus is not None:
        return None  # the planner's finding says it, with the lighter methods
    return Finding(f"rents {rented} GPUs here, more than the {limit} allowed (max_gpus)", rented)


def _sized_on_cpu(k: StaticCase) -> Finding | None:
    return Finding("CPU-only: a sized model runs on GPUs") if k.w.sized and not k.c.is_gpu else None


def _spread(k: StaticCase) -> str:
    """What makes the work span nodes, for the sentence."""
    s, w = k.s, k.w
    if s.fit is not None:
        return f"{s.fit.memory_total_gb:,.0f} GB ({w.model_label()})"
    return f"{w.memory_gb:g} GB" if w.memory_gb else f"{s.gpus} GPUs"


def _one_node_sentence(k: StaticCase) -> str:
    if k.p.sizing == "inference" and k.s.fit is None and k.c.is_gpu:
        # serving by memory: one replica must fit inside a node (placement.py)
        return (
            f"one replica of {_spread(k)} needs {k.s.gpus_for_memory} GPUs, more than the "
            f"{k.c.instance.gpu_count} of a node: a replica is served inside one node"
        )
    return (
        f"{_spread(k)} needs {k.s.nodes} nodes "
        f"({k.c.per_node_memory_gb:g} GB each) and {k.p.id} runs on one node"
    )


def _one_node_by_memory(k: StaticCase) -> Finding | None:
    """Memory (requested, or a sized model's) spills past one node, and the work runs on one
    (a served model's replica may span nodes where its planner laid it out over them)."""
    if not k.s.spans_nodes or k.p.scale_out or not (k.w.memory_gb or k.s.fit is not None):
        return None
    if k.s.fit is not None and k.s.fit.serving_layout is not None:
        return None
    if k.w.memory_gb:
        return Finding(_one_node_sentence(k), _node_usable_gb(k.c))
    sentence = _one_node_sentence(k)
    return _lighter_method(k, sentence) or Finding(sentence, None, relaxable=False)


def _node_usable_gb(c: CloudCandidate) -> float:
    """What one node holds: its GPUs' or its RAM's usable memory (the one headroom rule)."""
    if not c.is_gpu:
        return usable_memory_gb(c.per_node_memory_gb)
    return c.instance.gpu_count * usable_memory_gb(c.hardware.device_memory_gb)


def _one_node_by_count(k: StaticCase) -> Finding | None:
    """A GPU count (requested or the profile's default) spills past one node."""
    if not k.s.spans_nodes or k.p.scale_out or k.w.memory_gb or k.s.fit is not None:
        return None
    return Finding(_one_node_sentence(k), k.c.instance.gpu_count)


def _precision_unsupported(k: StaticCase) -> Finding | None:
    """A served model's precision the GPU has no matrix units for (advisor/perf/precision.py);
    for training, fp8 (fp4) on a GPU without FP8 (FP4) tensor cores, and a full-weight bf16
    job on one without bf16 (T4, V100: fp16 mixed precision is another recipe, with loss
    scaling, that the request did not ask for). LoRA/QLoRA in 16 bits run at the bf16, else
    fp16, rate (perf/training.py training_peaks): adapters train in fp16 on such parts as a rule."""
    if not k.w.sized or not k.c.is_gpu or k.p.sizing == "none":
        return None
    full_bf16 = k.w.precision == "bf16" and k.w.method in ("full", "adam8bit")
    if k.p.sizing == "training" and k.w.precision not in ("fp8", "fp4") and not full_bf16:
        return None
    found = k.c.precision_support[k.w.precision]
    return Finding(found.reason, relaxable=False) if isinstance(found, Unsupported) else None


def _latency_missed(k: StaticCase, which: int) -> Finding | None:
    """A served model that misses a latency target on every tensor-parallel degree and
    concurrency this node allows: `which` 0 is TTFT, 1 is ITL (planning/serving.py). Targets each
    reachable but never together are reported under ITL."""
    fit = k.s.fit
    if fit is None or fit.latency_met or fit.latency_floor is None:
        return None
    asked = latency_targets(k.p, k.w.max_ttft_ms, k.w.max_itl_ms, k.w.output_tokens)
    targets = (asked.max_ttft_ms, asked.max_itl_ms)
    out = [t is not None and best > t for best, t in zip(fit.latency_floor, targets, strict=True)]
    node = f"{k.c.instance.gpu_count} x {k.c.hardware.name}"
    if out[which]:
        what = ("time to first token", "inter-token latency")[which]
        best = fit.latency_floor[which]
        return Finding(
            f"the lowest {what} {node} reach is {best:.3g} ms, above the {targets[which]:g} "
            "ms target",
            latency_relax_to(best),
        )
    if which == 1 and not any(out):
        itl = fit.itl_ms or 0.0
        return Finding(
            f"{node} meet the TTFT and ITL targets only in different deployments: at the "
            f"lowest ITL ({itl:.3g} ms) the TTFT is {fit.ttft_ms or 0:.3g} ms",
            latency_relax_to(itl),
        )
    return None


def latency_relax_to(best_ms: float) -> float:
    """A target at the reachable figure, rounded up to 0.1 ms so that it is met."""
    return math.ceil(best_ms * 10) / 10


def _ttft_missed(k: StaticCase) -> Finding | None:
    return _latency_missed(k, 0)


def _itl_missed(k: StaticCase) -> Finding | None:
    return _latency_missed(k, 1)


def _deadline_missed(k: StaticCase) -> Finding | None:
    """A training plan that no GPU count (within max_gpus) finishes by the deadline: the
    fastest it reaches, on how many GPUs (planning/training_plan.py plan_training)."""
    fit, deadline = k.s.fit, k.w.deadline_days
    if fit is None or fit.deadline_met or fit.fastest_hours is None or deadline is None:
        return None
    days = fit.fastest_hours / 24
    return Finding(
        f"the fastest {k.c.hardware.name} nodes finish is {days:,.1f} days on "
        f"{fit.rented_gpus} GPUs, above the {deadline:g}-day deadline",
        deadline_relax_to(days),
    )


def deadline_relax_to(days: float) -> float:
    """A deadline at the reachable wall time, rounded up to 0.1 day so that it is met."""
    return math.ceil(days * 10) / 10


def _network_too_slow(k: StaticCase) -> Finding | None:
    it, p = k.c.instance, k.p
    if not k.s.spans_nodes or not p.scale_out or not network_below_floor(p, it.network_gbps):
        return None
    return Finding(
        f"{_spread(k)} needs {k.s.nodes} nodes, but the {it.network_gbps:g} Gbit/s "
        f"network is below the {p.min_multi_node_network_gbps:g} Gbit/s {p.id} "
        "needs between nodes"
    )


def _gpus_on_cpu(k: StaticCase) -> Finding | None:
    return Finding("CPU-only: no GPU", 0) if not k.c.is_gpu and k.w.gpu_count else None


def _interconnect_too_slow(k: StaticCase) -> Finding | None:
    it, need = k.c.instance, k.w.interconnect_gb_s
    if not need or it.interconnect_gb_s >= need:
        return None
    have = (
        f"{it.interconnect_gb_s:g} GB/s per GPU ({it.gpu_link})"
        if it.interconnect_gb_s
        else f"no GPU-to-GPU link ({it.gpu_link})"
    )
    return Finding(f"has {have}, below the required {need:g} GB/s", it.interconnect_gb_s or None)


def _power_over_budget(k: StaticCase) -> Finding | None:
    c, s, budget = k.c, k.s, k.w.power_budget_w
    power = c.per_node_power_w * s.nodes
    if budget is None or power <= budget:
        return None
    count = s.nodes * c.instance.gpu_count or s.nodes
    return Finding(
        f"{count} x {c.hardware.name} draw {power:,.0f} W ({s.nodes} x {c.power.basis}), above "
        f"the {budget:g} W budget",
        power,
    )


def _provider_excluded(k: StaticCase) -> Finding | None:
    provider, wanted = k.c.instance.provider, k.w.provider
    if wanted is None or provider == wanted:
        return None
    return Finding(f"offered by {provider}, not {wanted}", provider)


def _no_price(k: StaticCase) -> Finding | None:
    return None if k.c.has_offers else Finding("the catalog has no price for it")


def _sized(w: Workload, p: WorkloadProfile) -> bool:
    return w.sized


STATIC: tuple[Constraint[StaticCase], ...] = (
    Constraint(
        "WORKLOAD_MISMATCH",
        None,
        "the workload's kind of hardware",
        _workload_mismatch,
        ("hardware.form_factor", "hardware.jobs", "hardware.name"),
        request_free=True,
    ),
    Constraint(
        "GPU_MEMORY_TOO_SMALL",
        None,
        "the workload's memory per GPU",
        _gpu_memory_too_small,
        ("is_gpu", "hardware.device_memory_gb"),
        applies=lambda w, p: p.min_gpu_memory_gb > 0,
        request_free=True,
    ),
    # A model's fit (Placement.fit) exists only for a sized request.
    Constraint(
        "MEMORY_INSUFFICIENT",
        None,
        "the memory requirement",
        _model_does_not_fit,
        applies=_sized,
    ),
    Constraint(
        "GPU_LIMIT_EXCEEDED", "max_gpus", "the GPU limit", _gpu_limit_exceeded, applies=_sized
    ),
    Constraint(
        "GPU_LIMIT_EXCEEDED",
        "max_gpus",
        "the GPU limit",
        _gpus_over_limit,
        ("is_gpu", "instance.gpu_count"),
        applies=lambda w, p: w.max_gpus is not None,
    ),
    Constraint("NO_GPU", None, "the GPU count", _sized_on_cpu, ("is_gpu",), applies=_sized),
    Constraint(
        "PRECISION_UNSUPPORTED",
        None,
        "the precision",
        _precision_unsupported,
        ("is_gpu", "hardware.peak_tflops", "hardware.name", "hardware.generation"),
        applies=lambda w, p: w.sized and p.sizing != "none",
    ),
    Constraint(
        "TTFT_TARGET_MISSED", "max_ttft_ms", "the TTFT target", _ttft_missed, applies=_sized
    ),
    Constraint("ITL_TARGET_MISSED", "max_itl_ms", "the ITL target", _itl_missed, applies=_sized),
    Constraint(
        "DEADLINE_MISSED",
        "deadline_days",
        "the deadline",
        _deadline_missed,
        applies=lambda w, p: w.sized and w.deadline_days is not None,
    ),
    Constraint(
        "MEMORY_INSUFFICIENT",
        "memory_gb",
        "the memory requirement",
        _one_node_by_memory,
        ("per_node_memory_gb", "is_gpu", "hardware.device_memory_gb", "instance.gpu_count"),
        applies=lambda w, p: not p.scale_out and bool(w.memory_gb or w.sized),
        spans_only=True,
    ),
    Constraint(
        "GPU_COUNT_TOO_HIGH",
        "gpu_count",
        "the GPU count",
        _one_node_by_count,
        ("per_node_memory_gb", "instance.gpu_count"),
        applies=lambda w, p: not p.scale_out and not w.memory_gb,
        spans_only=True,
    ),
    Constraint(
        "NETWORK_TOO_SLOW",
        None,
        "the scale-out network",
        _network_too_slow,
        ("instance.network_gbps",),
        applies=lambda w, p: p.scale_out,
        spans_only=True,
    ),
    Constraint(
        "NO_GPU",
        "gpu_count",
        "the GPU count",
        _gpus_on_cpu,
        ("is_gpu",),
        applies=lambda w, p: bool(w.gpu_count),
    ),
    Constraint(
        "INTERCONNECT_TOO_SLOW",
        "interconnect_gb_s",
        "the interconnect requirement",
        _interconnect_too_slow,
        ("instance.interconnect_gb_s", "instance.gpu_link"),
        applies=lambda w, p: bool(w.interconnect_gb_s),
    ),
    Constraint(
        "POWER_OVER_BUDGET",
        "power_budget_w",
        "the power budget",
        _power_over_budget,
        ("per_node_power_w", "power", "instance.gpu_count", "hardware.name"),
        applies=lambda w, p: w.power_budget_w is not None,
    ),
    Constraint(
        "PROVIDER_EXCLUDED",
        "provider",
        "the provider",
        _provider_excluded,
        ("instance.provider",),
        applies=lambda w, p: w.provider is not None,
    ),
    Constraint("NO_PRICE", None, "a missing price", _no_price, ("has_offers",), request_free=True),
)

# Instance types equal on every attribute the static checks and placement read are one group:
# feasibility and placement are worked out once for it (advisor/engine/candidates.py).
GROUP_SIGNATURE: tuple[str, ...] = tuple(
    sorted({*PLACEMENT_READS, *(name for entry in STATIC for name in entry.reads)})
)


def static_violations(
    c: CloudCandidate,
    s: Placement,
    w: Workload,
    p: WorkloadProfile,
    registry: tuple[Constraint[StaticCase], ...] = STATIC,
) -> list[Violation]:
    """Constraints that depend on the instance type, not on which of its offerings. `registry`:
    STATIC, or the part of it that applies to this request (constraints.py applicable)."""
    return violations(registry, StaticCase(c, s, w, p))


def request_free_faults(c: CloudCandidate, p: WorkloadProfile) -> int:
    """The request-free STATIC entries `c` fails for workload type `p`, one bit each (1 << the
    entry's position in STATIC), as static_faults counts them."""
    case = StaticCase(c, None, None, p)  # type: ignore[arg-type]
    return sum(
        1 << k
        for k, entry in enumerate(STATIC)
        if entry.request_free and entry.check(case) is not None
    )


def _bit(check: object) -> int:
    (k,) = (k for k, entry in enumerate(STATIC) if entry.check is check)
    return 1 << k


_OVER_LIMIT = _bit(_gpus_over_limit)
_BY_MEMORY = _bit(_one_node_by_memory)
_BY_COUNT = _bit(_one_node_by_count)
_NETWORK = _bit(_network_too_slow)
_COUNT_ON_CPU = _bit(_gpus_on_cpu)
_INTERCONNECT = _bit(_interconnect_too_slow)
_POWER = _bit(_power_over_budget)
_PROVIDER = _bit(_provider_excluded)


def static_faults(c: CloudCandidate, s: Placement, w: Workload, p: WorkloadProfile) -> int:
    """The STATIC entries other than the request-free ones that a request without a model fails
    on `c` placed at `s`, one bit each (1 << the entry's position in STATIC), worked out inline:
    the registry's checks, each called and each writing its sentence, were a third of the
    engine's pass over the candidate groups, and most answers show no rejection's sentence
    (the engine asks the registry for those it shows; tests/test_constraints.py holds the two to
    the same answer). The entries that read a model's fit never fail without one."""
    it = c.instance
    faults = 0
    if s.spans_nodes:
        if p.scale_out:
            faults = _NETWORK if network_below_floor(p, it.network_gbps) else 0
        else:
            faults = _BY_MEMORY if w.memory_gb else _BY_COUNT
    if w.max_gpus is not None and c.is_gpu and s.nodes * it.gpu_count > w.max_gpus:
        faults |= _OVER_LIMIT
    if w.gpu_count and not c.is_gpu:
        faults |= _COUNT_ON_CPU
    if w.interconnect_gb_s and it.interconnect_gb_s < w.interconnect_gb_s:
        faults |= _INTERCONNECT
    if w.power_budget_w is not None and c.per_node_power_w * s.nodes > w.power_budget_w:
        faults |= _POWER
    if w.provider is not None and it.provider != w.provider:
        faults |= _PROVIDER
    return faults


# What relaxes the failure of each STATIC entry a request without a model can fail, by its bit:
# the value its check's Finding carries there (static_violation). The others (a slow network,
# too little memory a GPU, no price) are not relaxable.
_STATIC_RELAX_TO: dict[int, Any] = {
    _OVER_LIMIT: lambda c, s: s.nodes * c.instance.gpu_count,  # _gpus_over_limit
    _BY_MEMORY: lambda c, s: _node_usable_gb(c),  # _one_node_by_memory
    _BY_COUNT: lambda c, s: c.instance.gpu_count,  # _one_node_by_count
    _COUNT_ON_CPU: lambda c, s: 0,  # _gpus_on_cpu
    _INTERCONNECT: lambda c, s: c.instance.interconnect_gb_s or None,  # _interconnect_too_slow
    _POWER: lambda c, s: c.per_node_power_w * s.nodes,  # _power_over_budget
    _PROVIDER: lambda c, s: c.instance.provider,  # _provider_excluded
}


def static_violation(fault: int, c: CloudCandidate, s: Placement) -> Violation:
    """The one STATIC entry a request without a model fails on `c` placed at `s` (`fault`: its
    bit, as static_faults and request_free_faults set it) as static_violations finds it,
    without its sentence (empty): the nearest alternatives read a group's code, field and
    value, never its sentence, and writing it was most of their cost where a large memory
    requirement spreads every group over nodes (tests/test_constraints.py holds the two to one
    answer)."""
    entry, relax_to = STATIC[fault.bit_length() - 1], _STATIC_RELAX_TO.get(fault)
    if relax_to is None:
        return Violation(entry.code, None, "")
    return Violation(entry.code, entry.field, "", relax_to(c, s))


class GroupFaults(NamedTuple):
    """What static_faults reads of one candidate group's candidates for one workload type, with
    the request-free entries they fail: plain values worked out once per catalog and workload
    type, for the engine's pass over the groups of a request without a model
    (advisor/engine/evaluation.py _evaluate_unsized, which sets the same bits as static_faults:
    tests/test_constraints.py holds the two to one answer)."""

    group: int  # its position in CandidateIndex.cloud_groups
    first: CloudCandidate  # the group's first member: its placement and valuation stand for all
    members: int
    # Its placement key (CloudCandidate.placement_key) as a position among the keys of the
    # groups the workload type runs on: a request places each key once
    placement: int
    free: int  # request_free_faults
    spans: int  # the bit a scale-out workload's placement across nodes sets (a slow network)
    rented_per_node: int  # GPUs a node rents, 0 for CPU-only (max_gpus counts GPUs)
    cpu_only: bool
    interconnect_gb_s: float
    power_w: float  # one node's
    provider: str
    # Its members' cheapest offering, one node's price (infinity where none is priced): the
    # nearest alternatives pass over a group that fails a static check where it is over budget
    # (advisor/engine/alternatives.py)
    cheapest_usd: float
    # Its static_violation by fault bit, for the bits whose violation does not depend on the
    # placement (group_violation): one entry a bit at most
    violations: dict[int, Violation]


def group_faults(
    i: int, group: tuple[CloudCandidate, ...], placement: int, p: WorkloadProfile
) -> GroupFaults:
    c = group[0]
    it = c.instance
    slow = p.scale_out and network_below_floor(p, it.network_gbps)
    return GroupFaults(
        i,
        c,
        len(group),
        placement,
        request_free_faults(c, p),
        _NETWORK if slow else 0,
        it.gpu_count if c.is_gpu else 0,
        not c.is_gpu,
        it.interconnect_gb_s,
        c.per_node_power_w,
        it.provider,
        min((member.offers[0][2] for member in group if member.offers), default=math.inf),
        {},
    )


# The fault bits whose violation counts the nodes (the GPU limit, the power budget)
_BY_NODES = _OVER_LIMIT | _POWER


def group_violation(g: GroupFaults, fault: int, s: Placement) -> Violation:
    """static_violation of group `g`'s members placed at `s`, kept on the group where it does
    not depend on the placement: the nearest alternatives ask it of most groups of every
    request that nothing fits."""
    found = g.violations.get(fault)
    if found is None:
        found = static_violation(fault, g.first, s)
        if not fault & _BY_NODES:
            g.violations[fault] = found
    return found


class RequestFaults(NamedTuple):
    """What static_faults reads of a request without a model, as plain values (no limit:
    infinity): GroupFaults' other half."""

    spans: int  # the bit a placement across nodes sets for a workload that runs on one node
    # Whether any of the request's limits below is set: most requests set none, and their
    # pass skips the limits' masks (request_fault_masks)
    limited: bool
    max_gpus: float
    count_on_cpu: int  # _COUNT_ON_CPU where a GPU count is asked, else 0
    interconnect_gb_s: float
    power_budget_w: float
    provider: str | None


def request_faults(w: Workload, p: WorkloadProfile) -> RequestFaults:
    limits = (w.max_gpus, w.gpu_count, w.interconnect_gb_s, w.power_budget_w, w.provider)
    return RequestFaults(
        0 if p.scale_out else _BY_MEMORY if w.memory_gb else _BY_COUNT,
        any(limit is not None for limit in limits),
        math.inf if w.max_gpus is None else w.max_gpus,
        _COUNT_ON_CPU if w.gpu_count else 0,
        w.interconnect_gb_s or 0.0,
        math.inf if w.power_budget_w is None else w.power_budget_w,
        w.provider,
    )


class FaultMasks(NamedTuple):
    """One workload type's running groups (a tuple of GroupFaults) as bit masks over them, bit j
    for the j-th: a request sets each static fault bit on every group at once, a few integer
    operations instead of a pass over the groups (advisor/engine/evaluation.py
    _evaluate_unsized; tests/test_constraints.py holds the bits they set to static_faults,
    group by group). Worked out once per catalog and workload type."""

    every: int  # every running group
    keys: tuple[tuple[bool, float, int, float], ...]  # placement keys, by GroupFaults.placement
    key_groups: tuple[int, ...]  # per key: its groups
    key_rented: tuple[int, ...]  # per key: GPUs a node rents (the key holds the GPU count)
    # per key: its groups' node power ascending, and the groups from each position on (a power
    # budget rules out a suffix: power x nodes rises with the power)
    key_power: tuple[tuple[tuple[float, ...], tuple[int, ...]], ...]
    free: tuple[tuple[int, int], ...]  # (a request-free entry's bit, the groups failing it)
    network: int  # groups whose network is too slow to span nodes (GroupFaults.spans)
    cpu_only: int
    by_provider: dict[str, int]
    interconnect: tuple[float, ...]  # the groups' GPU links, ascending
    slower: tuple[int, ...]  # slower[n]: the groups of the first n links
    # more_members[k]: groups of more than k + 1 members (each counts its members)
    more_members: tuple[int, ...]

    def members(self, groups: int) -> int:
        """The candidates in `groups` (a mask)."""
        return groups.bit_count() + sum((groups & m).bit_count() for m in self.more_members)


def fault_masks(running: Sequence[GroupFaults]) -> FaultMasks:
    keys: dict[tuple[bool, float, int, float], int] = {}
    for g in running:
        keys.setdefault(g.first.placement_key, g.placement)
    key_groups = [0] * len(keys)
    key_rented = [0] * len(keys)
    powered: list[list[tuple[float, int]]] = [[] for _ in keys]
    free: dict[int, int] = {}
    network = cpu_only = 0
    by_provider: dict[str, int] = {}
    for j, g in enumerate(running):
        bit = 1 << j
        key_groups[g.placement] |= bit
        key_rented[g.placement] = g.rented_per_node
        powered[g.placement].append((g.power_w, j))
        for k in range(g.free.bit_length()):
            if g.free >> k & 1:
                free[1 << k] = free.get(1 << k, 0) | bit
        network |= bit if g.spans else 0
        cpu_only |= bit if g.cpu_only else 0
        by_provider[g.provider] = by_provider.get(g.provider, 0) | bit
    links = sorted(range(len(running)), key=lambda j: running[j].interconnect_gb_s)
    most = max((g.members for g in running), default=1)
    return FaultMasks(
        (1 << len(running)) - 1,
        tuple(keys),
        tuple(key_groups),
        tuple(key_rented),
        tuple(_suffixes(sorted(groups)) for groups in powered),
        tuple(sorted(free.items())),
        network,
        cpu_only,
        by_provider,
        tuple(running[j].interconnect_gb_s for j in links),
        _prefixes(links),
        tuple(
            sum(1 << j for j, g in enumerate(running) if g.members > k + 1) for k in range(most - 1)
        ),
    )


def _prefixes(order: Sequence[int]) -> tuple[int, ...]:
    """[n]: the mask of the first n positions of `order`."""
    out = [0]
    for j in order:
        out.append(out[-1] | 1 << j)
    return tuple(out)


def _suffixes(ranked: list[tuple[float, int]]) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """(the values ascending, [n]: the mask of the positions from the n-th on)."""
    out = [0]
    for _, j in reversed(ranked):
        out.append(out[-1] | 1 << j)
    return tuple(v for v, _ in ranked), tuple(reversed(out))


def request_fault_masks(
    m: FaultMasks, placements: Sequence[Placement], r: RequestFaults
) -> list[tuple[int, int]]:
    """The static fault bits a request without a model sets, each with the groups it sets it
    on (masks over m's groups): the request-free ones, the placement across nodes
    (static_faults' first test) and the request's limits. `placements`: one per
    placement key, in m.keys' order."""
    spans = 0
    for k, placement in enumerate(placements):
        if placement.spans_nodes:
            spans |= m.key_groups[k]
    out = [*m.free, (_NETWORK, spans & m.network)]
    if r.spans:
        out.append((r.spans, spans))
    if r.limited:
        over, power = _count_and_power_masks(m, placements, r)
        slower = m.slower[bisect_left(m.interconnect, r.interconnect_gb_s)]
        out += [(_OVER_LIMIT, over), (_INTERCONNECT, slower), (_POWER, power)]
        out.append((_COUNT_ON_CPU, m.cpu_only if r.count_on_cpu else 0))
        if r.provider is not None:
            out.append((_PROVIDER, m.every & ~m.by_provider.get(r.provider, 0)))
    return out


def _count_and_power_masks(
    m: FaultMasks, placements: Sequence[Placement], r: RequestFaults
) -> tuple[int, int]:
    """The groups over the request's GPU limit (nodes x GPUs a node) and those over its power
    budget (nodes x a node's power): each key's nodes rule out all its groups or a suffix of
    them by power."""
    over = power = 0
    budget = r.power_budget_w
    for k, placement in enumerate(placements):
        nodes = placement.nodes
        if nodes * m.key_rented[k] > r.max_gpus:
            over |= m.key_groups[k]
        if budget != math.inf:
            powers, suffix = m.key_power[k]
            power |= suffix[bisect_right(powers, budget, key=lambda w: w * nodes)]
    return over, power


# --- offering checks ------------------------------------------------------------------------


def _region_not_offered(k: OfferCase) -> Finding | None:
    region = k.w.region
    if region_matches(region, k.price.region):
        return None
    return Finding(f"not offered in {region}", k.price.region)


def _purchase_unavailable(k: OfferCase) -> Finding | None:
    wanted = k.w.purchase
    if purchase_matches(wanted, k.price.purchase):
        return None
    # no purchase option asked (`any`) is one bought by the hour: on demand or spot
    asked = wanted or "on demand or spot"
    return Finding(f"a {k.price.purchase} price, not {asked}", str(k.price.purchase))


def _over_budget(k: OfferCase) -> Finding | None:
    price, budget = k.price, k.w.max_hourly_usd
    hourly = option_hourly_usd(price.hourly_usd, k.nodes)
    if budget is None or hourly <= budget:
        return None
    return Finding(
        f"costs ${hourly:,.2f}/h in {price.region} ({price.purchase}), above the "
        f"${budget:,.2f}/h budget",
        round(hourly, 4),
    )


def _spot_too_risky(k: OfferCase) -> Finding | None:
    """A spot plan beyond the workload's bound (advisor/engine/spot_risk.py). Not relaxable by
    a request field: the on-demand offering of the same type is the alternative."""
    if k.spot is None or k.price.purchase != Purchase.spot:
        return None
    c, plan, policy = k.spot
    return (
        Finding(risk_sentence(c, plan, policy), relaxable=False)
        if too_risky(plan, policy)
        else None
    )


def _price_flagged(k: OfferCase) -> Finding | None:
    """A price the catalog's sanity checks doubt (advisor/catalog/cross_checks.py price_flags)."""
    if price_usable(k.price, k.w.include_flagged_prices):
        return None
    return Finding(f"its price is flagged: {k.price.flag}")


OFFERING: tuple[Constraint[OfferCase], ...] = (
    Constraint("REGION_NOT_OFFERED", "region", "the region", _region_not_offered),
    Constraint("PURCHASE_UNAVAILABLE", "purchase", "the purchase option", _purchase_unavailable),
    Constraint("OVER_BUDGET", "max_hourly_usd", "the hourly budget", _over_budget),
    Constraint("SPOT_TOO_RISKY", None, "the spot interruption risk", _spot_too_risky),
    Constraint("PRICE_FLAGGED", "include_flagged_prices", "a flagged price", _price_flagged),
)


# What relaxes each OFFERING entry's failure, by position: the value its check's Finding carries
# (offer_violation).
_OFFER_RELAX_TO: tuple[Any, ...] = (
    lambda price, nodes: price.region,  # _region_not_offered
    lambda price, nodes: str(price.purchase),  # _purchase_unavailable
    lambda price, nodes: round(option_hourly_usd(price.hourly_usd, nodes), 4),  # _over_budget
    None,  # _spot_too_risky: not relaxable
    lambda price, nodes: None,  # _price_flagged
)


def offer_violation(faults: int, price: Price, nodes: int) -> Violation:
    """The one OFFERING check an offering fails (`faults`, offer_faults' bits: exactly one set)
    as offering_violations finds it, without its sentence (empty): the nearest alternatives
    read an offering's code, field and value, never its sentence (tests/test_constraints.py
    holds the two to one answer)."""
    k = faults.bit_length() - 1
    entry, relax_to = OFFERING[k], _OFFER_RELAX_TO[k]
    if relax_to is None:
        return Violation(entry.code, None, "")
    return Violation(entry.code, entry.field, "", relax_to(price, nodes))


def offering_violations(
    price: Price,
    nodes: int,
    w: Workload,
    spot: tuple[CloudCandidate, SpotPlan, SpotPolicy] | None = None,
) -> list[Violation]:
    return violations(OFFERING, OfferCase(price, nodes, w, spot))


def static_codes(faults: int) -> tuple[str, ...]:
    """The codes of static_faults' (and request_free_faults') bits, as a Rejection lists them."""
    return _codes(STATIC, faults, _STATIC_CODES)


def offer_codes(faults: int) -> tuple[str, ...]:
    """The codes of offer_faults' bits, as a Rejection lists them."""
    return _codes(OFFERING, faults, _OFFER_CODES)


def _codes(
    registry: Sequence[Constraint[Any]], faults: int, memo: dict[int, tuple[str, ...]]
) -> tuple[str, ...]:
    """The codes of the entries whose bits (1 << position) are set, in registry order; kept per
    combination of faults met (a few dozen). No two entries of one code fail one request
    without a model (tests/test_constraints.py compares these with the registry's codes)."""
    found = memo.get(faults)
    if found is None:
        found = memo[faults] = tuple(e.code for k, e in enumerate(registry) if faults >> k & 1)
    return found


_STATIC_CODES: dict[int, tuple[str, ...]] = {}
_OFFER_CODES: dict[int, tuple[str, ...]] = {}


# --- edge-device checks ---------------------------------------------------------------------


def _edge_mismatch(k: EdgeCase) -> Finding | None:
    d = k.e.device
    return None if runs(d, k.p) else Finding(mismatch_sentence(d, k.p))


def _edge_memory(k: EdgeCase) -> Finding | None:
    d, need = k.e.device, k.w.memory_gb
    if need is None:
        return None
    if d.memory_gb is None:  # weights stream from the host: nothing on the device to hold them
        return Finding(
            f"has no memory of its own (host memory): it cannot hold the {need:g} GB needed",
            relaxable=False,
        )
    usable = usable_memory_gb(d.memory_gb)
    if usable >= need:
        return None
    return Finding(
        f"{usable:g} GB usable of {d.memory_gb:g} GB is below the {need:g} GB needed", usable
    )


def _edge_power(k: EdgeCase) -> Finding | None:
    e, budget = k.e, k.w.power_budget_w
    if budget is None or e.power_w <= budget:
        return None
    mode = f" in its {e.mode} mode" if e.mode else ""
    return Finding(f"draws {e.power_w:g} W{mode}, above the {budget:g} W budget", e.power_w)


def _edge_region(k: EdgeCase) -> Finding | None:
    return None if k.w.region is None else Finding("an edge device has no cloud region")


def _edge_provider(k: EdgeCase) -> Finding | None:
    return None if k.w.provider is None else Finding("an edge device has no cloud provider")


def _edge_budget(k: EdgeCase) -> Finding | None:
    return None if k.w.max_hourly_usd is None else Finding("an edge device has no hourly price")


def _edge_gpu_count(k: EdgeCase) -> Finding | None:
    count = k.w.gpu_count
    return Finding("one device, one accelerator", 1) if count and count > 1 else None


def _edge_interconnect(k: EdgeCase) -> Finding | None:
    return Finding("an edge device has no GPU link") if k.w.interconnect_gb_s else None


EDGE: tuple[Constraint[EdgeCase], ...] = (
    Constraint("WORKLOAD_MISMATCH", None, "the workload's kind of hardware", _edge_mismatch),
    Constraint("MEMORY_INSUFFICIENT", "memory_gb", "the memory requirement", _edge_memory),
    Constraint("POWER_OVER_BUDGET", "power_budget_w", "the power budget", _edge_power),
    Constraint("NOT_A_CLOUD_OFFERING", "region", "the region/provider", _edge_region),
    Constraint("NOT_A_CLOUD_OFFERING", "provider", "the region/provider", _edge_provider),
    Constraint("NO_HOURLY_PRICE", "max_hourly_usd", "the hourly budget", _edge_budget),
    Constraint("GPU_COUNT_TOO_HIGH", "gpu_count", "the GPU count", _edge_gpu_count),
    Constraint(
        "INTERCONNECT_TOO_SLOW",
        "interconnect_gb_s",
        "the interconnect requirement",
        _edge_interconnect,
    ),
)


def edge_violations(e: EdgeCandidate, w: Workload, p: WorkloadProfile) -> list[Violation]:
    return violations(EDGE, EdgeCase(e, w, p))


# Latency targets are independent: the lowest figure reachable is worth stating for each even
# when an option misses both (advisor/engine/__init__.py _alternatives).
LATENCY_CODES = frozenset({"TTFT_TARGET_MISSED", "ITL_TARGET_MISSED"})

# What the explanation counts each code under ("the power budget rules out 3").
CODE_WORDS: dict[str, str] = {
    entry.code: entry.words for registry in (STATIC, OFFERING, EDGE) for entry in registry
} | {"BUDGET_EXCEEDED": "the total budget"}  # an offering's cost to completion: engine/budget.py


OVER_BUDGET = 1 << 2  # offer_faults' bit for the budget (_over_budget)


def offer_faults(offer: Offer, w: Workload, nodes: int, risky: bool, skip_flagged: bool) -> int:
    """The OFFERING checks an offering fails, one bit each in the registry's order, worked out
    inline: cheap enough to run on every offering, to find the few worth explaining with the
    registry's sentences (tests/test_constraints.py holds the two to the same answer)."""
    o_region, o_purchase, hourly, price, _ = offer
    budget = w.max_hourly_usd
    return (
        (not region_matches(w.region, o_region))
        | (not purchase_matches(w.purchase, o_purchase)) << 1
        | (budget is not None and option_hourly_usd(hourly, nodes) > budget) * OVER_BUDGET
        | (risky and o_purchase is Purchase.spot) << 3
        # price_usable inline: this runs on every offering of an option, once per filter
        | (skip_flagged and price.flag is not None) << 4
    )


class FaultGroup(NamedTuple):
    """An option's offerings that fail the same OFFERING checks other than the budget (one bit
    each, as offer_faults counts them): no budget changes that part."""

    faults: int
    positions: tuple[int, ...]  # in CloudCandidate.offers: cheapest first
    hourly_usd: tuple[float, ...]  # one node's, in the same order

    def within(self, budget_usd: float | None, nodes: int) -> int:
        """How many of them (a prefix) the budget allows on `nodes` nodes (_over_budget)."""
        if budget_usd is None:
            return len(self.positions)
        return bisect_right(self.hourly_usd, budget_usd, key=lambda h: option_hourly_usd(h, nodes))


def fault_groups(
    c: CloudCandidate, w: Workload, risky: bool, skip_flagged: bool
) -> tuple[FaultGroup, ...]:
    """The option's offerings by their faults other than the budget, under the request's
    region, purchase and flagged-price filters and whether its spot offerings are too risky:
    the same for every budget and node count, so kept on the candidate per (region, purchase,
    risky, skip_flagged), a few hundred keys at most."""
    key = (w.region, w.purchase, risky, skip_flagged)
    found = c.fault_groups.get(key)  # the common case, inline
    if found is not None:
        return found

    def build() -> tuple[FaultGroup, ...]:
        members: dict[int, list[int]] = {}
        for position, offer in enumerate(c.offers):
            faults = offer_faults(offer, w, 1, risky, skip_flagged) & ~OVER_BUDGET
            members.setdefault(faults, []).append(position)
        return tuple(
            FaultGroup(faults, tuple(ps), tuple(c.offers[i][2] for i in ps))
            for faults, ps in members.items()
        )

    return per_filter(c.fault_groups, c.fault_groups_by_regions, key, c.regions, build)
