"""Purchase options as sold: which ones a request matches, the Capacity Block durations AWS
sells, and which option a run of a given length is cheapest on (worked by hand below).

Capacity Block rules: AWS EC2 User Guide, "Capacity Blocks for ML" (1-14 days in 1-day steps,
then multiples of 7 days up to 182 days)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from advisor import Workload, recommend
from advisor.catalog import load_catalog, shipped_catalog_dir
from advisor.catalog import purchase as po
from advisor.catalog.models import Price, Purchase
from advisor.planning.estimate import estimate
from advisor.request import EstimateRequest, RecommendRequest
from tests.factories import TODAY


def _price(purchase: str, hourly: float, region: str = "us-east-1") -> Price:
    return Price(
        region=region, purchase=Purchase(purchase), hourly_usd=hourly, as_of=TODAY, source="t"
    )


@pytest.mark.parametrize(
    ("hours", "days"),
    [(1, 1), (24, 1), (25, 2), (14 * 24, 14), (14 * 24 + 1, 21), (83 * 24, 84), (182 * 24, 182)],
)
def test_capacity_block_durations(hours: float, days: int) -> None:
    assert po.block_days(hours) == days


def test_no_capacity_block_beyond_182_days() -> None:
    assert po.block_days(182 * 24 + 1) is None
    assert po.billed_hours(Purchase.capacity_block, 200 * 24) is None


def test_a_reservation_is_owed_for_its_whole_term() -> None:
    assert po.billed_hours(Purchase.reserved_1y, 83 * 24) == 8760
    assert po.billed_hours(Purchase.reserved_3y, 83 * 24) == 26280
    assert po.billed_hours(Purchase.reserved_1y, 9000) == 9000
    assert po.billed_hours(Purchase.on_demand, 10) == 10


OFFERING = [
    _price("on_demand", 10.0),
    _price("spot", 3.0),
    _price("capacity_block", 7.0),
    _price("reserved_1y", 6.0),
    _price("reserved_3y", 4.0),
]


def test_an_83_day_run_is_cheapest_as_a_capacity_block() -> None:
    # 83 days = 1,992 h. On demand 1,992 x 10 = 19,920; block of 84 days = 2,016 h x 7 = 14,112;
    # 1-year term 8,760 x 6 = 52,560; 3-year 26,280 x 4 = 105,120. Two nodes double each.
    choice = po.choose(83 * 24, 2, OFFERING, priced=Purchase.on_demand)
    assert choice is not None
    assert choice.chosen.price.purchase is Purchase.capacity_block
    assert choice.chosen.cost_usd == pytest.approx(14_112)
    assert "on_demand is not the cheapest way" in choice.sentence
    assert "$28,224" in choice.sentence and "$39,840" in choice.sentence
    assert "--purchase capacity_block" in choice.sentence


def test_an_83_day_run_priced_on_demand_alone_says_what_a_commitment_would_bill() -> None:
    # Only an on-demand price: the plan says so, and what the unpriced commitments would bill:
    # a 1-year term 8,760 / 1,992 h = 4.4x the run; a Capacity Block 84 days (12 weeks: past 14
    # days blocks come in 7-day steps), in 2 blocks for 100 instances (at most 64 a block).
    choice = po.choose(83 * 24, 100, [_price("on_demand", 10.0)], priced=Purchase.on_demand)
    assert choice is not None and choice.chosen.price.purchase is Purchase.on_demand
    assert "priced on_demand: the only price the catalog holds" in choice.sentence
    assert "a 1-year reservation would owe 4.4x the run's hours" in choice.sentence
    assert "a Capacity Block would bill 84 days (7-day steps) in 2 blocks of at most 64" in (
        choice.sentence
    )
    # 200 days: no block covers it
    longer = po.choose(200 * 24, 1, [_price("on_demand", 10.0)], priced=Purchase.on_demand)
    assert longer is not None and "no Capacity Block covers it (at most 182 days)" in (
        longer.sentence
    )


def test_a_300_day_run_is_cheapest_reserved_for_a_year() -> None:
    # 7,200 h: on demand 72,000; no block (over 182 days); 1-year 52,560; 3-year 105,120
    choice = po.choose(300 * 24, 1, OFFERING, priced=Purchase.reserved_1y)
    assert choice is not None and choice.chosen.price.purchase is Purchase.reserved_1y
    assert choice.sentence.startswith("priced reserved_1y because it is the cheapest way")
    assert "whole 1-year term: $52,560" in choice.sentence
    assert all(o.price.purchase is not Purchase.capacity_block for o in choice.others)


def test_a_short_run_stays_on_demand_when_blocks_cost_more() -> None:
    offering = [_price("on_demand", 10.0), _price("capacity_block", 12.0)]
    choice = po.choose(5, 1, offering, priced=Purchase.on_demand)  # 5 h vs a 1-day block
    assert choice is not None and choice.chosen.price.purchase is Purchase.on_demand
    assert choice.chosen.cost_usd == pytest.approx(50)


@pytest.mark.parametrize(
    ("wanted", "offered", "ok"),
    [
        (None, "on_demand", True),
        (None, "spot", True),
        (None, "reserved_1y", False),  # "any" never commits the buyer to a term
        (None, "capacity_block", False),
        ("reserved", "reserved_1y", True),
        ("reserved", "reserved_3y", True),
        ("reserved", "on_demand", False),
        ("reserved_3y", "reserved_1y", False),
        ("capacity_block", "capacity_block", True),
    ],
)
def test_which_offerings_a_request_matches(wanted: str | None, offered: str, ok: bool) -> None:
    want = None if wanted is None else Purchase(wanted)
    assert po.matches(want, Purchase(offered)) is ok


def test_a_price_states_its_term() -> None:
    with pytest.raises(ValidationError, match="reserved_1y or reserved_3y"):
        _price("reserved", 1.0)


def test_the_request_takes_the_new_words_and_names_them_when_wrong() -> None:
    assert (
        RecommendRequest(workload="fine_tuning", purchase="reserved").purchase is Purchase.reserved
    )
    with pytest.raises(ValidationError, match="capacity_block"):
        RecommendRequest(workload="fine_tuning", purchase="yearly")


# --- through the engine, on the shipped catalog with sourced-looking rows added by the test ----


def _with_commitments(tmp_path: Path) -> Any:
    """The shipped p5.48xlarge with a 1-year and a capacity-block price beside its us-east-1
    on-demand price (test figures: 0.6x and 0.7x of it), in place of the shipped ones."""
    data = yaml.safe_load((shipped_catalog_dir() / "instances" / "aws.yaml").read_text())
    [p5] = [e for e in data["instance_types"] if e["id"] == "p5.48xlarge"]
    [od] = [p for p in p5["prices"] if p["region"] == "us-east-1" and p["purchase"] == "on_demand"]
    extra = [
        {**od, "purchase": "reserved_1y", "hourly_usd": round(od["hourly_usd"] * 0.6, 4)},
        {**od, "purchase": "capacity_block", "hourly_usd": round(od["hourly_usd"] * 0.7, 4)},
    ]
    by_the_hour = [p for p in p5["prices"] if p["purchase"] in ("on_demand", "spot")]
    p5 = {**p5, "prices": [{k: v for k, v in p.items() if k != "flag"} for p in by_the_hour]}
    p5["prices"] += [{k: v for k, v in p.items() if k != "flag"} for p in extra]
    (tmp_path / "p5.yaml").write_text(yaml.safe_dump({"instance_types": [p5]}))
    return load_catalog(tmp_path, replace=False, today=TODAY), od["hourly_usd"]


def test_purchase_reserved_ranks_reserved_offerings_only(tmp_path: Path) -> None:
    catalog, od = _with_commitments(tmp_path)
    result = recommend(catalog, Workload(workload="large_scale_training", purchase="reserved"))
    recs = result.recommendations
    assert {r.purchase for r in recs} <= {"reserved_1y", "reserved_3y"}  # the shipped terms too
    [p5] = [r for r in recs if r.instance_type == "p5.48xlarge"]
    assert p5.hourly_usd == pytest.approx(round(od * 0.6, 4))
    anything = recommend(catalog, Workload(workload="large_scale_training", purchase="any"))
    assert {r.purchase for r in anything.recommendations} <= {"on_demand", "spot"}


def test_a_long_plan_says_which_purchase_option_buys_it_cheapest(tmp_path: Path) -> None:
    catalog, od = _with_commitments(tmp_path)
    w = Workload(
        workload="fine_tuning",
        params_b=8,
        tokens=2e10,
        region="us-east-1",
        limit=1000,
    )
    [rec] = [r for r in recommend(catalog, w).recommendations if r.instance_type == "p5.48xlarge"]
    assert rec.sizing is not None and rec.sizing.hours is not None
    hours = rec.sizing.hours
    # by hand: block days per AWS's steps, then the three totals
    days = max(1, -(-hours // 24))
    days = days if days <= 14 else -(-days // 7) * 7
    totals = {
        "on_demand": hours * od,
        "capacity_block": days * 24 * od * 0.7,
        "reserved_1y": max(hours, 8760) * od * 0.6,
    }
    best = min(totals, key=lambda k: totals[k])
    sentence = next(s for s in rec.reasons if "cheapest way to buy" in s)
    if best == "on_demand":
        assert sentence.startswith("priced on_demand because")
    else:
        assert sentence.startswith("on_demand is not the cheapest way")
        assert f"--purchase {best}" in sentence


def test_a_spot_plan_is_not_told_to_reserve_capacity() -> None:
    """128 GPUs at once: the on-demand plan says reserve the capacity; the spot plan does not
    (spot capacity cannot be reserved)."""
    catalog = load_catalog()
    for purchase, told in (("spot", 0), ("on_demand", 10)):
        w = Workload(workload="large_scale_training", gpu_count=128, purchase=purchase)
        recs = recommend(catalog, w).recommendations
        assert len(recs) == 10
        assert sum(any("reserve the capacity" in s for s in r.reasons) for r in recs) == told


def test_a_deployment_kept_up_all_year_is_told_what_a_term_saves() -> None:
    """2 nodes on demand at $10/h, a 1-year term at $6 and a 3-year term at $4 in its region
    (and $1 in another): a year is 2 x 8,760 h = 17,520 h, $175,200 on demand, $70,080 on the
    3-year term, 60% less; $0.50 per million tokens becomes $0.20."""
    on_demand = _price("on_demand", 10.0)
    prices = [
        on_demand,
        _price("reserved_1y", 6.0),
        _price("reserved_3y", 4.0),
        _price("reserved_3y", 1.0, region="elsewhere"),
    ]
    sentence = po.deployment_sentence(2, prices, on_demand, 0.5)
    assert sentence == (
        "kept up all year, this deployment costs $70,080 a year on reserved_3y ($4.00/h, owed "
        "every hour of the term) against $175,200 on_demand: 60% less, $0.200 per million "
        "tokens (--purchase reserved_3y)"
    )
    assert po.deployment_sentence(2, prices, prices[1]) is None  # on a term already
    assert po.deployment_sentence(2, [on_demand], on_demand) is None
    spot = _price("spot", 3.0)  # already cheaper by the hour than any term
    assert po.deployment_sentence(2, [*prices, spot], spot) is None


def test_a_shipped_serving_answer_on_demand_names_its_reserved_year() -> None:
    w = Workload(workload="high_throughput_inference", model="llama-3-8b", provider="aws")
    catalog = load_catalog()
    for rec in recommend(catalog, w).recommendations:
        prices = catalog.instance_types[rec.instance_type].prices
        terms = [p for p in prices if p.region == rec.region and p.purchase.value.startswith("res")]
        said = [s for s in rec.reasons if s.startswith("kept up all year")]
        assert len(said) == bool(terms), rec.instance_type
        if terms:
            year = min(p.hourly_usd for p in terms) * 8760 * rec.nodes
            assert f"${year:,.0f} a year" in said[0]


def _llama_8b_fine_tune(instance_type: str, purchase: str) -> EstimateRequest:
    """2e9 tokens of a Llama 3 8B full fine-tune on one `instance_type` in us-east-1."""
    return EstimateRequest(
        workload="fine_tuning",
        model="llama-3-8b",
        tokens=2e9,
        instance_type=instance_type,
        purchase=purchase,
        region="us-east-1",
    )


def test_estimate_says_how_its_run_or_deployment_is_best_bought() -> None:
    """The sentences `recommend` gives, on `estimate`'s own offering: a day of fine-tuning on a
    1-year p4d term owes the year ($13.921094 x 8,760 h = $121,949), on demand is cheaper; a
    served g6e.xlarge kept up all year costs its 1-year rate x 8,760 h."""

    catalog = load_catalog()
    run = estimate(catalog, _llama_8b_fine_tune("p4d.24xlarge", "reserved_1y"))
    [said] = [n for n in run.notes if "cheapest way to buy" in n]
    assert said.startswith("reserved_1y is not the cheapest way to buy")
    assert "--purchase on_demand" in said and "whole 1-year term: $121,949" in said
    served = estimate(
        catalog,
        EstimateRequest(
            workload="high_throughput_inference",
            model="llama-3-8b",
            instance_type="g6e.xlarge",
            region="us-east-1",
        ),
    )
    [term] = [
        p
        for p in catalog.instance_types["g6e.xlarge"].prices
        if p.region == "us-east-1" and p.purchase is Purchase.reserved_1y
    ]
    [year] = [n for n in served.notes if n.startswith("kept up all year")]
    assert f"${term.hourly_usd * 8760:,.0f} a year on reserved_1y" in year


def test_a_capacity_block_plan_costs_its_whole_block() -> None:
    """A block is bought for the run: 1.5T tokens of a 70B model on 128 H100s takes 128.7 days,
    a block of 133 days (weeks past 14) at $41.528/h per node on 16 nodes; the cost to
    completion, the ranked figure and the sentence all count the block, and the plan is not told
    to reserve capacity it has reserved."""
    catalog = load_catalog()
    w = Workload(
        workload="large_scale_training",
        model="llama-3.1-70b",
        tokens=1.5e12,
        gpu_count=128,
        provider="aws",
        purchase="capacity_block",
    )
    [rec] = [r for r in recommend(catalog, w).recommendations if r.instance_type == "p5.48xlarge"]
    assert rec.sizing is not None and rec.sizing.hours is not None
    days = po.block_days(rec.sizing.hours)
    assert days is not None and days % 7 == 0 and days * 24 >= rec.sizing.hours
    block = days * 24 * 41.528 * rec.nodes
    assert rec.sizing.cost_to_completion_usd == pytest.approx(block)
    assert rec.ranked_value == pytest.approx(block)
    assert any(f"(the block bills {days} days)" in s for s in rec.reasons)
    assert not any("reserve the capacity" in s for s in rec.reasons)
    on_demand = recommend(catalog, Workload(**{**w.model_dump(), "purchase": "on_demand"}))
    [od] = [r for r in on_demand.recommendations if r.instance_type == "p5.48xlarge"]
    assert od.sizing is not None and od.sizing.hours is not None
    assert od.sizing.cost_to_completion_usd == pytest.approx(od.sizing.hours * od.hourly_usd)


def test_estimate_on_a_capacity_block_costs_the_day_it_bills() -> None:
    """Seven hours of fine-tuning on one p5.48xlarge bought as a block: a 1-day block, 24 h x
    $41.528 = $996.672, where the run's hours would cost $290.70 at the block's rate."""

    result = estimate(load_catalog(), _llama_8b_fine_tune("p5.48xlarge", "capacity_block"))
    assert result.hours is not None and result.hours < 24
    assert result.cost_usd == pytest.approx(24 * 41.528)


def test_the_api_prices_a_capacity_block_plan_as_the_cli_does(tmp_path: Path) -> None:
    """POST /v1/recommendations and /v1/estimates answer a Capacity Block plan with the block's
    cost, as the library (and so the CLI) does: the same request field, one engine."""
    from fastapi.testclient import TestClient

    from advisor.api import create_app
    from advisor.api.settings import Settings

    body = {
        "workload": "large_scale_training",
        "model": "llama-3.1-70b",
        "tokens": 1.5e12,
        "gpu_count": 128,
        "provider": "aws",
        "purchase": "capacity_block",
    }
    settings = Settings(database_url=f"sqlite:///{tmp_path}/api.db")
    with TestClient(create_app(settings)) as client:
        answer = client.post("/v1/recommendations", json=body)
        assert answer.status_code == 200, answer.text
        est_body = {**{k: v for k, v in body.items() if k != "provider"}}
        est_body |= {"instance_type": "p5.48xlarge", "region": "us-east-1"}
        est = client.post("/v1/estimates", json=est_body)
        assert est.status_code == 200, est.text
    [rec] = [r for r in answer.json()["recommendations"] if r["instance_type"] == "p5.48xlarge"]
    [lib] = [
        r
        for r in recommend(load_catalog(), Workload(**body)).recommendations
        if r.instance_type == "p5.48xlarge"
    ]
    assert lib.sizing is not None
    assert rec["sizing"]["cost_to_completion_usd"] == pytest.approx(
        lib.sizing.cost_to_completion_usd
    )
    direct = estimate(load_catalog(), EstimateRequest(**est_body))
    assert est.json()["cost_usd"] == pytest.approx(direct.cost_usd)
    assert direct.hours is not None and direct.cost_usd is not None
    assert direct.cost_usd > direct.hours * 41.528 * direct.hardware.nodes  # the whole block
