"""The service's store behind a circuit breaker, with the outcome of its last write.

With PostgreSQL down, every request waited for a connection (5 s each; writes queued behind one
another 16 s at the median) and /readyz said "all 8 connections stayed busy". Once a call finds
the database unreachable (StoreUnreachable), the breaker opens: for `retry_s` every call fails
at once with StoreUnreachable naming when it is retried (a 503 with Retry-After), then one call
goes through to try it (the others still fail at once), and its success closes the breaker.

A failed statement (a full disk, a constraint) leaves the breaker closed: other calls may well
succeed. The last write's outcome is kept for /readyz, which a `SELECT 1` could not tell (on a
full disk 349 of 400 writes failed while it said ready).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from advisor.store.base import (
    CheckRow,
    FleetSummary,
    ReportFilter,
    Store,
    StoredReport,
    StoredUtilisation,
    StoreError,
    StoreUnreachable,
)
from probes.ops_table import OpsReport
from probes.report import ProbeReport, UtilisationReport

T = TypeVar("T")


@dataclass(frozen=True)
class WriteOutcome:
    ok: bool
    at: float  # time.monotonic()
    detail: str  # the error, when it failed


@dataclass(frozen=True)
class BreakerState:
    open: bool  # calls fail at once
    detail: str  # why it opened (the last unreachable error)
    retry_in_s: float  # until a call may try the database again (0 when closed)


class GuardedStore:
    """A Store whose calls pass through the circuit breaker (see the module)."""

    def __init__(self, store: Store, retry_s: float, clock: Callable[[], float] = time.monotonic):
        self.inner = store
        self._retry_s, self._clock = retry_s, clock
        self._lock = threading.Lock()  # guards the breaker's fields only, never a database call
        self._open_until: float | None = None  # None: closed
        self._trying = False  # one call is trying the database after the open period
        self._why = ""
        self.last_write: WriteOutcome | None = None

    # -- the breaker ---------------------------------------------------------------------------
    def breaker(self) -> BreakerState:
        with self._lock:
            if self._open_until is None:
                return BreakerState(False, "", 0.0)
            return BreakerState(True, self._why, max(self._open_until - self._clock(), 0.0))

    def _enter(self) -> bool:
        """Whether this call may use the database; True also for the one trying it again."""
        with self._lock:
            if self._open_until is None:
                return False  # closed: nothing to note
            now = self._clock()
            if now >= self._open_until and not self._trying:
                self._trying = True
                return True
            retry = max(self._open_until - now, 0.0)
            why = self._why
        raise StoreUnreachable(
            f"{why} (seen {self._retry_s - retry:.1f} s ago; the database is tried again in"
            f" {retry * 1000:.0f} ms)",
            retry_after_s=retry or self._retry_s,
        )

    def _call(self, fn: Callable[..., T], *args: Any, write: bool = False) -> T:
        trying = self._enter()
        try:
            result = fn(*args)
        except StoreUnreachable as exc:
            with self._lock:
                self._open_until, self._why = self._clock() + self._retry_s, str(exc)
                self._trying = False
            if write:
                self.last_write = WriteOutcome(False, self._clock(), str(exc))
            exc.retry_after_s = self._retry_s
            raise
        except StoreError as exc:
            if trying:  # reached, but the statement failed: reachable after all
                self._close()
            if write:
                self.last_write = WriteOutcome(False, self._clock(), str(exc))
            raise
        except BaseException:
            if trying:
                with self._lock:
                    self._trying = False
            raise
        if trying:
            self._close()
        if write:
            self.last_write = WriteOutcome(True, self._clock(), "")
        return result

    def _close(self) -> None:
        with self._lock:
            self._open_until, self._trying, self._why = None, False, ""

    # -- the Store protocol ----------------------------------------------------------------------
    def add(self, report: ProbeReport, received_at: dt.datetime | None = None) -> StoredReport:
        return self._call(self.inner.add, report, received_at, write=True)

    def add_once(
        self,
        report: ProbeReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
        token_id: str | None = None,
    ) -> tuple[StoredReport, bool]:
        return self._call(
            self.inner.add_once, report, client_key, received_at, token_id, write=True
        )

    def get(self, report_id: str) -> StoredReport | None:
        return self._call(self.inner.get, report_id)

    def query(self, flt: ReportFilter) -> tuple[list[StoredReport], int]:
        return self._call(self.inner.query, flt)

    def fleet(self, accelerator: str | None = None, check: str | None = None) -> list[FleetSummary]:
        return self._call(self.inner.fleet, accelerator, check)

    def check_rows_named(self, check: str) -> list[CheckRow]:
        return self._call(self.inner.check_rows_named, check)

    def add_utilisation(
        self, report: UtilisationReport, received_at: dt.datetime | None = None
    ) -> StoredUtilisation:
        return self._call(self.inner.add_utilisation, report, received_at, write=True)

    def add_utilisation_once(
        self,
        report: UtilisationReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
    ) -> tuple[StoredUtilisation, bool]:
        return self._call(
            self.inner.add_utilisation_once, report, client_key, received_at, write=True
        )

    def get_utilisation(self, report_id: str) -> StoredUtilisation | None:
        return self._call(self.inner.get_utilisation, report_id)

    def query_utilisation(
        self, host: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[StoredUtilisation], int]:
        return self._call(self.inner.query_utilisation, host, limit, offset)

    def iter_utilisation(self) -> Iterator[StoredUtilisation]:
        # each page is its own transaction: a round trip through the breaker first; later pages
        # fail as the adapter's errors (a generator cannot be retried from the middle anyway)
        self._call(self.inner.ping)
        return self.inner.iter_utilisation()

    def add_ops(
        self, report: OpsReport, client_key: str | None, received_at: dt.datetime | None = None
    ) -> tuple[str, bool]:
        return self._call(self.inner.add_ops, report, client_key, received_at, write=True)

    def ops_tables(self, accelerator: str) -> list[OpsReport]:
        return self._call(self.inner.ops_tables, accelerator)

    def ping(self) -> None:
        self._call(self.inner.ping)

    def count(self) -> int:
        return self._call(self.inner.count)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # the adapter's own attributes (a SQLite store's path)
