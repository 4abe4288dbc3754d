"""The fleet summary's aggregates (advisor/store/aggregates.py), filled from the stored reports
and checks; from here on every report's write updates them in its own transaction."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from advisor.store import aggregates
from advisor.store.base import CheckRow
from advisor.store.schema import AGGREGATES

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

PAGE = 20_000  # check rows read at a time


def upgrade() -> None:
    bind = op.get_bind()
    for table in AGGREGATES:
        # checkfirst: a table that outlived the probe tables (dropped by an operator, migrated
        # again) is kept, as 0003 keeps the utilisation table
        table.create(bind, checkfirst=True)
        bind.execute(table.delete())  # and filled again below from what is stored now
    reports = bind.execute(sa.text("SELECT accelerator, verdict FROM probe_reports")).all()
    aggregates.apply(bind, aggregates.deltas([tuple(r) for r in reports], ()))
    # keyset pages of the checks, by their physical order's stand-in: (report_id, name) is not
    # unique, so pages go by report id, whole reports at a time
    after = ""
    while True:
        ids = (
            bind.execute(
                sa.text("SELECT id FROM probe_reports WHERE id > :after ORDER BY id LIMIT :n"),
                {"after": after, "n": max(PAGE // 300, 1)},
            )
            .scalars()
            .all()
        )
        if not ids:
            return
        rows = bind.execute(
            sa.text(
                "SELECT report_id, host, accelerator, name, status, measured, expected, token_id"
                " FROM probe_checks WHERE report_id >= :first AND report_id <= :last"
            ),
            {"first": ids[0], "last": ids[-1]},
        ).all()
        checks = [CheckRow(*r) for r in rows]
        aggregates.apply(bind, aggregates.deltas((), checks))
        after = ids[-1]


def downgrade() -> None:
    for table in reversed(AGGREGATES):
        table.drop(op.get_bind(), checkfirst=True)
