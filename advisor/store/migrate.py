"""Schema migrations: Alembic revisions under advisor/store/migrations/versions/, run when a
store opens, in one transaction that holds a lock every other migrating process waits for
(SQLite: the transaction's BEGIN IMMEDIATE; PostgreSQL: MIGRATION_LOCK). The version is read
under the lock, so servers started together run each revision once: the first one migrates,
the others find the schema done; a crash mid-way leaves the previous version.

A database of the store before Alembic says its version in a table of its own (schema_version,
one row per step 1 to 7): it is stamped with the revision of its newest step (0001 to 0007 are
those steps) and upgraded from there.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

LOCATION = str(Path(__file__).resolve().parent / "migrations")
# Taken by the migration's transaction on PostgreSQL: servers started together migrate one after
# another. (A constant of this project's own: pg_advisory_xact_lock keys are per database.)
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(1796352013)"
LEGACY_TABLE = "schema_version"  # the store's own version table before Alembic


def config(connection: sa.Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", LOCATION)
    if connection is not None:
        cfg.attributes["connection"] = connection  # env.py migrates on it, inside its transaction
    return cfg


@cache
def head() -> str:
    """The newest revision (read once per process, before any lock is taken)."""
    found = ScriptDirectory.from_config(config()).get_current_head()
    assert found is not None
    return found


def current(connection: sa.Connection) -> str | None:
    """The database's revision: Alembic's, else a store-before-Alembic's step as its revision,
    else None (an empty database)."""
    tables = set(sa.inspect(connection).get_table_names())
    if "alembic_version" in tables:
        return connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    return legacy_revision(connection, tables)


def legacy_revision(connection: sa.Connection, tables: set[str]) -> str | None:
    if LEGACY_TABLE not in tables:
        return None
    step = connection.exec_driver_sql(f"SELECT MAX(version) FROM {LEGACY_TABLE}").scalar()
    return f"{int(step):04d}" if step else None


def upgrade(connection: sa.Connection, *, to: str = "head") -> str:
    """Bring the schema of `connection`'s database to `to` inside the connection's transaction,
    which the caller began (and so holds SQLite's write lock); returns the revision reached."""
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(MIGRATION_LOCK)
    target = head() if to == "head" else to
    if current(connection) == target:
        return target  # the common case, decided under the lock without loading Alembic's env
    command.upgrade(config(connection), to)
    reached = current(connection)
    assert reached is not None
    return reached
