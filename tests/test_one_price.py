"""The one price of an offering under a purchase option, and the one per-GPU-hour price
(advisor.catalog.queries), and the callers that read them: `estimate`, the review's current
price and the price sanity checks. Expected figures worked by hand from the prices below."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from advisor.catalog.models import Price, Purchase
from advisor.catalog.queries import (
    offering_price,
    per_gpu_hour_usd,
    price_matches,
    price_usable,
    purchase_matches,
)
from advisor.review.costs import instance_offer
from tests.factories import load_mini

OD, SPOT = Purchase.on_demand, Purchase.spot
TODAY = dt.date(2026, 6, 1)


def _p(region: str, usd: float, purchase: Purchase = OD, flag: str | None = None) -> Price:
    return Price(
        region=region, purchase=purchase, hourly_usd=usd, as_of=TODAY, source="t", flag=flag
    )


PRICES = [
    _p("us-east-1", 12.0),
    _p("us-west-2", 10.0),
    _p("eu-west-1", 11.0),
    _p("us-east-1", 4.0, SPOT),
    _p("eu-west-1", 3.0, SPOT, flag="below the spot bound"),
    _p("ap-south-1", 9.0, flag="half the median"),
]


@pytest.mark.parametrize(
    ("purchase", "region", "include_flagged", "expected"),
    [
        # on demand anywhere: $9 (ap-south-1) is flagged, so $10 in us-west-2
        (OD, None, False, ("us-west-2", 10.0)),
        # ... unless flagged prices are asked for
        (OD, None, True, ("ap-south-1", 9.0)),
        # any purchase: the $3 spot price is flagged, $4 spot in us-east-1 is the sound cheapest
        (None, None, False, ("us-east-1", 4.0)),
        # on demand in one region; a region spec of two; a prefix
        (OD, "eu-west-1", False, ("eu-west-1", 11.0)),
        (OD, "us-east-1,eu-west-1", False, ("eu-west-1", 11.0)),
        (OD, "us-*", False, ("us-west-2", 10.0)),
        # spot in eu-west-1: only a flagged price matches, so it is the price (no other)
        (SPOT, "eu-west-1", False, ("eu-west-1", 3.0)),
        # no spot price in us-west-2: none
        (SPOT, "us-west-2", False, None),
    ],
)
def test_offering_price_under_a_purchase_option(
    purchase: Purchase | None,
    region: str | None,
    include_flagged: bool,
    expected: tuple[str, float] | None,
) -> None:
    got = offering_price(PRICES, purchase, region, include_flagged)
    assert (None if got is None else (got.region, got.hourly_usd)) == expected


def test_equal_prices_are_broken_by_the_region_name() -> None:
    got = offering_price([_p("b", 5.0), _p("a", 5.0), _p("c", 5.0)], OD)
    assert got is not None and got.region == "a"


def test_the_filters_the_engine_shares() -> None:
    assert purchase_matches(None, SPOT) and not purchase_matches(OD, SPOT)
    assert price_matches(PRICES[0], OD, "us-*") and not price_matches(PRICES[0], SPOT, None)
    assert price_usable(PRICES[0], False) and not price_usable(PRICES[4], False)
    assert price_usable(PRICES[4], True)


def test_per_gpu_hour_price() -> None:
    # p5.48xlarge's $55.04/h over 8 GPUs: $6.88 per GPU-hour
    assert per_gpu_hour_usd(55.04, 8) == pytest.approx(6.88)
    assert per_gpu_hour_usd(3.0, 1) == 3.0
    with pytest.raises(ValueError, match="needs GPUs"):
        per_gpu_hour_usd(1.0, 0)


def test_the_review_prices_an_instance_by_the_one_rule(tmp_path: Path) -> None:
    """The review's current price: the type's sound on-demand price in the review's region,
    else its cheapest anywhere; per GPU, the instance price over its GPUs. big8 (tests/factories):
    $98/h in us-east-1, $110/h in eu-west-1, $40/h spot."""
    catalog = load_mini(tmp_path)
    here = instance_offer(catalog, "big8", "eu-west-1")
    anywhere = instance_offer(catalog, "big8", None)
    elsewhere = instance_offer(catalog, "big8", "ap-south-1")  # none there: cheapest anywhere
    assert here is not None and (here.region, here.per_gpu_usd) == ("eu-west-1", 13.75)
    assert anywhere is not None and (anywhere.region, anywhere.per_gpu_usd) == ("us-east-1", 12.25)
    assert elsewhere == anywhere
    assert instance_offer(catalog, "cpu4", None) is None  # CPU-only: no per-GPU price
    assert instance_offer(catalog, "nothing", None) is None
