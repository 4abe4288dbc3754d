"""Budgets and deadline margins on a training estimate (advisor/planning/estimate.py) and a
recommendation (advisor/engine/budget.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from advisor import Catalog, Workload, recommend
from advisor.api import create_app
from advisor.planning.estimate import Estimate, estimate
from advisor.request import EstimateRequest
from tests.test_api import settings
from tests.test_cli import run as cli

JOB = {
    "workload": "large_scale_training",
    "model": "llama-3.1-70b",
    "tokens": 1e12,
    "instance_type": "p5.48xlarge",
    "gpu_count": 512,
}


def _estimate(shipped: Catalog, **more: object) -> Estimate:
    return estimate(shipped, EstimateRequest(**JOB, **more))  # type: ignore[arg-type]


def test_margin_from_the_calibration_spread(shipped: Catalog) -> None:
    """H100 is a calibrated generation: the efficiency is +-5.8% (the training rows' median
    error), so the run takes hours / 1.058 to hours / 0.942 (time inversely proportional)."""
    e = _estimate(shipped)
    assert e.hours is not None and e.hours_range is not None
    assert e.hours_range[0] == pytest.approx(e.hours / 1.058)
    assert e.hours_range[1] == pytest.approx(e.hours / 0.942)


def test_mi300x_margin_is_wider(shipped: Catalog) -> None:
    """MI300X: the factor 0.643 from 0.530 to 0.757 (0.7-1.0x H100 over a 1.32x peak): the
    pessimistic end is 0.942 x 0.530 / 0.643 = 0.776 of the planned efficiency."""
    e = estimate(
        shipped,
        EstimateRequest(
            workload="fine_tuning",
            model="llama-3-8b",
            tokens=1e9,
            accelerator="mi300x",
            gpu_count=8,
        ),
    )
    assert e.hours is not None and e.hours_range is not None
    assert e.hours_range[1] == pytest.approx(e.hours / (0.942 * 0.7 / 0.85), rel=1e-3)


def test_budget_buys_tokens_and_refuses_a_run_above_it(shipped: Catalog) -> None:
    """The plan's cost is linear in the tokens: a budget of half the cost buys half the tokens,
    and the run at the full token count does not fit it."""
    full = _estimate(shipped)
    assert full.cost_usd is not None and full.fits
    half = _estimate(shipped, budget_usd=full.cost_usd / 2)
    assert half.tokens_within_budget == pytest.approx(0.5e12)
    assert not half.fits
    assert any("above the" in n and "budget" in n for n in half.notes)
    assert _estimate(shipped, budget_usd=full.cost_usd * 1.01).fits


def test_cli_and_json_carry_margin_and_budget() -> None:
    args = ["estimate", "-w", "large_scale_training", "-m", "llama-3.1-70b", "--tokens", "1e12"]
    args += ["-i", "p5.48xlarge", "-g", "512", "--budget-usd", "1e9"]
    text = cli(*args)
    assert text.returncode == 0 and "finishes in " in text.stdout and " at MFU " in text.stdout
    data = json.loads(cli(*args, "--json").stdout)
    assert data["tokens_within_budget"] > 1e12 and len(data["hours_range"]) == 2


def test_recommend_states_the_margin(shipped: Catalog) -> None:
    """Every training option says when it finishes at either end of the efficiency; on an H100
    option the ends are hours / 1.058 and hours / 0.942 (the calibration spread alone)."""
    result = recommend(
        shipped,
        Workload(
            workload="large_scale_training",
            model="llama-3.1-70b",
            tokens=1e12,
            deadline_days=30,
            limit=20,
        ),
    )
    h100 = [r for r in result.recommendations if r.accelerator == "h100-sxm"]
    assert h100
    for r in result.recommendations:
        assert r.sizing is not None and r.sizing.hours and r.sizing.hours_range
        assert r.sizing.hours_range[0] < r.sizing.hours < r.sizing.hours_range[1]
        assert any(x.startswith("finishes in ") for x in r.reasons)
    hours, (low, high) = h100[0].sizing.hours, h100[0].sizing.hours_range  # type: ignore[union-attr]
    assert low == pytest.approx(hours / 1.058) and high == pytest.approx(hours / 0.942)
    # the MFU at either end: time inversely proportional to the efficiency
    mfu = h100[0].sizing.mfu  # type: ignore[union-attr]
    assert mfu is not None
    said = f"days at MFU {mfu * 1.058:.2f}-{mfu * 0.942:.2f} (optimistic to pessimistic"
    assert any(said in x for x in h100[0].reasons), h100[0].reasons


TRAIN = {
    "workload": "large_scale_training",
    "model": "llama-3.1-70b",
    "tokens": 1e12,
    "deadline_days": 30,
}


def _options(shipped: Catalog, **more: object) -> list[tuple[str, float]]:
    """Every feasible offering of the request without a budget, (type, cost to completion),
    listed one by one: what a budget is checked against, independently of the budget's path."""
    w = Workload(**TRAIN, each_offering=True, limit=1000, **more)
    out = []
    for r in recommend(shipped, w).recommendations:
        assert r.instance_type is not None and r.sizing is not None
        assert r.sizing.cost_to_completion_usd is not None
        out.append((r.instance_type, r.sizing.cost_to_completion_usd))
    return out


@pytest.mark.parametrize("objective", ["cost_to_completion", "time"])
def test_recommend_keeps_what_the_budget_completes(shipped: Catalog, objective: str) -> None:
    """A budget between the cheapest and the dearest type: the types kept are exactly those with
    an offering whose cost to completion is within it, each shown at such an offering, in the
    order the request without a budget ranks them; every other type that fits is rejected for
    the budget, at its cheapest offering's cost."""
    every = _options(shipped, objective=objective)
    cheapest: dict[str, float] = {}
    for option, cost in every:
        cheapest[option] = min(cost, cheapest.get(option, cost))
    costs = sorted(cheapest.values())
    assert len(costs) >= 3
    budget = (costs[0] + costs[-1]) / 2
    inside = {o for o, c in cheapest.items() if c <= budget}
    assert inside and inside != set(cheapest)
    w = Workload(**TRAIN, objective=objective, budget_usd=budget, limit=100, show_rejected=True)
    result = recommend(shipped, w)
    kept = [r.instance_type for r in result.recommendations]
    assert set(kept) == inside
    plain = Workload(**TRAIN, objective=objective, limit=100)
    order = [r.instance_type for r in recommend(shipped, plain).recommendations]
    assert kept == [o for o in order if o in inside]
    for r in result.recommendations:
        assert r.sizing is not None and r.sizing.cost_to_completion_usd is not None
        assert r.sizing.cost_to_completion_usd <= budget
        buys = 1e12 * budget / r.sizing.cost_to_completion_usd
        assert any(f"which buys {buys:.3g} tokens" in x for x in r.reasons), r.reasons
    over = {x.id: x for x in result.rejected if "BUDGET_EXCEEDED" in x.codes}
    assert set(over) == set(cheapest) - inside
    for option, x in over.items():
        assert f"costs ${cheapest[option]:,.0f} to completion at its cheapest" in x.reasons[0]
    assert result.feasible_types == len(inside)
    assert result.feasible_count == sum(1 for o, c in every if c <= budget)


def test_a_budget_below_every_option_says_what_completes_the_run(shipped: Catalog) -> None:
    """Nothing within the budget: no recommendation, and the one alternative is the cheapest
    option's cost to completion, in whole dollars up; that budget then keeps it."""
    every = _options(shipped)
    option, cost = min(every, key=lambda oc: (oc[1], oc[0]))
    w = Workload(**TRAIN, budget_usd=cost * 0.99)
    result = recommend(shipped, w)
    assert not result.recommendations
    (alt,) = result.alternatives
    assert (alt.constraint, alt.relax_to, alt.candidate) == ("budget_usd", math.ceil(cost), option)
    assert "raise --budget-usd to" in alt.sentence and "the total budget rules out" in (
        result.explanation
    )
    again = recommend(shipped, Workload(**TRAIN, budget_usd=math.ceil(cost)))
    assert [r.instance_type for r in again.recommendations] == [option]


def test_budget_in_the_cli_and_the_api(tmp_path: Path) -> None:
    """The same field on the command line and in the HTTP body, the same answer; exit 1 and the
    alternative when nothing is within it."""
    args = ["recommend", "-w", "large_scale_training", "-m", "llama-3.1-70b", "--tokens", "1e12"]
    args += ["--deadline-days", "30", "--budget-usd", "2e6", "--json"]
    out = cli(*args)
    assert out.returncode == 0, out.stderr
    body = {**TRAIN, "budget_usd": 2e6}
    with TestClient(create_app(settings(tmp_path))) as client:
        served = client.post("/v1/recommendations", json=body)
    assert served.status_code == 200, served.text
    assert json.loads(out.stdout)["recommendations"] == served.json()["recommendations"]
    low = cli(*args[:-3], "--budget-usd", "1000")
    assert low.returncode == 1 and "raise --budget-usd to" in low.stdout


@pytest.mark.parametrize(
    ("more", "named"),
    [
        ({"tokens": None, "deadline_days": None}, "goes with tokens"),
        ({"workload": "high_throughput_inference", "deadline_days": None}, "training only"),
        ({"model": None, "deadline_days": None}, "size the work from a model"),
    ],
)
def test_a_budget_needs_a_training_run_to_cost(
    shipped: Catalog, more: dict[str, object], named: str
) -> None:
    """Without tokens a run has no cost; a serving workload has no run; without a model, no
    plan: each refused naming the field, as the other training fields are."""
    from advisor.errors import InputError
    from advisor.request import parse_request

    with pytest.raises(InputError, match=named):
        w = parse_request(Workload, {**TRAIN, **more, "budget_usd": 1e6})
        recommend(shipped, w)
