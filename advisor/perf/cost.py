"""Every money figure, one function each: the hourly price of an option (one node's price x its
nodes), the cost to completion (a spot plan's added hours included when it finishes), the cost
per million served tokens, per month, and what an edge device costs per year of operation (its
purchase spread over a stated lifetime plus the energy it draws at a stated price, around the
clock). Ranking, `estimate`, the alternatives and the review all price through here.

The edge assumptions are constants here with their basis; the purchase price is catalog data
(Accelerator.purchase: list price, source, date). A device without a purchase price is costed on
energy alone, and says so.
"""

from __future__ import annotations

from typing import NamedTuple

from advisor.catalog.models import Accelerator
from advisor.perf.spot import SpotPlan
from advisor.units import HOURS_PER_MONTH, HOURS_PER_YEAR, MILLION, SECONDS_PER_HOUR


def option_hourly_usd(node_hourly_usd: float, nodes: int) -> float:
    """What an option costs per hour: every rented node at one node's price."""
    return node_hourly_usd * nodes


def completion_hours(hours: float | None, spot: SpotPlan | None) -> float | None:
    """Wall hours to finish: on spot, with what interruptions add, when the plan finishes at
    all (one that never does is refused elsewhere and keeps its uninterrupted hours here)."""
    if spot is not None and spot.finishes:
        return spot.total_hours
    return hours


def cost_to_completion_usd(hourly_usd: float | None, hours: float | None) -> float | None:
    return None if hourly_usd is None or hours is None else hourly_usd * hours


def tokens_within_budget(tokens: float, budget_usd: float, cost_usd: float) -> float:
    """The tokens `budget_usd` buys at a run's cost per token (`tokens` for `cost_usd`)."""
    return tokens * budget_usd / cost_usd


def cost_per_million_tokens_usd(
    hourly_usd: float | None, tokens_per_s: float | None
) -> float | None:
    """Dollars per million tokens at `tokens_per_s` (what is paid for: the target, else the
    capacity); None without a price or a rate."""
    if hourly_usd is None or not tokens_per_s:
        return None
    return hourly_usd / (tokens_per_s * SECONDS_PER_HOUR) * MILLION


def per_month_usd(hourly_usd: float) -> float:
    return hourly_usd * HOURS_PER_MONTH


# ESTIMATED device lifetime over which the purchase is spread. Basis: the US tax depreciation
# class of computers and peripheral equipment, 5-year property under MACRS (IRS Publication 946,
# "How To Depreciate Property", table B-1 asset class 00.12, https://www.irs.gov/publications/p946).
# A device's useful life can differ; this is the stated convention, not a measured one.
LIFETIME_YEARS = 5.0

# ESTIMATED electricity price, USD per kWh. Basis: US average retail price to the commercial
# sector, about 12.7-13 cents/kWh in 2024 (U.S. Energy Information Administration, Electric Power
# Monthly, Table 5.6.A "Average Price of Electricity to Ultimate Customers by End-Use Sector",
# https://www.eia.gov/electricity/monthly/epm_table_grapher.php?t=epmt_5_6_a). Rounded to 0.13.
ENERGY_USD_PER_KWH = 0.13


# A NamedTuple, not a frozen dataclass: the engine imports it for every request, and a dataclass
# takes several times as long to make (its methods are compiled when the class is).
class EdgeYearCost(NamedTuple):
    purchase_usd_per_year: float | None  # None: the catalog has no purchase price for it
    energy_usd_per_year: float
    total_usd_per_year: float

    def sentence(self, power_w: float) -> str:
        energy = (
            f"${self.energy_usd_per_year:,.2f} energy ({power_w:g} W around the clock at "
            f"${ENERGY_USD_PER_KWH:g}/kWh, estimated)"
        )
        if self.purchase_usd_per_year is None:
            return (
                f"${self.total_usd_per_year:,.2f} per year: {energy} only; no purchase price in "
                "the catalog, so this understates its cost"
            )
        return (
            f"${self.total_usd_per_year:,.2f} per year: "
            f"${self.purchase_usd_per_year:,.2f} purchase (list price over "
            f"{LIFETIME_YEARS:g} years, estimated lifetime) + {energy}"
        )


def edge_cost_per_year(device: Accelerator, power_w: float) -> EdgeYearCost:
    """Purchase amortised over LIFETIME_YEARS plus energy at `power_w` for a year, in USD."""
    energy = power_w / 1000.0 * HOURS_PER_YEAR * ENERGY_USD_PER_KWH
    if device.purchase is None:
        return EdgeYearCost(None, energy, energy)
    purchase = device.purchase.list_price_usd / LIFETIME_YEARS
    return EdgeYearCost(purchase, energy, purchase + energy)
