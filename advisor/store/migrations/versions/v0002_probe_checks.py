"""One row per check of each report, for fleet aggregation; filled from the stored bodies."""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

from advisor.store.base import check_rows
from probes.report import ProbeReport

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

PAGE = 500  # reports decoded at a time


def upgrade() -> None:
    op.execute(
        "CREATE TABLE probe_checks ("
        " report_id TEXT NOT NULL REFERENCES probe_reports (id), host TEXT NOT NULL,"
        " accelerator TEXT, name TEXT NOT NULL, status TEXT NOT NULL,"
        " measured DOUBLE PRECISION, expected DOUBLE PRECISION)"
    )
    op.execute("CREATE INDEX probe_checks_accelerator ON probe_checks (accelerator, name)")
    bind = op.get_bind()
    insert = text(
        "INSERT INTO probe_checks (report_id, host, accelerator, name, status, measured,"
        " expected) VALUES (:report_id, :host, :accelerator, :name, :status, :measured,"
        " :expected)"
    )
    after = ""
    while True:  # keyset pages: the bodies of a large store are never all in memory
        page = bind.execute(
            text("SELECT id, body FROM probe_reports WHERE id > :after ORDER BY id LIMIT :n"),
            {"after": after, "n": PAGE},
        ).all()
        rows = [
            {
                "report_id": r.report_id,
                "host": r.host,
                "accelerator": r.accelerator,
                "name": r.name,
                "status": r.status,
                "measured": r.measured,
                "expected": r.expected,
            }
            for report_id, body in page
            for r in check_rows(report_id, ProbeReport.model_validate_json(body))
        ]
        if rows:
            bind.execute(insert, rows)
        if len(page) < PAGE:
            return
        after = page[-1][0]


def downgrade() -> None:
    op.execute("DROP TABLE probe_checks")
