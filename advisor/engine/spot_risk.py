"""Spot training plans in the engine: the plan of one option (advisor/perf/spot.py), and whether a
synchronous plan is beyond the workload's bound (SPOT_TOO_RISKY, advisor/engine/checks.py).

One function each, read by the offering check, the hot loop, the ranking and the reasons.
"""

from __future__ import annotations

from advisor.catalog.models import SpotPolicy, WorkloadProfile
from advisor.engine.candidates import CloudCandidate
from advisor.engine.placement import Placement
from advisor.perf.spot import SpotPlan, rate_per_node_h, training_spot_plan
from advisor.request import SizedWork


def option_spot_plan(
    c: CloudCandidate, s: Placement, w: SizedWork, p: WorkloadProfile
) -> SpotPlan | None:
    """What spot interruptions add to this option's training time; None where there is no
    training time (Fit.hours), no spot policy for the workload or no interruption figure."""
    fit, policy, source = s.fit, p.spot, c.spot
    if fit is None or fit.hours is None or policy is None or source is None:
        return None
    return training_spot_plan(fit.hours, s.nodes, source, policy, w.checkpoint_interval_h)


def spot_words(c: CloudCandidate, plan: SpotPlan) -> str:
    """The interruption figure behind a plan, and where it came from."""
    source = c.spot
    assert source is not None
    estimated = ", estimated" if source.estimated else ""
    return (
        f"{source.fraction_interrupted:.0%} of {c.instance.provider} spot instances interrupted "
        f"per {source.period_h:g} h ({source.id}{estimated}) = {plan.rate_per_node_h:.3g} per "
        "node-hour"
    )


def risk_sentence(c: CloudCandidate, plan: SpotPlan, policy: SpotPolicy) -> str:
    """Why a spot plan is rejected."""
    head = f"on spot, {plan.nodes} synchronous node(s) for {plan.hours:,.0f} h"
    rate = spot_words(c, plan)
    if not plan.finishes:
        return (
            f"{head} never finish: at {rate}, interruptions lose more than an hour per hour "
            f"(checkpoint every {plan.checkpoint_h:g} h, restart {plan.restart_h:g} h)"
        )
    return (
        f"{head} expect {plan.interruptions:,.1f} interruptions ({rate}) adding "
        f"{plan.added_hours:,.0f} h ({plan.added_fraction:.1%}); a synchronous multi-node spot "
        f"plan may expect at most {policy.max_interruptions:g} interruptions and at most "
        f"{policy.max_added_fraction:.0%} added time: use on-demand or fewer, shorter runs"
    )


def plan_sentence(c: CloudCandidate, plan: SpotPlan) -> str:
    """What interruptions add to an accepted spot plan, for its reasons: planned at the upper
    edge of the provider's band, with the lower edge beside it where a band is stated."""
    low = plan.low
    if low is None or not low.finishes:
        count = f"{plan.interruptions:.2g} expected interruption(s)"
        added = f"{plan.added_hours:,.1f} h"
    else:
        count = (
            f"{low.interruptions:.2g} to {plan.interruptions:.2g} expected interruption(s) "
            "(the band's lower and upper edges; planned at the upper)"
        )
        added = f"{low.added_hours:,.1f} to {plan.added_hours:,.1f} h"
    return (
        f"spot: {count}, a {plan.chance_of_any:.0%} chance of at least one "
        f"({spot_words(c, plan)}); they add {added} of lost work and restarts (checkpoint "
        f"every {plan.checkpoint_h:g} h, restart {plan.restart_h:g} h): "
        f"{plan.total_hours:,.1f} h in all"
    )


def serving_sentence(c: CloudCandidate, nodes: int, restart_h: float | None) -> str | None:
    """What a spot interruption costs a served deployment: the node it takes and its share of
    the capacity, and how often that is expected (at the upper edge of the provider's band)."""
    source = c.spot
    if source is None:
        return None
    rate = rate_per_node_h(source.fraction_interrupted, source.period_h)
    per_day = nodes * rate * 24
    back = f" for about {restart_h * 60:,.0f} min (restart)" if restart_h else ""
    return (
        f"spot: an interruption takes one of the {nodes} node(s) away{back}: "
        f"{1 / nodes:.0%} of the serving capacity, its requests failed or queued; "
        f"{per_day:.2g} interruption(s) a day expected at {source.fraction_interrupted:.0%} "
        f"per {source.period_h:g} h ({source.id}): keep a node's worth of headroom on demand"
    )


def spot_case(
    c: CloudCandidate, placement: Placement, w: SizedWork, p: WorkloadProfile
) -> tuple[CloudCandidate, SpotPlan, SpotPolicy] | None:
    """The option's spot plan for the SPOT_TOO_RISKY check, or None where none is costed."""
    plan = option_spot_plan(c, placement, w, p)
    return None if plan is None or p.spot is None else (c, plan, p.spot)
