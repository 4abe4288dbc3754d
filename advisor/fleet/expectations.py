"""What a node of an instance type should measure, from the catalog and the model the plans use:
matmul and copies per GPU, the peer link, and all-reduce / all-gather bus bandwidth at each
message size by the training model's collective model (advisor/perf/training.py: the link's bus
bandwidth and NCCL's latency per ring step), so "is this expected?" has an answer for every SKU
the catalog knows. Published per-SKU node figures sit beside them as checks on the model. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.catalog import Catalog
from advisor.catalog.models import Accelerator, InstanceType
from advisor.fleet.verification import (
    PCIE_PINNED_EFFICIENCY,
    _d2d_expected,
    _matmul_expected,
    pcie_gbps,
)
from advisor.perf.inference import one_way_gb_s
from advisor.perf.training import Cluster, Ring
from probes.collectives import bus_factor, parse_size, size_label

PLANNED_SIZES = ("8M", "64M", "256M", "1G", "4G", "16G")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
# Peer copy one way against the link's one-way rate: 392 of 450 GB/s measured between two H200s
# over NVLink (NV18), 2026-11-30, on this project's test machine (docs/reference-figures.md
# section 1); node reports grade the peer copy against it too (advisor/fleet/node_verification.py).
P2P_EFFICIENCY = 392 / 450
GB = 1e9


@dataclass(frozen=True)
class Published:
    """A node figure someone published for an instance's hardware, to hold the model to."""

    check: str
    value: float
    unit: str
    source: str


# Per-SKU node figures (gathered late 2026). Ring figures and health-check gates; NVLS (NVLink
# SHARP) runs above the ring algorithm the model plans with.
PUBLISHED: dict[str, tuple[Published, ...]] = {
    "p5.48xlarge": (
        Published(
            "all_reduce_1G",
            370.0,
            "GB/s",
            "8xH100 ring all-reduce busbw about 370 GB/s above 256 MB; about 480 with NVLS "
            "(NVIDIA nccl-tests issue 212, maintainer's answer)",
        ),
        Published(
            "all_reduce_16G",
            460.0,
            "GB/s",
            "Azure HPC node health checks, nd96isr_h100_v5.conf: check_nccl_allreduce 460.0 "
            "at 16 GB (8xH100 NVSwitch, NVLS)",
        ),
        Published(
            "h2d_pinned",
            52.0,
            "GB/s",
            "Azure HPC node health checks, nd96isr_h100_v5.conf: check_cuda_bw 52",
        ),
    ),
    "p5en.48xlarge": (
        Published(
            "all_reduce_4G",
            475.0,
            "GB/s",
            "8xH200 all-reduce busbw 475 GB/s at 4 GiB with NVLS (NVIDIA nccl-tests issue 272)",
        ),
        Published(
            "all_reduce_16G",
            431.0,
            "GB/s",
            "Azure HPC node health checks, nd96isr_h200_v5.conf: check_nccl_allreduce 431.0 "
            "at 16 GB (8xH200)",
        ),
        Published(
            "h2d_pinned",
            52.0,
            "GB/s",
            "Azure AI benchmarking guide, ND H200 v5: nvbandwidth host-to-device 52 GB/s",
        ),
        Published(
            "peer_copy",
            335.0,
            "GB/s",
            "Azure HPC node health checks, nd96isr_h200_v5.conf: check_gpu_bw 48 335 (per-pair "
            "P2P gate, clocks locked)",
        ),
    ),
}


@dataclass(frozen=True)
class Planned:
    check: str
    planned: float | None
    unit: str
    source: str  # where the figure comes from: the catalog entry, or the model's formula
    published: Published | None = None


def planned_busbw(
    op: str, nbytes: int, ranks: int, link_gb_s: float, per_node: int = 0, network_gbps: float = 0.0
) -> tuple[float, str]:
    """nccl-tests busbw of `op` on `ranks` GPUs by the training model's ring: the bytes each rank
    moves over the ring's bus bandwidth plus NCCL's latency per step. On one node (`per_node` 0:
    every rank on one) the bus is the GPU link's; across nodes of `per_node` GPUs it is also
    bounded by the node's `network_gbps` (Cluster.ring_gb_s: each GPU's NIC share carries one of
    the node's parallel rings, so the bus moves at the whole node's network)."""
    per_node = per_node or ranks
    cluster = Cluster(1.0, per_node, link_gb_s, network_gbps)
    reduce = op == "all_reduce"
    ring = Ring(
        volume=nbytes * (2 if reduce else 1), ranks=ranks, stride=1, calls=1, all_reduce=reduce
    )
    seconds = ring.seconds(cluster)
    busbw = nbytes / seconds * bus_factor(op, ranks) / GB
    bus = cluster.ring_gb_s(ranks, 1)
    where = f"{ranks} ranks at {bus:.0f} GB/s bus bandwidth"
    if ranks > per_node:
        nodes = -(-ranks // per_node)
        where = (
            f"{ranks} ranks over {nodes} nodes at {bus:.0f} GB/s bus bandwidth (the GPU link's "
            f"{cluster.intra_gb_s():.0f}, the node's {network_gbps:g} Gbit/s network "
            f"{network_gbps / 8:.0f})"
        )
    formula = f"training model: {where} + {ring.latency_s(cluster) * 1e6:.0f} us NCCL latency"
    return busbw, formula


def plan_expectations(catalog: Catalog, instance: InstanceType) -> list[Planned]:
    """Every figure a node of `instance` should reach, each with its source."""
    acc = catalog.accelerators.get(instance.accelerator or "")
    published = {p.check: p for p in PUBLISHED.get(instance.id, ())}
    found = _per_gpu(catalog, acc) if acc is not None else []
    link = instance.interconnect_gb_s
    if instance.gpu_count >= 2:
        peer = one_way_gb_s(link) * P2P_EFFICIENCY if link else None
        why = (
            f"{P2P_EFFICIENCY:.0%} of the link's one way ({one_way_gb_s(link):.0f} GB/s)"
            if link
            else "no GPU link: peers copy over PCIe"
        )
        found.append(Planned("peer_copy", peer, "GB/s", why))
        for op in ("all_reduce", "all_gather"):
            for size in PLANNED_SIZES:
                busbw, formula = planned_busbw(op, parse_size(size), instance.gpu_count, link)
                found.append(Planned(f"{op}_{size}", busbw, "GB/s", formula))
    if instance.network_gbps:  # the all-reduce across every GPU of two nodes
        per_node = instance.gpu_count or 1
        for size in PLANNED_SIZES:
            busbw, formula = planned_busbw(
                "all_reduce", parse_size(size), 2 * per_node, link, per_node, instance.network_gbps
            )
            found.append(Planned(f"cross_node_all_reduce_{size}", busbw, "GB/s", formula))
    return [Planned(p.check, p.planned, p.unit, p.source, published.get(p.check)) for p in found]


def _per_gpu(catalog: Catalog, acc: Accelerator) -> list[Planned]:
    found = []
    for precision in PRECISIONS:
        value, basis = _matmul_expected(precision, acc, catalog)
        if value is not None:
            found.append(Planned(f"matmul_{precision}", value, "TFLOP/s", basis))
    value, basis = _d2d_expected(acc, catalog)
    found.append(Planned("d2d", value, "GB/s", basis))
    link = pcie_gbps(acc.pcie.gen, acc.pcie.width) if acc.pcie is not None else None
    if link is not None and acc.pcie is not None:
        why = (
            f"{PCIE_PINNED_EFFICIENCY:.0%} of Gen{acc.pcie.gen} x{acc.pcie.width} ({link:.1f} GB/s)"
        )
        for name in ("h2d_pinned", "d2h_pinned"):
            found.append(Planned(name, link * PCIE_PINNED_EFFICIENCY, "GB/s", why))
    return found


def planned_collective(
    name: str, op: str, ranks: int, link_gb_s: float, per_node: int = 0, network_gbps: float = 0.0
) -> tuple[float, str] | None:
    """The model's figure for a measured collective named like all_reduce_256M (None: a size
    the name does not give); across nodes of `per_node` GPUs and `network_gbps` as
    planned_busbw."""
    size = name.removeprefix(f"{op}_")
    try:
        nbytes = parse_size(size)
    except ValueError:
        return None
    if op not in ("all_reduce", "all_gather", "reduce_scatter") or ranks < 2:
        return None
    busbw, formula = planned_busbw(
        "all_gather" if op == "reduce_scatter" else op,
        nbytes,
        ranks,
        link_gb_s,
        per_node,
        network_gbps,
    )
    return busbw, f"{formula}, at {size_label(nbytes)}"
