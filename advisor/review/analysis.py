"""The review's figures, from gathered records and the catalog. Pure and deterministic.

- inventory: hosts (with and without a GPU), GPUs by accelerator, driver versions, verdicts;
- measured / expected per accelerator and check (the fleet summary the service also serves);
- outlier hosts: a host's median ratio for a check below the fleet's p10 (and clearly below its
  median), or any failed run of that check;
- savings and workload costs: see advisor/review/costs.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

from advisor.catalog import Catalog
from advisor.collector import gc_paused
from advisor.fleet.digest import FleetDigest, digest_of
from advisor.fleet.grading import grade
from advisor.fleet.statistics import CheckStats, FleetStatistics, HostCheck
from advisor.perf.calibration import (
    CALIBRATION_CHECK,
    LINK_CHECK,
    MIN_FLEET_REPORTS,
    NETWORK_CHECK,
    calibration_of,
)
from advisor.review.costs import (
    Commitment,
    CostedJob,
    FleetFactor,
    Saving,
    WorkloadResult,
    commitments,
    default_jobs,
    finding_counts,
    fleet_factors,
    latest_usage,
    savings,
    workload_costs,
)
from advisor.review.data import JobRecord, ReviewData, UsageRecord

UNKNOWN = "unknown"  # the review's name for runs that matched no accelerator
T = TypeVar("T", CheckStats[str | None], HostCheck[str | None])
OUTLIER_GAP = 0.03  # below p10 only counts when also this far below the fleet median (noise)


def band(ratio: float | None) -> str:
    """pass / warn / fail at the probe's bands (advisor.fleet.grading); "none" without a ratio."""
    return "none" if ratio is None else grade(ratio)


# --- inventory ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FleetInventory:
    """What the fleet's probe reports cover (probes.report.Inventory is one machine's)."""

    reports: int
    hosts: int
    hosts_without_gpu: int  # hosts none of whose runs reached a GPU (CPU machines, no driver)
    gpus: int  # GPUs measured; a run that reached no GPU counts none
    gpus_by_accelerator: list[tuple[str, int]]  # each GPU's latest report; most first
    drivers: list[tuple[str, int]]  # hosts per driver version (each host's latest report)
    verdicts: dict[str, int]  # over every report
    latest_verdicts: dict[str, int]  # each GPU's latest report
    first_report: str | None
    last_report: str | None
    usage_reports: int
    usage_hosts: int
    usage_gpus: int


@dataclass(frozen=True)
class NodeRow:
    """A host's latest report: its GPUs and their verdicts."""

    host: str
    created_at: str | None
    verdict: str
    gpus: int
    gpu_verdicts: dict[str, int]  # verdict -> GPUs with it
    failed_gpus: list[int | None]  # the index of each GPU that failed or errored
    failed_ranks: int


def nodes(digest: FleetDigest) -> list[NodeRow]:
    """Every host's latest report, the ones in trouble first (failed GPUs, then by host)."""
    rows = [
        NodeRow(
            host=r.host,
            created_at=r.created_at,
            verdict=r.verdict,
            gpus=len(r.gpus),
            gpu_verdicts=dict(sorted(Counter(g.verdict for g in r.gpus).items())),
            failed_gpus=[g.gpu for g in r.gpus if g.verdict in ("fail", "error")],
            failed_ranks=r.failed_ranks,
        )
        for r in digest.hosts.values()
    ]
    order = {"fail": 0, "error": 1, "warn": 2, "pass": 3}
    return sorted(rows, key=lambda n: (order.get(n.verdict, 4), -len(n.failed_gpus), n.host))


def inventory(digest: FleetDigest, usage_reports: Sequence[UsageRecord]) -> FleetInventory:
    by_gpu = digest.gpus.values()
    accelerators = Counter(g.matched or g.gpu.name or "unknown" for g in by_gpu)
    drivers = Counter(h.driver_version or "unknown" for h in digest.hosts.values())
    usage = latest_usage(usage_reports)
    return FleetInventory(
        reports=digest.reports,
        hosts=len(digest.hosts),
        hosts_without_gpu=len(set(digest.hosts) - {g.host for g in by_gpu}),
        gpus=len(digest.gpus),
        gpus_by_accelerator=sorted(accelerators.items(), key=lambda kv: (-kv[1], kv[0])),
        drivers=sorted(drivers.items(), key=lambda kv: (-kv[1], kv[0])),
        verdicts=digest.verdicts,
        latest_verdicts=dict(sorted(Counter(g.gpu.verdict for g in by_gpu).items())),
        first_report=digest.first_report,
        last_report=digest.last_report,
        usage_reports=len(usage_reports),
        usage_hosts=len(usage),
        usage_gpus=sum(len(u.gpus) for u in usage),
    )


# --- measured / expected -----------------------------------------------------------------------


@dataclass(frozen=True)
class RatioRow:
    accelerator: str
    check: str
    unit: str | None
    reports: int  # runs of this check with a ratio
    median: float
    p10: float
    p90: float
    band: str  # of the median
    failed: int  # runs with status fail
    warned: int


def named_statistics(
    statistics: FleetStatistics[str | None],
) -> tuple[dict[tuple[str, str], CheckStats[str]], list[HostCheck[str]]]:
    """The digest's per (accelerator, check) statistics and per (host, accelerator, check)
    medians (advisor.fleet.statistics, which the service's fleet summary uses too), runs that
    matched no accelerator named "unknown"."""
    checks = {
        (acc or UNKNOWN, name): cast(CheckStats[str], _named(st))
        for (acc, name), st in statistics.checks.items()
    }
    return checks, [cast(HostCheck[str], _named(h)) for h in statistics.hosts]


def _named(found: T) -> T:
    """`found` (CheckStats or HostCheck) with its accelerator named (copied only where it has
    none: a fleet's hosts make tens of thousands)."""
    return found if found.accelerator is not None else replace(found, accelerator=UNKNOWN)


def ratio_rows(stats: dict[tuple[str, str], CheckStats[str]]) -> list[RatioRow]:
    return [
        RatioRow(
            accelerator=st.accelerator,
            check=st.check,
            unit=st.unit,
            reports=st.ratios,
            median=st.median,
            p10=st.p10,
            p90=st.p90,
            band=band(st.median),
            failed=st.statuses.get("fail", 0),
            warned=st.statuses.get("warn", 0),
        )
        for st in stats.values()
        if st.median is not None and st.p10 is not None and st.p90 is not None
    ]


# --- outliers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outlier:
    host: str
    accelerator: str
    check: str
    ratio: float | None  # the host's median measured / expected for this check
    fleet_median: float | None
    fleet_p10: float | None
    runs: int  # this host's runs of the check
    failed: int  # of which failed
    why: str


def find_outliers(
    stats: dict[tuple[str, str], CheckStats[str]],
    hosts: Iterable[HostCheck[str]],
    gap: float = OUTLIER_GAP,
) -> list[Outlier]:
    """Per host and check: flagged when any run failed, or when the host's median ratio is below
    the fleet's p10 for that accelerator and check and more than `gap` below the fleet median."""
    out = []
    for h in hosts:
        st = stats.get((h.accelerator, h.check))
        med = st.median if st else None
        p10 = st.p10 if st else None
        mine = h.median
        low = (
            mine is not None
            and med is not None
            and p10 is not None
            and mine < p10
            and mine < med * (1 - gap)
        )
        if not h.failed and not low:
            continue
        reasons = []
        if h.failed:
            reasons.append(f"failed {h.failed} of {h.runs} runs")
        if low:
            reasons.append(f"{mine:.0%} of expected, fleet p10 {p10:.0%}, median {med:.0%}")
        out.append(
            Outlier(
                h.host, h.accelerator, h.check, mine, med, p10, h.runs, h.failed, "; ".join(reasons)
            )
        )
    out.sort(key=lambda o: (o.ratio if o.ratio is not None else -1.0, o.host, o.check))
    return out


# --- the whole review --------------------------------------------------------------------------


@dataclass(frozen=True)
class Review:
    generated_at: str
    source: str
    region: str | None
    notes: list[str]
    inventory: FleetInventory
    nodes: list[NodeRow]
    ratios: list[RatioRow]
    outliers: list[Outlier]
    outlier_gap: float
    savings: list[Saving]
    findings: dict[str, int]
    calibration: list[FleetFactor]  # per GPU accelerator of the catalog
    min_fleet_reports: int  # reports an accelerator needs before its fleet median is applied
    workloads: list[WorkloadResult]
    jobs: list[JobRow] = dataclasses.field(default_factory=list)  # `advisor doctor` runs
    commitments: list[Commitment] = dataclasses.field(default_factory=list)  # hosts in use

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dataclasses.asdict(self)
        return out


def build_review(
    data: ReviewData,
    catalog: Catalog,
    region: str | None = None,
    workloads: Sequence[CostedJob] | None = None,
    now: dt.datetime | None = None,
    min_fleet_reports: int = MIN_FLEET_REPORTS,
) -> Review:
    if data.digest is not None:
        digest = data.digest
    else:
        with gc_paused():  # advisor/collector.py: many small objects, none in a cycle
            digest = digest_of(data.probes)
    stats, hosts = named_statistics(digest.statistics)
    links = {acc: st.vote for (acc, name), st in stats.items() if name == LINK_CHECK}
    networks = {acc: st.vote for (acc, name), st in stats.items() if name == NETWORK_CHECK}
    calibration = {
        acc: dataclasses.replace(
            cal,
            link=calibration_of(links.get(acc)),
            network=calibration_of(networks.get(acc)),
        )
        for (acc, name), st in stats.items()
        if name == CALIBRATION_CHECK and (cal := calibration_of(st.vote)) is not None
    }
    gpu_accelerators = sorted(
        {it.accelerator for it in catalog.instance_types.values() if it.accelerator}
        & set(catalog.accelerators)
    )
    jobs = default_jobs(catalog) if workloads is None else list(workloads)
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return Review(
        generated_at=moment.strftime("%Y-%m-%d %H:%M UTC"),
        source=data.source,
        region=region,
        notes=list(data.notes),
        inventory=inventory(digest, data.usage),
        nodes=nodes(digest),
        ratios=ratio_rows(stats),
        outliers=find_outliers(stats, hosts),
        outlier_gap=OUTLIER_GAP,
        savings=savings(catalog, data.usage, region),
        findings=finding_counts(data.usage),
        calibration=fleet_factors(calibration, gpu_accelerators, min_fleet_reports),
        min_fleet_reports=min_fleet_reports,
        workloads=workload_costs(catalog, jobs, calibration, region, min_fleet_reports),
        jobs=job_rows(data.usage),
        commitments=commitments(catalog, data.usage, region),
    )


@dataclasses.dataclass(frozen=True)
class JobRow:
    host: str
    created_at: str | None
    job: JobRecord


def job_rows(usage: Sequence[UsageRecord]) -> list[JobRow]:
    """Every diagnosed job, the most GPU-hours lost first."""
    rows = [JobRow(u.host, u.created_at, u.job) for u in usage if u.job is not None]
    return sorted(rows, key=lambda r: (-(r.job.gpu_hours_lost or 0.0), r.host, r.created_at or ""))
