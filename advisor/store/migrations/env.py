"""Alembic's environment: the migrations run on the connection advisor/store/migrate.py hands
over (inside its transaction, under its lock), or, from Alembic's own command line (configured
in pyproject.toml's [tool.alembic]), on the database of ADVISOR_DATABASE_URL opened the same way.
A database of the store before Alembic is stamped with its step's revision first."""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import context

from advisor.store.migrate import legacy_revision


def run_on(connection: sa.Connection) -> None:
    context.configure(connection=connection, transaction_per_migration=False)
    tables = set(sa.inspect(connection).get_table_names())
    if "alembic_version" not in tables and (legacy := legacy_revision(connection, tables)):
        context.get_context().stamp(context.script, legacy)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("advisor's migrations run against a database: no --sql mode")
shared = context.config.attributes.get("connection")
if shared is not None:
    run_on(shared)
else:
    from advisor.store.sql import engine_for

    url = os.environ.get("ADVISOR_DATABASE_URL", "sqlite:///advisor.db")
    with engine_for(url).begin() as conn:
        if conn.dialect.name == "postgresql":
            from advisor.store.migrate import MIGRATION_LOCK

            conn.exec_driver_sql(MIGRATION_LOCK)
        run_on(conn)
