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
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

# SET clause of an upsert: (the table, its `excluded` pseudo-table) -> column -> new value
Update = Callable[[sa.Table, Any], Mapping[str, Any]]


def upsert_many(
    conn: sa.Connection,
    table: sa.Table,
    keys: tuple[str, ...],
    rows: Sequence[Mapping[str, Any]],
    update: Update | None,
) -> None:
    """Insert `rows`, or where a row with the same `keys` is stored, set `update`'s values
    (None: leave the stored row). `rows`: each with the same columns, unique by `keys`."""
    if not rows:
        return
    if conn.dialect.name != "postgresql":
        stmt = _on_conflict(sqlite.insert(table), keys, update)
        conn.execute(stmt, sorted(rows, key=lambda r: tuple(r[k] for k in keys)))
        return
    conn.execute(_json_upsert(table, tuple(rows[0]), keys, update), {"rows": _json(rows)})


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
