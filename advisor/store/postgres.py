"""PostgreSQL adapter (psycopg 3), for a fleet: connections from a psycopg_pool pool."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Iterator
from typing import Any

from advisor.store import sql as q
from advisor.store.base import (
    CheckRow,
    FleetSummary,
    ReportFilter,
    StoredReport,
    StoredUtilisation,
    StoreError,
    StoreUnreachable,
)
from probes.ops_table import OpsReport
from probes.report import ProbeReport, UtilisationReport

# Seconds to make a connection (libpq rounds values below 2 up to 2) and to wait for a free
# pooled one: the service passes ADVISOR_DATABASE_TIMEOUT_S. A database that is down once cost
# every request 5 s here; the service's circuit breaker (advisor.store.guard) then answers the
# following ones at once.
CONNECT_TIMEOUT_S = 2
POOL_TIMEOUT_S = 2.0
# Taken by the migration's transaction: servers started together migrate one after another.
# (A constant of this project's own: pg_advisory_xact_lock keys are per database.)
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(1796352013)"


def _pg(statement: str) -> str:
    return statement.replace("?", "%s")  # constant statements only: no value is ever inlined


class PostgresStore:
    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 8,
        pool_timeout_s: float = POOL_TIMEOUT_S,
        connect_timeout_s: int = CONNECT_TIMEOUT_S,
        migrate_to: int = q.LATEST,
    ) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool, PoolTimeout
        except ImportError:
            raise StoreError(
                "ADVISOR_DATABASE_URL points to PostgreSQL but psycopg or psycopg_pool is not"
                " installed (pip install 'advisor[postgres]')"
            ) from None
        self._psycopg, self._pool_timeout = psycopg, PoolTimeout
        self._size, self._timeout_s = pool_size, pool_timeout_s
        # connections lent out now: a pool timeout with none lent means none can be made
        self._lent, self._lent_lock = 0, threading.Lock()
        # The migration runs on a connection of its own, before the pool: a database that
        # cannot be reached fails here, at once and with the driver's reason.
        try:
            migration = psycopg.connect(url, connect_timeout=connect_timeout_s)
        except psycopg.Error as exc:
            raise StoreUnreachable(f"cannot connect to PostgreSQL: {_safe(exc)}") from None
        with migration:
            self.schema_version = q.migrate(
                lambda: self._transaction(migration), _pg, migrate_to, lock=MIGRATION_LOCK
            )
        self._pool = ConnectionPool(
            url,
            kwargs={"connect_timeout": connect_timeout_s},
            min_size=1,
            max_size=pool_size,
            timeout=pool_timeout_s,
            check=ConnectionPool.check_connection,  # a server restart costs no failed request
            name="advisor",
            open=True,
        )

    @contextlib.contextmanager
    def _transaction(self, conn: Any) -> Iterator[Any]:
        try:
            with conn.transaction(), conn.cursor() as cur:
                yield cur
        except self._psycopg.Error as exc:
            raise self._translated(exc) from None

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        """A transaction on a pooled connection; the pool discards a connection left broken."""
        try:
            with self._pool.connection() as conn, self._lent_one(), self._transaction(conn) as cur:
                yield cur
        except self._pool_timeout:
            if not self._lent:
                # no connection is in use, yet none was free in time: none can be made (the
                # pool retries in the background): the database is down, not busy
                raise StoreUnreachable(
                    f"PostgreSQL unreachable: no connection could be made in {self._timeout_s:g} s"
                ) from None
            raise StoreError(
                f"PostgreSQL: all {self._size} connections stayed busy for {self._timeout_s:g} s"
            ) from None
        except self._psycopg.Error as exc:  # a connection that could not be made
            raise self._translated(exc) from None

    @contextlib.contextmanager
    def _lent_one(self) -> Iterator[None]:
        with self._lent_lock:
            self._lent += 1
        try:
            yield
        finally:
            with self._lent_lock:
                self._lent -= 1

    def _translated(self, exc: Exception) -> StoreError:
        """A psycopg error as the store's: unreachable when the connection itself failed (no
        SQLSTATE: raised by libpq on the client's side; class 08: connection exception; 57P0x:
        the server shutting down or starting), else a failed statement (a full disk, a
        constraint)."""
        state = getattr(exc, "sqlstate", None)
        if isinstance(exc, self._psycopg.OperationalError) and (
            state is None or state.startswith(("08", "57P"))
        ):
            return StoreUnreachable(f"PostgreSQL unreachable: {_safe(exc)}")
        return StoreError(f"PostgreSQL: {_safe(exc)}")

    def add(self, report: ProbeReport, received_at: dt.datetime | None = None) -> StoredReport:
        return q.add(self._tx, _pg, report, received_at, self.schema_version)[0]

    def add_once(
        self,
        report: ProbeReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
        token_id: str | None = None,
    ) -> tuple[StoredReport, bool]:
        return q.add(
            self._tx, _pg, report, received_at, self.schema_version, True, client_key, token_id
        )

    def get(self, report_id: str) -> StoredReport | None:
        return q.get(self._tx, _pg, report_id)

    def query(self, flt: ReportFilter) -> tuple[list[StoredReport], int]:
        return q.list_reports(self._tx, _pg, flt)

    def fleet(self, accelerator: str | None = None, check: str | None = None) -> list[FleetSummary]:
        return q.fleet(self._tx, _pg, accelerator, check, self.schema_version)

    def check_rows_named(self, check: str) -> list[CheckRow]:
        return q.check_rows_named(self._tx, _pg, check, self.schema_version)

    def add_utilisation(
        self, report: UtilisationReport, received_at: dt.datetime | None = None
    ) -> StoredUtilisation:
        return q.add_utilisation(self._tx, _pg, report, received_at, self.schema_version)[0]

    def add_utilisation_once(
        self,
        report: UtilisationReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
    ) -> tuple[StoredUtilisation, bool]:
        return q.add_utilisation(
            self._tx, _pg, report, received_at, self.schema_version, True, client_key
        )

    def get_utilisation(self, report_id: str) -> StoredUtilisation | None:
        return q.get_utilisation(self._tx, _pg, report_id)

    def query_utilisation(
        self, host: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[StoredUtilisation], int]:
        return q.query_utilisation(self._tx, _pg, host, limit, offset)

    def iter_utilisation(self) -> Iterator[StoredUtilisation]:
        return q.iter_utilisation(self._tx, _pg)

    def add_ops(
        self, report: OpsReport, client_key: str | None, received_at: dt.datetime | None = None
    ) -> tuple[str, bool]:
        return q.add_ops(self._tx, _pg, report, received_at, client_key)

    def ops_tables(self, accelerator: str) -> list[OpsReport]:
        return q.ops_tables(self._tx, _pg, accelerator)

    def count(self) -> int:
        return q.count(self._tx, _pg)

    def ping(self) -> None:
        with self._tx() as cur:
            cur.execute("SELECT 1")

    def close(self) -> None:
        self._pool.close()


def _safe(exc: Exception) -> str:
    """The error's first line: psycopg messages never carry the password, the URL is not logged."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
