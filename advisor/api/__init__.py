"""The advisor HTTP API: an app factory; routes are thin and the core stays pure."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import warnings
from collections.abc import AsyncIterator

from fastapi import Depends, FastAPI
from pydantic.warnings import UnsupportedFieldAttributeWarning
from starlette.concurrency import run_in_threadpool

from advisor import __version__
from advisor.api import contract, docs, problems
from advisor.api.deps import known_query_only
from advisor.api.limits import BodyLimitMiddleware
from advisor.api.metrics import Metrics, MetricsMiddleware
from advisor.api.routes import (
    catalog,
    estimate,
    operator_tables,
    ops,
    recommend,
    reports,
    review,
    utilisation,
)
from advisor.api.settings import Settings
from advisor.api.state import AppState, CatalogHolder, FleetCalibration, ReviewCache
from advisor.catalog.loading import catalog_cache_dir
from advisor.collector import freeze_kept
from advisor.store import CircuitBreaker, SqlStore, Store, StoreError, open_store

log = logging.getLogger("advisor.api")


def create_app(settings: Settings | None = None, store: Store | None = None) -> FastAPI:
    """Validate settings, load the catalog and open the store now: a bad one fails at start-up."""
    settings = settings or Settings.from_env()
    # FastAPI silences this warning while it makes the type adapter of a route's body parameter
    # (the parameter's name as an alias, which pydantic ignores there), but pydantic now builds
    # the adapter at its first validation, after that filter: the server's log showed the
    # warning at the first request of each route with a body. The same filter, for that message.
    warnings.filterwarnings(
        "ignore",
        message=r"The 'alias' attribute with value '\w+' was provided to the `Field\(\)` function",
        category=UnsupportedFieldAttributeWarning,
    )
    holder = CatalogHolder.load(settings, catalog_cache_dir())
    # the breaker answers at once while the database is down (advisor/store/guard.py): it
    # wraps the store's one call seam; a store of the tests' own (a fake) runs without it
    breaker = CircuitBreaker(retry_s=settings.database_retry_s)
    opened: Store
    if store is None:
        opened = open_store(
            settings.database_url, timeout_s=settings.database_timeout_s, breaker=breaker
        )
    else:
        opened = store
        if isinstance(store, SqlStore):
            store.breaker = breaker
    if not settings.api_tokens:
        log.warning("ADVISOR_API_TOKENS is empty: every write request will be refused")
    if not settings.read_tokens:
        log.warning(
            "ADVISOR_READ_TOKENS is empty: stored reports (host names, GPU UUIDs, process "
            "names), the fleet summary and the review are readable without a token"
        )
    calibration = FleetCalibration(opened)
    calibration.refresh_if_changed()  # read the store whole once now; reports then add to it
    reviews = ReviewCache(max_age_s=settings.fleet_refresh_s)
    state = AppState(settings, holder, opened, Metrics(), calibration, reviews, breaker=breaker)
    state.metrics.add_gauges(state.gauges)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        previous = None
        with contextlib.suppress(ValueError):  # not in the main thread (tests): no SIGHUP reload
            previous = signal.signal(signal.SIGHUP, lambda *_: holder.reload())
        refresher = asyncio.create_task(_refresh_periodically(state))
        # Everything the service keeps is built now (catalog, store, the server's protocol
        # modules): frozen, full collections no longer walk it on the event loop (about 80 ms
        # each unfrozen; advisor/collector.py).
        freeze_kept()
        yield
        refresher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await refresher
        if previous is not None:
            signal.signal(signal.SIGHUP, previous)
        opened.close()

    app = FastAPI(
        title="advisor",
        version=__version__,
        description="Hardware recommendations from a validated catalog, and a fleet store of "
        "GPU probe reports. Errors are application/problem+json.",
        lifespan=lifespan,
        docs_url=None,  # Swagger UI and ReDoc load from a CDN: advisor.api.docs serves /docs
        redoc_url=None,
        openapi_url=None,  # advisor.api.docs serves /openapi.json, encoded once per document
        dependencies=[Depends(known_query_only)],
        redirect_slashes=False,  # advisor.api.problems redirects without the Host header
    )
    app.state.advisor = state
    problems.install(app)
    problems.document(app)
    contract.install(app, holder)
    for router in (ops.router, catalog.router, recommend.router, estimate.router, reports.router):
        app.include_router(router)
    app.include_router(utilisation.router)
    app.include_router(operator_tables.router)
    app.include_router(review.router)
    app.include_router(docs.router)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    return app


async def _refresh_periodically(state: AppState) -> None:
    """Every fleet_refresh_s, look for reports that other processes stored (in a thread: the
    store is read there, never on the event loop)."""
    while True:
        await asyncio.sleep(state.settings.fleet_refresh_s)
        try:
            await run_in_threadpool(state.refresh)
        except StoreError as exc:  # the store is down: /readyz says so; try again next time
            log.warning("fleet refresh failed: %s", exc)
