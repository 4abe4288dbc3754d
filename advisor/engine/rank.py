"""Stage 2, ranking: an explicit objective, the workload's soft preferences, and the reasons."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.engine.candidates import CloudCandidate, EdgeCandidate, effective_peak
from advisor.engine.checks import Sizing
from advisor.models import FormFactor, Price, WorkloadProfile
from advisor.workload import Workload

OBJECTIVE_WORDS = {
    "cheapest": "lowest hourly price",
    "performance": "highest peak throughput",
    "price_performance": "most throughput per dollar",
}


@dataclass(slots=True)
class Feasible:
    """A candidate that passed every hard constraint, with what ranking needs."""

    cloud: CloudCandidate | None
    edge: EdgeCandidate | None
    sizing: Sizing
    price: Price | None
    hourly_usd: float | None
    power_w: float
    perf: float  # dense peak at the workload's precision, all rented GPUs (TFLOP/s or TOPS)
    perf_precision: str
    penalty: float  # product of (1 + penalty) for each unmet preference
    value: float = 0.0  # objective value after penalties; lower is better
    sort_id: str = ""


def feasible_cloud(c: CloudCandidate, s: Sizing, price: Price, p: WorkloadProfile) -> Feasible:
    gpus = s.nodes * c.instance.gpu_count if c.is_gpu else 0
    precision, peak = effective_peak(c.hardware.peak_tflops, p.key_precision)
    perf = peak * gpus if c.is_gpu else peak * s.nodes
    return Feasible(
        c,
        None,
        s,
        price,
        price.hourly_usd * s.nodes,
        c.per_node_power_w * s.nodes,
        perf,
        precision,
        _penalty_cloud(c, p),
        sort_id=f"{c.instance.id}|{price.region}|{price.purchase.value}",
    )


def feasible_edge(e: EdgeCandidate) -> Feasible:
    return Feasible(
        None,
        e,
        Sizing(1, 1),
        None,
        None,
        e.power_w,
        e.int8_tops,
        "int8",
        1.0,
        sort_id=f"{e.device.id}|{e.power_w:012.3f}",
    )


def _penalty_cloud(c: CloudCandidate, p: WorkloadProfile) -> float:
    factor = 1.0
    if _link_not_preferred(c, p):
        factor *= 1 + p.preference_penalty
    if p.prefer_form_factor is not None and c.hardware.form_factor != p.prefer_form_factor:
        factor *= 1 + p.preference_penalty
    return factor


def _link_not_preferred(c: CloudCandidate, p: WorkloadProfile) -> bool:
    multi_gpu = c.is_gpu and c.instance.gpu_count > 1
    return bool(p.prefer_gpu_link) and multi_gpu and c.instance.gpu_link not in p.prefer_gpu_link


def assign_values(items: list[Feasible], objective: str) -> None:
    """Objective value, lower is better, so one sort serves every objective."""
    for f in items:
        # Edge devices carry no hourly price: their "cost" is the power they draw.
        cost = f.hourly_usd if f.hourly_usd is not None else f.power_w
        if objective == "cheapest":
            f.value = cost * f.penalty
        elif objective == "performance":
            f.value = -f.perf / f.penalty
        else:
            f.value = -(f.perf / cost) / f.penalty if cost else 0.0


def rank(items: list[Feasible], objective: str, limit: int) -> list[tuple[Feasible, float]]:
    """Best first, deterministic (ties broken by price, then id), each with a score in (0, 1]."""
    assign_values(items, objective)
    items.sort(key=lambda f: (f.value, f.hourly_usd or 0.0, f.sort_id))
    top = items[:limit]
    if not top:
        return []
    best = top[0].value
    out = []
    for f in top:
        if objective == "cheapest":
            score = best / f.value if f.value else 1.0
        else:
            score = f.value / best if best else 0.0
        out.append((f, round(score, 4)))
    return out


def reasons(
    f: Feasible, w: Workload, p: WorkloadProfile, objective: str, rank_no: int
) -> list[str]:
    if f.edge is not None:
        return _edge_reasons(f.edge, w, objective, rank_no)
    c = f.cloud
    assert c is not None and f.price is not None and f.hourly_usd is not None
    it, hw, s = c.instance, c.hardware, f.sizing
    out = []
    if c.is_gpu:
        total_gb = s.nodes * it.gpu_count * hw.memory_gb
        each = f"{hw.memory_gb:g} GB each, {total_gb:g} GB total"
        line = f"{s.nodes * it.gpu_count} x {hw.name} ({each})"
        if w.memory_gb:
            line += f" hold the {w.memory_gb:g} GB needed ({s.gpus} GPU(s) by memory)"
        out.append(line)
    else:
        out.append(
            f"CPU-only ({hw.name}), {it.vcpus} vCPUs and {it.memory_gib:g} GiB RAM per node"
            + (f", enough for the {w.memory_gb:g} GB needed" if w.memory_gb else "")
        )
    if s.nodes > 1:
        out.append(
            f"spans {s.nodes} nodes over {it.network_gbps:g} Gbit/s; {p.id} scales out "
            f"(needs >= {p.min_multi_node_network_gbps:g} Gbit/s between nodes)"
        )
    if w.interconnect_gb_s:
        out.append(
            f"{it.gpu_link.value} at {it.interconnect_gb_s:g} GB/s per GPU meets the "
            f"{w.interconnect_gb_s:g} GB/s interconnect requirement"
        )
    if w.power_budget_w is not None:
        out.append(f"draws {f.power_w:g} W (TDP), within the {w.power_budget_w:g} W budget")
    out.append(
        f"${f.hourly_usd:,.2f}/h {f.price.purchase.value} in {f.price.region} "
        f"(price as of {f.price.as_of.isoformat()})"
    )
    if objective != "cheapest" and f.perf:
        per_dollar = (
            f" = {f.perf / f.hourly_usd:,.0f} per $/h" if objective == "price_performance" else ""
        )
        out.append(f"{f.perf:,.0f} dense {f.perf_precision} TFLOP/s peak{per_dollar}")
    if f.penalty > 1:
        if (
            p.prefer_gpu_link
            and c.is_gpu
            and it.gpu_count > 1
            and it.gpu_link not in p.prefer_gpu_link
        ):
            links = "/".join(link.value for link in p.prefer_gpu_link)
            out.append(
                f"scored {p.preference_penalty:.0%} worse: GPUs linked by {it.gpu_link.value}, "
                f"{p.id} prefers {links}"
            )
        if p.prefer_form_factor is not None and hw.form_factor != p.prefer_form_factor:
            out.append(
                f"scored {p.preference_penalty:.0%} worse: {p.id} prefers "
                f"{p.prefer_form_factor.value} hardware"
            )
    out.append(f"ranked {rank_no} by {OBJECTIVE_WORDS[objective]}")
    return out


def _edge_reasons(e: EdgeCandidate, w: Workload, objective: str, rank_no: int) -> list[str]:
    mode = f" in its {e.mode} power mode" if e.mode else ""
    out = [f"{e.device.name}{mode} draws {e.power_w:g} W"]
    if w.power_budget_w is not None:
        out[0] += f", within the {w.power_budget_w:g} W budget"
    tops = f"{e.int8_tops:.3g} dense int8 TOPS"
    if e.tops_estimated:
        tops += f" (estimated: scaled by power from the {e.device.tdp_w:g} W figure)"
    out.append(f"{tops}, {e.device.memory_gb:g} GB memory")
    if e.device.form_factor == FormFactor.edge and objective == "cheapest":
        out.append("edge devices carry no hourly price: ranked by power draw instead")
    else:
        out.append(f"ranked {rank_no} by {OBJECTIVE_WORDS[objective]}")
    return out
