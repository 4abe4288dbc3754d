"""Spot plans (advisor/perf/spot.py, advisor/engine/spot_risk.py): lost work and restarts by hand,
the bound on synchronous multi-node spot plans (SPOT_TOO_RISKY), spot options' reasons and cost
to completion, and on-demand left as it was."""

from __future__ import annotations

import math
from typing import Any

import pytest

from advisor import Catalog, recommend
from advisor.engine import Recommendation
from advisor.engine.candidates import candidate_index
from advisor.engine.checks import GROUP_SIGNATURE, offering_violations, static_violations
from advisor.engine.placement import place
from advisor.engine.spot_risk import option_spot_plan
from advisor.perf.spot import rate_per_node_h, spot_plan, too_risky
from advisor.planning.estimate import estimate
from advisor.planning.plans import plan_for
from advisor.request import EstimateRequest, RecommendRequest

# The case: a 70B model on 1T tokens over 512 GPUs; on 8 x A100 nodes that is 64 nodes
# for about 102 days.
PRETRAIN = dict(
    workload="large_scale_training",
    model="llama-3-70b",
    tokens=1e12,
    gpu_count=512,
    provider="aws",
    limit=1000,
)


def test_rate_from_a_fraction_per_period_by_hand() -> None:
    # 15% of instances interrupted in a 730 h month: 1 - exp(-lambda x 730) = 0.15.
    rate = rate_per_node_h(0.15, 730)
    assert rate == pytest.approx(0.1625189 / 730, rel=1e-6)
    assert 1 - math.exp(-rate * 730) == pytest.approx(0.15)


def test_lost_work_and_restarts_by_hand() -> None:
    # 100 h on 4 nodes at 0.01 per node-hour: the job is interrupted at 0.04/h; each interruption
    # loses half of a 1 h checkpoint interval plus a 0.5 h restart = 1 h. T = 100 / (1 - 0.04).
    plan = spot_plan(100, 4, 0.01, 1.0, 0.5)
    total = 100 / 0.96  # 104.1667 h
    assert plan.total_hours == pytest.approx(total)
    assert plan.added_hours == pytest.approx(total - 100)  # 4.17 h
    assert plan.interruptions == pytest.approx(0.04 * total)  # 4.17
    # close to the first-order figure N x lambda x H x (C/2 + R) = 4 h
    assert plan.added_hours == pytest.approx(4.0, rel=0.05)
    names = {f.name: f.value for f in plan.figures}
    assert names["expected_interruptions"] == pytest.approx(plan.interruptions)
    assert names["spot_added_hours"] == pytest.approx(plan.added_hours)


def test_a_plan_that_loses_more_than_it_runs_never_finishes(shipped: Catalog) -> None:
    plan = spot_plan(10, 1, 0.5, 2.0, 1.0)  # 0.5/h x (1 + 1) h = 1 h lost per hour
    assert not plan.finishes and math.isinf(plan.total_hours)
    policy = shipped.workloads["large_scale_training"].spot
    assert policy is not None and too_risky(plan, policy)  # even on one node


def _find(result: Any, instance_id: str, purchase: str) -> Recommendation:
    return next(
        r
        for r in result.recommendations
        if r.instance_type == instance_id and r.purchase == purchase
    )


def test_64_node_102_day_spot_plan_is_rejected_with_the_reason(shipped: Catalog) -> None:
    on_demand = _find(recommend(shipped, RecommendRequest(**PRETRAIN)), "p4d.24xlarge", "on_demand")
    hours = on_demand.sizing.hours if on_demand.sizing else None
    assert on_demand.nodes == 64 and hours is not None and hours > 60 * 24
    # By hand: AWS's 8-GPU families planned at 15% per 24 h (catalog/spot.yaml
    # aws-spot-large-gpu, the upper edge) -> lambda = -ln(0.85) / 24; 64 nodes; 1 h checkpoints,
    # 0.5 h restarts: 1 h lost each.
    job_rate = 64 * -math.log(0.85) / 24
    expected = job_rate * hours / (1 - job_rate * 1.0)
    assert expected > 10  # beyond large_scale_training's bound of 10 whole-job restarts
    spot = recommend(shipped, RecommendRequest(**PRETRAIN, purchase="spot"))
    rejected = next(r for r in spot.rejected if r.id == "p4d.24xlarge")
    assert rejected.codes == ("SPOT_TOO_RISKY",)
    reason = rejected.reasons[0]
    assert f"64 synchronous node(s) for {hours:,.0f} h expect {expected:,.1f} interruptions" in (
        reason
    )
    assert "at most 10 interruptions and at most 25% added time" in reason
    # (with the communication-aware time model some shorter spot plans stay feasible, so the
    # explanation counts rejections only when nothing is left)
    # Either purchase option: the on-demand offering stays, the spot one goes.
    both = recommend(shipped, RecommendRequest(**PRETRAIN, purchase="any"))
    assert {r.purchase for r in both.recommendations if r.instance_type == "p4d.24xlarge"} == {
        "on_demand"
    }


SMALL = dict(
    workload="large_scale_training",
    model="llama-3-8b",
    tokens=2e10,
    gpu_count=16,
    provider="aws",
    limit=1000,
)


def test_spot_option_states_interruptions_and_costs_them(shipped: Catalog) -> None:
    on_demand = _find(recommend(shipped, RecommendRequest(**SMALL)), "p4d.24xlarge", "on_demand")
    spot = _find(
        recommend(shipped, RecommendRequest(**SMALL, purchase="spot")), "p4d.24xlarge", "spot"
    )
    assert on_demand.sizing and spot.sizing and on_demand.sizing.hours
    hours = on_demand.sizing.hours
    # two p4d nodes, aws-spot-large-gpu: planned at 15% a day (the upper edge), the band's
    # floor 0.731% a day beside it
    job_rate = 2 * -math.log(0.85) / 24
    total = hours / (1 - job_rate * 1.0)
    assert spot.sizing.hours == pytest.approx(total)
    assert spot.sizing.cost_to_completion_usd == pytest.approx(total * spot.hourly_usd)
    line = next(s for s in spot.reasons if s.startswith("spot: "))
    low_rate = 2 * -math.log(1 - 0.00731) / 24
    low_total = hours / (1 - low_rate * 1.0)
    assert f"{low_rate * low_total:.2g} to {job_rate * total:.2g} expected interruption(s)" in line
    assert f"add {low_total - hours:,.1f} to {total - hours:,.1f} h of lost work" in line
    assert "(aws-spot-large-gpu, estimated)" in line


def test_on_demand_is_unaffected(shipped: Catalog) -> None:
    result = recommend(shipped, RecommendRequest(**SMALL))
    assert {r.purchase for r in result.recommendations} == {"on_demand"}  # the default
    for r in result.recommendations:
        assert r.sizing and r.sizing.hours and r.sizing.cost_to_completion_usd
        assert r.sizing.cost_to_completion_usd == pytest.approx(r.sizing.hours * r.hourly_usd)
        assert not any(s.startswith("spot: ") for s in r.reasons)
        assert "SPOT_TOO_RISKY" not in {c for x in result.rejected for c in x.codes}


def test_checkpoint_interval_is_an_input(shipped: Catalog) -> None:
    one = _find(
        recommend(shipped, RecommendRequest(**SMALL, purchase="spot")), "p4d.24xlarge", "spot"
    )
    four = _find(
        recommend(shipped, RecommendRequest(**SMALL, purchase="spot", checkpoint_interval_h=4)),
        "p4d.24xlarge",
        "spot",
    )
    assert one.sizing and four.sizing and one.sizing.hours and four.sizing.hours
    # loss per interruption 4/2 + 0.5 = 2.5 h instead of 1 h
    job_rate = 2 * -math.log(0.85) / 24
    base = one.sizing.hours * (1 - job_rate * 1.0)
    assert four.sizing.hours == pytest.approx(base / (1 - job_rate * 2.5))
    assert any("checkpoint every 4 h" in s for s in four.reasons)


@pytest.mark.parametrize("kw", [PRETRAIN, SMALL], ids=["64 nodes", "2 nodes"])
@pytest.mark.parametrize("purchase", ["spot", "any"])
def test_inline_spot_test_agrees_with_the_registry(
    shipped: Catalog, kw: dict[str, Any], purchase: str
) -> None:
    """The hot loop's inline count of SPOT_TOO_RISKY agrees with the OFFERING entry."""
    w = RecommendRequest(**kw, purchase=purchase, each_offering=True)
    p = shipped.workloads[w.workload]
    plan = plan_for(shipped, w.work(), p)
    expected = set()
    for c in candidate_index(shipped, GROUP_SIGNATURE).cloud:
        if c.hardware.form_factor not in p.form_factors:
            continue
        s = place(c, w, p, plan)
        if static_violations(c, s, w, p):
            continue
        spot = option_spot_plan(c, s, w, p)
        case = None if spot is None or p.spot is None else (c, spot, p.spot)
        for price in c.instance.prices:
            if not offering_violations(price, s.nodes, w, case):
                expected.add((c.instance.id, price.region, price.purchase.value))
    got = {(r.instance_type, r.region, r.purchase) for r in recommend(shipped, w).recommendations}
    assert got == expected


def test_estimate_on_spot_states_the_same_plan_as_recommend(shipped: Catalog) -> None:
    """`estimate --purchase spot` adds the interruptions `recommend` states for the same option,
    and a plan beyond the bound does not fit, with the reason."""
    spot = _find(
        recommend(shipped, RecommendRequest(**SMALL, purchase="spot")), "p4d.24xlarge", "spot"
    )
    body = {k: v for k, v in SMALL.items() if k not in ("provider", "limit")}
    est = estimate(
        shipped,
        EstimateRequest(**body, instance_type="p4d.24xlarge", purchase="spot"),  # type: ignore[arg-type]
    )
    assert spot.sizing is not None and est.fits
    assert est.hours == pytest.approx(spot.sizing.hours)
    assert est.cost_usd == pytest.approx(spot.sizing.cost_to_completion_usd)
    assert "expected_interruptions" in [f.name for f in est.figures]
    big = {k: v for k, v in PRETRAIN.items() if k not in ("provider", "limit")}
    risky = estimate(
        shipped,
        EstimateRequest(**big, instance_type="p4d.24xlarge", purchase="spot"),  # type: ignore[arg-type]
    )
    assert not risky.fits
    assert "allows a multi-node spot plan at most 10 interruptions" in risky.notes[0]


def test_the_chance_of_at_least_one_interruption() -> None:
    """Poisson arrivals: P(at least one) = 1 - exp(-expected). 4 nodes at 0.001/node-h for
    100 h, checkpoint 1 h, restart 0.5 h: rate 0.004/h, loss 1 h a time, wall 100 / 0.996 =
    100.4016 h, expected 0.401606, chance 1 - exp(-0.401606) = 1 - 0.670320 x 0.998395 = 0.330756."""
    from advisor.perf.spot import spot_plan as plan_of

    plan = plan_of(100, 4, 0.001, 1.0, 0.5)
    assert plan.interruptions == pytest.approx(0.401606, rel=1e-5)
    assert plan.chance_of_any == pytest.approx(0.330756, rel=1e-5)
    figure = next(f for f in plan.figures if f.name == "chance_of_any_interruption")
    assert figure.value == pytest.approx(plan.chance_of_any)
