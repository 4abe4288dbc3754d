"""Gathering for the review: probe and utilisation reports reduced to small, plain records.

Three sources, one result (ReviewData):
- a directory of *.json files (probe reports and utilisation reports, told apart by "kind");
- the service's store, read directly: its digest of the probe reports (`store.fleet_digest`,
  advisor/fleet/digest.py), then `store.iter_utilisation`;
- the service over HTTP (`GET /v1/probe-reports` pages, then each body, several at a time),
  through advisor.http_client.

A report is reduced as soon as it is read: the review keeps what it shows, never the bodies, so
memory stays flat however many reports the fleet holds.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from advisor.collector import gc_paused
from advisor.errors import AdvisorError, InputError
from advisor.fleet.digest import FleetDigest
from advisor.fleet.records import ProbeRecord, probe_record, utc_text
from advisor.http_client import HttpClient
from advisor.store import Store
from probes.report import JobReport, ProbeReport, UtilisationReport

if TYPE_CHECKING:
    import httpx

PAGE = 500  # the API's largest page
MAX_NOTES = 20


class SourceError(AdvisorError):
    """The reports could not be read (directory, store or service)."""


@dataclass(frozen=True, slots=True)
class GpuUsage:
    index: int
    uuid: str | None
    name: str | None
    accelerator: str | None
    util_mean_pct: float | None
    util_p95_pct: float | None
    memory_used_max_mib: float | None
    memory_total_mib: float | None
    finding: str | None
    reason_codes: tuple[str, ...]
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class JobFindingRecord:
    code: str
    summary: str
    fix: str
    idle_usd_per_h: float | None


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job `advisor doctor` ran and diagnosed."""

    command: str
    exit_code: int | None
    verdict: str
    sampled_s: float
    gpu_hours_lost: float | None
    findings: tuple[JobFindingRecord, ...]


@dataclass(frozen=True, slots=True)
class UsageRecord:
    host: str
    instance_type: str | None
    created_at: str | None
    duration_s: float | None
    gpus: tuple[GpuUsage, ...]
    job: JobRecord | None = None


@dataclass
class ReviewData:
    source: str  # where the reports came from, in words
    probes: list[ProbeRecord] = field(default_factory=list)
    # the probe reports already digested (the store's aggregates): `probes` is then empty
    digest: FleetDigest | None = None
    usage: list[UsageRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was skipped or missing, and why

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)
        elif len(self.notes) == MAX_NOTES:
            self.notes.append("(further notes left out)")


def usage_record(report: UtilisationReport) -> UsageRecord:
    return UsageRecord(
        host=report.host,
        instance_type=report.instance_type,
        created_at=utc_text(report.created_at),
        duration_s=report.duration_s,
        gpus=tuple(
            GpuUsage(
                index=g.index,
                uuid=g.uuid,
                name=g.name,
                accelerator=g.accelerator,
                util_mean_pct=g.util_gpu_mean_pct,
                util_p95_pct=g.util_gpu_p95_pct,
                memory_used_max_mib=g.memory_used_max_mib,
                memory_total_mib=g.memory_total_mib,
                finding=g.finding,
                reason_codes=tuple(g.reason_codes),
                evidence=tuple(g.evidence),
            )
            for g in report.gpus
        ),
        job=_job_record(report.job) if report.job is not None else None,
    )


def _job_record(job: JobReport) -> JobRecord:
    return JobRecord(
        command=" ".join(job.command),
        exit_code=job.exit_code,
        verdict=job.verdict,
        sampled_s=job.sampled_s,
        gpu_hours_lost=job.gpu_hours_lost,
        findings=tuple(
            JobFindingRecord(f.code, f.summary, f.fix, f.idle_usd_per_h) for f in job.findings
        ),
    )


def _add_body(data: ReviewData, report_id: str, body: Any, where: str) -> None:
    """A body read through its report model (a utilisation report says so in "kind"); one that
    is neither report is left out with a note naming the first field that is wrong."""
    usage = isinstance(body, dict) and body.get("kind") == "utilisation"
    try:
        if usage:
            data.usage.append(usage_record(UtilisationReport.model_validate(body)))
        else:
            data.probes.append(probe_record(report_id, ProbeReport.model_validate(body)))
    except ValidationError as exc:
        _invalid(data, where, "utilisation report" if usage else "probe report", exc)


def _invalid(data: ReviewData, where: str, what: str, exc: ValidationError) -> None:
    """Note a report left out, naming the first field that is wrong."""
    first = exc.errors()[0]
    place = ".".join(str(p) for p in first["loc"]) or "the body"
    data.note(f"{where}: not a valid {what} ({place}: {first['msg']}), left out")


# --- a directory -------------------------------------------------------------------------------


def from_dir(directory: Path) -> ReviewData:
    """Every *.json under `directory` (recursively), in name order."""
    if not directory.is_dir():
        raise InputError(f"--reports {str(directory)!r} is not a directory")
    data = ReviewData(source=f"directory {directory}")
    with gc_paused():
        for path in sorted(directory.rglob("*.json")):
            rel = str(path.relative_to(directory))
            try:
                body = json.loads(path.read_bytes())
            except (OSError, ValueError) as exc:
                data.note(f"{rel}: not readable JSON ({exc.__class__.__name__}), left out")
                continue
            _add_body(data, rel, body, rel)
    return data


# --- the store ---------------------------------------------------------------------------------


def from_store(store: Store) -> ReviewData:
    """The store's digest of every probe report (kept up to date on each write, so that the
    review reads aggregates, not reports) and every utilisation report."""
    data = ReviewData(source="the service's store", digest=store.fleet_digest())
    for stored_usage in store.iter_utilisation():
        _add_body(data, stored_usage.id, stored_usage.report, f"utilisation {stored_usage.id}")
    return data


# --- the service over HTTP ---------------------------------------------------------------------


class _HttpStatus(SourceError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _get(client: HttpClient, path: str, params: dict[str, str | int] | None = None) -> Any:
    """The JSON body of a 200 answer; _HttpStatus for any other status."""
    reply = client.get(path, params)
    if reply.status != 200:
        raise _HttpStatus(reply.status, f"GET {reply.url}: HTTP {reply.status}: {reply.text(300)}")
    return reply.json()


def _pages(client: HttpClient, path: str) -> Iterator[dict[str, Any]]:
    offset: int | None = 0
    while offset is not None:
        body = _get(client, path, {"limit": PAGE, "offset": offset})
        yield from body.get("items") or ()
        offset = body.get("next_offset")


def from_server(
    base_url: str,
    token: str | None = None,
    workers: int = 8,
    timeout_s: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> ReviewData:
    """Probe reports (list, then bodies, `workers` at a time) and utilisation reports."""
    with HttpClient(
        base_url, token, timeout_s=timeout_s, connections=workers, transport=transport
    ) as client:
        return _from_server(client, workers)


def _from_server(client: HttpClient, workers: int) -> ReviewData:
    data = ReviewData(source=f"service {client.base}")
    ids = list(dict.fromkeys(str(item["id"]) for item in _pages(client, "/v1/probe-reports")))

    def body(report_id: str) -> tuple[str, Any]:
        try:
            payload = _get(client, f"/v1/probe-reports/{urllib.parse.quote(report_id)}")
        except _HttpStatus as exc:
            if exc.status == 404:  # deleted between the listing and now
                return report_id, None
            raise
        return report_id, payload.get("report")

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for report_id, report in pool.map(body, ids):
            if report is not None:
                _add_body(data, report_id, report, f"probe report {report_id}")
    try:
        listed = list(_pages(client, "/v1/utilisation-reports"))
    except _HttpStatus as exc:
        if exc.status != 404:
            raise
        listed = []
        data.note("the service keeps no utilisation reports (no /v1/utilisation-reports)")
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for item, report in zip(
            listed, pool.map(lambda i: _usage_body(client, i), listed), strict=True
        ):
            if report is not None:
                _add_body(data, str(item.get("id", "")), report, "a utilisation report")
    return data


def _usage_body(client: HttpClient, item: dict[str, Any]) -> dict[str, Any] | None:
    """A listing entry may carry the body (`gpus` or `report`); else fetch it by id."""
    if isinstance(item.get("gpus"), list):
        return item
    if isinstance(item.get("report"), dict):
        report: dict[str, Any] = item["report"]
        return report
    if "id" not in item:
        return None
    reply = client.get(f"/v1/utilisation-reports/{urllib.parse.quote(str(item['id']))}")
    payload = reply.json() if reply.status == 200 else None
    if not isinstance(payload, dict):
        return None
    inner = payload.get("report")
    return inner if isinstance(inner, dict) else payload
