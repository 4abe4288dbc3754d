"""The same key for utilisation reports."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Unless the table has the column already: a utilisation table that outlived the probe
    # tables (0003's IF NOT EXISTS) went through this step before.
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("utilisation_reports")}
    if "idempotency_key" not in columns:
        op.execute("ALTER TABLE utilisation_reports ADD COLUMN idempotency_key TEXT")
    op.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS utilisation_reports_idempotency"
        " ON utilisation_reports (idempotency_key)"
    )


def downgrade() -> None:
    op.execute("DROP INDEX utilisation_reports_idempotency")
    op.execute("ALTER TABLE utilisation_reports DROP COLUMN idempotency_key")
