"""A training run's total budget (`budget_usd`): options whose cost to completion is above it are
ruled out, each with the cost of its cheapest offering; those within it say the tokens the budget
buys at their cost per token.

The cost to completion is an offering's, not an instance type's (its hourly price, the hours a
spot plan adds, the days a Capacity Block bills), so the check is made on every feasible
offering: advisor/engine/evaluation.py evaluates a request with a budget offering by offering and
with no limit, and hands the hits here before ranking; an instance type none of whose offerings
is within the budget is rejected. Nothing here runs for a request without one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from advisor.engine.constraints import RELAXATIONS
from advisor.engine.rank import Hit, completion_usd
from advisor.engine.result import Alternative, Rejection

CODE = "BUDGET_EXCEEDED"
FIELD = "budget_usd"


def _completion_usd(h: Hit) -> float | None:
    """The offering's cost to complete the run (rank.py completion_usd); None for an option
    without a training time or a price."""
    fit = h.placement.fit
    if h.price is None or fit is None:
        return None
    return completion_usd(fit, h.hourly_usd, h.spot, h.price.purchase)


def split(
    hits: Sequence[Hit], budget_usd: float
) -> tuple[list[Hit], list[Rejection], Alternative | None]:
    """(the offerings within the budget, and the hits it does not apply to; one rejection per
    option none of whose offerings is within it; the alternative that raises the budget to the
    cheapest option's cost, when no offering is within it)."""
    within: list[Hit] = []
    options: set[str] = set()
    cheapest: dict[str, tuple[float, Hit]] = {}
    for h in hits:
        cost = _completion_usd(h)
        if h.cloud is None or cost is None:
            within.append(h)  # nothing to complete (an edge device): the budget does not apply
            continue
        option = h.cloud.instance.id
        if cost <= budget_usd:
            within.append(h)
            options.add(option)
        elif option not in cheapest or (cost, h) < cheapest[option]:
            cheapest[option] = (cost, h)
    over = sorted((option, found) for option, found in cheapest.items() if option not in options)
    rejections = [
        Rejection(option, (CODE,), (_sentence(cost, h, budget_usd),)) for option, (cost, h) in over
    ]
    alternative = None
    if not options and over:
        option, (cost, h) = min(over, key=lambda kv: (kv[1][0], kv[0]))
        alternative = _raise_to(cost, h, option)
    return within, rejections, alternative


def best_each(hits: Sequence[Hit]) -> list[Hit]:
    """Each option's best hit (the engine's order: value, hourly cost, offering), as an answer
    that does not list each offering ranks them; hits of no cloud option kept as they are."""
    best: dict[str, Hit] = {}
    other = []
    for h in hits:
        if h.cloud is None:
            other.append(h)
            continue
        option = h.cloud.instance.id
        if option not in best or h < best[option]:
            best[option] = h
    return [*best.values(), *other]


def _sentence(cost: float, h: Hit, budget_usd: float) -> str:
    assert h.price is not None
    return (
        f"costs ${cost:,.0f} to completion at its cheapest (${h.hourly_usd:,.2f}/h in "
        f"{h.price.region}, {h.price.purchase}), above the ${budget_usd:,.0f} budget"
    )


def _raise_to(cost: float, h: Hit, option: str) -> Alternative:
    assert h.price is not None
    to = math.ceil(cost)
    label = f"{option} ({h.price.region}, {h.price.purchase}, ${h.hourly_usd:,.2f}/h)"
    return Alternative(
        constraint=FIELD,
        relax_to=to,
        candidate=option,
        sentence=RELAXATIONS[FIELD].sentence(to, label),
    )
