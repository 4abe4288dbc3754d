"""How an option is valued under a request's objective: one number, lower is better for
every objective, so one sort serves them all. Pure arithmetic over the option's price, its peak
and its fit; the engine's candidates cache a Valuation per option group, rank.py ranks by it."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from advisor.perf.cost import cost_per_million_tokens_usd, cost_to_completion_usd

if TYPE_CHECKING:  # annotations only: an unsized request does not load the training model
    from advisor.planning.fit import Fit

OBJECTIVE_WORDS = {
    "cheapest": "lowest hourly price",
    "performance": "highest peak throughput",
    "price_performance": "most throughput per dollar",
    "cost_to_completion": "lowest cost to completion",
    "time": "shortest time to completion",
    "cost_per_million_tokens": "lowest cost per million tokens",
}


COST_LIKE = {"cheapest", "cost_to_completion", "time", "cost_per_million_tokens"}


def objective_value(
    objective: str,
    cost: float,
    perf: float,
    factor: float,
    fit: Fit | None = None,
    hours: float | None = None,
) -> float:
    """Lower is better for every objective, so one sort serves them all. `hours` replaces the
    fit's training time where interruptions add to it (a spot plan's total)."""
    if objective == "cheapest":
        return cost * factor
    if objective in ("cost_to_completion", "time"):
        if fit is None or fit.hours is None:
            return cost * factor  # nothing to complete: fall back to the hourly price
        done = fit.hours if hours is None else hours
        if objective == "time":
            return done * factor
        return (cost_to_completion_usd(cost, done) or 0.0) * factor
    if objective == "cost_per_million_tokens":
        per_million = cost_per_million_tokens_usd(cost, fit.served_tokens_per_s if fit else None)
        return (cost if per_million is None else per_million) * factor
    if objective == "performance":
        return -perf / factor
    return -(perf / cost) / factor if cost else 0.0


def ranked_figure(objective: str, value: float) -> float:
    """The figure an option is ranked by, in the objective's own unit and sign: a Hit's value
    is negated for the objectives where higher is better, so one ascending sort serves all."""
    return value if objective in COST_LIKE else -value


def objective_affine(
    objective: str, perf: float, factor: float, fit: Fit | None, hours: float | None = None
) -> tuple[float, float] | None:
    """(a, b) with objective_value(cost) = a x cost + b for one option's on-demand offerings,
    worked out once per option for the engine's hot loop; None where the value is not affine in
    the cost (price_performance). tests/test_engine.py holds it to objective_value."""
    if objective == "price_performance":
        return None
    at_zero = objective_value(objective, 0.0, perf, factor, fit, hours)
    return objective_value(objective, 1.0, perf, factor, fit, hours) - at_zero, at_zero


def rises_with_cost(objective: str, perf: float, factor: float) -> bool:
    """Whether an option's value (objective_value, no spot plan) never falls as its price
    rises, so that its cheapest offering is its best: the cost-like objectives with a positive
    penalty factor, performance (the price does not enter), and price_performance,
    -(perf / cost) / factor, for a non-negative peak."""
    return factor > 0 and (objective != "price_performance" or perf >= 0)


class Valuation(NamedTuple):
    """How one option's offerings are valued: the objective, the dense peak rented, the
    soft-preference penalty, (a, b) with value = a x cost + b where that holds with a >= 0 (None
    otherwise), and whether the value never falls as the price rises (then an option's
    cheapest offering is its best and offerings can be valued cheapest first)."""

    objective: str
    perf: float
    factor: float
    affine: tuple[float, float] | None
    rises: bool

    def value(self, cost: float, fit: Fit | None) -> float:
        """An offering's value without a spot plan (objective_value)."""
        if self.affine is not None:
            return cost * self.affine[0] + self.affine[1]
        return objective_value(self.objective, cost, self.perf, self.factor, fit)
