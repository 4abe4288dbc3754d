"""Purchase options as they are sold, and which one a plan of a given length is priced on.

A price row says how it is bought (`Price.purchase`): on demand and spot by the hour with no
commitment; reserved for 1 or 3 years (AWS Reserved Instances / Savings Plans, GCP committed use
discounts, Azure reservations: the hourly rate is owed for every hour of the term, used or not);
AWS EC2 Capacity Blocks for ML (a block of instances reserved for a fixed window, paid up front).

Capacity Block durations (AWS EC2 User Guide, "Capacity Blocks for ML", read 2026-12-02,
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html): 1 to 14 days in
1-day steps, or a multiple of 7 days up to 182 days; up to 64 instances per block and 256 across
blocks; start up to 8 weeks ahead; not modifiable or cancellable.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from advisor.catalog.models import Price, Purchase

# What a request for "any" purchase option means: bought by the hour, no commitment.
PAY_AS_YOU_GO = frozenset({Purchase.on_demand, Purchase.spot})
TERMS = (Purchase.reserved_1y, Purchase.reserved_3y)  # the reservation terms, shortest first
RESERVED = frozenset(TERMS)
TERM_HOURS = {Purchase.reserved_1y: 365 * 24.0, Purchase.reserved_3y: 3 * 365 * 24.0}
YEAR_HOURS = TERM_HOURS[Purchase.reserved_1y]
BLOCK_DAILY_MAX_DAYS = 14
BLOCK_MAX_DAYS = 182
BLOCK_WEEK_DAYS = 7
BLOCK_MAX_INSTANCES = 64  # per Capacity Block
BLOCK_MAX_INSTANCES_TOTAL = 256  # across Capacity Blocks of one account


def matches(wanted: Purchase | None, offered: Purchase) -> bool:
    """Whether an offering bought as `offered` answers a request for `wanted` (None = any: on
    demand or spot; `reserved` = either term)."""
    if wanted is None:
        return offered in PAY_AS_YOU_GO
    if wanted is Purchase.reserved:
        return offered in RESERVED
    return offered is wanted


def block_days(hours: float) -> int | None:
    """The shortest Capacity Block that covers `hours`, in days; None beyond 182 days."""
    days = max(1, math.ceil(hours / 24 - 1e-9))
    if days <= BLOCK_DAILY_MAX_DAYS:
        return days
    weeks = math.ceil(days / BLOCK_WEEK_DAYS) * BLOCK_WEEK_DAYS
    return weeks if weeks <= BLOCK_MAX_DAYS else None


def charged_hours(purchase: Purchase, hours: float) -> float:
    """The hours a run's cost to completion counts at its price's rate: a Capacity Block is
    bought for the run and bills its whole block (a run past 182 days, which no block buys, its
    own hours); any other price, the hours the run uses (a reservation is a standing commitment
    whose rate the run draws on; run_sentence says what buying one for the run alone owes)."""
    if purchase is Purchase.capacity_block:
        return billed_hours(purchase, hours) or hours
    return hours


def billed_hours(purchase: Purchase, hours: float) -> float | None:
    """Hours paid for a run of `hours` bought as `purchase`; None when it cannot be bought so
    (a Capacity Block longer than 182 days)."""
    if purchase in TERM_HOURS:
        return max(hours, TERM_HOURS[purchase])
    if purchase is Purchase.capacity_block:
        days = block_days(hours)
        return None if days is None else days * 24.0
    return hours


# A NamedTuple, not a frozen dataclass: the engine imports it for every request, and a dataclass
# takes several times as long to make (its methods are compiled when the class is).
class PricedOption(NamedTuple):
    price: Price
    billed_h: float
    cost_usd: float  # per instance, over the run


class PurchaseChoice(NamedTuple):  # a NamedTuple as PricedOption is
    chosen: PricedOption
    others: tuple[PricedOption, ...]  # the other options for the same offering, cheapest first
    sentence: str


def choose(
    hours: float, nodes: int, prices: Iterable[Price], priced: Purchase | None = None
) -> PurchaseChoice | None:
    """The cheapest way to buy `nodes` instances for a run of `hours` among one offering's
    prices (one region; spot left out: it is a different plan, not a way to pay for this one).
    `priced`: the option the plan is ranked on, which the sentence weighs against the cheapest.
    None when no price can buy it."""
    options = []
    for price in prices:
        if price.purchase is Purchase.spot:
            continue
        billed = billed_hours(price.purchase, hours)
        if billed is None:
            continue
        options.append(PricedOption(price, billed, billed * price.hourly_usd))
    if not options:
        return None
    options.sort(key=lambda o: (o.cost_usd, o.price.purchase.value))
    best, *rest = options
    run = f"{hours / 24:,.1f} days on {nodes} instance(s)"
    ranked = next((o for o in options if o.price.purchase is priced), None)
    if ranked is not None and ranked is not best:
        sentence = (
            f"{priced} is not the cheapest way to buy {run}: {_words(best, nodes)} "
            f"(--purchase {best.price.purchase.value}), against {_words(ranked, nodes)}"
        )
    else:
        sentence = _sentence(run, nodes, best, rest)
    return PurchaseChoice(best, tuple(rest), sentence)


def _words(option: PricedOption, nodes: int) -> str:
    p = option.price
    total = option.cost_usd * nodes
    if p.purchase in TERM_HOURS:
        years = round(TERM_HOURS[p.purchase] / YEAR_HOURS)
        return (
            f"{p.purchase.value} ${p.hourly_usd:,.2f}/h owed for the whole {years}-year term: "
            f"${total:,.0f}"
        )
    if p.purchase is Purchase.capacity_block:
        days = option.billed_h / 24
        return f"capacity block of {days:g} days at ${p.hourly_usd:,.2f}/h: ${total:,.0f}"
    return f"{p.purchase.value} ${p.hourly_usd:,.2f}/h for {option.billed_h:,.0f} h: ${total:,.0f}"


def _sentence(run: str, nodes: int, best: PricedOption, rest: list[PricedOption]) -> str:
    if not rest:
        return (
            f"priced {best.price.purchase.value}: the only price the catalog holds for this "
            f"offering ({run}); {_not_priced(best.billed_h, nodes)}"
        )
    against = "; ".join(_words(o, nodes) for o in rest)
    return (
        f"priced {best.price.purchase.value} because it is the cheapest way to buy {run}: "
        f"{_words(best, nodes)}, against {against}"
    )


def _not_priced(hours: float, nodes: int) -> str:
    """What the commitments the catalog holds no price for would bill for this run: a 1-year
    reservation its whole term, a Capacity Block its duration steps (or nothing past 182 days)."""
    term = TERM_HOURS[Purchase.reserved_1y]
    days = block_days(hours)
    if days is None:
        block = f"no Capacity Block covers it (at most {BLOCK_MAX_DAYS} days)"
    else:
        steps = "1-day steps" if days <= BLOCK_DAILY_MAX_DAYS else f"{BLOCK_WEEK_DAYS}-day steps"
        block = f"a Capacity Block would bill {days} days ({steps})"
        if nodes > BLOCK_MAX_INSTANCES:
            block += f" in {math.ceil(nodes / BLOCK_MAX_INSTANCES)} blocks of at most 64"
    return (
        f"a 1-year reservation would owe {term / hours:.1f}x the run's hours and {block}; "
        "add reserved_1y or capacity_block price rows to weigh them"
    )


def run_sentence(
    hours: float | None, nodes: int, prices: Iterable[Price], price: Price, *, alone: bool = True
) -> str | None:
    """For a run of known length ranked off spot: which purchase option of the offering (its
    region, unflagged prices) buys it cheapest, and why (choose); None with one way to buy it.
    `alone`: also when the ranked option is the only one but spot (what commitments would bill,
    a planner's question on a long plan); False: only where there is a choice."""
    if hours is None or price.purchase is Purchase.spot:
        return None
    same = [q for q in prices if q.region == price.region and q.flag is None]
    ways = {q.purchase for q in same} - (set() if alone else {Purchase.spot})
    if len(ways) < 2:  # one way to buy it: nothing to weigh
        return None
    choice = choose(hours, nodes, same, priced=price.purchase)
    return None if choice is None else choice.sentence


def cheapest_term(prices: Iterable[Price], region: str, below_usd: float) -> Price | None:
    """The cheapest unflagged reservation term among `prices` in `region` that costs less an
    hour than `below_usd` (what a use kept up all term pays now); None without one."""
    terms = [
        p
        for p in prices
        if p.purchase in RESERVED
        and p.region == region
        and p.flag is None
        and p.hourly_usd < below_usd
    ]
    return min(terms, key=lambda p: (p.hourly_usd, p.purchase.value), default=None)


def deployment_sentence(
    nodes: int, prices: Iterable[Price], price: Price, per_million_usd: float | None = None
) -> str | None:
    """For a deployment kept up around the clock (serving has no run length) priced by the
    hour: what a year of it costs on the cheapest reservation term the offering has in its
    region, against the price it was ranked on (and the cost per million tokens, which scales
    with the rate); None when it has no cheaper term or is ranked on one already. Every hour of
    a term is owed, so a deployment up all year pays the term's rate for each."""
    if price.purchase not in PAY_AS_YOU_GO:
        return None
    best = cheapest_term(prices, price.region, price.hourly_usd)
    if best is None:
        return None
    year = nodes * YEAR_HOURS
    ratio = best.hourly_usd / price.hourly_usd
    tokens = (
        "" if per_million_usd is None else f", ${per_million_usd * ratio:,.3f} per million tokens"
    )
    return (
        f"kept up all year, this deployment costs ${best.hourly_usd * year:,.0f} a year on "
        f"{best.purchase.value} (${best.hourly_usd:,.2f}/h, owed every hour of the term) against "
        f"${price.hourly_usd * year:,.0f} {price.purchase.value}: {1 - ratio:.0%} less{tokens} "
        f"(--purchase {best.purchase.value})"
    )
