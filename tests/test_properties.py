"""Invariants of the engine over random requests on the shipped catalog."""

from __future__ import annotations

import math
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor import Catalog, Workload, recommend
from advisor.catalog import Catalog as CatalogType
from advisor.engine.candidates import GIB_PER_GB

WORKLOADS = [
    "large_scale_training",
    "fine_tuning",
    "high_throughput_inference",
    "low_latency_inference",
    "edge_inference",
    "batch_processing",
]


@st.composite
def workloads(draw: st.DrawFn, catalog: Catalog) -> Workload:
    maybe = lambda s: draw(st.none() | s)  # noqa: E731
    return Workload(
        workload=draw(st.sampled_from(WORKLOADS)),
        memory_gb=maybe(st.floats(0, 4000)),
        power_budget_w=maybe(st.floats(0.5, 20000)),
        interconnect_gb_s=maybe(st.sampled_from([0, 100, 600, 900, 1800])),
        region=maybe(st.sampled_from(sorted(catalog.regions))),
        provider=maybe(st.sampled_from(sorted(catalog.providers))),
        max_hourly_usd=maybe(st.floats(0.05, 500)),
        purchase=draw(st.sampled_from(["on_demand", "spot", None])),
        gpu_count=maybe(st.integers(0, 32)),
        objective=maybe(st.sampled_from(["cheapest", "performance", "price_performance"])),
        limit=draw(st.integers(1, 50)),
    )


def check_hard_constraints(catalog: Catalog, w: Workload) -> None:
    result = recommend(catalog, w)
    profile = catalog.workloads[w.workload]
    for r in result.recommendations:
        if r.device is not None:
            dev = catalog.accelerators[r.device]
            assert dev.form_factor in profile.form_factors
            assert w.power_budget_w is None or r.power_w <= w.power_budget_w
            assert w.memory_gb is None or dev.memory_gb >= w.memory_gb
            assert w.region is None and w.provider is None and w.max_hourly_usd is None
            assert not w.interconnect_gb_s and (w.gpu_count or 0) <= 1
            continue
        it = catalog.instance_types[r.instance_type or ""]
        hw = catalog.accelerators[it.accelerator or it.cpu or ""]
        assert hw.form_factor in profile.form_factors
        # one copy of the work spans nodes only where the profile scales out; serving may run
        # more replicas on more nodes, each replica inside one
        assert r.nodes == 1 or profile.scale_out or profile.sizing == "inference"
        assert r.nodes == 1 or it.network_gbps >= profile.min_multi_node_network_gbps
        assert w.region is None or r.region == w.region
        assert w.provider is None or r.provider == w.provider
        assert w.purchase is None or r.purchase == w.purchase.value
        assert w.max_hourly_usd is None or (r.hourly_usd or 0) <= w.max_hourly_usd + 1e-9
        assert w.power_budget_w is None or r.power_w <= w.power_budget_w
        assert not w.interconnect_gb_s or it.interconnect_gb_s >= w.interconnect_gb_s
        assert r.gpu_count >= (w.gpu_count or 0)
        if w.memory_gb:
            capacity = (
                r.gpu_count * hw.memory_gb
                if it.accelerator
                else r.nodes * it.memory_gib / GIB_PER_GB
            )
            assert capacity >= w.memory_gb - 1e-6
        price = next(
            p for p in it.prices if p.region == r.region and p.purchase.value == r.purchase
        )
        assert math.isclose(r.hourly_usd or 0, price.hourly_usd * r.nodes, rel_tol=1e-6)
        if it.accelerator:
            assert hw.memory_gb >= profile.min_gpu_memory_gb
    assert len(result.recommendations) <= w.limit
    scores = [r.score for r in result.recommendations]
    assert scores == sorted(scores, reverse=True)
    # every candidate is accounted for: recommended (some offering) or rejected, never both
    rejected = {r.id for r in result.rejected}
    assert not rejected & {r.instance_type or r.device for r in result.recommendations}


def shuffled(catalog: Catalog, seed: int) -> Catalog:
    def mix(d: dict) -> dict:  # type: ignore[type-arg]
        items = list(d.items())
        random.Random(seed).shuffle(items)
        return dict(items)

    return CatalogType(
        accelerators=mix(catalog.accelerators),
        instance_types=mix(catalog.instance_types),
        workloads=mix(catalog.workloads),
        systems=mix(catalog.systems),
        spot_interruptions=mix(catalog.spot_interruptions),
    )


_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_SETTINGS
@given(data=st.data())
def test_recommendations_satisfy_every_hard_constraint(
    shipped: Catalog, data: st.DataObject
) -> None:
    check_hard_constraints(shipped, data.draw(workloads(shipped)))


@_SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_ranking_is_deterministic(shipped: Catalog, data: st.DataObject, seed: int) -> None:
    w = data.draw(workloads(shipped))
    first = recommend(shipped, w).to_dict()
    assert recommend(shipped, w).to_dict() == first
    assert recommend(shuffled(shipped, seed), w).to_dict() == first, (
        "order of catalog files matters"
    )
