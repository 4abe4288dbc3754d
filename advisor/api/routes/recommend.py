"""POST /v1/recommendations: the engine, same body and result as `advisor recommend --json`."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from advisor.api.deps import CatalogDep
from advisor.api.problems import responses
from advisor.api.schemas import RecommendationResult
from advisor.engine import recommend
from advisor.workload import Workload

router = APIRouter(prefix="/v1", tags=["recommendations"])

EXAMPLE = {"workload": "large_scale_training", "memory_gb": 80, "interconnect_gb_s": 900}


@router.post(
    "/recommendations",
    operation_id="createRecommendation",
    response_model=None,  # the engine's result is already JSON-ready: no second validation pass
    responses={
        200: {"model": RecommendationResult, "description": "Recommendations, best first"},
        **responses(413, 422),
    },
    openapi_extra={"requestBody": {"content": {"application/json": {"example": EXAMPLE}}}},
)
async def create_recommendation(workload: Workload, catalog: CatalogDep) -> JSONResponse:
    return JSONResponse(recommend(catalog, workload).to_dict())
