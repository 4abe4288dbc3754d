"""Probe reports (schema_version 1 of the store before Alembic).

Revisions 0001 to 0007 are the store's seven migration steps as they were numbered before
Alembic, statement for statement: a database those steps wrote is stamped with its step's
revision and upgraded from there (advisor/store/migrate.py). Never edit a released revision:
add a new one.
"""

from __future__ import annotations

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE probe_reports ("
        " id TEXT PRIMARY KEY, received_at TEXT NOT NULL, host TEXT NOT NULL,"
        " accelerator TEXT, verdict TEXT NOT NULL, body TEXT NOT NULL)"
    )
    op.execute("CREATE INDEX probe_reports_received ON probe_reports (received_at, id)")
    op.execute("CREATE INDEX probe_reports_host ON probe_reports (host)")


def downgrade() -> None:
    op.execute("DROP TABLE probe_reports")
