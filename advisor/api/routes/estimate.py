"""POST /v1/estimates: every figure of one sized workload on one kind of hardware, as
`advisor estimate --json`."""

from __future__ import annotations

from fastapi import APIRouter

from advisor.api.deps import CatalogDep, StateDep
from advisor.api.problems import responses
from advisor.api.strict_json import StrictJSONRoute
from advisor.errors import InputError, NotFoundError
from advisor.planning.estimate import Estimate, estimate
from advisor.request import EstimateRequest

router = APIRouter(
    prefix="/v1", tags=["recommendations and estimates"], route_class=StrictJSONRoute
)

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
    responses={200: {"description": "Every figure with its formula"}, **responses(400, 413, 422)},
    openapi_extra={"requestBody": {"content": {"application/json": {"example": ESTIMATE_EXAMPLE}}}},
)
def create_estimate(request: EstimateRequest, catalog: CatalogDep, state: StateDep) -> Estimate:
    try:
        return estimate(catalog, request, state.calibration.value, state.settings.min_fleet_reports)
    except NotFoundError as exc:  # an id in the body that the catalog lacks: an invalid field
        raise InputError(str(exc)) from None
