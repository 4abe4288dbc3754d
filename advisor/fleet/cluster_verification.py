"""Verification of a several-node probe, from every rank's result gathered by rank 0: each node's
verdict, the all-reduce across nodes against the instance type's network, and the node pairs
(--pairwise) to name the slow node. Pure: no I/O, no torch.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from advisor.catalog import Catalog
from advisor.fleet.grading import grade
from advisor.fleet.node_verification import NETWORK_EFFICIENCY, OUTLIER_FAIL_AT, verify_node
from advisor.fleet.verification import resolve_expect, worst_verdict
from advisor.perf.training import Cluster
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
    """Each node pair against the median pair; a node in every slow pair is the slow node."""
    pairs = _node_pairs(world)
    if not pairs:
        return []
    values = {k: m.value for k, m in pairs.items() if m.value is not None}
    median = statistics.median(values.values()) if values else None
    slow = [k for k, v in values.items() if median and v / median < OUTLIER_FAIL_AT]
    slow += [k for k, m in pairs.items() if m.value is None]
    checks = [
        _pair_check(pair, m, hosts, median, pair in slow) for pair, m in sorted(pairs.items())
    ]
    return checks + _slow_node(slow, hosts)


def _node_pairs(world: Sequence[RankResult]) -> dict[tuple[int, int], Measurement]:
    """Each node pair's all-reduce measurement, the lowest rank's where several carry one."""
    pairs: dict[tuple[int, int], Measurement] = {}
    for r in sorted(world, key=lambda r: r.rank):
        for m in r.pairwise:
            nodes = m.params.get("nodes")
            if isinstance(nodes, list) and len(nodes) == 2:
                pairs.setdefault((int(nodes[0]), int(nodes[1])), m)
    return pairs


def _pair_check(
    pair: tuple[int, int],
    m: Measurement,
    hosts: dict[int, str],
    median: float | None,
    slow: bool,
) -> Check:
    a, b = pair
    where = f"nodes {a} ({hosts.get(a, '?')}) and {b} ({hosts.get(b, '?')})"
    if m.value is None:
        status: Status = "error"
        detail = f"{where}: {m.error}"
    else:
        ratio = m.value / median if median else 1.0
        status = "fail" if slow else "pass"
        detail = f"{where}: {m.value:,.1f} GB/s busbw = {ratio:.0%} of the median pair"
    return Check(
        name="pairwise_all_reduce",
        status=status,
        measured=m.value,
        expected=median,
        unit="GB/s",
        detail=detail,
        scope="cluster",
    )


def _slow_node(slow: list[tuple[int, int]], hosts: dict[int, str]) -> list[Check]:
    """A node in every slow pair (of three nodes or more): the slow node, to drain."""
    counts = Counter(n for pair in slow for n in pair)
    if not counts or len(hosts) <= 2:
        return []
    worst, times = counts.most_common(1)[0]
    in_pairs = len(hosts) - 1
    if times != in_pairs:
        return []
    return [
        Check(
            name="slow_node",
            status="fail",
            scope="cluster",
            host=hosts.get(worst),
            action="drain",
            detail=f"node {worst} ({hosts.get(worst, '?')}) is in every slow pair "
            f"({times} of {in_pairs}): the slow node",
        )
    ]
