"""Gathering for the review: probe and utilisation reports reduced to small, plain records.

Three sources, one result (ReviewData):
- a directory of *.json files (probe reports and utilisation reports, told apart by "kind");
- the service's store, read directly (`store.iter_probe_bodies`, then `store.iter_utilisation`);
- the service over HTTP (`GET /v1/probe-reports` pages, then each body, several at a time),
  through advisor.http_client.

A report is reduced as soon as it is read: the review keeps what it shows, never the bodies, so
memory stays flat however many reports the fleet holds.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import threading
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor.errors import AdvisorError, InputError
from advisor.http_client import HttpClient
from advisor.store import Store
from advisor.store.base import measured_a_gpu, report_fields
from probes.report import JobReport, ProbeReport, UtilisationReport
from probes.timestamps import ReportTime

if TYPE_CHECKING:
    import httpx

PAGE = 500  # the API's largest page
MAX_NOTES = 20

_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while thousands of report bodies are decoded.

    Decoding creates millions of short-lived dicts and lists; each collection then walks every
    live container, which made reading 10,000 stored reports a third slower. JSON bodies hold no
    reference cycles, so reference counting frees them meanwhile; cyclic garbage made elsewhere
    waits until the last concurrent holder leaves, when collection resumes as before.
    """
    global _gc_holders, _gc_was_enabled  # noqa: PLW0603 - one process-wide switch, counted
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


class SourceError(AdvisorError):
    """The reports could not be read (directory, store or service)."""


class CheckResult(NamedTuple):
    """One check of one run. Named tuples of plain values: the garbage collector stops tracking
    them, which keeps a review over 10,000 reports (170,000 checks) fast."""

    name: str
    status: str
    measured: float | None
    expected: float | None
    unit: str | None

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.expected:
            return None
        return self.measured / self.expected


class GpuRecord(NamedTuple):
    """One GPU of a report: a node report has one per GPU, a single-GPU report one."""

    key: str  # the GPU's UUID, else host#index
    gpu: int | None  # CUDA index on its host
    name: str | None
    verdict: str


class ProbeRecord(NamedTuple):
    id: str
    host: str
    accelerator: str | None  # what the checks were verified against (expected, else matched)
    matched: str | None  # the accelerator the probe recognised
    verdict: str
    created_at: str | None  # RFC 3339 in UTC, fixed width (_utc)
    driver_version: str | None
    gpu_name: str | None
    gpu_id: str | None  # the GPU's UUID, else host#device; None when the run reached no GPU
    checks: tuple[CheckResult, ...]
    gpus: tuple[GpuRecord, ...] = ()  # every GPU the report measured, with its verdict
    failed_ranks: int = 0  # ranks of a node probe that did not finish


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
    usage: list[UsageRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was skipped or missing, and why

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)
        elif len(self.notes) == MAX_NOTES:
            self.notes.append("(further notes left out)")


def _utc(when: dt.datetime) -> str:
    """A report's time in one fixed-width UTC form, so that text order is time order whatever
    offset the report was written with."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Read(BaseModel):
    """Part of a stored probe report, as the review reads it back: the store validated the whole
    report when it was posted, so only what probe_record keeps is decoded and the rest skipped
    (0.64 against 1.02 ms a node report of 296 checks, records included)."""

    model_config = ConfigDict(extra="ignore")


class _CheckRead(_Read):
    name: str
    status: str
    measured: float | None = None
    expected: float | None = None
    unit: str | None = None


class _GpuRead(_Read):
    uuid: str | None = None
    name: str | None = None


class _InventoryRead(_Read):
    hostname: str
    driver_version: str | None = None
    gpu: _GpuRead | None = None


class _GpuVerdictRead(_Read):
    gpu: int
    uuid: str | None = None
    name: str | None = None
    verdict: str


class StoredView(_Read):
    """A stored probe report read for the review (probes.report.ProbeReport's names)."""

    created_at: ReportTime
    device: int
    verdict: str
    accelerator: str | None = None
    inventory: _InventoryRead
    checks: list[_CheckRead] = Field(default_factory=list)
    gpu_verdicts: list[_GpuVerdictRead] = Field(default_factory=list)
    failed_ranks: list[Any] = Field(default_factory=list)


def probe_record(report_id: str, report: ProbeReport | StoredView) -> ProbeRecord:
    """The parts of a probe report the review shows."""
    host, accelerator, verdict = report_fields(report)
    gpu = report.inventory.gpu
    checks = tuple(
        CheckResult(c.name, c.status, c.measured, c.expected, c.unit) for c in report.checks
    )
    gpu_id = (
        ((gpu.uuid if gpu is not None else None) or f"{host}#{report.device}")
        if measured_a_gpu(report)
        else None
    )
    gpu_name = gpu.name if gpu is not None else None
    return ProbeRecord(
        id=report_id,
        host=host,
        accelerator=accelerator,
        matched=report.accelerator,
        verdict=verdict,
        created_at=_utc(report.created_at),
        driver_version=report.inventory.driver_version,
        gpu_name=gpu_name,
        gpu_id=gpu_id,
        checks=checks,
        gpus=_gpus(report, host, gpu_id, gpu_name, verdict),
        failed_ranks=len(report.failed_ranks),
    )


def _gpus(
    report: ProbeReport | StoredView,
    host: str,
    gpu_id: str | None,
    name: str | None,
    verdict: str,
) -> tuple[GpuRecord, ...]:
    """A node report's GPUs from its per-GPU verdicts; a single-GPU report's one GPU."""
    if report.gpu_verdicts:
        return tuple(
            GpuRecord(g.uuid or f"{host}#{g.gpu}", g.gpu, g.name, g.verdict)
            for g in report.gpu_verdicts
        )
    if gpu_id is None:
        return ()
    return (GpuRecord(gpu_id, report.device, name, verdict),)


def usage_record(report: UtilisationReport) -> UsageRecord:
    return UsageRecord(
        host=report.host,
        instance_type=report.instance_type,
        created_at=_utc(report.created_at),
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


def from_store(store: Store, now: dt.datetime | None = None) -> ReviewData:
    """Every probe report stored before `now` (a fixed snapshot while paging), and utilisation."""
    until = now or dt.datetime.now(dt.UTC)
    data = ReviewData(source="the service's store")
    with gc_paused():
        # Each stored text decoded and read in one step (pydantic's JSON parser), only what
        # the review keeps (StoredView).
        for report_id, text in store.iter_probe_bodies(until):
            try:
                report = StoredView.model_validate_json(text)
            except ValidationError as exc:
                _invalid(data, f"stored report {report_id}", "probe report", exc)
                continue
            data.probes.append(probe_record(report_id, report))
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
