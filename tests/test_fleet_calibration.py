"""The service's fleet calibration, kept in memory as reports arrive (advisor/api/state.py
FleetCalibration): always the calibration a whole read of the store gives (the fleet summary's
statistics, advisor.fleet.statistics), without reading the store whole for each report."""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.state import FleetCalibration
from advisor.perf.calibration import (
    CALIBRATION_CHECK,
    LINK_CHECK,
    NETWORK_CHECK,
    Calibration,
    calibration_from,
)
from advisor.store import Store, open_store
from advisor.store.base import check_rows
from probes.report import ProbeReport
from tests.test_api_hardening import AUTH, CountingStore, settings
from tests.test_estimate_api import probe_report
from tests.threads import simultaneously


def from_store(store: Store) -> dict[str, Calibration]:
    """The calibration a whole read gives: the fleet summary's vote (one per host)."""
    out = {}
    for s in store.fleet(check=CALIBRATION_CHECK):
        vote = s.calibration
        if s.accelerator and vote is not None:
            cal = calibration_from(vote.ratio, vote.runs, vote.hosts, vote.tokens)
            if cal is not None:
                out[s.accelerator] = cal
    return out


Checks = list[tuple[str, float | None, float]]  # (name, measured, expected)


def report(host: str, accelerator: str | None, checks: Checks) -> dict[str, Any]:
    body = probe_report(host, 1.0)
    body["accelerator"] = accelerator
    body["checks"] = [
        {"name": name, "status": "pass", "measured": measured, "expected": expected, "detail": "t"}
        for name, measured, expected in checks
    ]
    return body


BF16 = CALIBRATION_CHECK
# (host, accelerator, checks): each row guards a case the running median must treat as the
# fleet summary does.
REPORTS: list[tuple[str, str, Checks]] = [
    ("a1", "h100-sxm", [(BF16, 700.0, 989.0)]),  # a plausible ratio
    ("a2", "h100-sxm", [(BF16, 800.0, 989.0)]),  # a second: the median is their mean
    ("a3", "h100-sxm", [(BF16, 350.0 * 989, 989.0)]),  # outside the band: ignored
    ("a4", "h100-sxm", [(BF16, 0.01, 989.0)]),  # below the band: ignored
    ("a5", "h100-sxm", [(BF16, None, 989.0)]),  # nothing measured: no ratio
    ("a6", "h100-sxm", [(BF16, 700.0, 0.0)]),  # no expectation: no ratio
    ("a7", "h100-sxm", [("matmul_fp16", 100.0, 989.0)]),  # another check: not calibration
    ("b1", "a100-sxm4-80gb", [(BF16, 250.0, 312.0), (BF16, 260.0, 312.0)]),  # two runs, one report
    ("a8", "h100-sxm", [(BF16, 900.0, 989.0), ("matmul_fp16", 1.0, 989.0)]),  # odd count
    ("b2", "a100-sxm4-80gb", [(BF16, 1.5 * 312.0, 312.0)]),  # the band's edge: kept
]


def test_each_arrival_gives_what_a_whole_read_gives(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/c.db")
    calibration = FleetCalibration(store)
    assert calibration.refresh_if_changed()
    for i, (host, accelerator, checks) in enumerate(REPORTS):
        with calibration.storing() as stored_rows:
            body = ProbeReport.model_validate(report(host, accelerator, checks))
            stored, _ = store.add_once(body, f"key-{i}")
            stored_rows(check_rows(stored.id, body))
        assert calibration.value == from_store(store), (i, host)
    assert calibration.value["h100-sxm"].reports == 3
    assert calibration.recomputed == 1, "a report read the store whole"
    assert not calibration.refresh_if_changed(), "every report was counted"


def post_all(client: TestClient, reports: list[Any], keys: itertools.count[int]) -> None:
    for body in reports:
        headers = {**AUTH, "Idempotency-Key": f"k{next(keys)}"}
        assert client.post("/v1/probe-reports", json=body, headers=headers).status_code == 201


def test_reports_posted_read_nothing_whole(tmp_path: Path) -> None:
    counting = CountingStore(open_store(f"sqlite:///{tmp_path}/h.db"))
    app = create_app(settings(tmp_path), store=counting)
    keys = itertools.count()
    with TestClient(app) as c:
        before = counting.fleet_reads
        post_all(c, [report(*row) for row in REPORTS], keys)
        # the same report again under its key: stored once, counted once
        again = {**AUTH, "Idempotency-Key": "k0"}
        assert (
            c.post("/v1/probe-reports", json=report(*REPORTS[0]), headers=again).status_code == 200
        )
        assert counting.fleet_reads == before, "a report read the store whole"
        state = app.state.advisor
        assert state.calibration.value == from_store(counting.store)


def test_reports_other_processes_store_are_read_once_and_counted_once(tmp_path: Path) -> None:
    app = create_app(settings(tmp_path))
    other = open_store(f"sqlite:///{tmp_path}/h.db")  # a second service on the same database
    keys = itertools.count()
    with TestClient(app) as c:
        state = app.state.advisor
        post_all(c, [report(*row) for row in REPORTS[:3]], keys)
        for i, row in enumerate(REPORTS[3:8]):
            other.add_once(ProbeReport.model_validate(report(*row)), f"other-{i}")
        assert state.calibration.value != from_store(other), "the others' reports counted early"
        state.refresh()
        assert state.calibration.value == from_store(other)
        post_all(c, [report(*row) for row in REPORTS[8:]], keys)
        assert state.calibration.value == from_store(other)
        assert not state.calibration.refresh_if_changed(), "a report was counted twice"


def take_one(calls: list[Callable[[], int]]) -> int:
    return calls.pop()()  # list.pop is atomic: each thread takes a different call


class SlowStore:
    """A real store that dawdles after each insert: the moment a whole read can slip in before
    the report is counted (without the lock, that counts it twice)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add_once(self, *args: Any) -> Any:
        found = self.store.add_once(*args)
        time.sleep(0.005)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_simultaneous_reports_beside_whole_reads_are_each_counted_once(tmp_path: Path) -> None:
    slow = SlowStore(open_store(f"sqlite:///{tmp_path}/h.db"))
    app = create_app(settings(tmp_path), store=slow)
    other = open_store(f"sqlite:///{tmp_path}/h.db")
    keys = itertools.count()
    ratios = itertools.count(500)
    with TestClient(app) as c:
        state = app.state.advisor

        def post_one() -> int:
            ratio = next(ratios) / 1000
            body = probe_report(f"h{ratio}", ratio)
            headers = {**AUTH, "Idempotency-Key": f"k{next(keys)}"}
            return int(c.post("/v1/probe-reports", json=body, headers=headers).status_code)

        def refresh_while_others_store() -> int:
            other.add(ProbeReport.model_validate(probe_report("other", 0.5)))
            state.refresh()
            return 201

        for rounds in range(1, 4):
            calls: list[Callable[[], int]] = [post_one] * 24 + [refresh_while_others_store] * 8
            total = len(calls)
            statuses = simultaneously(functools.partial(take_one, calls), times=total)
            assert statuses == [201] * total
            assert not state.calibration.refresh_if_changed(), "counted twice or never"
            assert state.calibration.value == from_store(other)
            assert state.calibration.value["h100-sxm"].reports == 32 * rounds


@pytest.mark.parametrize("accelerator", [None, ""])
def test_reports_without_an_accelerator_calibrate_nothing(
    tmp_path: Path, accelerator: str | None
) -> None:
    store = open_store(f"sqlite:///{tmp_path}/c.db")
    calibration = FleetCalibration(store)
    calibration.refresh_if_changed()
    body = ProbeReport.model_validate(report("x", accelerator, [(BF16, 700.0, 989.0)]))
    with calibration.storing() as stored_rows:
        stored, _ = store.add_once(body, "k")
        stored_rows(check_rows(stored.id, body))
    assert calibration.value == {} == from_store(store)


class RendezvousStore(SlowStore):
    """A real store whose writes wait for each other (a database far away or struggling): each
    returns only once `writers` writes are under way at the same time. Posts that write one at a
    time never get there: the barrier breaks after its guard and the posts fail."""

    def __init__(self, store: Store, writers: int) -> None:
        super().__init__(store)
        self.barrier = threading.Barrier(writers, timeout=20)

    def add_once(self, *args: Any) -> Any:
        found = self.store.add_once(*args)
        self.barrier.wait()
        return found


def test_report_posts_do_not_wait_for_each_others_writes(tmp_path: Path) -> None:
    """A post does not hold the calibration lock across its write: with the database slow or
    down, posts would go in single file (16 s at the median with PostgreSQL down)."""
    meeting = RendezvousStore(open_store(f"sqlite:///{tmp_path}/h.db"), writers=4)
    app = create_app(settings(tmp_path), store=meeting)
    keys = itertools.count()
    with TestClient(app) as c:

        def post_one() -> int:
            body = probe_report(f"h{next(keys)}", 0.8)
            headers = {**AUTH, "Idempotency-Key": f"k{next(keys)}"}
            return int(c.post("/v1/probe-reports", json=body, headers=headers).status_code)

        # side by side: the four writes meet; in single file the first waits for the others
        # while holding the lock they need
        assert simultaneously(post_one, times=4) == [201] * 4
        assert app.state.advisor.calibration.value["h100-sxm"].reports == 4


# Node reports of the GPU link against the plan (368.1 GB/s planned): hosts' medians 0.85 (0.9
# and 0.8), 0.80 and 0.90, each beside a matmul_bf16 run.
LINK_REPORTS: list[tuple[str, str, Checks]] = [
    ("n1", "h200-sxm", [(BF16, 900.0, 989.0), (LINK_CHECK, 0.9 * 368.1, 368.1)]),
    ("n1", "h200-sxm", [(BF16, 900.0, 989.0), (LINK_CHECK, 0.8 * 368.1, 368.1)]),
    ("n2", "h200-sxm", [(BF16, 900.0, 989.0), (LINK_CHECK, 0.8 * 368.1, 368.1)]),
    ("n3", "h200-sxm", [(BF16, 900.0, 989.0), (LINK_CHECK, 0.9 * 368.1, 368.1)]),
]


def test_the_gpu_link_is_voted_beside_the_matmul(tmp_path: Path) -> None:
    """Node reports' all_reduce_vs_plan ratios vote as matmul_bf16's do, one vote per host, and
    ride on the accelerator's calibration: hosts' medians 0.85 (0.9 and 0.8), 0.80 and 0.90 ->
    0.85 over 4 runs from 3 hosts; the same after a whole read of the store."""
    store = open_store(f"sqlite:///{tmp_path}/l.db")
    calibration = FleetCalibration(store)
    calibration.refresh_if_changed()
    rows = [
        *LINK_REPORTS,
        ("n4", "h200-sxm", [(BF16, 900.0, 989.0), ("all_reduce_1G", 10.0, 368.1)]),  # not voted
    ]
    for i, (host, accelerator, checks) in enumerate(rows):
        with calibration.storing() as stored_rows:
            body = ProbeReport.model_validate(report(host, accelerator, checks))
            stored, _ = store.add_once(body, f"key-{i}")
            stored_rows(check_rows(stored.id, body))
    voted = calibration.value["h200-sxm"].link
    assert voted is not None
    assert (voted.ratio, voted.reports, voted.hosts) == (pytest.approx(0.85), 4, 3)
    assert calibration.value["h200-sxm"].reports == 5  # the matmul's own vote is unchanged
    fresh = FleetCalibration(store)
    fresh.refresh_if_changed()
    assert fresh.value == calibration.value


def test_the_summary_words_the_links_vote_and_a_client_reads_it(tmp_path: Path) -> None:
    """GET /v1/fleet/summary carries the GPU link's vote beside the matmul's (check named), and
    advisor.perf.calibration.calibrations, what `--server` reads, puts it on the accelerator's
    calibration: hosts' medians 0.85, 0.80 and 0.90 -> 0.85 over 4 runs from 3 hosts."""
    from advisor.perf.calibration import calibrations

    rows = LINK_REPORTS
    app = create_app(settings(tmp_path))
    with TestClient(app) as c:
        post_all(c, [report(*row) for row in rows], itertools.count())
        (summary,) = c.get("/v1/fleet/summary", headers=AUTH).json()
    voted = summary["link_calibration"]
    assert (voted["check"], voted["hosts"], voted["reports"]) == (LINK_CHECK, 3, 4)
    assert voted["ratio"] == pytest.approx(0.85) and summary["calibration"]["check"] == BF16
    cal = calibrations([summary])["h200-sxm"]
    assert cal.link is not None
    assert (cal.link.ratio, cal.link.reports, cal.link.hosts) == (pytest.approx(0.85), 4, 3)
    assert cal.ratio == pytest.approx(900 / 989)


def test_the_network_is_voted_kept_and_worded_as_the_link_is(tmp_path: Path) -> None:
    """Several-node probes' cross_node_all_reduce_vs_plan: hosts' medians 0.75 (0.7 and 0.8),
    0.6 and 0.8 -> 0.75 over 4 runs from 3 hosts, in the service's running calibration, after a
    whole read of the store, in GET /v1/fleet/summary (check named) and in what a client reads
    from it; the link's vote stays None (none measured)."""
    from advisor.perf.calibration import calibrations

    net = 363.8
    rows = [
        ("m1", "h200-sxm", [(BF16, 900.0, 989.0), (NETWORK_CHECK, 0.7 * net, net)]),
        ("m1", "h200-sxm", [(BF16, 900.0, 989.0), (NETWORK_CHECK, 0.8 * net, net)]),
        ("m2", "h200-sxm", [(BF16, 900.0, 989.0), (NETWORK_CHECK, 0.6 * net, net)]),
        ("m3", "h200-sxm", [(BF16, 900.0, 989.0), (NETWORK_CHECK, 0.8 * net, net)]),
    ]
    store = open_store(f"sqlite:///{tmp_path}/n.db")
    calibration = FleetCalibration(store)
    calibration.refresh_if_changed()
    for i, (host, accelerator, checks) in enumerate(rows):
        with calibration.storing() as stored_rows:
            body = ProbeReport.model_validate(report(host, accelerator, checks))
            stored, _ = store.add_once(body, f"key-{i}")
            stored_rows(check_rows(stored.id, body))
    running = calibration.value["h200-sxm"]
    assert running.network is not None and running.link is None
    assert (running.network.ratio, running.network.reports, running.network.hosts) == (
        pytest.approx(0.75),
        4,
        3,
    )
    fresh = FleetCalibration(store)
    fresh.refresh_if_changed()
    assert fresh.value == calibration.value
    store.close()
    with TestClient(create_app(settings(tmp_path))) as c:
        post_all(c, [report(*row) for row in rows], itertools.count())
        (summary,) = c.get("/v1/fleet/summary", headers=AUTH).json()
    voted = summary["network_calibration"]
    assert (voted["check"], voted["hosts"], voted["reports"]) == (NETWORK_CHECK, 3, 4)
    assert voted["ratio"] == pytest.approx(0.75) and summary["link_calibration"] is None
    read = calibrations([summary])["h200-sxm"].network
    assert read is not None and (read.ratio, read.reports, read.hosts) == (
        pytest.approx(0.75),
        4,
        3,
    )
