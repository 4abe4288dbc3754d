"""What an edge device costs per year of operation: its purchase spread over a stated lifetime plus
the energy it draws at a stated price, running around the clock.

Both assumptions are constants here with their basis; the purchase price is catalog data
(Accelerator.purchase: list price, source, date). A device without a purchase price is costed on
energy alone, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.catalog.models import Accelerator

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

HOURS_PER_YEAR = 8760.0  # 365 days x 24 h: the device runs around the clock (stated assumption)


@dataclass(frozen=True, slots=True)
class EdgeYearCost:
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
