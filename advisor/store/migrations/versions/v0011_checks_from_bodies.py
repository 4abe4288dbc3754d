"""The check rows go (probe_checks): every figure read from them is kept in the aggregates
(advisor/store/aggregates.py) and every check is in its report's stored body; a report's write
token moves to the report (probe_reports.token_id). Writing 300 check rows a node report was
the largest part of a report's intake."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from advisor.fleet.records import StoredView
from advisor.store.base import check_rows

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

PAGE = 200  # reports decoded at a time by the downgrade


def upgrade() -> None:
    op.execute("ALTER TABLE probe_reports ADD COLUMN token_id TEXT")
    op.execute(
        "UPDATE probe_reports SET token_id = c.token_id FROM (SELECT report_id,"
        " MAX(token_id) AS token_id FROM probe_checks GROUP BY report_id) AS c"
        " WHERE c.report_id = probe_reports.id"
    )
    op.execute("DROP TABLE probe_checks")


def downgrade() -> None:
    """Back to 0010: the check rows made again from the stored bodies, each with its report's
    token."""
    op.execute(
        "CREATE TABLE probe_checks ("
        " report_id TEXT NOT NULL REFERENCES probe_reports (id), host TEXT NOT NULL,"
        " accelerator TEXT, name TEXT NOT NULL, status TEXT NOT NULL,"
        " measured DOUBLE PRECISION, expected DOUBLE PRECISION, token_id TEXT)"
    )
    op.execute("CREATE INDEX probe_checks_accelerator ON probe_checks (accelerator, name)")
    bind = op.get_bind()
    insert = sa.text(
        "INSERT INTO probe_checks (report_id, host, accelerator, name, status, measured,"
        " expected, token_id) VALUES (:report_id, :host, :accelerator, :name, :status,"
        " :measured, :expected, :token_id)"
    )
    after = ""
    while True:  # keyset pages: the bodies of a large store are never all in memory
        page = bind.execute(
            sa.text(
                "SELECT id, body, token_id FROM probe_reports WHERE id > :after ORDER BY id"
                " LIMIT :n"
            ),
            {"after": after, "n": PAGE},
        ).all()
        rows = [
            vars(row)
            for report_id, body, token_id in page
            for row in check_rows(report_id, StoredView.model_validate_json(body), token_id)
        ]
        if rows:
            bind.execute(insert, rows)
        if len(page) < PAGE:
            break
        after = page[-1][0]
    op.execute("ALTER TABLE probe_reports DROP COLUMN token_id")
