"""A database written by the store before Alembic (schema version 7, the last of its own
numbered migrations) upgrades in place: tests/data/store-v7/ holds one of each kind dumped from
databases that store wrote, and what it read back from them. Every report reads back the same,
the fleet summary is the same, and the idempotency keys still hold."""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.store import ReportFilter, SqlStore, migrate
from probes.ops_table import OpsReport
from probes.report import ProbeReport, UtilisationReport
from tests import store_steps

DATA = Path(__file__).resolve().parent / "data" / "store-v7"
EXPECTED: dict[str, Any] = json.loads((DATA / "expected.json").read_text())
PG_URL = os.environ.get("ADVISOR_TEST_POSTGRES_URL")


@pytest.fixture(params=["sqlite", "postgres"])
def v7_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at schema version 7, as the fixture's dump holds it."""
    if request.param == "sqlite":
        path = tmp_path / "v7.db"
        with sqlite3.connect(path) as conn:
            conn.executescript((DATA / "v7.sqlite.sql").read_text())
        yield f"sqlite:///{path}"
        return
    if not PG_URL:
        if os.environ.get("CI"):
            pytest.fail("ADVISOR_TEST_POSTGRES_URL is not set in CI")
        pytest.skip("no PostgreSQL (set ADVISOR_TEST_POSTGRES_URL; scripts/start-postgres.sh)")
    import psycopg

    store_steps.drop_all(PG_URL)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute((DATA / "v7.postgres.sql").read_text())  # type: ignore[arg-type]
    yield PG_URL
    store_steps.drop_all(PG_URL)


def summary(store: SqlStore) -> list[dict[str, Any]]:
    """The fleet summary as the fixture's generator wrote it down (before the GPU link's and the
    network's votes: none of its reports carries one)."""
    fleet = store.fleet()
    later = ("link_calibration", "network_calibration")
    assert all(getattr(f, name) is None for f in fleet for name in later)
    found = [
        {
            **{k: v for k, v in vars(f).items() if k not in later},
            "calibration": vars(f.calibration) if f.calibration else None,
        }
        for f in fleet
    ]
    return json.loads(json.dumps(found, sort_keys=True, default=str))  # type: ignore[no-any-return]


def test_a_version_7_database_upgrades_and_reads_back_every_report(v7_url: str) -> None:
    assert EXPECTED["schema_version"] == 7
    store = SqlStore(v7_url)
    try:
        assert store.revision == migrate.head()
        probes = EXPECTED["probe_reports"]
        assert store.count() == len(probes)
        for report_id, want in probes.items():
            got = store.get(report_id)
            assert got is not None, report_id
            assert got.received_at.isoformat() == want["received_at"]
            assert (got.host, got.accelerator, got.verdict) == (
                want["host"],
                want["accelerator"],
                want["verdict"],
            )
            assert got.report == want["report"]
        items, total = store.query(ReportFilter(limit=len(probes) + 5))
        assert total == len(probes) and {r.id for r in items} == set(probes)
        for report_id, want in EXPECTED["utilisation_reports"].items():
            usage = store.get_utilisation(report_id)
            assert usage is not None and usage.report == want
        assert {u.id for u in store.iter_utilisation()} == set(EXPECTED["utilisation_reports"])
        # a listing names each what its body says, from the columns the upgrade filled in
        listed, _ = store.query_utilisation(limit=50)
        assert {u.id: (u.instance_type, u.gpus, u.findings) for u in listed} == {
            report_id: (
                want.get("instance_type"),
                len(want["gpus"]),
                dict(Counter(g.get("finding") or "unclassified" for g in want["gpus"])),
            )
            for report_id, want in EXPECTED["utilisation_reports"].items()
        }
        ((ops_id, ops_body),) = EXPECTED["ops_reports"].items()
        assert store.ops_tables("h200-sxm") == [OpsReport.model_validate(ops_body)]
        assert summary(store) == EXPECTED["fleet"]
        # the keys stored before the upgrade still find their reports
        evil_id = EXPECTED["idempotency"]["k-evil"]
        evil = ProbeReport.model_validate(probes[evil_id]["report"])
        assert store.add_once(evil, "k-evil")[0].id == evil_id
        assert store.add_ops(OpsReport.model_validate(ops_body), "ops-1") == (ops_id, False)
        usages = [
            UtilisationReport.model_validate(u) for u in EXPECTED["utilisation_reports"].values()
        ]
        created = [store.add_utilisation_once(u, "u-0")[1] for u in usages]
        assert created.count(False) == 1  # the one stored under "u-0" before
    finally:
        store.close()
    again = SqlStore(v7_url)  # upgraded once: opening it again changes nothing
    assert again.revision == migrate.head() and again.count() == len(EXPECTED["probe_reports"])
    again.close()
