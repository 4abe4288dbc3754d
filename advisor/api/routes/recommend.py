"""POST /v1/recommendations: the engine, same body and result as `advisor recommend --json`."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from advisor.api.deps import CatalogDep, StateDep
from advisor.api.problems import responses
from advisor.api.schemas import EstimateResult, RecommendationResult
from advisor.engine import recommend
from advisor.estimate import EstimateRequest, estimate
from advisor.workload import Workload

router = APIRouter(prefix="/v1", tags=["recommendations and estimates"])

EXAMPLE = {"workload": "large_scale_training", "memory_gb": 80, "interconnect_gb_s": 900}
ESTIMATE_EXAMPLE = {
    "workload": "fine_tuning",
    "model": "llama-3-8b",
    "tokens": 2e9,
    "instance_type": "p5.48xlarge",
}


@router.post(
    "/recommendations",
    operation_id="createRecommendation",
    response_model=None,  # the engine's result is already JSON-ready: no second validation pass
    responses={
        200: {"model": RecommendationResult, "description": "Recommendations, best first"},
        **responses(400, 413, 422),
    },
    openapi_extra={"requestBody": {"content": {"application/json": {"example": EXAMPLE}}}},
)
async def create_recommendation(
    workload: Workload, catalog: CatalogDep, state: StateDep
) -> JSONResponse:
    # The engine takes well under a millisecond: run it on the event loop (no thread hop). The
    # fleet calibration touches the store at most once a minute, and only for sized workloads.
    fleet = state.fleet_calibration() if workload.sized else None
    result = recommend(catalog, workload, fleet, state.settings.min_fleet_reports)
    return JSONResponse(result.to_dict())


@router.post(
    "/estimates",
    operation_id="createEstimate",
    response_model=None,
    responses={
        200: {"model": EstimateResult, "description": "Every figure with its formula"},
        **responses(400, 413, 422),
    },
    openapi_extra={"requestBody": {"content": {"application/json": {"example": ESTIMATE_EXAMPLE}}}},
)
def create_estimate(request: EstimateRequest, catalog: CatalogDep, state: StateDep) -> JSONResponse:
    fleet = state.fleet_calibration()
    return JSONResponse(estimate(catalog, request, fleet, state.settings.min_fleet_reports))
