"""Storage of probe reports: one SQL store (advisor/store/sql.py, SQLAlchemy Core) on a SQLite
file by default or PostgreSQL for a fleet, its schema migrated by Alembic when it opens
(advisor/store/migrate.py); tests/memory_store.py holds an in-memory fake for tests.

Database exceptions are translated into StoreError at the store's one call seam; values only
ever travel as bound parameters.
"""

from __future__ import annotations

from advisor.store.base import (
    ReportFilter,
    ReportSummary,
    Store,
    StoredReport,
    StoreError,
    StoreUnreachable,
)
from advisor.store.guard import CircuitBreaker
from advisor.store.sql import CONNECT_TIMEOUT_S, SqlStore


def open_store(
    url: str, *, timeout_s: float | None = None, breaker: CircuitBreaker | None = None
) -> SqlStore:
    """The store at `url` (sqlite:///PATH, sqlite:// in memory, postgresql://...), migrated;
    `timeout_s`: PostgreSQL's connect and pool-wait timeout; `breaker`: around every call."""
    if timeout_s is None:
        return SqlStore(url, breaker=breaker)
    return SqlStore(
        url,
        pool_timeout_s=timeout_s,
        connect_timeout_s=max(int(timeout_s), CONNECT_TIMEOUT_S),
        breaker=breaker,
    )


__all__ = [
    "CircuitBreaker",
    "ReportFilter",
    "ReportSummary",
    "SqlStore",
    "Store",
    "StoreError",
    "StoreUnreachable",
    "StoredReport",
    "open_store",
]
