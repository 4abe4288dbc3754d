"""The constraint registry: every constraint is one entry, the candidate-group signature covers
what the checks read, the hot loop's inline offering test agrees with the OFFERING entries, and a
"by memory" reason never states a GPU count that came from a default."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest
from pydantic import ValidationError

from advisor import Catalog, recommend
from advisor.catalog.models import Purchase, SpotPolicy
from advisor.catalog.queries import price_matches, purchase_matches, region_spec
from advisor.engine import candidates as candidates_module
from advisor.engine.candidates import CandidateIndex, CloudCandidate, attribute, candidate_index
from advisor.engine.checks import (
    CODE_WORDS,
    EDGE,
    GROUP_SIGNATURE,
    OFFERING,
    OVER_BUDGET,
    STATIC,
    StaticCase,
    offer_faults,
    offer_violation,
    offering_violations,
    request_free_faults,
    static_codes,
    static_faults,
    static_violation,
    static_violations,
)
from advisor.engine.constraints import RELAXATIONS, Direction
from advisor.engine.evaluation import _closest_offer
from advisor.engine.placement import PLACEMENT_READS, UNSIZED_READS, place, placer
from advisor.perf.spot import SpotPlan
from advisor.planning.plans import plan_for
from advisor.request import REGION_MAX_CHARS, RecommendRequest
from tests.factories import load_mini


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return load_mini(tmp_path_factory.mktemp("constraints"))


# Requests that between them make every static check both pass and fail on the mini catalog.
REQUESTS = [
    dict(workload="fine_tuning"),
    dict(workload="fine_tuning", memory_gb=1000),
    dict(workload="fine_tuning", gpu_count=16),
    dict(workload="large_scale_training", memory_gb=1000),
    dict(workload="large_scale_training", memory_gb=100, power_budget_w=1000),
    dict(workload="batch_processing", memory_gb=600, gpu_count=2),
    dict(workload="fine_tuning", interconnect_gb_s=900, provider="gcp"),
    dict(workload="high_throughput_inference", power_budget_w=50, provider="aws"),
]


class Recorder:
    """Stands in for a candidate and notes every attribute path a check reads."""

    def __init__(self, target: object, prefix: str, seen: set[str]) -> None:
        self._target, self._prefix, self._seen = target, prefix, seen

    def __getattr__(self, name: str) -> Any:
        path = f"{self._prefix}{name}"
        value = getattr(self._target, name)
        if name in ("instance", "hardware"):
            return Recorder(value, f"{path}.", self._seen)
        if name == "placement_key":  # those attributes' values (held so below)
            self._seen.update(f"{self._prefix}{read}" for read in UNSIZED_READS)
            return value
        self._seen.add(path)
        return value


def _reads(check: Any, c: CloudCandidate, *rest: Any) -> set[str]:
    seen: set[str] = set()
    check(Recorder(c, "", seen), *rest)
    return seen


@pytest.mark.parametrize("entry", STATIC, ids=[f"{e.code}:{e.check.__name__}" for e in STATIC])
def test_each_static_check_reads_only_what_it_declares(mini: Catalog, entry: Any) -> None:
    index = candidate_index(mini, GROUP_SIGNATURE)
    read: set[str] = set()
    for kw, c in itertools.product(REQUESTS, index.cloud):
        w = RecommendRequest(**kw)
        p = mini.workloads[w.workload]
        s = place(c, w, p)
        read |= _reads(lambda rc, *k: entry.check(StaticCase(rc, *k)), c, s, w, p)
    assert read <= set(entry.reads), f"{entry.code} reads {sorted(read - set(entry.reads))}"


def test_placement_reads_only_what_it_declares(mini: Catalog, shipped: Catalog) -> None:
    read: set[str] = set()
    for kw, c in itertools.product(REQUESTS, candidate_index(mini, GROUP_SIGNATURE).cloud):
        w = RecommendRequest(**kw)
        read |= _reads(place, c, w, mini.workloads[w.workload])
    # Sized from a model, placement hands the whole accelerator to the performance model:
    # that is covered by hardware.id, which names one accelerator and all its figures.
    sized = RecommendRequest(workload="fine_tuning", model="llama-3-8b", tokens=1e9)
    plan = plan_for(shipped, sized.work(), shipped.workloads["fine_tuning"])
    for c in candidate_index(shipped, GROUP_SIGNATURE).cloud[:10]:
        read |= _reads(place, c, sized, shipped.workloads["fine_tuning"], plan)
    uncovered = {r for r in read - set(PLACEMENT_READS) if not r.startswith("hardware.")}
    assert not uncovered and "hardware.id" in PLACEMENT_READS


# Requests under which, between them, every entry with an `applies` condition fails somewhere on
# the shipped catalog: the soundness test below is not vacuous for any of them.
APPLIES_REQUESTS = [
    *REQUESTS,
    dict(workload="fine_tuning", memory_gb=5000),  # one node by memory
    dict(workload="large_scale_training", memory_gb=20000),  # network between nodes
    dict(workload="batch_processing", gpu_count=2),  # GPUs asked of CPU-only types
    dict(workload="low_latency_inference", memory_gb=20, max_gpus=1),  # 8-GPU nodes over 1
    dict(workload="fine_tuning", model="llama-3-8b"),  # a sized model on CPU-only types
    dict(workload="fine_tuning", model="llama-3.1-405b"),  # a full fine-tune that does not fit
    dict(workload="large_scale_training", model="llama-3.1-405b", tokens=1e12, max_gpus=8),
    dict(workload="large_scale_training", model="llama-3-70b", tokens=1e12, deadline_days=1),
    dict(workload="low_latency_inference", model="llama-3-70b", max_ttft_ms=1, max_itl_ms=1),
    dict(workload="high_throughput_inference", model="llama-3-8b", precision="fp8"),
]


@pytest.fixture(scope="module")
def applies_cases(shipped: Catalog) -> list[tuple[dict[str, Any], RecommendRequest, Any, Any]]:
    """(request fields, request, workload type, plan) of each of APPLIES_REQUESTS on the
    shipped catalog: the sized ones' plans made once for the tests below."""
    cases = []
    for kw in APPLIES_REQUESTS:
        w = RecommendRequest(**kw)
        p = shipped.workloads[w.workload]
        cases.append((kw, w, p, plan_for(shipped, w.work(), p) if w.sized else None))
    return cases


def test_each_applies_condition_only_drops_checks_that_find_nothing(
    shipped: Catalog, applies_cases: list[Any]
) -> None:
    """An entry's `applies` says when its check can fail at all; the engine drops the entry for
    requests where it says no, once per request. Were a condition wrong, a candidate would lose
    a reason (and could be recommended): every check is run on every candidate of the shipped
    catalog where its condition is false, and must find nothing there."""
    gated = [e for e in STATIC if e.applies is not None]
    fired: set[str] = set()
    index = candidate_index(shipped, GROUP_SIGNATURE)
    for kw, w, p, plan in applies_cases:
        cases = [StaticCase(c, place(c, w, p, plan), w, p) for c in index.cloud]
        for entry in gated:
            assert entry.applies is not None
            found = [k.c.instance.id for k in cases if entry.check(k) is not None]
            if not entry.applies(w, p):
                assert not found, f"{entry.code}:{entry.check.__name__} dropped for {kw}: {found}"
            elif found:
                fired.add(entry.check.__name__)
    assert fired == {e.check.__name__ for e in gated}, "no request here makes these fail"


def test_spans_only_checks_find_nothing_within_one_node(
    shipped: Catalog, applies_cases: list[Any]
) -> None:
    """The engine skips a `spans_only` entry on a group the request fits inside one node. Were
    that wrong, a candidate would lose a reason (and could be recommended): each such check runs
    here on every shipped candidate placed within one node and must find nothing there, and
    each finds something somewhere (across nodes), so the test is not vacuous."""
    gated = [e for e in STATIC if e.spans_only]
    assert {e.code for e in gated} >= {"MEMORY_INSUFFICIENT", "NETWORK_TOO_SLOW"}
    fired: set[str] = set()
    index = candidate_index(shipped, GROUP_SIGNATURE)
    for kw, w, p, plan in applies_cases:
        for c in index.cloud:
            k = StaticCase(c, place(c, w, p, plan), w, p)
            for entry in gated:
                found = entry.check(k)
                assert found is None or k.s.spans_nodes, (entry.code, c.instance.id, kw)
                if found is not None:
                    fired.add(entry.check.__name__)
    assert fired == {e.check.__name__ for e in gated}, "no request here makes these fail"


def test_unsized_placement_reads_only_the_placement_key(
    mini: Catalog, shipped: Catalog, applies_cases: list[Any]
) -> None:
    """Without a model, one request places candidates alike in UNSIZED_READS alike
    (advisor/engine/placement.py placer keeps one placement per key): placement must read
    nothing else, the key must hold those attributes, and the placer must answer as place()."""
    read: set[str] = set()
    for kw, c in itertools.product(REQUESTS, candidate_index(mini, GROUP_SIGNATURE).cloud):
        w = RecommendRequest(**kw)
        read |= _reads(place, c, w, mini.workloads[w.workload])
    assert read == set(UNSIZED_READS)
    cloud = candidate_index(shipped, GROUP_SIGNATURE).cloud
    for c in cloud:
        assert c.placement_key == tuple(attribute(c, path) for path in UNSIZED_READS)
    for kw, w, p, plan in applies_cases:
        placed = placer(w, p, plan)
        assert [placed(c) for c in cloud] == [place(c, w, p, plan) for c in cloud], kw


def test_request_free_checks_read_neither_the_request_nor_the_placement(
    shipped: Catalog, applies_cases: list[Any]
) -> None:
    """The engine works out once per workload type which groups a request-free entry fails and
    runs it per request on those alone. Each such check runs here on every shipped candidate,
    for every workload type, with no request and no placement to read (reading one raises), and
    must find what it finds with them, under every request above."""
    free = [e for e in STATIC if e.request_free]
    assert {e.code for e in free} >= {"WORKLOAD_MISMATCH", "NO_PRICE"}
    index = candidate_index(shipped, GROUP_SIGNATURE)
    for kw, w, p, plan in applies_cases:
        for c in index.cloud:
            with_request = StaticCase(c, place(c, w, p, plan), w, p)
            without = StaticCase(c, None, None, p)  # type: ignore[arg-type]
            for entry in free:
                assert entry.check(without) == entry.check(with_request), (entry.code, kw)


def test_the_recorder_would_catch_an_undeclared_read(mini: Catalog) -> None:
    c = candidate_index(mini, GROUP_SIGNATURE).cloud[0]
    assert _reads(lambda rc: rc.instance.vcpus, c) == {"instance.vcpus"}
    assert "instance.vcpus" not in GROUP_SIGNATURE


@pytest.mark.parametrize(
    "region", [None, "us-east-1", "us-east-1, europe-west4", "eu-*", "us-east-1,ap-*", "nowhere-1"]
)
def test_each_pool_holds_the_offers_price_matches_keeps(
    shipped: Catalog, region: str | None
) -> None:
    """A candidate's pool for a filter (candidates.py _matching) is its offers that the one
    price filter, catalog/queries.py price_matches, keeps, in their order."""
    for c in candidate_index(shipped, GROUP_SIGNATURE).cloud:
        for purchase in (None, *Purchase):
            pool = c.pool(region, purchase)
            assert pool.offers == tuple(
                o for o in c.offers if price_matches(o[3], purchase, region)
            ), (c.instance.id, region, purchase)


def test_group_signature_is_the_union_of_the_declared_reads() -> None:
    declared = set(PLACEMENT_READS).union(*(e.reads for e in STATIC))
    assert set(GROUP_SIGNATURE) == declared


@pytest.mark.parametrize("kw", REQUESTS, ids=[str(r) for r in REQUESTS])
def test_grouping_gives_each_instance_its_own_answer(mini: Catalog, kw: dict[str, Any]) -> None:
    """Every statically rejected instance type carries exactly the reasons its own checks give."""
    w = RecommendRequest(**kw, limit=1000)
    p = mini.workloads[w.workload]
    rejected = {r.id: r for r in recommend(mini, w).rejected}
    for c in candidate_index(mini, GROUP_SIGNATURE).cloud:
        if c.hardware.form_factor not in p.form_factors:
            continue
        own = static_violations(c, place(c, w, p), w, p)
        if own:
            assert rejected[c.instance.id].reasons == tuple(v.sentence for v in own)


def _registry_offerings(catalog: Catalog, w: RecommendRequest) -> set[tuple[str, str, str]]:
    """(instance type, region, purchase) of every offering that neither the STATIC nor the
    OFFERING entries find fault with: what the engine must recommend."""
    p = catalog.workloads[w.workload]
    found = set()
    for c in candidate_index(catalog, GROUP_SIGNATURE).cloud:
        s = place(c, w, p)
        if static_violations(c, s, w, p):
            continue
        for price in c.instance.prices:
            if not offering_violations(price, s.nodes, w):
                found.add((c.instance.id, price.region, price.purchase.value))
    return found


OFFER_REQUESTS = [
    dict(region=region, purchase=purchase, max_hourly_usd=budget)
    for region in (None, "us-east-1", "eu-west-1")
    for purchase in (None, "on_demand", "spot")
    for budget in (None, 1.0, 50.0, 100.0)
]


@pytest.mark.parametrize("kw", OFFER_REQUESTS, ids=[str(r) for r in OFFER_REQUESTS])
def test_inline_offering_test_agrees_with_the_registry(mini: Catalog, kw: dict[str, Any]) -> None:
    """The hot loop counts offering failures inline; the OFFERING entries explain them. The
    offerings recommended must be exactly those the entries find no fault with."""
    w = RecommendRequest(workload="fine_tuning", limit=1000, each_offering=True, **kw)
    expected = _registry_offerings(mini, w)
    result = recommend(mini, w)
    got = {(r.instance_type, r.region, r.purchase) for r in result.recommendations}
    assert got == expected
    # counted from the pools' running counts, never from the hits built (those are pruned)
    assert result.feasible_count == len(expected)


@pytest.mark.parametrize("kw", OFFER_REQUESTS, ids=[str(r) for r in OFFER_REQUESTS])
def test_group_path_agrees_with_the_registry(mini: Catalog, kw: dict[str, Any]) -> None:
    """By default a group of alike instance types is evaluated at once (one merged pool, members
    ordered by their cheapest offering): each type with an offering the entries find no fault
    with is listed once, every other one is rejected with its own closest offering's reasons,
    and the feasible count is still every such offering."""
    w = RecommendRequest(workload="fine_tuning", limit=1000, **kw)
    expected = _registry_offerings(mini, w)
    result = recommend(mini, w)
    assert {r.instance_type for r in result.recommendations} == {t for t, _, _ in expected}
    assert result.feasible_count == len(expected)
    p = mini.workloads[w.workload]
    rejected = {r.id for r in result.rejected}
    for c in candidate_index(mini, GROUP_SIGNATURE).cloud:
        if c.hardware.form_factor in p.form_factors and c.instance.prices:
            assert (c.instance.id in rejected) != any(t == c.instance.id for t, _, _ in expected)


PRUNE_REQUESTS = [
    dict(workload=workload, objective=objective, **kw)
    for workload in ("fine_tuning", "batch_processing")
    for objective in ("cheapest", "performance", "price_performance", "cost_to_completion")
    for kw in (dict(purchase=None), dict(purchase=None, max_hourly_usd=50.0), dict())
]


@pytest.mark.parametrize("kw", PRUNE_REQUESTS, ids=[str(r) for r in PRUNE_REQUESTS])
@pytest.mark.parametrize("limit", [1, 3, 10])
@pytest.mark.parametrize("which", ["mini", "shipped"])
@pytest.mark.parametrize("each", [True, False])
def test_pruned_ranking_is_the_head_of_the_full_one(
    request: pytest.FixtureRequest, which: str, kw: dict[str, Any], limit: int, each: bool
) -> None:
    """The engine builds only offerings that can still be ranked (advisor/engine/rank.py Bound,
    cheapest-first pools): a short list must be exactly the head of the list of every feasible
    offering, with the same scores, and the feasible count must not shrink with the limit. The
    shipped catalog has many offerings per type in many regions: the case where stopping at
    the first offering past the bound would drop a cheaper one if the pools were not sorted."""
    catalog: Catalog = request.getfixturevalue(which)
    full = recommend(catalog, RecommendRequest(limit=1000, each_offering=each, **kw))
    short = recommend(catalog, RecommendRequest(limit=limit, each_offering=each, **kw))

    def key(r: Any) -> tuple[Any, ...]:
        return (r.instance_type, r.region, r.purchase, r.score)

    assert [key(r) for r in short.recommendations] == [key(r) for r in full.recommendations[:limit]]
    assert short.feasible_count == full.feasible_count
    if each:
        assert len(full.recommendations) == min(1000, full.feasible_count)


@pytest.mark.parametrize("kw", PRUNE_REQUESTS, ids=[str(r) for r in PRUNE_REQUESTS])
def test_each_type_once_at_its_best_offering(shipped: Catalog, kw: dict[str, Any]) -> None:
    """By default an instance type is listed once, at the offering that ranks it highest: the
    list is the list of every offering with each type's later rows dropped."""
    every = recommend(shipped, RecommendRequest(limit=1000, each_offering=True, **kw))
    once = recommend(shipped, RecommendRequest(limit=1000, **kw))
    seen: set[str | None] = set()
    first_of_each = []
    for r in every.recommendations:
        if r.instance_type not in seen:
            seen.add(r.instance_type)
            first_of_each.append((r.instance_type, r.region, r.purchase))
    listed = [(r.instance_type, r.region, r.purchase) for r in once.recommendations]
    assert listed[: len(first_of_each)] == first_of_each  # `every` may stop at 1,000 rows
    assert len(set(listed)) == len(listed) == len({t for t, _, _ in listed})
    assert len(listed) < len(every.recommendations)


@pytest.fixture(scope="module")
def mini_flagged(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The mini catalog with the shipped price sanity thresholds and big8's us-east-1 spot price
    at 9.2% of on-demand: flagged (tests/test_price_sanity.py)."""
    from tests.test_price_sanity import thresholds

    def mutate(data: dict[str, Any]) -> None:
        data["price_sanity"] = thresholds()
        data["instance_types"][0]["prices"][2]["hourly_usd"] = 9.0

    return load_mini(tmp_path_factory.mktemp("flagged"), mutate)


FLAG_REQUESTS = [
    dict(purchase=purchase, region=region, include_flagged_prices=include)
    for purchase in (None, "spot")
    for region in (None, "us-east-1")
    for include in (False, True)
]


@pytest.mark.parametrize("kw", FLAG_REQUESTS, ids=[str(r) for r in FLAG_REQUESTS])
def test_inline_offering_test_agrees_on_flagged_prices(
    mini_flagged: Catalog, kw: dict[str, Any]
) -> None:
    """PRICE_FLAGGED counted inline agrees with its OFFERING entry."""
    w = RecommendRequest(workload="fine_tuning", limit=1000, each_offering=True, **kw)
    expected = _registry_offerings(mini_flagged, w)
    got = {
        (r.instance_type, r.region, r.purchase) for r in recommend(mini_flagged, w).recommendations
    }
    assert got == expected
    flagged = ("big8", "us-east-1", "spot")
    assert (flagged in got) == (kw["include_flagged_prices"] and kw["region"] != "eu-west-1")


def test_purchase_rule_none_means_any() -> None:
    from advisor.catalog.models import Purchase

    assert purchase_matches(None, Purchase.spot) and purchase_matches(None, Purchase.on_demand)
    assert not purchase_matches(Purchase.on_demand, Purchase.spot)


def test_one_code_one_set_of_words() -> None:
    """Each code's words are its registry entries' (one set); the one code checked outside
    the registries, a total budget's (advisor/engine/budget.py, on each offering's cost to
    completion), is worded as its request field's relaxation."""
    from advisor.engine import budget
    from advisor.engine.constraints import RELAXATIONS

    for code in CODE_WORDS:
        words = {
            e.words for registry in (STATIC, OFFERING, EDGE) for e in registry if e.code == code
        }
        if code == budget.CODE:
            assert not words and CODE_WORDS[code] == RELAXATIONS[budget.FIELD].words
            continue
        assert len(words) == 1, f"{code} is worded {words}"


def test_every_relaxable_field_is_a_request_field_with_a_direction() -> None:
    for registry in (STATIC, OFFERING, EDGE):
        for entry in registry:
            if entry.field is None:
                assert entry.direction == Direction.fixed
            else:
                assert entry.field in RecommendRequest.model_fields
                assert entry.field in RELAXATIONS


def test_nearest_alternative_follows_each_direction() -> None:
    # a ceiling: the smallest raise is nearest; a floor: the smallest cut (largest value)
    budget, memory = RELAXATIONS["max_hourly_usd"], RELAXATIONS["memory_gb"]
    assert budget.closeness(12.0) < budget.closeness(98.0)
    assert memory.closeness(640) < memory.closeness(80)
    assert budget.sentence(98.0, "big8") == "raise the hourly budget to $98.00/h: big8"
    assert RELAXATIONS["region"].sentence("eu-west-1", "x") == "change the region to eu-west-1: x"
    assert RELAXATIONS["gpu_count"].sentence(None, "x") == "drop the GPU count: x"


def test_by_memory_reason_states_the_count_memory_needs(mini: Catalog) -> None:
    # large_scale_training plans 8 GPUs by default (tests/factories.py); 100 GB on 80 GB GPUs
    # needs ceil(100 / (0.9 x 80)) = 2 of them. The reason must say 2 by memory, and where 8 came from.
    w = RecommendRequest(workload="large_scale_training", memory_gb=100, limit=1000)
    big8 = next(r for r in recommend(mini, w).recommendations if r.instance_type == "big8")
    first = big8.reasons[0]
    assert "(2 GPU(s) by memory; 8 planned, large_scale_training's default)" in first
    assert "8 GPU(s) by memory" not in first


def test_by_memory_reason_when_memory_sets_the_count(mini: Catalog) -> None:
    # 1000 GB on 80 GB GPUs, 72 GB usable each (the one headroom rule, 0.9):
    # ceil(1000 / 72) = 14 GPUs, more than the default 8: memory decides.
    w = RecommendRequest(workload="large_scale_training", memory_gb=1000)
    top = recommend(mini, w).recommendations[0]
    assert "(14 GPU(s) by memory)" in top.reasons[0]


def test_by_memory_reason_names_a_requested_count(mini: Catalog) -> None:
    w = RecommendRequest(workload="fine_tuning", memory_gb=20, gpu_count=4)
    top = recommend(mini, w).recommendations[0]
    assert "(1 GPU(s) by memory; 4 planned, as requested)" in top.reasons[0]


# Requests and node counts that between them make every offering check fail and pass on the
# shipped catalog (spot offerings too risky or not, below).
FAULT_CASES = [
    (dict(workload="fine_tuning", **kw), nodes)
    for kw in [*OFFER_REQUESTS, dict(include_flagged_prices=True, max_hourly_usd=20.0)]
    for nodes in (1, 3)
]
# A spot plan that never finishes: too risky under any policy (advisor/perf/spot.py too_risky).
NEVER_FINISHES = SpotPlan(1.0, 2, 1.0, 1.0, 1.0, math.inf, math.inf, ())
POLICY = SpotPolicy(
    checkpoint_interval_h=1,
    restart_h=1,
    max_interruptions=1,
    max_added_fraction=1,
    basis="test",
    estimated=True,
    source="test",
)


def test_offer_fault_bits_are_what_the_registry_finds(shipped: Catalog) -> None:
    """The engine sorts offerings by the checks they fail, counted inline (the closest offering
    of a rejected type, the few worth explaining among alternatives); the OFFERING entries
    explain them. Each bit must be exactly its entry's finding, on every shipped offering."""
    codes = [entry.code for entry in OFFERING]
    seen = singles = 0
    for (kw, nodes), risky in itertools.product(FAULT_CASES, (False, True)):
        w = RecommendRequest(**kw)
        for c in candidate_index(shipped, GROUP_SIGNATURE).cloud:
            spot = (c, NEVER_FINISHES, POLICY) if risky else None
            for offer in c.offers:
                faults = offer_faults(offer, w, nodes, risky, not w.include_flagged_prices)
                violations = offering_violations(offer[3], nodes, w, spot)
                found = {v.code for v in violations}
                expected = sum(1 << i for i, code in enumerate(codes) if code in found)
                assert faults == expected, (c.instance.id, offer[:3], kw, nodes, risky)
                seen |= faults
                if len(violations) == 1:  # the nearest alternatives read it without a sentence
                    (v,) = violations
                    assert offer_violation(faults, offer[3], nodes) == v._replace(sentence="")
                    singles |= faults
    assert seen == (1 << len(codes)) - 1, f"bits never set here: {seen:b}"
    assert singles == seen, f"never the only fault here: {seen & ~singles:b}"


# Requests without a model that between them make every entry static_faults counts fail on the
# shipped catalog, beside the mini catalog's REQUESTS.
FAULT_REQUESTS = [
    *(kw for kw in APPLIES_REQUESTS if "model" not in kw),
    dict(workload="large_scale_training", gpu_count=64, interconnect_gb_s=900, provider="gcp"),
    dict(workload="high_throughput_inference", memory_gb=900, power_budget_w=3000, max_gpus=2),
    dict(workload="fine_tuning", gpu_count=16, max_gpus=8),
    dict(workload="edge_inference", gpu_count=1),
]


@pytest.mark.parametrize("catalog", ["mini", "shipped"])
def test_static_fault_bits_are_what_the_registry_finds(
    catalog: str, request: pytest.FixtureRequest
) -> None:
    """A request without a model is checked by static_faults and request_free_faults inline,
    the STATIC entries writing sentences only for the rejections an answer lists. Each bit must
    be exactly its entry's finding, on every candidate of both catalogs, with the codes a
    Rejection lists, and static_violation each bit's violation as the registry finds it (its
    sentence left out)."""
    cat: Catalog = request.getfixturevalue(catalog)
    seen = can_fail = 0
    for kw in FAULT_REQUESTS:
        w = RecommendRequest(**kw)
        if w.workload not in cat.workloads:  # the mini catalog has some of them
            continue
        p = cat.workloads[w.workload]
        can_fail |= sum(
            1 << k for k, e in enumerate(STATIC) if e.applies is None or e.applies(w, p)
        )
        for c in candidate_index(cat, GROUP_SIGNATURE).cloud:
            s = place(c, w, p)
            case = StaticCase(c, s, w, p)
            expected = sum(
                1 << k for k, entry in enumerate(STATIC) if entry.check(case) is not None
            )
            faults = request_free_faults(c, p) | static_faults(c, s, w, p)
            assert faults == expected, (c.instance.id, kw)
            codes = tuple(dict.fromkeys(v.code for v in static_violations(c, s, w, p)))
            assert static_codes(faults) == codes
            for k, entry in enumerate(STATIC):
                if faults >> k & 1:
                    (v,) = static_violations(c, s, w, p, (entry,))
                    assert static_violation(1 << k, c, s) == v._replace(sentence=""), v
            seen |= faults
    # every entry that applies to a request without a model fails somewhere in the shipped one
    never = can_fail & ~seen if catalog == "shipped" else 0
    assert not never, [STATIC[k].code for k in range(len(STATIC)) if never >> k & 1]


def _mask_requests() -> list[dict[str, Any]]:
    """Requests without a model whose limits cut the groups at many places: sizes that place
    them on one node and on several, power budgets between groups' draws, GPU limits, links,
    providers and counts (a seeded sample of their combinations), then FAULT_REQUESTS'."""
    rng = random.Random(7)
    axes = (
        ("memory_gb", (None, 1, 30, 80, 200, 700, 1500, 5000)),
        ("power_budget_w", (None, 400, 1100, 2500, 6000, 10300, 40000)),
        ("max_gpus", (None, 1, 4, 8, 16, 64)),
        ("interconnect_gb_s", (None, 50, 400, 900, 1800)),
        ("provider", (None, "aws", "gcp", "azure")),
        ("gpu_count", (None, 1, 2, 8, 32)),
    )
    workloads = ("fine_tuning", "large_scale_training", "high_throughput_inference")
    workloads += ("low_latency_inference", "batch_processing")
    out = []
    for _ in range(400):
        kw: dict[str, Any] = {"workload": rng.choice(workloads)}
        for name, values in axes:
            value = rng.choice(values)
            if value is not None:
                kw[name] = value
        out.append(kw)
    return [*out, *FAULT_REQUESTS, *(kw for kw in NOTHING_FITS if "model" not in kw)]


@pytest.mark.parametrize("catalog", ["mini", "shipped"])
def test_fault_masks_set_each_groups_static_fault_bits(
    catalog: str, request: pytest.FixtureRequest
) -> None:
    """The unsized pass (evaluation.py _evaluate_unsized) sets the static fault bits on every
    group at once, as bit masks (checks.py FaultMasks, request_fault_masks). Each group must get
    exactly the bits static_faults and request_free_faults give its candidates placed one by
    one, and the candidates counted per combination of bits must be those candidates."""
    from advisor.engine.checks import request_fault_masks, request_faults
    from advisor.engine.evaluation import _checked_later, _fault_parts, _masks, _running
    from advisor.engine.placement import place_by_key

    cat: Catalog = request.getfixturevalue(catalog)
    index = candidate_index(cat, GROUP_SIGNATURE)
    seen_bits = cases = 0
    for kw in _mask_requests():
        w = RecommendRequest(**kw)
        if w.workload not in cat.workloads:
            continue
        p = cat.workloads[w.workload]
        running = _running(index, p)
        masks = _masks(index, p, running)
        wanted = p.default_gpu_count if w.gpu_count is None else w.gpu_count
        serving = p.sizing == "inference"
        placements = [place_by_key(k, w.memory_gb or 0.0, wanted, serving) for k in masks.keys]
        parts = _fault_parts(request_fault_masks(masks, placements, request_faults(w, p)), masks)
        expected_counts: dict[int, int] = {}
        for (checked, placement, faults), g in zip(
            _checked_later(running, placements, parts), running, strict=True
        ):
            assert checked is g
            for c in index.cloud_groups[g.group]:
                s = place(c, w, p)
                assert placement == s, (c.instance.id, kw)
                expected = request_free_faults(c, p) | static_faults(c, s, w, p)
                assert faults == expected, (c.instance.id, kw, faults, expected)
                if expected:
                    expected_counts[expected] = expected_counts.get(expected, 0) + 1
            seen_bits |= faults
            cases += 1
        assert {f: masks.members(groups) for groups, f in parts} == expected_counts, kw
    assert cases > 1000
    if catalog == "shipped":  # the masks set every static fault bit somewhere
        from advisor.engine import checks

        for name in ("_OVER_LIMIT", "_POWER", "_INTERCONNECT", "_PROVIDER", "_COUNT_ON_CPU"):
            assert seen_bits & getattr(checks, name), name
        assert seen_bits & (checks._BY_MEMORY | checks._BY_COUNT | checks._NETWORK)


def test_closest_offering_is_the_first_with_fewest_faults(shipped: Catalog) -> None:
    """A rejected option is explained by its offering that fails the fewest OFFERING checks,
    among equals one failing the budget alone, then the first (cheapest). The engine looks only
    at the first offering of each pattern of faults other than the budget; the long way looks at
    every offering."""
    cases = 0
    for (kw, nodes), risky in itertools.product(FAULT_CASES, (False, True)):
        w = RecommendRequest(**kw)
        skip_flagged = not w.include_flagged_prices
        for c in candidate_index(shipped, GROUP_SIGNATURE).cloud:
            if not c.offers:
                continue
            faults = [offer_faults(o, w, nodes, risky, skip_flagged) for o in c.offers]
            ranks = [(f.bit_count(), f & ~OVER_BUDGET != 0) for f in faults]
            first = ranks.index(min(ranks))
            found = _closest_offer(c, w, nodes, risky, skip_flagged)
            assert found == (first, faults[first]), (c.instance.id, kw, nodes, risky)
            cases += first > 0  # the cheapest offering is not always the answer
    assert cases > 100


# Requests nothing satisfies, so that the engine looks for the nearest alternatives: by budget,
# region, purchase option, flagged prices, one node's memory, a GPU limit, a lighter fine-tuning
# method and latency targets.
NOTHING_FITS = [
    dict(workload="fine_tuning", memory_gb=80, max_hourly_usd=0.5),
    dict(workload="fine_tuning", memory_gb=80, region="us-east-1", max_hourly_usd=1),
    dict(
        workload="fine_tuning", memory_gb=80, region="eu-west-1", purchase="spot", max_hourly_usd=2
    ),
    dict(workload="high_throughput_inference", memory_gb=40, purchase="spot", max_hourly_usd=0.3),
    dict(workload="low_latency_inference", memory_gb=434, max_hourly_usd=10),
    dict(workload="batch_processing", provider="gcp", max_hourly_usd=0.05),
    dict(workload="fine_tuning", model="llama-3.1-405b"),
    dict(workload="large_scale_training", model="llama-3.1-405b", tokens=1e12, max_gpus=8),
    dict(workload="low_latency_inference", model="llama-3-70b", max_ttft_ms=5, max_itl_ms=2),
]


# Requests without a model as the service benchmark varies them (benchmarks/bench_service.py
# DISTINCT_BODIES), at sizes that place the groups on one node and on several, with limits that
# the inline pass (evaluation.py _evaluate_unsized) checks: each answer listed and not.
SERVICE_REQUESTS = [
    {**kw, field: value}
    for kw, field, values in (
        (dict(workload="fine_tuning"), "memory_gb", (1, 80, 700, 3000)),
        (dict(workload="large_scale_training", interconnect_gb_s=900), "memory_gb", (40, 2000)),
        (dict(workload="high_throughput_inference", region="us-east-1"), "memory_gb", (9, 900)),
        (dict(workload="edge_inference"), "power_budget_w", (5, 25, 400)),
        (dict(workload="batch_processing", provider="gcp"), "max_hourly_usd", (0.1, 3, 90)),
        (dict(workload="low_latency_inference", max_hourly_usd=10), "memory_gb", (40, 300)),
        (dict(workload="fine_tuning", purchase="spot"), "memory_gb", (160, 1200)),
        (dict(workload="large_scale_training", objective="performance"), "memory_gb", (1, 1000)),
        (dict(workload="fine_tuning", max_gpus=8, power_budget_w=9000), "memory_gb", (80, 900)),
        (dict(workload="batch_processing", gpu_count=2, each_offering=True), "memory_gb", (60,)),
        (dict(workload="fine_tuning", objective="price_performance"), "memory_gb", (80,)),
        (dict(workload="fine_tuning", include_flagged_prices=True), "memory_gb", (80,)),
    )
    for value in values
]


@pytest.mark.parametrize("kw", [*FAULT_REQUESTS, *NOTHING_FITS, *SERVICE_REQUESTS], ids=str)
def test_an_answer_that_lists_no_rejection_counts_the_same(
    shipped: Catalog, kw: dict[str, Any]
) -> None:
    """Without the list (listed=False, as the CLI and the API answer without show_rejected) no
    rejection's reasons are written, and the answer is the listed one without its list: every
    count, summary, explanation and alternative the same. Each group of several instance types
    (p5e and p5en share one) counts once per type."""
    w = RecommendRequest(**kw)
    full = recommend(shipped, w)
    short = recommend(shipped, w, listed=False)
    assert short == full.model_copy(update={"rejected": ()})
    assert short.rejected_count == len(full.rejected)


def test_caches_keyed_by_request_filters_stay_bounded(
    shipped: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request may list any regions, so region lists are endless keys to the per-filter caches
    (offer pools, group pools, fault groups): they are bounded (candidates.py FILTERS_KEPT, made
    small here), and an answer under a list keeps to its regions."""
    bound = 8
    monkeypatch.setattr(candidates_module, "FILTERS_KEPT", bound)
    index = candidate_index(shipped, GROUP_SIGNATURE)
    forget_filters(index)  # what earlier tests left
    regions = sorted(shipped.regions)
    lists = [(a, b) for a in regions for b in regions if a != b][: 3 * bound + 5]
    for pair in lists:
        spec = ",".join(pair)
        # a budget below every offering: each option is rejected by its closest offering
        w = RecommendRequest(workload="fine_tuning", region=spec, max_hourly_usd=0.01)
        assert not recommend(shipped, w).recommendations
        listed = recommend(shipped, RecommendRequest(workload="fine_tuning", region=spec))
        assert {r.region for r in listed.recommendations} <= set(pair)
        counted = recommend(
            shipped, RecommendRequest(workload="fine_tuning", region=spec), listed=False
        )
        assert counted.recommendations == listed.recommendations
    for kept in ("_pools", "_pools_by_regions", "fault_groups", "fault_groups_by_regions"):
        assert 0 < max(len(getattr(c, kept)) for c in index.cloud) <= bound, kept
    for kept in ("group_pools", "_group_pools_by_regions"):
        assert 0 < len(getattr(index, kept)) <= bound * len(index.cloud_groups), kept
    assert 0 < len(index.pass_rows) <= bound  # the unsized pass's rows (evaluation.py _pass_rows)


def forget_filters(index: CandidateIndex) -> None:
    """Empties every cache kept per request filter (candidates.py per_filter)."""
    for c in index.cloud:
        for kept in (c._pools, c._pools_by_regions, c.fault_groups, c.fault_groups_by_regions):
            kept.clear()
    index.group_pools.clear()
    index._group_pools_by_regions.clear()
    index.pass_rows.clear()


def test_region_lists_that_admit_the_same_regions_share_what_is_kept(shipped: Catalog) -> None:
    """What is kept per region filter is shared by the lists that admit the same regions of an
    instance type (a list of regions it is not offered in adds nothing new to it), and answers
    from shared entries are those of entries built for the request alone: region lists of
    names and prefixes, purchase options and budgets, each answered with the caches as the
    requests before left them and again with them emptied."""
    index = candidate_index(shipped, GROUP_SIGNATURE)
    forget_filters(index)
    c = next(c for c in index.cloud if len(c.regions) > 1)
    inside = sorted(c.regions)[0]
    outside = sorted(shipped.regions - c.regions)[0]
    alone = c.pool(inside, Purchase.on_demand)
    assert c.pool(f"{outside},{inside}", Purchase.on_demand) is alone
    assert c.pool(f"{inside},{outside}", Purchase.spot) is not alone
    assert c.pool(None, None).offers and not c.pool(outside, None).offers
    assert c.pool(outside, None) is c.pool(f"{outside},{outside}*", None)

    regions = sorted(shipped.regions)
    prefixes = sorted({r.split("-")[0] + "-*" for r in regions if "-" in r})
    rng = random.Random(5)
    for _ in range(60):
        items = [rng.choice(regions if rng.random() < 0.8 else prefixes) for _ in range(3)]
        w = RecommendRequest(
            workload=rng.choice(["fine_tuning", "high_throughput_inference"]),
            memory_gb=rng.choice([20, 80, 300]),
            region=",".join(items),
            purchase=rng.choice([Purchase.on_demand, Purchase.spot, None]),
            max_hourly_usd=rng.choice([None, 2.0, 30.0]),
            show_rejected=True,
        )
        shared = recommend(shipped, w)
        short = recommend(shipped, w, listed=False)  # the unsized pass: GroupPool.closest
        forget_filters(index)
        assert shared == recommend(shipped, w), w
        assert short == recommend(shipped, w, listed=False), w


def test_a_region_is_kept_in_one_spelling_and_bounded(mini: Catalog) -> None:
    """Spaces and repeats are dropped from a region list (an answer repeats it in every
    listed rejection's "not offered in ..."), its order kept; longer than REGION_MAX_CHARS is
    refused, naming the field."""
    plain = RecommendRequest(workload="fine_tuning", region="us-east-1,eu-*", show_rejected=True)
    spelt = RecommendRequest(
        workload="fine_tuning", region=" us-east-1 ,us-east-1,, eu-* ", show_rejected=True
    )
    assert spelt.region == "us-east-1,eu-*"
    assert recommend(mini, spelt) == recommend(mini, plain)
    assert RecommendRequest(workload="fine_tuning", region="eu-*,us-east-1").region == (
        "eu-*,us-east-1"
    )
    with pytest.raises(ValidationError, match="region"):
        RecommendRequest(workload="fine_tuning", region="us-east-1" + " " * REGION_MAX_CHARS)


def test_parsed_region_specs_stay_bounded() -> None:
    """Region specs are parsed once each (queries.py region_spec), and they come from requests:
    past the bound the oldest are dropped, so endless spellings cannot grow the process."""
    bound = region_spec.cache_info().maxsize
    assert bound is not None
    for k in range(bound + 100):
        assert region_spec("us-east-1," + " " * k + "eu-*") == (frozenset({"us-east-1"}), ("eu-",))
    assert region_spec.cache_info().currsize <= bound
