"""The loaded catalog and pure queries over it.

Functions take the catalog as an argument (no global state), so the HTTP service, the CLI and the
tests can hold different catalogs side by side.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from advisor.catalog import purchase
from advisor.catalog.models import (
    Accelerator,
    FormFactor,
    InstanceType,
    ModelPreset,
    NodeSystem,
    Price,
    ProbeExpectation,
    Purchase,
    SpotInterruption,
    WorkloadProfile,
)
from advisor.did_you_mean import did_you_mean, unknown
from advisor.errors import InputError, NotFoundError


@dataclass(frozen=True)
class Catalog:
    accelerators: dict[str, Accelerator]
    instance_types: dict[str, InstanceType]
    workloads: dict[str, WorkloadProfile]
    probe_expectations: dict[str, ProbeExpectation] = field(default_factory=dict)
    models: dict[str, ModelPreset] = field(default_factory=dict)
    systems: dict[str, NodeSystem] = field(default_factory=dict)
    spot_interruptions: dict[str, SpotInterruption] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()  # directories it was read from, in order
    # Derived indexes, filled once in __post_init__ (the engine reads them on every query).
    regions: frozenset[str] = field(init=False)
    providers: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        regions = {p.region for it in self.instance_types.values() for p in it.prices}
        providers = {it.provider for it in self.instance_types.values()}
        object.__setattr__(self, "regions", frozenset(regions))
        object.__setattr__(self, "providers", frozenset(providers))

    @property
    def offering_count(self) -> int:
        return sum(len(it.prices) for it in self.instance_types.values())


def canonical_region(spec: str) -> str:
    """A region spec spelt one way: its items in their order, each once, without spaces
    ("us-east-1 , us-east-1" -> "us-east-1"). region_spec reads the same from it; requests keep
    it, so answers never echo a spelling larger than the list it names."""
    return ",".join(dict.fromkeys(item.strip() for item in spec.split(",") if item.strip()))


# Bounded: the specs come from requests, which may list any regions in any order.
@lru_cache(maxsize=1024)
def region_spec(spec: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """A request's region as (names, prefixes): "us-east-1" one name; "us-east-1,eu-west-1"
    several; "europe-*" every region whose name starts with "europe-" (spaces ignored)."""
    items = [item.strip() for item in spec.split(",") if item.strip()]
    names = frozenset(i for i in items if not i.endswith("*"))
    prefixes = tuple(i[:-1] for i in items if i.endswith("*"))
    return names, prefixes


def region_matches(spec: str | None, region: str) -> bool:
    """Whether an offering's region is one the request's region (region_spec) admits; None
    admits every region. The one test of a region filter: the engine's pools, its checks and
    their explanations all ask it."""
    if spec is None:
        return True
    names, prefixes = region_spec(spec)
    return region in names or region.startswith(prefixes)


def admitted_regions(spec: str | None, regions: frozenset[str]) -> frozenset[str]:
    """The regions among `regions` that a request's region admits (region_matches): the engine
    keys what it keeps per region filter by them, so that the lists that admit the same regions
    of an instance type share its offer pool (a list of regions it is not offered in, its empty
    one)."""
    if spec is None:
        return regions
    names, prefixes = region_spec(spec)
    found = regions & names
    return found | {r for r in regions if r.startswith(prefixes)} if prefixes else found


def check_region(spec: str, known: Iterable[str]) -> None:
    """InputError for a name the catalog lacks or a prefix that matches none, with a hint; an
    empty list is refused too."""
    names, prefixes = region_spec(spec)
    if not names and not prefixes:
        raise InputError(f"region {spec!r} names no region", field="region")
    known = known if isinstance(known, frozenset | set) else set(known)
    missing = names - known
    if not missing and not prefixes:  # every name known: no list to sort for a hint
        return
    regions = sorted(known)
    for name in sorted(missing):
        raise InputError(unknown("region", name, regions), field="region")
    for prefix in prefixes:
        if not any(r.startswith(prefix) for r in regions):
            hint = did_you_mean(prefix, regions)
            raise InputError(f"region {prefix + '*'!r} matches no region{hint}", field="region")


def get_accelerator(catalog: Catalog, accelerator_id: str) -> Accelerator:
    try:
        return catalog.accelerators[accelerator_id]
    except KeyError:
        hint = did_you_mean(accelerator_id, catalog.accelerators)
        raise NotFoundError(f"no accelerator {accelerator_id!r} in the catalog{hint}") from None


def get_instance_type(catalog: Catalog, instance_id: str) -> InstanceType:
    try:
        return catalog.instance_types[instance_id]
    except KeyError:
        hint = did_you_mean(instance_id, catalog.instance_types)
        raise NotFoundError(f"no instance type {instance_id!r} in the catalog{hint}") from None


def get_entry(catalog: Catalog, entry_id: str) -> Accelerator | InstanceType:
    """Look an id up among accelerators and instance types."""
    if entry_id in catalog.accelerators:
        return catalog.accelerators[entry_id]
    if entry_id in catalog.instance_types:
        return catalog.instance_types[entry_id]
    hint = did_you_mean(entry_id, [*catalog.accelerators, *catalog.instance_types])
    raise NotFoundError(f"no accelerator or instance type {entry_id!r} in the catalog{hint}")


def list_accelerators(
    catalog: Catalog, form_factor: FormFactor | None = None, vendor: str | None = None
) -> list[Accelerator]:
    found: Iterable[Accelerator] = catalog.accelerators.values()
    if form_factor is not None:
        found = (a for a in found if a.form_factor == form_factor)
    if vendor is not None:
        found = (a for a in found if a.vendor.lower() == vendor.lower())
    return sorted(found, key=lambda a: a.id)


def list_instance_types(
    catalog: Catalog,
    provider: str | None = None,
    region: str | None = None,
    accelerator: str | None = None,
    min_gpus: int | None = None,
    max_hourly_usd: float | None = None,
) -> list[InstanceType]:
    """Instance types matching every filter given; prices are narrowed to the region / budget."""
    result = []
    # the regions the filter admits, worked out once: a price's region is then one set lookup
    # (region_matches for each of 2,700 prices took 0.5 ms)
    admitted = None if region is None else admitted_regions(region, catalog.regions)
    for it in catalog.instance_types.values():
        if provider is not None and it.provider != provider:
            continue
        if accelerator is not None and it.accelerator != accelerator:
            continue
        if min_gpus is not None and it.gpu_count < min_gpus:
            continue
        prices = it.prices
        if admitted is not None:
            prices = tuple(p for p in prices if p.region in admitted)
        if max_hourly_usd is not None:
            prices = tuple(p for p in prices if p.hourly_usd <= max_hourly_usd)
        if (region is not None or max_hourly_usd is not None) and not prices:
            continue
        result.append(it if prices == it.prices else it.model_copy(update={"prices": prices}))
    return sorted(result, key=lambda i: (i.provider, i.id))


def purchase_matches(wanted: Purchase | None, offered: Purchase) -> bool:
    """Whether an offering's purchase option satisfies the request's (None = any: on demand or
    spot; reserved = either term): advisor/catalog/purchase.py's rule."""
    return purchase.matches(wanted, offered)


def price_matches(price: Price, purchase: Purchase | None, region: str | None) -> bool:
    """Whether a price is one of an offering under a purchase option (None: any) in a region
    (a region spec as region_matches reads it; None: any): the one filter `recommend`'s pools,
    `estimate` and the review select prices by."""
    return purchase_matches(purchase, price.purchase) and region_matches(region, price.region)


def price_usable(price: Price, include_flagged: bool) -> bool:
    """Whether a price may be quoted: one the sanity checks do not doubt (Price.flag is None),
    or any when flagged prices are asked for."""
    return include_flagged or price.flag is None


def cheapest_price(prices: Iterable[Price], include_flagged: bool = False) -> Price | None:
    """The cheapest of these prices (the region's name breaks ties); a price the sanity checks
    flag (Price.flag) only when asked for, or when every one of them is flagged."""
    given = list(prices)
    trusted = [p for p in given if price_usable(p, include_flagged)]
    return min(trusted or given, key=lambda p: (p.hourly_usd, p.region), default=None)


def offering_price(
    prices: Iterable[Price],
    purchase: Purchase | None = None,
    region: str | None = None,
    include_flagged: bool = False,
) -> Price | None:
    """An offering's price under a purchase option (None: any) in a region (None: any): the
    cheapest matching price (price_matches), a flagged one only when asked for or when every
    match is flagged (cheapest_price); None when none matches. `estimate`, the review's current
    and suggested prices, the GPU grid and `catalog show`'s "from" price all read it."""
    return cheapest_price(
        (p for p in prices if price_matches(p, purchase, region)), include_flagged
    )


def from_price(prices: Iterable[Price]) -> Price | None:
    """The price an instance type is quoted "from": its cheapest on-demand price, else its
    cheapest spot price; never the cheaper of the two mixed."""
    given = list(prices)
    return offering_price(given, Purchase.on_demand) or offering_price(given, Purchase.spot)


def per_gpu_hour_usd(hourly_usd: float, gpu_count: int) -> float:
    """A price per GPU-hour: an instance's hourly price shared by its GPUs (ValueError for a
    CPU-only type, which has none). The review's current price, its cheapest per-GPU option, the
    price sanity checks' GPU-hour peers and the doctor's cost of idle GPUs read it."""
    if gpu_count < 1:
        raise ValueError(f"a per-GPU price needs GPUs; this instance type has {gpu_count}")
    return hourly_usd / gpu_count


def spot_interruption(
    it: InstanceType, entries: Iterable[SpotInterruption]
) -> SpotInterruption | None:
    """The entry for this instance's provider with the longest prefix matching its id (an entry
    without prefixes covers the whole provider)."""
    best: tuple[int, SpotInterruption] | None = None
    for e in entries:
        if e.provider != it.provider:
            continue
        lengths = [len(p) for p in e.instance_prefixes if it.id.startswith(p)]
        if e.instance_prefixes and not lengths:
            continue
        length = max(lengths, default=0)
        if best is None or length > best[0]:
            best = (length, e)
    return None if best is None else best[1]


def stale_prices(
    catalog: Catalog, max_age_days: int, today: dt.date
) -> list[tuple[InstanceType, Price, int]]:
    """Prices older than `max_age_days` (ADVISOR_MAX_PRICE_AGE_DAYS), oldest first, with their
    age in days: (instance type, price, age)."""
    found = [
        (it, price, price.age_days(today))
        for it in catalog.instance_types.values()
        for price in it.prices
        if price.age_days(today) > max_age_days
    ]
    return sorted(found, key=lambda f: (-f[2], f[0].id, f[1].region, f[1].purchase.value))


def reference_instance(catalog: Catalog, accelerator_id: str) -> InstanceType | None:
    """The catalog's largest instance type of `accelerator_id` (most chips, then the fastest
    network): what a bare accelerator with no vendor system is estimated on (Trainium, TPU)."""
    found = [i for i in catalog.instance_types.values() if i.accelerator == accelerator_id]
    return max(found, key=lambda i: (i.gpu_count, i.network_gbps, i.id), default=None)


def reference_system(catalog: Catalog, accelerator_id: str) -> NodeSystem | None:
    """The vendor system built with `accelerator_id` (catalog/systems.yaml), if the catalog
    lists one: what a bare accelerator is estimated on."""
    return next((s for s in catalog.systems.values() if s.accelerator == accelerator_id), None)


# A NamedTuple, as purchase.py's records are: the engine imports this module for every request
class GpuOffer(NamedTuple):
    """One line of the GPU grid: an accelerator on one provider at one GPU count per node, its
    cheapest sound prices (flagged ones left out, as `recommend` leaves them) and its reach."""

    accelerator: str
    provider: str
    gpus: int
    instance_types: tuple[str, ...]  # every type of that shape, cheapest on-demand first
    on_demand: Price | None  # the cheapest sound on-demand price of any of them
    on_demand_type: str | None
    spot: Price | None
    spot_type: str | None
    regions: tuple[str, ...]  # every region with a sound price, sorted
    # the cheapest sound price of each reservation term any of them has, with its type
    reserved: tuple[tuple[Purchase, InstanceType, Price], ...] = ()

    def reserved_at(self, term: Purchase) -> tuple[str, Price] | None:
        """The cheapest sound price of one reservation term and its type's id; None without."""
        return next(((it.id, p) for t, it, p in self.reserved if t is term), None)


def gpu_grid(catalog: Catalog, accelerator: str | None = None) -> list[GpuOffer]:
    """Accelerator x provider x GPUs per node, cheapest first within an accelerator (the
    compact view `sky show-gpus` gives). `accelerator` is an id or the start of ids, any case
    ("H100": h100-nvl, h100-pcie, h100-sxm); NotFoundError with a hint when it names none."""
    wanted = _grid_accelerators(catalog, accelerator)
    shapes: dict[tuple[str, str, int], list[InstanceType]] = {}
    for it in catalog.instance_types.values():
        if it.accelerator in wanted:
            shapes.setdefault((it.accelerator, it.provider, it.gpu_count), []).append(it)
    rows = [
        _grid_row(acc, provider, count, types) for (acc, provider, count), types in shapes.items()
    ]
    return sorted(rows, key=lambda r: (r.accelerator, r.gpus, _usd(r.on_demand), r.provider))


def _grid_accelerators(catalog: Catalog, accelerator: str | None) -> set[str]:
    """The GPU accelerator ids `accelerator` names (an id, else the start of ids, any case)."""
    gpus = {a.id for a in catalog.accelerators.values() if a.form_factor != FormFactor.cpu}
    if accelerator is None:
        return gpus
    key = accelerator.lower()
    wanted = {i for i in gpus if i.lower() == key} or {i for i in gpus if i.lower().startswith(key)}
    if not wanted:
        raise NotFoundError(
            f"no GPU accelerator {accelerator!r} in the catalog{did_you_mean(key, gpus)}"
        )
    return wanted


def _grid_row(acc: str, provider: str, count: int, types: list[InstanceType]) -> GpuOffer:
    """One shape's line: its types' sound prices only (flagged ones left out, no fallback)."""
    sound = {it.id: [p for p in it.prices if price_usable(p, False)] for it in types}
    on_demand = _cheapest_of(types, sound, Purchase.on_demand)
    spot = _cheapest_of(types, sound, Purchase.spot)
    by_price = sorted(types, key=lambda it: (_usd(cheapest_price(it.prices)), it.id))
    return GpuOffer(
        accelerator=acc,
        provider=provider,
        gpus=count,
        instance_types=tuple(it.id for it in by_price),
        on_demand=on_demand[1] if on_demand else None,
        on_demand_type=on_demand[0].id if on_demand else None,
        spot=spot[1] if spot else None,
        spot_type=spot[0].id if spot else None,
        regions=tuple(sorted({p.region for prices in sound.values() for p in prices})),
        reserved=tuple(
            (term, *found)
            for term in purchase.TERMS
            if (found := _cheapest_of(types, sound, term)) is not None
        ),
    )


def _cheapest_of(
    types: list[InstanceType], sound: dict[str, list[Price]], purchase: Purchase
) -> tuple[InstanceType, Price] | None:
    """The cheapest sound price of `purchase` among the types, with its type (region, then the
    type's id, break ties)."""
    found = [(it, offering_price(sound[it.id], purchase)) for it in types]
    priced = [(it, p) for it, p in found if p is not None]
    return min(priced, key=lambda ip: (ip[1].hourly_usd, ip[1].region, ip[0].id), default=None)


def _usd(price: Price | None) -> float:
    return price.hourly_usd if price is not None else float("inf")
