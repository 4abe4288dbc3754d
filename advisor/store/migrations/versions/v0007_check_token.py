"""Which write token stored each check (advisor.store.base.token_id, a digest): the fleet
calibration counts distinct tokens beside distinct hosts."""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE probe_checks ADD COLUMN token_id TEXT")


def downgrade() -> None:
    op.execute("ALTER TABLE probe_checks DROP COLUMN token_id")
