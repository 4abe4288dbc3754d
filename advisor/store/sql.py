"""The one SQL store: SQLAlchemy Core over SQLite (the default, a file) or PostgreSQL (a fleet).

Every database call goes through one seam, `SqlStore._run`: a transaction on the right engine,
the database's exceptions translated into StoreError / StoreUnreachable, and around it the
service's circuit breaker when one is attached (advisor/store/guard.py). Statements are built
from advisor/store/schema.py; values only ever travel as bound parameters. The schema is
migrated by Alembic when the store opens (advisor/store/migrate.py).

SQLite: WAL journal and synchronous=FULL, so that a committed report survives a crash. Writes
go through one connection, one at a time (SQLite allows one writer; BEGIN IMMEDIATE takes its
lock at the start). Reads use a small pool of other connections: in WAL mode a reader sees the
last commit without taking a lock, so reads neither wait for a write in progress (in this
process or another) nor for one another.

PostgreSQL (psycopg 3): a pool of connections checked before use (a server restart costs no
failed request), short connect and pool-wait timeouts (the service's ADVISOR_DATABASE_TIMEOUT_S),
and a server-side statement_timeout with TCP keepalives and a TCP user timeout, so that a hung
server or a dead link cannot hold a write (and the pool connection under it) for minutes.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.pool import QueuePool

from advisor.fleet.digest import FleetDigest
from advisor.fleet.records import probe_record, report_fields
from advisor.store import aggregates, migrate
from advisor.store.base import (
    FleetSummary,
    HostRatios,
    ReportFilter,
    ReportSummary,
    StoredReport,
    StoredUtilisation,
    StoreError,
    StoreUnreachable,
    UtilisationSummary,
    canonical_json,
    findings_text,
    idempotency_key,
    utilisation_figures,
)
from advisor.store.digest import read_digest
from advisor.store.guard import CircuitBreaker
from advisor.store.schema import ops_reports, probe_reports, utilisation_reports
from probes.ops_table import OpsReport, stored_form
from probes.report import ProbeReport, UtilisationReport

T = TypeVar("T")
# A result row: sa.Row is typed by its columns, which these queries do not spell out
Row = Any
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # fixed width, UTC: text order is time order

# SQLite
BUSY_TIMEOUT_S = 5.0  # how long a statement waits for another connection's lock
READERS = 8  # read connections; a ninth concurrent read waits for one to be free
WRITER_WAIT_S = 60.0  # how long a write waits for the one write connection (writes queue)
# How long an open waits for another process's migration of the same file: revisions that fill
# the aggregates again read every stored report (about 0.7 ms each), and 48 processes opening a
# fresh file together on a loaded 2-core machine took more than BUSY_TIMEOUT_S in turn.
MIGRATION_WAIT_S = 600.0
# PostgreSQL. Seconds to make a connection (libpq rounds values below 2 up to 2) and to wait for
# a free pooled one: the service passes ADVISOR_DATABASE_TIMEOUT_S. A database that is down once
# cost every request 5 s here; the service's circuit breaker then answers the following ones at
# once.
CONNECT_TIMEOUT_S = 2
POOL_TIMEOUT_S = 2.0
POOL_SIZE = 8
# A statement the server has not finished in this long is cancelled by the server (a lock held
# by someone else, a full disk's retries): the write fails as a StoreError instead of holding
# its pooled connection. Fleet summaries and pages of reports take milliseconds.
STATEMENT_TIMEOUT_MS = 30_000
# A server that stops answering without closing the connection (a hung host, a cut link): TCP
# keepalives find an idle link dead after 10 + 3 x 5 s, and the TCP user timeout a link with a
# write in flight after 30 s (the statement timeout cannot: the server is not there to apply it).
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}
ITER_PAGE = 500  # rows per transaction while iterating over every utilisation report
# The newest operator tables read per accelerator for its fleet table: a bound on the read
# (each full table is about 250 kB), many times the hosts of the fleets the service serves.
OPS_TABLES_READ = 2000
# Fleet summaries kept (one per accelerator asked for); all are dropped when a client's
# accelerator words fill the room.
SUMMARIES_KEPT = 64


def format_time(value: dt.datetime) -> str:
    utc = value.astimezone(dt.UTC)
    # strftime's %Y writes year 999 as "999" (glibc), which sorts after "2026": pad it
    return f"{utc.year:04d}" + utc.strftime(TIME_FORMAT.removeprefix("%Y"))


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.strptime(value, TIME_FORMAT).replace(tzinfo=dt.UTC)


# -- engines -----------------------------------------------------------------------------------
def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://"))


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite URL (":memory:" for sqlite://), None for another URL."""
    if url == "sqlite://":
        return ":memory:"
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///") or ":memory:"
    return None


def _pg_connect_args(url: sa.URL, connect_timeout_s: int) -> dict[str, Any]:
    # libpq's options from the URL (a search_path, say) are kept: connect_args would replace them
    options = url.query.get("options", "")
    if not isinstance(options, str):
        options = " ".join(options)
    return {
        "connect_timeout": connect_timeout_s,
        **KEEPALIVES,
        "options": f"{options} -c statement_timeout={STATEMENT_TIMEOUT_MS}".strip(),
    }


def postgres_engine(
    url: str,
    *,
    pool_size: int = POOL_SIZE,
    pool_timeout_s: float = POOL_TIMEOUT_S,
    connect_timeout_s: int = CONNECT_TIMEOUT_S,
) -> sa.Engine:
    parsed = sa.make_url(url).set(drivername="postgresql+psycopg")
    return sa.create_engine(
        parsed.difference_update_query(["options"]),
        poolclass=QueuePool,
        pool_size=pool_size,
        max_overflow=0,
        pool_timeout=pool_timeout_s,
        pool_pre_ping=True,
        connect_args=_pg_connect_args(parsed, connect_timeout_s),
    )


def sqlite_engine(path: str, *, connections: int, begin: str, wait_s: float) -> sa.Engine:
    """An engine of `connections` pooled connections whose transactions start with `begin`."""
    engine = sa.create_engine(
        "sqlite:///" + path,
        poolclass=QueuePool,
        pool_size=connections,
        max_overflow=0,
        pool_timeout=wait_s,
        # timeout= installs SQLite's busy handler inside sqlite3_open, before the first
        # statement: even the PRAGMAs below, and a fresh file's first read of its header, wait
        # for a lock that another process holds instead of failing at once.
        connect_args={"timeout": BUSY_TIMEOUT_S, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # the driver's own transaction handling off: this engine says when a transaction begins
        dbapi_connection.isolation_level = None
        dbapi_connection.execute("PRAGMA synchronous=FULL")
        dbapi_connection.execute("PRAGMA foreign_keys=ON")

    @event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql(begin)

    return engine


def engine_for(url: str) -> sa.Engine:
    """A writing engine for `url` with the store's settings (Alembic's command line)."""
    if is_postgres(url):
        return postgres_engine(url)
    path = sqlite_path(url)
    if path is None:
        raise StoreError(_unsupported(url))
    return sqlite_engine(path, connections=1, begin="BEGIN IMMEDIATE", wait_s=WRITER_WAIT_S)


def _unsupported(url: str) -> str:
    return (
        f"unsupported database URL {url.split(':', 1)[0]!r}: use sqlite:///PATH or postgresql://..."
    )


def _use_wal(engine: sa.Engine) -> None:
    """Switch the file to WAL (stored in the file: once per database). The switch takes an
    exclusive lock without calling the busy handler (SQLite's pager does not wait there), so
    simultaneous first opens of a fresh file retry it until the busy timeout instead."""
    import sqlite3

    deadline = time.monotonic() + BUSY_TIMEOUT_S
    raw = engine.raw_connection()
    try:
        while True:
            try:
                raw.driver_connection.execute("PRAGMA journal_mode=WAL")  # type: ignore[union-attr]
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
    finally:
        raw.close()


def _set_busy_timeout(engine: sa.Engine, seconds: float) -> None:
    """How long the statements of `engine`'s one pooled connection wait for another's lock."""
    raw = engine.raw_connection()
    try:
        raw.driver_connection.execute(f"PRAGMA busy_timeout={int(seconds * 1000)}")  # type: ignore[union-attr]
    finally:
        raw.close()


def _first_line(exc: BaseException) -> str:
    """The error's first line: driver messages never carry the password, the URL is not logged."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# -- the store ---------------------------------------------------------------------------------
class SqlStore:
    """advisor.store.base.Store on SQLite or PostgreSQL (see the module)."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = POOL_SIZE,
        pool_timeout_s: float = POOL_TIMEOUT_S,
        connect_timeout_s: int = CONNECT_TIMEOUT_S,
        readers: int = READERS,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.breaker = breaker
        self._closed = False
        self._postgres = is_postgres(url)
        self.path: str | None = None  # the SQLite file (free space for /readyz); None otherwise
        if self._postgres:
            self._kind, self._pool_size, self._pool_timeout_s = (
                "PostgreSQL",
                pool_size,
                pool_timeout_s,
            )
            self._writer = self._reader = postgres_engine(
                url,
                pool_size=pool_size,
                pool_timeout_s=pool_timeout_s,
                connect_timeout_s=connect_timeout_s,
            )
        else:
            path = sqlite_path(url)
            if path is None:
                raise StoreError(_unsupported(url))
            self._kind, self._pool_size, self._pool_timeout_s = "SQLite", readers, BUSY_TIMEOUT_S
            self.path = path
            self._writer, self._reader = self._sqlite_engines(path, readers)
        self.revision = self._migrate()
        # fleet summaries by accelerator asked (None: all), with the count of reports they hold
        # (accelerator, check) -> (reports counted, the summary)
        self._summaries: dict[tuple[str | None, str | None], tuple[int, list[FleetSummary]]] = {}
        self._summaries_lock = threading.Lock()

    def _sqlite_engines(self, path: str, readers: int) -> tuple[sa.Engine, sa.Engine]:
        writer = sqlite_engine(path, connections=1, begin="BEGIN IMMEDIATE", wait_s=WRITER_WAIT_S)
        if path == ":memory:":  # each connection to :memory: is a database of its own
            return writer, writer
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            _use_wal(writer)
        except (sa_exc.DBAPIError, OSError) as exc:
            writer.dispose()
            raise StoreError(f"cannot open SQLite database {path!r}: {_first_line(exc)}") from None
        except Exception as exc:  # sqlite3's own error, raised by the switch to WAL
            writer.dispose()
            raise StoreError(f"cannot open SQLite database {path!r}: {exc}") from None
        reader = sqlite_engine(path, connections=readers, begin="BEGIN", wait_s=BUSY_TIMEOUT_S)
        return writer, reader

    def _migrate(self) -> str:
        migrate.head()  # read before the lock is taken: the others wait while it is held
        try:
            if self._postgres or self.path == ":memory:":
                return self._transaction(migrate.upgrade, write=True)
            _set_busy_timeout(self._writer, MIGRATION_WAIT_S)
            reached = self._transaction(migrate.upgrade, write=True)
            _set_busy_timeout(self._writer, BUSY_TIMEOUT_S)
            return reached
        except StoreError as exc:
            self.close()
            if self._postgres:
                raise StoreUnreachable(f"cannot connect to PostgreSQL: {exc}") from None
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from None

    # -- the one seam --------------------------------------------------------------------------
    def _run(self, work: Callable[[sa.Connection], T], *, write: bool) -> T:
        """Every call of the store: `work` in one transaction, through the breaker if any."""
        if self.breaker is None:
            return self._transaction(work, write=write)
        return self.breaker.call(lambda: self._transaction(work, write=write), write=write)

    def _transaction(self, work: Callable[[sa.Connection], T], *, write: bool) -> T:
        if self._closed:
            raise StoreError(f"{self._kind}: the store is closed")
        engine = self._writer if write else self._reader
        try:
            with engine.begin() as conn:  # committed at the end, rolled back on any exception
                return work(conn)
        except sa_exc.TimeoutError:
            raise self._pool_timeout(engine) from None
        except sa_exc.DBAPIError as exc:
            raise self._translated(exc) from None
        except sa_exc.SQLAlchemyError as exc:
            raise StoreError(f"{self._kind}: {_first_line(exc)}") from None

    def _pool_timeout(self, engine: sa.Engine) -> StoreError:
        which = "read connections" if engine is not self._writer or self._postgres else "writer"
        if self._postgres and not engine.pool.checkedout():  # type: ignore[attr-defined]
            # none in use, yet none could be had in time: none can be made
            return StoreUnreachable(
                f"PostgreSQL unreachable: no connection could be made in {self._pool_timeout_s:g} s"
            )
        size = self._pool_size if which != "writer" else 1
        noun = "connections" if self._postgres else which
        return StoreError(
            f"{self._kind}: all {size} {noun} stayed busy for {self._pool_timeout_s:g} s"
        )

    def _translated(self, exc: sa_exc.DBAPIError) -> StoreError:
        """A driver error as the store's: unreachable when the connection itself failed (no
        SQLSTATE: raised by libpq on the client's side; class 08: connection exception; 57P0x:
        the server shutting down or starting), else a failed statement (a full disk, a
        constraint, the statement timeout: 57014)."""
        orig = exc.orig if exc.orig is not None else exc
        if not self._postgres:
            return StoreError(f"SQLite: {_first_line(orig)}")
        state = getattr(orig, "sqlstate", None)
        if exc.connection_invalidated or (
            isinstance(exc, sa_exc.OperationalError)
            and (state is None or state.startswith(("08", "57P")))
        ):
            return StoreUnreachable(f"PostgreSQL unreachable: {_first_line(orig)}")
        return StoreError(f"PostgreSQL: {_first_line(orig)}")

    def _insert(self, table: sa.Table) -> Any:
        """INSERT for this database, with its ON CONFLICT clause."""
        return (postgresql if self._postgres else sqlite).insert(table)

    def _insert_once(
        self,
        conn: sa.Connection,
        table: sa.Table,
        row: dict[str, Any],
        key: str | None,
        returned: Sequence[str] | None = None,
    ) -> Row | None:
        """Insert `row` unless a row is stored under `key` already: None when inserted, else the
        stored row's `returned` columns (default: `row`'s). The unique index decides, inside the
        caller's transaction, so that simultaneous posts with one key store one row on either
        database; a None key (always store) never collides."""
        if key is None:
            conn.execute(sa.insert(table).values(**row))
            return None
        stmt = (
            self._insert(table)
            .values(**row, idempotency_key=key)
            .on_conflict_do_nothing(index_elements=["idempotency_key"])
            # RETURNING says whether it was inserted (a rowcount is not: psycopg's is -1 here)
            .returning(table.c.id)
        )
        if conn.execute(stmt).first() is not None:
            return None
        columns = [table.c[name] for name in (row if returned is None else returned)]
        return conn.execute(sa.select(*columns).where(table.c.idempotency_key == key)).one()

    # -- probe reports -------------------------------------------------------------------------
    def add(self, report: ProbeReport, received_at: dt.datetime | None = None) -> StoredReport:
        return self._add(report=report, received_at=received_at, once=False)[0]

    def add_once(
        self,
        report: ProbeReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
        token_id: str | None = None,
    ) -> tuple[StoredReport, bool]:
        return self._add(
            report=report,
            received_at=received_at,
            once=True,
            client_key=client_key,
            token_id=token_id,
        )

    def _add(
        self,
        *,
        report: ProbeReport,
        received_at: dt.datetime | None,
        once: bool,
        client_key: str | None = None,
        token_id: str | None = None,
    ) -> tuple[StoredReport, bool]:
        """Store `report` unless `once` and a report with its idempotency key (the client's key
        and the content) is stored already: (the stored report, whether it was stored now).
        `token_id`: the write token's (advisor.store.base.token_id), kept with the report."""
        report_id = uuid.uuid4().hex
        when = format_time(received_at or dt.datetime.now(dt.UTC))
        host, accelerator, verdict = report_fields(report)
        body = report.model_dump(mode="json")
        text = canonical_json(body)
        row = {
            "id": report_id,
            "received_at": when,
            "host": host,
            "accelerator": accelerator,
            "verdict": verdict,
            "body": text,
            "token_id": token_id,
        }
        key = idempotency_key(text, client_key) if once else None
        # what the report adds to the aggregates (computed outside the transaction: it holds
        # the aggregate rows' locks only for the upserts)
        record = probe_record(report_id, report)
        delta = aggregates.report_deltas(record, report, token_id)

        def work(conn: sa.Connection) -> Row | None:
            # one transaction: the report and the aggregates, or nothing
            stored = self._insert_once(conn, probe_reports, row, key, _REPORT_COLUMNS)
            if stored is None:
                aggregates.apply(conn, delta)
            return stored

        stored = self._run(work, write=True)
        if stored is not None:
            return _report(stored), False
        return StoredReport(report_id, parse_time(when), host, accelerator, verdict, body), True

    def get(self, report_id: str) -> StoredReport | None:
        stmt = _REPORT_SELECT.where(probe_reports.c.id == report_id)
        row = self._run(lambda conn: conn.execute(stmt).first(), write=False)
        return _report(row) if row else None

    def query(self, flt: ReportFilter) -> tuple[list[StoredReport], int]:
        rows, total = self._page(_REPORT_SELECT, flt)
        return [_report(r) for r in rows], total

    def summaries(self, flt: ReportFilter) -> tuple[list[ReportSummary], int]:
        rows, total = self._page(_SUMMARY_SELECT, flt)
        return [ReportSummary(i, parse_time(at), h, a, v) for i, at, h, a, v in rows], total

    def _page(self, select: sa.Select[Any], flt: ReportFilter) -> tuple[Sequence[Row], int]:
        """The rows of `select` that `flt` keeps, newest first, and their total."""
        where = _report_filter(flt)
        count = sa.select(sa.func.count()).select_from(probe_reports).where(*where)
        page = (
            select.where(*where)
            .order_by(probe_reports.c.received_at.desc(), probe_reports.c.id.desc())
            .limit(flt.limit)
            .offset(flt.offset)
        )

        def work(conn: sa.Connection) -> tuple[Sequence[Row], int]:
            return conn.execute(page).all(), int(conn.execute(count).scalar_one())

        return self._run(work, write=False)

    def fleet(self, accelerator: str | None = None, check: str | None = None) -> list[FleetSummary]:
        """The summary from the aggregates (advisor/store/aggregates.py: a few thousand rows at
        any fleet size), whole or one check's."""
        return list(self._run(lambda conn: self._summary(conn, accelerator, check), write=False))

    def _summary(
        self, conn: sa.Connection, accelerator: str | None, check: str | None = None
    ) -> list[FleetSummary]:
        """The summary built once for each count of stored reports: every write adds one report
        to the aggregates in its transaction, and nothing removes one, so an unchanged count is
        an unchanged summary. The count is read before the aggregates: a report committed in
        between is in the summary kept under the older count, which the next read replaces."""
        stored = aggregates.reports_counted(conn)
        with self._summaries_lock:
            kept = self._summaries.get((accelerator, check))
        if kept is not None and kept[0] == stored:
            return kept[1]
        found = aggregates.summaries(conn, accelerator, check)
        with self._summaries_lock:
            if len(self._summaries) >= SUMMARIES_KEPT:  # both are a client's words
                self._summaries.clear()
            self._summaries[(accelerator, check)] = (stored, found)
        return found

    def host_ratios(self, check: str) -> list[HostRatios]:
        """From the aggregates (advisor/store/aggregates.py: the check's per-host histogram and
        its tokens), not the check's rows: a fleet's 240,000 runs of a check cost 2.3 s and
        200 MB to read as rows at 30,000 node reports. Each ratio is exact where it is a
        bucket's lowest or highest, else within aggregates.RATIO_STEP (as the summary's vote)."""
        return self._run(lambda conn: aggregates.host_ratios(conn, check), write=False)

    def count(self) -> int:
        stmt = sa.select(sa.func.count()).select_from(probe_reports)
        return int(self._run(lambda conn: conn.execute(stmt).scalar_one(), write=False))

    # -- utilisation reports -------------------------------------------------------------------
    def add_utilisation(
        self, report: UtilisationReport, received_at: dt.datetime | None = None
    ) -> StoredUtilisation:
        return self._add_utilisation(report=report, received_at=received_at, once=False)[0]

    def add_utilisation_once(
        self,
        report: UtilisationReport,
        client_key: str | None,
        received_at: dt.datetime | None = None,
    ) -> tuple[StoredUtilisation, bool]:
        return self._add_utilisation(
            report=report, received_at=received_at, once=True, client_key=client_key
        )

    def _add_utilisation(
        self,
        *,
        report: UtilisationReport,
        received_at: dt.datetime | None,
        once: bool,
        client_key: str | None = None,
    ) -> tuple[StoredUtilisation, bool]:
        report_id = uuid.uuid4().hex
        when = format_time(received_at or dt.datetime.now(dt.UTC))
        body = report.model_dump(mode="json")
        text = canonical_json(body)
        instance_type, gpus, findings = utilisation_figures(body)
        row = {
            "id": report_id,
            "received_at": when,
            "host": report.host,
            "body": text,
            "instance_type": instance_type,
            "gpu_count": gpus,
            "findings": findings_text(findings),
        }
        key = idempotency_key(text, client_key) if once else None
        stored = self._run(
            lambda conn: self._insert_once(
                conn, utilisation_reports, row, key, _UTILISATION_COLUMNS
            ),
            write=True,
        )
        if stored is not None:
            return _utilisation(stored), False
        when_at = parse_time(when)
        return StoredUtilisation(
            report_id, when_at, report.host, instance_type, gpus, findings, body
        ), True

    def get_utilisation(self, report_id: str) -> StoredUtilisation | None:
        stmt = _UTILISATION_SELECT.where(utilisation_reports.c.id == report_id)
        row = self._run(lambda conn: conn.execute(stmt).first(), write=False)
        return _utilisation(row) if row else None

    def query_utilisation(
        self, host: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[UtilisationSummary], int]:
        where = [] if host is None else [utilisation_reports.c.host == host]
        count = sa.select(sa.func.count()).select_from(utilisation_reports).where(*where)
        page = (
            _UTILISATION_SUMMARY_SELECT.where(*where)
            .order_by(utilisation_reports.c.received_at.desc(), utilisation_reports.c.id.desc())
            .limit(limit)
            .offset(offset)
        )

        def work(conn: sa.Connection) -> tuple[Sequence[Row], int]:
            return conn.execute(page).all(), int(conn.execute(count).scalar_one())

        rows, total = self._run(work, write=False)
        return [_utilisation_summary(r) for r in rows], total

    def iter_utilisation(self) -> Iterator[StoredUtilisation]:
        return (_utilisation(row) for row in self._pages(_UTILISATION_SELECT, utilisation_reports))

    def fleet_digest(self) -> FleetDigest:
        """The review's digest of every probe report, from the aggregates (advisor/store/
        digest.py) and the summary, in one transaction: a consistent snapshot."""
        return self._run(lambda conn: read_digest(conn, self._summary(conn, None)), write=False)

    def _pages(self, select: sa.Select[Any], table: sa.Table) -> Iterator[Row]:
        """The rows of `select` over `table`, oldest first, a page per transaction (keyset
        pagination on received_at and id): no lock or cursor is held while the caller works on
        a row, so it may use the store too, and rows stored meanwhile neither repeat nor shift
        a page."""
        t = table.c
        after = ("", "")
        while True:
            stmt = (
                select.where(
                    sa.or_(
                        t.received_at > after[0],
                        sa.and_(t.received_at == after[0], t.id > after[1]),
                    )
                )
                .order_by(t.received_at, t.id)
                .limit(ITER_PAGE)
            )
            rows = self._run(_all(stmt), write=False)
            yield from rows
            if len(rows) < ITER_PAGE:
                return
            after = (rows[-1].received_at, rows[-1].id)

    # -- operator tables -----------------------------------------------------------------------
    def add_ops(
        self, report: OpsReport, client_key: str | None, received_at: dt.datetime | None = None
    ) -> tuple[str, bool]:
        """Store an operator table once per idempotency key: (its id, whether stored now)."""
        report_id = uuid.uuid4().hex
        text = canonical_json(stored_form(report))
        row = {
            "id": report_id,
            "received_at": format_time(received_at or dt.datetime.now(dt.UTC)),
            "host": report.host,
            "accelerator": report.table.accelerator,
            "body": text,
        }
        key = idempotency_key(text, client_key)
        stored = self._run(lambda conn: self._insert_once(conn, ops_reports, row, key), write=True)
        return (str(stored.id), False) if stored is not None else (report_id, True)

    def ops_tables(self, accelerator: str) -> list[OpsReport]:
        """The newest OPS_TABLES_READ operator tables of one accelerator, newest first."""
        t = ops_reports.c
        stmt = (
            sa.select(t.body)
            .where(t.accelerator == accelerator)
            .order_by(t.received_at.desc(), t.id.desc())
            .limit(OPS_TABLES_READ)
        )
        bodies = self._run(lambda conn: conn.execute(stmt).scalars().all(), write=False)
        return [OpsReport.model_validate_json(body) for body in bodies]

    def ops_tables_count(self, accelerator: str) -> int:
        t = ops_reports.c
        stmt = (
            sa.select(sa.func.count()).select_from(ops_reports).where(t.accelerator == accelerator)
        )
        return int(self._run(lambda conn: conn.execute(stmt).scalar_one(), write=False))

    # -- the rest ------------------------------------------------------------------------------
    def ping(self) -> None:
        self._run(lambda conn: conn.exec_driver_sql("SELECT 1").all(), write=False)

    def close(self) -> None:
        self._closed = True
        self._writer.dispose()
        if self._reader is not self._writer:
            self._reader.dispose()


_REPORT_COLUMNS = ("id", "received_at", "host", "accelerator", "verdict", "body")  # _report's
_REPORT_SELECT = sa.select(*(probe_reports.c[name] for name in _REPORT_COLUMNS))
_SUMMARY_SELECT = sa.select(*(probe_reports.c[name] for name in _REPORT_COLUMNS[:-1]))
_UTILISATION_SUMMARY_SELECT = sa.select(
    utilisation_reports.c.id,
    utilisation_reports.c.received_at,
    utilisation_reports.c.host,
    utilisation_reports.c.instance_type,
    utilisation_reports.c.gpu_count,
    utilisation_reports.c.findings,
)
_UTILISATION_SELECT = _UTILISATION_SUMMARY_SELECT.add_columns(utilisation_reports.c.body)
_UTILISATION_COLUMNS = tuple(c.name for c in _UTILISATION_SELECT.selected_columns)


def _report_filter(flt: ReportFilter) -> list[sa.ColumnElement[bool]]:
    t = probe_reports.c
    where = [
        column == value
        for column, value in (
            (t.host, flt.host),
            (t.accelerator, flt.accelerator),
            (t.verdict, flt.verdict),
        )
        if value is not None
    ]
    if flt.since is not None:
        where.append(t.received_at >= format_time(flt.since))
    if flt.until is not None:
        where.append(t.received_at < format_time(flt.until))
    return where


def _all(stmt: sa.Select[Any]) -> Callable[[sa.Connection], Sequence[Row]]:
    return lambda conn: conn.execute(stmt).all()


def _report(row: Row) -> StoredReport:
    report_id, received_at, host, accelerator, verdict, body = row
    return StoredReport(
        report_id, parse_time(received_at), host, accelerator, verdict, json.loads(body)
    )


def _utilisation_summary(row: Row) -> UtilisationSummary:
    report_id, received_at, host, instance_type, gpus, findings = row
    return UtilisationSummary(
        report_id, parse_time(received_at), host, instance_type, gpus, json.loads(findings)
    )


def _utilisation(row: Row) -> StoredUtilisation:
    *summary, body = row
    return StoredUtilisation(**vars(_utilisation_summary(summary)), report=json.loads(body))
