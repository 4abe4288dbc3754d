"""Operator tables posted by `advisor probe --ops --report-to`: the fleet's table per
accelerator is voted from them (advisor/fleet/ops_tables.py)."""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS ops_reports ("
        " id TEXT PRIMARY KEY, received_at TEXT NOT NULL, host TEXT NOT NULL,"
        " accelerator TEXT, body TEXT NOT NULL, idempotency_key TEXT)"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS ops_reports_accelerator"
        " ON ops_reports (accelerator, received_at)"
    )
    op.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS ops_reports_idempotency ON ops_reports (idempotency_key)"
    )


def downgrade() -> None:
    op.execute("DROP TABLE ops_reports")
