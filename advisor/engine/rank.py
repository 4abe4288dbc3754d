"""Stage 2, ranking: an explicit objective, the workload's soft preferences, and the reasons."""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, NamedTuple, cast

from advisor.catalog import purchase as purchase_option
from advisor.catalog.models import (
    PORTING,
    FormFactor,
    InstanceType,
    Price,
    Purchase,
    WorkloadProfile,
)
from advisor.engine.candidates import CloudCandidate, EdgeCandidate, kept
from advisor.engine.objective import (
    COST_LIKE,
    OBJECTIVE_WORDS,
    Valuation,
    objective_affine,
    objective_value,
    rises_with_cost,
)
from advisor.engine.placement import Placement
from advisor.engine.result import SizedFigures
from advisor.engine.spot_risk import plan_sentence, serving_sentence
from advisor.perf.cost import (
    completion_hours,
    cost_per_million_tokens_usd,
    cost_to_completion_usd,
    edge_cost_per_year,
    tokens_within_budget,
)
from advisor.perf.spot import SpotPlan
from advisor.planning.capacity import capacity_note
from advisor.planning.limits import BARE_INFERENCE, LONG_PLAN_DAYS, latency_targets
from advisor.request import Workload

if TYPE_CHECKING:  # the fit of a sized request: built by advisor/planning/, read here
    from advisor.planning.fit import Fit


class Hit(NamedTuple):
    """A feasible option. A tuple so that sorting compares (value, hourly_usd, sort_id) only:
    sort_id is unique, so the comparison never reaches the objects after it."""

    value: float  # objective value after penalties; lower is better
    hourly_usd: float
    sort_id: str
    cloud: CloudCandidate | None
    edge: EdgeCandidate | None
    placement: Placement
    price: Price | None
    spot: SpotPlan | None = None  # a spot training plan: what interruptions add


def cloud_perf(c: CloudCandidate, s: Placement, p: WorkloadProfile) -> tuple[str, float]:
    """(precision used, dense peak of everything rented) for a cloud option."""
    precision, peak = c.peaks[p.key_precision]
    return precision, peak * (s.nodes * c.instance.gpu_count if c.is_gpu else s.nodes)


def penalty(c: CloudCandidate, p: WorkloadProfile, s: Placement | None = None) -> float:
    """Product of (1 + penalty) over the workload's unmet soft preferences."""
    factor = 1.0
    if _link_not_preferred(c, p):
        factor *= 1 + p.preference_penalty
    if p.prefer_form_factor is not None and c.hardware.form_factor != p.prefer_form_factor:
        factor *= 1 + p.preference_penalty
    if s is not None and _split_memory(c, s):
        factor *= 1 + p.preference_penalty
    return factor


# Sentences kept on a candidate (CloudCandidate.words): room for its offerings' price lines at a
# few node counts; past it the cache starts over (advisor/engine/candidates.py kept).
WORDS_KEPT_PER_FILTERS = 4


def _kept_words(c: CloudCandidate, key: tuple[object, ...], value: object) -> object:
    kept(c.words, WORDS_KEPT_PER_FILTERS)[key] = value
    return value


def penalty_figure(c: CloudCandidate, p: WorkloadProfile, s: Placement) -> float:
    """penalty(c, p, s) as a recommendation states it (six decimals), kept on the candidate
    with the sentences that explain it (_penalty_words)."""
    return _penalty_words(c, p, s)[0]


def _penalty_words(
    c: CloudCandidate, p: WorkloadProfile, s: Placement
) -> tuple[float, tuple[str, ...]]:
    """The option's penalty figure and its sentences (_penalty_reasons): they depend on the
    option, the workload type and, for a CPU job split over nodes, the node count alone, and
    every ranked option states both."""
    split = _split_memory(c, s)
    key = ("penalty", p.id, split, s.nodes if split else 0)
    found = c.words.get(key)
    if found is None:
        found = (round(penalty(c, p, s), 6), tuple(_penalty_reasons(c, p, s)))
        _kept_words(c, key, found)
    return cast("tuple[float, tuple[str, ...]]", found)


def _price_words(c: CloudCandidate, h: Hit, price: Price) -> str:
    """The offering's price line: a function of the offering and the hourly cost ranked (one
    node's price times the nodes), kept on the candidate (a ranked option's every answer
    states it, and formatting it was a quarter of the reasons' time)."""
    key = ("price", h.sort_id, h.hourly_usd)
    found = c.words.get(key)
    if found is None:
        found = _kept_words(
            c,
            key,
            f"${h.hourly_usd:,.2f}/h {price.purchase} in {price.region} "
            f"(price as of {price.as_of.isoformat()})",
        )
    return cast(str, found)


def _split_memory(c: CloudCandidate, s: Placement) -> bool:
    """A CPU job's memory spread over several nodes: the request states one need, and a process
    holds its memory on one host, so a node that holds it all is preferred to a split (the work
    must then be partitioned, which the request does not say it is)."""
    return not c.is_gpu and s.spans_nodes


def _link_not_preferred(c: CloudCandidate, p: WorkloadProfile) -> bool:
    multi_gpu = c.is_gpu and c.instance.gpu_count > 1
    return bool(p.prefer_gpu_link) and multi_gpu and c.instance.gpu_link not in p.prefer_gpu_link


def valuation(
    c: CloudCandidate,
    placement: Placement,
    p: WorkloadProfile,
    objective: str,
    purchase: Purchase | None = None,
) -> Valuation:
    """Worked out once per option (advisor/engine/__init__.py _group_valuation keeps those of
    options placed without a model on CandidateIndex.valuations). `purchase`: the one way every
    offering valued is bought, where its cost counts other hours than the run's (a Capacity
    Block bills its whole block: advisor/catalog/purchase.py charged_hours)."""
    _, perf = cloud_perf(c, placement, p)
    fit = placement.fit
    if fit is not None and fit.training_tokens_per_s:
        perf = fit.training_tokens_per_s  # what the job gets done, not the peak rented
    factor = penalty(c, p, placement)
    hours = None
    if objective == "cost_to_completion" and fit is not None and fit.hours and purchase:
        hours = purchase_option.charged_hours(purchase, fit.hours)
    affine = objective_affine(objective, perf, factor, placement.fit, hours)
    falling = affine is not None and affine[0] < 0
    if falling:
        affine = None  # a falling value would reverse the cheapest-first order; value them all
    rises = not falling and rises_with_cost(objective, perf, factor)
    return Valuation(objective, perf, factor, affine, rises)


def edge_hit(e: EdgeCandidate, objective: str) -> Hit:
    """The device in its mode as an option, kept on it by objective (a function of the two)."""
    key = ("hit", objective)
    found = cast("Hit | None", e.words.get(key))
    if found is None:
        # Edge devices carry no hourly price: their "cost" is the cost per year of operation
        # (purchase over the stated lifetime + energy at the stated price; advisor/perf/cost.py).
        yearly = edge_cost_per_year(e.device, e.power_w).total_usd_per_year
        value = objective_value(objective, yearly, e.int8_tops, 1.0)
        found = Hit(value, 0.0, f"{e.device.id}|{e.power_w:012.3f}", None, e, Placement(1, 1), None)
        e.words[key] = found
    return found


class Bound:
    """The `limit`-th best objective value among the options seen so far: an option valued
    above it can never be ranked, so the engine does not build it (the engine's cost at
    10,000 offerings). Ties are kept, so the ranking's tie-breaks still see every tie."""

    __slots__ = ("_best", "_limit", "worst_kept")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._best: list[float] = []  # the best `limit` values, negated (a max-heap)
        # the `limit`-th best value, infinity until there are `limit`: a plain attribute, read
        # for every option the engine values, kept by add()
        self.worst_kept = math.inf

    def add(self, value: float) -> None:
        if len(self._best) < self._limit:
            heapq.heappush(self._best, -value)
        elif value < -self._best[0]:
            heapq.heapreplace(self._best, -value)
        else:
            return
        if len(self._best) >= self._limit:
            self.worst_kept = -self._best[0]


# Up to this many hits are ranked by one sort: the engine's bound keeps a request's hits to a
# few times its limit, and sorting them in C takes a third of heapq.nsmallest's time there.
SORTED_HITS_MAX = 256


def rank(hits: list[Hit], objective: str, limit: int) -> list[tuple[Hit, float]]:
    """Best first, deterministic (ties broken by price, then id), each with a score in (0, 1].
    The same order either way: heapq.nsmallest is sorted(hits)[:limit] (its documentation)."""
    top = sorted(hits)[:limit] if len(hits) <= SORTED_HITS_MAX else heapq.nsmallest(limit, hits)
    if not top:
        return []
    best = top[0].value
    out = []
    for h in top:
        if objective in COST_LIKE:
            score = best / h.value if h.value else 1.0
        else:
            score = h.value / best if best else 0.0
        out.append((h, round(score, 4)))
    return out


def reasons(h: Hit, w: Workload, p: WorkloadProfile, objective: str, rank_no: int) -> list[str]:
    if h.edge is not None:
        return _edge_reasons(h.edge, w, objective, rank_no)
    c, price, s = h.cloud, h.price, h.placement
    assert c is not None and price is not None
    first = _hardware_reason(c, s, w, p)
    if s.fit is not None or h.spot is not None:
        return [first, *_option_reasons(h, w, p, objective), _ranked_words(objective, rank_no)]
    # Without a model or a spot plan, the lines between the first and the last are a function of
    # the offering, the hourly cost, the node count and what the key names: kept on the
    # candidate (every answer that ranks the option writes them).
    key = (
        "lines",
        h.sort_id,
        h.hourly_usd,
        s.nodes,
        s.spans_nodes,
        p.id,
        objective,
        w.interconnect_gb_s,
        w.power_budget_w,
    )
    lines = cast("tuple[str, ...] | None", c.words.get(key))
    if lines is None:
        lines = tuple(_option_reasons(h, w, p, objective))
        _kept_words(c, key, lines)
    return [first, *lines, _ranked_words(objective, rank_no)]


def _ranked_words(objective: str, rank_no: int) -> str:
    return f"ranked {rank_no} by {OBJECTIVE_WORDS[objective]}"


def _option_reasons(h: Hit, w: Workload, p: WorkloadProfile, objective: str) -> list[str]:
    """A cloud option's reasons between the first (its GPUs and the need they hold) and the
    last (its rank)."""
    c, price, s = h.cloud, h.price, h.placement
    assert c is not None and price is not None
    it = c.instance
    out = []
    porting = PORTING.get(c.hardware.software)
    if porting is not None:
        out.append(f"{c.hardware.name} {porting}")
    if s.spans_nodes:
        out.append(_spans_words(s, it, p))
    out += _plan_reasons(h, w, p)
    if h.spot is not None:
        out.append(plan_sentence(c, h.spot))
    elif price.purchase is Purchase.spot and c.is_gpu and p.sizing == "inference":
        restart = p.spot.restart_h if p.spot is not None else None
        serving = serving_sentence(c, s.nodes, restart)
        out += [serving] if serving else []
    if w.interconnect_gb_s:
        out.append(
            f"{it.gpu_link} at {it.interconnect_gb_s:g} GB/s per GPU meets the "
            f"{w.interconnect_gb_s:g} GB/s interconnect requirement"
        )
    if w.power_budget_w is not None:
        power = c.per_node_power_w * s.nodes
        out.append(
            f"draws {power:,.0f} W ({s.nodes} x {c.power.basis}), within the "
            f"{w.power_budget_w:g} W budget"
        )
    out.append(_price_words(c, h, price))
    precision, perf = cloud_perf(c, s, p)
    timed = s.fit is not None and s.fit.training_tokens_per_s  # said by the sizing reasons
    if objective in ("performance", "price_performance") and perf and not timed:
        per_dollar = ""
        if objective == "price_performance":
            per_dollar = f" = {perf / h.hourly_usd:,.0f} per $/h"
        out.append(f"{perf:,.0f} dense {precision} TFLOP/s peak{per_dollar}")
    out += _penalty_words(c, p, s)[1]
    return out


def _hardware_reason(c: CloudCandidate, s: Placement, w: Workload, p: WorkloadProfile) -> str:
    it, hw = c.instance, c.hardware
    if not c.is_gpu:
        return f"CPU-only ({hw.name}), {it.vcpus} vCPUs and {it.memory_gib:g} GiB RAM per node" + (
            f", enough for the {w.memory_gb:g} GB needed" if w.memory_gb else ""
        )
    key = ("gpus", s.nodes)  # what the GPUs rented are: the option and its node count
    line = cast("str | None", c.words.get(key))
    if line is None:
        total_gb = s.nodes * it.gpu_count * hw.device_memory_gb
        each = hw.device_memory_gb
        line = f"{s.nodes * it.gpu_count} x {hw.name} ({each:g} GB each, {total_gb:g} GB total)"
        _kept_words(c, key, line)
    if w.memory_gb:
        line += f" hold the {w.memory_gb:g} GB needed{_gpu_count_source(s, w, p)}"
    elif s.fit is not None:
        line += f" hold the {s.fit.memory_total_gb:,.1f} GB the work needs"
    return line


def _penalty_reasons(c: CloudCandidate, p: WorkloadProfile, s: Placement) -> list[str]:
    """One sentence per unmet soft preference, saying what it cost in score."""
    out = []
    if _split_memory(c, s):
        out.append(
            f"scored {p.preference_penalty:.0%} worse: the memory is split over {s.nodes} "
            "nodes; one node that holds it all is preferred (one process, one host)"
        )
    if _link_not_preferred(c, p):
        links = "/".join(p.prefer_gpu_link)  # StrEnums: their values
        out.append(
            f"scored {p.preference_penalty:.0%} worse: GPUs linked by "
            f"{c.instance.gpu_link}, {p.id} prefers {links}"
        )
    if p.prefer_form_factor is not None and c.hardware.form_factor != p.prefer_form_factor:
        out.append(
            f"scored {p.preference_penalty:.0%} worse: {p.id} prefers "
            f"{p.prefer_form_factor} hardware"
        )
    return out


def _edge_reasons(e: EdgeCandidate, w: Workload, objective: str, rank_no: int) -> list[str]:
    power, *lines = _edge_lines(e)
    if w.power_budget_w is not None:
        power += f", within the {w.power_budget_w:g} W budget"
    out = [power, *lines]
    if e.device.form_factor == FormFactor.edge and objective == "cheapest":
        out.append(
            f"ranked {rank_no} by lowest cost per year of operation (edge devices have no "
            "hourly price)"
        )
    elif e.device.form_factor == FormFactor.edge and objective != "performance":
        out.append(
            f"ranked {rank_no} by {OBJECTIVE_WORDS[objective]}, with the cost per year of "
            "operation standing for the hourly price edge devices do not have"
        )
    else:
        out.append(_ranked_words(objective, rank_no))
    return out


def _edge_lines(e: EdgeCandidate) -> tuple[str, ...]:
    """The device's reasons but the budget's words and its rank, a function of the device and
    mode: what it draws, its TOPS and memory, what porting takes, its cost per year. Kept on it."""
    found = cast("tuple[str, ...] | None", e.words.get(("lines",)))
    if found is not None:
        return found
    mode = f" in its {e.mode} power mode" if e.mode else ""
    out = [f"{e.device.name}{mode} draws {e.power_w:g} W"]
    if e.device.host is not None:
        estimated = " (estimated)" if e.device.host.estimated else ""
        out[0] += (
            f": {e.device_w:g} W itself and {e.host_w:g} W{estimated} for its host, a "
            f"{e.device.host.name} (it cannot run without one)"
        )
    tops = f"{e.int8_tops:.3g} dense int8 TOPS"
    if e.tops_estimated:
        tops += f" (estimated: scaled by power from the {e.device.tdp_w:g} W figure)"
    memory = e.device.memory_text
    out.append(f"{tops}, {memory if e.device.memory_gb is None else memory + ' memory'}")
    porting = PORTING.get(e.device.software)
    if porting is not None:
        out.append(f"{e.device.name} {porting}")
    out.append(edge_cost_per_year(e.device, e.power_w).sentence(e.power_w))
    e.words[("lines",)] = tuple(out)
    return tuple(out)


def _gpu_count_source(s: Placement, w: Workload, p: WorkloadProfile) -> str:
    """Which GPU count memory needs, and where a larger planned count came from: a count that
    came from a default is never stated as one the memory needs."""
    by_memory = f"{s.gpus_for_memory} GPU(s) by memory"
    if s.gpus <= s.gpus_for_memory:
        return f" ({by_memory})"
    source = "as requested" if w.gpu_count is not None else f"{p.id}'s default"
    return f" ({by_memory}; {s.gpus} planned, {source})"


def completion_usd(
    fit: Fit,
    hourly_usd: float,
    spot: SpotPlan | None = None,
    purchase: Purchase = Purchase.on_demand,
) -> float | None:
    """An option's cost to complete the run: its hourly cost over the hours a spot plan adds to
    (advisor/perf/spot.py), or the whole block a Capacity Block bills (advisor/catalog/purchase.py
    charged_hours); None without a training time."""
    hours = completion_hours(fit.hours, spot)
    charged = purchase_option.charged_hours(purchase, hours) if hours is not None else None
    return cost_to_completion_usd(hourly_usd, charged)


def sized_figures(
    fit: Fit,
    hourly_usd: float,
    spot: SpotPlan | None = None,
    purchase: Purchase = Purchase.on_demand,
) -> SizedFigures:
    """The numbers behind a sized recommendation, for JSON. On spot, hours and the cost to
    completion include what interruptions add (advisor/perf/spot.py); on a Capacity Block, the
    cost counts the whole block (advisor/catalog/purchase.py charged_hours)."""
    served = fit.served_tokens_per_s or fit.tokens_per_s
    return SizedFigures(
        gpus_needed=fit.gpus_needed,
        rented_gpus=fit.rented_gpus,
        memory_per_gpu_gb=round(fit.memory_per_gpu_gb, 3),
        memory_total_gb=round(fit.memory_total_gb, 3),
        efficiency=round(fit.efficiency, 4),
        efficiency_source=fit.efficiency_source,
        hours=completion_hours(fit.hours, spot),
        cost_to_completion_usd=completion_usd(fit, hourly_usd, spot, purchase),
        replicas=fit.replicas if fit.tokens_per_s else None,
        tokens_per_s=fit.tokens_per_s or None,
        cost_per_million_tokens_usd=cost_per_million_tokens_usd(
            hourly_usd if fit.tokens_per_s else None, served
        ),
        ttft_ms=fit.ttft_ms,
        itl_ms=fit.itl_ms,
        concurrency=fit.concurrency,
        tensor_parallel=fit.tensor_parallel,
        gpu_hours=fit.gpu_hours,
        mfu=fit.mfu,
        layout=fit.layout.words() if fit.layout is not None else fit.serving_layout,
        training_tokens_per_s=fit.training_tokens_per_s,
        cost_per_million_trained_tokens_usd=cost_per_million_tokens_usd(
            hourly_usd, fit.training_tokens_per_s
        ),
        hours_range=fit.hours_range,
    )


def _sizing_reasons(
    fit: Fit,
    hourly_usd: float,
    w: Workload,
    p: WorkloadProfile,
    spot: SpotPlan | None = None,
    purchase: Purchase = Purchase.on_demand,
) -> list[str]:
    method = f" ({w.method}, adapters of rank {w.lora_rank})" if w.method != "full" else ""
    out = [
        f"{fit.memory_per_gpu_gb:,.1f} GB per GPU on {fit.rented_gpus} GPU(s){method}; "
        f"efficiency {fit.efficiency:.2f} ({fit.efficiency_source})"
    ]
    if fit.hours is not None:
        out += _training_reasons(fit, hourly_usd, w, spot, purchase)
    if fit.tokens_per_s:
        per_million = sized_figures(fit, hourly_usd).cost_per_million_tokens_usd or 0.0
        target = (
            f" for the {w.throughput_tokens_s:g} tokens/s target" if w.throughput_tokens_s else ""
        )
        verb = "serve" if fit.itl_ms is not None else "decode about"
        out.append(
            f"{fit.replicas} replica(s){_tp_words(fit)}{target} {verb} "
            f"{fit.tokens_per_s:,.0f} output tokens/s: ${per_million:,.3f} per million tokens"
        )
    if p.sizing == "inference" and not fit.tokens_per_s:
        out.append(BARE_INFERENCE)
    if fit.training_tokens_per_s:
        per_million = cost_per_million_tokens_usd(hourly_usd, fit.training_tokens_per_s) or 0.0
        out.append(
            f"trains {fit.training_tokens_per_s:,.0f} tokens/s here: ${per_million:,.3f} per "
            "million tokens trained (no --tokens: ranked by tokens trained per dollar)"
        )
    if fit.ttft_ms is not None and fit.itl_ms is not None:
        out.append(
            f"TTFT {fit.ttft_ms:,.0f} ms, ITL {fit.itl_ms:,.1f} ms at {fit.concurrency} "
            f"sequence(s) per replica{_targets_words(w, p)}"
        )
    if fit.serving_alternative is not None:
        out.append(fit.serving_alternative)
    return out


def _training_reasons(
    fit: Fit,
    hourly_usd: float,
    w: Workload,
    spot: SpotPlan | None = None,
    purchase: Purchase = Purchase.on_demand,
) -> list[str]:
    """Wall time (days), cost (with a spot plan's added hours, a Capacity Block's whole block),
    layout and utilisation; a deadline met, or a long plan flagged."""
    assert fit.hours is not None
    days = fit.hours / 24
    cost = completion_usd(fit, hourly_usd, spot, purchase) or 0.0
    added = " with spot interruptions" if spot is not None else ""
    charged = purchase_option.charged_hours(purchase, fit.hours)
    if charged != fit.hours:
        added = f" (the block bills {charged / 24:,.0f} days)"
    out = [
        f"{fit.hours:,.1f} h ({days:,.1f} days wall time) to process {w.tokens:.3g} tokens: "
        f"${cost:,.0f} to completion{added}"
    ]
    if w.budget_usd is not None and w.tokens and cost:  # engine/budget.py ruled out the rest
        out.append(
            f"within the ${w.budget_usd:,.0f} budget, which buys "
            f"{tokens_within_budget(w.tokens, w.budget_usd, cost):.3g} tokens at this option's "
            "cost per token"
        )
    if fit.layout is not None and fit.mfu is not None:
        out.append(f"{fit.layout.words()}; MFU {fit.mfu:.2f} on model FLOPs")
    if fit.hours_range is not None:
        from advisor.planning.fit import margin_sentence  # a sized training plan's alone

        out.append(margin_sentence(fit.hours, fit.hours_range, fit.mfu))
    if w.deadline_days is not None:
        out.append(f"meets the {w.deadline_days:g}-day deadline")
    elif days > LONG_PLAN_DAYS:
        out.append(
            f"takes {days:,.0f} days, over {LONG_PLAN_DAYS} days: give --deadline-days to plan "
            "more GPUs"
        )
    return out


def _spans_words(s: Placement, it: InstanceType, p: WorkloadProfile) -> str:
    """Why one copy of the work spans nodes: a served replica's layout (over NVLink when it
    lies inside one NVLink domain, an NVL72 rack), or a job that scales out over the network."""
    fit, network_gbps = s.fit, it.network_gbps
    if fit is not None and fit.serving_layout is not None:
        if fit.gpus_per_replica <= (it.nvlink_domain_gpus or 0):
            return (
                f"one replica spans nodes over NVLink ({it.interconnect_gb_s:g} GB/s a GPU): "
                f"{fit.serving_layout}"
            )
        return f"one replica spans nodes over {network_gbps:g} Gbit/s: {fit.serving_layout}"
    return (
        f"spans {s.nodes} nodes over {network_gbps:g} Gbit/s; {p.id} scales out "
        f"(needs >= {p.min_multi_node_network_gbps:g} Gbit/s between nodes)"
    )


def _tp_words(fit: Fit) -> str:
    if fit.serving_layout is not None:
        return f" of {fit.gpus_per_replica} GPUs"
    return f" x TP {fit.tensor_parallel}" if fit.tensor_parallel else ""


def _targets_words(w: Workload, p: WorkloadProfile) -> str:
    """Which latency targets the option meets, and where a default target came from."""
    targets = latency_targets(p, w.max_ttft_ms, w.max_itl_ms, w.output_tokens, w.percentile)
    parts = []
    for name, value, asked in (
        ("TTFT", targets.max_ttft_ms, w.max_ttft_ms),
        ("ITL", targets.max_itl_ms, w.max_itl_ms),
    ):
        if value is not None:
            parts.append(f"{name} <= {value:g} ms{'' if asked else ' (default)'}")
    if not parts:
        return ""
    source = ""
    if p.latency_targets and (w.max_ttft_ms is None or w.max_itl_ms is None):
        source = f"; defaults: {p.latency_targets.basis}"
    load = p.latency_targets.load_basis if p.latency_targets else None
    stated = (w.request_rate, w.concurrency, w.throughput_tokens_s, w.batch)
    if load and all(x is None for x in stated):
        source += f"; load {load}"
    held = f" at p{targets.percentile}" if w.request_rate is not None or load else ""
    return f": meets {' and '.join(parts)}{held}{source}"


def _year_words(c: CloudCandidate, sort_id: str, nodes: int, price: Price) -> str | None:
    """purchase.py deployment_sentence of an unsized deployment (no cost per million tokens),
    kept on the candidate: it scans the instance type's prices for the cheapest term."""
    key = ("year", sort_id, nodes)
    found = c.words.get(key, _NONE)
    if found is _NONE:
        found = purchase_option.deployment_sentence(nodes, c.instance.prices, price)
        _kept_words(c, key, found)
    return cast("str | None", found)


_NONE = object()  # no sentence kept yet (None is a sentence's absence, kept too)


def _plan_reasons(h: Hit, w: Workload, p: WorkloadProfile) -> list[str]:
    """Capacity to reserve (never on a spot plan), the sizing, and how the run is bought."""
    c, price, s = h.cloud, h.price, h.placement
    assert c is not None and price is not None
    it = c.instance
    out = []
    reserve = capacity_note(s.nodes, it.id, it.gpu_count, price.purchase)
    out += [reserve] if reserve else []
    if s.fit is not None:
        out += _sizing_reasons(s.fit, h.hourly_usd, w, p, h.spot, price.purchase)
        bought = purchase_option.run_sentence(s.fit.hours, s.nodes, it.prices, price)
        out += [bought] if bought else []
    if p.sizing == "inference" and h.spot is None:  # a deployment: up until taken down
        if s.fit is not None:
            per_million = sized_figures(s.fit, h.hourly_usd).cost_per_million_tokens_usd
            year = purchase_option.deployment_sentence(s.nodes, it.prices, price, per_million)
        else:  # without a model: a function of the offering and the node count, kept
            year = _year_words(c, h.sort_id, s.nodes, price)
        out += [year] if year else []
    return out
