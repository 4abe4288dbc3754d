"""The review's digest of every probe report (advisor/fleet/digest.py FleetDigest) read from the
aggregates the store keeps on each write (advisor/store/aggregates.py), not from the reports:
about a hundred rows per host whatever the reports a host has sent.

Exact: counts, each host's and GPU's latest report, units. From histograms: the fleet's
quantiles of each check (as the fleet summary's, off by less than aggregates.RATIO_STEP of the
ratio) and each host's median ratio of each check (off by less than HOST_RATIO_STEP: 1%). The
per-check figures and the voted checks' votes are the fleet summary's, which the store keeps
between writes (advisor/store/sql.py), so a review after a summary reads them for nothing.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa

from advisor.fleet.digest import FleetDigest, LatestGpu, LatestHost
from advisor.fleet.records import GpuRecord
from advisor.fleet.statistics import (
    CheckStats,
    FleetStatistics,
    HostCheck,
    HostVote,
    vote_of_medians,
)
from advisor.perf.calibration import CALIBRATION_CHECK, LINK_CHECK, NETWORK_CHECK
from advisor.store.aggregates import NO_ACCELERATOR, BucketValues
from advisor.store.base import FleetSummary
from advisor.store.schema import (
    fleet_check_units,
    fleet_host_checks,
    fleet_host_ratios,
    fleet_latest_gpus,
    fleet_latest_hosts,
)
from probes.stats import quantile

FETCH_ROWS = 5_000  # rows taken from the driver at a time


def _key(acc: str) -> str | None:
    return None if acc == NO_ACCELERATOR else acc


def read_digest(conn: sa.Connection, summaries: Sequence[FleetSummary]) -> FleetDigest:
    """The digest from the aggregates and the fleet summary read from them already (its
    counts, quantiles and votes per accelerator and check: advisor.store.aggregates.summaries)."""

    def rows(table: sa.Table) -> Iterator[Any]:
        """Plain tuples from the driver's cursor, one at a time (CursorResult.cursor: these
        columns need no conversion, and SQLAlchemy's rows cost twice the CPU over the 100,000s
        of a fleet's host rows), in key order: the same digest whatever order the writes came
        in, and each host's buckets of a check one after another."""
        result = conn.execute(sa.select(table).order_by(*table.primary_key.columns))
        try:
            while batch := result.cursor.fetchmany(FETCH_ROWS):
                yield from batch
        finally:
            result.close()

    verdicts: dict[str, int] = defaultdict(int)
    for summary in summaries:
        for verdict, n in summary.verdicts.items():
            verdicts[verdict] += n
    host_rows = list(rows(fleet_latest_hosts))
    hosts = {r[0]: _latest_host(*r) for r in host_rows}
    gpus = {r[0]: _latest_gpu(*r) for r in rows(fleet_latest_gpus)}
    return FleetDigest(
        reports=sum(verdicts.values()),
        verdicts=dict(sorted(verdicts.items())),
        first_report=min((r[2] for r in host_rows if r[2]), default=None),  # first_at
        last_report=max((h.created_at for h in hosts.values() if h.created_at), default=None),
        hosts=hosts,
        gpus=gpus,
        statistics=_statistics(rows, summaries),
    )


def _latest_host(
    host: str,
    created_at: str,
    _first_at: str,
    verdict: str,
    driver_version: str | None,
    failed_ranks: int,
    gpus: str,
) -> LatestHost:
    """A fleet_latest_hosts row (advisor/store/schema.py's column order)."""
    found = tuple(GpuRecord(*g) for g in json.loads(gpus))
    return LatestHost(host, created_at or None, verdict, driver_version, found, failed_ranks)


def _latest_gpu(
    key: str,
    host: str,
    created_at: str,
    matched: str | None,
    gpu: int | None,
    name: str | None,
    verdict: str,
) -> LatestGpu:
    """A fleet_latest_gpus row."""
    return LatestGpu(host, created_at or None, matched, GpuRecord(key, gpu, name, verdict))


def _statistics(rows: Any, summaries: Sequence[FleetSummary]) -> FleetStatistics[str | None]:
    units = {(_key(acc), name): unit for acc, name, unit in rows(fleet_check_units)}
    medians: dict[tuple[str, str, str], tuple[float | None, int]] = {}
    # (accelerator, host, check)'s buckets come together (key order): one median at a time,
    # never every host's buckets at once
    for hk, found in itertools.groupby(rows(fleet_host_ratios), key=lambda r: r[:3]):
        values = BucketValues(r[3:] for r in found)
        medians[hk] = (quantile(values, 0.5), len(values))
    hosts = [
        HostCheck(host, _key(acc), name, runs, failed, medians.get((acc, host, name), (None,))[0])
        for acc, host, name, runs, failed in rows(fleet_host_checks)
    ]
    by_check: dict[tuple[str | None, str], list[tuple[str, float, int]]] = defaultdict(list)
    for (acc, host, name), (median, n) in medians.items():
        if median is not None:
            by_check[(_key(acc), name)].append((host, median, n))
    checks: dict[tuple[str | None, str], CheckStats[str | None]] = {}
    for summary in summaries:  # accelerators in the statistics' order, no accelerator last
        key = summary.accelerator
        voted = {
            CALIBRATION_CHECK: summary.calibration,
            LINK_CHECK: summary.link_calibration,
            NETWORK_CHECK: summary.network_calibration,
        }
        for name, figures in summary.checks.items():
            vote = voted.get(name) if name in voted else vote_of_medians(by_check[(key, name)])
            checks[(key, name)] = _check(key, name, figures, units.get((key, name)), vote)
    return FleetStatistics(checks, hosts)


def _check(
    acc: str | None,
    name: str,
    figures: dict[str, float | int | None],
    unit: str | None,
    vote: HostVote | None,
) -> CheckStats[str | None]:
    """A check's statistics in the summary's words (advisor.store.aggregates._figures)."""
    statuses = {
        k.removeprefix("status_"): int(v or 0)
        for k, v in figures.items()
        if k.startswith("status_")
    }
    return CheckStats(
        accelerator=acc,
        check=name,
        unit=unit,
        runs=int(figures["count"] or 0),
        ratios=int(figures["ratios"] or 0),
        ignored=int(figures["ratios_ignored"] or 0),
        median=_float(figures["ratio_median"]),
        p10=_float(figures["ratio_p10"]),
        p90=_float(figures["ratio_p90"]),
        statuses=statuses,
        vote=vote or HostVote(None, 0, 0),
    )


def _float(value: float | int | None) -> float | None:
    return None if value is None else float(value)
