"""The fleet's calibration counts one vote per host (the host's median), needs
several hosts, and leaves out hosts far from the fleet's median (MAD); /v1/fleet/summary says
which hosts were left out and why. Before, every report was a vote: one host posting many
reports at x1.49 (inside the 0.05-1.5 plausible band) set every estimate's efficiency."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from advisor import Catalog
from advisor.api import create_app
from advisor.fleet.statistics import RunningVote, host_vote
from tests.test_api_hardening import AUTH, settings
from tests.test_estimate_api import FINE_TUNE, probe_report

REAL = {"r1": 0.78, "r2": 0.79, "r3": 0.80, "r4": 0.81, "r5": 0.82}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(settings(tmp_path))) as c:
        yield c


def post(client: TestClient, host: str, ratio: float, copy: int = 0) -> None:
    body = probe_report(host, ratio)
    body["duration_s"] = 10.0 + copy  # each copy a report of its own (not an idempotent retry)
    assert client.post("/v1/probe-reports", json=body, headers=AUTH).status_code == 201


def test_the_vote_by_hand() -> None:
    vote = host_vote([*((h, [r]) for h, r in REAL.items()), ("fake", [1.49, 1.49, 1.49])])
    # host medians 0.78 0.79 0.80 0.81 0.82 1.49: the median 0.805; distances 0.025 0.015 0.005
    # 0.005 0.015 0.685, their median (MAD) 0.015; spread max(1.4826 x 0.015, 2% x 0.805) =
    # 0.02224; limit 3.5 x 0.02224 = 0.0778: the fake host (0.685 away) is out, the rest in
    assert [h.host for h in vote.ignored] == ["fake"]
    assert vote.ignored[0].ratio == pytest.approx(1.49)
    assert "30.8 spreads" in vote.ignored[0].why, vote.ignored[0].why  # 0.685 / 0.02224
    assert (vote.hosts, vote.runs) == (5, 5)
    assert vote.ratio == pytest.approx(0.80)  # the median of the five real hosts


def test_identical_hosts_do_not_make_small_differences_outliers() -> None:
    # MAD 0: the spread's floor (2% of the median, 0.016) keeps a host 3% off (0.024 < 0.056)
    vote = host_vote([("a", [0.8]), ("b", [0.8]), ("c", [0.8]), ("d", [0.824])])
    assert vote.ignored == () and vote.hosts == 4


@pytest.mark.usefixtures("roofline")
def test_one_host_posting_many_reports_is_one_vote_and_an_outlier(
    client: TestClient, shipped: Catalog
) -> None:
    base = shipped.workloads["fine_tuning"].efficiency
    for host, ratio in REAL.items():
        post(client, host, ratio)
    for copy in range(20):  # before: 20 of 25 reports at 1.49, the median 1.49
        post(client, "stuffer", 1.49, copy)
    est = client.post("/v1/estimates", json=FINE_TUNE).json()
    assert est["efficiency"] == pytest.approx(base * 0.80), est["efficiency_source"]
    assert "over 5 probe reports from 5 hosts" in est["efficiency_source"]
    (summary,) = client.get("/v1/fleet/summary").json()
    cal = summary["calibration"]
    assert cal["ratio"] == pytest.approx(0.80)
    assert (cal["hosts"], cal["reports"], cal["calibrates"]) == (5, 5, True)
    (ignored,) = cal["ignored_hosts"]
    assert ignored["host"] == "stuffer" and ignored["ratio"] == pytest.approx(1.49)
    assert "spreads from the fleet's 0.805" in ignored["why"], ignored


@pytest.mark.usefixtures("roofline")
def test_reports_from_fewer_than_three_hosts_do_not_calibrate(
    client: TestClient, shipped: Catalog
) -> None:
    base = shipped.workloads["fine_tuning"].efficiency
    for copy in range(6):  # before: six reports, more than the five needed, calibrated at 0.8
        post(client, "only-a", 0.8, copy)
        post(client, "only-b", 0.8, copy)
    est = client.post("/v1/estimates", json=FINE_TUNE).json()
    assert est["efficiency"] == base
    assert "from 2 host(s), 3 needed" in est["efficiency_source"], est["efficiency_source"]
    (summary,) = client.get("/v1/fleet/summary").json()
    assert summary["calibration"]["calibrates"] is False
    assert summary["calibration"]["min_hosts"] == 3


@pytest.mark.parametrize("seed", range(40))
def test_the_running_vote_gives_the_whole_votes_floats(seed: int) -> None:
    rng = random.Random(seed)
    hosts = [f"h{i}" for i in range(rng.randint(1, 40))]
    running = RunningVote()
    runs: dict[str, list[float]] = {}
    for _ in range(rng.randint(1, 120)):
        host = rng.choice(hosts)
        # mostly near 0.8, some far, some repeated exactly (a MAD of 0)
        ratio = rng.choice([0.8, round(rng.gauss(0.8, 0.03), 3), rng.uniform(0.05, 1.5)])
        running.add(host, ratio)
        runs.setdefault(host, []).append(ratio)
        whole = host_vote((h, sorted(r)) for h, r in runs.items())
        got = running.vote()
        assert (got.ratio, got.hosts, got.runs) == (whole.ratio, whole.hosts, whole.runs)


@pytest.mark.parametrize("seed", range(20))
def test_a_host_added_whole_votes_as_its_ratios_added_one_by_one(seed: int) -> None:
    """RunningVote.add_host (the fleet calibration's whole read) then more ratios one by one:
    the same floats as host_vote over every ratio, and as adding each ratio alone."""
    rng = random.Random(seed)
    runs = {
        f"h{i}": sorted(rng.gauss(0.8, 0.05) for _ in range(rng.randint(1, 9)))
        for i in range(rng.randint(1, 12))
    }
    whole_read, one_by_one = RunningVote(), RunningVote()
    for host, ratios in runs.items():
        whole_read.add_host(host, ratios, [f"t{len(ratios) % 3}"])
        for r in ratios:
            one_by_one.add(host, r, f"t{len(ratios) % 3}")
    later = [(rng.choice(list(runs)), rng.gauss(0.8, 0.05)) for _ in range(5)]
    for host, r in later:
        whole_read.add(host, r)
        one_by_one.add(host, r)
        runs[host] = sorted([*runs[host], r])
    want = host_vote(runs.items())
    for got in (whole_read.vote(), one_by_one.vote()):
        assert (got.ratio, got.hosts, got.runs) == (want.ratio, want.hosts, want.runs)
    assert whole_read.vote().tokens == one_by_one.vote().tokens
    with pytest.raises(ValueError):
        whole_read.add_host(next(iter(runs)), [0.8])
