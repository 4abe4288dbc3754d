"""What a listing of utilisation reports names (the instance type, the GPU count, the GPUs by
finding) kept in columns beside the body: a listing read and parsed every listed body (up to
1 MiB each, 500 a page). The reports stored before are read once here, a page at a time."""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from advisor.store.base import findings_text, utilisation_figures

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

PAGE = 200  # bodies read at a time: a large store's are never all in memory


COLUMNS = {
    "instance_type": "TEXT",
    "gpu_count": "INTEGER NOT NULL DEFAULT 0",
    "findings": "TEXT NOT NULL DEFAULT '{}'",
}


def upgrade() -> None:
    bind = op.get_bind()
    # Unless the table has them already: a utilisation table that outlived the probe tables
    # (0003's IF NOT EXISTS) went through this step before, and its rows were filled in then.
    present = {c["name"] for c in sa.inspect(bind).get_columns("utilisation_reports")}
    if present >= COLUMNS.keys():
        return
    for name, kind in COLUMNS.items():
        if name not in present:
            op.execute(f"ALTER TABLE utilisation_reports ADD COLUMN {name} {kind}")
    update = sa.text(
        "UPDATE utilisation_reports SET instance_type = :instance_type, gpu_count = :gpu_count,"
        " findings = :findings WHERE id = :id"
    )
    after = ""
    while True:  # keyset pages
        page = bind.execute(
            sa.text(
                "SELECT id, body FROM utilisation_reports WHERE id > :after ORDER BY id LIMIT :n"
            ),
            {"after": after, "n": PAGE},
        ).all()
        rows = []
        for report_id, body in page:
            instance_type, gpu_count, findings = utilisation_figures(json.loads(body))
            rows.append(
                {
                    "id": report_id,
                    "instance_type": instance_type,
                    "gpu_count": gpu_count,
                    "findings": findings_text(findings),
                }
            )
        if rows:
            bind.execute(update, rows)
        if len(page) < PAGE:
            break
        after = page[-1][0]


def downgrade() -> None:
    for name in COLUMNS:
        op.execute(f"ALTER TABLE utilisation_reports DROP COLUMN {name}")
