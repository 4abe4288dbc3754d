"""A probe report reduced to the small, plain record the fleet's review keeps (ProbeRecord), from
the whole report (probes.report.ProbeReport) or from its stored text through a lighter reading
(StoredView). The store's aggregates are kept from the same record when a report is written
(advisor/store/aggregates.py), the review reads it from a directory or over HTTP
(advisor/review/data.py): one reading of a report, wherever it comes from."""

from __future__ import annotations

import datetime as dt
from typing import Any, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, Field

from probes.report import ProbeReport
from probes.timestamps import ReportTime


class _InventoryFields(Protocol):
    @property
    def hostname(self) -> str: ...
    @property
    def gpu(self) -> object | None: ...


class ReportFields(Protocol):
    """What report_fields reads: a ProbeReport, or the lighter reading of a stored one
    (StoredView below)."""

    @property
    def accelerator(self) -> str | None: ...
    @property
    def verdict(self) -> str: ...
    @property
    def inventory(self) -> _InventoryFields: ...


def measured_a_gpu(report: ReportFields) -> bool:
    """False for a run that reached no GPU (a CPU machine, no driver, no CUDA): its verdict is
    error and its inventory holds no GPU. Its checks are CPU figures and diagnoses, which say
    nothing about the accelerator that --expect named."""
    return report.inventory.gpu is not None or report.verdict != "error"


def report_fields(report: ReportFields) -> tuple[str, str | None, str]:
    """(host, accelerator, verdict) of a probe report. The accelerator is the one it measured
    (the inventory's match), never the one --expect named: an H200 run told to expect an MI300X
    once became an MI300X calibration ratio. None for a run that reached no GPU."""
    accelerator = report.accelerator
    if not measured_a_gpu(report):
        accelerator = None
    return report.inventory.hostname, accelerator, report.verdict


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
    accelerator: str | None  # the one it measured (report_fields); None: it reached no GPU
    matched: str | None  # the accelerator the probe recognised
    verdict: str
    created_at: str | None  # RFC 3339 in UTC, fixed width (utc_text)
    driver_version: str | None
    gpu_name: str | None
    gpu_id: str | None  # the GPU's UUID, else host#device; None when the run reached no GPU
    checks: tuple[CheckResult, ...]
    gpus: tuple[GpuRecord, ...] = ()  # every GPU the report measured, with its verdict
    failed_ranks: int = 0  # ranks of a node probe that did not finish


def utc_text(when: dt.datetime) -> str:
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
        created_at=utc_text(report.created_at),
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
