"""Candidates the engine considers, indexed once per catalog (not per query).

A cloud candidate is an instance type with its priced offerings; an edge candidate is a device in
one of its power modes. Everything that does not depend on the request is computed here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
from advisor.catalog.queries import spot_interruption
from advisor.engine.result import Rejection
from advisor.perf.precision import (
    REQUEST_PRECISIONS,
    ComputePrecision,
    Unsupported,
    compute_precision,
    key_peak,
)

GIB_PER_GB = 1e9 / 2**30  # instance RAM is stated in GiB, requirements in GB


@dataclass(frozen=True, slots=True)
class CloudCandidate:
    instance: InstanceType
    hardware: Accelerator  # the GPU, or the CPU class for CPU-only offerings
    is_gpu: bool
    per_node_memory_gb: float  # GPU memory of one node, or its RAM for CPU-only
    per_node_power_w: float  # power.watts (advisor/catalog/power.py)
    # (region, purchase, hourly_usd, price, sort id): plain values for the per-offering hot loop
    offers: tuple[tuple[str, Purchase, float, Price, str], ...]
    # workload profile's key precision -> (precision used, dense peak): ranking work without a model
    peaks: dict[str, tuple[str, float]]
    # a request's weight precision -> how this hardware computes it, or why it cannot
    precision_support: dict[str, ComputePrecision | Unsupported]
    power: NodePower
    # How often spot capacity of this instance type is reclaimed (catalog/spot.yaml), if known.
    spot: SpotInterruption | None

    @property
    def has_offers(self) -> bool:
        return bool(self.offers)


@dataclass(frozen=True, slots=True)
class EdgeCandidate:
    device: Accelerator
    mode: str | None
    power_w: float
    int8_tops: float
    tops_estimated: bool  # True when scaled from another mode's figure, not published


@dataclass(frozen=True, slots=True)
class CandidateIndex:
    cloud: tuple[CloudCandidate, ...]
    # Instance types equal on every attribute the static checks and placement read
    # (advisor/engine/checks.py GROUP_SIGNATURE): feasibility and placement are worked out once
    # per group, not per type.
    cloud_groups: tuple[tuple[CloudCandidate, ...], ...]
    edge: tuple[EdgeCandidate, ...]
    # Per workload type: the rejections that depend on the catalog alone (advisor/engine).
    memo: dict[str, tuple[Rejection, ...]] = field(default_factory=dict, compare=False)


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
    cloud = []
    for it in sorted(catalog.instance_types.values(), key=lambda i: i.id):
        hw_id = it.accelerator or it.cpu
        hardware = catalog.accelerators[hw_id] if hw_id else None
        if hardware is None:  # the loader rejects this; guard for hand-built catalogs
            continue
        is_gpu = it.accelerator is not None
        memory = it.gpu_count * hardware.device_memory_gb if is_gpu else it.memory_gib / GIB_PER_GB
        power = instance_power(it, catalog.accelerators, catalog.systems)
        offers = tuple(
            (p.region, p.purchase, p.hourly_usd, p, f"{it.id}|{p.region}|{p.purchase.value}")
            for p in it.prices
        )
        peaks = {prec: key_peak(hardware, prec) for prec in PRECISIONS}
        support = {prec: compute_precision(hardware, prec) for prec in REQUEST_PRECISIONS}
        spot = spot_interruption(it, catalog.spot_interruptions.values())
        cloud.append(
            CloudCandidate(
                it, hardware, is_gpu, memory, power.watts, offers, peaks, support, power, spot
            )
        )
    edge = []
    for acc in sorted(catalog.accelerators.values(), key=lambda a: a.id):
        if acc.form_factor != FormFactor.edge:
            continue
        full_tops = acc.peak_tflops.int8 or 0.0
        if not acc.power_modes:
            edge.append(EdgeCandidate(acc, None, acc.tdp_w, full_tops, False))
        for mode in sorted(acc.power_modes, key=lambda m: m.power_w):
            # Unpublished per-mode figures scale with power: a stated estimate, not a datasheet one.
            estimated = mode.int8_tops is None
            tops = full_tops * mode.power_w / acc.tdp_w if estimated else mode.int8_tops or 0.0
            edge.append(EdgeCandidate(acc, mode.name, mode.power_w, tops, estimated))
    groups: dict[tuple[object, ...], list[CloudCandidate]] = {}
    for c in cloud:
        groups.setdefault(tuple(attribute(c, path) for path in signature), []).append(c)
    return CandidateIndex(tuple(cloud), tuple(tuple(g) for g in groups.values()), tuple(edge))
