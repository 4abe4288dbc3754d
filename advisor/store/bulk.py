"""Many rows written in one statement: a stored report's upserts of each aggregate table.

A node report of 8 GPUs carries about 300 checks and 200 aggregate rows. psycopg's executemany
sends each row as its own statement (in a pipeline): about 50 ms of CPU a report, which held
intake to 25 reports/s (and arrays, one per column, still cost 9 ms: psycopg dumps each element
in Python). On PostgreSQL the rows travel instead as one JSON text, encoded in C by the json
module and read by the server: `INSERT ... SELECT ... FROM json_to_recordset(:rows) AS r(a type,
...) ON CONFLICT ...`, one statement per table whose text never changes (SQLAlchemy compiles it
once). SQLite keeps executemany: its driver runs it in C, in process, without a round trip per
row.

The rows of an upsert are inserted in their key order (ORDER BY the key columns): simultaneous
writers lock the aggregate rows they share in one order, so they cannot deadlock.

A report's upserts go to PostgreSQL together, in one pipeline of psycopg's (one round trip for
all of them instead of one each: a writer holds the fleet-wide rows' locks for less time, and
its process spends less on the socket): one writer's CPU a report 3.3 -> 2.7 ms, PostgreSQL's
1.8 -> 1.5 ms, one process of 4 writers 216 -> 239 reports/s (benchmarks/intake_trees.py,
recorded in benchmarks/results/fleet-2026-12-04.txt).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite

# SET clause of an upsert: (the table, its `excluded` pseudo-table) -> column -> new value
Update = Callable[[sa.Table, Any], Mapping[str, Any]]


class Upsert(NamedTuple):
    """Insert `rows`, or where a row with the same `keys` is stored, set `update`'s values (None:
    leave the stored row). `rows`: each with the same columns, unique by `keys`."""

    table: sa.Table
    keys: tuple[str, ...]
    rows: Sequence[Mapping[str, Any]]
    update: Update | None


def upsert_all(conn: sa.Connection, upserts: Sequence[Upsert]) -> None:
    """Each upsert, in the order given, in the caller's transaction."""
    todo = [u for u in upserts if u.rows]
    if conn.dialect.name != "postgresql":
        for u in todo:
            stmt = _on_conflict(sqlite.insert(u.table), u.keys, u.update)
            conn.execute(stmt, sorted(u.rows, key=_key_of(u.keys)))
        return
    statements = [
        (_json_upsert(u.table, tuple(u.rows[0]), u.keys, u.update), _json(u.rows)) for u in todo
    ]
    if not _pipelines(conn):
        for stmt, rows in statements:
            conn.execute(stmt, {"rows": rows})
        return
    texts = [(*_compiled(stmt, conn.dialect), rows) for stmt, rows in statements]
    _pipelined(conn, [(sql, {**constants, "rows": rows}) for sql, constants, rows in texts])


def _key_of(keys: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    return lambda row: tuple(row[k] for k in keys)


def _pipelines(conn: sa.Connection) -> bool:
    """Whether the driver can send statements in a pipeline (psycopg over libpq 14 or later)."""
    return bool(getattr(conn.dialect.loaded_dbapi, "Pipeline", None)) and bool(
        conn.dialect.loaded_dbapi.Pipeline.is_supported()
    )


@functools.lru_cache(maxsize=64)
def _compiled(stmt: Any, dialect: Any) -> tuple[str, dict[str, Any]]:
    """A statement's text for the driver and its constant parameters (the literals SQLAlchemy
    binds, as '' in a CASE)."""
    compiled = stmt.compile(dialect=dialect)
    return str(compiled), dict(compiled.params)


def _pipelined(conn: sa.Connection, statements: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """The statements in one psycopg pipeline on the transaction's own connection. A driver
    error is raised as SQLAlchemy raises one (DBAPIError, the connection invalidated when it is
    gone), so that the store words it and the pool drops a dead connection as it does for any
    statement. The pipeline reports an error when it is synchronised, at its end: the
    statement named with it is the last one sent."""
    pooled = conn.connection
    raw: Any = pooled.driver_connection
    error = conn.dialect.loaded_dbapi.Error
    sql, params = statements[-1]
    cursor = raw.cursor()
    try:
        with raw.pipeline():
            for text, values in statements:
                cursor.execute(text, values)
    except error as exc:
        gone = conn.dialect.is_disconnect(exc, pooled.dbapi_connection, cursor)
        if gone:
            conn.invalidate(exc)
        raise sa_exc.DBAPIError.instance(
            sql, params, exc, error, connection_invalidated=gone, dialect=conn.dialect
        ) from exc
    finally:
        cursor.close()


def _json(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as a JSON array of objects. JSON has no infinity (a check may measure one):
    non-finite numbers travel as the strings PostgreSQL reads as double precision."""
    try:
        return json.dumps(rows, allow_nan=False)
    except ValueError:
        return json.dumps([{k: _finite_or_text(v) for k, v in r.items()} for r in rows])


def _finite_or_text(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _rows_of(table: sa.Table, columns: tuple[str, ...]) -> Any:
    """FROM json_to_recordset(:rows) AS anon(a type, ...), typed as the table's columns."""
    rows = sa.cast(sa.bindparam("rows", type_=sa.Text), postgresql.JSON)
    typed = [sa.column(c, table.c[c].type) for c in columns]
    return sa.func.json_to_recordset(rows).table_valued(*typed).render_derived(with_types=True)


@functools.cache
def _json_upsert(
    table: sa.Table, columns: tuple[str, ...], keys: tuple[str, ...], update: Update | None
) -> Any:
    source = _rows_of(table, columns)
    select = sa.select(*[source.c[c] for c in columns]).order_by(*[source.c[k] for k in keys])
    return _on_conflict(postgresql.insert(table).from_select(list(columns), select), keys, update)


def _on_conflict(stmt: Any, keys: tuple[str, ...], update: Update | None) -> Any:
    if update is None:
        return stmt.on_conflict_do_nothing(index_elements=list(keys))
    return stmt.on_conflict_do_update(
        index_elements=list(keys), set_=dict(update(stmt.table, stmt.excluded))
    )
