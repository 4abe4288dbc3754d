"""Cross-checks between catalog entries, after each entry has validated on its own.

Errors go into `issues` (the load fails); softer findings come back as warning sentences.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from pydantic import BaseModel

from advisor.catalog.curation import NodeFact, PriceSanity
from advisor.catalog.models import (
    Accelerator,
    FormFactor,
    InstanceType,
    NodeSystem,
    Price,
    Purchase,
)
from advisor.catalog.purchase import RESERVED
from advisor.catalog.queries import per_gpu_hour_usd
from advisor.did_you_mean import did_you_mean
from advisor.errors import CatalogIssue

# Clouds state usable or rounded GPU memory (AWS lists an L4 as 22,888 MiB);
# a larger difference is a typo.
GPU_MEMORY_TOLERANCE = 0.10
GPU_FORM_FACTORS = (FormFactor.datacenter, FormFactor.workstation)


@dataclass(frozen=True)
class Origin:
    file: str
    layer: int  # 0 = shipped catalog (or the only one), 1 = the user's directory


Entries = dict[str, dict[str, tuple[BaseModel, Origin]]]


def cross_check(
    entries: Entries,
    issues: list[CatalogIssue],
    *,
    max_age_days: int,
    today: dt.date,
    broken: set[str] | frozenset[str] = frozenset(),
) -> list[str]:
    accelerators = {k: cast(Accelerator, v[0]) for k, v in entries["accelerators"].items()}
    warnings: list[str] = []
    if not entries["workloads"]:
        issues.append(CatalogIssue("(catalog)", None, "workloads", "no workload profiles defined"))
    for entry_id in entries["accelerators"].keys() & entries["instance_types"].keys():
        file = entries["instance_types"][entry_id][1].file
        msg = "id is used by both an accelerator and an instance type"
        issues.append(CatalogIssue(file, entry_id, "id", msg))
    for entry_id, (_, origin) in entries["probe_expectations"].items():
        if entry_id not in accelerators and entry_id not in broken:
            msg = f"no accelerator {entry_id!r}{did_you_mean(entry_id, accelerators)}"
            issues.append(CatalogIssue(origin.file, entry_id, "id", msg))
    systems = {k: cast(NodeSystem, v[0]) for k, v in entries["systems"].items()}
    for system_id, (system, origin) in entries["systems"].items():
        gpu = cast(NodeSystem, system).accelerator
        if gpu not in accelerators and gpu not in broken:
            msg = f"unknown accelerator {gpu!r}{did_you_mean(gpu, accelerators)}"
            issues.append(CatalogIssue(origin.file, system_id, "accelerator", msg))
    stale: dict[str, list[dt.date]] = defaultdict(list)
    for it_model, origin in entries["instance_types"].values():
        it = cast(InstanceType, it_model)
        _check_references(it, origin.file, accelerators, issues, broken)
        _check_system(it, origin.file, accelerators, systems, issues, broken)
        _check_prices(it, origin.file, issues, warnings, today)
        for price in it.prices:
            if price.age_days(today) > max_age_days:
                stale[origin.file].append(price.as_of)
    _check_instance_or_reason(entries, accelerators, issues, warnings)
    for file, dates in sorted(stale.items()):
        warnings.append(
            f"{file}: {len(dates)} price(s) older than {max_age_days} days "
            f"(oldest as_of {min(dates).isoformat()}); refresh them"
        )
    return warnings


def _check_references(
    it: InstanceType,
    file: str,
    accelerators: dict[str, Accelerator],
    issues: list[CatalogIssue],
    broken: set[str] | frozenset[str],
) -> None:
    def issue(field: str, message: str) -> None:
        issues.append(CatalogIssue(file, it.id, field, message))

    for field, ref in (("accelerator", it.accelerator), ("cpu", it.cpu)):
        if ref is not None and ref not in accelerators and ref not in broken:
            issue(field, f"unknown accelerator {ref!r}{did_you_mean(ref, accelerators)}")
    acc = accelerators.get(it.accelerator) if it.accelerator else None
    if acc is not None:
        if acc.form_factor not in GPU_FORM_FACTORS:
            issue("accelerator", f"{acc.id!r} is a {acc.form_factor.value} device, not a GPU")
        if it.interconnect_gb_s > acc.interconnect_gb_s:
            issue(
                "interconnect_gb_s",
                f"{it.interconnect_gb_s:g} GB/s is above what {acc.id} supports "
                f"({acc.interconnect_gb_s:g} GB/s)",
            )
        if it.gpu_memory_total_gb is not None:
            expected = it.gpu_count * acc.device_memory_gb
            if abs(it.gpu_memory_total_gb - expected) > GPU_MEMORY_TOLERANCE * expected:
                issue(
                    "gpu_memory_total_gb",
                    f"{it.gpu_memory_total_gb:g} GB is inconsistent with {it.gpu_count} x "
                    f"{acc.id} ({acc.device_memory_gb:g} GB each = {expected:g} GB)",
                )
    cpu = accelerators.get(it.cpu) if it.cpu else None
    if cpu is not None and cpu.form_factor != FormFactor.cpu:
        issue("cpu", f"{cpu.id!r} is not a CPU class (form_factor {cpu.form_factor.value})")


def _check_system(
    it: InstanceType,
    file: str,
    accelerators: dict[str, Accelerator],
    systems: dict[str, NodeSystem],
    issues: list[CatalogIssue],
    broken: set[str] | frozenset[str],
) -> None:
    """A reference system's power stands for the instance's only if it is built of the same GPUs
    (same TDP) and holds at least as many of them (advisor/catalog/power.py)."""
    if it.system is None:
        return
    system = systems.get(it.system)
    if system is None:
        if it.system not in broken:
            msg = f"unknown system {it.system!r}{did_you_mean(it.system, systems)}"
            issues.append(CatalogIssue(file, it.id, "system", msg))
        return
    mine = accelerators.get(it.accelerator) if it.accelerator else None
    theirs = accelerators.get(system.accelerator)
    if mine is None or theirs is None:
        if it.accelerator is None:
            msg = "a CPU-only instance has no GPU system"
            issues.append(CatalogIssue(file, it.id, "system", msg))
        return
    if mine.tdp_w != theirs.tdp_w:
        msg = (
            f"{system.id} is built of {theirs.id} ({theirs.tdp_w:g} W), not {mine.id} "
            f"({mine.tdp_w:g} W): its power does not stand for this instance's"
        )
        issues.append(CatalogIssue(file, it.id, "system", msg))
    if it.gpu_count > system.gpu_count:
        msg = f"{it.gpu_count} GPUs, more than {system.id}'s {system.gpu_count}"
        issues.append(CatalogIssue(file, it.id, "system", msg))


def _check_prices(
    it: InstanceType,
    file: str,
    issues: list[CatalogIssue],
    warnings: list[str],
    today: dt.date,
) -> None:
    seen: dict[tuple[str, Purchase], float] = {}
    for index, price in enumerate(it.prices):
        key = (price.region, price.purchase)
        if key in seen:
            msg = f"second {price.purchase.value} price for {price.region}"
            issues.append(CatalogIssue(file, it.id, f"prices[{index}]", msg))
        seen[key] = price.hourly_usd
        if price.as_of > today:
            msg = f"as_of {price.as_of} is in the future"
            issues.append(CatalogIssue(file, it.id, f"prices[{index}].as_of", msg))
    for (region, purchase), hourly in seen.items():
        on_demand = seen.get((region, Purchase.on_demand))
        if purchase == Purchase.spot and on_demand is not None and hourly > on_demand:
            warnings.append(
                f"{file}: {it.id}: spot price in {region} (${hourly:g}/h) is above on-demand "
                f"(${on_demand:g}/h)"
            )


def _check_instance_or_reason(
    entries: Entries,
    accelerators: dict[str, Accelerator],
    issues: list[CatalogIssue],
    warnings: list[str],
) -> None:
    """Every datacenter accelerator either has an instance type or says why not
    (`no_instance_reason`): one that silently has neither is never recommended."""
    used = {cast(InstanceType, m).accelerator for m, _ in entries["instance_types"].values()}
    for acc_id, acc in sorted(accelerators.items()):
        if acc.form_factor != FormFactor.datacenter:
            continue
        file = entries["accelerators"][acc_id][1].file
        if acc_id not in used and not acc.no_instance_reason:
            msg = (
                "a datacenter accelerator with no instance type in the catalog: add one, or say "
                "why not with no_instance_reason"
            )
            issues.append(CatalogIssue(file, acc_id, "no_instance_reason", msg))
        elif acc_id in used and acc.no_instance_reason:
            warnings.append(
                f"{file}: {acc_id}: has an instance type now; its no_instance_reason is stale"
            )


def apply_node_facts(
    entries: Entries, issues: list[CatalogIssue], shipped_dir: str | None = None
) -> list[str]:
    """Merge catalog node facts into the instance types with the same id (in place). A fact for an
    instance type not in the catalog waits for it: silently in the shipped catalog (its facts may
    lead the import that adds the type), with a warning in a user's directory (likely a typo)."""
    warnings: list[str] = []
    for fact_id, (fact_model, origin) in sorted(entries.get("node_facts", {}).items()):
        fact = cast(NodeFact, fact_model)
        found = entries["instance_types"].get(fact_id)
        if found is None:
            if shipped_dir is not None and origin.file.startswith(shipped_dir):
                continue  # shipped facts may lead the import that adds their instance type
            hint = did_you_mean(fact_id, entries["instance_types"])
            warnings.append(f"{origin.file}: {fact_id}: no instance type with this id{hint}")
            continue
        it, it_origin = cast(InstanceType, found[0]), found[1]
        if fact.expected_nccl_busbw is None:
            continue
        if (
            it.expected_nccl_busbw is not None
            and it.expected_nccl_busbw != fact.expected_nccl_busbw
        ):
            msg = f"expected_nccl_busbw is also set in {it_origin.file}; keep one"
            issues.append(CatalogIssue(origin.file, fact_id, "expected_nccl_busbw", msg))
            continue
        merged = it.model_copy(update={"expected_nccl_busbw": fact.expected_nccl_busbw})
        entries["instance_types"][fact_id] = (merged, it_origin)
    return warnings


# --- price sanity -----------------------------------------------------------------------------
# An outlier price is kept, flagged with a sentence naming the comparison (Price.flag), and left
# out of ranking unless a request includes flagged prices (advisor/engine/checks.py
# PRICE_FLAGGED). Thresholds are catalog data (catalog/price_sanity.yaml, curation.PriceSanity).

PriceKey = tuple[str, int]  # (instance type id, index into its prices)


def _median_without(ordered: list[float], removed: list[float]) -> float:
    """The median of a sorted list less some of its values (list copies run at C speed: the
    GPU-hour check takes one per instance type, at load)."""
    rest = ordered.copy()
    for value in removed:
        del rest[bisect.bisect_left(rest, value)]
    mid = len(rest) // 2
    return rest[mid] if len(rest) % 2 else (rest[mid - 1] + rest[mid]) / 2


def _bounds(low: float, high: float) -> str:
    return f"bounds {low:g}x-{high:g}x"


def price_flags(instance_types: Iterable[InstanceType], sanity: PriceSanity) -> dict[PriceKey, str]:
    """Each doubtful price's reason: one sentence per comparison it fails, joined."""
    found: dict[PriceKey, list[str]] = defaultdict(list)
    types = list(instance_types)
    for it in types:
        understated = _spot_flags(it, sanity, found)
        _region_flags(it, sanity, found, understated)
    _gpu_hour_flags(types, sanity, found)
    for it in types:  # against the on-demand prices the checks above left sound
        _term_flags(it, found)
    return {key: "; ".join(reasons) for key, reasons in found.items()}


def _region_flags(
    it: InstanceType, sanity: PriceSanity, found: dict[PriceKey, list[str]], understated: set[int]
) -> None:
    """An on-demand price against the median of the same type's on-demand prices elsewhere.

    Prices the spot check found understated do not vote: a stale figure copied into several regions
    (the snapshot's H200 GPU row, $36.60 where us-central1 says $74.49) would otherwise make the
    stale price the median and the list price the outlier."""
    low, high = sanity.region_low_ratio.value, sanity.region_high_ratio.value
    on_demand = [(i, p) for i, p in enumerate(it.prices) if p.purchase == Purchase.on_demand]
    voters = [p for i, p in on_demand if i not in understated]
    if len(on_demand) < 2 or not voters:
        return
    ordered = sorted(p.hourly_usd for p in voters)  # one price per region (_check_prices)
    for index, price in on_demand:
        others = [p for p in voters if p is not price]
        if not others:
            continue
        median = _median_without(ordered, [price.hourly_usd] if index not in understated else [])
        ratio = price.hourly_usd / median
        if low <= ratio <= high:
            continue
        regions = ", ".join(sorted(p.region for p in others))
        found[(it.id, index)].append(
            f"on-demand ${price.hourly_usd:,.2f}/h in {price.region} is {ratio:.2f}x the median "
            f"(${median:,.2f}/h) of {it.id} on-demand in {regions} ({_bounds(low, high)})"
        )


# Spot at (or within rounding of) on-demand is no spot offer: a placeholder row (Azure and GCP
# rows of the snapshot that copy the on-demand price) or a zone at the cap while capacity is
# short (AWS never charges spot above on-demand). Either way it buys interruptions for no
# discount: the spot price is flagged, not the on-demand one.
SPOT_AT_CAP = 0.99


def _spot_flags(
    it: InstanceType, sanity: PriceSanity, found: dict[PriceKey, list[str]]
) -> set[int]:
    """Spot far below on-demand flags the spot price; spot close to on-demand flags the on-demand
    one (a spot market discounts: a near-list spot price means the on-demand one is understated).
    Returns the indices of the on-demand prices found understated."""
    understated: set[int] = set()
    low, high = sanity.spot_low_ratio.value, sanity.spot_high_ratio.value
    on_demand = {
        p.region: (i, p) for i, p in enumerate(it.prices) if p.purchase == Purchase.on_demand
    }
    for index, spot in enumerate(it.prices):
        pair = on_demand.get(spot.region) if spot.purchase == Purchase.spot else None
        if pair is None:
            continue
        od_index, od = pair
        ratio = spot.hourly_usd / od.hourly_usd
        if ratio < low:
            found[(it.id, index)].append(
                f"spot ${spot.hourly_usd:,.2f}/h in {spot.region} is {ratio:.0%} of on-demand "
                f"(${od.hourly_usd:,.2f}/h), below the {low:.0%} bound"
            )
        elif SPOT_AT_CAP <= ratio <= 1:
            found[(it.id, index)].append(
                f"spot ${spot.hourly_usd:,.2f}/h in {spot.region} is on-demand's price "
                "(a placeholder or a zone at the cap): no spot discount, not a spot offer"
            )
        elif high < ratio < SPOT_AT_CAP:  # above on-demand: a warning of its own (_check_prices)
            understated.add(od_index)
            found[(it.id, od_index)].append(
                f"on-demand ${od.hourly_usd:,.2f}/h in {od.region} looks understated: spot "
                f"(${spot.hourly_usd:,.2f}/h) is {ratio:.0%} of it, above the {high:.0%} bound"
            )
    return understated


def _term_flags(it: InstanceType, found: dict[PriceKey, list[str]]) -> None:
    """A reservation term at or above the same region's on-demand price: a term is bought for
    its discount (AWS Reserved Instances, GCP committed use, Azure reservations all price below
    on demand), so such a row is stale or misread. Only against an on-demand price no other
    check doubts (an understated one says nothing of the term). Capacity Blocks are not held to
    it: AWS prices them by supply and demand, above on demand at times."""
    on_demand = {
        p.region: p
        for i, p in enumerate(it.prices)
        if p.purchase == Purchase.on_demand and (it.id, i) not in found
    }
    for index, term in enumerate(it.prices):
        od = on_demand.get(term.region) if term.purchase in RESERVED else None
        if od is not None and term.hourly_usd >= od.hourly_usd:
            found[(it.id, index)].append(
                f"{term.purchase} ${term.hourly_usd:,.2f}/h in {term.region} is not below "
                f"on-demand (${od.hourly_usd:,.2f}/h): a term that saves nothing is a stale or "
                "misread row"
            )


def size_class(it: InstanceType) -> str:
    """Sizes priced alike per GPU: the GPU count (1, 2-4, 8+) and the host per GPU (up to 8, up
    to 32, more vCPUs per GPU). A GPU-hour price carries its share of the host: a 4-vCPU one-GPU
    type and a 64-vCPU one are not peers, nor a one-GPU type and a whole 8-GPU node."""
    gpus = it.gpu_count
    count = "1 GPU" if gpus == 1 else "2-4 GPUs" if gpus <= 4 else "8+ GPUs"
    per_gpu = it.vcpus / gpus
    host = "<= 8" if per_gpu <= 8 else "<= 32" if per_gpu <= 32 else "> 32"
    return f"{count}, {host} vCPUs per GPU"


# Providers whose list prices are peers for one GPU: the hyperscale clouds, which price a GPU
# within about 1.8x of each other (catalog/price_sanity.yaml), and the GPU clouds, which rent the
# same GPU at a fraction of that (snapshot: Lambda 8 x H100 SXM $3.99/GPU-h against AWS p5 $6.88
# and Azure ND H100 v5 $12.29). Across the two, the gap is the market, not a broken row.
HYPERSCALE = frozenset({"aws", "gcp", "azure", "oci"})


def market(it: InstanceType) -> str:
    """Whose GPU-hour prices are compared with each other: hyperscale clouds or GPU clouds."""
    return "hyperscale cloud" if it.provider in HYPERSCALE else "GPU cloud"


def _gpu_hour_flags(
    types: list[InstanceType], sanity: PriceSanity, found: dict[PriceKey, list[str]]
) -> None:
    """An on-demand price per GPU-hour against the median of other instance types with the same
    accelerator, size class and market (any region; hyperscale clouds and GPU clouds apart)."""
    low, high = sanity.gpu_hour_low_ratio.value, sanity.gpu_hour_high_ratio.value
    per_gpu: dict[str, list[tuple[str, int, Price, float]]] = defaultdict(list)
    for it in types:
        if it.accelerator is None:
            continue
        for index, p in enumerate(it.prices):
            if p.purchase == Purchase.on_demand:
                key = f"{it.accelerator} ({size_class(it)}, {market(it)})"
                per_gpu[key].append((it.id, index, p, per_gpu_hour_usd(p.hourly_usd, it.gpu_count)))
    for accelerator, rows in per_gpu.items():
        own: dict[str, list[float]] = defaultdict(list)  # per instance type: its GPU-hour prices
        for r in rows:
            own[r[0]].append(r[3])
        peers = len(own) - 1
        if peers < sanity.gpu_hour_min_peers.value:
            continue
        # the peers depend on the instance type only: one median per type, not per price
        ordered = sorted(r[3] for r in rows)
        medians = {t: _median_without(ordered, values) for t, values in own.items()}
        for it_id, index, price, gpu_hour in rows:
            median = medians[it_id]
            ratio = gpu_hour / median
            if low <= ratio <= high:
                continue
            found[(it_id, index)].append(
                f"on-demand ${gpu_hour:,.2f}/GPU-h in {price.region} is {ratio:.2f}x the median "
                f"(${median:,.2f}/GPU-h) of {peers} other instance types "
                f"with {accelerator} ({_bounds(low, high)})"
            )


def sanity_thresholds(entries: Entries, issues: list[CatalogIssue]) -> PriceSanity | None:
    """The catalog's one price_sanity entry (None: no sanity checks, e.g. a replaced catalog
    without one)."""
    found = entries.get("price_sanity", {})
    if len(found) > 1:
        for entry_id, (_, origin) in sorted(found.items())[1:]:
            msg = f"one price_sanity entry allowed; also {sorted(found)[0]!r}"
            issues.append(CatalogIssue(origin.file, entry_id, "id", msg))
        return None
    return next((cast(PriceSanity, m) for m, _ in found.values()), None)
