"""Candidates the engine considers, indexed once per catalog (not per query).

A cloud candidate is an instance type with its priced offerings; an edge candidate is a device in
one of its power modes. Everything that does not depend on the request is computed here.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple, TypeVar, cast

from advisor.catalog import Catalog
from advisor.catalog.models import (
    PRECISIONS,
    Accelerator,
    FormFactor,
    InstanceType,
    Price,
    Purchase,
    SpotInterruption,
)
from advisor.catalog.power import NodePower, instance_power
from advisor.catalog.queries import (
    admitted_regions,
    price_usable,
    purchase_matches,
    spot_interruption,
)
from advisor.engine.objective import Valuation
from advisor.engine.result import Rejection
from advisor.perf.precision import (
    REQUEST_PRECISIONS,
    ComputePrecision,
    Unsupported,
    compute_precision,
    key_peak,
)
from advisor.units import GB, GIB

if TYPE_CHECKING:  # built by advisor/engine/checks.py and placement.py, which read the candidates
    from advisor.engine.checks import FaultGroup, FaultMasks, GroupFaults
    from advisor.engine.evaluation import PassRow
    from advisor.engine.placement import KeyPlacer

GIB_PER_GB = GB / GIB  # instance RAM is stated in GiB, requirements in GB


Offer = tuple[str, Purchase, float, Price, str]  # region, purchase, hourly_usd, price, sort id

# Request filters kept per candidate (and per group on the index) by the caches below. A request
# may list any regions, so their number is not bounded by the catalog, and an anonymous client
# sending new lists grew the service by about 75 kB a request (175 kB with a budget). Past this
# many the cache starts over, rebuilt from the requests that follow: room for each region of the
# shipped catalog (80) and then some, about 27 MB at most under such a client
# (benchmarks/results/attack-findings-2026-12-04.txt).
FILTERS_KEPT = 128


K = TypeVar("K")
V = TypeVar("V")


def kept(cache: dict[K, V], per: int = 1) -> dict[K, V]:
    """`cache`, emptied first when it holds FILTERS_KEPT entries for each of `per` keepers
    (candidates or groups): room for one more."""
    if len(cache) >= FILTERS_KEPT * per:
        cache.clear()
    return cache


def per_filter(
    by_spec: dict[tuple[object, ...], V],
    by_regions: dict[tuple[object, ...], V],
    key: tuple[object, ...],
    regions: frozenset[str],
    build: Callable[[], V],
    per: int = 1,
) -> V:
    """What is kept per request filter, `key` = (region spec, *the rest): found by the spelling
    first, else by the regions of `regions` it admits (queries.py admitted_regions) with the
    rest, which many specs share (every list of regions an instance type is not offered in
    admits none of them), else built. A client sending a new region list with each request
    cost 6.5x an answered request while everything was built again for each list."""
    found = by_spec.get(key)
    if found is None:
        shared = (admitted_regions(cast("str | None", key[0]), regions), *key[1:])
        found = by_regions.get(shared)
        if found is None:
            found = kept(by_regions, per)[shared] = build()
        kept(by_spec, per)[key] = found
    return found


# The engine's candidate structures are plain classes with __slots__, not frozen dataclasses: the
# engine imports them for every request, and a dataclass takes a few hundred microseconds to make
# (its methods are compiled when the class is). Nothing changes them once built but their caches.
class OfferPool:
    """An option's offerings matching one (region, purchase) filter, cheapest first, with running
    counts: the number of feasible offerings under a budget is a bisection, not a loop over them
    (the engine's cost at 10,000 offerings)."""

    __slots__ = ("counts", "hourly_usd", "offers")

    def __init__(
        self,
        offers: tuple[Offer, ...],
        hourly_usd: tuple[float, ...],
        counts: tuple[tuple[int, ...], ...],
    ) -> None:
        self.offers = offers
        self.hourly_usd = hourly_usd
        # counts[kind][i]: among offers[:i], how many are not excluded, where kind is
        # 2 x (spot excluded) + (flagged prices excluded)
        self.counts = counts

    @classmethod
    def of(cls, offers: tuple[Offer, ...]) -> OfferPool:
        def running(keep: list[bool]) -> tuple[int, ...]:
            return tuple(accumulate(keep, initial=0))  # 0 + True is the int 1: counts

        spot = [o[1] is Purchase.spot for o in offers]
        flagged = [not price_usable(o[3], False) for o in offers]
        counts = (
            running([True] * len(offers)),
            running([not f for f in flagged]),
            running([not s for s in spot]),
            running([not s and not f for s, f in zip(spot, flagged, strict=True)]),
        )
        return cls(offers, tuple(o[2] for o in offers), counts)

    def within(self, budget_usd: float | None) -> int:
        """How many of the offers (a prefix) cost no more than the budget."""
        return len(self.offers) if budget_usd is None else bisect_right(self.hourly_usd, budget_usd)

    def count(self, prefix: int, no_spot: bool, no_flagged: bool) -> int:
        return self.counts[2 * no_spot + no_flagged][prefix]


class GroupPool:
    """The offerings of one candidate group's members (advisor/engine/checks.py GROUP_SIGNATURE)
    matching one (region, purchase) filter, for the engine's group-at-once path: all of them
    merged cheapest first (the group's feasible offerings are one bisection), and the members
    ordered by their cheapest offering, with flagged prices kept [0] or excluded [1] (members
    with an offering within a budget are a prefix; those with none sort last, at infinity)."""

    __slots__ = ("by_cheapest", "cheapest_usd", "closest", "merged", "unbudgeted")

    def __init__(
        self,
        merged: OfferPool,
        by_cheapest: tuple[
            tuple[tuple[int, Offer | None], ...], tuple[tuple[int, Offer | None], ...]
        ],
        cheapest_usd: tuple[tuple[float, ...], tuple[float, ...]],
    ) -> None:
        self.merged = merged
        self.by_cheapest = by_cheapest
        self.cheapest_usd = cheapest_usd
        # Without a budget, [no_flagged]: (the feasible offerings, the members with one), what
        # merged.count and members_within give with no budget, worked out once
        self.unbudgeted: tuple[tuple[int, int], tuple[int, int]] = (
            (merged.count(len(merged.offers), False, False), self.members_within(None, False)),
            (merged.count(len(merged.offers), False, True), self.members_within(None, True)),
        )
        # Without a budget, [no_flagged]: each member with no offering kept, with the position
        # and faults of the offering that explains it (advisor/engine/evaluation.py
        # _closest_offer, the same for every node count then), built on first use
        self.closest: dict[bool, tuple[tuple[int, int, int], ...]] = {}

    @classmethod
    def of(cls, pools: list[OfferPool]) -> GroupPool:
        # A group of one type (most of them) merges nothing: its pool is cheapest first already.
        merged = (
            pools[0]
            if len(pools) == 1
            else OfferPool.of(
                tuple(
                    sorted((o for pool in pools for o in pool.offers), key=lambda o: (o[2], o[4]))
                )
            )
        )
        orders, prices = [], []
        for no_flagged in (False, True):
            ranked: list[tuple[tuple[float, str], int, Offer | None]] = []
            for member, pool in enumerate(pools):
                first = next((o for o in pool.offers if price_usable(o[3], not no_flagged)), None)
                # (price, sort id) of the cheapest kept offering; none kept: last
                key = (first[2], first[4]) if first is not None else (math.inf, "")
                ranked.append((key, member, first))
            ranked.sort(key=lambda r: (r[0], r[1]))
            orders.append(tuple((member, offer) for _, member, offer in ranked))
            prices.append(tuple(key[0] for key, _, _ in ranked))
        return cls(merged, (orders[0], orders[1]), (prices[0], prices[1]))

    def members_within(self, budget_usd: float | None, no_flagged: bool) -> int:
        """How many members (a prefix of by_cheapest[no_flagged]) have an offering that costs
        no more than the budget, as OfferPool.within counts offerings."""
        cheapest = self.cheapest_usd[no_flagged]
        if budget_usd is None:
            return bisect_left(cheapest, math.inf)  # every member with an offering at all
        return bisect_right(cheapest, budget_usd)


class CloudCandidate:
    __slots__ = (
        "_pools",
        "_pools_by_regions",
        "fault_groups",
        "fault_groups_by_regions",
        "hardware",
        "instance",
        "is_gpu",
        "offers",
        "peaks",
        "per_node_memory_gb",
        "per_node_power_w",
        "placement_key",
        "power",
        "precision_support",
        "regions",
        "spot",
        "words",
    )

    def __init__(
        self,
        instance: InstanceType,
        hardware: Accelerator,
        is_gpu: bool,
        per_node_memory_gb: float,
        per_node_power_w: float,
        offers: tuple[Offer, ...],
        peaks: dict[str, tuple[str, float]],
        precision_support: dict[str, ComputePrecision | Unsupported],
        power: NodePower,
        spot: SpotInterruption | None,
        placement_key: tuple[bool, float, int, float],
    ) -> None:
        self.instance = instance
        self.hardware = hardware  # the GPU, or the CPU class for CPU-only offerings
        self.is_gpu = is_gpu
        self.per_node_memory_gb = per_node_memory_gb  # GPU memory of one node, or its RAM
        self.per_node_power_w = per_node_power_w  # power.watts (advisor/catalog/power.py)
        # (region, purchase, hourly_usd, price, sort id): plain values for the per-offering hot
        # loop, cheapest first (ties by sort id), the order the ranking breaks ties in: the
        # engine builds results only for the first few feasible offerings of an option
        # (advisor/engine/__init__.py)
        self.offers = offers
        # workload profile's key precision -> (precision used, dense peak): ranking work
        # without a model
        self.peaks = peaks
        # a request's weight precision -> how this hardware computes it, or why it cannot
        self.precision_support = precision_support
        self.power = power
        # How often spot capacity of this instance type is reclaimed (catalog/spot.yaml), if
        # known.
        self.spot = spot
        # The values of advisor/engine/placement.py UNSIZED_READS, in that order
        self.placement_key = placement_key
        # The regions it is offered in
        self.regions = frozenset(o[0] for o in offers)
        # (region, purchase, risky, skip_flagged) -> the offerings by their faults other than
        # the budget (advisor/engine/checks.py fault_groups), built on first use; by the spec's
        # spelling and by the regions it admits (per_filter)
        self.fault_groups: dict[tuple[object, ...], tuple[FaultGroup, ...]] = {}
        self.fault_groups_by_regions: dict[tuple[object, ...], tuple[FaultGroup, ...]] = {}
        # Sentences about the option and the figures beside them (advisor/engine/rank.py words),
        # by what they depend on beyond the catalog (an offering, a node count, a workload
        # type), built on first use; kept() bounds them
        self.words: dict[tuple[object, ...], object] = {}
        # (region, purchase) filter (None = any) -> its pool, built on first use (per_filter)
        self._pools: dict[tuple[object, ...], OfferPool] = {}
        self._pools_by_regions: dict[tuple[object, ...], OfferPool] = {}

    @property
    def has_offers(self) -> bool:
        return bool(self.offers)

    def pool(self, region: str | None, purchase: Purchase | None) -> OfferPool:
        """The offerings a request's region and purchase filters leave, cheapest first."""
        found = self._pools.get((region, purchase))  # the common case, inline
        if found is not None:
            return found
        return per_filter(
            self._pools,
            self._pools_by_regions,
            (region, purchase),
            self.regions,
            lambda: OfferPool.of(
                _matching(self.offers, admitted_regions(region, self.regions), purchase)
            ),
        )


def _matching(
    offers: tuple[Offer, ...], admitted: frozenset[str], purchase: Purchase | None
) -> tuple[Offer, ...]:
    """The offers catalog/queries.py price_matches keeps for a filter (an offer holds its
    price's region and purchase), that filter's rules asked once per purchase option and once
    per region (`admitted`: admitted_regions of the offers' regions) instead of once per offer:
    the pools are most of an instance type's first query."""
    accepted = frozenset(p for p in Purchase if purchase_matches(purchase, p))
    return tuple(o for o in offers if o[1] in accepted and o[0] in admitted)


class EdgeCandidate(NamedTuple):  # a NamedTuple: made in a fraction of a dataclass's time
    device: Accelerator
    mode: str | None
    power_w: float  # what runs: the device in its mode plus the host it needs (catalog `host`)
    int8_tops: float
    tops_estimated: bool  # True when scaled from another mode's figure, not published
    device_w: float  # the device alone
    # Its hit and sentences by what they depend on beyond the device and mode (an objective),
    # built on first use (advisor/engine/rank.py edge_hit, _edge_reasons): a few keys
    words: dict[tuple[object, ...], object]

    @property
    def host_w(self) -> float:
        return self.power_w - self.device_w


class CandidateIndex:
    __slots__ = (
        "_group_pools_by_regions",
        "cloud",
        "cloud_groups",
        "edge",
        "fault_masks",
        "group_pools",
        "group_regions",
        "memo",
        "pass_rows",
        "placers",
        "running",
        "valuations",
    )

    def __init__(
        self,
        cloud: tuple[CloudCandidate, ...],
        cloud_groups: tuple[tuple[CloudCandidate, ...], ...],
        edge: tuple[EdgeCandidate, ...],
    ) -> None:
        self.cloud = cloud
        # Instance types equal on every attribute the static checks and placement read
        # (advisor/engine/checks.py GROUP_SIGNATURE): feasibility and placement are worked out
        # once per group, not per type.
        self.cloud_groups = cloud_groups
        self.edge = edge
        # Per workload type: the rejections that depend on the catalog alone (advisor/engine).
        self.memo: dict[str, tuple[Rejection, ...]] = {}
        # Per workload type: the cloud groups it runs on (the others are its mismatches), each
        # by index with whether it fails a request-free static check (advisor/engine/checks.py
        # Constraint.request_free).
        self.running: dict[str, tuple[GroupFaults, ...]] = {}
        # Per workload type: its running groups' static facts as bit masks (checks.py
        # FaultMasks)
        self.fault_masks: dict[str, FaultMasks] = {}
        # Per workload type: its placement keys' placer (advisor/engine/placement.py KeyPlacer)
        self.placers: dict[str, KeyPlacer] = {}
        # (workload type, region, purchase, flagged prices skipped) -> its running groups as the
        # unsized pass reads them (advisor/engine/evaluation.py _pass_rows), built on first use
        self.pass_rows: dict[tuple[object, ...], tuple[PassRow, ...]] = {}
        # (group index, nodes, workload type, objective) -> how the group's offerings are valued
        # without a model (advisor/engine/rank.py valuation): at most groups x node counts x
        # types x objectives, a few thousand.
        self.valuations: dict[tuple[int, int, str, str], Valuation] = {}
        # The regions each group's members are offered in, by group index
        self.group_regions = tuple(frozenset().union(*(c.regions for c in g)) for g in cloud_groups)
        # (region, purchase, group index) -> the group's pool, built on first use (per_filter)
        self.group_pools: dict[tuple[object, ...], GroupPool] = {}
        self._group_pools_by_regions: dict[tuple[object, ...], GroupPool] = {}

    def group_pool(self, group: int, region: str | None, purchase: Purchase | None) -> GroupPool:
        """The offerings of group `group` that a request's region and purchase filters leave."""
        found = self.group_pools.get((region, purchase, group))  # the common case, inline
        if found is not None:
            return found
        members = self.cloud_groups[group]
        return per_filter(
            self.group_pools,
            self._group_pools_by_regions,
            (region, purchase, group),
            self.group_regions[group],
            lambda: GroupPool.of([c.pool(region, purchase) for c in members]),
            len(self.cloud_groups),
        )


def candidate_index(catalog: Catalog, signature: tuple[str, ...]) -> CandidateIndex:
    """The catalog's candidates, grouped by the attributes named in `signature` (dotted paths
    such as "instance.provider"); built once per catalog (the signature is a constant)."""
    cached = catalog.__dict__.get("_candidate_index")
    if isinstance(cached, CandidateIndex):
        return cached
    index = _build(catalog, signature)
    object.__setattr__(catalog, "_candidate_index", index)
    return index


def attribute(obj: object, path: str) -> object:
    """The value at a dotted attribute path: attribute(c, "instance.provider")."""
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


def _build(catalog: Catalog, signature: tuple[str, ...]) -> CandidateIndex:
    cloud = _cloud(catalog)
    groups: dict[tuple[object, ...], list[CloudCandidate]] = {}
    # every path's value in one call, as attribute() reads each (attrgetter gives a tuple for
    # two names or more)
    values = (
        attrgetter(*signature)
        if len(signature) > 1
        else lambda c: tuple(attribute(c, path) for path in signature)
    )
    for c in cloud:
        groups.setdefault(values(c), []).append(c)
    return CandidateIndex(tuple(cloud), tuple(tuple(g) for g in groups.values()), _edge(catalog))


def _cloud(catalog: Catalog) -> list[CloudCandidate]:
    cloud = []
    # The peaks and precisions depend on the hardware alone: worked out once per accelerator (or
    # CPU class), not for each of the instance types that share it (read only: shared).
    per_hardware: dict[
        str, tuple[dict[str, tuple[str, float]], dict[str, ComputePrecision | Unsupported]]
    ] = {}
    for it in sorted(catalog.instance_types.values(), key=lambda i: i.id):
        hw_id = it.accelerator or it.cpu
        hardware = catalog.accelerators[hw_id] if hw_id else None
        if hardware is None:  # the loader rejects this; guard for hand-built catalogs
            continue
        is_gpu = it.accelerator is not None
        memory = it.gpu_count * hardware.device_memory_gb if is_gpu else it.memory_gib / GIB_PER_GB
        power = instance_power(it, catalog.accelerators, catalog.systems)
        head, unsorted = f"{it.id}|", []
        for p in it.prices:
            region, purchase = p.region, p.purchase
            # the sort id, "type|region|purchase": a StrEnum adds its value
            unsorted.append((region, purchase, p.hourly_usd, p, head + region + "|" + purchase))
        offers = tuple(sorted(unsorted, key=lambda o: (o[2], o[4])))
        known = per_hardware.get(hardware.id)
        if known is None:
            known = per_hardware[hardware.id] = (
                {prec: key_peak(hardware, prec) for prec in PRECISIONS},
                {prec: compute_precision(hardware, prec) for prec in REQUEST_PRECISIONS},
            )
        peaks, support = known
        spot = spot_interruption(it, catalog.spot_interruptions.values())
        key = (is_gpu, hardware.device_memory_gb, it.gpu_count, memory)
        cloud.append(
            CloudCandidate(
                it, hardware, is_gpu, memory, power.watts, offers, peaks, support, power, spot, key
            )
        )
    return cloud


def _edge(catalog: Catalog) -> tuple[EdgeCandidate, ...]:
    edge = []
    for acc in sorted(catalog.accelerators.values(), key=lambda a: a.id):
        if acc.form_factor != FormFactor.edge:
            continue
        full_tops = acc.peak_tflops.int8 or 0.0
        host_w = acc.host.power_w if acc.host is not None else 0.0
        if not acc.power_modes:
            edge.append(
                EdgeCandidate(acc, None, acc.tdp_w + host_w, full_tops, False, acc.tdp_w, {})
            )
        for mode in sorted(acc.power_modes, key=lambda m: m.power_w):
            # Unpublished per-mode figures scale with power: a stated estimate, not a datasheet one.
            estimated = mode.int8_tops is None
            tops = full_tops * mode.power_w / acc.tdp_w if estimated else mode.int8_tops or 0.0
            edge.append(
                EdgeCandidate(
                    acc, mode.name, mode.power_w + host_w, tops, estimated, mode.power_w, {}
                )
            )
    return tuple(edge)
