"""What every store offers, and the pure parts shared by all of them."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from advisor.errors import AdvisorError
from advisor.fleet.digest import FleetDigest
from advisor.fleet.records import StoredView, report_fields
from advisor.fleet.statistics import (
    HostVote,
)
from probes.ops_table import OpsReport
from probes.report import ProbeReport, UtilisationReport


class StoreError(AdvisorError):
    """The database failed or cannot be reached (translated from sqlite3 / psycopg errors)."""


class StoreUnreachable(StoreError):
    """The database cannot be reached at all (no connection could be made, or it was lost):
    unlike a failed statement, every other call would fail the same way, so the service stops
    calling it for a while (advisor.store.guard). `retry_after_s`: when it is tried again."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class ReportSummary:
    """A stored probe report as a listing names it, without its body."""

    id: str
    received_at: dt.datetime
    host: str
    accelerator: str | None
    verdict: str


@dataclass(frozen=True)
class StoredReport(ReportSummary):
    report: dict[str, Any]  # the probe report as it was received


@dataclass(frozen=True)
class UtilisationSummary:
    """A stored utilisation report as a listing names it, without its body (kept in columns
    when it is stored: a body may be 1 MiB, and a listing names 500)."""

    id: str
    received_at: dt.datetime
    host: str
    instance_type: str | None
    gpus: int
    findings: dict[str, int]  # GPUs by finding ("unclassified": none), keys sorted


@dataclass(frozen=True)
class StoredUtilisation(UtilisationSummary):
    report: dict[str, Any]  # the utilisation report as it was received


def utilisation_figures(body: dict[str, Any]) -> tuple[str | None, int, dict[str, int]]:
    """A utilisation report's instance type, GPU count and GPUs by finding, from its stored
    body (read leniently: the bodies of an older store are read too)."""
    gpus = [g for g in body.get("gpus") or [] if isinstance(g, dict)]
    findings: dict[str, int] = {}
    for g in gpus:
        key = str(g.get("finding") or "unclassified")
        findings[key] = findings.get(key, 0) + 1
    instance_type = body.get("instance_type")
    return (
        instance_type if isinstance(instance_type, str) else None,
        len(gpus),
        dict(sorted(findings.items())),
    )


def findings_text(findings: dict[str, int]) -> str:
    """The stored column of utilisation_figures' findings (keys sorted already)."""
    return json.dumps(findings, separators=(",", ":"))


@dataclass(frozen=True)
class CheckRow:
    """One check of one report, as the fleet's aggregates take it (advisor/store/aggregates.py)."""

    report_id: str
    host: str
    accelerator: str | None
    name: str
    status: str
    measured: float | None
    expected: float | None
    # Which write token stored the report (token_id, never the token); None without one: a
    # service without tokens, or reports stored before tokens were recorded.
    token_id: str | None = None


@dataclass(frozen=True)
class HostRatios:
    """One host's plausible measured / expected ratios of one check on one accelerator."""

    accelerator: str | None
    host: str
    ratios: Sequence[float]  # ascending
    token_ids: tuple[str, ...]  # the write tokens its runs came through (token_id)


def token_id(token: str | None) -> str | None:
    """A write token's identity as stored with its reports: the first 16 hex digits of its
    SHA-256, so that the fleet counts distinct tokens without the store holding a secret."""
    return hashlib.sha256(token.encode()).hexdigest()[:16] if token else None


@dataclass(frozen=True)
class ReportFilter:
    host: str | None = None
    accelerator: str | None = None
    verdict: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    limit: int = 50
    offset: int = 0


@dataclass
class FleetSummary:
    accelerator: str | None
    reports: int
    hosts: int
    verdicts: dict[str, int] = field(default_factory=dict)
    checks: dict[str, dict[str, float | int | None]] = field(default_factory=dict)
    failing_hosts: list[str] = field(default_factory=list)
    # The CALIBRATION_CHECK's vote (one per host, outliers left out and named); None without it
    calibration: HostVote | None = None
    # The LINK_CHECK's vote likewise (the GPU link's measured / planned all-reduce)
    link_calibration: HostVote | None = None
    # The NETWORK_CHECK's vote likewise (the all-reduce across nodes over the plan's)
    network_calibration: HostVote | None = None


class Store(Protocol):
    def add(self, report: ProbeReport, received_at: dt.datetime | None = None) -> StoredReport:
        """Store `report`, always (no idempotency key)."""
        ...

    def add_once(
        self,
        report: ProbeReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
        token_id: str | None = None,
    ) -> tuple[StoredReport, bool]:
        """Store `report` unless a report is stored under its idempotency key already
        (idempotency_key: the client's key and the content): (the stored report, True when
        stored now). `token_id`: the write token's, kept with the report."""
        ...

    def get(self, report_id: str) -> StoredReport | None: ...

    def query(self, flt: ReportFilter) -> tuple[list[StoredReport], int]: ...

    def summaries(self, flt: ReportFilter) -> tuple[list[ReportSummary], int]:
        """The page `query` answers without the reports' bodies (a listing's: a page of 500
        node reports is 32 MB of bodies), with the total before limit and offset."""
        ...

    def fleet(self, accelerator: str | None = None, check: str | None = None) -> list[FleetSummary]:
        """Per accelerator: verdict counts and statistics per check (`check`: that check's
        alone)."""
        ...

    def host_ratios(self, check: str) -> list[HostRatios]:
        """One voted check's plausible ratios, host by host (the fleet calibration's whole
        read: advisor.perf.calibration.VOTED_CHECKS)."""
        ...

    def add_utilisation(
        self, report: UtilisationReport, received_at: dt.datetime | None = None
    ) -> StoredUtilisation:
        """Store a utilisation report, always (no idempotency key)."""
        ...

    def add_utilisation_once(
        self,
        report: UtilisationReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
    ) -> tuple[StoredUtilisation, bool]:
        """Store a utilisation report unless one is stored under its idempotency key already:
        (the stored report, True when stored now). Probe and utilisation reports keep their
        keys apart."""
        ...

    def get_utilisation(self, report_id: str) -> StoredUtilisation | None: ...

    def query_utilisation(
        self, host: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[UtilisationSummary], int]:
        """Newest first, optionally one host's, without their bodies; with the total before
        limit and offset."""
        ...

    def iter_utilisation(self) -> Iterator[StoredUtilisation]:
        """Every utilisation report, oldest first (for reviews over the whole fleet)."""
        ...

    def fleet_digest(self) -> FleetDigest:
        """What the review reads of every probe report (advisor/fleet/digest.py)."""
        ...

    def add_ops(
        self, report: OpsReport, client_key: str | None, received_at: dt.datetime | None = None
    ) -> tuple[str, bool]:
        """Store an operator table unless one is stored under its idempotency key already:
        (its id, True when stored now)."""
        ...

    def ops_tables(self, accelerator: str) -> list[OpsReport]:
        """The newest operator tables of one accelerator (advisor.store.sql.OPS_TABLES_READ at
        most), newest first."""
        ...

    def ops_tables_count(self, accelerator: str) -> int:
        """How many operator tables of one accelerator are stored: its fleet table changes only
        when this does (none is ever removed)."""
        ...

    def ping(self) -> None: ...

    def count(self) -> int: ...

    def close(self) -> None: ...


def canonical_json(report: dict[str, Any]) -> str:
    """The stored text of a report: compact, keys sorted (equal reports, equal text)."""
    return json.dumps(report, separators=(",", ":"), sort_keys=True)


def idempotency_key(stored_text: str, client_key: str | None) -> str:
    """What makes a posted report "the same report": the client's Idempotency-Key and the
    content's digest together, or the digest alone when the client sent no key. A retry (same
    key, same report) is stored once; two runs with equal reports but their own keys are two;
    a key reused for another report stores that report too (nothing is refused or lost). The
    ':' keeps the forms apart: a client's key has none ([A-Za-z0-9._~-])."""
    digest = "sha256:" + hashlib.sha256(stored_text.encode()).hexdigest()
    return f"{client_key}:{digest}" if client_key else digest


def check_rows(
    report_id: str,
    report: ProbeReport | StoredView,
    token_id: str | None = None,
    names: Collection[str] | None = None,
) -> list[CheckRow]:
    """A report's checks as the aggregates take them, from the report or its stored reading;
    `names`: only the checks of these names (the voted ones, for the running calibration)."""
    host, accelerator, _ = report_fields(report)
    return [
        CheckRow(report_id, host, accelerator, c.name, c.status, c.measured, c.expected, token_id)
        for c in report.checks
        if names is None or c.name in names
    ]
