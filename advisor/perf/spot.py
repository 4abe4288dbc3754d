"""Spot plans: what interruptions add to a synchronous job's time. Pure arithmetic.

A synchronous job on N nodes stops whenever any one of them is reclaimed, so with a rate of
lambda interruptions per node-hour it is interrupted at N x lambda per hour of wall time. Each
interruption loses, on average, half a checkpoint interval of work (interruptions fall uniformly
between checkpoints) plus the time to restart (re-acquire the node, reload the checkpoint).
Interruptions also strike the redone work and the restarts, so over a wall time T:

    T = H + N x lambda x T x (C/2 + R)   =>   T = H / (1 - N x lambda x (C/2 + R))

(the renewal argument; the first-order figure N x lambda x H x (C/2 + R) is what it reduces to
for small N x lambda x (C/2 + R)). At N x lambda x (C/2 + R) >= 1 the job never finishes: every
hour loses more than an hour. Checkpoint writing time is not counted.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

from advisor.catalog.models import SpotInterruption, SpotPolicy

if TYPE_CHECKING:  # made by spot_plan alone: the engine imports this module for every request
    from advisor.perf.sizing import Figure


# A NamedTuple, not a frozen dataclass: the engine imports it for every request, and a dataclass
# takes several times as long to make (its methods are compiled when the class is).
class SpotPlan(NamedTuple):
    hours: float  # the plan's time without interruptions (H)
    nodes: int
    rate_per_node_h: float
    checkpoint_h: float
    restart_h: float
    interruptions: float  # expected count over the whole run (inf: never finishes)
    added_hours: float  # lost work + restarts (inf: never finishes)
    figures: tuple[Figure, ...]
    # the same run at the lower edge of the provider's band, where it states one: the range
    low: SpotPlan | None = None

    @property
    def total_hours(self) -> float:
        return self.hours + self.added_hours

    @property
    def chance_of_any(self) -> float:
        """Chance of at least one interruption over the run: interruptions arrive as a Poisson
        process, so P(none) = exp(-expected count)."""
        return 1.0 - math.exp(-self.interruptions) if math.isfinite(self.interruptions) else 1.0

    @property
    def added_fraction(self) -> float:
        return self.added_hours / self.hours if self.hours else 0.0

    @property
    def finishes(self) -> bool:
        return math.isfinite(self.added_hours)


def rate_per_node_h(fraction_interrupted: float, period_h: float) -> float:
    """The Poisson rate at which a fraction of instances is interrupted within a period:
    1 - exp(-lambda x period) = fraction."""
    return -math.log1p(-fraction_interrupted) / period_h


def spot_plan(
    hours: float, nodes: int, rate_per_node_h: float, checkpoint_h: float, restart_h: float
) -> SpotPlan:
    """Expected interruptions and added hours of a synchronous `hours`-long job on `nodes` spot
    nodes (see the module docstring)."""
    from advisor.perf.sizing import Figure

    job_rate = nodes * rate_per_node_h
    loss_h = checkpoint_h / 2 + restart_h
    load = job_rate * loss_h  # hours lost per hour of wall time
    total = hours / (1 - load) if load < 1 else math.inf
    interruptions = job_rate * total
    added = total - hours
    figures = (
        Figure(
            "job_interruption_rate",
            job_rate,
            "1/h",
            f"{nodes} nodes x {rate_per_node_h:.3g}/node-h (synchronous: any node stops all)",
        ),
        Figure(
            "loss_per_interruption_h",
            loss_h,
            "h",
            f"checkpoint interval {checkpoint_h:g} h / 2 + restart {restart_h:g} h",
        ),
        Figure(
            "spot_wall_hours",
            total,
            "h",
            f"{hours:,.1f} h / (1 - {job_rate:.3g}/h x {loss_h:g} h)"
            + ("" if load < 1 else ": never finishes (loses more than it runs)"),
        ),
        Figure(
            "expected_interruptions",
            interruptions,
            "",
            f"{job_rate:.3g}/h x {total:,.1f} h",
        ),
        Figure("spot_added_hours", added, "h", f"{total:,.1f} h - {hours:,.1f} h"),
        Figure(
            "chance_of_any_interruption",
            1.0 - math.exp(-interruptions) if math.isfinite(interruptions) else 1.0,
            "",
            f"1 - exp(-{interruptions:.3g}) (Poisson arrivals)",
        ),
    )
    return SpotPlan(
        hours, nodes, rate_per_node_h, checkpoint_h, restart_h, interruptions, added, figures
    )


def too_risky(plan: SpotPlan, policy: SpotPolicy) -> bool:
    """A plan that never finishes, or a synchronous multi-node plan beyond either bound."""
    if not plan.finishes:
        return True
    beyond = (
        plan.interruptions > policy.max_interruptions
        or plan.added_fraction > policy.max_added_fraction
    )
    return plan.nodes > 1 and beyond


def training_spot_plan(
    hours: float,
    nodes: int,
    source: SpotInterruption,
    policy: SpotPolicy,
    checkpoint_h: float | None = None,
) -> SpotPlan:
    """The spot plan of a training run of `hours` on `nodes` nodes whose spot capacity is
    reclaimed as `source` says, under the workload's `policy` (checkpoint interval as asked,
    else the policy's): what `recommend` and `estimate` both state."""
    rate = rate_per_node_h(source.fraction_interrupted, source.period_h)
    checkpoint = checkpoint_h or policy.checkpoint_interval_h
    plan = spot_plan(hours, nodes, rate, checkpoint, policy.restart_h)
    if source.band_low_fraction is None:
        return plan
    low_rate = rate_per_node_h(source.band_low_fraction, source.period_h)
    return plan._replace(low=spot_plan(hours, nodes, low_rate, checkpoint, policy.restart_h))
