"""Verification of a several-node probe, from every rank's result gathered by rank 0: each node's
verdict, the all-reduce across nodes against the instance type's network, and the node pairs
(--pairwise) to name the slow node. Pure: no I/O, no torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from advisor.catalog import Catalog
from advisor.catalog.models import InstanceType
from advisor.fleet.expectations import planned_collective
from advisor.fleet.node_verification import PLANNED_WARN_AT, verify_node, voted_run
from advisor.fleet.verification import resolve_expect, worst_verdict
from advisor.perf.calibration import NETWORK_CHECK
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
    """The all-reduce across every rank of every node against what the training plans assume of
    the instance type's network (expectations.planned_busbw: each GPU's share of the node's
    network carries one of its parallel rings, so the bus moves at the whole node's network,
    bounded by the GPU link). An estimate (no sourced figure holds across fabrics and sizes:
    EFA on p5.48xlarge reaches 0.55-1.2x of it, docs/reference-figures.md), so it warns below
    PLANNED_WARN_AT and never drains; a slow node is named by --pairwise against its peers."""
    instance = resolve_expect(catalog, expect)[1] if expect else None
    checks: list[Check] = []
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
        ranks = int(m.params.get("ranks") or 0)
        figure = f"{m.value:,.1f} GB/s busbw across nodes ({ranks} ranks)"
        planned = _planned_across_nodes(m, instance, ranks, gpus_per_node)
        if planned is None:
            why = (
                "give --expect INSTANCE_TYPE for its network"
                if instance is None
                else f"{instance.id} has no network figure"
            )
            checks.append(
                Check(
                    name=name,
                    status="pass",
                    measured=m.value,
                    unit=m.unit,
                    detail=f"{figure}; not compared ({why})",
                    scope="cluster",
                )
            )
            continue
        value, formula = planned
        ratio = m.value / value
        status: Status = "warn" if ratio < PLANNED_WARN_AT else "pass"
        checks.append(
            Check(
                name=name,
                status=status,
                measured=m.value,
                expected=value,
                unit=m.unit,
                detail=(
                    f"{figure} = {ratio:.0%} of what the training plans assume of this network, "
                    f"{value:,.1f} (estimated; {formula})"
                ),
                scope="cluster",
                action="monitor" if status == "warn" else None,
            )
        )
    vote = _network_against_plan(checks)
    return checks if vote is None else [*checks, vote]


def _network_against_plan(checks: list[Check]) -> Check | None:
    """The network as the fleet feeds it back into plans (NETWORK_CHECK): the all-reduce across
    nodes of VOTED_BYTES (else the largest measured) compared with the plan, under its own name
    so that the fleet votes one ratio per host whatever sizes each run measured."""
    voted = voted_run(
        (c for c in checks if c.expected and c.measured is not None), "cross_node_all_reduce_"
    )
    if voted is None:
        return None
    return voted.model_copy(
        update={
            "name": NETWORK_CHECK,
            "detail": f"{voted.name}: {voted.detail}; the fleet's vote of this ratio scales "
            "the network in its plans across nodes",
        }
    )


def _planned_across_nodes(
    m: Measurement, instance: InstanceType | None, ranks: int, gpus_per_node: int
) -> tuple[float, str] | None:
    if instance is None or not instance.network_gbps:
        return None
    return planned_collective(
        m.name,
        "all_reduce",
        ranks,
        instance.interconnect_gb_s,
        max(1, gpus_per_node),
        instance.network_gbps,
    )


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
