"""The service's circuit breaker around the store's one call seam (advisor/store/sql.py's
SqlStore._run), with the outcome of its last write.

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

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from advisor.store.base import StoreError, StoreUnreachable

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


class CircuitBreaker:
    """Calls through `call` pass the breaker (see the module)."""

    def __init__(self, *, retry_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._retry_s, self._clock = retry_s, clock
        self._lock = threading.Lock()  # guards the breaker's fields only, never a database call
        self._open_until: float | None = None  # None: closed
        self._trying = False  # one call is trying the database after the open period
        self._why = ""
        self.last_write: WriteOutcome | None = None

    def state(self) -> BreakerState:
        with self._lock:
            if self._open_until is None:
                return BreakerState(open=False, detail="", retry_in_s=0.0)
            retry = max(self._open_until - self._clock(), 0.0)
            return BreakerState(open=True, detail=self._why, retry_in_s=retry)

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

    def call(self, fn: Callable[[], T], *, write: bool) -> T:
        trying = self._enter()
        try:
            result = fn()
        except StoreUnreachable as exc:
            with self._lock:
                self._open_until, self._why = self._clock() + self._retry_s, str(exc)
                self._trying = False
            self._wrote(write=write, ok=False, detail=str(exc))
            exc.retry_after_s = self._retry_s
            raise
        except StoreError as exc:
            if trying:  # reached, but the statement failed: reachable after all
                self._close()
            self._wrote(write=write, ok=False, detail=str(exc))
            raise
        except BaseException:
            if trying:
                with self._lock:
                    self._trying = False
            raise
        if trying:
            self._close()
        self._wrote(write=write, ok=True, detail="")
        return result

    def _wrote(self, *, write: bool, ok: bool, detail: str) -> None:
        if write:
            self.last_write = WriteOutcome(ok=ok, at=self._clock(), detail=detail)

    def _close(self) -> None:
        with self._lock:
            self._open_until, self._trying, self._why = None, False, ""
