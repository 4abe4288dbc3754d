"""Response bodies, for the OpenAPI contract (request bodies, and the recommendation result,
reuse the core's models: advisor/request.py, advisor/engine/result.py)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from probes.ops_table import OpsTable
from probes.report import ProbeReport


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StoredReportOut(_Out):
    id: str
    received_at: dt.datetime
    host: str
    accelerator: str | None
    verdict: str


class ReportStored(StoredReportOut):
    """The answer to a probe report upload: what was stored, and whether the server's verdict
    (the worse of the report's and its checks') replaced the report's own."""

    claimed_verdict: str | None = Field(
        None,
        description="The verdict the report gave, when its checks say worse: `verdict` (the"
        " checks' worst status) is stored and counted instead. null: the report's verdict"
        " stands.",
    )


class StoredReportFull(StoredReportOut):
    report: ProbeReport


class ReportPage(_Out):
    items: list[StoredReportOut]
    total: int
    limit: int
    offset: int
    next_offset: int | None


class IgnoredHostOut(_Out):
    host: str
    ratio: float = Field(description="The host's median measured / expected")
    why: str


class FleetCalibrationOut(_Out):
    """A voted check's fleet ratio (matmul_bf16 measured / expected, or the GPU link's
    all_reduce_vs_plan or the network's cross_node_all_reduce_vs_plan measured / planned): one
    vote per host (its median), hosts far from the fleet's median left out and named."""

    check: str
    ratio: float | None = Field(description="The median of the voting hosts' medians")
    hosts: int = Field(description="Hosts voting")
    tokens: int | None = Field(
        description="Distinct write tokens that posted the voting hosts' runs: the calibration "
        "rests on this many independent sources as well as on `hosts` (one token can name many "
        "hosts); null when none of the runs was posted with a token"
    )
    reports: int = Field(description="Their runs with a plausible ratio")
    min_hosts: int = Field(description="Hosts needed before the ratio calibrates estimates")
    min_reports: int = Field(description="Runs needed before the ratio calibrates estimates")
    calibrates: bool
    ignored_hosts: list[IgnoredHostOut]


class FleetSummaryOut(_Out):
    accelerator: str | None
    reports: int
    hosts: int
    verdicts: dict[str, int]
    checks: dict[str, dict[str, float | int | None]]
    failing_hosts: list[str]
    calibration: FleetCalibrationOut | None
    link_calibration: FleetCalibrationOut | None = Field(
        None,
        description="The GPU link's vote (all_reduce_vs_plan of node reports): where it "
        "calibrates, plans on this accelerator (training's collectives, serving's tensor-parallel "
        "all-reduce) use that share of the link",
    )
    network_calibration: FleetCalibrationOut | None = Field(
        None,
        description="The network's vote (cross_node_all_reduce_vs_plan of several-node probes): "
        "where it calibrates, plans across nodes of this accelerator use that share of the "
        "network",
    )


class Health(_Out):
    status: Literal["ok"]


class ComponentStatus(_Out):
    status: Literal["ok", "degraded", "unavailable"]
    detail: str


class Readiness(_Out):
    status: Literal["ready", "degraded", "unavailable"]
    database: ComponentStatus  # unavailable: unreachable (the breaker open) or not answering
    writes: ComponentStatus  # degraded: the last write failed, or the disk is nearly full
    catalog: ComponentStatus


class ReloadResult(_Out):
    reloaded: bool
    detail: str


class OpsTableStored(_Out):
    """An operator table stored (`advisor probe --ops --report-to`)."""

    id: str
    host: str
    accelerator: str | None


class IgnoredOpsHostOut(_Out):
    row: str = Field(description="The operator and shape, as section field=value,...")
    host: str
    why: str


class FleetOpsTableOut(_Out):
    """The fleet's operator table of one accelerator: per row the median over hosts of each
    host's median time (one vote per host), hosts far from it left out (advisor/fleet/
    ops_tables.py)."""

    accelerator: str
    hosts: list[str] = Field(description="Hosts whose tables went in")
    tables: int = Field(description="Stored tables read (the newest, at most 2,000)")
    ignored: list[IgnoredOpsHostOut] = Field(description="Host times left out, row by row")
    table: OpsTable
