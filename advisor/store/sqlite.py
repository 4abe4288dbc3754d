"""SQLite adapter: WAL journal, synchronous=FULL so that a committed report survives a crash.

Writes go through one connection, one at a time (SQLite allows one writer). Reads use a small
pool of other connections: in WAL mode a reader sees the last commit without taking a lock, so
reads neither wait for a write in progress (in this process or another) nor for one another.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from advisor.store import sql as q
from advisor.store.base import (
    CheckRow,
    FleetSummary,
    ReportFilter,
    StoredReport,
    StoredUtilisation,
    StoreError,
)
from probes.ops_table import OpsReport
from probes.report import ProbeReport, UtilisationReport

BUSY_TIMEOUT_S = 5.0  # how long a statement waits for another connection's lock
READERS = 8  # read connections; a ninth concurrent read waits for one to be free


def _same(statement: str) -> str:
    return statement


def _connect(path: str) -> sqlite3.Connection:
    # timeout= installs SQLite's busy handler inside sqlite3_open, before the first statement:
    # even the PRAGMAs below, and a fresh file's first read of its header, wait for a lock that
    # another process holds instead of failing at once.
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None
    )
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL (stored in the file: once per database). The switch takes an
    exclusive lock without calling the busy handler (SQLite's pager does not wait there), so
    simultaneous first opens of a fresh file retry it until the busy timeout instead."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


class SqliteStore:
    def __init__(self, path: str, *, migrate_to: int = q.LATEST, readers: int = READERS) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._readers: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._reader_count = 0 if path == ":memory:" else readers
        opened: list[sqlite3.Connection] = []
        try:
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            opened.append(_connect(path))
            _use_wal(opened[0])
            # (each connection to :memory: is a database of its own: there, reads use the writer)
            opened += [_connect(path) for _ in range(self._reader_count)]
        except (sqlite3.Error, OSError) as exc:
            for conn in opened:
                conn.close()
            raise StoreError(f"cannot open SQLite database {path!r}: {exc}") from None
        self._conn = opened[0]
        for conn in opened[1:]:
            self._readers.put(conn)
        # BEGIN IMMEDIATE takes SQLite's write lock: the migration is one locked step.
        self.schema_version = q.migrate(self._tx, _same, migrate_to)

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        """A write transaction on the one write connection."""
        with self._lock, _transaction(self._conn, "BEGIN IMMEDIATE") as cur:
            yield cur

    @contextlib.contextmanager
    def _read(self) -> Iterator[Any]:
        """A read transaction (one snapshot for its statements) on a pooled read connection."""
        if not self._reader_count:
            with self._tx() as cur:
                yield cur
            return
        try:
            conn = self._readers.get(timeout=BUSY_TIMEOUT_S)
        except queue.Empty:
            raise StoreError(
                f"SQLite: all {self._reader_count} read connections stayed busy"
                f" for {BUSY_TIMEOUT_S:g} s"
            ) from None
        try:
            with _transaction(conn, "BEGIN") as cur:
                yield cur
        finally:
            self._readers.put(conn)

    def add(self, report: ProbeReport, received_at: dt.datetime | None = None) -> StoredReport:
        return q.add(self._tx, _same, report, received_at, self.schema_version)[0]

    def add_once(
        self,
        report: ProbeReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
        token_id: str | None = None,
    ) -> tuple[StoredReport, bool]:
        return q.add(
            self._tx, _same, report, received_at, self.schema_version, True, client_key, token_id
        )

    def get(self, report_id: str) -> StoredReport | None:
        return q.get(self._read, _same, report_id)

    def query(self, flt: ReportFilter) -> tuple[list[StoredReport], int]:
        return q.list_reports(self._read, _same, flt)

    def fleet(self, accelerator: str | None = None, check: str | None = None) -> list[FleetSummary]:
        return q.fleet(self._read, _same, accelerator, check, self.schema_version)

    def check_rows_named(self, check: str) -> list[CheckRow]:
        return q.check_rows_named(self._read, _same, check, self.schema_version)

    def add_utilisation(
        self, report: UtilisationReport, received_at: dt.datetime | None = None
    ) -> StoredUtilisation:
        return q.add_utilisation(self._tx, _same, report, received_at, self.schema_version)[0]

    def add_utilisation_once(
        self,
        report: UtilisationReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
    ) -> tuple[StoredUtilisation, bool]:
        return q.add_utilisation(
            self._tx, _same, report, received_at, self.schema_version, True, client_key
        )

    def get_utilisation(self, report_id: str) -> StoredUtilisation | None:
        return q.get_utilisation(self._read, _same, report_id)

    def query_utilisation(
        self, host: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[StoredUtilisation], int]:
        return q.query_utilisation(self._read, _same, host, limit, offset)

    def iter_utilisation(self) -> Iterator[StoredUtilisation]:
        return q.iter_utilisation(self._read, _same)

    def add_ops(
        self, report: OpsReport, client_key: str | None, received_at: dt.datetime | None = None
    ) -> tuple[str, bool]:
        return q.add_ops(self._tx, _same, report, received_at, client_key)

    def ops_tables(self, accelerator: str) -> list[OpsReport]:
        return q.ops_tables(self._read, _same, accelerator)

    def count(self) -> int:
        return q.count(self._read, _same)

    def ping(self) -> None:
        with self._read() as cur:
            cur.execute("SELECT 1")

    def close(self) -> None:
        while True:
            try:
                self._readers.get_nowait().close()
            except queue.Empty:
                break
        with self._lock:
            self._conn.close()


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection, begin: str) -> Iterator[Any]:
    """`begin` ... COMMIT, rolled back on any exception; sqlite3's errors become StoreError."""
    try:
        cur = conn.cursor()  # fails too when the connection is gone
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite: {exc}") from None
    try:
        cur.execute(begin)
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
