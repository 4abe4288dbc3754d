"""POST /v1/estimates: every figure of one sized workload on one kind of hardware, as
`advisor estimate --json`."""

from __future__ import annotations

from fastapi import APIRouter, Request

from advisor.api.deps import CatalogDep, StateDep
from advisor.api.engine_queue import client_of
from advisor.api.problems import responses
from advisor.api.state import AppState
from advisor.api.strict_json import EngineRoute
from advisor.catalog import Catalog
from advisor.errors import InputError, NotFoundError
from advisor.planning.estimate import Estimate, estimate
from advisor.request import EstimateRequest

router = APIRouter(prefix="/v1", tags=["recommendations and estimates"], route_class=EngineRoute)

ESTIMATE_EXAMPLE = {
    "workload": "fine_tuning",
    "model": "llama-3-8b",
    "tokens": 2e9,
    "instance_type": "p5.48xlarge",
}


@router.post(
    "/estimates",
    operation_id="createEstimate",
    response_model=Estimate,
    responses={
        200: {"description": "Every figure with its formula"},
        **responses(400, 413, 422, 429, 503),
    },
    openapi_extra={"requestBody": {"content": {"application/json": {"example": ESTIMATE_EXAMPLE}}}},
)
async def create_estimate(
    request: EstimateRequest, catalog: CatalogDep, state: StateDep, http: Request
) -> Estimate:
    # on the engine's thread, one at a time, each client's share bounded
    # (advisor/api/engine_queue.py): an estimate is a sized answer, up to a second of CPU
    return await state.engine.run(client_of(http), lambda: _estimate(request, catalog, state))


def _estimate(request: EstimateRequest, catalog: Catalog, state: AppState) -> Estimate:
    try:
        return estimate(catalog, request, state.calibration.value, state.settings.min_fleet_reports)
    except NotFoundError as exc:  # an id in the body that the catalog lacks: an invalid field
        raise InputError(str(exc)) from None
