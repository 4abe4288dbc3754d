"""The rule engine: feasibility, then ranking, with reasons for every choice and rejection.

Pure and deterministic: the same catalog and workload always give the same result.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache, partial
from operator import attrgetter
from typing import TYPE_CHECKING, cast

from advisor.catalog import Catalog
from advisor.catalog.capability import mismatch_sentence, runs
from advisor.catalog.models import FormFactor, Purchase, SpotPolicy, WorkloadProfile
from advisor.catalog.queries import check_region
from advisor.did_you_mean import unknown
from advisor.engine import budget
from advisor.engine.alternatives import (
    Placed,
    across_nodes,
    lower_precision,
    nearest_alternatives,
)
from advisor.engine.candidates import (
    CandidateIndex,
    CloudCandidate,
    GroupPool,
    Offer,
    candidate_index,
    kept,
)
from advisor.engine.checks import (
    CODE_WORDS,
    GROUP_SIGNATURE,
    OVER_BUDGET,
    STATIC,
    FaultGroup,
    FaultMasks,
    GroupFaults,
    edge_violations,
    fault_groups,
    fault_masks,
    group_faults,
    offer_codes,
    offering_violations,
    request_fault_masks,
    request_faults,
    static_codes,
    static_violations,
)
from advisor.engine.constraints import Violation, applicable
from advisor.engine.explain import explain_chosen, explain_none
from advisor.engine.objective import (
    OBJECTIVE_WORDS,
    Valuation,
    objective_value,
    ranked_figure,
)
from advisor.engine.placement import KeyPlacer, Placement, placer
from advisor.engine.rank import (
    WORDS_KEPT_PER_FILTERS,
    Bound,
    Hit,
    edge_hit,
    penalty_figure,
    rank,
    reasons,
    sized_figures,
    valuation,
)
from advisor.engine.result import (
    Alternative,
    Recommendation,
    RejectedCount,
    Rejection,
    Result,
    SizedFigures,
    built,
)
from advisor.engine.spot_risk import spot_case
from advisor.errors import InputError
from advisor.perf.cost import edge_cost_per_year, option_hourly_usd
from advisor.perf.spot import SpotPlan, too_risky
from advisor.request import Workload, refuse_idle_fields

if TYPE_CHECKING:  # the planners load with the first sized request (recommend), the fleet's
    # calibration with --server
    from advisor.perf.calibration import Calibration
    from advisor.planning.plans import Plan

__all__ = ["Alternative", "Recommendation", "Rejection", "Result", "SizedFigures", "recommend"]

# A candidate group the pass placed and checked (alternatives.py Placed): (the group, its
# placement, the static entries it fails: their bits (checks.py static_faults) for a request
# without a model, the registry's violations for one with a model).
Checked = Placed

# An option none of whose offerings fits: (the option, its node count, its spot case (or None),
# the position in its offers of the offering that explains it (_closest_offer), the checks that
# offering fails (checks.py offer_faults' bits)).
OfferRejection = tuple[
    CloudCandidate, int, tuple[CloudCandidate, SpotPlan, SpotPolicy] | None, int, int
]


UNLIMITED = 2**62  # a Bound that keeps every hit


def recommend(
    catalog: Catalog,
    workload: Workload,
    fleet: Mapping[str, Calibration] | None = None,
    min_fleet_reports: int = 5,
    listed: bool = True,
) -> Result:
    """`fleet` maps accelerator ids to the fleet's measured matmul ratio (from stored probe
    reports); with enough reports it replaces the catalog's efficiency when sizing a model.
    `listed`: the result lists every rejected candidate with its reasons; else it counts and
    summarises them only (rejected_count, rejected_summary) and writes no reason."""
    profile = _profile(catalog, workload)
    _check_request(catalog, workload, profile)
    if workload.sized:
        from advisor.planning.plans import plan_for  # only a sized request needs a planner

    plan = (
        plan_for(catalog, workload.work(), profile, fleet, min_fleet_reports)
        if workload.sized
        else None
    )
    objective = workload.objective or _default_objective(workload, profile)
    index = candidate_index(catalog, GROUP_SIGNATURE)
    hits: list[Hit] = []
    rejected = _Rejected(_mismatches(catalog, index, profile))
    checked = _Checked()
    # A total budget is checked on every feasible offering's cost to completion (budget.py):
    # evaluated offering by offering, none left out by the limit (a copy past the request's
    # own bound: the ranking below takes the request's limit).
    budget_usd = workload.budget_usd
    evaluated = (
        workload
        if budget_usd is None
        else workload.model_copy(update={"each_offering": True, "limit": UNLIMITED})
    )
    feasible, types = _evaluate_cloud(
        index, evaluated, profile, plan, objective, hits, rejected, checked, listed
    )
    if FormFactor.edge in profile.form_factors:
        before = len(hits)
        types += _evaluate_edge(index, workload, profile, objective, hits, rejected.rows)
        feasible += len(hits) - before
    raise_budget = None
    if budget_usd is not None:  # every feasible offering is a hit: count those within it
        within, over, raise_budget = budget.split(hits, budget_usd)
        rejected.rows.extend(over)
        feasible -= len(hits) - len(within)
        types -= len(over)
        hits = within if workload.each_offering else budget.best_each(within)

    ranked = rank(hits, objective, workload.limit)
    recommendations = tuple(
        _recommendation(
            h, score, reasons(h, workload, profile, objective, i + 1), objective, profile
        )
        for i, (h, score) in enumerate(ranked)
    )
    code_counts = rejected.code_counts()
    if recommendations:
        alternatives: list[Alternative] = []
        explanation = explain_chosen(
            feasible,
            types,
            len(recommendations),
            OBJECTIVE_WORDS[objective],
            profile.id,
            workload.each_offering,
        )
    elif raise_budget is not None:  # every option fits but for the budget
        alternatives = [raise_budget]
        explanation = explain_none(code_counts, alternatives, profile.id)
    else:
        # Only now is it worth finding what single relaxation would help (a second, rare pass).
        alternatives = nearest_alternatives(index, checked.groups(), workload, profile)

        def answer(w: Workload) -> Result:
            return recommend(catalog, w, fleet, min_fleet_reports, listed=False)

        alternatives += lower_precision(workload, profile, answer)
        alternatives += across_nodes(workload, profile, answer)
        explanation = explain_none(code_counts, alternatives, profile.id)
    return built(
        Result,
        {
            "workload": profile.id,
            "objective": objective,
            "explanation": explanation,
            "feasible_count": feasible,
            "feasible_types": types,
            "recommendations": recommendations,
            "rejected_count": sum(code_counts.values()),
            "rejected_summary": rejected_summary(code_counts),
            "rejected": rejected.listing(workload) if listed else (),
            "alternatives": tuple(alternatives),
        },
    )


def _mismatches(
    catalog: Catalog, index: CandidateIndex, p: WorkloadProfile
) -> tuple[Rejection, ...]:
    """Hardware this workload never runs on: one reason says it all, and it is known before
    looking at the request, so it is worked out once per catalog and workload type."""
    cached = index.memo.get(p.id)
    if cached is not None:
        return cached
    out = [
        Rejection(
            id=c.instance.id, codes=_MISMATCH, reasons=(mismatch_sentence(group[0].hardware, p),)
        )
        for group in index.cloud_groups
        if not runs(group[0].hardware, p)
        for c in group
    ]
    if FormFactor.edge not in p.form_factors:
        for device_id in sorted({e.device.id for e in index.edge}):
            sentence = (mismatch_sentence(catalog.accelerators[device_id], p),)
            out.append(Rejection(id=device_id, codes=_MISMATCH, reasons=sentence))
    index.memo[p.id] = tuple(out)
    return index.memo[p.id]


def _evaluate_cloud(
    index: CandidateIndex,
    w: Workload,
    p: WorkloadProfile,
    plan: Plan | None,
    objective: str,
    hits: list[Hit],
    rejected: _Rejected,
    checked: _Checked,
    listed: bool,
) -> tuple[int, int]:
    """Adds the options worth ranking to `hits`, the rejected ones to `rejected` and each group
    the workload runs on, placed and checked, to `checked` (the nearest alternatives read them
    when nothing fits); returns how many priced offerings are feasible and how many instance
    types they belong to (a listing shows one row a type: the counts must say which they
    count). A request without a model whose answer lists no rejection (`listed` False) is
    checked by fault bits alone (checks.py static_faults); else each group by the registry, its
    sentences written as it goes."""
    if plan is None and not listed:
        return _evaluate_unsized(index, w, p, objective, hits, rejected, checked)
    feasible = types = 0
    bound = Bound(w.limit)
    registry = applicable(STATIC, w, p)
    # The entries a group runs, by 2 x (it fails a request-free entry) + (the request spans its
    # nodes): groups that pass every request-free entry are checked by the others alone, and
    # groups that hold the request in one node skip the entries that only fail across nodes.
    per_request = tuple(entry for entry in registry if not entry.request_free)
    entries = (
        tuple(entry for entry in per_request if not entry.spans_only),
        per_request,
        tuple(entry for entry in registry if not entry.spans_only),
        registry,
    )
    placed = placer(w, p, plan)
    groups = index.cloud_groups
    for g in _running(index, p):  # the others are in _mismatches
        i, free_faults = g.group, g.free
        group = groups[i]
        # Members share everything the static checks and placement read (GROUP_SIGNATURE).
        placement = placed(group[0])
        checks = entries[2 * (free_faults != 0) + placement.spans_nodes]
        static = static_violations(group[0], placement, w, p, checks) if checks else ()
        checked.found.append((g, placement, static))
        if static:  # the whole group is out for reasons that no offering changes
            codes, sentences = _codes_and_sentences(static)
            rejected.rows.extend(Rejection(c.instance.id, codes, sentences) for c in group)
            continue
        # So do the option's peak, soft-preference penalty and objective (rank.py reads only
        # signature attributes): valued once per group.
        valuation = _group_valuation(index, i, placement, p, objective, w.purchase)
        spot_free = placement.fit is None or placement.fit.hours is None or p.spot is None
        if spot_free and valuation.rises and not w.each_offering:
            pool = index.group_pool(i, w.region, w.purchase)
            offers, members = _evaluate_group(
                group, pool, placement, w, valuation, bound, hits, rejected.offers
            )
            feasible += offers
            types += members
            continue
        for c in group:
            offers = _evaluate_offers(c, placement, w, p, valuation, bound, hits, rejected.offers)
            feasible += offers
            types += offers > 0
    return feasible, types


# Valuations kept per catalog: the shipped catalog's groups, workload types and objectives over
# the node counts of everyday requests take a few thousand; a stream of ever larger memory
# requirements (each a new node count) must not grow the service without end.
VALUATIONS_KEPT = 20_000


def _group_valuation(
    index: CandidateIndex,
    i: int,
    placement: Placement,
    p: WorkloadProfile,
    objective: str,
    purchase: Purchase | None,
) -> Valuation:
    """Group `i`'s valuation (rank.py). Without a model it depends on the group, its node count,
    the workload type and the objective alone, which many requests share: kept on the index.
    With one, on the request's purchase option too (a Capacity Block bills its whole block)."""
    if placement.fit is not None:
        return valuation(index.cloud_groups[i][0], placement, p, objective, purchase)
    key = (i, placement.nodes, p.id, objective)
    found = index.valuations.get(key)
    if found is None:
        if len(index.valuations) >= VALUATIONS_KEPT:
            index.valuations.clear()  # bounded; rebuilt from the requests that follow
        found = index.valuations[key] = valuation(index.cloud_groups[i][0], placement, p, objective)
    return found


def _running(index: CandidateIndex, p: WorkloadProfile) -> tuple[GroupFaults, ...]:
    """The cloud groups this workload type runs on, each with the request-free static checks it
    fails (checks.py request_free_faults) and what the other static checks read of it
    (checks.py GroupFaults): known before any request, so worked out once per catalog and
    workload type."""
    found = index.running.get(p.id)
    if found is None:
        keys: dict[tuple[object, ...], int] = {}
        found = tuple(
            group_faults(i, g, keys.setdefault(g[0].placement_key, len(keys)), p)
            for i, g in enumerate(index.cloud_groups)
            if runs(g[0].hardware, p)
        )
        index.running[p.id] = found
    return found


def _evaluate_unsized(
    index: CandidateIndex,
    w: Workload,
    p: WorkloadProfile,
    objective: str,
    hits: list[Hit],
    rejected: _Rejected,
    checked: _Checked,
) -> tuple[int, int]:
    """_evaluate_cloud for a request without a model whose answer lists no rejection, the
    service's everyday question: each placement key placed once, the static checks as fault
    bits set on every group at once (checks.py FaultMasks: the bits checks.py static_faults
    sets, without its calls or a pass over the groups), the groups that fail one counted by
    their faults, and a pass over the others alone, valuations and pools kept on the index. The
    same hits, counts and checked groups as the registry's pass (tests/test_constraints.py
    compares the two answers)."""
    running = _running(index, p)  # the others are in _mismatches
    masks = _masks(index, p, running)
    need_gb, serving = w.memory_gb or 0.0, p.sizing == "inference"
    wanted = p.default_gpu_count if w.gpu_count is None else w.gpu_count
    key_placer = index.placers.get(p.id)
    if key_placer is None:
        key_placer = index.placers[p.id] = KeyPlacer(masks.keys)
    placements = key_placer.place(need_gb, wanted, serving)
    parts = _fault_parts(request_fault_masks(masks, placements, request_faults(w, p)), masks)
    seen = rejected.static_faults
    passing = masks.every
    for groups, faults in parts:
        seen[faults] = seen.get(faults, 0) + masks.members(groups)
        passing &= ~groups
    checked.later = partial(_checked_later, running, placements, parts)

    feasible = types = 0
    bound = Bound(w.limit)
    valuations, profile_id, purchase = index.valuations, p.id, w.purchase
    group_wise = not w.each_offering
    unbudgeted, skip_flagged = w.max_hourly_usd is None, not w.include_flagged_prices
    rows = _pass_rows(index, p.id, running, w.region, purchase, skip_flagged)
    while passing:  # the groups that fail no static check, in index order
        low = passing & -passing
        passing ^= low
        i, group, pool, counts, complete, cheapest_usd, key, first = rows[low.bit_length() - 1]
        placement = placements[key]
        nodes = placement.nodes
        valuation = valuations.get((i, nodes, profile_id, objective)) or _group_valuation(
            index, i, placement, p, objective, purchase
        )
        if not (valuation.rises and group_wise):  # each offering valued (no fit: no spot plan)
            counts = _each_offer(group, placement, w, p, valuation, bound, hits, rejected.offers)
        elif not unbudgeted or not complete:
            counts = _evaluate_group(
                group, pool, placement, w, valuation, bound, hits, rejected.offers
            )
        else:
            # Every member priced and no budget: _evaluate_group's first step, inline. The
            # cheapest valued past the bound: no hit and no rejection (most groups of a
            # request); else a group of one member (most groups) is its cheapest offering's hit.
            cost = option_hourly_usd(cheapest_usd, nodes)
            value = valuation.value(cost, None)
            if value <= bound.worst_kept:
                if first is None:
                    counts = _evaluate_group(
                        group, pool, placement, w, valuation, bound, hits, rejected.offers
                    )
                else:
                    bound.add(value)
                    hits.append(Hit(value, cost, first[4], group[0], None, placement, first[3]))
        feasible += counts[0]
        types += counts[1]
    return feasible, types


# A running group as the unsized pass reads it under one request filter (_pass_rows): its index
# in CandidateIndex.cloud_groups, its members, its pool, the pool's counts without a budget,
# whether every member has an offering kept, the cheapest member's price, its placement key and,
# for a group of one member with an offering kept, that offering (None otherwise).
PassRow = tuple[
    int, tuple[CloudCandidate, ...], GroupPool, tuple[int, int], bool, float, int, Offer | None
]


def _pass_rows(
    index: CandidateIndex,
    profile_id: str,
    running: tuple[GroupFaults, ...],
    region: str | None,
    purchase: Purchase | None,
    skip_flagged: bool,
) -> tuple[PassRow, ...]:
    """The workload type's running groups under the request's region, purchase and flagged-price
    filters, each as the pass reads it (PassRow): the same for every request with those
    filters, kept on the index (bounded as its pools are)."""
    key = (profile_id, region, purchase, skip_flagged)
    found = index.pass_rows.get(key)
    if found is None:
        rows = []
        for g in running:
            pool = index.group_pool(g.group, region, purchase)
            counts = pool.unbudgeted[skip_flagged]
            cheapest = pool.cheapest_usd[skip_flagged][0]
            group = index.cloud_groups[g.group]
            first = pool.by_cheapest[skip_flagged][0][1] if len(group) == 1 else None
            complete = counts[1] == g.members
            rows.append((g.group, group, pool, counts, complete, cheapest, g.placement, first))
        found = kept(index.pass_rows)[key] = tuple(rows)
    return found


def _masks(
    index: CandidateIndex, p: WorkloadProfile, running: tuple[GroupFaults, ...]
) -> FaultMasks:
    """checks.py fault_masks of the workload type's running groups, kept on the index."""
    found = index.fault_masks.get(p.id)
    if found is None:
        found = index.fault_masks[p.id] = fault_masks(running)
    return found


def _fault_parts(bits: list[tuple[int, int]], masks: FaultMasks) -> list[tuple[int, int]]:
    """The groups that fail a static check, split by the checks they fail: (groups, their
    fault bits), one entry per combination met (a few). `bits`: each fault bit with the groups
    it is set on (checks.py request_fault_masks)."""
    failing = 0
    for _, groups in bits:
        failing |= groups
    parts = [(failing, 0)] if failing else []
    for bit, groups in bits:
        if groups:
            parts = [
                (part, faults)
                for whole, faults0 in parts
                for part, faults in ((whole & groups, faults0 | bit), (whole & ~groups, faults0))
                if part
            ]
    return parts


def _checked_later(
    running: tuple[GroupFaults, ...],
    placements: Sequence[Placement],
    parts: list[tuple[int, int]],
) -> list[Checked]:
    """The running groups as the fault-bit pass checked them (Checked, in index order): only an
    answer that nothing fits reads them (its nearest alternatives)."""
    faults = [0] * len(running)
    for groups, bits in parts:
        left = groups
        while left:
            low = left & -left
            left ^= low
            faults[low.bit_length() - 1] = bits
    return [(g, placements[g.placement], found) for g, found in zip(running, faults, strict=True)]


def _each_offer(
    group: tuple[CloudCandidate, ...],
    placement: Placement,
    w: Workload,
    p: WorkloadProfile,
    valuation: Valuation,
    bound: Bound,
    hits: list[Hit],
    rejected: list[OfferRejection],
) -> tuple[int, int]:
    """A group's members one by one (_evaluate_offers): the feasible offerings and the members
    with one."""
    feasible = types = 0
    for c in group:
        offers = _evaluate_offers(c, placement, w, p, valuation, bound, hits, rejected)
        feasible += offers
        types += offers > 0
    return feasible, types


def _evaluate_group(
    group: tuple[CloudCandidate, ...],
    pool: GroupPool,
    placement: Placement,
    w: Workload,
    valuation: Valuation,
    bound: Bound,
    hits: list[Hit],
    rejected: list[OfferRejection],
) -> tuple[int, int]:
    """The hot path for the common case, a whole group at once: one best offering per option,
    valued the higher the more it costs (`valuation.rises`), and no spot plan (none is costed, so
    no spot offering is too risky). Members come ordered by their cheapest offering: those with
    one within the budget are a prefix, and the first whose value passes the bound ends the
    ranking (every later one costs as much or more). Returns the number of feasible offerings,
    one bisection of the group's merged pool, and of members with one."""
    nodes = placement.nodes
    skip_flagged = not w.include_flagged_prices
    if w.max_hourly_usd is None:
        feasible, fits = pool.unbudgeted[skip_flagged]
    else:
        budget = w.max_hourly_usd / nodes
        feasible = pool.merged.count(pool.merged.within(budget), False, skip_flagged)
        fits = pool.members_within(budget, skip_flagged)
    order = pool.by_cheapest[skip_flagged]
    for member, offer in order[:fits]:
        assert offer is not None  # within the budget: it has one
        cost = option_hourly_usd(offer[2], nodes)
        value = valuation.value(cost, placement.fit)
        if value > bound.worst_kept:
            break
        bound.add(value)
        hits.append(Hit(value, cost, offer[4], group[member], None, placement, offer[3], None))
    if fits < len(order):
        for member, position, faults in _unfit_members(group, pool, order, fits, w, nodes):
            rejected.append((group[member], nodes, None, position, faults))
    return feasible, fits


def _unfit_members(
    group: tuple[CloudCandidate, ...],
    pool: GroupPool,
    order: tuple[tuple[int, Offer | None], ...],
    fits: int,
    w: Workload,
    nodes: int,
) -> tuple[tuple[int, int, int], ...]:
    """The group's members past the first `fits` of `order`, each with its closest offering
    (_closest_offer). Without a budget that offering is the same for every node count: kept on
    the pool (one per region and purchase filter)."""
    skip_flagged = not w.include_flagged_prices
    if w.max_hourly_usd is None:
        found = pool.closest.get(skip_flagged)
        if found is not None:
            return found
    out = tuple(
        (member, *_closest_offer(group[member], w, nodes, False, skip_flagged))
        for member, _ in order[fits:]
    )
    if w.max_hourly_usd is None:
        pool.closest[skip_flagged] = out
    return out


def _evaluate_edge(
    index: CandidateIndex,
    w: Workload,
    p: WorkloadProfile,
    objective: str,
    hits: list[Hit],
    rejected: list[Rejection],
) -> int:
    """Each device in each power mode; a device is rejected only if no mode fits, with the
    reasons of the mode that misses least. Returns the number of devices that fit."""
    misses: dict[str, list[list[Violation]]] = {}
    fits: set[str] = set()
    for e in index.edge:
        violations = edge_violations(e, w, p)
        if violations:
            misses.setdefault(e.device.id, []).append(violations)
        else:
            hits.append(edge_hit(e, objective))
            fits.add(e.device.id)
    for device_id in sorted(misses.keys() - fits):
        rejected.append(_rejection(device_id, min(misses[device_id], key=len)))
    return len(fits)


def _evaluate_offers(
    c: CloudCandidate,
    placement: Placement,
    w: Workload,
    p: WorkloadProfile,
    valuation: Valuation,
    bound: Bound,
    hits: list[Hit],
    rejected: list[OfferRejection],
) -> int:
    """One statically feasible instance type, where its group cannot be taken at once (each
    offering listed, a costed spot plan, or a value that falls with the price). Returns the
    number of feasible offerings, counted from the option's pool for the request's region and
    purchase (a bisection on the budget, running counts for excluded spot and flagged prices;
    the OFFERING checks of advisor/engine/checks.py, which tests/test_constraints.py holds to
    the same answer). Only offerings that can still be ranked become hits (`bound`): offerings
    come cheapest first and every objective but price_performance is affine in the price with a
    non-negative slope, so once one is valued past the bound, the rest of the option's on-demand
    offerings are too. Spot offerings with a costed plan are valued one by one. Unless the
    request lists each offering, only the option's best one becomes a hit (the bound then holds
    the best value of each option, so pruning stays exact)."""
    nodes = placement.nodes
    budget = None if w.max_hourly_usd is None else w.max_hourly_usd / nodes
    skip_flagged = not w.include_flagged_prices
    pool = c.pool(w.region, w.purchase)
    within = pool.within(budget)
    spot_in_pool = pool.count(within, False, skip_flagged) != pool.count(within, True, skip_flagged)
    spot = spot_case(c, placement, w, p) if spot_in_pool else None
    risky = spot is not None and too_risky(spot[1], spot[2])
    feasible = pool.count(within, risky, skip_flagged)
    if not feasible:
        if c.offers:  # none priced at all is the static NO_PRICE
            spot = spot_case(c, placement, w, p)  # the closest offering may be a spot one
            risky = spot is not None and too_risky(spot[1], spot[2])
            rejected.append((c, nodes, spot, *_closest_offer(c, w, nodes, risky, skip_flagged)))
        return 0
    spot_plan = spot[1] if spot is not None and not risky else None
    offers = pool.offers[:within]
    valued = _valued_offers(c, placement, valuation, offers, (risky, spot_plan), bound, w)
    if w.each_offering:
        for hit in valued:  # lazily: each hit tightens the bound the next one is tested against
            bound.add(hit.value)
            hits.append(hit)
    else:
        best = min(valued, default=None)
        if best is not None:
            bound.add(best.value)
            hits.append(best)
    return feasible


def _valued_offers(
    c: CloudCandidate,
    placement: Placement,
    valuation: Valuation,
    offers: tuple[Offer, ...],
    spot: tuple[bool, SpotPlan | None],
    bound: Bound,
    w: Workload,
) -> Iterator[Hit]:
    """The option's feasible offerings (cheapest first) that can still be ranked, valued.
    `spot`: (its spot offerings are too risky, the spot plan that values them otherwise)."""
    risky, spot_plan = spot
    skip_flagged = not w.include_flagged_prices
    objective, perf, factor, affine, _ = valuation
    for _, o_purchase, hourly, price, sort_id in offers:
        on_spot = o_purchase is Purchase.spot
        # price_usable inline: the per-offering hot loop
        if (risky and on_spot) or (skip_flagged and price.flag is not None):
            continue
        cost = option_hourly_usd(hourly, placement.nodes)
        plan = spot_plan if on_spot else None
        if plan is None and affine is not None:
            value = cost * affine[0] + affine[1]
            if value > bound.worst_kept:
                if spot_plan is None:
                    return  # the option's later offerings cost more: none can be ranked
                continue
        else:
            hours = plan.total_hours if plan is not None else None
            value = objective_value(objective, cost, perf, factor, placement.fit, hours)
            if value > bound.worst_kept:
                continue
        yield Hit(value, cost, sort_id, c, None, placement, price, plan)


def _closest_offer(
    c: CloudCandidate, w: Workload, nodes: int, risky: bool, skip_flagged: bool
) -> tuple[int, int]:
    """The offering of an option none of whose offerings fits that breaks the fewest offering
    checks, one the request's region and purchase allow (failing the budget alone) before one
    they rule out, cheapest first: it explains the rejection ("costs $0.35/h in us-east-1, above
    the budget" rather than "not offered in us-east-1" for a type offered there). Only the first
    (cheapest) offering of each group of faults other than the budget can be it: the budget
    fails the cheaper one no more often. Returns its position in `c.offers` and the checks it
    fails (checks.py offer_faults' bits). The budget decides only which groups' first offering
    it allows, the cheapest ones: one bisection into the option's closest_table."""
    key = ("closest", w.region, w.purchase, risky, skip_flagged)
    table = cast("tuple[tuple[float, ...], tuple[tuple[int, int], ...]] | None", c.words.get(key))
    if table is None:
        table = closest_table(fault_groups(c, w, risky, skip_flagged))
        kept(c.words, WORDS_KEPT_PER_FILTERS)[key] = table
    firsts, closest = table
    budget = w.max_hourly_usd
    if budget is None:
        return closest[len(firsts)]
    return closest[bisect_right(firsts, budget, key=lambda h: option_hourly_usd(h, nodes))]


def closest_table(
    groups: Sequence[FaultGroup],
) -> tuple[tuple[float, ...], tuple[tuple[int, int], ...]]:
    """(each group's first hourly price, ascending; [k]: _closest_offer's answer when the
    budget allows the first offering of the k cheapest groups alone). A group's offering is
    allowed when its hourly cost on the nodes is within the budget (checks.py FaultGroup.within),
    so the groups it allows are those cheapest at their first: a prefix of this order."""
    ranked = sorted(groups, key=lambda g: g.hourly_usd[0])
    closest = []
    for k in range(len(ranked) + 1):
        *_, position, faults = min(
            (
                g.faults.bit_count() + (over := i >= k),
                g.faults != 0,
                g.positions[0],
                g.faults | OVER_BUDGET * over,
            )
            for i, g in enumerate(ranked)
        )
        closest.append((position, faults))
    return tuple(g.hourly_usd[0] for g in ranked), tuple(closest)


class _Checked:
    """The groups a pass placed and checked, in index order: the registry's pass appends each
    (`found`); the fault-bit pass leaves how to list them (`later`), as only an answer that
    nothing fits reads them."""

    __slots__ = ("found", "later")

    def __init__(self) -> None:
        self.found: list[Checked] = []
        self.later: Callable[[], list[Checked]] | None = None

    def groups(self) -> list[Checked]:
        if self.later is not None:
            self.found, self.later = self.later(), None
        return self.found


_MISMATCH = ("WORKLOAD_MISMATCH",)
_CODES = attrgetter("codes")
_ID = attrgetter("id")


class _Rejected:
    """What the pass rules out: the hardware the workload never runs on (`mismatches`, worked
    out once per workload type), candidates with their reasons (`rows`), candidates that an
    answer listing no rejection rules out on static checks, counted by their fault bits
    (`static_faults`: bits -> candidates), and options that no offering fits (`offers`), whose
    reasons are written only where the answer lists them."""

    __slots__ = ("mismatches", "offers", "rows", "static_faults")

    def __init__(self, mismatches: tuple[Rejection, ...]) -> None:
        self.mismatches = mismatches  # each with the one code _MISMATCH
        self.rows: list[Rejection] = []
        self.static_faults: dict[int, int] = {}
        self.offers: list[OfferRejection] = []

    def code_counts(self) -> Counter[tuple[str, ...]]:
        """The rejected candidates by their codes: one count per distinct tuple of codes."""
        counts = Counter(map(_CODES, self.rows))
        if self.mismatches:
            counts[_MISMATCH] += len(self.mismatches)
        for faults, n in self.static_faults.items():
            counts[static_codes(faults)] += n
        for *_, faults in self.offers:
            counts[offer_codes(faults)] += 1
        return counts

    def listing(self, w: Workload) -> tuple[Rejection, ...]:
        """Every rejected candidate with its reasons, by id (ids are unique): an answer that
        lists them was checked by the registry (_evaluate_cloud), none counted by fault bits."""
        assert not self.static_faults
        out = [*self.mismatches, *self.rows]
        for c, nodes, spot, position, _ in self.offers:
            price = c.offers[position][3]
            out.append(_rejection(c.instance.id, offering_violations(price, nodes, w, spot)))
        out.sort(key=_ID)
        return tuple(out)


def rejected_summary(code_counts: Mapping[tuple[str, ...], int]) -> tuple[RejectedCount, ...]:
    """Per code, how many candidates it rules out (a candidate counts under each of its codes),
    most first, then by code. `code_counts`: the rejected candidates by their codes."""
    return _summary(frozenset(code_counts.items()))


# Summaries kept (_summary): the counts of a workload type's rejections change only where a
# request crosses a GPU's memory or a budget crosses a price, so requests share them.
SUMMARIES_KEPT = 4096


@lru_cache(maxsize=SUMMARIES_KEPT)
def _summary(code_counts: frozenset[tuple[tuple[str, ...], int]]) -> tuple[RejectedCount, ...]:
    """rejected_summary of the counts as a set (their order does not matter): its models are
    frozen, so one answer's summary may be another's."""
    counts: Counter[str] = Counter()
    for codes, n in code_counts:  # few distinct code tuples
        for code in codes:
            counts[code] += n
    return tuple(
        built(
            RejectedCount, {"code": code, "words": CODE_WORDS.get(code, code.lower()), "count": n}
        )
        for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )


def _codes_and_sentences(
    violations: Sequence[Violation],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if len(violations) == 1:  # the common case, on the per-candidate path
        return (violations[0].code,), (violations[0].sentence,)
    return tuple(dict.fromkeys(v.code for v in violations)), tuple(v.sentence for v in violations)


def _rejection(entry_id: str, violations: list[Violation]) -> Rejection:
    codes, sentences = _codes_and_sentences(violations)
    return Rejection(id=entry_id, codes=codes, reasons=sentences)


def _recommendation(
    h: Hit, score: float, why: list[str], objective: str, p: WorkloadProfile
) -> Recommendation:
    ranked = ranked_figure(objective, h.value)
    if h.edge is not None:
        e = h.edge
        yearly = edge_cost_per_year(e.device, e.power_w).total_usd_per_year
        return built(
            Recommendation,
            {
                "instance_type": None,
                "device": e.device.id,
                "provider": None,
                "accelerator": e.device.id,
                "gpu_count": 1,
                "nodes": 1,
                "region": None,
                "purchase": None,
                "hourly_usd": None,
                "power_w": e.power_w,
                "power_mode": e.mode,
                "score": score,
                "ranked_value": ranked,
                "penalty_factor": 1.0,
                "reasons": tuple(why),
                "sizing": None,
                "cost_per_year_usd": round(yearly, 2),
                "price_flag": None,
            },
        )
    c, price, s = h.cloud, h.price, h.placement
    assert c is not None and price is not None
    if s.fit is not None:
        return built(Recommendation, _cloud_fields(h, score, ranked, why, p))
    # Without a model, every field but the three below is a function of the offering, the
    # hourly cost, the node count and the workload type: kept on the candidate, copied (a dict
    # keeps its keys' order, which built() needs).
    key = ("recommendation", h.sort_id, h.hourly_usd, s.nodes, s.spans_nodes, p.id)
    fields = cast("dict[str, object] | None", c.words.get(key))
    if fields is None:
        fields = _cloud_fields(h, 0.0, 0.0, [], p)
        kept(c.words, WORDS_KEPT_PER_FILTERS)[key] = fields
    values = fields.copy()
    values["score"], values["ranked_value"], values["reasons"] = score, ranked, tuple(why)
    return built(Recommendation, values)


def _cloud_fields(
    h: Hit, score: float, ranked: float, why: list[str], p: WorkloadProfile
) -> dict[str, object]:
    """A cloud option's Recommendation fields, in the model's order."""
    c, price, s = h.cloud, h.price, h.placement
    assert c is not None and price is not None
    return {
        "instance_type": c.instance.id,
        "device": None,
        "provider": str(c.instance.provider),
        "accelerator": c.hardware.id,
        "gpu_count": s.nodes * c.instance.gpu_count,
        "nodes": s.nodes,
        "region": price.region,
        "purchase": str(price.purchase),
        "hourly_usd": h.hourly_usd,
        "power_w": c.per_node_power_w * s.nodes,
        "power_mode": None,
        "score": score,
        "ranked_value": ranked,
        "penalty_factor": penalty_figure(c, p, s),
        "reasons": tuple(why),
        "sizing": (
            sized_figures(s.fit, h.hourly_usd, h.spot, price.purchase)
            if s.fit is not None
            else None
        ),
        "cost_per_year_usd": None,
        "price_flag": price.flag,
    }


def _default_objective(w: Workload, p: WorkloadProfile) -> str:
    if w.sized and p.sizing == "training":
        # with a token count, the run's cost; without one, the tokens each dollar trains
        # (advisor/engine/rank.py valuation: the modelled training speed, not the peak)
        return "cost_to_completion" if w.tokens else "price_performance"
    if w.sized and p.sizing == "inference":
        # Serving is bought by the token: of the deployments that meet the latency targets (the
        # others are rejected), the lowest cost per million tokens.
        return "cost_per_million_tokens"
    return p.default_objective


def _profile(catalog: Catalog, w: Workload) -> WorkloadProfile:
    profile = catalog.workloads.get(w.workload)
    if profile is None:
        raise InputError(unknown("workload", w.workload, catalog.workloads))
    return profile


def _check_request(catalog: Catalog, w: Workload, p: WorkloadProfile) -> None:
    refuse_idle_fields(w, w.sized, p.sizing)
    if w.region is not None:
        check_region(w.region, catalog.regions)
    if w.provider is not None and w.provider not in catalog.providers:
        raise InputError(unknown("provider", w.provider, catalog.providers))
