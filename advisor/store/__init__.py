"""Storage of probe reports: SQLite by default, PostgreSQL for a fleet (tests/memory_store.py holds
an in-memory fake for tests).

`open_store(url)` picks the adapter from the URL; database exceptions are translated into
StoreError at the adapter boundary. SQL text is constant: values only ever travel as bound
parameters.
"""

from __future__ import annotations

from advisor.store.base import (
    ReportFilter,
    Store,
    StoredReport,
    StoreError,
    StoreUnreachable,
    summarize_fleet,
)


def open_store(url: str, timeout_s: float | None = None) -> Store:
    """The adapter for `url`; `timeout_s`: PostgreSQL's connect and pool-wait timeout."""
    if url.startswith(("postgresql://", "postgres://")):
        from advisor.store.postgres import CONNECT_TIMEOUT_S, POOL_TIMEOUT_S, PostgresStore

        if timeout_s is None:
            return PostgresStore(url)
        return PostgresStore(
            url,
            pool_timeout_s=timeout_s or POOL_TIMEOUT_S,
            connect_timeout_s=max(int(timeout_s), CONNECT_TIMEOUT_S),
        )
    if url.startswith("sqlite:///") or url == "sqlite://":
        from advisor.store.sqlite import SqliteStore

        path = url.removeprefix("sqlite:///") if url != "sqlite://" else ":memory:"
        return SqliteStore(path or ":memory:")
    raise StoreError(
        f"unsupported database URL {url.split(':', 1)[0]!r}: use sqlite:///PATH or postgresql://..."
    )


__all__ = [
    "ReportFilter",
    "Store",
    "StoreError",
    "StoreUnreachable",
    "StoredReport",
    "open_store",
    "summarize_fleet",
]
