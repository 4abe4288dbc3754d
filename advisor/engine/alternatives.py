"""The nearest alternatives when nothing fits: for each constraint that alone blocks a
candidate, the smallest relaxation that admits one (a budget, a region, more GPUs, a lighter
fine-tuning method, a latency target the options reach), and 16-bit serving in FP8."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from operator import itemgetter

from advisor.catalog.capability import runs
from advisor.catalog.models import Price, WorkloadProfile
from advisor.engine.candidates import CandidateIndex, CloudCandidate
from advisor.engine.checks import (
    LATENCY_CODES,
    OFFERING,
    OVER_BUDGET,
    FaultGroup,
    GroupFaults,
    edge_violations,
    fault_groups,
    group_violation,
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

# A candidate group the workload runs on, as the engine's pass placed and checked it: (the group
# (checks.py GroupFaults), its placement, the static entries it fails: the registry's
# violations, or for a request without a model their fault bits (checks.py static_faults)). A
# plain tuple: the pass makes one for every group of every request.
Placed = tuple[GroupFaults, Placement, int | Sequence[Violation]]


def nearest_alternatives(
    index: CandidateIndex, placed: Sequence[Placed], w: Workload, p: WorkloadProfile
) -> list[Alternative]:
    """For each constraint that alone blocks a candidate, the smallest relaxation that helps;
    for latency targets, the lowest figure any option blocked by latency alone reaches.
    `placed`: the groups the workload runs on as the engine's pass left them (a group it does
    not run on fails a check that no request field relaxes, and gives none). The tracker keeps
    the least of what it is offered, so the order and what it would not keep do not matter: a
    group none of whose offerings can be kept is passed over whole."""
    tracker = AlternativeTracker()
    budget = w.max_hourly_usd
    for g, placement, found in placed:
        members = index.cloud_groups[g.group]
        if not found:
            for c in members:
                _offering_alternatives(tracker, c, placement.nodes, w, _risky(c, placement, w, p))
            continue
        # Failing a static check, a group is explained by offerings that pass every offering
        # check, the budget's included, at its node count: none where its cheapest is over
        # budget, most groups when a large memory requirement spreads them over many nodes.
        cheapest = g.cheapest_usd
        if cheapest == math.inf or (
            budget is not None and option_hourly_usd(cheapest, placement.nodes) > budget
        ):
            continue
        static = _static(g, placement, found)
        if static is None or _beaten(tracker, static, placement, cheapest):
            continue
        for c in members:
            _static_alternatives(tracker, c, placement, static, w, p)
    edge_alternatives(tracker, index, w, p)
    return [a for a in tracker.alternatives() if not _latency_met_anyway(a, w, p)]


def edge_alternatives(
    tracker: AlternativeTracker, index: CandidateIndex, w: Workload, p: WorkloadProfile
) -> None:
    """Each edge device in each mode that one relaxation would admit, offered to `tracker`."""
    for e in index.edge:
        if not runs(e.device, p):  # WORKLOAD_MISMATCH, which no request field relaxes
            continue
        violations = edge_violations(e, w, p)
        if len(violations) == 1 and violations[0].constraint:
            v = violations[0]
            label = f"{e.device.name} ({e.mode} mode)" if e.mode else e.device.name
            tracker.offer(v.constraint or "", v.relax_to, 0.0, label)


def _static(
    g: GroupFaults, placement: Placement, found: int | Sequence[Violation]
) -> Sequence[Violation] | None:
    """The static entries a group fails, as the registry finds them (their sentences left out
    where the pass set fault bits: no alternative reads them). A request without a model fails
    no latency entry, so a group that fails two entries or more gives no alternative (None:
    _static_alternatives would return at once)."""
    if not isinstance(found, int):
        return found
    if found & (found - 1):
        return None
    return (group_violation(g, found, placement),) if found else ()


def _beaten(
    tracker: AlternativeTracker,
    static: Sequence[Violation],
    placement: Placement,
    cheapest_usd: float,
) -> bool:
    """Whether no offering of a group that fails one static check can be kept: the failure is
    not relaxable, or the tracker keeps a nearer relaxation of it, or one as near and cheaper
    than one node at the group's cheapest offering (every offering's option costs as much or
    more: _offer_relaxation rents one node or more). The relaxation is the group's, the same at
    each offering. Not for latency targets, whose figures are offered each (_offer_latency),
    nor where a lighter fine-tuning method is offered, each at its own node count
    (_offer_methods)."""
    if len(static) != 1 or static[0].code in LATENCY_CODES:
        return False
    v = static[0]
    if v.constraint is None:
        return True
    if v.constraint == "method" or (v.code == "GPU_LIMIT_EXCEEDED" and placement.fit is not None):
        return False
    return not tracker.may_keep(v.constraint, v.relax_to, cheapest_usd)


def _risky(c: CloudCandidate, placement: Placement, w: Workload, p: WorkloadProfile) -> bool:
    """Whether the option's spot offerings are too risky (SPOT_TOO_RISKY)."""
    spot = spot_case(c, placement, w, p)
    return spot is not None and too_risky(spot[1], spot[2])


def _static_alternatives(
    tracker: AlternativeTracker,
    c: CloudCandidate,
    placement: Placement,
    static: Sequence[Violation],
    w: Workload,
    p: WorkloadProfile,
) -> None:
    """One instance type that fails static checks, explained by the offerings that one
    relaxation of them (or of latency alone) would admit. Only offerings that fail no offering
    check can be: of those the budget allows, the first and its ties (the tracker prefers the
    lower price, then the label)."""
    latency_only = all(v.code in LATENCY_CODES for v in static)
    if not latency_only and (len(static) > 1 or static[0].constraint is None):
        return
    nodes = placement.nodes
    for group in fault_groups(c, w, _risky(c, placement, w, p), not w.include_flagged_prices):
        if group.faults:
            continue
        positions = _first_and_ties(group, 0, group.within(w.max_hourly_usd, nodes))
        if not positions:
            continue
        ties = [c.offers[i][3] for i in positions]
        if latency_only:
            hourly = option_hourly_usd(ties[0].hourly_usd, nodes)
            _offer_latency(tracker, placement, hourly, _first_label(c, ties, hourly)[0])
        else:
            _offer_relaxation(tracker, c, placement, ties, static[0], p)


# The request field that relaxes the budget (checks.py _over_budget)
_BUDGET_FIELD = OFFERING[OVER_BUDGET.bit_length() - 1].field or ""


def _offering_alternatives(
    tracker: AlternativeTracker, c: CloudCandidate, nodes: int, w: Workload, risky: bool
) -> None:
    """An option that passes every static check, explained by the offerings that fail one
    offering check alone: the cheapest of each kind of failure and its ties (the tracker
    prefers the nearest relaxation, then the lower price, then the label). The offerings come
    grouped by their faults other than the budget (checks.py fault_groups), cheapest first: in
    a group that fails one check, the budget allows a prefix, which fails that check alone; in
    one that fails none, the budget allows a prefix that fits, and the rest fail the budget
    alone. The registry explains only the first of such a run and its ties (explaining every
    offering took 30 ms on the shipped catalog, 130 ms at 10,000), and only where the tracker
    may keep it: its relaxation and price are those of all its ties, and a lower bound of them
    is known before the budget is bisected."""
    budget = w.max_hourly_usd
    for group in fault_groups(c, w, risky, not w.include_flagged_prices):
        faults, hourly_usd = group.faults, group.hourly_usd
        if not faults:
            if budget is None or option_hourly_usd(hourly_usd[-1], nodes) <= budget:
                continue  # every one fits
            # The first past the budget costs more than it and than the first
            least = max(budget, option_hourly_usd(hourly_usd[0], nodes))
            if not tracker.may_keep(_BUDGET_FIELD, round(least, 4), least):
                continue
            start, faults = group.within(budget, nodes), OVER_BUDGET
        elif faults & (faults - 1):  # two checks or more
            continue
        elif budget is not None and option_hourly_usd(hourly_usd[0], nodes) > budget:
            continue  # the budget allows none of them
        else:
            start = 0
        first = c.offers[group.positions[start]][3]
        v = offer_violation(faults, first, nodes)
        hourly = option_hourly_usd(first.hourly_usd, nodes)
        if v.constraint is None or not tracker.may_keep(v.constraint, v.relax_to, hourly):
            continue
        # Its ties cost as much (within the budget where it is), and fail the same check
        ties = [c.offers[i][3] for i in _first_and_ties(group, start, len(hourly_usd))]
        label, price = _first_label(c, ties, hourly)
        v = offer_violation(faults, price, nodes)
        tracker.offer(v.constraint or "", v.relax_to, hourly, label)


def _where(c: CloudCandidate, price: Price) -> str:
    return f"{c.instance.provider} {price.region}, {price.purchase}"


def _first_label(c: CloudCandidate, ties: Sequence[Price], hourly: float) -> tuple[str, Price]:
    """Of an option's offerings at one price, `hourly` on its nodes, the one the tracker would
    keep, the first by label (labels that differ in where alone), with its label."""
    head, tail = f"{c.instance.id} ({c.instance.provider} ", f", ${hourly:,.2f}/h)"
    return min(((head + o.region + ", " + o.purchase + tail, o) for o in ties), key=itemgetter(0))


def _offer_relaxation(
    tracker: AlternativeTracker,
    c: CloudCandidate,
    placement: Placement,
    ties: Sequence[Price],
    v: Violation,
    p: WorkloadProfile,
) -> None:
    """The one constraint an option fails, relaxed at its offerings `ties` (at one price, each
    failing nothing else): a lighter method, or the constraint's relaxation at the price of the
    nodes it then rents. More GPUs than one node's are no relaxation for work that runs on one
    node (the engine's one-node check refuses the option at that limit)."""
    assert v.constraint is not None
    if v.constraint == "method":
        for price in ties:
            _offer_methods(tracker, placement, price, c.instance.id, _where(c, price))
        return
    if v.code == "GPU_LIMIT_EXCEEDED" and placement.fit and placement.fit.lighter_methods:
        # a lighter method within the limit is another way there than more GPUs
        for price in ties:
            _offer_methods(tracker, placement, price, c.instance.id, _where(c, price))
    # Relaxing memory or GPU count to one node's worth means paying for one node.
    one_node = v.code in ("MEMORY_INSUFFICIENT", "GPU_COUNT_TOO_HIGH")
    nodes = 1 if one_node else placement.nodes
    if v.code == "GPU_LIMIT_EXCEEDED" and isinstance(v.relax_to, int):
        nodes = v.relax_to // c.instance.gpu_count  # the whole nodes the limit allows
        if nodes > 1 and not p.scale_out:
            return
    hourly = option_hourly_usd(ties[0].hourly_usd, nodes)
    # the labels only where the tracker may keep one: most offerings are beaten before it counts
    if tracker.may_keep(v.constraint, v.relax_to, hourly):
        tracker.offer(v.constraint, v.relax_to, hourly, _first_label(c, ties, hourly)[0])


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
