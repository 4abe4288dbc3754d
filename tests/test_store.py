"""The report store on every backend: SQLite always, PostgreSQL where ADVISOR_TEST_POSTGRES_URL
points to one (.ci/run starts one; in CI its absence is a failure, not a skip)."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from advisor.store import ReportFilter, SqlStore, Store, StoreError, migrate, open_store
from probes.report import ProbeReport
from tests import store_steps
from tests.memory_store import MemoryStore
from tests.reports import as_probe_report
from tests.threads import simultaneously

PG_URL = os.environ.get("ADVISOR_TEST_POSTGRES_URL")
BACKENDS = ["sqlite", "postgres", "memory"]


def report(
    host: str = "gpu-1", verdict: str = "pass", bf16: float = 780.0, acc: str = "h200-sxm"
) -> ProbeReport:
    return as_probe_report(
        {
            "verdict": verdict,
            "accelerator": acc,
            "inventory": {"hostname": host},
            "checks": [
                {
                    "name": "matmul_bf16",
                    "status": "pass" if bf16 > 700 else "fail",
                    "measured": bf16,
                    "expected": 781.0,
                },
                {"name": "ecc", "status": "pass", "detail": "ECC is on"},
            ],
        }
    )


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        s: Store = open_store(f"sqlite:///{tmp_path}/reports.db")
    elif request.param == "memory":
        s = MemoryStore()
    else:
        if not PG_URL:
            if os.environ.get("CI"):
                pytest.fail("ADVISOR_TEST_POSTGRES_URL is not set in CI")
            pytest.skip("no PostgreSQL (set ADVISOR_TEST_POSTGRES_URL; scripts/start-postgres.sh)")
        s = open_store(PG_URL)
        _truncate_pg(PG_URL)
    yield s
    s.close()


def _truncate_pg(url: str) -> None:
    store_steps.truncate_reports(url)


def test_add_get_roundtrip_is_exact(store: Store) -> None:
    body = report()
    stored = store.add(body)
    again = store.get(stored.id)
    assert again is not None and again.report == body.model_dump(mode="json")
    assert (again.host, again.accelerator, again.verdict) == ("gpu-1", "h200-sxm", "pass")
    assert store.get(uuid.uuid4().hex) is None


def test_filters_and_pagination(store: Store) -> None:
    base = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    for i in range(7):
        store.add(
            report(host=f"h{i % 3}", verdict="fail" if i % 2 else "pass"),
            base + dt.timedelta(hours=i),
        )
    items, total = store.query(ReportFilter(limit=3))
    assert total == 7 and len(items) == 3
    assert [r.received_at for r in items] == sorted((r.received_at for r in items), reverse=True)
    page2, _ = store.query(ReportFilter(limit=3, offset=3))
    assert not {r.id for r in items} & {r.id for r in page2}
    assert store.query(ReportFilter(host="h0"))[1] == 3
    assert store.query(ReportFilter(verdict="fail"))[1] == 3
    assert store.query(ReportFilter(accelerator="nope"))[1] == 0
    window = ReportFilter(since=base + dt.timedelta(hours=2), until=base + dt.timedelta(hours=5))
    assert store.query(window)[1] == 3  # hours 2, 3, 4: since inclusive, until exclusive
    for flt in (ReportFilter(limit=3), ReportFilter(limit=3, offset=3), window):
        full, total = store.query(flt)
        named = ("id", "received_at", "host", "accelerator", "verdict")
        listed = [tuple(getattr(r, n) for n in named) for r in full]
        summaries, counted = store.summaries(flt)
        assert [tuple(getattr(r, n) for n in named) for r in summaries] == listed
        assert counted == total


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_listing_reads_no_report_body(backend: str, tmp_path: Path) -> None:
    """A page of summaries is read without the reports' bodies (a page of 500 node reports is
    32 MB of them): no statement names them, and with every stored body made unreadable the
    listing still answers."""
    if backend == "postgres" and not PG_URL:
        pytest.skip("no PostgreSQL (set ADVISOR_TEST_POSTGRES_URL; scripts/start-postgres.sh)")
    url = PG_URL if backend == "postgres" else f"sqlite:///{tmp_path}/reports.db"
    assert url is not None
    if backend == "postgres":
        _truncate_pg(url)
    store = open_store(url)
    assert isinstance(store, SqlStore)
    ids = {store.add(report(host=f"h{i}")).id for i in range(3)}
    with store._writer.begin() as conn:
        conn.execute(sa.text("UPDATE probe_reports SET body = 'not json'"))
    with pytest.raises(json.JSONDecodeError):
        store.query(ReportFilter())
    sent: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        sent.append(statement)

    sa.event.listen(store._reader, "before_cursor_execute", seen)
    summaries, total = store.summaries(ReportFilter())
    assert {s.id for s in summaries} == ids and total == 3
    assert sent and not [text for text in sent if "body" in text], sent  # not even fetched
    store.close()


def test_hostile_values_are_data_not_sql(store: Store) -> None:
    evil = "x'; DROP TABLE probe_reports; --"
    stored = store.add(report(host=evil))
    assert store.query(ReportFilter(host=evil))[1] == 1
    assert store.get(stored.id) is not None and store.count() == 1


def test_fleet_summary_ratios_and_failing_hosts(store: Store) -> None:
    for host, bf16 in (("a", 781.0), ("b", 702.9), ("c", 390.5), ("d", 800.0)):
        store.add(report(host=host, bf16=bf16, verdict="fail" if bf16 < 700 else "pass"))
    (summary,) = store.fleet("h200-sxm")
    assert (summary.accelerator, summary.reports, summary.hosts) == ("h200-sxm", 4, 4)
    assert summary.verdicts == {"pass": 3, "fail": 1}
    stats = summary.checks["matmul_bf16"]
    ratios = sorted(v / 781.0 for v in (781.0, 702.9, 390.5, 800.0))
    assert stats["ratio_median"] == pytest.approx((ratios[1] + ratios[2]) / 2)
    assert stats["ratio_p10"] == pytest.approx(ratios[0] + (ratios[1] - ratios[0]) * 0.3)
    assert summary.failing_hosts == ["c"]
    assert summary.checks["ecc"]["ratio_median"] is None and summary.checks["ecc"]["count"] == 4


def test_fleet_summary_of_one_check(store: Store) -> None:
    """The fleet calibration reads one check (CALIBRATION_CHECK) on every stored report: the
    store aggregates that check alone, with the same figures as in the whole summary."""
    for host, bf16 in (("a", 781.0), ("b", 702.9), ("c", 390.5)):
        store.add(report(host=host, bf16=bf16))
    (whole,) = store.fleet("h200-sxm")
    (one,) = store.fleet("h200-sxm", "matmul_bf16")
    assert set(one.checks) == {"matmul_bf16"} and len(whole.checks) > 1
    assert one.checks["matmul_bf16"] == whole.checks["matmul_bf16"]
    assert (one.reports, one.verdicts) == (whole.reports, whole.verdicts)


def test_a_checks_ratios_host_by_host_are_every_plausible_run_of_it(store: Store) -> None:
    """The fleet calibration's whole read: each (accelerator, host)'s plausible ratios of the
    check, ascending, with its write tokens; an implausible run (0.01) and runs of other checks
    left out. By hand: 781 and 702.9 of 781 are 1.0 and 0.9; 390.5 of 781 is 0.5."""
    for host, bf16, acc, token in (
        ("a", 781.0, "h200-sxm", "t1"),
        ("a", 702.9, "h200-sxm", "t2"),
        ("a", 7.81, "h200-sxm", "t3"),
        ("b", 390.5, "h100-sxm", None),
    ):
        store.add_once(report(host=host, bf16=bf16, acc=acc), None, token_id=token)
    found = sorted(store.host_ratios("matmul_bf16"), key=lambda h: h.host)
    assert [(h.accelerator, h.host, h.token_ids) for h in found] == [
        ("h200-sxm", "a", ("t1", "t2")),
        ("h100-sxm", "b", ()),
    ]
    assert [list(h.ratios) for h in found] == [[pytest.approx(0.9), 1.0], [0.5]]
    assert store.host_ratios("no_such_check") == []


def _upgrade_from_step_1_keeps_reports(url: str) -> None:
    """A database written by schema step 1 upgrades to the newest revision without losing a
    report, and the check table (step 2) is filled from the stored bodies."""
    store_steps.at_revision(url, "0001")
    ids = [store_steps.add_v1_report(url, report(host=f"h{i}", bf16=700.0 + i)) for i in range(3)]
    new = SqlStore(url)
    assert new.revision == migrate.head()
    assert all(new.get(i) is not None for i in ids)
    (summary,) = new.fleet()
    assert summary.checks["matmul_bf16"]["count"] == 3
    new.close()


def test_sqlite_schema_upgrade_keeps_reports(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    _upgrade_from_step_1_keeps_reports(url)
    with sqlite3.connect(tmp_path / "old.db") as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (migrate.head(),)
        ]


def test_postgres_schema_upgrade_keeps_reports() -> None:
    if not PG_URL:
        if os.environ.get("CI"):
            pytest.fail("ADVISOR_TEST_POSTGRES_URL is not set in CI")
        pytest.skip("no PostgreSQL")
    store_steps.drop_all(PG_URL)
    _upgrade_from_step_1_keeps_reports(PG_URL)


def test_bad_urls_and_unreachable_databases() -> None:
    with pytest.raises(StoreError, match="unsupported database URL 'mysql'"):
        open_store("mysql://x")
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL"):
        open_store("postgresql://nobody:secret@127.0.0.1:1/none")


def test_secrets_stay_out_of_errors() -> None:
    with pytest.raises(StoreError) as info:
        open_store("postgresql://nobody:hunter2@127.0.0.1:1/none")
    assert "hunter2" not in str(info.value)


def test_sqlite_is_durable_mode(tmp_path: Path) -> None:
    s = open_store(f"sqlite:///{tmp_path / 'd.db'}")
    with sqlite3.connect(tmp_path / "d.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    s.close()


def test_report_body_is_stored_verbatim(tmp_path: Path) -> None:
    s = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    body = report(host="Δ GPU ✓")
    stored = s.add(body)
    assert s.get(stored.id).report == json.loads(body.model_dump_json())  # type: ignore[union-attr]
    s.close()


def test_add_once_stores_a_key_once_even_when_posted_simultaneously(store: Store) -> None:
    body = report(host="once")
    results = [
        (stored.id, created)
        for stored, created in simultaneously(lambda: store.add_once(body, "key-1"))
    ]
    assert sorted(created for _, created in results) == [False] * 7 + [True]
    assert len({i for i, _ in results}) == 1 and store.count() == 1
    (summary,) = store.fleet()
    assert summary.checks["matmul_bf16"]["count"] == 1  # check rows stored once too
    other, created = store.add_once(body, "key-2")
    assert created and other.id != results[0][0] and store.count() == 2


def test_postgresql_stores_report_bodies_with_lz4() -> None:
    """Migration 0013: the bodies of every report table are compressed with LZ4 on a
    PostgreSQL that offers it (the test command's does): a body large enough to be compressed
    is stored so, and reads back whole."""
    if not PG_URL:
        pytest.skip("no PostgreSQL (set ADVISOR_TEST_POSTGRES_URL; scripts/start-postgres.sh)")
    store = open_store(PG_URL)  # migrated first: the database may be new
    _truncate_pg(PG_URL)
    assert isinstance(store, SqlStore)
    big = report(host="lz4-host")
    big = big.model_copy(update={"checks": big.checks * 200})  # about 60 kB of JSON
    stored = store.add(big)
    with store._writer.connect() as conn:
        methods = conn.execute(
            sa.text(
                "SELECT c.relname, a.attcompression FROM pg_attribute a JOIN pg_class c"
                " ON c.oid = a.attrelid WHERE a.attname = 'body' AND c.relname IN"
                " ('probe_reports', 'utilisation_reports', 'ops_reports')"
            )
        ).all()
        used = conn.execute(
            sa.text("SELECT pg_column_compression(body) FROM probe_reports WHERE id = :id"),
            {"id": stored.id},
        ).scalar_one()
    assert dict(methods) == dict.fromkeys(
        ("probe_reports", "utilisation_reports", "ops_reports"), "l"
    )
    assert used == "lz4"
    again = store.get(stored.id)
    assert again is not None and again.report == stored.report
    store.close()
