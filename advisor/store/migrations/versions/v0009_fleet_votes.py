"""The voted checks' per-host ratios keyed by check (fleet_votes, fleet_vote_tokens), so that
the GPU link's all_reduce_vs_plan is voted one per host beside matmul_bf16
(advisor.perf.calibration.VOTED_CHECKS); the matmul-only fleet_calibration tables go, and every
aggregate is filled again from the stored reports and checks."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from advisor.store import aggregates

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

OLD = ("fleet_calibration_tokens", "fleet_calibration")


def upgrade() -> None:
    bind = op.get_bind()
    present = set(sa.inspect(bind).get_table_names())
    for name in OLD:
        if name in present:
            op.drop_table(name)
    aggregates.rebuild(bind)


def downgrade() -> None:
    """Back to 0008's matmul-only tables, filled from the matmul's rows of the votes."""
    op.create_table(
        "fleet_calibration",
        sa.Column("accelerator", sa.Text, primary_key=True),
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("bucket", sa.Integer, primary_key=True),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.Column("lo", sa.Double, nullable=False),
        sa.Column("hi", sa.Double, nullable=False),
    )
    op.create_table(
        "fleet_calibration_tokens",
        sa.Column("accelerator", sa.Text, primary_key=True),
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("token_id", sa.Text, primary_key=True),
    )
    op.execute(
        "INSERT INTO fleet_calibration SELECT accelerator, host, bucket, n, lo, hi"
        " FROM fleet_votes WHERE name = 'matmul_bf16'"
    )
    op.execute(
        "INSERT INTO fleet_calibration_tokens SELECT accelerator, host, token_id"
        " FROM fleet_vote_tokens WHERE name = 'matmul_bf16'"
    )
    op.drop_table("fleet_vote_tokens")
    op.drop_table("fleet_votes")
