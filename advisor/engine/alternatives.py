"""The nearest alternatives when nothing fits: for each constraint that alone blocks a
candidate, the smallest relaxation that admits one (a budget, a region, more GPUs, a lighter
fine-tuning method, a latency target the options reach), and 16-bit serving in FP8."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence

from advisor.catalog.capability import runs
from advisor.catalog.models import Price, WorkloadProfile
from advisor.engine.candidates import CandidateIndex, CloudCandidate
from advisor.engine.checks import (
    LATENCY_CODES,
    OVER_BUDGET,
    FaultGroup,
    edge_violations,
    fault_groups,
    latency_relax_to,
    offer_violation,
)
from advisor.engine.constraints import Violation
from advisor.engine.explain import AlternativeTracker
from advisor.engine.placement import Placement
from advisor.engine.result import Alternative, Recommendation, Result
from advisor.engine.spot_risk import spot_case
from advisor.perf.cost import option_hourly_usd
from advisor.perf.spot import too_risky
from advisor.planning.limits import latency_targets
from advisor.request import Workload

# A candidate group the workload runs on, as the engine's pass placed and checked it: (its index
# in CandidateIndex.cloud_groups, its placement, the static entries it fails). A plain tuple:
# the pass makes one for every group of every request.
Placed = tuple[int, Placement, Sequence[Violation]]


def nearest_alternatives(
    index: CandidateIndex, placed: Sequence[Placed], w: Workload, p: WorkloadProfile
) -> list[Alternative]:
    """For each constraint that alone blocks a candidate, the smallest relaxation that helps;
    for latency targets, the lowest figure any option blocked by latency alone reaches.
    `placed`: the groups the workload runs on as the engine's pass left them (a group it does
    not run on fails a check that no request field relaxes, and gives none)."""
    tracker = AlternativeTracker()
    for group, placement, static in placed:
        for c in index.cloud_groups[group]:
            _cloud_alternatives(tracker, c, placement, static, w, p)
    for e in index.edge:
        if not runs(e.device, p):  # WORKLOAD_MISMATCH, which no request field relaxes
            continue
        violations = edge_violations(e, w, p)
        if len(violations) == 1 and violations[0].constraint:
            v = violations[0]
            label = f"{e.device.name} ({e.mode} mode)" if e.mode else e.device.name
            tracker.offer(v.constraint or "", v.relax_to, 0.0, label)
    return [a for a in tracker.alternatives() if not _latency_met_anyway(a, w, p)]


def _cloud_alternatives(
    tracker: AlternativeTracker,
    c: CloudCandidate,
    placement: Placement,
    static: Sequence[Violation],
    w: Workload,
    p: WorkloadProfile,
) -> None:
    """One instance type's offerings that one relaxation (or latency alone) would admit, given
    the static checks it fails."""
    latency_only = bool(static) and all(v.code in LATENCY_CODES for v in static)
    if len(static) > 1 and not latency_only:
        return
    spot = spot_case(c, placement, w, p)
    risky = spot is not None and too_risky(spot[1], spot[2])
    for position, faults in _offers_worth_explaining(c, bool(static), placement.nodes, w, risky):
        price = c.offers[position][3]
        if latency_only and not faults:
            hourly = option_hourly_usd(price.hourly_usd, placement.nodes)
            label = f"{c.instance.id} ({_where(c, price)}, ${hourly:,.2f}/h)"
            _offer_latency(tracker, placement, hourly, label)
        elif len(static) + faults.bit_count() == 1:
            # the one failure: the static one, or the offering's (its bits, no sentence)
            v = static[0] if static else offer_violation(faults, price, placement.nodes)
            if v.constraint is not None:
                _offer_relaxation(tracker, c, placement, price, v, p)


def _where(c: CloudCandidate, price: Price) -> str:
    return f"{c.instance.provider} {price.region}, {price.purchase}"


def _offer_relaxation(
    tracker: AlternativeTracker,
    c: CloudCandidate,
    placement: Placement,
    price: Price,
    v: Violation,
    p: WorkloadProfile,
) -> None:
    """The one constraint an offering fails, relaxed: a lighter method, or the constraint's
    relaxation at the price of the nodes it then rents. More GPUs than one node's are no
    relaxation for work that runs on one node (the engine's one-node check refuses the option
    at that limit)."""
    assert v.constraint is not None
    if v.constraint == "method":
        _offer_methods(tracker, placement, price, c.instance.id, _where(c, price))
        return
    if v.code == "GPU_LIMIT_EXCEEDED" and placement.fit and placement.fit.lighter_methods:
        # a lighter method within the limit is another way there than more GPUs
        _offer_methods(tracker, placement, price, c.instance.id, _where(c, price))
    # Relaxing memory or GPU count to one node's worth means paying for one node.
    one_node = v.code in ("MEMORY_INSUFFICIENT", "GPU_COUNT_TOO_HIGH")
    nodes = 1 if one_node else placement.nodes
    if v.code == "GPU_LIMIT_EXCEEDED" and isinstance(v.relax_to, int):
        nodes = v.relax_to // c.instance.gpu_count  # the whole nodes the limit allows
        if nodes > 1 and not p.scale_out:
            return
    hourly = option_hourly_usd(price.hourly_usd, nodes)
    # the label only where the tracker may keep it: most offerings are beaten before it counts
    if tracker.may_keep(v.constraint, v.relax_to, hourly):
        label = f"{c.instance.id} ({_where(c, price)}, ${hourly:,.2f}/h)"
        tracker.offer(v.constraint, v.relax_to, hourly, label)


def _offers_worth_explaining(
    c: CloudCandidate, static: bool, nodes: int, w: Workload, risky: bool
) -> Iterator[tuple[int, int]]:
    """The offerings that can give an option's nearest alternative, cheapest first, each as its
    position in `c.offers` with the OFFERING checks it fails (checks.py offer_faults' bits). One is
    worth explaining when, with the static failures (`static`), it fails one check alone (or
    latency alone). The tracker prefers the nearest relaxation, then the lower price, then the
    label: of each kind of failure, only the first offering and those at its price can be
    nearest. The registry explains just those (explaining every offering took 30 ms on the
    shipped catalog, 130 ms at 10,000). The offerings come grouped by their faults other than
    the budget (advisor/engine/checks.py fault_groups), cheapest first: in each group the budget
    allows a prefix, one kind of failure, and the rest fail it too, another."""
    allowed = 0 if static else 1
    budget = w.max_hourly_usd
    picked: list[tuple[int, int]] = []
    for group in fault_groups(c, w, risky, not w.include_flagged_prices):
        faults = group.faults.bit_count()
        if faults > allowed:
            continue
        within = group.within(budget, nodes)
        picked += ((i, group.faults) for i in _first_and_ties(group, 0, within))
        if faults < allowed:  # the budget's fault is then one more that may be the only one
            over = group.faults | OVER_BUDGET
            picked += ((i, over) for i in _first_and_ties(group, within, len(group.positions)))
    yield from sorted(picked)


def _first_and_ties(group: FaultGroup, start: int, stop: int) -> tuple[int, ...]:
    """Of the group's offerings start:stop, the first and those at its price."""
    if start >= stop:
        return ()
    end = bisect_right(group.hourly_usd, group.hourly_usd[start], start, stop)
    return group.positions[start:end]


# Serving in 16 bits that fits nowhere may fit in 8: weights and KV cache halve on accelerators
# with FP8 matrix units; in FP8, FP4 weights halve again on Blackwell (advisor/perf/precision.py
# refuses the others).
_LOWER_PRECISION = {"bf16": "fp8", "fp16": "fp8", "fp8": "fp4"}
_WHAT_SHRINKS = {
    "fp8": "weights and KV cache in 8 bits, on fp8 matrix units",
    "fp4": "4-bit weights (NVFP4 on Blackwell, MXFP4 on CDNA 4; sized at NVFP4's 4.5 bits), "
    "KV cache in fp8, on fp4 tensor/matrix cores",
}


def _again(
    w: Workload,
    answer: Callable[[Workload], Result],
    field: str,
    value: str,
    sentence: Callable[[Recommendation, str], str],
) -> list[Alternative]:
    """The cheapest option for the same request with `field` set to `value` (`answer` runs the
    engine on it: one more pass), as an alternative whose sentence `sentence` writes from that
    option and where it is; none when nothing fits that way either."""
    again = answer(w.model_copy(update={field: value, "limit": 1}))
    if not again.recommendations:
        return []
    r = again.recommendations[0]
    where = f"{r.provider} {r.region}, {r.purchase}, ${r.hourly_usd or 0:,.2f}/h"
    return [
        Alternative(
            constraint=field,
            relax_to=value,
            candidate=r.instance_type or r.accelerator,
            sentence=sentence(r, where),
        )
    ]


def lower_precision(
    w: Workload, p: WorkloadProfile, answer: Callable[[Workload], Result]
) -> list[Alternative]:
    """The cheapest option that serves the same request a precision lower (FP8, from FP8 FP4),
    as an alternative, only when nothing fits."""
    lower = _LOWER_PRECISION.get(w.precision)
    if not w.sized or p.sizing != "inference" or lower is None:
        return []
    return _again(
        w,
        answer,
        "precision",
        lower,
        lambda r, where: (
            f"serve in {lower} ({_WHAT_SHRINKS[lower]}): "
            f"{r.instance_type} ({where}) (--precision {lower})"
        ),
    )


# A training workload that runs on one node (fine_tuning) whose job holds on no single node may
# run across nodes as a multi-node FSDP/ZeRO job: the scale-out training profile.
SCALE_OUT_TRAINING = "large_scale_training"


def across_nodes(
    w: Workload, p: WorkloadProfile, answer: Callable[[Workload], Result]
) -> list[Alternative]:
    """The cheapest option that runs the same sized training job across nodes (multi-node FSDP,
    the scale-out training profile), as an alternative, only when nothing fits a one-node
    training profile."""
    if not w.sized or p.sizing != "training" or p.scale_out or w.workload == SCALE_OUT_TRAINING:
        return []
    return _again(
        w,
        answer,
        "workload",
        SCALE_OUT_TRAINING,
        lambda r, where: (
            f"train across nodes (multi-node FSDP): {r.nodes} node(s) of "
            f"{r.instance_type} ({where}) (--workload {SCALE_OUT_TRAINING})"
        ),
    )


def _offer_methods(
    tracker: AlternativeTracker, placement: Placement, price: Price, instance: str, where: str
) -> None:
    """Each lighter fine-tuning method that fits an option memory alone blocks, with what it
    needs there (advisor/planning/fit.py Fit.lighter_methods)."""
    assert placement.fit is not None
    for method, memory_gb, gpus, nodes in placement.fit.lighter_methods:
        hourly = option_hourly_usd(price.hourly_usd, nodes)
        label = (
            f"{instance} ({where}, ${hourly:,.2f}/h) with {memory_gb:.1f} GB per GPU on "
            f"{gpus} GPU(s) (--method {method})"
        )
        tracker.offer("method", method, hourly, label)


def _offer_latency(
    tracker: AlternativeTracker, placement: Placement, hourly_usd: float, label: str
) -> None:
    """Each latency target's lowest reachable figure on an option that latency alone blocks."""
    fit = placement.fit
    assert fit is not None and fit.latency_floor is not None
    ttft, itl = fit.latency_floor
    tracker.offer("max_ttft_ms", latency_relax_to(ttft), hourly_usd, label)
    tracker.offer("max_itl_ms", latency_relax_to(itl), hourly_usd, label)


def _latency_met_anyway(a: Alternative, w: Workload, p: WorkloadProfile) -> bool:
    """A latency target some option already reaches needs no raising."""
    if a.constraint not in ("max_ttft_ms", "max_itl_ms") or not isinstance(a.relax_to, float):
        return False
    target = getattr(latency_targets(p, w.max_ttft_ms, w.max_itl_ms, w.output_tokens), a.constraint)
    return target is None or a.relax_to <= target
