"""What the fleet's review reads of every probe report, as one small value (FleetDigest): counts
over every report, each host's and each GPU's latest report, and the per-check statistics
(advisor.fleet.statistics). Built here from records by one pass (digest_of: a directory of
reports, the service over HTTP, a store in memory), or read from the store's aggregates, which
keep the same figures up to date on every write (advisor/store/aggregates.py), so that a review
of a fleet of any size reads a few hundred thousand aggregate rows instead of every report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from advisor.fleet.records import GpuRecord, ProbeRecord
from advisor.fleet.statistics import FleetStatistics, fleet_statistics


class LatestHost(NamedTuple):
    """A host's latest report."""

    host: str
    created_at: str | None
    verdict: str
    driver_version: str | None
    gpus: tuple[GpuRecord, ...]
    failed_ranks: int


class LatestGpu(NamedTuple):
    """A measured GPU's latest report: its host, the accelerator that report matched, and the
    GPU with its verdict there."""

    host: str
    created_at: str | None
    matched: str | None
    gpu: GpuRecord


@dataclass(frozen=True)
class FleetDigest:
    reports: int
    verdicts: dict[str, int]  # reports per verdict, over every report
    first_report: str | None  # the earliest and latest created_at (utc_text)
    last_report: str | None
    hosts: dict[str, LatestHost]  # by host
    gpus: dict[str, LatestGpu]  # by GPU key (GpuRecord.key)
    # keyed by the accelerator each report measured (None: it matched none)
    statistics: FleetStatistics[str | None]


def newer(created_at: str | None, held: str | None) -> bool:
    """Whether a report made at `created_at` replaces one made at `held` as the latest: the later
    one, and of two at the same time the one read (or written) last."""
    return (created_at or "") >= (held or "")


def latest_host(r: ProbeRecord) -> LatestHost:
    return LatestHost(r.host, r.created_at, r.verdict, r.driver_version, r.gpus, r.failed_ranks)


def latest_gpus(r: ProbeRecord) -> list[tuple[str, LatestGpu]]:
    return [(g.key, LatestGpu(r.host, r.created_at, r.matched, g)) for g in r.gpus]


def digest_of(records: Sequence[ProbeRecord]) -> FleetDigest:
    """The digest of `records`, in one pass over them."""
    hosts: dict[str, LatestHost] = {}
    gpus: dict[str, LatestGpu] = {}
    for r in records:
        held = hosts.get(r.host)
        if held is None or newer(r.created_at, held.created_at):
            hosts[r.host] = latest_host(r)
        for key, gpu in latest_gpus(r):
            seen = gpus.get(key)
            if seen is None or newer(r.created_at, seen.created_at):
                gpus[key] = gpu
    times = [r.created_at for r in records if r.created_at]
    return FleetDigest(
        reports=len(records),
        verdicts=dict(sorted(Counter(r.verdict for r in records).items())),
        first_report=min(times, default=None),
        last_report=max(times, default=None),
        hosts=hosts,
        gpus=gpus,
        statistics=fleet_statistics((r.accelerator, r.host, r.checks) for r in records),
    )
