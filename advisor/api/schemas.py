"""Response bodies, for the OpenAPI contract (request bodies, and the recommendation result,
reuse the core's models: advisor/request.py, advisor/engine/result.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from probes.report import ProbeReport


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FigureOut(_Out):
    name: str
    value: float
    unit: str
    formula: str


class EstimateResult(_Out):
    workload: str
    model: str
    sizing: str
    hardware: dict[str, str | int | None]
    fits: bool
    figures: list[FigureOut]
    memory_per_gpu_gb: float
    memory_total_gb: float
    efficiency: float
    efficiency_source: str
    hours: float | None
    hourly_usd: float | None
    price: dict[str, Any] | None
    cost_usd: float | None
    tokens_per_s: float | None
    replicas: int | None
    cost_per_million_tokens_usd: float | None = None
    notes: list[str]


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
