"""A node probe's report: its ranks' results verified (advisor.fleet.node_verification) and, on
node rank 0 of a several-node probe, the cluster summary (advisor.fleet.cluster_verification),
assembled into the one report the CLI prints and the service stores. Pure: no I/O."""

from __future__ import annotations

import datetime as dt

from advisor.catalog import Catalog
from advisor.fleet.cluster_verification import network_checks, verify_cluster
from advisor.fleet.node_verification import NodeVerification, verify_node
from probes.node import NodeRun
from probes.report import Inventory, ProbeReport


def node_report(run: NodeRun, catalog: Catalog, expect: str | None) -> ProbeReport:
    """The node's report from its ranks: every GPU's checks, the node's, and on node rank 0 of
    a several-node probe the cluster summary."""
    ranks = sorted(run.ranks, key=lambda r: r.rank)
    result: NodeVerification = verify_node(catalog, ranks, run.failures, expect)
    first = ranks[0] if ranks else None
    inventory = first.inventory.model_copy() if first else Inventory(hostname="?", python="?")
    inventory.gpus = [g for r in ranks for g in r.inventory.gpus]
    inventory.topology = next((r.topology for r in ranks if r.topology), [])
    cluster = verify_cluster(catalog, run.world, expect) if run.world else None
    checks = result.checks + (cluster.checks if cluster else [])
    if cluster is None and first is not None and first.cluster_collectives:
        # another node than rank 0's: the figures across nodes are the same on every rank
        checks += network_checks(catalog, first.cluster_collectives, expect, len(ranks))
    verdict = result.verdict
    if cluster is not None and cluster.verdict in ("fail", "error") and verdict in ("pass", "warn"):
        verdict = cluster.verdict
    return ProbeReport(
        created_at=first.created_at if first else dt.datetime.now(dt.UTC),
        mode=first.mode if first else "quick",
        device=next((r.gpu for r in ranks if r.gpu is not None), 0),
        verdict=verdict if ranks else "error",
        accelerator=result.accelerator,
        expected_accelerator=result.expected_accelerator,
        inventory=inventory,
        # the GPU path ran nowhere: why (every rank of a machine without a GPU says the same)
        diagnosis=first.diagnosis if first and all(r.diagnosis for r in ranks) else [],
        measurements=[m for r in ranks for m in r.measurements]
        + (
            first.collectives + first.cluster_collectives + first.pairwise + first.peers
            if first
            else []
        ),
        checks=checks,
        duration_s=run.duration_s,
        gpu_verdicts=result.gpu_verdicts,
        world_size=first.world_size if first else None,
        local_ranks=len(ranks),
        node_rank=first.node_rank if first else None,
        backend=first.backend if first else None,
        failed_ranks=run.failures,
        cluster=cluster,
    )
