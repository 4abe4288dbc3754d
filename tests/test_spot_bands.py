"""Spot as it is: interruption bands per cloud and family (catalog/spot.yaml), plans at the
band's upper edge with the lower edge beside it, and what an interruption costs a served model.
Expected figures are worked by hand in the comments (rate = -ln(1 - fraction) / period)."""

from __future__ import annotations

import math

import pytest

from advisor import Catalog, Workload, recommend
from advisor.catalog import load_catalog
from advisor.perf.spot import rate_per_node_h, training_spot_plan


@pytest.fixture(scope="module")
def shipped() -> Catalog:
    return load_catalog()


def test_large_gpu_spot_is_planned_alike_on_aws_and_gcp(shipped: Catalog) -> None:
    # Before: AWS 8-GPU families at 20% a month (-ln 0.8 / 730 = 3.06e-4 per node-hour) against
    # GCP at 15% a day (-ln 0.85 / 24 = 6.77e-3), 22x apart. Now both are planned at 15% a day.
    aws = shipped.spot_interruptions["aws-spot-large-gpu"]
    gcp = shipped.spot_interruptions["gcp-spot"]
    aws_rate = rate_per_node_h(aws.fraction_interrupted, aws.period_h)
    assert aws_rate == pytest.approx(-math.log(0.85) / 24)
    assert aws_rate == pytest.approx(rate_per_node_h(gcp.fraction_interrupted, gcp.period_h))
    # the band's floor, 20% a month, kept as its lower edge over a day: 1 - 0.8^(24/730)
    assert aws.band_low_fraction == pytest.approx(1 - 0.8 ** (24 / 730), rel=1e-3)


def test_a_week_on_one_spot_gpu_node_is_likely_interrupted(shipped: Catalog) -> None:
    # One p5 node for 7 days (168 h), checkpoint 1 h, restart 0.5 h (fine_tuning's policy): at
    # 6.77e-3 per hour the wall time is 168 / (1 - 6.77e-3 x 1) = 169.15 h, so 1.145 expected
    # interruptions and 1 - exp(-1.145) = 68% chance of one; at the band's floor (3.06e-4) 5%.
    source = shipped.spot_interruptions["aws-spot-large-gpu"]
    policy = shipped.workloads["fine_tuning"].spot
    assert policy is not None
    plan = training_spot_plan(168, 1, source, policy, checkpoint_h=1)
    assert plan.interruptions == pytest.approx(1.145, rel=2e-3)
    assert plan.chance_of_any == pytest.approx(0.68, abs=0.01)
    assert plan.low is not None and plan.low.chance_of_any == pytest.approx(0.05, abs=0.005)


def test_the_spot_plan_states_the_range_and_the_rework(shipped: Catalog) -> None:
    result = recommend(
        shipped,
        Workload(
            workload="fine_tuning",
            model="llama-3-8b",
            tokens=2e9,
            purchase="spot",
            provider="aws",
            limit=3,
        ),
    )
    sentence = next(r for r in result.recommendations[0].reasons if r.startswith("spot:"))
    assert "(the band's lower and upper edges; planned at the upper)" in sentence
    assert "of lost work and restarts" in sentence and "reserve" not in sentence


def test_spot_serving_says_what_an_interruption_costs(shipped: Catalog) -> None:
    result = recommend(
        shipped,
        Workload(
            workload="low_latency_inference",
            model="llama-3.1-8b",
            purchase="spot",
            provider="gcp",
            limit=1,
        ),
    )
    rec = result.recommendations[0]
    sentence = next(r for r in rec.reasons if r.startswith("spot:"))
    # one node in the deployment: an interruption takes all of the capacity; 1 node x 6.77e-3
    # per hour x 24 h = 0.16 interruptions a day
    assert f"one of the {rec.nodes} node(s) away" in sentence
    assert f"{1 / rec.nodes:.0%} of the serving capacity" in sentence
    assert f"{rec.nodes * -math.log(0.85):.2g} interruption(s) a day" in sentence
