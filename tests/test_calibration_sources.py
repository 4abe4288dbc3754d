"""The fleet calibration counts its independent sources twice: hosts (one vote each) and the
distinct write tokens that posted the voting hosts' runs, since one token can name many hosts."""

from __future__ import annotations

import datetime as dt
import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.fleet.statistics import RunningVote, host_vote, sources_of
from advisor.perf.calibration import Calibration, calibrations
from probes.report import ProbeReport
from tests.test_estimate_api import probe_report

FLEET, RACK = "fleet-token-0123456789", "rack-token-9876543210"


def _client(tmp_path: Path, tokens: tuple[str, ...]) -> TestClient:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/s.db",
        api_tokens=tokens,  # type: ignore[arg-type]
    )
    return TestClient(create_app(settings))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with _client(tmp_path, (FLEET, RACK)) as c:
        yield c


def post(client: TestClient, host: str, token: str, ratio: float = 0.9) -> None:
    body = probe_report(host, ratio)
    body["created_at"] = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)).isoformat()
    headers = {"Authorization": f"Bearer {token}"}
    r = client.post("/v1/probe-reports", json=body, headers=headers)
    assert r.status_code == 201, r.text


def test_the_summary_names_hosts_and_tokens(client: TestClient) -> None:
    for host in ("h1", "h2", "h3", "h4"):
        post(client, host, FLEET)
    post(client, "h5", RACK)
    (summary,) = client.get("/v1/fleet/summary").json()
    assert summary["calibration"]["hosts"] == 5
    assert summary["calibration"]["tokens"] == 2  # FLEET and RACK


def test_six_hosts_through_one_token_are_one_token(client: TestClient) -> None:
    for i in range(6):
        post(client, f"made-up-{i}", FLEET, 0.06 + i * 0.001)
    cal = client.get("/v1/fleet/summary").json()[0]["calibration"]
    assert (cal["hosts"], cal["tokens"]) == (6, 1)
    # the service's own calibration (what its estimates read) says the same
    state = client.app.state.advisor  # type: ignore[attr-defined]
    assert state.calibration.value["h100-sxm"].tokens == 1
    assert state.calibration.value["h100-sxm"].hosts == 6


def test_the_store_keeps_a_digest_never_the_token(client: TestClient, tmp_path: Path) -> None:
    post(client, "h1", RACK)
    with sqlite3.connect(tmp_path / "s.db") as db:
        rows = db.execute("SELECT * FROM probe_reports").fetchall()
    assert rows and all(RACK not in str(row) for row in rows)
    ids = {row[-1] for row in rows}  # token_id
    assert ids == {hashlib.sha256(RACK.encode()).hexdigest()[:16]}


def test_reports_stored_without_a_token_count_no_token(client: TestClient) -> None:
    # (reports stored before tokens were recorded, or by a tool beside the service)
    store = client.app.state.advisor.store  # type: ignore[attr-defined]
    for host in ("h1", "h2"):
        body = probe_report(host, 0.9)
        body["created_at"] = dt.datetime.now(dt.UTC).isoformat()
        store.add(ProbeReport.model_validate(body))
    cal = client.get("/v1/fleet/summary").json()[0]["calibration"]
    assert (cal["hosts"], cal["tokens"]) == (2, None)
    post(client, "h3", RACK)
    cal = client.get("/v1/fleet/summary").json()[0]["calibration"]
    assert (cal["hosts"], cal["tokens"]) == (3, 1)


# Four hosts near 0.8 through tokens A and B, and an outlier at 0.2 alone behind token C: the
# vote leaves the outlier out (|0.2 - 0.8| is far above 3.5 spreads of at least 2% of 0.8), so
# C is not one of the calibration's sources: tokens 2, hosts 4.
RUNS = [("h1", 0.80, "A"), ("h2", 0.81, "A"), ("h3", 0.79, "B"), ("h4", 0.80, "B"), ("x", 0.2, "C")]


def test_the_running_vote_counts_the_tokens_of_voting_hosts() -> None:
    running = RunningVote()
    for host, ratio, token in RUNS:
        running.add(host, ratio, token)
    vote = running.vote()
    assert (vote.hosts, vote.tokens) == (4, 2)
    whole = sources_of([(h, t) for h, _, t in RUNS], host_vote([(h, [r]) for h, r, _ in RUNS]))
    assert (whole.hosts, whole.tokens) == (4, 2)  # the store's summary agrees


def test_a_host_reported_through_two_tokens_keeps_both_counted() -> None:
    running = RunningVote()
    for host, ratio, token in [*RUNS[:4], ("h4", 0.80, "D")]:
        running.add(host, ratio, token)
    assert running.vote().tokens == 3  # A, B and D


def test_a_client_reads_the_tokens_from_a_summary() -> None:
    summary = {"accelerator": "h100-sxm", "calibration": {"ratio": 0.8, "reports": 6, "hosts": 6}}
    assert calibrations([summary]) == {"h100-sxm": Calibration(0.8, 6, 6, None)}
    summary["calibration"]["tokens"] = 1  # type: ignore[index]
    assert calibrations([summary]) == {"h100-sxm": Calibration(0.8, 6, 6, 1)}
