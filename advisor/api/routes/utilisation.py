"""Utilisation reports from `advisor monitor`: store (write token), list by host, look up (read
token, when ADVISOR_READ_TOKENS is set)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response
from pydantic import BaseModel, ConfigDict

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
from advisor.api.strict_json import StrictJSONRoute
from advisor.fleet.hosts import normalise_host, token_may_report
from advisor.fleet.intake import check_report_time
from advisor.store.base import UtilisationSummary
from probes.report import UtilisationReport

router = APIRouter(prefix="/v1", tags=["utilisation reports"], route_class=StrictJSONRoute)


class StoredUtilisationOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    received_at: dt.datetime
    host: str
    instance_type: str | None
    gpus: int
    findings: dict[str, int]  # finding -> number of GPUs ("unclassified" when None)


class StoredUtilisationFull(StoredUtilisationOut):
    report: UtilisationReport


class UtilisationPage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[StoredUtilisationOut]
    total: int
    limit: int
    offset: int
    next_offset: int | None


def _summary(r: UtilisationSummary) -> StoredUtilisationOut:
    return StoredUtilisationOut(
        id=r.id,
        received_at=r.received_at,
        host=r.host,
        instance_type=r.instance_type,
        gpus=r.gpus,
        findings=r.findings,
    )


@router.post(
    "/utilisation-reports",
    operation_id="createUtilisationReport",
    status_code=201,
    response_model=StoredUtilisationOut,
    dependencies=[WriteAccess],
    responses={
        **stored_before(StoredUtilisationOut),
        **responses(400, 401, 403, 413, 422, 503),
    },
)
def create_utilisation_report(
    report: UtilisationReport,
    store: StoreDep,
    state: StateDep,
    response: Response,
    token: PresentedToken,
    idempotency_key: IdempotencyKey = None,
) -> StoredUtilisationOut:
    check_report_time(report.created_at, dt.datetime.now(dt.UTC))  # as for probe reports
    host = normalise_host(report.host, "host")  # one spelling per host (advisor.fleet.hosts)
    if not token_may_report(host, token, state.settings.token_hosts):
        raise HTTPException(403, f"this token may not report for host {host!r}")
    report = report.model_copy(update={"host": host})
    stored, created = store.add_utilisation_once(report, idempotency_key)
    if created:
        state.report_stored()
    else:
        response.status_code = 200
    response.headers["Location"] = f"/v1/utilisation-reports/{stored.id}"
    return _summary(stored)


@router.get(
    "/utilisation-reports",
    operation_id="listUtilisationReports",
    response_model=UtilisationPage,
    dependencies=[ReadAccess],
    responses=responses(401, 403, 422, 503),
)
def list_utilisation_reports(
    store: StoreDep,
    host: Annotated[str | None, Query(max_length=255)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> UtilisationPage:
    items, total = store.query_utilisation(host, limit, offset)
    return UtilisationPage(
        items=[_summary(r) for r in items],
        total=total,
        limit=limit,
        offset=offset,
        next_offset=offset + limit if offset + limit < total else None,
    )


@router.get(
    "/utilisation-reports/{report_id}",
    operation_id="getUtilisationReport",
    response_model=StoredUtilisationFull,
    dependencies=[ReadAccess],
    responses=responses(401, 403, 404, 503),
)
def get_utilisation_report(report_id: str, store: StoreDep) -> StoredUtilisationFull:
    stored = store.get_utilisation(report_id) if len(report_id) <= 64 else None
    if stored is None:
        raise HTTPException(404, f"no utilisation report {report_id!r}")
    return StoredUtilisationFull(
        **_summary(stored).model_dump(), report=UtilisationReport.model_validate(stored.report)
    )
