"""Utilisation reports (advisor monitor --report-to)."""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # IF NOT EXISTS: a test or an operator that drops only the probe tables and migrates again
    # must not trip over a utilisation table that outlived them.
    op.execute(
        "CREATE TABLE IF NOT EXISTS utilisation_reports ("
        " id TEXT PRIMARY KEY, received_at TEXT NOT NULL, host TEXT NOT NULL,"
        " body TEXT NOT NULL)"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS utilisation_reports_received"
        " ON utilisation_reports (received_at, id)"
    )
    op.execute("CREATE INDEX IF NOT EXISTS utilisation_reports_host ON utilisation_reports (host)")


def downgrade() -> None:
    op.execute("DROP TABLE utilisation_reports")
