"""The review's digest of every probe report read from the store's aggregates (advisor/store/
digest.py, kept on each write by advisor/store/aggregates.py) against the digest computed by one
pass over the same reports (advisor.fleet.digest.digest_of), on SQLite and PostgreSQL: reports
written out of time order, node reports of several GPUs, single-GPU runs, a machine without a
GPU, failed ranks, drivers changing, implausible ratios; then the whole review, and the
migration that fills the aggregates from a store written before them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from advisor.catalog import Catalog
from advisor.fleet.digest import FleetDigest, digest_of
from advisor.fleet.records import probe_record
from advisor.perf.calibration import CALIBRATION_CHECK, LINK_CHECK
from advisor.review import build_review, from_store
from advisor.review.data import ReviewData
from advisor.store import SqlStore
from advisor.store.aggregates import HOST_RATIO_STEP, RATIO_STEP
from advisor.store.base import token_id
from probes.report import ProbeReport
from tests import store_steps
from tests.reports import as_probe_report
from tests.test_fleet_aggregates import url  # noqa: F401 - the fixture: SQLite and PostgreSQL

CHECKS = (
    (CALIBRATION_CHECK, "TFLOP/s", 781.0),
    (LINK_CHECK, None, 368.1),
    ("h2d_pinned", "GB/s", 55.0),
    ("ecc", None, None),
)
START = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def node_report(rng: random.Random, host: str, acc: str, day: int) -> ProbeReport:
    """One host's run on `day` (hours spread so that no two reports share a time): a node
    report of 2-4 GPUs, or a single-GPU run, or (host "cpu") a run that reached no GPU."""
    created = START + dt.timedelta(days=day, minutes=rng.randint(0, 600))
    if host == "cpu":
        return as_probe_report(
            {
                "created_at": created.isoformat(),
                "verdict": "error",
                "accelerator": None,
                "inventory": {"hostname": host},
                "checks": [{"name": "cuda_available", "status": "fail"}],
            }
        )
    gpus = rng.randint(1, 4)
    checks = []
    for gpu in range(gpus):
        for name, unit, expected in CHECKS:
            ratio = rng.choice([0.02, 1.7]) if rng.random() < 0.05 else rng.uniform(0.7, 1.05)
            status = "fail" if ratio < 0.75 else rng.choice(["pass", "pass", "warn"])
            checks.append(
                {
                    "name": name,
                    "status": status,
                    "gpu": gpu,
                    "unit": unit,
                    "measured": ratio * expected if expected else None,
                    "expected": expected,
                }
            )
    verdicts = [rng.choice(["pass", "pass", "warn", "fail"]) for _ in range(gpus)]
    body: dict[str, Any] = {
        "created_at": created.isoformat(),
        "verdict": max(verdicts, key=["pass", "warn", "fail"].index),
        "accelerator": acc,
        "device": rng.randint(0, gpus - 1),
        "inventory": {
            "hostname": host,
            "driver_version": f"580.{day // 3}",
            "gpu": {"uuid": f"GPU-{host}-0", "name": acc.upper()},
        },
        "checks": checks,
    }
    if gpus > 1:
        body["gpu_verdicts"] = [
            {"gpu": g, "uuid": f"GPU-{host}-{g}", "name": acc.upper(), "verdict": v}
            for g, v in enumerate(verdicts)
        ]
    if rng.random() < 0.1:
        body["failed_ranks"] = [{"rank": 1, "detail": "exit 9"}]
    return as_probe_report(body)


def fleet(seed: int, hosts: int = 9, days: int = 5) -> list[ProbeReport]:
    """Every host's runs over `days`, written in a shuffled order (not the order of their
    times), and the machine without a GPU."""
    rng = random.Random(seed)
    accs = ("h200-sxm", "h100-sxm", "l40s")
    names = [(f"node-{i}", accs[i % 3]) for i in range(hosts)] + [("cpu", "")]
    out = [node_report(rng, h, a, d) for h, a in names for d in range(days)]
    rng.shuffle(out)
    return out


def store_all(store: SqlStore, reports: list[ProbeReport]) -> list[str]:
    rng = random.Random(1)
    return [
        store.add_once(r, None, token_id=token_id(f"t{rng.randint(0, 2)}"))[0].id for r in reports
    ]


def scanned(reports: list[ProbeReport], ids: list[str]) -> FleetDigest:
    return digest_of([probe_record(i, r) for i, r in zip(ids, reports, strict=True)])


def near(got: float | None, want: float | None, rel: float) -> bool:
    return got is None if want is None else got == pytest.approx(want, rel=rel)


def assert_same(got: FleetDigest, want: FleetDigest) -> None:
    """Counts, latest reports and units exactly; quantiles within their histogram's step."""
    plain = ("reports", "verdicts", "first_report", "last_report", "hosts", "gpus")
    for name in plain:
        assert getattr(got, name) == getattr(want, name), name
    assert list(got.statistics.checks) == list(want.statistics.checks)
    for key, st in want.statistics.checks.items():
        mine = got.statistics.checks[key]
        exact = ("unit", "runs", "ratios", "ignored", "statuses")
        assert [getattr(mine, f) for f in exact] == [getattr(st, f) for f in exact], key
        for f in ("median", "p10", "p90"):
            assert near(getattr(mine, f), getattr(st, f), RATIO_STEP), (key, f)
        assert (mine.vote.hosts, mine.vote.runs) == (st.vote.hosts, st.vote.runs), key
        assert near(mine.vote.ratio, st.vote.ratio, HOST_RATIO_STEP), key
    hosts = {(h.accelerator, h.host, h.check): h for h in got.statistics.hosts}
    assert len(hosts) == len(want.statistics.hosts)
    for h in want.statistics.hosts:
        held = hosts[(h.accelerator, h.host, h.check)]
        assert (held.runs, held.failed) == (h.runs, h.failed)
        assert near(held.median, h.median, HOST_RATIO_STEP), h


def test_the_stores_digest_is_the_scans(url: str) -> None:  # noqa: F811
    reports = fleet(3)
    store = SqlStore(url)
    ids = store_all(store, reports)
    got, want = store.fleet_digest(), scanned(reports, ids)
    store.close()
    assert_same(got, want)
    # what the fleet looks like, by hand: 9 hosts of 1-4 GPUs and the machine without one
    assert (got.reports, len(got.hosts)) == (50, 10)
    assert got.hosts["cpu"].gpus == () and "cpu" not in {g.host for g in got.gpus.values()}
    assert got.first_report is not None and got.first_report.startswith("2026-11-01")
    assert got.last_report is not None and got.last_report.startswith("2026-11-05")
    assert {h.driver_version for h in got.hosts.values()} == {"580.1", None}  # day 4's driver
    assert got.statistics.checks[("h200-sxm", "h2d_pinned")].unit == "GB/s"


def test_the_latest_report_is_the_latest_made_not_the_last_written(url: str) -> None:  # noqa: F811
    """A host's report from the day before, written after today's, changes neither its latest
    report nor its GPUs' (their verdicts, driver); the earliest time is still counted."""
    rng = random.Random(5)
    today, yesterday = node_report(rng, "n", "h200-sxm", 3), node_report(rng, "n", "h200-sxm", 2)
    yesterday = yesterday.model_copy(update={"verdict": "fail"})
    store = SqlStore(url)
    ids = store_all(store, [today, yesterday])
    got = store.fleet_digest()
    store.close()
    assert_same(got, scanned([today, yesterday], ids))
    assert got.hosts["n"].verdict == today.verdict and got.hosts["n"].driver_version == "580.1"
    assert got.first_report is not None and got.first_report.startswith("2026-11-03")


def test_the_review_from_the_store_is_the_review_of_its_reports(
    url: str,  # noqa: F811
    shipped: Catalog,
) -> None:
    """Inventory, nodes and ratio rows the same as the review read from the reports one by
    one; outliers the same (no host's median falls within 1% of the fleet's p10 here)."""
    reports = fleet(11)
    store = SqlStore(url)
    ids = store_all(store, reports)
    from_aggregates = build_review(from_store(store), shipped, workloads=[])
    store.close()
    records = [probe_record(i, r) for i, r in zip(ids, reports, strict=True)]
    scan = build_review(
        ReviewData(source="the service's store", probes=records), shipped, workloads=[]
    )
    mine, theirs = dataclasses.asdict(from_aggregates), dataclasses.asdict(scan)
    for key in ("inventory", "nodes", "notes", "findings", "calibration"):
        assert mine[key] == theirs[key], key
    assert [(r["accelerator"], r["check"], r["reports"]) for r in mine["ratios"]] == [
        (r["accelerator"], r["check"], r["reports"]) for r in theirs["ratios"]
    ]
    flagged = [(o["host"], o["check"], o["runs"], o["failed"]) for o in mine["outliers"]]
    assert flagged == [(o["host"], o["check"], o["runs"], o["failed"]) for o in theirs["outliers"]]
    assert flagged  # failed runs were flagged


def test_a_store_of_before_upgrades_and_its_review_reads_the_same(url: str) -> None:  # noqa: F811
    """Down to 0009 through the migrations' own downgrades (the check rows made again from the
    bodies, the review's tables gone, 0008's per-host counts back as the sums of each host's
    checks), then opened: the upgrade fills the
    aggregates from the stored reports, and the digest and summary are the ones kept on write."""
    reports = fleet(7, hosts=6, days=3)
    store = SqlStore(url)
    store_all(store, reports)
    before, summary = store.fleet_digest(), store.fleet()
    store.close()
    store_steps.down_to(url, "0009")
    assert "fleet_latest_hosts" not in store_steps.table_names(url)
    runs: Counter[tuple[str, str]] = Counter()
    failed: Counter[tuple[str, str]] = Counter()
    # the check rows 0011's downgrade made again from the bodies
    for acc, host, status in store_steps.query(
        url, "SELECT accelerator, host, status FROM probe_checks"
    ):
        runs[(acc or "", host)] += 1
        failed[(acc or "", host)] += status == "fail"
    assert sum(runs.values()) == sum(len(r.checks) for r in reports)
    kept = store_steps.query(url, "SELECT accelerator, host, runs, failed FROM fleet_hosts")
    assert {(a, h): (r, f) for a, h, r, f in kept} == {k: (n, failed[k]) for k, n in runs.items()}
    again = SqlStore(url)
    assert again.fleet_digest() == before and again.fleet() == summary
    again.close()


H200_RUN = (
    Path(__file__).resolve().parents[1]
    / "benchmarks/results/deploy-gpu-2026-12-04-h200-driver580.159.04-torch2.11.0_cu130"
)


def test_the_reports_of_a_real_h200_are_digested_as_they_read(url: str) -> None:  # noqa: F811
    """The three reports one H200 made (the Job's node probe, the sbatch task's, the level-1
    health check), stored: the digest equals the scan, and by hand from the files: one host,
    its one GPU by UUID, the bf16 matmul's ratio the median of its three runs."""
    bodies = [
        json.loads((H200_RUN / f).read_bytes()) for f in ("probe-job.json", "probe-gpu0.json")
    ]
    health = json.loads((H200_RUN / "health.json").read_bytes())
    assert health.pop("health")["status"] == "ok"  # --health-check --json: the report and this
    reports = [ProbeReport.model_validate(b) for b in [*bodies, health]]
    store = SqlStore(url)
    ids = store_all(store, reports)
    got = store.fleet_digest()
    store.close()
    assert_same(got, scanned(reports, ids))
    assert (got.reports, got.verdicts, list(got.hosts)) == (3, {"pass": 3}, ["vm"])
    assert [g.key for g in got.hosts["vm"].gpus] == ["GPU-aedfc982-8400-7c42-14fb-e39ef3a27d40"]
    assert got.last_report == "2026-12-04T11:00:55.278115Z"  # the health check, made last
    bf16 = [
        c.measured / c.expected
        for r in reports
        for c in r.checks
        if c.name == CALIBRATION_CHECK and c.measured is not None and c.expected
    ]
    assert len(bf16) == 3  # the level-1 health check times the bf16 matmul too
    stats = got.statistics.checks[("h200-sxm", CALIBRATION_CHECK)]
    assert stats.runs == 3 and stats.median == pytest.approx(sorted(bf16)[1], rel=RATIO_STEP)
