"""What the service holds between requests: settings, the catalog (with reload), the store."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.concurrency import run_in_threadpool

from advisor.api.metrics import Metrics
from advisor.api.settings import Settings
from advisor.catalog import Catalog
from advisor.catalog.loading import load_catalog, shipped_catalog_dir
from advisor.errors import AdvisorError, InputError
from advisor.perf.calibration import CALIBRATION_CHECK, Calibration, calibrations
from advisor.store import Store, StoreError

log = logging.getLogger("advisor.api")


@dataclass
class CatalogHolder:
    """Serves the last good catalog; a failed reload keeps it and records why."""

    settings: Settings
    catalog: Catalog
    loaded_at: dt.datetime
    generation: int = 0  # bumped by every successful reload: keys the response cache
    reload_error: str | None = None  # why the last reload failed (on /readyz), None after success
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, settings: Settings) -> CatalogHolder:
        return cls(settings, _load(settings), dt.datetime.now(dt.UTC))

    def reload(self) -> bool:
        with self._lock:
            try:
                catalog = _load(self.settings)
            except AdvisorError as exc:
                self.reload_error = str(exc)
                log.error(
                    "catalog reload failed; still serving the catalog loaded at %s: %s",
                    self.loaded_at.isoformat(),
                    exc,
                )
                return False
            self.catalog, self.loaded_at = catalog, dt.datetime.now(dt.UTC)
            self.generation += 1
            self.reload_error = None
            log.info(
                "catalog reloaded: %d accelerators, %d instance types",
                len(catalog.accelerators),
                len(catalog.instance_types),
            )
            return True


def _load(settings: Settings) -> Catalog:
    # Every input from the settings, none from the environment a second time: without a
    # catalog directory, the shipped one alone.
    if settings.catalog_dir is None:
        if settings.catalog_mode == "replace":
            raise InputError(
                "ADVISOR_CATALOG_MODE=replace needs a catalog directory (ADVISOR_CATALOG)"
            )
        where, replace = str(shipped_catalog_dir()), True
    else:
        where, replace = settings.catalog_dir, settings.catalog_mode == "replace"
    catalog = load_catalog(where, replace=replace, max_age_days=settings.max_price_age_days)
    for warning in catalog.warnings:
        log.warning("catalog: %s", warning)
    return catalog


class ResponseCache:
    """Encoded responses of a pure function of (catalog generation, request body), LRU-bounded.

    The engine is deterministic, so identical requests against one catalog get identical bytes;
    platform tools ask the same questions over and over.
    """

    def __init__(self, size: int = 512) -> None:
        self._items: OrderedDict[tuple[int, str], bytes] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: tuple[int, str]) -> bytes | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: tuple[int, str], value: bytes) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


class FleetCalibration:
    """The fleet's calibration (median measured / expected matmul per accelerator), recomputed
    from the store when reports arrive, never on the read path: `value` only reads memory.

    A report recomputes its accelerator's entry alone (a summary reads every stored check of it:
    0.6 s at 6,400 reports), and concurrent arrivals share one recomputation: each arrival takes
    a ticket, and a recomputation that started after the ticket was taken covers it.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()  # one recomputation at a time
        self._tickets_lock = threading.Lock()
        self._tickets: dict[str, int] = {}  # arrivals so far, per accelerator
        self._covered: dict[str, int] = {}  # arrivals the current value includes
        self._stored = -1  # store.count() when last computed (other processes' reports)
        self.value: dict[str, Calibration] = {}
        self.recomputed = 0  # how many times the store was read (tests, metrics)

    def report_arrived(self, accelerator: str | None) -> None:
        if accelerator is None:
            return  # a run that reached no GPU calibrates nothing
        with self._tickets_lock:
            ticket = self._tickets[accelerator] = self._tickets.get(accelerator, 0) + 1
        with self._lock:
            if self._covered.get(accelerator, 0) >= ticket:
                return  # another thread recomputed after this report was stored
            with self._tickets_lock:
                covers = self._tickets[accelerator]
            found = calibrations(
                [vars(s) for s in self._store.fleet(accelerator, CALIBRATION_CHECK)]
            )
            value = {acc: cal for acc, cal in self.value.items() if acc != accelerator}
            self.value = {**value, **found}
            self._covered[accelerator] = covers
            self.recomputed += 1

    def refresh_if_changed(self) -> bool:
        """Recompute when the store holds a different number of reports than last time (other
        processes stored some); called by the service's periodic refresh, off the event loop."""
        with self._lock:
            stored = self._store.count()
            if stored == self._stored:
                return False
            with self._tickets_lock:
                covers = dict(self._tickets)
            self.value = calibrations([vars(s) for s in self._store.fleet(check=CALIBRATION_CHECK)])
            self._covered, self._stored = covers, stored
            self.recomputed += 1
            return True


class ReviewCache:
    """Review pages per (store generation, catalog generation, region), built one at a time:
    concurrent callers wait for the build in progress and share its page (32 concurrent builds
    once took 83 s and 2.4 GB). Pages older than `max_age_s` are rebuilt, for reports that other
    processes stored."""

    def __init__(self, max_age_s: float, size: int = 8) -> None:
        self._max_age_s, self._size = max_age_s, size
        self._pages: OrderedDict[tuple[int, int, str | None], tuple[float, bytes]] = OrderedDict()
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.builds = 0

    async def get(self, key: tuple[int, int, str | None], build: Callable[[], bytes]) -> bytes:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:  # a lock belongs to one event loop
            self._lock, self._loop = asyncio.Lock(), loop
        async with self._lock:
            hit = self._pages.get(key)
            if hit is not None and time.monotonic() - hit[0] <= self._max_age_s:
                self._pages.move_to_end(key)
                return hit[1]
            page = await run_in_threadpool(build)
            self.builds += 1
            self._pages[key] = (time.monotonic(), page)
            while len(self._pages) > self._size:
                self._pages.popitem(last=False)
            return page


@dataclass
class AppState:
    settings: Settings
    catalog: CatalogHolder
    store: Store
    metrics: Metrics
    calibration: FleetCalibration
    reviews: ReviewCache
    responses: ResponseCache = field(default_factory=ResponseCache)
    # Bumped by every report this process stores and by the periodic refresh when the store
    # changed under it: keys the review cache.
    generation: int = 0

    def report_stored(self, accelerator: str | None = None, probe: bool = True) -> None:
        """A probe (or utilisation) report was stored here: caches keyed by the store go stale,
        and a probe report's accelerator is calibrated again."""
        self.generation += 1
        if probe:
            self.calibration.report_arrived(accelerator)

    def refresh(self) -> None:
        """The periodic check for reports stored by other processes (off the event loop)."""
        if self.calibration.refresh_if_changed():
            self.generation += 1

    def gauges(self) -> dict[str, tuple[str, float]]:
        out = {
            "advisor_catalog_reload_failing": (
                "1 while the last catalog reload failed.",
                float(self.catalog.reload_error is not None),
            ),
            "advisor_catalog_instance_types": (
                "Instance types in the served catalog.",
                float(len(self.catalog.catalog.instance_types)),
            ),
            "advisor_recommendation_cache_hits": (
                "Recommendations answered from the cache.",
                float(self.responses.hits),
            ),
            "advisor_recommendation_cache_misses": (
                "Recommendations computed.",
                float(self.responses.misses),
            ),
            "advisor_fleet_calibration_recomputed": (
                "Times the fleet calibration was recomputed from the store.",
                float(self.calibration.recomputed),
            ),
            "advisor_review_builds": ("Review pages built.", float(self.reviews.builds)),
        }
        try:
            out["advisor_probe_reports_in_store"] = (
                "Probe reports in the store.",
                float(self.store.count()),
            )
            out["advisor_store_up"] = ("1 while the store answers.", 1.0)
        except StoreError:
            out["advisor_store_up"] = ("1 while the store answers.", 0.0)
        return out
