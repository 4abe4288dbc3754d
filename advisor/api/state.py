"""What the service holds between requests: settings, the catalog (with reload), the store."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from starlette.concurrency import run_in_threadpool

from advisor.api.engine_queue import EngineQueue, Turns
from advisor.api.metrics import Metrics
from advisor.api.public_text import Redactor, server_directories
from advisor.api.settings import Settings
from advisor.catalog import Catalog
from advisor.catalog.loading import load_catalog
from advisor.collector import freeze_kept
from advisor.errors import AdvisorError
from advisor.fleet.statistics import PLAUSIBLE_RATIO, RunningVote, ratio_of
from advisor.perf.calibration import VOTED_CHECKS, Calibration, calibration_of
from advisor.store import Store, StoredReport, StoreError
from advisor.store.base import CheckRow, check_rows
from advisor.store.guard import CircuitBreaker
from probes.report import ProbeReport

T = TypeVar("T")

log = logging.getLogger("advisor.api")


@dataclass
class CatalogHolder:
    """Serves the last good catalog; a failed reload keeps it and records why."""

    settings: Settings
    catalog: Catalog
    loaded_at: dt.datetime
    generation: int = 0  # bumped by every successful reload: keys the response cache
    reload_error: str | None = None  # why the last reload failed (on /readyz), None after success
    # The CLI's cache of validated catalogs (advisor.catalog.loading.catalog_cache_dir): a start
    # or reload on unchanged files skips parsing and validating the YAML (without it, ready took
    # 2.07 s against a 2 s target). None: always load.
    cache_dir: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, settings: Settings, cache_dir: Path | None = None) -> CatalogHolder:
        return cls(
            settings, _load(settings, cache_dir), dt.datetime.now(dt.UTC), cache_dir=cache_dir
        )

    def reload(self) -> bool:
        with self._lock:
            try:
                catalog = _load(self.settings, self.cache_dir)
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
            freeze_kept()  # the new catalog lives as long as the old one did
            self.reload_error = None
            log.info(
                "catalog reloaded: %d accelerators, %d instance types",
                len(catalog.accelerators),
                len(catalog.instance_types),
            )
            return True


def _load(settings: Settings, cache_dir: Path | None) -> Catalog:
    # Every input from the settings, none from the environment a second time.
    catalog = load_catalog(settings=settings, cache_dir=cache_dir)
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
    """The fleet's calibration (median measured / expected matmul per accelerator, with its GPU
    link's and its network's measured / planned all-reduce: advisor.perf.calibration
    VOTED_CHECKS), kept in memory and never computed on the read path: `value` only reads memory.

    Each accelerator's plausible ratios are kept sorted. A report this process stores adds its
    own rows (a bisection per ratio and one median), so that ingestion costs the same at any
    fleet size (benchmarks/bench_ingest.py, against the re-read of the accelerator's every
    stored check that each report did before). The store's ratios are read whole only at start
    and when it holds reports this process did not count (others stored them; the service's
    periodic refresh), from its per-host histograms (Store.host_ratios: each ratio exact at its
    bucket's ends, else within 0.1%, as the summary's vote), not from every stored run. Reports
    are stored inside a gate that whole reads close (`storing`): a whole read never races a
    report into being counted twice or not at all. The price: this process's report posts wait
    while a whole read runs, which only others' reports cause.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        # The in-memory figures' lock: never held across a database call: held across a
        # report's write, posts would wait in single file while PostgreSQL is down.
        self._lock = threading.Lock()
        # Report posts share it; a whole read of the store takes it alone, so that no report is
        # counted twice or missed (stored but not yet counted while the rows are read).
        self._gate = _Gate()
        # per (accelerator, voted check): its plausible ratios by host (one vote per host)
        self._ratios: dict[tuple[str, str], RunningVote] = {}
        self._counted = -1  # reports the ratios include: -1 before the first whole read
        self.value: dict[str, Calibration] = {}
        self.recomputed = 0  # whole reads of the store (tests, metrics)

    @contextlib.contextmanager
    def storing(self) -> Iterator[Callable[[Sequence[CheckRow]], None]]:
        """Store one report inside the block, then call what it yields with the report's check
        rows if it was stored (not if an idempotency key found it stored before). Reports are
        stored side by side (the gate is shared): only a whole read closes it."""
        with self._gate.shared():
            yield self._stored

    def _stored(self, rows: Sequence[CheckRow]) -> None:
        with self._lock:  # memory only
            self._counted += 1
            touched = _add_ratios(self._ratios, rows)
            if touched:
                self.value = {**self.value, **_calibrations(self._ratios, touched)}

    def refresh_if_changed(self) -> bool:
        """Read the store whole when it holds a different number of reports than were counted
        (other processes stored some); called at start and by the service's periodic refresh,
        off the event loop."""
        with self._gate.exclusive():  # no report of this process is being stored meanwhile
            # Counted before the rows are read: a report another process stores in between is
            # read but not counted, so the next refresh reads again (the other order would
            # count it without reading it, for good).
            stored = self._store.count()
            if stored == self._counted:
                return False
            ratios: dict[tuple[str, str], RunningVote] = {}
            for check in VOTED_CHECKS:
                for found in self._store.host_ratios(check):
                    if found.accelerator and found.ratios:
                        vote = ratios.setdefault((found.accelerator, check), RunningVote())
                        vote.add_host(found.host, found.ratios, found.token_ids)
            value = _calibrations(ratios, {acc for acc, _ in ratios})
            with self._lock:
                self._ratios, self._counted, self.value = ratios, stored, value
                self.recomputed += 1
            return True


class _Gate:
    """Shared by many, or held by one alone (a readers-writer lock that lets a waiting
    exclusive holder in first, so that a steady stream of posts cannot starve a refresh)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._sharing = 0
        self._exclusive = False
        self._waiting = 0  # exclusive holders waiting

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._sharing += 1
        try:
            yield
        finally:
            with self._cond:
                self._sharing -= 1
                if not self._sharing:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            while self._exclusive or self._sharing:
                self._cond.wait()
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


def _add_ratios(ratios: dict[tuple[str, str], RunningVote], rows: Iterable[CheckRow]) -> set[str]:
    """Add the plausible ratios of the VOTED_CHECKS in `rows` to their accelerator's and check's
    vote (advisor.fleet.statistics, the fleet summary's vote); returns the accelerators that got
    one."""
    touched = set()
    for row in rows:
        ratio = ratio_of(row.measured, row.expected)
        if row.name not in VOTED_CHECKS or not row.accelerator or ratio is None:
            continue
        if PLAUSIBLE_RATIO.holds(ratio):
            key = (row.accelerator, row.name)
            ratios.setdefault(key, RunningVote()).add(row.host, ratio, row.token_id)
            touched.add(row.accelerator)
    return touched


def _calibrations(
    ratios: dict[tuple[str, str], RunningVote], which: Iterable[str]
) -> dict[str, Calibration]:
    """Each accelerator's matmul calibration with its link's and its network's beside it; an
    accelerator without a matmul vote has none (node reports carry the matmul)."""
    found = {}
    for acc in which:
        running = (ratios.get((acc, check)) for check in VOTED_CHECKS)
        cal, link, network = (calibration_of(r.vote() if r else None) for r in running)
        if cal is not None:
            found[acc] = replace(cal, link=link, network=network)
    return found


class ReviewCache:
    """Review pages per (store generation, catalog generation, region), built one at a time:
    concurrent callers wait for the build in progress and share its page (32 concurrent builds
    would take 83 s and 2.4 GB). Pages older than `max_age_s` are rebuilt, for reports that other
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


# What built_for keeps: name -> (the source it was built from, what was built)
_BUILT: dict[str, tuple[object, Any]] = {}


def built_for(source: object, name: str, build: Callable[[], T]) -> T:
    """What `build` makes of `source` (the catalog loaded now, the API document served now),
    kept under `name` while `source` is the object asked for: answers that depend on it alone
    are the same bytes for every request, and a reload makes a new one."""
    kept = _BUILT.get(name)
    if kept is None or kept[0] is not source:
        kept = _BUILT[name] = (source, build())
    return kept[1]


class KeptWhileCount:
    """Answers built from stored reports, kept per key while the count of reports they were
    built from is the count now (none is ever removed: a new one, stored by any process, changes
    it); built one at a time, so that the callers after a write share one build. A key is a
    name the stored reports carry (an accelerator): at most `size` are kept."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._kept: dict[str, tuple[int, bytes | None]] = {}
        self._lock = threading.Lock()
        self.builds = 0

    def get(self, key: str, count: int, build: Callable[[], bytes | None]) -> bytes | None:
        with self._lock:
            hit = self._kept.get(key)
            if hit is not None and hit[0] == count:
                return hit[1]
            answer = build()
            self.builds += 1
            if key not in self._kept and len(self._kept) >= self._size:
                self._kept.clear()  # bounded; rebuilt by the requests that follow
            self._kept[key] = (count, answer)
            return answer


# How long a reading of the store that anyone may ask for (/readyz's ping, /metrics' report
# count) is shared: a flood of anonymous probes or scrapes costs the database one statement a
# second at most. Orchestrators probe every few seconds and Prometheus scrapes every 15 s or more.
SHARED_READING_S = 1.0


class Recent(Generic[T]):
    """The last reading of `read`, shared by every caller within `interval_s` of it; taken by
    one caller at a time, so that callers arriving together share one reading. A failed reading
    is never kept: the next caller reads again (while the store is down the circuit breaker
    answers those at once)."""

    def __init__(
        self,
        read: Callable[[], T],
        interval_s: float = SHARED_READING_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._interval_s, self._clock = read, interval_s, clock
        self._kept: tuple[float, T] | None = None
        self._lock = threading.Lock()
        self.readings = 0

    def get(self) -> T:
        with self._lock:
            now = self._clock()
            if self._kept is not None and now - self._kept[0] < self._interval_s:
                return self._kept[1]
            value = self._read()
            self.readings += 1
            self._kept = (now, value)
            return value


@dataclass
class AppState:
    settings: Settings
    catalog: CatalogHolder
    store: Store
    metrics: Metrics
    calibration: FleetCalibration
    reviews: ReviewCache
    responses: ResponseCache = field(default_factory=ResponseCache)
    # each accelerator's fleet operator table as answered, while its stored tables' count holds
    fleet_ops_tables: KeptWhileCount = field(default_factory=KeptWhileCount)
    # sized recommendations and estimates, one at a time, each client's share bounded (settings)
    engine: EngineQueue = field(init=False)
    # large bodies parsed and checked off the event loop, one at a time, clients by turns
    # (advisor/api/strict_json.py)
    parsing: Turns = field(default_factory=Turns)
    # around the store's calls (advisor/store/guard.py); /readyz reads its state and last write
    breaker: CircuitBreaker = field(default_factory=lambda: CircuitBreaker(retry_s=2.0))
    # Bumped by every report this process stores and by the periodic refresh when the store
    # changed under it: keys the review cache.
    generation: int = 0
    # what anyone may ask of the store, read at most once a second (SHARED_READING_S)
    ping: Recent[None] = field(init=False)
    report_count: Recent[int] = field(init=False)
    # text shown to anyone (/readyz), without the server's paths
    redact: Redactor = field(init=False)

    def __post_init__(self) -> None:
        self.engine = EngineQueue(
            max_per_client=self.settings.engine_max_per_client,
            max_queued=self.settings.engine_max_queued,
        )
        self.ping = Recent(self.store.ping)
        self.report_count = Recent(self.store.count)
        self.redact = Redactor.of(server_directories(self.settings))

    def add_probe_report(
        self, report: ProbeReport, client_key: str | None, token_id: str | None = None
    ) -> tuple[StoredReport, bool]:
        """Store a probe report once per idempotency key (Store.add_once), with the id of the
        write token that posted it; a new one counts in the fleet calibration and makes the
        caches keyed by the store stale."""
        with self.calibration.storing() as stored_rows:
            stored, created = self.store.add_once(report, client_key, None, token_id)
            if created:
                # the voted checks alone: the store kept every check's figures already
                stored_rows(check_rows(stored.id, report, token_id, VOTED_CHECKS))
        if created:
            self.report_stored()
        return stored, created

    def report_stored(self) -> None:
        """A report was stored here: caches keyed by the store go stale."""
        self.generation += 1

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
                "Whole reads of the store by the fleet calibration (start-up, others' reports).",
                float(self.calibration.recomputed),
            ),
            "advisor_review_builds": ("Review pages built.", float(self.reviews.builds)),
        }
        try:
            out["advisor_probe_reports_in_store"] = (
                "Probe reports in the store.",
                float(self.report_count.get()),
            )
            out["advisor_store_up"] = ("1 while the store answers.", 1.0)
        except StoreError:
            out["advisor_store_up"] = ("1 while the store answers.", 0.0)
        return out
