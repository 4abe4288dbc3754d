"""Shared SQL store logic for SQLite and PostgreSQL: schema migrations, queries, row mapping.

Every statement is a constant string with placeholders; values are bound parameters only.
Placeholders are written `?` and turned into `%s` for PostgreSQL by the adapter.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

from advisor.store.base import (
    CheckRow,
    FleetSummary,
    ReportFilter,
    StoredReport,
    StoredUtilisation,
    canonical_json,
    check_rows,
    idempotency_key,
    report_fields,
    summarize_fleet,
)
from probes.ops_table import OpsReport
from probes.report import ProbeReport, UtilisationReport

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # fixed width, UTC: text order is time order

Cursor = Any
Transaction = Callable[[], AbstractContextManager[Cursor]]
Sql = Callable[[str], str]  # a constant statement in this module's dialect -> the database's
# A migration statement, or a function of the migration's cursor for what one statement cannot
# say on both databases (a data migration, a column added only where it is missing).
Step = str | Callable[[Cursor, Sql], None]


def _backfill_checks(cur: Cursor, sql: Sql) -> None:
    """Step 2's data: the check rows of the reports stored before it."""
    cur.execute(sql("SELECT id, body FROM probe_reports"))
    for report_id, body in cur.fetchall():
        rows = check_rows(report_id, ProbeReport.model_validate_json(body))
        _insert_checks(cur, sql, rows, schema_version=2)  # (no token_id column yet)


def _utilisation_key_column(cur: Cursor, sql: Sql) -> None:
    """Step 5's column, unless the table has it already: a utilisation table that outlived the
    probe tables (step 3's IF NOT EXISTS) went through step 5 before. (SQLite has no ADD COLUMN
    IF NOT EXISTS; a cursor's description names the columns on both databases.)"""
    cur.execute(sql("SELECT * FROM utilisation_reports LIMIT 0"))
    if "idempotency_key" not in {column[0] for column in cur.description}:
        cur.execute(sql("ALTER TABLE utilisation_reports ADD COLUMN idempotency_key TEXT"))


# (version, steps). Never edit a released step: add a new one.
MIGRATIONS: list[tuple[int, list[Step]]] = [
    (
        1,
        [
            "CREATE TABLE probe_reports ("
            " id TEXT PRIMARY KEY, received_at TEXT NOT NULL, host TEXT NOT NULL,"
            " accelerator TEXT, verdict TEXT NOT NULL, body TEXT NOT NULL)",
            "CREATE INDEX probe_reports_received ON probe_reports (received_at, id)",
            "CREATE INDEX probe_reports_host ON probe_reports (host)",
        ],
    ),
    (
        2,
        [
            "CREATE TABLE probe_checks ("
            " report_id TEXT NOT NULL REFERENCES probe_reports (id), host TEXT NOT NULL,"
            " accelerator TEXT, name TEXT NOT NULL, status TEXT NOT NULL,"
            " measured DOUBLE PRECISION, expected DOUBLE PRECISION)",
            "CREATE INDEX probe_checks_accelerator ON probe_checks (accelerator, name)",
            _backfill_checks,
        ],
    ),
    (
        3,
        [
            # IF NOT EXISTS: a test or an operator that drops only the probe tables and migrates
            # again must not trip over a utilisation table that outlived them.
            "CREATE TABLE IF NOT EXISTS utilisation_reports ("
            " id TEXT PRIMARY KEY, received_at TEXT NOT NULL, host TEXT NOT NULL,"
            " body TEXT NOT NULL)",
            "CREATE INDEX IF NOT EXISTS utilisation_reports_received"
            " ON utilisation_reports (received_at, id)",
            "CREATE INDEX IF NOT EXISTS utilisation_reports_host ON utilisation_reports (host)",
        ],
    ),
    (
        4,
        [
            # The client's Idempotency-Key (or the content digest): a report is stored once.
            # Older rows have none; NULLs never collide in a unique index.
            "ALTER TABLE probe_reports ADD COLUMN idempotency_key TEXT",
            "CREATE UNIQUE INDEX probe_reports_idempotency ON probe_reports (idempotency_key)",
        ],
    ),
    (
        5,
        [
            # The same for utilisation reports (IF NOT EXISTS: see _utilisation_key_column).
            _utilisation_key_column,
            "CREATE UNIQUE INDEX IF NOT EXISTS utilisation_reports_idempotency"
            " ON utilisation_reports (idempotency_key)",
        ],
    ),
    (
        6,
        [
            # Operator tables posted by `advisor probe --ops --report-to`: the fleet's table
            # per accelerator is voted from them (advisor/fleet/ops_tables.py).
            "CREATE TABLE IF NOT EXISTS ops_reports ("
            " id TEXT PRIMARY KEY, received_at TEXT NOT NULL, host TEXT NOT NULL,"
            " accelerator TEXT, body TEXT NOT NULL, idempotency_key TEXT)",
            "CREATE INDEX IF NOT EXISTS ops_reports_accelerator"
            " ON ops_reports (accelerator, received_at)",
            "CREATE UNIQUE INDEX IF NOT EXISTS ops_reports_idempotency"
            " ON ops_reports (idempotency_key)",
        ],
    ),
    (
        7,
        [
            # Which write token stored each check (advisor.store.base.token_id, a digest): the
            # fleet calibration counts distinct tokens beside distinct hosts.
            "ALTER TABLE probe_checks ADD COLUMN token_id TEXT",
        ],
    ),
]
IDEMPOTENCY_VERSION = 4  # probe reports have idempotency keys from this step on
UTILISATION_IDEMPOTENCY_VERSION = 5  # utilisation reports from this one
OPS_VERSION = 6  # operator tables are stored from this step on
TOKEN_ID_VERSION = 7  # check rows say which write token stored them from this one
LATEST = MIGRATIONS[-1][0]


def format_time(value: dt.datetime) -> str:
    utc = value.astimezone(dt.UTC)
    # strftime's %Y writes year 999 as "999" (glibc), which sorts after "2026": pad it
    return f"{utc.year:04d}" + utc.strftime(TIME_FORMAT.removeprefix("%Y"))


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.strptime(value, TIME_FORMAT).replace(tzinfo=dt.UTC)


def migrate(tx: Transaction, sql: Sql, upto: int = LATEST, lock: str | None = None) -> int:
    """Bring the schema to `upto` in one transaction, holding a lock that every other migrating
    process waits for (`lock`: a statement that takes it, for a database whose transactions do
    not lock by themselves); returns the version reached. The version is read under the lock, so
    servers started together run each step once: the first one migrates, the others find the
    schema done. One transaction also means a crash mid-way leaves the previous version."""
    with tx() as cur:
        if lock is not None:
            cur.execute(sql(lock))
        cur.execute(sql("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"))
        cur.execute(sql("SELECT MAX(version) FROM schema_version"))
        row = cur.fetchone()
        current = row[0] if row and row[0] is not None else 0
        for version, steps in MIGRATIONS:
            if version <= current or version > upto:
                continue
            for step in steps:
                if callable(step):
                    step(cur, sql)
                else:
                    cur.execute(sql(step))
            cur.execute(sql("INSERT INTO schema_version (version) VALUES (?)"), (version,))
            current = version
    return int(current)


def _insert_checks(
    cur: Cursor, sql: Sql, rows: Sequence[CheckRow], schema_version: int = LATEST
) -> None:
    if not rows:
        return
    values = [
        (r.report_id, r.host, r.accelerator, r.name, r.status, r.measured, r.expected) for r in rows
    ]
    if schema_version >= TOKEN_ID_VERSION:
        cur.executemany(
            sql(
                "INSERT INTO probe_checks (report_id, host, accelerator, name, status, measured,"
                " expected, token_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            [(*v, r.token_id) for v, r in zip(values, rows, strict=True)],
        )
        return
    cur.executemany(
        sql(
            "INSERT INTO probe_checks (report_id, host, accelerator, name, status, measured,"
            " expected) VALUES (?, ?, ?, ?, ?, ?, ?)"
        ),
        values,
    )


_REPORT_COLUMNS = "SELECT id, received_at, host, accelerator, verdict, body FROM probe_reports"


class KeyedInsert(NamedTuple):
    """The statements that store a row of one table once per idempotency key."""

    plain: str  # without the key column (a database migrated only part of the way)
    keyed: str  # with it: ... ON CONFLICT (idempotency_key) DO NOTHING
    lookup: str  # the row stored under a key


def _insert_once(
    cur: Cursor, sql: Sql, insert: KeyedInsert, row: tuple[Any, ...], key: str | None, keyed: bool
) -> Any | None:
    """Insert `row` unless a row is stored under `key` already: None when inserted, else the
    stored row. `keyed` False (the table has no key column yet): always inserted. The unique
    index decides, inside the caller's transaction, so that simultaneous posts with one key
    store one row on either database; a NULL key (always store) never collides."""
    if not keyed:
        cur.execute(sql(insert.plain), row)
        return None
    cur.execute(sql(insert.keyed), (*row, key))
    if cur.rowcount:
        return None
    cur.execute(sql(insert.lookup), (key,))  # the key is taken: the row stored under it
    return cur.fetchone()


_INSERT_REPORT = KeyedInsert(
    "INSERT INTO probe_reports (id, received_at, host, accelerator, verdict, body)"
    " VALUES (?, ?, ?, ?, ?, ?)",
    "INSERT INTO probe_reports"
    " (id, received_at, host, accelerator, verdict, body, idempotency_key)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING",
    _REPORT_COLUMNS + " WHERE idempotency_key = ?",
)


def add(
    tx: Transaction,
    sql: Sql,
    report: ProbeReport,
    received_at: dt.datetime | None,
    schema_version: int = LATEST,
    once: bool = False,
    client_key: str | None = None,
    token_id: str | None = None,
) -> tuple[StoredReport, bool]:
    """Store `report` unless `once` and a report with its idempotency key (the client's key
    and the content) is stored already: (the stored report, whether it was stored now).
    `token_id`: the write token's (advisor.store.base.token_id), kept with the check rows."""
    report_id = uuid.uuid4().hex
    when = received_at or dt.datetime.now(dt.UTC)
    host, accelerator, verdict = report_fields(report)
    body = report.model_dump(mode="json")
    text = canonical_json(body)
    key = idempotency_key(text, client_key) if once else None
    row = (report_id, format_time(when), host, accelerator, verdict, text)
    keyed = schema_version >= IDEMPOTENCY_VERSION
    with tx() as cur:  # one transaction: the report and its check rows, or nothing
        stored = _insert_once(cur, sql, _INSERT_REPORT, row, key, keyed)
        if stored is not None:
            return _row(stored), False
        if schema_version >= 2:  # (a version-1 database has no check table yet)
            rows = check_rows(report_id, report, token_id)
            _insert_checks(cur, sql, rows, schema_version)
    return StoredReport(
        report_id, parse_time(format_time(when)), host, accelerator, verdict, body
    ), True


def get(tx: Transaction, sql: Sql, report_id: str) -> StoredReport | None:
    with tx() as cur:
        cur.execute(sql(_REPORT_COLUMNS + " WHERE id = ?"), (report_id,))
        row = cur.fetchone()
    return _row(row) if row else None


def list_reports(tx: Transaction, sql: Sql, flt: ReportFilter) -> tuple[list[StoredReport], int]:
    # Each optional filter is "(? IS NULL OR column = ?)": the statement text never changes.
    where = (
        " WHERE (CAST(? AS TEXT) IS NULL OR host = ?)"
        " AND (CAST(? AS TEXT) IS NULL OR accelerator = ?)"
        " AND (CAST(? AS TEXT) IS NULL OR verdict = ?)"
        " AND (CAST(? AS TEXT) IS NULL OR received_at >= ?)"
        " AND (CAST(? AS TEXT) IS NULL OR received_at < ?)"
    )
    since = format_time(flt.since) if flt.since else None
    until = format_time(flt.until) if flt.until else None
    params = (
        flt.host,
        flt.host,
        flt.accelerator,
        flt.accelerator,
        flt.verdict,
        flt.verdict,
        since,
        since,
        until,
        until,
    )
    with tx() as cur:
        cur.execute(sql("SELECT COUNT(*) FROM probe_reports" + where), params)
        total = int(cur.fetchone()[0])
        cur.execute(
            sql(_REPORT_COLUMNS + where + " ORDER BY received_at DESC, id DESC LIMIT ? OFFSET ?"),
            (*params, flt.limit, flt.offset),
        )
        rows = cur.fetchall()
    return [_row(r) for r in rows], total


def fleet(
    tx: Transaction,
    sql: Sql,
    accelerator: str | None,
    check: str | None = None,
    schema_version: int = LATEST,
) -> list[FleetSummary]:
    with tx() as cur:
        cur.execute(
            sql(
                "SELECT accelerator, verdict FROM probe_reports"
                " WHERE (CAST(? AS TEXT) IS NULL OR accelerator = ?)"
            ),
            (accelerator, accelerator),
        )
        verdicts: dict[str | None, list[str]] = {}
        for acc, verdict in cur.fetchall():
            verdicts.setdefault(acc, []).append(verdict)
        rows = _check_rows(cur, sql, accelerator, check, schema_version)
    return summarize_fleet(rows, verdicts)


def check_rows_named(
    tx: Transaction, sql: Sql, check: str, schema_version: int = LATEST
) -> list[CheckRow]:
    with tx() as cur:
        return _check_rows(cur, sql, None, check, schema_version)


def _check_rows(
    cur: Cursor, sql: Sql, accelerator: str | None, check: str | None, schema_version: int
) -> list[CheckRow]:
    token = ", token_id" if schema_version >= TOKEN_ID_VERSION else ""
    cur.execute(
        sql(
            "SELECT report_id, host, accelerator, name, status, measured, expected"
            + token
            + " FROM probe_checks"
            " WHERE (CAST(? AS TEXT) IS NULL OR accelerator = ?)"
            " AND (CAST(? AS TEXT) IS NULL OR name = ?)"
        ),
        (accelerator, accelerator, check, check),
    )
    return [CheckRow(*r) for r in cur.fetchall()]


def count(tx: Transaction, sql: Sql) -> int:
    with tx() as cur:
        cur.execute(sql("SELECT COUNT(*) FROM probe_reports"))
        return int(cur.fetchone()[0])


def _row(row: Iterable[Any]) -> StoredReport:
    report_id, received_at, host, accelerator, verdict, body = row
    return StoredReport(
        report_id, parse_time(received_at), host, accelerator, verdict, json.loads(body)
    )


# -- utilisation reports (schema step 3) ------------------------------------------------------
_UTILISATION_COLUMNS = "SELECT id, received_at, host, body FROM utilisation_reports"
ITER_PAGE = 500  # rows per transaction while iterating over every utilisation report


_INSERT_UTILISATION = KeyedInsert(
    "INSERT INTO utilisation_reports (id, received_at, host, body) VALUES (?, ?, ?, ?)",
    "INSERT INTO utilisation_reports (id, received_at, host, body, idempotency_key)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING",
    _UTILISATION_COLUMNS + " WHERE idempotency_key = ?",
)


def add_utilisation(
    tx: Transaction,
    sql: Sql,
    report: UtilisationReport,
    received_at: dt.datetime | None,
    schema_version: int = LATEST,
    once: bool = False,
    client_key: str | None = None,
) -> tuple[StoredUtilisation, bool]:
    """Store `report` unless `once` and a utilisation report with its idempotency key is stored
    already: (the stored report, whether it was stored now)."""
    report_id = uuid.uuid4().hex
    when = format_time(received_at or dt.datetime.now(dt.UTC))
    host = report.host
    body = report.model_dump(mode="json")
    text = canonical_json(body)
    key = idempotency_key(text, client_key) if once else None
    row = (report_id, when, host, text)
    keyed = schema_version >= UTILISATION_IDEMPOTENCY_VERSION
    with tx() as cur:
        stored = _insert_once(cur, sql, _INSERT_UTILISATION, row, key, keyed)
    if stored is not None:
        return _utilisation_row(stored), False
    return StoredUtilisation(report_id, parse_time(when), host, body), True


def get_utilisation(tx: Transaction, sql: Sql, report_id: str) -> StoredUtilisation | None:
    with tx() as cur:
        cur.execute(sql(_UTILISATION_COLUMNS + " WHERE id = ?"), (report_id,))
        row = cur.fetchone()
    return _utilisation_row(row) if row else None


def query_utilisation(
    tx: Transaction, sql: Sql, host: str | None, limit: int, offset: int
) -> tuple[list[StoredUtilisation], int]:
    where = " WHERE (CAST(? AS TEXT) IS NULL OR host = ?)"
    with tx() as cur:
        cur.execute(sql("SELECT COUNT(*) FROM utilisation_reports" + where), (host, host))
        total = int(cur.fetchone()[0])
        cur.execute(
            sql(
                _UTILISATION_COLUMNS
                + where
                + " ORDER BY received_at DESC, id DESC LIMIT ? OFFSET ?"
            ),
            (host, host, limit, offset),
        )
        rows = cur.fetchall()
    return [_utilisation_row(r) for r in rows], total


def iter_utilisation(tx: Transaction, sql: Sql) -> Iterator[StoredUtilisation]:
    """Every utilisation report, oldest first, a page per transaction (keyset pagination): no
    lock or cursor is held while the caller works on a report, so it may use the store too."""
    after: tuple[str, str] = ("", "")
    while True:
        with tx() as cur:
            cur.execute(
                sql(
                    _UTILISATION_COLUMNS + " WHERE received_at > ? OR (received_at = ? AND id > ?)"
                    " ORDER BY received_at, id LIMIT ?"
                ),
                (after[0], after[0], after[1], ITER_PAGE),
            )
            rows = cur.fetchall()
        for row in rows:
            yield _utilisation_row(row)
        if len(rows) < ITER_PAGE:
            return
        after = (rows[-1][1], rows[-1][0])


def _utilisation_row(row: Iterable[Any]) -> StoredUtilisation:
    report_id, received_at, host, body = row
    return StoredUtilisation(report_id, parse_time(received_at), host, json.loads(body))


_OPS_COLUMNS = "SELECT id, received_at, host, accelerator, body FROM ops_reports"
_INSERT_OPS = KeyedInsert(
    "INSERT INTO ops_reports (id, received_at, host, accelerator, body) VALUES (?, ?, ?, ?, ?)",
    "INSERT INTO ops_reports (id, received_at, host, accelerator, body, idempotency_key)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (idempotency_key) DO NOTHING",
    _OPS_COLUMNS + " WHERE idempotency_key = ?",
)
# The newest operator tables read per accelerator for its fleet table: a bound on the read
# (each full table is about 250 kB), many times the hosts of the fleets the service serves.
OPS_TABLES_READ = 2000


def add_ops(
    tx: Transaction,
    sql: Sql,
    report: OpsReport,
    received_at: dt.datetime | None,
    client_key: str | None,
) -> tuple[str, bool]:
    """Store an operator table once per idempotency key: (its id, whether it was stored now)."""
    report_id = uuid.uuid4().hex
    when = format_time(received_at or dt.datetime.now(dt.UTC))
    text = canonical_json(report.model_dump(mode="json"))
    key = idempotency_key(text, client_key)
    row = (report_id, when, report.host, report.table.accelerator, text)
    with tx() as cur:
        stored = _insert_once(cur, sql, _INSERT_OPS, row, key, True)
    return (str(stored[0]), False) if stored is not None else (report_id, True)


def ops_tables(tx: Transaction, sql: Sql, accelerator: str) -> list[OpsReport]:
    """The newest OPS_TABLES_READ operator tables of one accelerator, newest first."""
    with tx() as cur:
        cur.execute(
            sql(_OPS_COLUMNS + " WHERE accelerator = ? ORDER BY received_at DESC, id DESC LIMIT ?"),
            (accelerator, OPS_TABLES_READ),
        )
        rows = cur.fetchall()
    return [OpsReport.model_validate_json(body) for *_, body in rows]
