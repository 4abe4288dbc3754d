"""SQLite adapter: WAL journal, synchronous=FULL so that a committed report survives a crash."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from advisor.store import sql as q
from advisor.store.base import (
    FleetSummary,
    ReportFilter,
    StoredReport,
    StoredUtilisation,
    StoreError,
)


def _same(statement: str) -> str:
    return statement


class SqliteStore:
    def __init__(self, path: str, *, migrate_to: int = q.LATEST) -> None:
        self.path = path
        try:
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            # One connection shared by the server's threads, serialised by a lock: SQLite
            # serialises writers anyway, and this keeps every transaction explicit.
            self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA busy_timeout=5000")
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open SQLite database {path!r}: {exc}") from None
        self._lock = threading.Lock()
        self.schema_version = q.migrate(self._tx, _same, migrate_to)

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._lock:
            try:
                cur = self._conn.cursor()  # fails too when the connection is gone
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite: {exc}") from None
            try:
                cur.execute("BEGIN IMMEDIATE")
                yield cur
                cur.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    cur.execute("ROLLBACK")
                raise StoreError(f"SQLite: {exc}") from None
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    cur.execute("ROLLBACK")
                raise
            finally:
                cur.close()

    def add(self, report: dict[str, Any], received_at: dt.datetime | None = None) -> StoredReport:
        return q.add(self._tx, _same, report, received_at, self.schema_version)

    def get(self, report_id: str) -> StoredReport | None:
        return q.get(self._tx, _same, report_id)

    def query(self, flt: ReportFilter) -> tuple[list[StoredReport], int]:
        return q.list_reports(self._tx, _same, flt)

    def fleet(self, accelerator: str | None = None) -> list[FleetSummary]:
        return q.fleet(self._tx, _same, accelerator)

    def add_utilisation(
        self, report: dict[str, Any], received_at: dt.datetime | None = None
    ) -> StoredUtilisation:
        return q.add_utilisation(self._tx, _same, report, received_at)

    def get_utilisation(self, report_id: str) -> StoredUtilisation | None:
        return q.get_utilisation(self._tx, _same, report_id)

    def query_utilisation(
        self, host: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[StoredUtilisation], int]:
        return q.query_utilisation(self._tx, _same, host, limit, offset)

    def iter_utilisation(self) -> Iterator[StoredUtilisation]:
        return q.iter_utilisation(self._tx, _same)

    def count(self) -> int:
        return q.count(self._tx, _same)

    def ping(self) -> None:
        with self._tx() as cur:
            cur.execute("SELECT 1")

    def close(self) -> None:
        with self._lock:
            self._conn.close()
