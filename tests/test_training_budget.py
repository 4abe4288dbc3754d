"""Budgets and deadline margins on a training estimate (advisor/planning/estimate.py)."""

from __future__ import annotations

import json

import pytest

from advisor import Catalog, Workload, recommend
from advisor.planning.estimate import Estimate, estimate
from advisor.request import EstimateRequest
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
