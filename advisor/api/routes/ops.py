"""Health, readiness, metrics and catalog reload."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from advisor.api.deps import StateDep, WriteAccess
from advisor.api.problems import responses
from advisor.api.public_text import server_directories, without_paths
from advisor.api.schemas import ComponentStatus, Health, Readiness, ReloadResult
from advisor.store import StoreError

router = APIRouter(tags=["operations"])


@router.get("/healthz", operation_id="healthz", response_model=Health)
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    operation_id="readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Not ready"}},
)
def readyz(state: StateDep) -> JSONResponse:
    """Open to load balancers and orchestrators: the details name no server path."""
    directories = server_directories(state.settings)
    try:
        state.store.ping()
        database = ComponentStatus(status="ok", detail="reachable")
    except StoreError as exc:
        database = ComponentStatus(
            status="unavailable", detail=without_paths(str(exc), directories)
        )
    holder = state.catalog
    cat = holder.catalog
    loaded = (
        f"{len(cat.accelerators)} accelerators, {len(cat.instance_types)} instance types, "
        f"loaded {holder.loaded_at.isoformat()}"
    )
    if holder.reload_error:
        catalog = ComponentStatus(
            status="degraded",
            detail=f"last reload failed, serving the last good catalog ({loaded}): "
            f"{without_paths(holder.reload_error, directories)}",
        )
    else:
        catalog = ComponentStatus(status="ok", detail=loaded)
    if database.status != "ok":
        overall, code = "unavailable", 503
    else:
        overall, code = ("degraded" if catalog.status != "ok" else "ready"), 200
    body = Readiness(status=overall, database=database, catalog=catalog)
    return JSONResponse(body.model_dump(), status_code=code)


@router.get(
    "/metrics",
    operation_id="metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
def metrics(state: StateDep) -> Response:
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)


@router.post(
    "/v1/catalog/reload",
    operation_id="reloadCatalog",
    response_model=ReloadResult,
    dependencies=[WriteAccess],
    responses=responses(401, 403),
)
def reload_catalog(state: StateDep) -> ReloadResult:
    ok = state.catalog.reload()
    detail = (
        "catalog reloaded"
        if ok
        else f"reload failed, still serving the last good catalog: {state.catalog.reload_error}"
    )
    return ReloadResult(reloaded=ok, detail=detail)
