"""`advisor estimate`: every intermediate figure of sizing one workload on one kind of hardware.

Pure: takes the catalog (and the fleet's calibration, if any) as arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.catalog import Catalog, get_accelerator, get_instance_type
from advisor.catalog.models import InstanceType, Price
from advisor.did_you_mean import unknown
from advisor.errors import InputError
from advisor.perf.calibration import Calibration
from advisor.perf.fitting import WorkPlan
from advisor.request import EstimateRequest, purchase_matches


def estimate(
    catalog: Catalog,
    req: EstimateRequest,
    fleet: Mapping[str, Calibration] | None = None,
    min_fleet_reports: int = 5,
) -> dict[str, Any]:
    if not req.sized:
        raise InputError("estimate needs a model: give model (a preset id) or params_b")
    profile = catalog.workloads.get(req.workload)
    if profile is None:
        raise InputError(unknown("workload", req.workload, catalog.workloads))
    instance: InstanceType | None = None
    if req.instance_type is not None:
        instance = get_instance_type(catalog, req.instance_type)
        if instance.accelerator is None:
            raise InputError(f"{instance.id} has no GPU: estimates are for GPU instance types")
        acc, per_node = get_accelerator(catalog, instance.accelerator), instance.gpu_count
    elif req.accelerator is not None:
        acc, per_node = get_accelerator(catalog, req.accelerator), req.gpus_per_node
    else:
        raise InputError("give instance_type (priced) or accelerator (unpriced) to estimate on")
    plan = WorkPlan(catalog, req, profile, fleet, min_fleet_reports)
    fit = plan.fit(acc, per_node)
    price = _price(instance, req) if instance is not None else None
    hourly = price.hourly_usd * fit.nodes if price is not None and not fit.unfit else None
    out: dict[str, Any] = {
        "workload": profile.id,
        "model": req.model or f"{req.params_b:g}B parameters",
        "sizing": profile.sizing,
        "hardware": {
            "instance_type": instance.id if instance else None,
            "accelerator": acc.id,
            "gpus_per_node": per_node,
            "nodes": fit.nodes,
            "gpus": fit.rented_gpus,
        },
        "fits": fit.unfit is None and (profile.scale_out or not fit.spans_nodes),
        "figures": [vars(f) for f in fit.figures],
        "memory_per_gpu_gb": fit.memory_per_gpu_gb,
        "memory_total_gb": fit.memory_total_gb,
        "efficiency": fit.efficiency,
        "efficiency_source": fit.efficiency_source,
        "hours": fit.hours,
        "hourly_usd": hourly,
        "price": price.model_dump(mode="json") if price else None,
        "cost_usd": hourly * fit.hours if hourly is not None and fit.hours is not None else None,
        "tokens_per_s": fit.tokens_per_s,
        "replicas": fit.replicas,
        "notes": [],
    }
    if fit.unfit:
        out["notes"].append(fit.unfit)
    if fit.spans_nodes and not profile.scale_out:
        out["notes"].append(f"needs {fit.nodes} nodes and {profile.id} runs on one node")
    if fit.tokens_per_s and hourly is not None:
        served = fit.served_tokens_per_s or fit.tokens_per_s
        out["cost_per_million_tokens_usd"] = hourly / (served * 3600) * 1e6
    if instance is None:
        out["notes"].append("no price: estimated on an accelerator, not an instance type")
    return out


def _price(instance: InstanceType, req: EstimateRequest) -> Price | None:
    prices = [
        p
        for p in instance.prices
        if purchase_matches(req.purchase, p.purchase)
        and (req.region is None or p.region == req.region)
    ]
    if not prices:
        where = f" in {req.region}" if req.region else ""
        how = req.purchase.value if req.purchase else "any"
        raise InputError(f"{instance.id} has no {how} price{where} in the catalog")
    return min(prices, key=lambda p: (p.hourly_usd, p.region))
