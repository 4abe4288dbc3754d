"""Verification of a node probe: every GPU against the catalog and against the node's median,
peer links, collectives, health counters, ranks that did not finish, and (on node rank 0 of a
several-node probe) every node and the network between them. Pure: no I/O, no torch.

Per-GPU checks come from advisor.fleet.verification (one GPU's verification), tagged with the
GPU; the rest are the node's own. The node's verdict is the worst of all of them.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from advisor.catalog import Catalog
from advisor.catalog.models import Accelerator, CollectiveReference, GpuLink, InstanceType
from advisor.fleet.expectations import P2P_EFFICIENCY, planned_collective
from advisor.fleet.grading import PASS_AT, grade
from advisor.fleet.health import health_checks
from advisor.fleet.verification import (
    gpu_count_check,
    graded,
    match_by_name,
    resolve_expect,
    verify,
    worst_verdict,
)
from advisor.perf.calibration import LINK_CHECK
from advisor.perf.inference import one_way_gb_s
from advisor.units import GB, MIB
from probes.collectives import parse_size
from probes.report import Check, GpuVerdict, PeerLink, RankFailure, Status, Verdict
from probes.stats import Measurement
from probes.worker import RankResult

# Inside a node each GPU is held to the node's median too (gpu-fryer fails a GPU more than 10%
# below the best of its node): warn beyond 5% below the median, fail beyond 10%.
OUTLIER_WARN_AT, OUTLIER_FAIL_AT = 0.95, 0.90
OUTLIER_UNITS = {"TFLOP/s", "GB/s"}  # higher is better; latencies and ratios are left out
# The all-reduce size the fleet's link and network votes compare: one that both probe modes
# measure (quick 64 MiB-1 GiB, full 8 MiB-4 GiB), so that a fleet running either votes like with
# like (over EFA the plan's share grows from 0.77 at 1 GiB to 0.96 at 4 GiB:
# docs/reference-figures.md section 2); the largest measured where it is missing.
VOTED_BYTES = 1 << 30
# A figure planned by the model (an estimate) warns below this share of it, never fails: DCGM's
# per-SKU thresholds are 0.75 x a measured reference.
PLANNED_WARN_AT = 0.75
_ORDER: tuple[Status, ...] = ("pass", "skip", "warn", "error", "fail")


@dataclass(frozen=True)
class NodeVerification:
    accelerator: str | None
    expected_accelerator: str | None
    checks: list[Check]
    gpu_verdicts: list[GpuVerdict]
    verdict: Verdict


def verify_node(
    catalog: Catalog,
    ranks: Sequence[RankResult],
    failures: Sequence[RankFailure] = (),
    expect: str | None = None,
) -> NodeVerification:
    expected, instance = resolve_expect(catalog, expect) if expect else (None, None)
    measured = [r for r in ranks if r.gpu is not None]
    checks: list[Check] = []
    verdicts = []
    per_gpu = _per_gpu(catalog, ranks, expected)
    _hold_to_median(per_gpu, measured)
    for r in ranks:
        own = per_gpu[r.rank]
        checks += own
        if r.gpu is not None:
            gpu = r.inventory.gpu
            verdicts.append(
                GpuVerdict(
                    gpu=r.gpu,
                    uuid=gpu.uuid if gpu else None,
                    name=gpu.name if gpu else None,
                    rank=r.rank,
                    verdict=worst_verdict(own),
                )
            )
    matched = _matched(catalog, measured)
    reference = expected or matched
    checks += _node_checks(catalog, ranks, failures, reference, instance)
    return NodeVerification(
        accelerator=matched.id if matched else None,
        expected_accelerator=expected.id if expected else None,
        checks=checks,
        gpu_verdicts=verdicts,
        verdict=worst_verdict(checks),
    )


def _per_gpu(
    catalog: Catalog, ranks: Sequence[RankResult], expected: Accelerator | None
) -> dict[int, list[Check]]:
    out = {}
    for r in ranks:
        v = verify(
            catalog, r.inventory, r.diagnosis, r.measurements, expected.id if expected else None
        )
        gpu = r.inventory.gpu
        checks = [
            c.model_copy(
                update={"scope": "gpu", "gpu": r.gpu, "gpu_uuid": gpu.uuid if gpu else None}
            )
            for c in v.checks
        ]
        if gpu is not None and gpu.health is not None:
            checks += [
                c.model_copy(update={"gpu": r.gpu, "gpu_uuid": gpu.uuid})
                for c in health_checks(gpu.health)
            ]
        out[r.rank] = checks
    return out


def _hold_to_median(per_gpu: dict[int, list[Check]], measured: Sequence[RankResult]) -> None:
    """Each GPU's figure against the node's median of it: a slower GPU's check is downgraded,
    and its detail says by how much and what the median is."""
    if len(measured) < 2:
        return
    names = {m.name for r in measured for m in r.measurements if m.unit in OUTLIER_UNITS}
    for name in sorted(names):
        values = {
            r.rank: m.value
            for r in measured
            for m in r.measurements
            if m.name == name and m.value is not None
        }
        if len(values) < 2:
            continue
        median = statistics.median(values.values())
        if median <= 0:
            continue
        for rank, value in values.items():
            ratio = value / median
            status = grade(ratio, OUTLIER_WARN_AT, OUTLIER_FAIL_AT)
            if status == "pass":
                continue
            checks = per_gpu[rank]
            i = next(i for i, c in enumerate(checks) if c.name == name)
            c = checks[i]
            worse = max(c.status, status, key=_ORDER.index)
            detail = (
                f"{c.detail}; {ratio:.0%} of the node's median {median:,.1f} over "
                f"{len(values)} GPUs: slower than its peers"
            )
            checks[i] = c.model_copy(
                update={"status": worse, "detail": detail, "action": "monitor"}
            )


def _matched(catalog: Catalog, measured: Sequence[RankResult]) -> Accelerator | None:
    for r in measured:
        gpu = r.inventory.gpu
        found = match_by_name(catalog, gpu.name if gpu else None)
        if found is not None:
            return found
    return None


def _node_checks(
    catalog: Catalog,
    ranks: Sequence[RankResult],
    failures: Sequence[RankFailure],
    acc: Accelerator | None,
    instance: InstanceType | None,
) -> list[Check]:
    checks: list[Check] = []
    if instance is not None:
        checks.append(_node(gpu_count_check(instance, _visible_count(ranks))))
        checks += _memory_check(ranks, instance, catalog)
    lead = next((r for r in ranks if r.local_rank == 0), None)
    if lead is not None:
        checks += _link_checks(lead, acc, instance)
        checks += collective_checks(
            lead.collectives, acc, instance, catalog, lead.local_world_size, lead.backend
        )
    checks += _error_checks(ranks)
    checks += [_failed_rank(f) for f in failures]
    return checks


def _node(c: Check) -> Check:
    return c.model_copy(update={"scope": "node"})


def _visible_count(ranks: Sequence[RankResult]) -> int | None:
    """GPUs the driver shows (NVML's count, the same on every rank of a node)."""
    return next(
        (r.inventory.device_count for r in ranks if r.inventory.device_count is not None), None
    )


def _memory_check(
    ranks: Sequence[RankResult], instance: InstanceType, catalog: Catalog
) -> list[Check]:
    """Each GPU's memory against the instance's accelerator (clouds report a little less)."""
    acc = catalog.accelerators.get(instance.accelerator or "")
    totals = [
        r.inventory.gpu.memory_total_mib
        for r in ranks
        if r.inventory.gpu and r.inventory.gpu.memory_total_mib
    ]
    if acc is None or not totals or not acc.memory_gb:
        return []
    smallest_gb = min(totals) * MIB / GB
    ratio = smallest_gb / acc.memory_gb
    status: Status = "pass" if ratio >= PASS_AT else "fail"
    return [
        _node(
            Check(
                name="gpu_memory",
                status=status,
                measured=smallest_gb,
                expected=acc.memory_gb,
                unit="GB",
                detail=f"smallest GPU memory {smallest_gb:,.1f} GB of {acc.name}'s "
                f"{acc.memory_gb:g} GB",
            )
        )
    ]


def _link_checks(
    lead: RankResult, acc: Accelerator | None, instance: InstanceType | None
) -> list[Check]:
    """The GPU link NVML reports, and every ordered pair's copy against it."""
    checks = []
    link = _link_kind(lead.topology)
    if instance is not None and instance.gpu_count > 1 and link is not None:
        wanted = instance.gpu_link
        fabric = {GpuLink.nvswitch, GpuLink.nvlink}
        ok = link == wanted or (wanted in fabric and link in fabric)
        checks.append(
            _node(
                Check(
                    name="gpu_link",
                    status="pass" if ok else "fail",
                    detail=f"NVML reports {link.value} between the GPUs; {instance.id} has "
                    f"{wanted.value}",
                    action=None if ok else "drain",
                )
            )
        )
    per_gpu_link = (
        instance.interconnect_gb_s if instance and instance.interconnect_gb_s else None
    ) or (acc.interconnect_gb_s if acc else 0)
    topo = {(t.gpu, t.peer): t for t in lead.topology}
    for m in lead.peers:
        checks.append(_peer_check(m, topo.get((m.gpu or 0, m.peer or 0)), per_gpu_link))
    return checks


def _link_kind(topology: Sequence[PeerLink]) -> GpuLink | None:
    if not topology:
        return None
    if all(t.via_nvswitch for t in topology):
        return GpuLink.nvswitch
    if all((t.nvlink_links or 0) > 0 for t in topology):
        return GpuLink.nvlink
    return GpuLink.pcie


def _peer_check(m: Measurement, link: PeerLink | None, per_gpu_link_gb_s: float) -> Check:
    base = {"scope": "peer", "gpu": m.gpu, "peer": m.peer}
    if m.error is not None:
        return Check(
            name=m.name, status="error", unit=m.unit, detail=m.error, action="monitor", **base
        )
    assert m.value is not None
    nvlinks = link.nvlink_links if link else None
    where = f"GPU {m.gpu} -> {m.peer}" if m.name == "p2p_copy" else f"GPU {m.gpu} <-> {m.peer}"
    access = m.params.get("peer_access")
    if m.name != "p2p_copy" or not nvlinks or not per_gpu_link_gb_s:
        why = (
            "both directions: no sourced expectation"
            if m.name != "p2p_copy"
            else "no NVLink between them"
        )
        extra = "" if access is not False else "; no peer access: copies go through host memory"
        return Check(
            name=m.name,
            status="pass",
            measured=m.value,
            unit=m.unit,
            detail=f"{where}: {m.value:,.1f} GB/s; not compared ({why}){extra}",
            **base,
        )
    one_way = _one_way_gb_s(per_gpu_link_gb_s)
    expected = one_way * P2P_EFFICIENCY
    ratio = m.value / expected
    status = grade(ratio)
    detail = (
        f"{where} over {nvlinks} NVLink(s): {m.value:,.1f} GB/s = {ratio:.0%} of the expected "
        f"{expected:,.1f} ({P2P_EFFICIENCY:.0%} of the {one_way:g} GB/s each way of a "
        f"{per_gpu_link_gb_s:g} GB/s link)"
    )
    if access is False:
        detail += "; no peer access between them"
        status = "fail"
    return Check(
        name=m.name,
        status=status,
        measured=m.value,
        expected=expected,
        unit=m.unit,
        detail=detail,
        action=None if status == "pass" else "drain",
        **base,
    )


def _one_way_gb_s(link_gb_s: float) -> float:
    """One direction of a per-GPU link figure (the catalog states both): the datasheet rule."""
    return one_way_gb_s(link_gb_s)


def collective_checks(
    measurements: Sequence[Measurement],
    acc: Accelerator | None,
    instance: InstanceType | None,
    catalog: Catalog,
    ranks: int,
    backend: str | None = None,
) -> list[Check]:
    """Bus bandwidth within the node, against the instance type's sourced figure at its message
    size, else a measured reference node of the same GPUs and count, else not compared."""
    reference = _collective_reference(acc, catalog, ranks)
    checks = []
    for m in measurements:
        base = {"scope": "collective"}
        if m.error is not None:
            status: Status = "skip" if m.error.startswith("unsupported") else "error"
            checks.append(
                Check(
                    name=m.name,
                    status=status,
                    unit=m.unit,
                    detail=m.error,
                    action="monitor",
                    **base,
                )
            )
            continue
        assert m.value is not None
        if ranks < 2:
            detail = (
                f"one rank: {backend or 'torch.distributed'} initialised and ran {m.name} "
                "(no bus between GPUs to measure)"
            )
            checks.append(Check(name="collectives", status="pass", detail=detail, **base))
            continue
        expected, basis = _collective_expected(m, instance, reference, ranks)
        figure = f"{m.value:,.1f} GB/s busbw (median of {len(m.samples)}; {ranks} ranks)"
        if expected is None:
            checks.append(_against_plan(m, figure, basis, acc, instance, ranks))
            continue
        status, detail = graded(figure, m.value, expected, basis)
        planned = _planned(m, acc, instance, ranks)
        if planned is not None:  # what the training plans assume of this link, beside it
            value, source = planned
            detail += (
                f"; the plans assume {value:,.1f} ({m.value / value:.0%} of it; estimated; "
                f"{source})"
            )
        checks.append(
            Check(
                name=m.name,
                status=status,
                measured=m.value,
                expected=expected,
                unit=m.unit,
                detail=detail,
                action=None if status == "pass" else "drain",
                **base,
            )
        )
    link = _link_against_plan(measurements, acc, instance, ranks)
    return checks if link is None else [*checks, link]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)  # a measurement or a check: what voted_run reads is its name


def voted_run(runs: Iterable[N], prefix: str) -> N | None:
    """Of runs named `prefix` + a size (all_reduce_1G), the one the fleet's votes compare:
    VOTED_BYTES, else the largest; None where no name gives a size."""
    sized = []
    for run in runs:
        try:
            sized.append((parse_size(run.name.removeprefix(prefix)), run))
        except ValueError:
            continue
    if not sized:
        return None
    return next((run for n, run in sized if n == VOTED_BYTES), max(sized, key=lambda s: s[0])[1])


def _link_against_plan(
    measurements: Sequence[Measurement],
    acc: Accelerator | None,
    instance: InstanceType | None,
    ranks: int,
) -> Check | None:
    """The node's GPU link as the fleet feeds it back into plans (LINK_CHECK): the all-reduce of
    VOTED_BYTES (else the largest measured) over what the training model assumes of it.
    An estimate, so at most a warning, as `_against_plan`; None with one rank or no plan."""
    voted = voted_run(
        (
            m
            for m in measurements
            if m.error is None and m.value is not None and m.params.get("op") == "all_reduce"
        ),
        "all_reduce_",
    )
    if ranks < 2 or voted is None:
        return None
    planned = _planned(voted, acc, instance, ranks)
    if planned is None or voted.value is None:
        return None
    value, source = planned
    ratio = voted.value / value
    status: Status = "warn" if ratio < PLANNED_WARN_AT else "pass"
    return Check(
        name=LINK_CHECK,
        status=status,
        measured=voted.value,
        expected=value,
        unit=voted.unit,
        detail=(
            f"{voted.name} {voted.value:,.1f} GB/s busbw over {ranks} ranks = {ratio:.0%} of "
            f"what the training plans assume of this link, {value:,.1f} (estimated; {source}); "
            "the fleet's vote of this ratio scales the link in its training and serving plans"
        ),
        action="monitor" if status == "warn" else None,
        scope="collective",
    )


def _against_plan(
    m: Measurement,
    figure: str,
    basis: str,
    acc: Accelerator | None,
    instance: InstanceType | None,
    ranks: int,
) -> Check:
    """A collective with no sourced figure, against the training model's plan for this link:
    an estimate, so at most a warning (below 75% of it, DCGM's share of a reference)."""
    assert m.value is not None
    planned = _planned(m, acc, instance, ranks)
    if planned is None:
        detail = f"{figure}; not compared ({basis})"
        return Check(
            name=m.name,
            status="pass",
            measured=m.value,
            unit=m.unit,
            detail=detail,
            scope="collective",
        )
    value, source = planned
    ratio = m.value / value
    status: Status = "warn" if ratio < PLANNED_WARN_AT else "pass"
    return Check(
        name=m.name,
        status=status,
        measured=m.value,
        expected=value,
        unit=m.unit,
        detail=f"{figure} = {ratio:.0%} of the planned {value:,.1f} (estimated; {source})",
        action="monitor" if status == "warn" else None,
        scope="collective",
    )


def _planned(
    m: Measurement, acc: Accelerator | None, instance: InstanceType | None, ranks: int
) -> tuple[float, str] | None:
    """The training model's bus bandwidth for this collective over the node's GPU link (the
    instance type's, else the accelerator's), with its formula; None without a link or size."""
    link = instance.interconnect_gb_s if instance else (acc.interconnect_gb_s if acc else None)
    op = str(m.params.get("op", ""))
    return planned_collective(m.name, op, ranks, link) if link is not None else None


def _collective_reference(
    acc: Accelerator | None, catalog: Catalog, ranks: int
) -> CollectiveReference | None:
    if acc is None:
        return None
    found = catalog.probe_expectations.get(acc.id)
    ref = found.collectives if found else None
    return ref if ref is not None and ref.gpus == ranks else None


def _collective_expected(
    m: Measurement, instance: InstanceType | None, ref: CollectiveReference | None, ranks: int
) -> tuple[float | None, str]:
    op = m.params.get("op")
    size = m.name.removeprefix(f"{op}_")
    if op != "all_reduce":
        return None, "no sourced figure for this collective"
    fact = instance.expected_nccl_busbw if instance else None
    if instance is not None and fact is not None:
        if fact.gpus == ranks and fact.message_size == size:
            return fact.busbw_gb_s, f"{instance.id}'s health-check threshold: {fact.source}"
        if ref is None or size not in ref.all_reduce_busbw_gb_s:
            why = f"{instance.id}'s threshold is for {fact.message_size} on {fact.gpus} GPUs"
            return None, why
    if ref is not None and size in ref.all_reduce_busbw_gb_s:
        basis = f"a known-good {ref.gpus}-GPU {ref.link.value} node at {size}: {ref.source}"
        return ref.all_reduce_busbw_gb_s[size], basis
    return None, "no sourced figure for this size and GPU count"


def _error_checks(ranks: Sequence[RankResult]) -> list[Check]:
    """What ranks said went wrong after their own GPU (each message once): collectives that
    could not run are skipped, a barrier that timed out or a broken group is an error."""
    said = dict.fromkeys(e for r in ranks for e in r.errors)
    return [
        _node(
            Check(
                name="collectives",
                status="skip" if "not run" in e else "error",
                detail=e,
                action=None if "not run" in e else "monitor",
            )
        )
        for e in said
    ]


def _failed_rank(f: RankFailure) -> Check:
    where = (
        f"rank {f.rank}"
        + (f" (GPU {f.gpu})" if f.gpu is not None else "")
        + (f" on {f.host}" if f.host else "")
    )
    return Check(
        name="rank_finished",
        status="error",
        detail=f"{where} did not finish: {f.detail}",
        scope="node",
        gpu=f.gpu,
        host=f.host,
        action="drain",
    )
