"""The fleet summary's aggregates (advisor/store/aggregates.py), filled from the stored reports
and checks; from here on every report's write updates them in its own transaction."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from advisor.store import aggregates
from advisor.store.schema import AGGREGATES

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    aggregates.rebuild(op.get_bind())


def downgrade() -> None:
    bind = op.get_bind()
    for table in reversed(AGGREGATES):
        table.drop(bind, checkfirst=True)
    present = set(sa.inspect(bind).get_table_names())
    for name in (
        "fleet_calibration_tokens",
        "fleet_calibration",
        "fleet_hosts",
    ):  # this revision's (0009 and 0010 replaced them)
        if name in present:
            op.drop_table(name)
