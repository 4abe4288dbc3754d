"""Rule engine scenarios on a hand-made catalog whose right answers are worked out by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from advisor import Catalog, InputError, Workload, recommend
from advisor.engine import evaluation as engine_module
from advisor.engine.candidates import candidate_index
from advisor.engine.checks import GROUP_SIGNATURE
from advisor.engine.rank import valuation
from advisor.request import RecommendRequest
from tests.factories import load_mini


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return load_mini(tmp_path_factory.mktemp("engine"))


def top(catalog: Catalog, **kw: Any) -> tuple[str | None, int, float | None]:
    r = recommend(catalog, Workload(**kw)).recommendations[0]
    hourly = None if r.hourly_usd is None else round(r.hourly_usd, 6)
    return (r.instance_type or r.device, r.gpu_count, hourly)


# (case guarded, request, expected best: (id, GPUs rented, $/h))
SCENARIOS = [
    (
        "cheapest GPU that holds the memory wins",
        dict(workload="fine_tuning", memory_gb=20),
        ("small1", 1, 0.8),
    ),
    (
        "memory beyond one small GPU moves to a 4-GPU node, not 2 nodes",
        dict(workload="fine_tuning", memory_gb=60),
        ("small4", 4, 4.6),
    ),
    (
        "80 GB exactly fits one big GPU",
        dict(workload="fine_tuning", memory_gb=80),
        ("small4", 4, 4.6),
    ),
    (
        "interconnect requirement forces the NVSwitch node",
        dict(workload="fine_tuning", memory_gb=80, interconnect_gb_s=900),
        ("big8", 8, 98.0),
    ),
    (
        "region changes the price of the same instance",
        dict(workload="fine_tuning", memory_gb=80, interconnect_gb_s=900, region="eu-west-1"),
        ("big8", 8, 110.0),
    ),
    (
        "spot purchase takes the spot price",
        dict(workload="fine_tuning", memory_gb=80, interconnect_gb_s=900, purchase="spot"),
        ("big8", 8, 40.0),
    ),
    (
        "scale-out workload spans two NVSwitch nodes over a fast network",
        dict(workload="large_scale_training", memory_gb=1000),
        ("big8", 16, 196.0),
    ),
    (
        "PCIe big node is cheaper but penalised for training (80*1.25 > 98)",
        dict(workload="large_scale_training", memory_gb=500),
        ("big8", 8, 98.0),
    ),
    ("GPU count is a floor", dict(workload="fine_tuning", gpu_count=3), ("small4", 4, 4.6)),
    ("loosely coupled work goes CPU-only", dict(workload="batch_processing"), ("cpu4", 0, 0.2)),
    (
        "batch with more RAM than one small CPU node spans nodes (scale-out)",
        dict(workload="batch_processing", memory_gb=40),
        ("cpu4", 0, 0.6),
    ),
    (
        "throughput inference: price-performance puts the small GPU above the big one",
        dict(workload="high_throughput_inference"),
        ("small1", 1, 0.8),
    ),
    (
        "edge: most capable device within the power budget",
        dict(workload="edge_inference", power_budget_w=25),
        ("edge-b", 1, None),
    ),
    (
        "edge: an unpublished mode is estimated by power (137 x 15/60 = 34 < 40)",
        dict(workload="edge_inference", power_budget_w=20),
        ("edge-a", 1, None),
    ),
    (
        "edge: a larger budget admits the 60 W mode",
        dict(workload="edge_inference", power_budget_w=60),
        ("edge-a", 1, None),
    ),
    (
        "edge: memory rules out the small device",
        dict(workload="edge_inference", power_budget_w=25, memory_gb=16),
        ("edge-a", 1, None),
    ),
    (
        "performance objective takes the fastest option",
        dict(workload="fine_tuning", objective="performance", limit=1),
        ("big8", 8, 40.0),
    ),
    ("provider filter", dict(workload="batch_processing", provider="gcp"), ("cpu64", 0, 3.0)),
]


@pytest.mark.parametrize(("case", "request_", "expected"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_scenarios(
    mini: Catalog, case: str, request_: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    if request_.get("objective") == "performance":
        request_ = {**request_, "purchase": None}
    assert top(mini, **request_) == expected


# (case guarded, request, code that must reject, constraint named in the explanation)
NOTHING_FITS = [
    (
        "power budget below every edge device",
        dict(workload="edge_inference", power_budget_w=5),
        "POWER_OVER_BUDGET",
        "the power budget",
    ),
    (
        "budget below the only NVSwitch node",
        dict(workload="fine_tuning", interconnect_gb_s=900, max_hourly_usd=10),
        "OVER_BUDGET",
        "the hourly budget",
    ),
    (
        "fine-tuning does not scale out",
        dict(workload="fine_tuning", memory_gb=1000),
        "MEMORY_INSUFFICIENT",
        "the memory requirement",
    ),
    (
        "interconnect demanded beyond any instance",
        dict(workload="fine_tuning", interconnect_gb_s=5000),
        "INTERCONNECT_TOO_SLOW",
        "the interconnect requirement",
    ),
]


@pytest.mark.parametrize(
    ("case", "request_", "code", "words"), NOTHING_FITS, ids=[n[0] for n in NOTHING_FITS]
)
def test_contradictions_explain_the_constraint(
    mini: Catalog, case: str, request_: dict[str, Any], code: str, words: str
) -> None:
    result = recommend(mini, Workload(**request_))
    assert not result.ok
    assert any(code in r.codes for r in result.rejected)
    assert words in result.explanation


def test_nearest_alternative_relaxes_the_power_budget(mini: Catalog) -> None:
    result = recommend(mini, Workload(workload="edge_inference", power_budget_w=5))
    (alt,) = result.alternatives
    assert alt.constraint == "power_budget_w" and alt.relax_to == 7
    assert alt.sentence == "relax the power budget to 7 W: EDGE-B (7W mode)"


def test_nearest_alternative_for_budget_names_the_price(mini: Catalog) -> None:
    result = recommend(
        mini, Workload(workload="fine_tuning", interconnect_gb_s=900, max_hourly_usd=10)
    )
    budget = {a.constraint: a for a in result.alternatives}["max_hourly_usd"]
    assert budget.relax_to == 98.0 and "big8" in budget.candidate


def test_every_rejection_has_codes_and_sentences(mini: Catalog) -> None:
    result = recommend(mini, Workload(workload="fine_tuning", memory_gb=80, interconnect_gb_s=900))
    ids = {r.id for r in result.rejected}
    assert ids == {"big1", "big8-pcie", "small1", "small4", "cpu4", "cpu64", "edge-a", "edge-b"}
    for r in result.rejected:
        assert r.codes and len(r.reasons) >= len(r.codes)


def test_recommendations_carry_reasons(mini: Catalog) -> None:
    result = recommend(mini, Workload(workload="large_scale_training", memory_gb=1000))
    reasons = " ".join(result.recommendations[0].reasons)
    assert "spans 2 nodes" in reasons and "$196.00/h" in reasons


def test_penalty_is_explained(mini: Catalog) -> None:
    result = recommend(mini, Workload(workload="large_scale_training", memory_gb=500))
    pcie = next(r for r in result.recommendations if r.instance_type == "big8-pcie")
    assert any("scored 25% worse" in reason for reason in pcie.reasons)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (dict(workload="edge_inferenc"), "did you mean 'edge_inference'"),
        (dict(workload="fine_tuning", region="us-east1"), "did you mean 'us-east-1'"),
        (dict(workload="fine_tuning", provider="amazon"), "valid: aws, gcp"),
    ],
)
def test_bad_input_is_an_input_error(mini: Catalog, request_: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        recommend(mini, Workload(**request_))


def test_limit_and_scores(mini: Catalog) -> None:
    result = recommend(mini, Workload(workload="batch_processing", limit=3))
    assert len(result.recommendations) == 3
    scores = [r.score for r in result.recommendations]
    assert scores[0] == 1.0 and scores == sorted(scores, reverse=True)


# The four classic examples, on the shipped catalog.
def test_classic_training_gets_an_nvlink_node(shipped: Catalog) -> None:
    result = recommend(
        shipped, Workload(workload="large_scale_training", memory_gb=80, interconnect_gb_s=900)
    )
    for r in result.recommendations:
        # NVLink 4/5 SXM parts and the MI355X's Infinity Fabric (7 x 153.6 = 1,075 GB/s)
        assert r.accelerator in {"h100-sxm", "h200-sxm", "b200", "b300", "gb200", "gb300", "mi355x"}
        assert shipped.instance_types[r.instance_type or ""].interconnect_gb_s >= 900


def test_classic_edge_within_25_w(shipped: Catalog) -> None:
    result = recommend(shipped, Workload(workload="edge_inference", power_budget_w=25))
    assert result.ok
    for r in result.recommendations:
        assert r.device and r.power_w <= 25
        assert shipped.accelerators[r.device].form_factor.value == "edge"


def test_classic_throughput_inference_l4_above_h100(shipped: Catalog) -> None:
    result = recommend(shipped, Workload(workload="high_throughput_inference", limit=1000))
    order = [r.accelerator for r in result.recommendations]
    assert "l4" in order and "h100-sxm" in order
    assert order.index("l4") < order.index("h100-sxm")
    assert order[0] in {"l4", "l40s", "t4", "a10g", "a10"}


def test_classic_loosely_coupled_goes_cpu(shipped: Catalog) -> None:
    result = recommend(shipped, Workload(workload="batch_processing"))
    assert result.recommendations[0].gpu_count == 0
    assert shipped.accelerators[result.recommendations[0].accelerator].form_factor.value == "cpu"


def test_classic_contradiction(shipped: Catalog) -> None:
    result = recommend(shipped, Workload(workload="edge_inference", power_budget_w=1))
    assert not result.ok and "power budget" in result.explanation
    assert result.alternatives


def test_result_is_json_ready(mini: Catalog, tmp_path: Path) -> None:
    import json

    data = recommend(mini, Workload(workload="fine_tuning")).to_dict()
    assert set(data) >= {"recommendations", "rejected"}
    rec = data["recommendations"][0]
    assert set(rec) >= {
        "instance_type",
        "accelerator",
        "gpu_count",
        "hourly_usd",
        "region",
        "score",
        "reasons",
    }
    json.dumps(data)


def test_memory_alternative_is_priced_for_one_node(mini: Catalog) -> None:
    result = recommend(mini, Workload(workload="fine_tuning", memory_gb=1000))
    memory = {a.constraint: a for a in result.alternatives}["memory_gb"]
    # the cheapest node of 8 x 80 GB, 576 GB usable (0.9, the one headroom rule), at one
    # node's price (not the two nodes 1000 GB would need)
    assert memory.relax_to == pytest.approx(576)
    assert memory.candidate == "big8-pcie (aws us-east-1, on_demand, $80.00/h)"


@pytest.mark.parametrize(
    "objective",
    ["cheapest", "cost_to_completion", "time", "cost_per_million_tokens", "performance"],
)
@pytest.mark.parametrize("sized", [False, True])
def test_the_hot_loops_affine_objective_matches_objective_value(
    objective: str, sized: bool
) -> None:
    """The engine values on-demand offerings as a x cost + b (worked out once per option): the
    same numbers objective_value gives for every cost, with and without a sized fit."""
    from advisor.engine.objective import objective_affine, objective_value
    from advisor.planning.fit import Fit

    fit = (
        Fit(
            8,
            1,
            8,
            False,
            10.0,
            80.0,
            0.4,
            "test",
            hours=12.5,
            tokens_per_s=900.0,
            served_tokens_per_s=750.0,
        )
        if sized
        else None
    )
    affine = objective_affine(objective, 320.0, 1.25, fit)
    assert affine is not None
    for cost in (0.5, 3.0, 98.32, 2_000.0):
        expected = objective_value(objective, cost, 320.0, 1.25, fit)
        assert cost * affine[0] + affine[1] == pytest.approx(expected, rel=1e-12)
    assert objective_affine("price_performance", 320.0, 1.25, fit) is None


def test_valuations_kept_per_catalog_stay_bounded(
    shipped: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each new node count is a new valuation kept on the catalog's index: a stream of ever
    larger memory requirements must not grow it without end, nor change an answer from the one
    valued afresh. 500: fewer than these requests make, more than a key without the node count
    or the objective would (one per group and objective), so that such a key shows too."""
    monkeypatch.setattr(engine_module, "VALUATIONS_KEPT", 500)
    index = candidate_index(shipped, GROUP_SIGNATURE)
    index.valuations.clear()
    requests = [
        RecommendRequest(workload="batch_processing", memory_gb=gb, objective=objective)
        for gb in range(1000, 60_000, 1000)
        for objective in ("cheapest", "performance")  # performance: valued by the nodes' peak
    ]
    first = [recommend(shipped, w) for w in requests]
    assert 0 < len(index.valuations) <= 500

    def uncached(index: Any, i: int, placement: Any, p: Any, objective: str, bought: Any) -> Any:
        return valuation(index.cloud_groups[i][0], placement, p, objective, bought)

    monkeypatch.setattr(engine_module, "_group_valuation", uncached)
    assert [recommend(shipped, w) for w in requests] == first


def _same_as_validated(built: Any, validated: Any, where: str) -> None:
    """`built` equal to `validated` value by value, each of the same type (an int where
    validation gives a float would be written differently by a client's decoder), a model's
    fields in the model's order."""
    from pydantic import BaseModel

    assert type(built) is type(validated), where
    if isinstance(built, BaseModel):
        assert list(built.__dict__) == list(type(built).model_fields), where
        for name in type(built).model_fields:
            _same_as_validated(getattr(built, name), getattr(validated, name), f"{where}.{name}")
    elif isinstance(built, tuple | list):
        assert len(built) == len(validated), where
        for i, (a, b) in enumerate(zip(built, validated, strict=True)):
            _same_as_validated(a, b, f"{where}[{i}]")
    else:
        assert built == validated, where


@pytest.mark.parametrize(
    "kw",
    [
        dict(workload="fine_tuning", memory_gb=80),
        dict(workload="high_throughput_inference", region="us-east-1", memory_gb=900),
        dict(workload="edge_inference", power_budget_w=25),
        dict(workload="edge_inference", objective="performance"),
        dict(workload="batch_processing", provider="gcp", max_hourly_usd=3),
        dict(workload="low_latency_inference", memory_gb=434, max_hourly_usd=10),
        dict(workload="fine_tuning", memory_gb=160, purchase="spot", show_rejected=True),
        dict(workload="large_scale_training", memory_gb=1000, objective="performance"),
        dict(workload="fine_tuning", memory_gb=80, include_flagged_prices=True, limit=50),
        dict(workload="fine_tuning", model="llama-3-8b", tokens=2e9, max_gpus=1),
        dict(workload="high_throughput_inference", model="llama-3.1-8b"),
    ],
    ids=str,
)
def test_an_answer_built_unvalidated_is_its_validated_copy(shipped: Catalog, kw: Any) -> None:
    """The engine builds its Result, ranked options and summary without validating them
    (result.py built): each must be what validating the same values gives, value by value and
    type by type, and write the same JSON."""
    w = RecommendRequest(**kw)
    answer = recommend(shipped, w, listed=w.show_rejected)
    assert answer.recommendations or answer.alternatives
    # rejections are NamedTuples that no answer validates (result.py _RejectionField)
    values = {**answer.model_dump(), "rejected": answer.rejected}
    validated = type(answer).model_validate(values)
    _same_as_validated(answer, validated, "result")
    assert answer.model_dump_json() == validated.model_dump_json()


def test_the_tracker_keeps_the_same_alternatives_when_asked_first() -> None:
    """The nearest alternatives write an offering's label only where the tracker may keep it
    (explain.py AlternativeTracker.may_keep): offers gated so must leave what offering every
    one leaves, ties on the relaxation and the price broken by the label."""
    import random

    from advisor.engine.explain import AlternativeTracker

    rng = random.Random(7)
    offers = [
        (
            rng.choice(["max_hourly_usd", "region", "memory_gb", "method"]),
            rng.choice([1.5, 2.0, 3.0, "us-east-1", "eu-west-1", "lora"]),
            rng.choice([0.5, 1.0, 2.0]),
            rng.choice(["a (x)", "b (y)", "c (z)"]),
        )
        for _ in range(3000)
    ]
    every, gated = AlternativeTracker(), AlternativeTracker()
    skipped = 0
    for constraint, to, hourly, label in offers:
        every.offer(constraint, to, hourly, label)
        if gated.may_keep(constraint, to, hourly):
            gated.offer(constraint, to, hourly, label)
        else:
            skipped += 1
    assert gated.alternatives() == every.alternatives() and skipped > 1000


@pytest.mark.parametrize("limit", [1, 3, 10])
def test_the_bound_keeps_the_limit_th_best_value(limit: int) -> None:
    """rank.py Bound.worst_kept, kept as values are added, is the `limit`-th smallest value
    added so far (ties counted), infinity before there are `limit`."""
    import math
    import random

    from advisor.engine.rank import Bound

    rng = random.Random(limit)
    bound, seen = Bound(limit), []
    for _ in range(500):
        value = rng.choice([rng.uniform(-5, 5), float(rng.randint(-3, 3))])
        bound.add(value)
        seen.append(value)
        expected = sorted(seen)[limit - 1] if len(seen) >= limit else math.inf
        assert bound.worst_kept == expected


def test_kept_sentences_are_the_ones_written_afresh(shipped: Catalog) -> None:
    """The reasons keep their sentences on each candidate (CloudCandidate.words, rank.py
    _price_words, _penalty_words, _year_words and the GPUs line) by what they depend on. After
    a stream of requests that rank the same options at other node counts, prices, workload
    types and objectives, every answer must be the one written with nothing kept."""
    import json

    from benchmarks.bench_service import DISTINCT_BODIES

    bodies = [json.loads(b) for b in DISTINCT_BODIES[::23]]
    # the same options ranked at other node counts: GPU nodes for a scale-out job, CPU nodes
    # that split a job's memory, serving replicas over nodes
    for m in (5, 900, 1700, 2600, 6000):
        bodies.append({"workload": "batch_processing", "memory_gb": m, "limit": 20})
    for m in (100, 700, 1500, 3000):
        bodies.append({"workload": "large_scale_training", "memory_gb": m, "limit": 20})
    for n in (4, 8, 16, 32):
        bodies.append({"workload": "high_throughput_inference", "gpu_count": n, "limit": 20})
    # the same options under other power budgets and interconnect requirements, each stated in
    # a reason (rank.py keeps an option's lines by both)
    for watts in (20_000, 30_000):
        bodies.append({"workload": "fine_tuning", "power_budget_w": watts, "limit": 20})
    for link in (100, 400):
        bodies.append({"workload": "fine_tuning", "interconnect_gb_s": link, "limit": 20})
    # edge devices ranked by each objective, under a power budget and without one (rank.py
    # keeps each device's hit by objective and its lines)
    for objective in ("cheapest", "performance", "price_performance"):
        bodies.append({"workload": "edge_inference", "objective": objective, "limit": 20})
        bodies.append({"workload": "edge_inference", "objective": objective, "power_budget_w": 60})
    requests = [RecommendRequest(**b) for b in bodies]
    index = candidate_index(shipped, GROUP_SIGNATURE)
    warm = [recommend(shipped, w, listed=False).model_dump_json() for w in requests]
    kept = 0
    for w, answer in zip(requests, warm, strict=True):
        kept = max(kept, sum(len(c.words) for c in index.cloud))
        for c in index.cloud:
            c.words.clear()
        for e in index.edge:
            e.words.clear()
        assert recommend(shipped, w, listed=False).model_dump_json() == answer, w
    assert kept > 100  # the warm answers were written from kept sentences


def test_rank_orders_as_one_sort_at_any_number_of_hits() -> None:
    """rank() sorts a few hits and takes heapq.nsmallest of many: the same order (value, then
    price, then id) and scores either way, against a sort by hand."""
    import random

    from advisor.engine.placement import Placement
    from advisor.engine.rank import SORTED_HITS_MAX, Hit, rank

    rng = random.Random(7)
    for count in (3, SORTED_HITS_MAX, SORTED_HITS_MAX + 50):
        hits = [
            Hit(
                float(rng.randint(1, 40)),
                float(rng.randint(1, 5)),
                f"id{i:04}",
                None,
                None,
                Placement(1, 1),
                None,
            )
            for i in range(count)
        ]
        expected = sorted(hits, key=lambda h: (h.value, h.hourly_usd, h.sort_id))[:10]
        ranked = rank(list(reversed(hits)), "cheapest", 10)
        assert [h for h, _ in ranked] == expected
        assert [score for _, score in ranked] == [
            round(expected[0].value / h.value, 4) for h in expected
        ]


def test_rejected_summary_counts_each_code_of_each_request() -> None:
    """The summary is kept by the counts it was made from: requests whose rejections share the
    codes but not the counts get their own figures (by hand)."""
    from collections import Counter

    from advisor.engine.evaluation import rejected_summary

    first = rejected_summary(Counter({("OVER_BUDGET",): 3, ("OVER_BUDGET", "NO_PRICE"): 2}))
    second = rejected_summary(Counter({("OVER_BUDGET",): 1, ("OVER_BUDGET", "NO_PRICE"): 2}))
    assert [(c.code, c.count) for c in first] == [("OVER_BUDGET", 5), ("NO_PRICE", 2)]
    assert [(c.code, c.count) for c in second] == [("OVER_BUDGET", 3), ("NO_PRICE", 2)]


def test_key_placer_places_every_need_as_worked_out_by_hand(shipped: Catalog) -> None:
    """The pass's placements, kept by the counts each memory size needs (placement.py
    KeyPlacer), against the rule worked out by hand for every key of each workload type: GPUs
    by memory at 90% of each GPU's memory, at least one and the count wanted; nodes to hold
    them; a serving replica spans nodes when its memory needs more GPUs than a node has, other
    work when it takes more than one node; CPU nodes by 90% of their RAM. Needs sweep the
    bands' edges both ways, in an order that revisits bands kept earlier."""
    import math

    from advisor.engine.placement import KeyPlacer

    keys = sorted({c.placement_key for c in candidate_index(shipped, GROUP_SIGNATURE).cloud})
    sizes = sorted({k[1] if k[0] else k[3] for k in keys})
    edges = [m * s * 0.9 + d for s in sizes for m in (1, 2, 3) for d in (-0.01, 0.0, 0.01)]
    needs = [0.0, 0.5, *edges, *reversed(edges), 1000.0, 0.5]
    placer = KeyPlacer(keys)
    for need in needs:
        for wanted in (1, 8):
            for serving in (False, True):
                for key, placed in zip(keys, placer.place(need, wanted, serving), strict=True):
                    is_gpu, gpu_gb, per_node, node_gb = key
                    if not is_gpu:
                        nodes = max(1, math.ceil(need / (node_gb * 0.9) - 1e-9))
                        assert placed == (0, nodes, nodes > 1, None, 0), (key, need)
                        continue
                    by_memory = max(1, math.ceil(need / (gpu_gb * 0.9) - 1e-9)) if need else 0
                    gpus = max(1, by_memory, wanted)
                    nodes = math.ceil(gpus / per_node)
                    spans = by_memory > per_node if serving else nodes > 1
                    expected = (gpus, nodes, spans, None, by_memory)
                    assert placed == expected, (key, need, wanted, serving)


def test_closest_offer_by_table_is_the_fewest_faults_cheapest_first(shipped: Catalog) -> None:
    """An option's closest offering under a budget (evaluation.py _closest_offer, one bisection
    into closest_table) against the rule applied offering by offering: fewest failed checks,
    one the region and purchase allow before one they rule out, then the cheapest; budgets at
    and around each offering's hourly cost on 1 and 3 nodes."""
    from advisor.engine.checks import offer_faults
    from advisor.engine.evaluation import _closest_offer

    index = candidate_index(shipped, GROUP_SIGNATURE)
    filters = [{}, {"region": "us-east-1"}, {"purchase": "spot"}, {"provider": "aws"}]
    checked = 0
    for c in index.cloud[::7]:
        prices = sorted({o[2] for o in c.offers})[:6]
        for extra in filters:
            for nodes in (1, 3):
                budgets = [None, 0.01] + [h * nodes + d for h in prices for d in (-1e-6, 0.0)]
                for budget in budgets:
                    w = RecommendRequest(workload="fine_tuning", max_hourly_usd=budget, **extra)
                    expected = min(
                        (
                            (f := offer_faults(o, w, nodes, False, True)).bit_count(),
                            f & ~4 != 0,  # 4: the budget's bit (checks.py OVER_BUDGET)
                            position,
                            f,
                        )
                        for position, o in enumerate(c.offers)
                    )
                    assert _closest_offer(c, w, nodes, False, True) == expected[2:], (c, w)
                    checked += 1
    assert checked > 1000
