"""--pairwise at scale: the schedule (circle-method rounds of disjoint pairs, suspects against
cleared nodes, bisection of a cluster slower than its pairs) on modelled fleets of up to 1,000
nodes, and the real thing with four local nodes (gloo), one of them slowed."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from probes.pairing import PairwisePlan, circle_rounds
from probes.report import ProbeReport

REPO = Path(__file__).resolve().parents[1]
FAULTS = Path(__file__).parent / "rank_faults"
Measure = Callable[[tuple[int, ...]], float]


@pytest.mark.parametrize("n", [2, 7, 8, 13])
def test_the_circle_method_meets_every_pair_once_in_disjoint_rounds(n: int) -> None:
    rounds = circle_rounds(n, n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    met = [pair for one in rounds for pair in one]
    assert sorted(met) == list(itertools.combinations(range(n), 2))  # each pair exactly once
    for one in rounds:
        nodes = [x for pair in one for x in pair]
        assert len(nodes) == len(set(nodes)) and len(one) == n // 2  # N/2 disjoint pairs


def run(plan: PairwisePlan, measure: Measure) -> PairwisePlan:
    """The ranks' loop, each group measured by `measure` (a modelled fleet)."""
    while (step := plan.next_round()) is not None:
        phase, groups = step
        flat = [x for g in groups for x in g]
        assert len(flat) == len(set(flat)), "a round's groups share no node"
        plan.record(phase, groups, [measure(g) for g in groups])
    return plan


def slowest(slow: set[int], base: float = 100.0) -> Measure:
    """A ring is as fast as its slowest member: half speed for the slow nodes."""
    return lambda group: base * (0.5 if slow & set(group) else 1.0)


def test_a_thousand_nodes_in_linear_tests_and_constant_rounds() -> None:
    slow = {17, 503, 998}
    plan = run(PairwisePlan(1000, rounds=2, cluster_busbw=50.0), slowest(slow))
    assert plan.slow_nodes() == sorted(slow)
    # 2 screening rounds of 500 pairs, then the suspects not cleared by either round, each with a
    # cleared partner in one round; the cluster's slowness is explained: no bisection
    assert plan.rounds_run == 3
    assert len(plan.tests) == 2 * 500 + len(slow)
    assert plan.slow_groups() == []
    assert 1000 * 999 // 2 / len(plan.tests) > 490  # against every pair, one at a time


def test_one_screening_round_isolates_both_nodes_of_each_slow_pair() -> None:
    plan = run(PairwisePlan(64, rounds=1), slowest({5}))
    isolate = [t for t in plan.tests if t.phase == "isolate"]
    assert len(isolate) == 2  # node 5 and its round-1 partner, each against a cleared node
    assert plan.slow_nodes() == [5] and plan.rounds_run == 2


def test_a_fault_only_at_scale_is_bisected_to_the_smallest_slow_groups() -> None:
    """Nodes 8-15 behind an oversubscribed switch: pairs are fine, four or more of them at once
    congest it. The cluster runs at half the pairs' speed with no slow node."""

    def congested(group: tuple[int, ...]) -> float:
        return 50.0 if len(set(group) & set(range(8, 16))) >= 4 else 100.0

    plan = run(PairwisePlan(16, rounds=2, cluster_busbw=50.0), congested)
    assert plan.slow_nodes() == []
    assert plan.slow_groups() == [tuple(range(8, 12)), tuple(range(12, 16))]
    assert plan.rounds_run == 2 + 3  # screening, then halves of 8, 4 and 2 nodes (log2 16 - 1)


def test_a_healthy_fleet_stops_after_screening() -> None:
    plan = run(PairwisePlan(100, rounds=2, cluster_busbw=100.0), slowest(set()))
    assert (plan.rounds_run, len(plan.tests), plan.slow_nodes()) == (2, 100, [])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_four_local_nodes_name_the_slow_one(tmp_path: Path) -> None:
    """`advisor probe --nodes 4 --pairwise` four times on this machine (gloo); node 3's
    collectives each wait 50 ms first. Two screening rounds, then node 3 against a cleared node."""
    endpoint = f"127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "advisor", "probe", "--nodes", "4", "--rdzv-endpoint", endpoint]
    cmd += ["--pairwise", "--json", "--rank-timeout-s", "120"]
    env = {
        **os.environ,
        "ADVISOR_PROBE_LOCK_DIR": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(FAULTS), str(REPO)]),
        "ADVISOR_TEST_FAULT": "3:slow",
    }
    nodes = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=400) for p in nodes]
    reports = [ProbeReport.model_validate_json(out) for out, _ in outputs]
    lead = next(r for r in reports if r.node_rank == 0)
    assert lead.cluster is not None, [err[-2000:] for _, err in outputs]
    slow = [c for c in lead.cluster.checks if c.name == "slow_node"]
    hosts = {h.node_rank: h.host for h in lead.cluster.hosts}
    assert [c.host for c in slow] == [hosts[3]], [c.detail for c in lead.cluster.checks]
    pairs = [c for c in lead.cluster.checks if c.name == "pairwise_all_reduce"]
    assert sum("(screen, round 1)" in c.detail for c in pairs) == 2  # 2 disjoint pairs at once
    assert sum("(screen, round 2)" in c.detail for c in pairs) == 2
    assert any("(isolate, round 3)" in c.detail and "3 (" in c.detail for c in pairs)
