"""The fleet review page, built from the service's store: GET /v1/review (text/html)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from advisor.api.deps import CatalogDep, ReadAccess, StateDep, StoreDep
from advisor.api.problems import responses
from advisor.did_you_mean import unknown
from advisor.errors import InputError
from advisor.review import build_review, from_store, render_html
from advisor.review.html import CSP

router = APIRouter(prefix="/v1", tags=["review"])


@router.get(
    "/review",
    operation_id="getReview",
    response_class=HTMLResponse,
    dependencies=[ReadAccess],
    responses={
        200: {
            "content": {"text/html": {}},
            "description": "One self-contained HTML page (inline CSS and SVG, no scripts): fleet "
            "inventory, measured / expected per accelerator and check, outlier hosts, idle and "
            "over-provisioned GPUs with cheaper catalog options, cost per workload.",
        },
        **responses(401, 403, 422, 503),
    },
)
async def get_review(
    store: StoreDep,
    catalog: CatalogDep,
    state: StateDep,
    region: Annotated[
        str | None,
        Query(
            max_length=64,
            description="Catalog region for prices (default: the current price's region for "
            "suggestions, each instance type's cheapest region for workload costs).",
        ),
    ] = None,
) -> HTMLResponse:
    if region is not None and region not in catalog.regions:
        raise InputError(unknown("region", region, catalog.regions))

    def build() -> bytes:  # in a thread: it reads the whole store
        review = build_review(
            from_store(store), catalog, region, min_fleet_reports=state.settings.min_fleet_reports
        )
        return render_html(review).encode()

    page = await state.reviews.get((state.generation, state.catalog.generation, region), build)
    return HTMLResponse(
        page,
        headers={"Content-Security-Policy": CSP, "Cache-Control": "no-store"},
    )
