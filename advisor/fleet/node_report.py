"""A node probe's report: its ranks' results verified (advisor.fleet.node_verification) and, on
node rank 0 of a several-node probe, the cluster summary (advisor.fleet.cluster_verification),
assembled into the one report the CLI prints and the service stores. Pure: no I/O."""

from __future__ import annotations

import datetime as dt
from typing import Any

from advisor.catalog import Catalog
from advisor.fleet.cluster_verification import network_checks, verify_cluster
from advisor.fleet.node_verification import NodeVerification, verify_node
from probes.node import NodeRun
from probes.report import ClusterSummary, Inventory, ProbeReport, Verdict
from probes.stats import Measurement
from probes.worker import RankResult


def node_report(run: NodeRun, catalog: Catalog, expect: str | None) -> ProbeReport:
    """The node's report from its ranks: every GPU's checks, the node's, and on node rank 0 of
    a several-node probe the cluster summary."""
    ranks = sorted(run.ranks, key=lambda r: r.rank)
    result: NodeVerification = verify_node(catalog, ranks, run.failures, expect)
    first = ranks[0] if ranks else None
    cluster = verify_cluster(catalog, run.world, expect) if run.world else None
    checks = result.checks + (cluster.checks if cluster else [])
    if cluster is None and first is not None and first.cluster_collectives:
        # another node than rank 0's: the figures across nodes are the same on every rank
        checks += network_checks(catalog, first.cluster_collectives, expect, len(ranks))
    return ProbeReport(
        **_lead_rank_fields(first, ranks),
        device=next((r.gpu for r in ranks if r.gpu is not None), 0),
        verdict=_verdict(result.verdict, cluster) if ranks else "error",
        accelerator=result.accelerator,
        expected_accelerator=result.expected_accelerator,
        inventory=_inventory(first, ranks),
        measurements=[m for r in ranks for m in r.measurements] + _lead_measurements(first),
        checks=checks,
        duration_s=run.duration_s,
        gpu_verdicts=result.gpu_verdicts,
        local_ranks=len(ranks),
        failed_ranks=run.failures,
        cluster=cluster,
    )


def _verdict(node: Verdict, cluster: ClusterSummary | None) -> Verdict:
    """The node's verdict, made worse by a cluster summary that failed or erred."""
    if cluster is not None and cluster.verdict in ("fail", "error") and node in ("pass", "warn"):
        return cluster.verdict
    return node


def _inventory(first: RankResult | None, ranks: list[RankResult]) -> Inventory:
    """The lead rank's inventory with every rank's GPUs and the first topology any rank saw."""
    inventory = first.inventory.model_copy() if first else Inventory(hostname="?", python="?")
    inventory.gpus = [g for r in ranks for g in r.inventory.gpus]
    inventory.topology = next((r.topology for r in ranks if r.topology), [])
    return inventory


def _lead_measurements(first: RankResult | None) -> list[Measurement]:
    """What the lead rank measured for the whole node: collectives, pairs and peers."""
    if first is None:
        return []
    return first.collectives + first.cluster_collectives + first.pairwise + first.peers


def _lead_rank_fields(first: RankResult | None, ranks: list[RankResult]) -> dict[str, Any]:
    """The report's fields the lead rank states for the node (defaults with no rank at all)."""
    if first is None:
        return {"created_at": dt.datetime.now(dt.UTC), "mode": "quick", "diagnosis": []}
    return {
        "created_at": first.created_at,
        "mode": first.mode,
        # the GPU path ran nowhere: why (every rank of a machine without a GPU says the same)
        "diagnosis": first.diagnosis if all(r.diagnosis for r in ranks) else [],
        "world_size": first.world_size,
        "node_rank": first.node_rank,
        "backend": first.backend,
    }
