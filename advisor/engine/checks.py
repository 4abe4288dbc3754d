"""Stage 1, feasibility: the hard constraints, each failure a Violation with a code and a sentence.

Checks never stop at the first failure: knowing that a candidate fails *only* the power budget is
what lets the engine suggest "relax the power budget to 40 W".
"""

from __future__ import annotations

import math
from typing import NamedTuple

from advisor.catalog.models import Price, WorkloadProfile
from advisor.engine.candidates import CloudCandidate, EdgeCandidate
from advisor.perf.fitting import Fit, WorkPlan
from advisor.request import Workload


class Violation(NamedTuple):
    code: str
    constraint: str | None  # the request field that could be relaxed; None = not relaxable
    sentence: str
    relax_to: float | str | None = None


class Sizing(NamedTuple):
    gpus: int  # GPUs needed (0 for CPU-only)
    nodes: int
    spans_nodes: bool = False  # one copy of the work split across nodes (needs scale-out)
    fit: Fit | None = None  # when sized from a model (advisor/perf/fitting.py)


def size_cloud(
    c: CloudCandidate, w: Workload, p: WorkloadProfile, plan: WorkPlan | None = None
) -> Sizing:
    """GPUs and nodes: fill GPUs inside one node first, spill to more nodes only when needed."""
    if plan is not None:
        if not c.is_gpu:
            return Sizing(0, 1)
        fit = plan.fit(c.hardware, c.instance.gpu_count)
        return Sizing(fit.gpus_needed, max(fit.nodes, 1), fit.spans_nodes, fit)
    need_gb = w.memory_gb or 0.0
    if c.is_gpu:
        per_gpu = c.hardware.memory_gb
        by_memory = math.ceil(need_gb / per_gpu - 1e-9) if per_gpu else 1
        wanted = p.default_gpu_count if w.gpu_count is None else w.gpu_count
        gpus = max(1, by_memory, wanted)
        nodes = math.ceil(gpus / c.instance.gpu_count)
        return Sizing(gpus, nodes, nodes > 1)
    nodes = max(1, math.ceil(need_gb / c.per_node_memory_gb - 1e-9))
    return Sizing(0, nodes, nodes > 1)


def static_violations(
    c: CloudCandidate, s: Sizing, w: Workload, p: WorkloadProfile
) -> list[Violation]:
    """Constraints that depend on the instance type, not on which of its offerings."""
    out: list[Violation] = []
    it, hw = c.instance, c.hardware
    if hw.form_factor not in p.form_factors:
        kinds = ", ".join(f.value for f in p.form_factors)
        out.append(
            Violation(
                "WORKLOAD_MISMATCH",
                None,
                f"{hw.name} is {hw.form_factor.value} hardware; {p.id} runs on: {kinds}",
            )
        )
    if c.is_gpu and hw.memory_gb < p.min_gpu_memory_gb:
        out.append(
            Violation(
                "GPU_MEMORY_TOO_SMALL",
                None,
                f"{hw.memory_gb:g} GB per GPU is below the {p.min_gpu_memory_gb:g} GB "
                f"that {p.id} needs on each GPU",
            )
        )
    if s.fit is not None and s.fit.unfit:
        out.append(Violation("MEMORY_INSUFFICIENT", None, s.fit.unfit))
    elif w.sized and not c.is_gpu:
        out.append(Violation("NO_GPU", None, "CPU-only: a sized model runs on GPUs"))
    if s.spans_nodes:
        if s.fit is not None:
            what = f"{s.fit.memory_total_gb:,.0f} GB ({w.model or f'{w.params_b:g}B'})"
        else:
            what = f"{w.memory_gb:g} GB" if w.memory_gb else f"{s.gpus} GPUs"
        if not p.scale_out:
            by_memory = bool(w.memory_gb) or s.fit is not None
            out.append(
                Violation(
                    "MEMORY_INSUFFICIENT" if by_memory else "GPU_COUNT_TOO_HIGH",
                    ("memory_gb" if w.memory_gb else None) if by_memory else "gpu_count",
                    f"{what} needs {s.nodes} nodes "
                    f"({c.per_node_memory_gb:g} GB each) and {p.id} runs on one node",
                    c.per_node_memory_gb if w.memory_gb else (None if by_memory else it.gpu_count),
                )
            )
        elif it.network_gbps < p.min_multi_node_network_gbps:
            out.append(
                Violation(
                    "NETWORK_TOO_SLOW",
                    None,
                    f"{what} needs {s.nodes} nodes, but the {it.network_gbps:g} Gbit/s "
                    f"network is below the {p.min_multi_node_network_gbps:g} Gbit/s {p.id} "
                    "needs between nodes",
                )
            )
    if not c.is_gpu and w.gpu_count:
        out.append(
            Violation("NO_GPU", "gpu_count", "CPU-only: no GPU", 0),
        )
    if w.interconnect_gb_s and it.interconnect_gb_s < w.interconnect_gb_s:
        have = (
            f"{it.interconnect_gb_s:g} GB/s per GPU ({it.gpu_link.value})"
            if it.interconnect_gb_s
            else f"no GPU-to-GPU link ({it.gpu_link.value})"
        )
        out.append(
            Violation(
                "INTERCONNECT_TOO_SLOW",
                "interconnect_gb_s",
                f"has {have}, below the required {w.interconnect_gb_s:g} GB/s",
                it.interconnect_gb_s or None,
            )
        )
    power = c.per_node_power_w * s.nodes
    if w.power_budget_w is not None and power > w.power_budget_w:
        out.append(
            Violation(
                "POWER_OVER_BUDGET",
                "power_budget_w",
                f"{s.nodes * it.gpu_count or s.nodes} x {hw.name} draw {power:g} W, above the "
                f"{w.power_budget_w:g} W budget",
                power,
            )
        )
    if w.provider is not None and it.provider != w.provider:
        out.append(
            Violation(
                "PROVIDER_EXCLUDED",
                "provider",
                f"offered by {it.provider}, not {w.provider}",
                it.provider,
            )
        )
    if not c.offers:
        out.append(Violation("NO_PRICE", None, "the catalog has no price for it"))
    return out


def offering_violations(price: Price, nodes: int, w: Workload) -> list[Violation]:
    out: list[Violation] = []
    if w.region is not None and price.region != w.region:
        out.append(
            Violation("REGION_NOT_OFFERED", "region", f"not offered in {w.region}", price.region)
        )
    if w.purchase is not None and price.purchase != w.purchase:
        out.append(
            Violation(
                "PURCHASE_UNAVAILABLE",
                "purchase",
                f"no {w.purchase.value} price",
                price.purchase.value,
            )
        )
    hourly = price.hourly_usd * nodes
    if w.max_hourly_usd is not None and hourly > w.max_hourly_usd:
        out.append(
            Violation(
                "OVER_BUDGET",
                "max_hourly_usd",
                f"costs ${hourly:,.2f}/h in {price.region} ({price.purchase.value}), above the "
                f"${w.max_hourly_usd:,.2f}/h budget",
                round(hourly, 4),
            )
        )
    return out


def edge_violations(e: EdgeCandidate, w: Workload, p: WorkloadProfile) -> list[Violation]:
    out: list[Violation] = []
    d = e.device
    mode = f" in its {e.mode} mode" if e.mode else ""
    if d.form_factor not in p.form_factors:
        kinds = ", ".join(f.value for f in p.form_factors)
        out.append(
            Violation(
                "WORKLOAD_MISMATCH", None, f"{d.name} is an edge device; {p.id} runs on: {kinds}"
            )
        )
    if w.memory_gb is not None and d.memory_gb < w.memory_gb:
        out.append(
            Violation(
                "MEMORY_INSUFFICIENT",
                "memory_gb",
                f"{d.memory_gb:g} GB of memory is below the {w.memory_gb:g} GB needed",
                d.memory_gb,
            )
        )
    if w.power_budget_w is not None and e.power_w > w.power_budget_w:
        out.append(
            Violation(
                "POWER_OVER_BUDGET",
                "power_budget_w",
                f"draws {e.power_w:g} W{mode}, above the {w.power_budget_w:g} W budget",
                e.power_w,
            )
        )
    for field, value in (("region", w.region), ("provider", w.provider)):
        if value is not None:
            out.append(
                Violation(
                    "NOT_A_CLOUD_OFFERING", field, f"an edge device has no cloud {field}", None
                )
            )
    if w.max_hourly_usd is not None:
        out.append(
            Violation(
                "NO_HOURLY_PRICE", "max_hourly_usd", "an edge device has no hourly price", None
            )
        )
    if w.gpu_count and w.gpu_count > 1:
        out.append(Violation("GPU_COUNT_TOO_HIGH", "gpu_count", "one device, one accelerator", 1))
    if w.interconnect_gb_s:
        out.append(
            Violation(
                "INTERCONNECT_TOO_SLOW", "interconnect_gb_s", "an edge device has no GPU link", None
            )
        )
    return out
