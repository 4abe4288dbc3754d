"""What the service holds between requests: settings, the catalog (with reload), the store."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from advisor.api.metrics import Metrics
from advisor.api.settings import Settings
from advisor.catalog import Catalog
from advisor.catalog.loading import load_catalog
from advisor.errors import AdvisorError
from advisor.perf.calibration import Calibration, calibrations
from advisor.store import Store

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
    catalog = load_catalog(settings.catalog_dir, replace=settings.catalog_mode == "replace")
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


@dataclass
class AppState:
    settings: Settings
    catalog: CatalogHolder
    store: Store
    metrics: Metrics
    responses: ResponseCache = field(default_factory=ResponseCache)
    _fleet: tuple[float, dict[str, Calibration]] | None = None
    _fleet_lock: threading.Lock = field(default_factory=threading.Lock)

    def fleet_calibration(self, max_age_s: float = 60.0) -> dict[str, Calibration]:
        """The fleet's measured matmul ratios per accelerator, recomputed at most once a minute
        (a summary reads every stored check: not per request)."""
        with self._fleet_lock:
            now = time.monotonic()
            if self._fleet is None or now - self._fleet[0] > max_age_s:
                summaries = [vars(s) for s in self.store.fleet()]
                self._fleet = (now, calibrations(summaries))
            return self._fleet[1]
