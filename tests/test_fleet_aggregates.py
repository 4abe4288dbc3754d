"""The fleet summary's aggregates (advisor/store/aggregates.py), kept in each report's write
transaction, against a scan of every stored check computed here by brute force: on SQLite and
PostgreSQL, for writes one by one and simultaneous, for the migration that fills them from a
store of before, and for a fleet whose ratios crowd the histogram's buckets."""

from __future__ import annotations

import os
import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.fleet.statistics import PLAUSIBLE_RATIO
from advisor.perf.calibration import CALIBRATION_CHECK, LINK_CHECK, NETWORK_CHECK
from advisor.store import SqlStore, StoreError, StoreUnreachable, bulk
from advisor.store.aggregates import RATIO_STEP
from advisor.store.base import token_id
from probes.report import ProbeReport
from tests import store_steps
from tests.fleet_scan import summarize_fleet
from tests.reports import as_probe_report
from tests.threads import simultaneously

PG_URL = os.environ.get("ADVISOR_TEST_POSTGRES_URL")
ACCELERATORS = ("h200-sxm", "h100-sxm", "l40s")
NAMES = (CALIBRATION_CHECK, LINK_CHECK, NETWORK_CHECK, "matmul_fp16", "h2d_pinned", "ecc")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'agg.db'}"
        return
    yield from _postgres()


def _postgres() -> Iterator[str]:
    """The test database, emptied before and after (skipped where there is none, failed in CI)."""
    if not PG_URL:
        if os.environ.get("CI"):
            pytest.fail("ADVISOR_TEST_POSTGRES_URL is not set in CI")
        pytest.skip("no PostgreSQL (set ADVISOR_TEST_POSTGRES_URL; scripts/start-postgres.sh)")
    store_steps.drop_all(PG_URL)
    yield PG_URL
    store_steps.drop_all(PG_URL)


def fleet(
    seed: int, n: int, *, spread: float, grid: bool = False
) -> list[tuple[ProbeReport, str | None]]:
    """`n` reports over a few hosts and accelerators (and runs that reached no GPU), each with
    its write token: ratios around 1 within `spread`, a few implausible, some repeated exactly,
    statuses of every kind, checks without an expectation."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        acc = rng.choice(ACCELERATORS)
        no_gpu = rng.random() < 0.05
        checks = []
        for name in NAMES:
            for _ in range(rng.randint(0, 3)):  # a node report holds a check once per GPU
                if grid:  # 0.3% apart: never three in one bucket of the histogram
                    ratio = 0.7 + 0.003 * rng.randint(0, 5)
                elif rng.random() < 0.15:
                    ratio = rng.choice([1.0, 0.5, 2.5, 0.01])
                else:
                    ratio = 1 + rng.uniform(-spread, spread)
                expected = None if name == "ecc" else 781.0
                status = rng.choice(["pass", "pass", "warn", "fail", "skip"])
                checks.append(
                    {
                        "name": name,
                        "status": status,
                        "measured": ratio * 781.0 if expected else None,
                        "expected": expected,
                    }
                )
        body = {
            "verdict": "error" if no_gpu else rng.choice(["pass", "warn", "fail"]),
            "accelerator": acc,
            "inventory": {"hostname": f"{acc[:4]}-{rng.randint(0, 7)}"},
            "checks": checks,
        }
        out.append(
            (
                as_probe_report(body),
                token_id(f"token-{rng.randint(0, 3)}") if rng.random() < 0.7 else None,
            )
        )
    return out


def brute_force(store: SqlStore, url: str) -> dict[str | None, dict[str, Any]]:
    """The summary's figures by a scan of every stored report and check, computed here."""
    reports, _ = store.query(store_filter())
    rows = store_steps.all_check_rows(url)
    out: dict[str | None, dict[str, Any]] = {}
    verdicts: dict[str | None, Counter[str]] = defaultdict(Counter)
    for r in reports:
        verdicts[r.accelerator][r.verdict] += 1
    for acc, counted in verdicts.items():
        mine = [r for r in rows if r.accelerator == acc]
        checks: dict[str, dict[str, Any]] = {}
        for name in sorted({r.name for r in mine}):
            runs = [r for r in mine if r.name == name]
            ratios = [
                r.measured / r.expected for r in runs if r.measured is not None and r.expected
            ]
            kept = sorted(x for x in ratios if PLAUSIBLE_RATIO.low <= x <= PLAUSIBLE_RATIO.high)
            checks[name] = {
                "count": len(runs),
                "ratios": len(kept),
                "ratio_median": _q(kept, 5),
                "ratio_p10": _q(kept, 1),
                "ratio_p90": _q(kept, 9),
                "ratios_ignored": len(ratios) - len(kept),
                **{f"status_{s}": n for s, n in Counter(r.status for r in runs).items()},
            }
        out[acc] = {
            "reports": sum(counted.values()),
            "verdicts": dict(counted),
            "hosts": len({r.host for r in mine}),
            "failing_hosts": sorted({r.host for r in mine if r.status == "fail"}),
            "checks": checks,
        }
    return out


def _q(values: list[float], tenth: int) -> float | None:
    if len(values) < 2:
        return values[0] if values else None
    return statistics.quantiles(values, n=10, method="inclusive")[tenth - 1]


def store_filter() -> Any:
    from advisor.store import ReportFilter

    return ReportFilter(limit=100_000)


def assert_matches(store: SqlStore, url: str, *, rel: float) -> None:
    want = brute_force(store, url)
    got = {s.accelerator: s for s in store.fleet()}
    assert set(got) == set(want)
    for acc, w in want.items():
        s = got[acc]
        assert (s.reports, s.verdicts, s.hosts, s.failing_hosts) == (
            w["reports"],
            w["verdicts"],
            w["hosts"],
            w["failing_hosts"],
        ), acc
        assert set(s.checks) == set(w["checks"]), acc
        for name, figures in w["checks"].items():
            got_figures = s.checks[name]
            assert set(got_figures) == set(figures), (acc, name)
            for key, value in figures.items():
                if value is None or isinstance(value, int):
                    assert got_figures[key] == value, (acc, name, key)
                else:
                    assert got_figures[key] == pytest.approx(value, rel=rel), (acc, name, key)


def add_all(store: SqlStore, reports: list[tuple[ProbeReport, str | None]]) -> None:
    for i, (report, token) in enumerate(reports):
        if i % 2:
            store.add_once(report, f"k{i}", None, token)
        else:
            store.add(report)


def test_aggregates_match_a_scan_exactly_where_ratios_are_apart(url: str) -> None:
    """Ratios 0.3% or more apart (never three in one bucket): every figure is exact, and the
    summary is the one the scan of every check (tests/fleet_scan.py summarize_fleet) gives,
    calibration vote and its tokens included."""
    store = SqlStore(url)
    add_all(store, fleet(1, 60, spread=0.0, grid=True))
    assert_matches(store, url, rel=1e-12)
    by_scan = {s.accelerator: s for s in scan_summary(store, url)}
    for s in store.fleet():
        assert s.calibration == by_scan[s.accelerator].calibration, s.accelerator
        assert s.link_calibration == by_scan[s.accelerator].link_calibration, s.accelerator
        assert s.link_calibration is not None and s.link_calibration.ratio is not None
        assert s.network_calibration == by_scan[s.accelerator].network_calibration
        assert s.network_calibration is not None and s.network_calibration.ratio is not None
    store.close()


def test_aggregates_match_a_scan_within_a_bucket_where_ratios_crowd(url: str) -> None:
    store = SqlStore(url)
    add_all(store, fleet(3, 80, spread=0.01))  # hundreds of ratios within 2%: full buckets
    assert_matches(store, url, rel=RATIO_STEP)
    store.close()


def test_simultaneous_writes_keep_the_aggregates_whole(url: str) -> None:
    store = SqlStore(url)
    reports = fleet(4, 24, spread=0.2)
    batches = iter([reports[i::8] for i in range(8)])

    def write() -> None:
        add_all(store, next(batches))

    simultaneously(write)
    assert store.count() == 24
    assert_matches(store, url, rel=RATIO_STEP)
    store.close()


def test_the_migration_fills_the_aggregates_from_the_stored_checks(url: str) -> None:
    store = SqlStore(url)
    add_all(store, fleet(5, 40, spread=0.2))
    before = store.fleet()
    store.close()
    # back to the store before aggregates through the migrations' downgrades (0011 makes the
    # check rows again from the bodies), then up again
    store_steps.down_to(url, "0007")
    assert store_steps.table_names(url) & {"fleet_verdicts", "fleet_hosts"} == set()
    again = SqlStore(url)
    assert again.fleet() == before
    assert_matches(again, url, rel=RATIO_STEP)
    again.close()


def scan_summary(store: SqlStore, url: str) -> Any:
    reports, _ = store.query(store_filter())
    verdicts: dict[str | None, list[str]] = defaultdict(list)
    for r in reports:
        verdicts[r.accelerator].append(r.verdict)
    return summarize_fleet(store_steps.all_check_rows(url), verdicts)


def test_a_bucket_keeps_its_lowest_and_highest_ratio_whatever_the_order(url: str) -> None:
    """Three ratios in one bucket (0.04% apart), the highest stored first: the quantiles come
    from the bucket's lowest and highest, exact here (evenly spaced)."""
    store = SqlStore(url)
    for i, ratio in enumerate((1.0004, 1.0, 1.0002)):
        check = {"name": "matmul_fp16", "status": "pass", "measured": ratio * 500, "expected": 500}
        store.add(
            as_probe_report(
                {"accelerator": "h200-sxm", "inventory": {"hostname": f"h{i}"}, "checks": [check]}
            )
        )
    (summary,) = store.fleet()
    figures = summary.checks["matmul_fp16"]
    assert figures["ratio_median"] == pytest.approx(1.0002, rel=1e-12)
    assert figures["ratio_p10"] == pytest.approx(1.0 + 0.0002 * 0.2, rel=1e-12)
    assert figures["ratio_p90"] == pytest.approx(1.0002 + 0.0002 * 0.8, rel=1e-12)
    store.close()


def test_an_infinite_measurement_is_stored_and_counted_as_implausible(url: str) -> None:
    """A check may measure infinity (a time of zero): JSON has no such number, so the aggregate
    rows travel to PostgreSQL with it as text (advisor/store/bulk.py: the left-out bucket's lowest
    and highest ratio); the body keeps it, and it is counted among the ratios left out, beside a
    finite run in the same report."""
    store = SqlStore(url)
    checks = [
        {"name": CALIBRATION_CHECK, "status": "pass", "measured": float("inf"), "expected": 500},
        {"name": CALIBRATION_CHECK, "status": "pass", "measured": 400.0, "expected": 500},
    ]
    store.add(
        as_probe_report(
            {"accelerator": "h200-sxm", "inventory": {"hostname": "h"}, "checks": checks}
        )
    )
    measured = sorted(r.measured for r in store_steps.all_check_rows(url) if r.measured)
    assert measured == [400.0, float("inf")]
    (summary,) = store.fleet()
    figures = summary.checks[CALIBRATION_CHECK]
    assert (figures["ratios"], figures["ratios_ignored"], figures["ratio_median"]) == (1, 1, 0.8)
    store.close()


def test_the_summary_is_built_once_per_count_of_reports_whoever_wrote_them(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept summary serves reads while no report is added, and a report added by another
    store on the same database (another process of the service) is in the next read."""
    from advisor.store import aggregates

    builds = []
    build = aggregates.summaries
    monkeypatch.setattr(aggregates, "summaries", lambda *a: builds.append(a) or build(*a))
    reader, writer = SqlStore(url), SqlStore(url)
    reports = fleet(6, 4, spread=0.1)
    add_all(writer, reports[:3])
    first = reader.fleet()
    assert reader.fleet() == first and len(builds) == 1
    add_all(writer, reports[3:])
    assert sum(s.reports for s in reader.fleet()) == 4 and len(builds) == 2
    assert_matches(reader, url, rel=RATIO_STEP)
    reader.close()
    writer.close()


def test_a_database_of_the_matmul_only_votes_upgrades(url: str) -> None:
    """A store at migration 0008 (the votes of matmul_bf16 alone, in fleet_calibration and its
    tokens) upgrades to the votes of every voted check: the old tables go, the summary is the
    one a scan gives, the GPU link's vote included."""
    store = SqlStore(url)
    add_all(store, fleet(6, 40, spread=0.0, grid=True))
    before = store.fleet()
    store.close()
    store_steps.down_to(url, "0008")  # through the migrations' own downgrades
    assert {"fleet_calibration", "fleet_calibration_tokens"} <= store_steps.table_names(url)
    again = SqlStore(url)
    assert again.fleet() == before
    assert any(s.link_calibration is not None for s in before)
    assert not {"fleet_calibration", "fleet_calibration_tokens"} & store_steps.table_names(url)
    again.close()


def test_the_fleet_wide_rows_are_written_last_before_the_commit(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every writer updates the fleet-wide counts and histograms (one row per accelerator and
    check): written last, their row locks are held only for their own upserts and the commit,
    not while the report's own host rows are written. The order is fixed for every writer, and
    kept on PostgreSQL, where the upserts travel in one pipeline: the stored aggregates are
    those of a scan (the other tests) and each table's rows are written."""
    store = SqlStore(url)
    add_all(store, fleet(5, 1, spread=0.1))  # migrated and warm
    written: list[list[str]] = []
    real = bulk.upsert_all

    def spy(conn: Any, upserts: Any) -> None:
        written.append([u.table.name for u in upserts if u.rows])
        real(conn, upserts)

    piped: list[int] = []
    real_pipelined = bulk._pipelined

    def pipelined(conn: Any, statements: Any) -> None:
        piped.append(len(statements))
        real_pipelined(conn, statements)

    monkeypatch.setattr(bulk, "upsert_all", spy)
    monkeypatch.setattr(bulk, "_pipelined", pipelined)
    store.add(fleet(6, 1, spread=0.1)[0][0])
    shared = ["fleet_check_units", "fleet_verdicts", "fleet_check_statuses", "fleet_ratios"]
    (tables,) = written
    # on PostgreSQL, one round trip for them all
    assert piped == ([len(tables)] if url.startswith("postgresql") else [])
    assert tables[-len(shared) :] == shared, tables
    assert {"fleet_host_checks", "fleet_host_ratios", "fleet_latest_hosts"} <= set(
        tables[: -len(shared)]
    ), tables
    store.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from _postgres()


def test_a_statement_failing_in_the_pipeline_stores_nothing_and_is_worded(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upsert PostgreSQL refuses inside the pipeline: the store's error names PostgreSQL's
    reason, the report and every aggregate row roll back, and the next write goes through."""
    store = SqlStore(pg_url)
    reports = fleet(7, 3, spread=0.1)
    add_all(store, reports[:1])
    before = store.fleet()
    real = bulk._json
    monkeypatch.setattr(bulk, "_json", lambda rows: real(rows)[:-1])  # cut short: not JSON
    with pytest.raises(StoreError, match="PostgreSQL: .*json") as raised:
        store.add(reports[1][0])
    assert not isinstance(raised.value, StoreUnreachable)
    assert store.count() == 1 and store.fleet() == before
    monkeypatch.setattr(bulk, "_json", real)
    store.add(reports[2][0])
    assert store.count() == 2
    store.close()


def test_a_connection_lost_in_the_pipeline_is_dropped_from_the_pool(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's connection ended by the server between the report's insert and its
    aggregates: the store says PostgreSQL is unreachable and the pool drops the connection, so
    the next write takes a live one and goes through."""
    import sqlalchemy as sa

    from advisor.store import aggregates

    store = SqlStore(pg_url)
    reports = fleet(8, 2, spread=0.1)
    admin = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
    real = aggregates.apply

    def killed_first(conn: Any, d: Any) -> None:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        with admin.begin() as other:
            other.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})")
        real(conn, d)

    monkeypatch.setattr(aggregates, "apply", killed_first)
    with pytest.raises(StoreUnreachable):
        store.add(reports[0][0])
    monkeypatch.setattr(aggregates, "apply", real)
    store.add(reports[1][0])
    assert store.count() == 1
    admin.dispose()
    store.close()


def test_a_reports_deltas_are_those_of_its_check_rows() -> None:
    """The store's write takes a report's deltas in one pass over its checks
    (aggregates.report_deltas): the same as the deltas of its check rows, which the migrations
    and the scan read, for reports of every kind, with and without a write token."""
    from advisor.fleet.records import probe_record
    from advisor.store import aggregates
    from advisor.store.base import check_rows

    for i, (report, token) in enumerate(fleet(9, 60, spread=0.2)):
        record = probe_record(f"r{i}", report)
        want = aggregates.deltas([record], check_rows(f"r{i}", report, token))
        assert aggregates.report_deltas(record, report, token) == want, i
