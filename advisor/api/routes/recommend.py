"""POST /v1/recommendations: the engine, same body and result as `advisor recommend --json`."""

from __future__ import annotations

import anyio.to_thread
from anyio import CapacityLimiter
from fastapi import APIRouter
from fastapi.responses import Response

from advisor.api.deps import CatalogDep, StateDep
from advisor.api.problems import responses
from advisor.api.state import AppState
from advisor.api.strict_json import StrictJSONRoute
from advisor.catalog import Catalog
from advisor.engine import Result, recommend
from advisor.request import RecommendRequest

router = APIRouter(
    prefix="/v1", tags=["recommendations and estimates"], route_class=StrictJSONRoute
)

# The engine is pure Python: threads cannot run it in parallel (the GIL), and many of them
# contending for the interpreter cost more than they overlap. One thread runs it; requests
# queue for it while the event loop keeps answering everything else.
_ENGINE_THREADS = CapacityLimiter(1)

EXAMPLE = {"workload": "large_scale_training", "memory_gb": 80, "interconnect_gb_s": 900}


@router.post(
    "/recommendations",
    operation_id="createRecommendation",
    # The engine's Result is the documented schema; the route returns its JSON bytes itself
    # (validated once, when the engine built it), so FastAPI does not validate it a second time.
    response_model=Result,
    responses={200: {"description": "Recommendations, best first"}, **responses(400, 413, 422)},
    openapi_extra={"requestBody": {"content": {"application/json": {"example": EXAMPLE}}}},
)
async def create_recommendation(
    workload: RecommendRequest, catalog: CatalogDep, state: StateDep
) -> Response:
    # Results of unsized requests depend on the catalog alone and are memoised: a hit is
    # answered here. The engine runs in the thread pool, so that a sized request (a search over
    # cluster sizes) never holds the event loop; sized results also depend on the fleet's
    # calibration (kept in memory, recomputed when reports arrive) and are computed each time.
    key = (state.catalog.generation, workload.model_dump_json())
    cached = None if workload.sized else state.responses.get(key)
    if cached is None:
        cached = await anyio.to_thread.run_sync(
            _answer, workload, catalog, state, limiter=_ENGINE_THREADS
        )
        if not workload.sized:
            state.responses.put(key, cached)
    return Response(cached, media_type="application/json")


def _answer(workload: RecommendRequest, catalog: Catalog, state: AppState) -> bytes:
    fleet = state.calibration.value if workload.sized else None
    result = recommend(catalog, workload, fleet, state.settings.min_fleet_reports)
    return result.model_dump_json().encode()
