"""Probe reports: store (write token), list with filters, look up, and fleet summaries (read
token, when ADVISOR_READ_TOKENS is set: they name hosts and GPUs)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Response

from advisor.api.deps import (
    IdempotencyKey,
    PresentedToken,
    ReadAccess,
    StateDep,
    StoreDep,
    WriteAccess,
    stored_before,
)
from advisor.api.problems import responses
from advisor.api.schemas import (
    FleetCalibrationOut,
    FleetSummaryOut,
    IgnoredHostOut,
    ReportPage,
    ReportStored,
    StoredReportFull,
    StoredReportOut,
)
from advisor.api.strict_json import StrictJSONRoute
from advisor.fleet.hosts import token_may_report
from advisor.fleet.intake import admit_probe_report
from advisor.fleet.statistics import HostVote
from advisor.perf.calibration import (
    CALIBRATION_CHECK,
    LINK_CHECK,
    MIN_FLEET_HOSTS,
    NETWORK_CHECK,
    calibrates,
    calibration_of,
)
from advisor.store import ReportFilter, ReportSummary
from advisor.store.base import token_id
from probes.report import ProbeReport
from probes.timestamps import Rfc3339

router = APIRouter(prefix="/v1", tags=["probe reports"], route_class=StrictJSONRoute)
Verdict = Literal["pass", "warn", "fail", "error"]


def _summary(r: ReportSummary) -> StoredReportOut:
    return StoredReportOut(
        id=r.id,
        received_at=r.received_at,
        host=r.host,
        accelerator=r.accelerator,
        verdict=r.verdict,
    )


@router.post(
    "/probe-reports",
    operation_id="createProbeReport",
    status_code=201,
    response_model=ReportStored,
    dependencies=[WriteAccess],
    responses={**stored_before(ReportStored), **responses(400, 401, 403, 413, 422, 503)},
)
def create_report(
    report: ProbeReport,
    state: StateDep,
    response: Response,
    token: PresentedToken,
    idempotency_key: IdempotencyKey = None,
) -> ReportStored:
    """The report is checked beyond its schema first (advisor.fleet.intake): created_at within
    a year before the server's clock and at most 10 minutes after it (a 422 naming it); the
    host name normalised (an ambiguous one is a 422) and one the token may report for (else a
    403, ADVISOR_TOKEN_HOSTS); the accelerator the one its inventory names; checks graded again
    from measured / expected; the verdict the worst of every verdict and check in it (the
    server's verdict is stored, and the answer says what the report claimed)."""
    admitted = admit_probe_report(report, dt.datetime.now(dt.UTC), state.catalog.catalog)
    host = admitted.report.inventory.hostname
    if not token_may_report(host, token, state.settings.token_hosts):
        raise HTTPException(403, f"this token may not report for host {host!r}")
    stored, created = state.add_probe_report(admitted.report, idempotency_key, token_id(token))
    if created:
        state.metrics.report_stored(stored.verdict)
    else:
        response.status_code = 200
    response.headers["Location"] = f"/v1/probe-reports/{stored.id}"
    return ReportStored(**vars(_summary(stored)), claimed_verdict=admitted.claimed_verdict)


@router.get(
    "/probe-reports",
    operation_id="listProbeReports",
    response_model=ReportPage,
    dependencies=[ReadAccess],
    responses=responses(401, 403, 422, 503),
)
def list_reports(
    store: StoreDep,
    host: Annotated[str | None, Query(max_length=255)] = None,
    accelerator: Annotated[str | None, Query(max_length=100)] = None,
    verdict: Verdict | None = None,
    since: Rfc3339 | None = None,
    until: Rfc3339 | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> ReportPage:
    flt = ReportFilter(host, accelerator, verdict, since, until, limit, offset)
    items, total = store.summaries(flt)
    next_offset = offset + limit if offset + limit < total else None
    return ReportPage(
        items=[_summary(r) for r in items],
        total=total,
        limit=limit,
        offset=offset,
        next_offset=next_offset,
    )


@router.get(
    "/probe-reports/{report_id}",
    operation_id="getProbeReport",
    response_model=StoredReportFull,
    dependencies=[ReadAccess],
    responses=responses(401, 403, 404, 503),
)
def get_report(report_id: Annotated[str, ...], store: StoreDep) -> StoredReportFull:
    stored = store.get(report_id) if len(report_id) <= 64 else None
    if stored is None:
        raise HTTPException(404, f"no probe report {report_id!r}")
    return StoredReportFull(
        **_summary(stored).model_dump(), report=ProbeReport.model_validate(stored.report)
    )


@router.get(
    "/fleet/summary",
    operation_id="getFleetSummary",
    response_model=list[FleetSummaryOut],
    dependencies=[ReadAccess],
    responses=responses(401, 403, 422, 503),
)
def fleet_summary(
    state: StateDep, accelerator: Annotated[str | None, Query(max_length=100)] = None
) -> list[FleetSummaryOut]:
    min_reports = state.settings.min_fleet_reports
    return [
        FleetSummaryOut(
            **{
                **vars(s),
                "calibration": _calibration(s.calibration, CALIBRATION_CHECK, min_reports),
                "link_calibration": _calibration(s.link_calibration, LINK_CHECK, min_reports),
                "network_calibration": _calibration(
                    s.network_calibration, NETWORK_CHECK, min_reports
                ),
            }
        )
        for s in state.store.fleet(accelerator)
    ]


def _calibration(vote: HostVote | None, check: str, min_reports: int) -> FleetCalibrationOut | None:
    if vote is None:
        return None
    cal = calibration_of(vote)
    return FleetCalibrationOut(
        check=check,
        ratio=vote.ratio,
        hosts=vote.hosts,
        tokens=vote.tokens,
        reports=vote.runs,
        min_hosts=MIN_FLEET_HOSTS,
        min_reports=min_reports,
        calibrates=calibrates(cal, min_reports),
        ignored_hosts=[IgnoredHostOut(**vars(h)) for h in vote.ignored],
    )
