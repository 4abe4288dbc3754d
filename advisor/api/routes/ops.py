"""Health, readiness, metrics and catalog reload."""

from __future__ import annotations

import functools
import shutil
import time
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from advisor.api.deps import StateDep, WriteAccess
from advisor.api.problems import responses
from advisor.api.public_text import Redactor
from advisor.api.schemas import ComponentStatus, Health, Readiness, ReloadResult
from advisor.api.state import AppState
from advisor.store import StoreError, StoreUnreachable

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
    """Open to load balancers and orchestrators: the details name no server path. The database
    unreachable is 503 "unavailable"; writes failing (the last write failed, or little free space
    where a SQLite file lies) or the catalog's last reload failing is 200 "degraded", each with
    its own component: reads and recommendations still work there."""
    database = _database(state)
    writes = _writes(state)
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
            f"{state.redact(holder.reload_error)}",
        )
    else:
        catalog = ComponentStatus(status="ok", detail=loaded)
    if database.status != "ok":
        overall, code = "unavailable", 503
    else:
        degraded = catalog.status != "ok" or writes.status != "ok"
        overall, code = ("degraded" if degraded else "ready"), 200
    body = Readiness(
        status=overall,
        database=_public(database, state.redact),
        writes=_public(writes, state.redact),
        catalog=catalog,
    )
    return JSONResponse(body.model_dump(), status_code=code)


# Less free space than this where the SQLite file lies: writes are about to fail.
MIN_FREE_BYTES = 64 * 1024 * 1024


def _database(state: AppState) -> ComponentStatus:
    breaker = state.breaker.state()
    if breaker.open:  # answered at once: the breaker is what every request meets now
        return ComponentStatus(
            status="unavailable",
            detail=f"unreachable: {breaker.detail}; tried again in"
            f" {breaker.retry_in_s * 1000:.0f} ms",
        )
    try:
        state.ping.get()
    except StoreUnreachable as exc:
        return ComponentStatus(status="unavailable", detail=f"unreachable: {exc}")
    except StoreError as exc:
        return ComponentStatus(status="unavailable", detail=f"not answering: {exc}")
    return ComponentStatus(status="ok", detail="reachable")


def _writes(state: AppState) -> ComponentStatus:
    free = _free_bytes(state.store)
    space = f"; {free / 2**20:,.0f} MiB free" if free is not None else ""
    last = state.breaker.last_write
    if last is not None and not last.ok:
        ago = time.monotonic() - last.at
        return ComponentStatus(
            status="degraded", detail=f"the last write failed {ago:.1f} s ago: {last.detail}{space}"
        )
    if free is not None and free < MIN_FREE_BYTES:
        return ComponentStatus(
            status="degraded",
            detail=f"{free / 2**20:,.1f} MiB free where the database lies (less than"
            f" {MIN_FREE_BYTES // 2**20} MiB): writes are about to fail",
        )
    if last is None:
        return ComponentStatus(status="ok", detail=f"no write since start{space}")
    ago = time.monotonic() - last.at
    return ComponentStatus(status="ok", detail=f"the last write succeeded {ago:.1f} s ago{space}")


def _free_bytes(store: object) -> int | None:
    """Free bytes on the file system of a SQLite database file; None for PostgreSQL (its own
    server's disk: a failing write says so) or a database in memory."""
    path = getattr(store, "path", None)
    if not isinstance(path, str) or path == ":memory:":
        return None
    try:
        return shutil.disk_usage(_directory_of(path)).free
    except OSError:
        return None


@functools.lru_cache(maxsize=4)
def _directory_of(path: str) -> Path:
    """The directory a database file lies in, resolved once (a store's file never moves)."""
    return Path(path).resolve().parent


def _public(component: ComponentStatus, redact: Redactor) -> ComponentStatus:
    return ComponentStatus(status=component.status, detail=redact(component.detail))


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
    # the loader's message names files by their server paths: the log has them, not the answer
    reason = state.redact(state.catalog.reload_error or "")
    detail = (
        "catalog reloaded"
        if ok
        else f"reload failed, still serving the last good catalog: {reason}"
    )
    return ReloadResult(reloaded=ok, detail=detail)
