"""Databases part of the way through the store's migrations, for the upgrade tests: the schema
at an Alembic revision (advisor/store/migrations/versions/), and rows written into it the way
the store of that time wrote them (its statements, which the store of today no longer speaks)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import sqlalchemy as sa
from alembic import command

from advisor.fleet.records import report_fields
from advisor.store import migrate
from advisor.store.base import CheckRow, canonical_json, check_rows
from advisor.store.sql import engine_for, format_time
from probes.report import ProbeReport, UtilisationReport

# tables a migration created and a later one replaced (0009: the matmul-only votes; 0010: the
# per-host counts; 0011: the check rows)
FORMER_TABLES = ("fleet_calibration", "fleet_calibration_tokens", "fleet_hosts", "probe_checks")
TABLES = (  # every table a migration creates, dependants first
    "fleet_verdicts",
    "fleet_check_statuses",
    "fleet_ratios",
    "fleet_votes",
    "fleet_vote_tokens",
    "fleet_host_checks",
    "fleet_host_ratios",
    "fleet_check_units",
    "fleet_latest_hosts",
    "fleet_latest_gpus",
    "probe_reports",
    "utilisation_reports",
    "ops_reports",
    "schema_version",
    "alembic_version",
)


def at_revision(url: str, revision: str) -> None:
    """Migrate the database at `url` up to `revision` (not beyond)."""
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            migrate.upgrade(conn, to=revision)
    finally:
        engine.dispose()


def down_to(url: str, revision: str) -> None:
    """Migrate the database at `url` down to `revision` through the migrations' downgrades."""
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            command.downgrade(migrate.config(conn), revision)
    finally:
        engine.dispose()


def query(url: str, statement: str) -> list[tuple[Any, ...]]:
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            return [tuple(r) for r in conn.exec_driver_sql(statement)]
    finally:
        engine.dispose()


def run(url: str, *statements: str) -> None:
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.exec_driver_sql(statement)
    finally:
        engine.dispose()


def table_names(url: str) -> set[str]:
    engine = engine_for(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def drop_all(url: str) -> None:
    # the former tables first: probe_checks refers to probe_reports
    run(url, *(f"DROP TABLE IF EXISTS {table}" for table in (*FORMER_TABLES, *TABLES)))


def add_v1_report(url: str, report: ProbeReport, *, checks: bool = False) -> str:
    """A probe report stored as schema step 1 stored it (no key), and with `checks` its check
    rows as step 2 stored them (no write token)."""
    report_id = uuid.uuid4().hex
    host, accelerator, verdict = report_fields(report)
    row = {
        "id": report_id,
        "received_at": format_time(dt.datetime.now(dt.UTC)),
        "host": host,
        "accelerator": accelerator,
        "verdict": verdict,
        "body": canonical_json(report.model_dump(mode="json")),
    }
    _insert(
        url,
        "INSERT INTO probe_reports (id, received_at, host, accelerator, verdict, body)"
        " VALUES (:id, :received_at, :host, :accelerator, :verdict, :body)",
        row,
    )
    for check in check_rows(report_id, report) if checks else []:
        _insert(
            url,
            "INSERT INTO probe_checks (report_id, host, accelerator, name, status, measured,"
            " expected) VALUES (:report_id, :host, :accelerator, :name, :status, :measured,"
            " :expected)",
            {k: v for k, v in vars(check).items() if k != "token_id"},
        )
    return report_id


def add_v3_utilisation(url: str, report: UtilisationReport) -> str:
    """A utilisation report stored as steps 3 and 4 stored it (no key column yet)."""
    report_id = uuid.uuid4().hex
    row = {
        "id": report_id,
        "received_at": format_time(dt.datetime.now(dt.UTC)),
        "host": report.host,
        "body": canonical_json(report.model_dump(mode="json")),
    }
    _insert(
        url,
        "INSERT INTO utilisation_reports (id, received_at, host, body)"
        " VALUES (:id, :received_at, :host, :body)",
        row,
    )
    return report_id


def _insert(url: str, statement: str, row: dict[str, object]) -> None:
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(statement), row)
    finally:
        engine.dispose()


def truncate_reports(url: str) -> None:
    """Empty the probe tables and the aggregates kept from them (PostgreSQL)."""
    run(url, f"TRUNCATE {', '.join(TABLES[: TABLES.index('probe_reports') + 1])}")


def all_check_rows(url: str) -> list[CheckRow]:
    """Every check of every stored report, each with its report's write token, read from the
    stored bodies outside the store (for scans by brute force)."""
    rows = query(url, "SELECT id, body, token_id FROM probe_reports")
    return [
        row
        for report_id, body, token in rows
        for row in check_rows(report_id, ProbeReport.model_validate_json(body), token)
    ]
