"""PostgreSQL adapter (psycopg 3), for a fleet. A small pool of connections, one per thread."""

from __future__ import annotations

import contextlib
import datetime as dt
import queue
from collections.abc import Iterator
from typing import Any

from advisor.store import sql as q
from advisor.store.base import (
    FleetSummary,
    ReportFilter,
    StoredReport,
    StoredUtilisation,
    StoreError,
)


def _pg(statement: str) -> str:
    return statement.replace("?", "%s")  # constant statements only: no value is ever inlined


class PostgresStore:
    def __init__(self, url: str, *, pool_size: int = 8, migrate_to: int = q.LATEST) -> None:
        try:
            import psycopg
        except ImportError:
            raise StoreError(
                "ADVISOR_DATABASE_URL points to PostgreSQL but psycopg is not installed "
                "(pip install 'advisor[postgres]')"
            ) from None
        self._psycopg = psycopg
        self._url = url
        self._pool: queue.LifoQueue[Any] = queue.LifoQueue()
        self._size = pool_size
        self._created = 0
        self.schema_version = q.migrate(self._tx, _pg, migrate_to)

    def _connection(self) -> Any:
        try:
            return self._pool.get_nowait()
        except queue.Empty:
            if self._created >= self._size:
                return self._pool.get(timeout=10)
        try:
            conn = self._psycopg.connect(self._url, connect_timeout=5)
        except self._psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {_safe(exc)}") from None
        self._created += 1
        return conn

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        conn = self._connection()
        broken = False
        try:
            with conn.transaction(), conn.cursor() as cur:
                yield cur
        except self._psycopg.Error as exc:
            broken = conn.closed or isinstance(exc, self._psycopg.OperationalError)
            raise StoreError(f"PostgreSQL: {_safe(exc)}") from None
        finally:
            if broken:
                self._created -= 1
                with contextlib.suppress(Exception):
                    conn.close()
            else:
                self._pool.put(conn)

    def add(self, report: dict[str, Any], received_at: dt.datetime | None = None) -> StoredReport:
        return q.add(self._tx, _pg, report, received_at, self.schema_version)

    def get(self, report_id: str) -> StoredReport | None:
        return q.get(self._tx, _pg, report_id)

    def query(self, flt: ReportFilter) -> tuple[list[StoredReport], int]:
        return q.list_reports(self._tx, _pg, flt)

    def fleet(self, accelerator: str | None = None) -> list[FleetSummary]:
        return q.fleet(self._tx, _pg, accelerator)

    def add_utilisation(
        self, report: dict[str, Any], received_at: dt.datetime | None = None
    ) -> StoredUtilisation:
        return q.add_utilisation(self._tx, _pg, report, received_at)

    def get_utilisation(self, report_id: str) -> StoredUtilisation | None:
        return q.get_utilisation(self._tx, _pg, report_id)

    def query_utilisation(
        self, host: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[StoredUtilisation], int]:
        return q.query_utilisation(self._tx, _pg, host, limit, offset)

    def iter_utilisation(self) -> Iterator[StoredUtilisation]:
        return q.iter_utilisation(self._tx, _pg)

    def count(self) -> int:
        return q.count(self._tx, _pg)

    def ping(self) -> None:
        with self._tx() as cur:
            cur.execute("SELECT 1")

    def close(self) -> None:
        while True:
            try:
                self._pool.get_nowait().close()
            except queue.Empty:
                return


def _safe(exc: Exception) -> str:
    """The error's first line: psycopg messages never carry the password, the URL is not logged."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
