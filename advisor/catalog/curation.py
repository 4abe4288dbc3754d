"""The catalog sections read at load and not kept in the Catalog: hand-kept facts merged into
the instance types (catalog/node_facts.yaml) and the price sanity checks' thresholds
(catalog/price_sanity.yaml, advisor/catalog/cross_checks.py). A command answered from the
catalog cache never reads them, so it never makes their classes (start-up,
benchmarks/bench_startup.py); advisor/catalog/loading.py imports this module where it reads
the YAML.
"""

# No `from __future__ import annotations`, as in advisor/catalog/models.py.

from typing import Annotated, Self

from pydantic import Field, model_validator

from advisor.catalog.models import Id, NcclBusBandwidth, Pos, Strict


class NodeFact(Strict):
    """Hand-kept facts about one instance type (catalog/node_facts.yaml), merged into it at load
    so that regenerating the instance files (catalog import) does not drop them."""

    id: Id  # the instance type id
    expected_nccl_busbw: NcclBusBandwidth | None = None
    notes: str | None = None


class SanityBound(Strict):
    """One price sanity threshold with the reasoning behind it."""

    value: Pos
    reasoning: Annotated[str, Field(min_length=1)]


class PeerCount(Strict):
    value: Annotated[int, Field(ge=1)]
    reasoning: Annotated[str, Field(min_length=1)]


class PriceSanity(Strict):
    """Thresholds of the price sanity checks (catalog/price_sanity.yaml); ratios are price over
    the median of its peers."""

    id: Id
    # on-demand price vs the median of the same instance type's on-demand prices in other regions
    region_low_ratio: SanityBound
    region_high_ratio: SanityBound
    # on-demand price per GPU-hour vs the median per GPU-hour of other instance types with the
    # same accelerator (any provider, any region)
    gpu_hour_low_ratio: SanityBound
    gpu_hour_high_ratio: SanityBound
    gpu_hour_min_peers: PeerCount
    # spot price over the on-demand price of the same type in the same region
    spot_low_ratio: SanityBound
    spot_high_ratio: SanityBound
    source: Annotated[str, Field(min_length=1)]

    @model_validator(mode="after")
    def _bounds_bracket_one(self) -> Self:
        for low, high in (
            (self.region_low_ratio, self.region_high_ratio),
            (self.gpu_hour_low_ratio, self.gpu_hour_high_ratio),
            (self.spot_low_ratio, self.spot_high_ratio),
        ):
            if not low.value < high.value:
                raise ValueError(f"a low ratio ({low.value:g}) must be below its high one")
        if not self.region_low_ratio.value < 1 < self.region_high_ratio.value:
            raise ValueError("region ratios must bracket 1")
        if not self.gpu_hour_low_ratio.value < 1 < self.gpu_hour_high_ratio.value:
            raise ValueError("GPU-hour ratios must bracket 1")
        if self.spot_high_ratio.value > 1:
            raise ValueError("spot_high_ratio above 1 would accept spot above on-demand")
        return self
