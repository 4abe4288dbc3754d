"""POST /v1/recommendations: the engine, same body and result as `advisor recommend --json`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from advisor.api.engine_queue import client_of
from advisor.api.problems import responses
from advisor.api.state import AppState
from advisor.api.strict_json import DirectEngineRoute
from advisor.catalog import Catalog
from advisor.engine import Result, recommend
from advisor.request import RecommendRequest

router = APIRouter(
    prefix="/v1", tags=["recommendations and estimates"], route_class=DirectEngineRoute
)

# An unsized question with a short list is one pass over the catalog, a few ms
# (benchmarks/bench_recommend.py), the order of parsing a 16 KiB body, which is done on the
# event loop too; one that nothing satisfies adds a pass for the nearest alternatives. Answered
# on the event loop, it costs about 0.6x the CPU it costs on the worker thread, which trades the
# interpreter with the event loop on every socket operation; the price is that a health check
# waits behind the engine runs queued before it (benchmarks/results/service-*.txt: the distinct
# and engine-thread rows, and /healthz beside each). Sized questions search cluster sizes and
# deployments (tens of ms), and long lists grow with their length: those go to the engine's
# thread (advisor/api/engine_queue.py), one at a time, each client's share bounded.
INLINE_MAX_LIMIT = 10

EXAMPLE = {"workload": "large_scale_training", "memory_gb": 80, "interconnect_gb_s": 900}


@router.post(
    "/recommendations",
    operation_id="createRecommendation",
    # The engine's Result is the documented schema; the route returns its JSON bytes itself
    # (validated once, when the engine built it), so FastAPI does not validate it a second time.
    response_model=Result,
    responses={
        200: {"description": "Recommendations, best first"},
        **responses(400, 413, 422, 429, 503),
    },
    openapi_extra={"requestBody": {"content": {"application/json": {"example": EXAMPLE}}}},
)
async def create_recommendation(workload: RecommendRequest, http: Request) -> Response:
    # Results of unsized requests depend on the catalog alone and are memoised: a hit is
    # answered here, and so is a short unsized question (INLINE_MAX_LIMIT). The rest run on the
    # engine thread, so that a sized request (a search over cluster sizes) never holds the event
    # loop; sized results also depend on the fleet's calibration (kept in memory, updated
    # as reports arrive) and are computed each time.
    # The state and catalog are read here, not declared as dependencies: FastAPI resolving the
    # two (three calls with get_state's) cost about 15 us a request, a tenth of what the
    # service adds to the engine's time on a distinct body.
    state: AppState = http.app.state.advisor
    catalog = state.catalog.catalog
    key = (state.catalog.generation, workload.model_dump_json())
    cached = None if workload.sized else state.responses.get(key)
    if cached is None:
        if workload.sized or workload.limit > INLINE_MAX_LIMIT:
            cached = await state.engine.run(  # only sized work counts against a client
                client_of(http), lambda: _answer(workload, catalog, state), workload.sized
            )
        else:
            cached = _answer(workload, catalog, state)
        if not workload.sized:
            state.responses.put(key, cached)
    return Response(cached, media_type="application/json")


def _answer(workload: RecommendRequest, catalog: Catalog, state: AppState) -> bytes:
    fleet = state.calibration.value if workload.sized else None
    listed = workload.show_rejected
    result = recommend(catalog, workload, fleet, state.settings.min_fleet_reports, listed)
    return result.model_dump_json().encode()
