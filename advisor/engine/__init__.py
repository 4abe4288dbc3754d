"""The rule engine: feasibility, then ranking, with reasons for every choice and rejection.

Pure and deterministic: the same catalog and workload always give the same result.
"""

from __future__ import annotations

from advisor.catalog import Catalog
from advisor.engine.candidates import CloudCandidate, candidate_index
from advisor.engine.checks import (
    Sizing,
    Violation,
    edge_violations,
    offering_violations,
    size_cloud,
    static_violations,
)
from advisor.engine.explain import AlternativeTracker, explain_chosen, explain_none
from advisor.engine.rank import (
    OBJECTIVE_WORDS,
    Feasible,
    feasible_cloud,
    feasible_edge,
    rank,
    reasons,
)
from advisor.engine.result import Alternative, Recommendation, Rejection, Result
from advisor.errors import InputError
from advisor.models import Price, WorkloadProfile
from advisor.suggest import unknown
from advisor.workload import Workload

__all__ = ["Alternative", "Recommendation", "Rejection", "Result", "recommend"]


def recommend(catalog: Catalog, workload: Workload) -> Result:
    profile = _profile(catalog, workload)
    _check_request(catalog, workload)
    objective = workload.objective or profile.default_objective
    index = candidate_index(catalog)
    feasible: list[Feasible] = []
    rejected: list[Rejection] = []
    tracker = AlternativeTracker()

    for c in index.cloud:
        _evaluate_cloud(c, workload, profile, feasible, rejected, tracker)

    edge_misses: dict[str, list[list[Violation]]] = {}
    edge_ok: set[str] = set()
    for e in index.edge:
        violations = edge_violations(e, workload, profile)
        if not violations:
            feasible.append(feasible_edge(e))
            edge_ok.add(e.device.id)
            continue
        edge_misses.setdefault(e.device.id, []).append(violations)
        v = violations[0]
        if len(violations) == 1 and v.constraint:
            label = f"{e.device.name} ({e.mode} mode)" if e.mode else e.device.name
            tracker.offer(v.constraint, v.relax_to, 0.0, label)
    for device_id in sorted(edge_misses.keys() - edge_ok):
        rejected.append(_rejection(device_id, min(edge_misses[device_id], key=len)))

    ranked = rank(feasible, objective, workload.limit)
    recommendations = tuple(
        _recommendation(f, score, reasons(f, workload, profile, objective, i + 1))
        for i, (f, score) in enumerate(ranked)
    )
    rejected.sort(key=lambda r: r.id)
    alternatives = tracker.alternatives() if not recommendations else []
    if recommendations:
        explanation = explain_chosen(
            len(feasible), len(recommendations), OBJECTIVE_WORDS[objective], profile.id
        )
    else:
        explanation = explain_none(rejected, alternatives, profile.id)
    return Result(
        workload=profile.id,
        objective=objective,
        recommendations=recommendations,
        rejected=tuple(rejected),
        alternatives=tuple(alternatives),
        explanation=explanation,
        feasible_count=len(feasible),
    )


def _evaluate_cloud(
    c: CloudCandidate,
    w: Workload,
    p: WorkloadProfile,
    feasible: list[Feasible],
    rejected: list[Rejection],
    tracker: AlternativeTracker,
) -> None:
    sizing = size_cloud(c, w, p)
    static = static_violations(c, sizing, w, p)
    region, purchase, budget, nodes = w.region, w.purchase, w.max_hourly_usd, sizing.nodes
    any_feasible = False
    closest: tuple[int, float, Price] | None = None
    for price in c.prices:
        # Counted inline (no objects) because this loop runs once per priced offering.
        bad = (
            (region is not None and price.region != region)
            + (purchase is not None and price.purchase != purchase)
            + (budget is not None and price.hourly_usd * nodes > budget)
        )
        if not static and not bad:
            feasible.append(feasible_cloud(c, sizing, price, p))
            any_feasible = True
            continue
        total = len(static) + bad
        if total == 1:
            _offer_alternative(c, sizing, price, static, w, tracker)
        if not any_feasible and (closest is None or (total, price.hourly_usd) < closest[:2]):
            closest = (total, price.hourly_usd, price)
    if any_feasible:
        return
    violations = list(static)
    if closest is not None:
        violations += offering_violations(closest[2], nodes, w)
    rejected.append(_rejection(c.instance.id, violations))


def _offer_alternative(
    c: CloudCandidate,
    sizing: Sizing,
    price: Price,
    static: list[Violation],
    w: Workload,
    tracker: AlternativeTracker,
) -> None:
    v = static[0] if static else offering_violations(price, sizing.nodes, w)[0]
    if v.constraint is None:
        return
    hourly = price.hourly_usd * sizing.nodes
    where = f"{c.instance.provider} {price.region}, {price.purchase.value}"
    label = f"{c.instance.id} ({where}, ${hourly:,.2f}/h)"
    tracker.offer(v.constraint, v.relax_to, hourly, label)


def _rejection(entry_id: str, violations: list[Violation]) -> Rejection:
    codes = tuple(dict.fromkeys(v.code for v in violations))
    return Rejection(entry_id, codes, tuple(v.sentence for v in violations))


def _recommendation(f: Feasible, score: float, why: list[str]) -> Recommendation:
    if f.edge is not None:
        e = f.edge
        return Recommendation(
            instance_type=None,
            device=e.device.id,
            provider=None,
            accelerator=e.device.id,
            gpu_count=1,
            nodes=1,
            region=None,
            purchase=None,
            hourly_usd=None,
            power_w=e.power_w,
            power_mode=e.mode,
            score=score,
            reasons=tuple(why),
        )
    c, price = f.cloud, f.price
    assert c is not None and price is not None
    return Recommendation(
        instance_type=c.instance.id,
        device=None,
        provider=c.instance.provider,
        accelerator=c.hardware.id,
        gpu_count=f.sizing.nodes * c.instance.gpu_count,
        nodes=f.sizing.nodes,
        region=price.region,
        purchase=price.purchase.value,
        hourly_usd=price.hourly_usd * f.sizing.nodes,
        power_w=f.power_w,
        power_mode=None,
        score=score,
        reasons=tuple(why),
    )


def _profile(catalog: Catalog, w: Workload) -> WorkloadProfile:
    profile = catalog.workloads.get(w.workload)
    if profile is None:
        raise InputError(unknown("workload", w.workload, catalog.workloads))
    return profile


def _check_request(catalog: Catalog, w: Workload) -> None:
    if w.region is not None and w.region not in catalog.regions:
        raise InputError(unknown("region", w.region, catalog.regions))
    if w.provider is not None and w.provider not in catalog.providers:
        raise InputError(unknown("provider", w.provider, catalog.providers))
