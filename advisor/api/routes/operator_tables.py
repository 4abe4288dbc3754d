"""Operator tables (`advisor probe --ops --report-to`): store one (write token), and the
fleet's table of an accelerator voted from the stored ones (read token, when
ADVISOR_READ_TOKENS is set: it names hosts)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Response

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
from advisor.api.schemas import FleetOpsTableOut, IgnoredOpsHostOut, OpsTableStored
from advisor.api.strict_json import StrictJSONRoute
from advisor.fleet.hosts import normalise_host, token_may_report
from advisor.fleet.intake import check_report_time
from advisor.fleet.ops_tables import fleet_ops_table
from advisor.store import Store
from probes.ops_table import OpsReport

router = APIRouter(prefix="/v1", tags=["operator tables"], route_class=StrictJSONRoute)


@router.post(
    "/ops-tables",
    operation_id="createOpsTable",
    status_code=201,
    response_model=OpsTableStored,
    dependencies=[WriteAccess],
    responses={**stored_before(OpsTableStored), **responses(400, 401, 403, 413, 422, 503)},
)
def create_ops_table(
    report: OpsReport,
    store: StoreDep,
    state: StateDep,
    response: Response,
    token: PresentedToken,
    idempotency_key: IdempotencyKey = None,
) -> OpsTableStored:
    """As for probe reports: created_at within a year before the server's clock and at most
    10 minutes after it (a 422), the host name normalised and one the token may report for
    (else a 403, ADVISOR_TOKEN_HOSTS); stored once per Idempotency-Key and content."""
    check_report_time(report.created_at, dt.datetime.now(dt.UTC))
    host = normalise_host(report.host, "host")
    if not token_may_report(host, token, state.settings.token_hosts):
        raise HTTPException(403, f"this token may not report for host {host!r}")
    report = report.model_copy(update={"host": host})
    report_id, created = store.add_ops(report, idempotency_key)
    if created:
        state.report_stored()
    else:
        response.status_code = 200
    return OpsTableStored(id=report_id, host=host, accelerator=report.table.accelerator)


@router.get(
    "/fleet/ops-tables/{accelerator}",
    operation_id="getFleetOpsTable",
    response_model=FleetOpsTableOut,
    dependencies=[ReadAccess],
    responses=responses(401, 403, 404, 503),
)
def get_fleet_ops_table(
    accelerator: Annotated[str, Path(max_length=100)], store: StoreDep, state: StateDep
) -> Response:
    """The voted table of the accelerator's stored tables; 404 when none is stored."""
    # Voting reads and parses every stored table (about 0.2 MB each, up to advisor.store.sql
    # OPS_TABLES_READ): 50 hosts' took 3 s of CPU a request. The answer is kept until another
    # table of the accelerator is stored (advisor/api/state.py KeptWhileCount).
    count = store.ops_tables_count(accelerator)
    body = (
        state.fleet_ops_tables.get(accelerator, count, lambda: _fleet_table(accelerator, store))
        if count
        else None
    )
    if body is None:
        raise HTTPException(404, f"no operator table of {accelerator!r} is stored")
    return Response(body, media_type="application/json")


def _fleet_table(accelerator: str, store: Store) -> bytes | None:
    reports = store.ops_tables(accelerator)
    fleet = fleet_ops_table((r.host, r.table) for r in reports)
    if fleet is None:
        return None
    return (
        FleetOpsTableOut(
            accelerator=accelerator,
            hosts=list(fleet.hosts),
            tables=len(reports),
            ignored=[IgnoredOpsHostOut(row=r, host=h, why=w) for r, h, w in fleet.ignored],
            table=fleet.table,
        )
        .model_dump_json()
        .encode()
    )
