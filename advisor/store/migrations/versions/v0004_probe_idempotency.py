"""The client's Idempotency-Key (or the content digest): a probe report is stored once. Older
rows have none; NULLs never collide in a unique index."""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE probe_reports ADD COLUMN idempotency_key TEXT")
    op.execute("CREATE UNIQUE INDEX probe_reports_idempotency ON probe_reports (idempotency_key)")


def downgrade() -> None:
    op.execute("DROP INDEX probe_reports_idempotency")
    op.execute("ALTER TABLE probe_reports DROP COLUMN idempotency_key")
