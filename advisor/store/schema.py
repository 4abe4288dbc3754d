"""The store's tables as SQLAlchemy Core sees them at the newest migration
(advisor/store/migrations/versions/): the queries of advisor/store/sql.py are built from them.
The DDL itself lives in the migrations only, so that a database created today and one upgraded
from an older version hold the same schema."""

from __future__ import annotations

from sqlalchemy import Column, Double, MetaData, String, Table, Text

metadata = MetaData()

probe_reports = Table(
    "probe_reports",
    metadata,
    Column("id", Text, primary_key=True),
    Column("received_at", Text, nullable=False),  # advisor.store.sql.format_time: text order
    Column("host", Text, nullable=False),
    Column("accelerator", Text),
    Column("verdict", Text, nullable=False),
    Column("body", Text, nullable=False),  # advisor.store.base.canonical_json
    Column("idempotency_key", Text, unique=True),
)

probe_checks = Table(
    "probe_checks",
    metadata,
    Column("report_id", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("accelerator", Text),
    Column("name", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("measured", Double),
    Column("expected", Double),
    Column("token_id", String),
)

utilisation_reports = Table(
    "utilisation_reports",
    metadata,
    Column("id", Text, primary_key=True),
    Column("received_at", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("idempotency_key", Text, unique=True),
)

ops_reports = Table(
    "ops_reports",
    metadata,
    Column("id", Text, primary_key=True),
    Column("received_at", Text, nullable=False),
    Column("host", Text, nullable=False),
    Column("accelerator", Text),
    Column("body", Text, nullable=False),
    Column("idempotency_key", Text, unique=True),
)
