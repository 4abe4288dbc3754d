"""The nearest alternatives when nothing fits (advisor/engine/alternatives.py) are those the long
way gives: every offering of every option the workload runs on, checked by the whole registry
with its sentences, offered to the tracker whenever it fails one check alone (or latency alone).
The engine passes over groups, offerings and ties that cannot change what the tracker keeps;
these tests hold it to the long way on many requests that nothing satisfies."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from advisor import Catalog, recommend
from advisor.catalog.capability import runs
from advisor.catalog.models import WorkloadProfile
from advisor.engine.alternatives import (
    _latency_met_anyway,
    _offer_latency,
    _offer_relaxation,
    _where,
    edge_alternatives,
)
from advisor.engine.candidates import candidate_index
from advisor.engine.checks import (
    GROUP_SIGNATURE,
    LATENCY_CODES,
    offering_violations,
    static_violations,
)
from advisor.engine.explain import AlternativeTracker
from advisor.engine.placement import placer
from advisor.engine.result import Alternative
from advisor.engine.spot_risk import spot_case
from advisor.perf.cost import option_hourly_usd
from advisor.planning.plans import plan_for
from advisor.request import RecommendRequest
from tests.factories import load_mini
from tests.factories import price as price_entry

# The alternatives recommend() adds after the nearest ones, each from one more pass
# (alternatives.py lower_precision, across_nodes).
ANOTHER_PASS = ("precision", "workload")


def long_way(catalog: Catalog, w: RecommendRequest) -> list[Alternative]:
    """The nearest alternatives from every offering, with the registry's violations."""
    p: WorkloadProfile = catalog.workloads[w.workload]
    plan = plan_for(catalog, w.work(), p, None, 5) if w.sized else None
    place = placer(w, p, plan)
    index = candidate_index(catalog, GROUP_SIGNATURE)
    tracker = AlternativeTracker()
    for group in index.cloud_groups:
        if not runs(group[0].hardware, p):
            continue
        placement = place(group[0])
        static = static_violations(group[0], placement, w, p)
        latency_only = bool(static) and all(v.code in LATENCY_CODES for v in static)
        for c in group:
            spot = spot_case(c, placement, w, p)
            for offer in c.offers:
                price = offer[3]
                found = [*static, *offering_violations(price, placement.nodes, w, spot)]
                if latency_only and len(found) == len(static):
                    hourly = option_hourly_usd(price.hourly_usd, placement.nodes)
                    label = f"{c.instance.id} ({_where(c, price)}, ${hourly:,.2f}/h)"
                    _offer_latency(tracker, placement, hourly, label)
                elif len(found) == 1 and found[0].constraint is not None:
                    _offer_relaxation(tracker, c, placement, (price,), found[0], p)
    edge_alternatives(tracker, index, w, p)  # the engine's own: the shortcuts are the cloud's
    return [a for a in tracker.alternatives() if not _latency_met_anyway(a, w, p)]


def nearest(catalog: Catalog, w: RecommendRequest) -> list[Alternative] | None:
    """The engine's nearest alternatives for `w`, None where something fits."""
    result = recommend(catalog, w, listed=False)
    if result.recommendations:
        return None
    return [a for a in result.alternatives if a.constraint not in ANOTHER_PASS]


# Requests nothing satisfies, as the service benchmark asks them (benchmarks/bench_service.py
# DISTINCT_BODIES: the memory requirement past what $10/h buys) and by every relaxation: budget,
# region, purchase option, flagged prices, provider, power, interconnect, one node's memory or
# GPU count, a GPU limit, a lighter fine-tuning method, latency targets, a deadline.
NOTHING_FITS: list[dict[str, Any]] = [
    *(
        dict(workload="low_latency_inference", memory_gb=m, max_hourly_usd=10)
        for m in (250, 300, 434, 500)
    ),
    dict(workload="fine_tuning", memory_gb=80, max_hourly_usd=0.5),
    dict(workload="fine_tuning", memory_gb=80, region="us-east-1", max_hourly_usd=1),
    dict(
        workload="fine_tuning", memory_gb=80, region="eu-west-1", purchase="spot", max_hourly_usd=2
    ),
    dict(workload="high_throughput_inference", memory_gb=40, purchase="spot", max_hourly_usd=0.3),
    dict(workload="batch_processing", provider="gcp", max_hourly_usd=0.05),
    dict(workload="fine_tuning", memory_gb=3000),
    dict(workload="fine_tuning", max_hourly_usd=10, gpu_count=16),
    dict(workload="fine_tuning", memory_gb=300, power_budget_w=1000, max_hourly_usd=30),
    dict(workload="large_scale_training", memory_gb=2000, interconnect_gb_s=900, provider="lambda"),
    dict(workload="edge_inference", power_budget_w=3),
    dict(workload="large_scale_training", memory_gb=300, purchase="spot", max_hourly_usd=5),
    dict(workload="batch_processing", gpu_count=1, max_hourly_usd=2, memory_gb=160),
    dict(workload="fine_tuning", model="llama-3.1-405b"),
    dict(workload="large_scale_training", model="llama-3.1-405b", tokens=1e12, max_gpus=8),
    dict(
        workload="large_scale_training",
        model="gpt-oss-120b",
        tokens=1e12,
        max_gpus=16,
        deadline_days=1,
    ),
    dict(
        workload="large_scale_training",
        model="llama-3-70b",
        tokens=1e12,
        deadline_days=7,
        max_hourly_usd=100,
    ),
    dict(
        workload="large_scale_training",
        model="mixtral-8x22b",
        tokens=1e12,
        deadline_days=1,
        purchase="spot",
    ),
    dict(workload="fine_tuning", model="mixtral-8x22b", tokens=1e12, max_gpus=8, max_hourly_usd=5),
    dict(workload="low_latency_inference", model="llama-3-70b", max_ttft_ms=5, max_itl_ms=2),
    dict(workload="low_latency_inference", model="llama-3.1-8b", max_itl_ms=2, max_hourly_usd=5),
    dict(workload="high_throughput_inference", model="deepseek-v3", max_ttft_ms=5, max_itl_ms=2),
    dict(workload="low_latency_inference", model="qwen3-32b", max_hourly_usd=1, region="us"),
]


def _sampled(count: int) -> list[dict[str, Any]]:
    """A seeded sample of requests without a model that cut the options at many places (a
    budget and a large memory requirement more often than not: most then fit nothing)."""
    rng = random.Random(5)
    axes: tuple[tuple[str, tuple[Any, ...]], ...] = (
        ("memory_gb", (24, 80, 160, 300, 700, 1500, 3000)),
        ("max_hourly_usd", (0.05, 0.3, 1, 2, 5, 10, 30)),
        ("region", (None, "us-east-1", "eu-west-1", "us", "eastus", "JP", "us-east-1,eastus2")),
        ("purchase", (None, "spot", "on_demand", "reserved_1y", "capacity_block")),
        ("gpu_count", (None, 1, 2, 8, 16, 64)),
        ("max_gpus", (None, 1, 4, 8, 16)),
        ("power_budget_w", (None, 25, 400, 1000, 9000)),
        ("interconnect_gb_s", (None, 100, 900)),
        ("provider", (None, "aws", "gcp", "azure", "lambda", "runpod")),
        ("include_flagged_prices", (None, True)),
    )
    workloads = ("fine_tuning", "large_scale_training", "high_throughput_inference")
    workloads += ("low_latency_inference", "batch_processing", "edge_inference")
    out = []
    for _ in range(count):
        kw: dict[str, Any] = {"workload": rng.choice(workloads)}
        for name, values in axes:
            value = rng.choice(values) if rng.random() < 0.6 else None
            if value is not None:
                kw[name] = value
        out.append(kw)
    return out


@pytest.mark.parametrize("kw", NOTHING_FITS, ids=str)
def test_alternatives_are_those_of_every_offering(shipped: Catalog, kw: dict[str, Any]) -> None:
    w = RecommendRequest(**kw)
    found = nearest(shipped, w)
    assert found is not None, "a request nothing satisfies"
    assert found == long_way(shipped, w)


def test_alternatives_of_sampled_requests_are_those_of_every_offering(shipped: Catalog) -> None:
    """Many requests: most fit nothing, with alternatives of every kind between them."""
    answered, kinds = 0, set()
    for kw in _sampled(400):
        w = RecommendRequest(**kw)
        found = nearest(shipped, w)
        if found is None:
            continue
        assert found == long_way(shipped, w), kw
        answered += 1
        kinds |= {a.constraint for a in found}
    assert answered > 200
    assert kinds >= {"max_hourly_usd", "region", "purchase", "memory_gb", "provider", "max_gpus"}
    assert kinds >= {"power_budget_w", "interconnect_gb_s", "gpu_count"}


def test_alternatives_among_offerings_at_one_price_are_the_first_by_label(
    tmp_path: Path,
) -> None:
    """Offerings come sorted by price, then "type|region|purchase"; the tracker breaks price
    ties by its label, "type (provider region, purchase, ...)". The two orders differ where one
    region's name begins another's (eastus, eastus2: "|" sorts after "2", "," before it), so the
    engine must explain every offering tied at the cheapest price, not the first alone."""

    def tie(data: dict[str, Any]) -> None:
        (small1,) = [i for i in data["instance_types"] if i["id"] == "small1"]
        small1["prices"] = [
            price_entry(r, usd)
            for r, usd in (("eastus2", 0.8), ("eastus", 0.8), ("us-east-1", 5.0))
        ]

    catalog = load_mini(tmp_path, tie)
    w = RecommendRequest(workload="fine_tuning", memory_gb=20, region="eu-west-1", max_hourly_usd=1)
    found = nearest(catalog, w)
    assert found is not None
    (region,) = [a for a in found if a.constraint == "region"]
    assert region.relax_to == "eastus", region
    assert found == long_way(catalog, w)
