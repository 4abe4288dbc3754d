"""Response bodies, for the OpenAPI contract (request bodies reuse the core's models)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from probes.report import ProbeReport


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecommendationOut(_Out):
    instance_type: str | None
    device: str | None
    provider: str | None
    accelerator: str
    gpu_count: int
    nodes: int
    region: str | None
    purchase: str | None
    hourly_usd: float | None
    power_w: float
    power_mode: str | None
    score: float
    reasons: list[str]
    sizing: dict[str, Any] | None = None


class RejectionOut(_Out):
    id: str
    codes: list[str]
    reasons: list[str]


class AlternativeOut(_Out):
    constraint: str
    relax_to: float | str | None
    candidate: str
    sentence: str


class RecommendationResult(_Out):
    workload: str
    objective: str
    explanation: str
    feasible_count: int
    recommendations: list[RecommendationOut]
    rejected: list[RejectionOut]
    alternatives: list[AlternativeOut]


class StoredReportOut(_Out):
    id: str
    received_at: dt.datetime
    host: str
    accelerator: str | None
    verdict: str


class StoredReportFull(StoredReportOut):
    report: ProbeReport


class ReportPage(_Out):
    items: list[StoredReportOut]
    total: int
    limit: int
    offset: int
    next_offset: int | None


class FleetSummaryOut(_Out):
    accelerator: str | None
    reports: int
    hosts: int
    verdicts: dict[str, int]
    checks: dict[str, dict[str, float | int | None]]
    failing_hosts: list[str]


class Health(_Out):
    status: Literal["ok"]


class ComponentStatus(_Out):
    status: Literal["ok", "degraded", "unavailable"]
    detail: str


class Readiness(_Out):
    status: Literal["ready", "degraded", "unavailable"]
    database: ComponentStatus
    catalog: ComponentStatus


class ReloadResult(_Out):
    reloaded: bool
    detail: str
