"""Verification of a several-node probe, from every rank's result gathered by rank 0: each node's
verdict, the all-reduce across nodes against the instance type's network, and the node pairs
(--pairwise) to name the slow node. Pure: no I/O, no torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from advisor.catalog import Catalog
from advisor.fleet.grading import grade
from advisor.fleet.node_verification import NETWORK_EFFICIENCY, verify_node
from advisor.fleet.verification import resolve_expect, worst_verdict
from advisor.perf.training import Cluster
from probes.pairing import PairwisePlan, Test
from probes.report import Check, ClusterSummary, NodeSummary, Status
from probes.stats import Measurement
from probes.worker import RankResult


def verify_cluster(
    catalog: Catalog, world: Sequence[RankResult], expect: str | None = None
) -> ClusterSummary:
    by_node: dict[int, list[RankResult]] = {}
    for r in sorted(world, key=lambda r: r.rank):
        by_node.setdefault(r.node_rank, []).append(r)
    hosts = []
    for node_rank, ranks in sorted(by_node.items()):
        v = verify_node(catalog, ranks, expect=expect)
        hosts.append(
            NodeSummary(host=ranks[0].host, node_rank=node_rank, gpus=len(ranks), verdict=v.verdict)
        )
    lead = min(world, key=lambda r: r.rank)
    checks = network_checks(catalog, lead.cluster_collectives, expect, lead.local_world_size)
    checks += pairwise_checks(world, {h.node_rank: h.host for h in hosts})
    for h in hosts:
        if h.verdict in ("fail", "error"):
            checks.append(
                Check(
                    name="node_verdict",
                    status=h.verdict,
                    detail=f"node {h.node_rank} ({h.host}) has verdict {h.verdict}",
                    scope="cluster",
                    host=h.host,
                    action="drain",
                )
            )
    return ClusterSummary(
        nodes=len(hosts),
        world_size=len(world),
        hosts=hosts,
        checks=checks,
        verdict=worst_verdict(checks) if checks else "pass",
    )


def network_checks(
    catalog: Catalog, measurements: Sequence[Measurement], expect: str | None, gpus_per_node: int
) -> list[Check]:
    """Across nodes every GPU's ring traffic crosses its share of the node's network."""
    instance = resolve_expect(catalog, expect)[1] if expect else None
    per_gpu_gb_s = (  # the node's network shared by its GPUs: the performance model's rule
        Cluster(0.0, max(1, gpus_per_node), 0.0, instance.network_gbps).inter_gb_s()
        if instance and instance.network_gbps
        else None
    )
    checks = []
    for m in measurements:
        name = f"cross_node_{m.name}"
        if m.error is not None:
            checks.append(
                Check(
                    name=name,
                    status="error",
                    unit=m.unit,
                    detail=m.error,
                    scope="cluster",
                    action="drain",
                )
            )
            continue
        assert m.value is not None
        figure = f"{m.value:,.1f} GB/s busbw across nodes ({m.params.get('ranks')} ranks)"
        if per_gpu_gb_s is None:
            detail = f"{figure}; not compared (give --expect INSTANCE_TYPE for its network)"
            checks.append(
                Check(
                    name=name,
                    status="pass",
                    measured=m.value,
                    unit=m.unit,
                    detail=detail,
                    scope="cluster",
                )
            )
            continue
        expected = per_gpu_gb_s * NETWORK_EFFICIENCY
        ratio = m.value / expected
        status = grade(ratio)
        assert instance is not None
        detail = (
            f"{figure} = {ratio:.0%} of the expected {expected:,.1f} ({NETWORK_EFFICIENCY:.0%} of "
            f"{instance.id}'s {instance.network_gbps:g} Gbit/s over {gpus_per_node} GPUs)"
        )
        checks.append(
            Check(
                name=name,
                status=status,
                measured=m.value,
                expected=expected,
                unit=m.unit,
                detail=detail,
                scope="cluster",
                action=None if status == "pass" else "drain",
            )
        )
    return checks


def pairwise_checks(world: Sequence[RankResult], hosts: dict[int, str]) -> list[Check]:
    """Each --pairwise test against the median screening pair, then what the plan found: the
    slow nodes (slow with partners fast elsewhere) and the slow groups of the bisection."""
    plan = replayed_plan(world, len(hosts))
    if plan is None:
        return []
    base = plan.baseline()
    checks = []
    for t in plan.tests:
        where = ", ".join(f"{n} ({hosts.get(n, '?')})" for n in t.nodes)
        if t.value is None:
            status: Status = "error"
            detail = f"nodes {where}: the test failed"
        else:
            ratio = t.value / base if base else 1.0
            status = "fail" if plan.slow(t) else "pass"
            detail = f"nodes {where}: {t.value:,.1f} GB/s busbw = {ratio:.0%} of the median pair"
        checks.append(
            Check(
                name="pairwise_all_reduce" if t.phase != "bisect" else "group_all_reduce",
                status=status,
                measured=t.value,
                expected=base,
                unit="GB/s",
                detail=f"{detail} ({t.phase}, round {t.round + 1})",
                scope="cluster",
            )
        )
    for n in plan.slow_nodes():
        tests = [t for t in plan.tests if n in t.nodes]
        slow = sum(plan.slow(t) for t in tests)
        checks.append(
            Check(
                name="slow_node",
                status="fail",
                scope="cluster",
                host=hosts.get(n),
                action="drain",
                detail=f"node {n} ({hosts.get(n, '?')}) is slow in {slow} of {len(tests)} tests, "
                "with partners that are fast elsewhere: the slow node",
            )
        )
    for g in plan.slow_groups():
        checks.append(
            Check(
                name="slow_group",
                status="fail",
                scope="cluster",
                action="monitor",
                detail=f"nodes {list(g)} together are slower than the median pair while each "
                "part is not: the network between them (a switch, a rail) is the suspect",
            )
        )
    return checks


def replayed_plan(world: Sequence[RankResult], nodes: int) -> PairwisePlan | None:
    """The --pairwise plan as the ranks ran it, from their measurements (each test once)."""
    seen: dict[tuple[str, int, tuple[int, ...]], Test] = {}
    for r in sorted(world, key=lambda r: r.rank):
        for m in r.pairwise:
            group = m.params.get("nodes")
            if not isinstance(group, list) or len(group) < 2:
                continue
            phase = m.params.get("phase", "screen")
            key = (str(phase), int(m.params.get("round", 0)), tuple(int(n) for n in group))
            seen.setdefault(key, Test(key[2], phase, key[1], m.value))
    if not seen:
        return None
    plan = PairwisePlan(nodes)
    plan.tests = sorted(seen.values(), key=lambda t: (t.round, t.nodes))
    return plan
