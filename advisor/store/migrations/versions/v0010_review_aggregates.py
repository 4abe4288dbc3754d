"""The review's aggregates (advisor/fleet/digest.py FleetDigest: each host's and GPU's latest
report, each host's runs, failures and ratios per check, the checks' units), so that the review
reads them instead of every stored report. Each host's runs and failures per check replace
0008's per-host counts (fleet_hosts: their sums). Every aggregate is filled again from the
stored reports (each stored text read once more) and checks."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from advisor.store import aggregates

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

NEW = (
    "fleet_host_checks",
    "fleet_host_ratios",
    "fleet_check_units",
    "fleet_latest_hosts",
    "fleet_latest_gpus",
)


def upgrade() -> None:
    bind = op.get_bind()
    if "fleet_hosts" in set(sa.inspect(bind).get_table_names()):
        op.drop_table("fleet_hosts")
    aggregates.rebuild(bind)


def downgrade() -> None:
    """Back to 0009: fleet_hosts filled with the sums of each host's checks."""
    op.create_table(
        "fleet_hosts",
        sa.Column("accelerator", sa.Text, primary_key=True),
        sa.Column("host", sa.Text, primary_key=True),
        sa.Column("runs", sa.BigInteger, nullable=False),
        sa.Column("failed", sa.BigInteger, nullable=False),
    )
    op.execute(
        "INSERT INTO fleet_hosts SELECT accelerator, host, SUM(runs), SUM(failed)"
        " FROM fleet_host_checks GROUP BY accelerator, host"
    )
    for name in NEW:
        op.drop_table(name)
