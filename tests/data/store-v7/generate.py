"""Writes the fixture of this directory: databases at schema version 7, the last version of the
store before Alembic, written by that store's own code (advisor/store/sqlite.py and postgres.py
as they were at commit 8d12b7f), and what that code read back from them (expected.json).

Run at a checkout of that commit (`git archive 8d12b7f | tar -x -C DIR`), with DIR first on
PYTHONPATH:

    python generate.py sqlite:///v7.db DIR > expected.json
    python generate.py 'postgresql://...?options=-csearch_path%3Dfixture_v7' DIR  # same output

then dump them: v7.sqlite.sql is sqlite3's iterdump() of v7.db; v7.postgres.sql is
`pg_dump --schema=fixture_v7 --no-owner --no-privileges --inserts --rows-per-insert=1` with the
session settings, the schema's creation and the schema name taken out (tests/test_store_upgrade.py
loads them into a fresh database of each kind). Report ids come from a seeded generator, so both
databases hold the same reports under the same ids.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
import uuid
from pathlib import Path
from typing import Any

from advisor import load_catalog
from advisor.store import open_store
from advisor.store.base import token_id
from probes.ops_table import ROW_SECTIONS, OpsReport, OpsTable
from probes.report import ProbeReport, UtilisationReport
from tests import synthetic_fleet as synthetic
from tests.reports import as_probe_report

_rng = random.Random(41)
uuid.uuid4 = lambda: uuid.UUID(int=_rng.getrandbits(128), version=4)  # the same ids each run
BASE = "benchmarks/results/probe-2026-11-30-nvidia-h200-driver580.159.04-torch2.11.0+cu130"
OPS = "catalog/ops/h200-sxm--torch2.11.0-cu130-driver580.json"


def main(url: str, root: Path) -> dict[str, Any]:
    catalog = load_catalog()
    base = json.loads((root / BASE / "probe-quick.json").read_text())
    store = open_store(url)
    t0 = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
    ids = []
    # plain adds, keyed adds with and without a client key, with write tokens
    for i, body in enumerate(synthetic.probe_reports(catalog, base, 12, 6)):
        report, when = ProbeReport.model_validate(body), t0 + dt.timedelta(hours=i)
        if i % 3 == 0:
            ids.append(store.add(report, when).id)
        else:
            key = f"key-{i}" if i % 2 else None
            ids.append(store.add_once(report, key, when, token_id(f"token-{i % 4}"))[0].id)
    cpu = as_probe_report(  # a run that reached no GPU: stored under no accelerator
        {
            "verdict": "error",
            "accelerator": "h100-sxm",
            "inventory": {"hostname": "cpu-box"},
            "checks": [{"name": "matmul_fp32", "status": "pass", "measured": 1.5}],
        }
    )
    ids.append(store.add(cpu, t0 + dt.timedelta(days=2)).id)
    evil = as_probe_report(
        {
            "accelerator": "h200-sxm",
            "inventory": {"hostname": "x'; DROP TABLE probe_reports; -- Δ✓"},
            "checks": [
                {"name": "matmul_bf16", "status": "fail", "measured": 390.5, "expected": 781.0}
            ],
        }
    )
    ids.append(store.add_once(evil, "k-evil", t0 + dt.timedelta(days=2, hours=1), None)[0].id)
    uids = []
    for i, body in enumerate(synthetic.utilisation_reports(catalog, 6)[:3]):
        usage, when = UtilisationReport.model_validate(body), t0 + dt.timedelta(days=3, hours=i)
        if i % 2:
            uids.append(store.add_utilisation(usage, when).id)
        else:
            uids.append(store.add_utilisation_once(usage, f"u-{i}", when)[0].id)
    table = OpsTable.model_validate_json((root / OPS).read_bytes())
    table = table.model_copy(update={s: getattr(table, s)[:3] for s in ROW_SECTIONS})
    ops = OpsReport(created_at=dt.datetime(2026, 11, 25, tzinfo=dt.UTC), host="h200-0", table=table)
    oid, _ = store.add_ops(ops, "ops-1", t0 + dt.timedelta(days=4))
    reports = {}
    for i in ids:
        s = store.get(i)
        assert s is not None
        reports[i] = {
            "received_at": s.received_at.isoformat(),
            "host": s.host,
            "accelerator": s.accelerator,
            "verdict": s.verdict,
            "report": s.report,
        }
    usages = {}
    for i in uids:
        u = store.get_utilisation(i)
        assert u is not None
        usages[i] = u.report
    fleet = [
        {**vars(f), "calibration": vars(f.calibration) if f.calibration else None}
        for f in store.fleet()
    ]
    found = {
        "schema_version": store.schema_version,  # type: ignore[attr-defined]
        "probe_reports": reports,
        "utilisation_reports": usages,
        "ops_reports": {oid: ops.model_dump(mode="json")},
        "fleet": fleet,
        "idempotency": {"k-evil": ids[-1]},
    }
    store.close()
    return found


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2])), sort_keys=True, default=str))
