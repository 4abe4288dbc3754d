"""The server checks what it stores: a report whose checks all fail but whose verdict says pass
is not counted as passing; 200 KB host names, 10,000 checks, negative bandwidths and durations
and far-future times are refused."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.settings import Settings
from tests.test_estimate_api import probe_report

TOKEN = "intake-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/i.db", api_tokens=(TOKEN,))  # type: ignore[arg-type]
    with TestClient(create_app(settings)) as c:
        yield c


def at(delta: dt.timedelta) -> str:
    return (dt.datetime.now(dt.UTC) + delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def report(**changes: Any) -> dict[str, Any]:
    return {**probe_report("node-1", 0.8), "created_at": at(dt.timedelta(hours=-1)), **changes}


def fields_of(r: Any) -> list[str]:
    assert r.status_code == 422, r.text
    return [e["field"] for e in r.json()["errors"]]


def test_a_pass_verdict_over_failing_checks_is_stored_as_fail(client: TestClient) -> None:
    body = report()
    body["checks"] = [{**c, "status": "fail"} for c in body["checks"]]
    body["checks"].append({**body["checks"][0], "name": "h2d_pinned", "status": "warn"})
    r = client.post("/v1/probe-reports", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    assert (r.json()["verdict"], r.json()["claimed_verdict"]) == ("fail", "pass")
    stored = client.get(r.headers["Location"]).json()
    assert (stored["verdict"], stored["report"]["verdict"]) == ("fail", "fail")
    (summary,) = client.get("/v1/fleet/summary").json()
    assert summary["verdicts"] == {"fail": 1}


def test_warn_checks_under_a_pass_verdict_make_it_warn(client: TestClient) -> None:
    body = report()
    body["checks"] = [{**c, "status": "warn"} for c in body["checks"]]
    r = client.post("/v1/probe-reports", json=body, headers=AUTH)
    assert (r.json()["verdict"], r.json()["claimed_verdict"]) == ("warn", "pass")


@pytest.mark.parametrize("verdict", ["pass", "error", "fail"])
def test_a_verdict_as_bad_as_the_checks_or_worse_stands(client: TestClient, verdict: str) -> None:
    # passing checks: "error" (no GPU reached, ranks lost) and "fail" may rightly be worse
    r = client.post("/v1/probe-reports", json=report(verdict=verdict), headers=AUTH)
    assert r.status_code == 201, r.text
    assert (r.json()["verdict"], r.json()["claimed_verdict"]) == (verdict, None)


def test_bounds_are_422s_naming_the_field(client: TestClient) -> None:
    body = report()
    body["inventory"] = {**body["inventory"], "hostname": "h" * 200_000}
    assert fields_of(client.post("/v1/probe-reports", json=body, headers=AUTH)) == [
        "inventory.hostname"
    ]
    many = report(checks=[{**report()["checks"][0], "name": f"c{i}"} for i in range(10_000)])
    assert fields_of(client.post("/v1/probe-reports", json=many, headers=AUTH)) == ["checks"]
    negative = report()
    negative["checks"] = [{**negative["checks"][0], "measured": -400.0}]
    assert fields_of(client.post("/v1/probe-reports", json=negative, headers=AUTH)) == [
        "checks.0.measured"
    ]
    assert fields_of(
        client.post("/v1/probe-reports", json=report(duration_s=-1.0), headers=AUTH)
    ) == ["duration_s"]
    long_detail = report()
    long_detail["checks"] = [{**long_detail["checks"][0], "detail": "x" * 5000}]
    assert fields_of(client.post("/v1/probe-reports", json=long_detail, headers=AUTH)) == [
        "checks.0.detail"
    ]


@pytest.mark.parametrize(
    ("delta", "words"),
    [
        (dt.timedelta(days=365 * 3), "ahead of the server's clock"),
        (dt.timedelta(minutes=11), "ahead of the server's clock"),
        (dt.timedelta(days=-367), "older than 366 days"),
    ],
)
def test_report_times_are_checked_against_the_servers_clock(
    client: TestClient, delta: dt.timedelta, words: str
) -> None:
    r = client.post("/v1/probe-reports", json=report(created_at=at(delta)), headers=AUTH)
    assert fields_of(r) == ["created_at"]
    assert words in r.json()["detail"], r.json()


@pytest.mark.parametrize("delta", [dt.timedelta(minutes=9), dt.timedelta(days=-365)])
def test_times_inside_the_window_are_stored(client: TestClient, delta: dt.timedelta) -> None:
    r = client.post("/v1/probe-reports", json=report(created_at=at(delta)), headers=AUTH)
    assert r.status_code == 201, r.text


def utilisation(**changes: Any) -> dict[str, Any]:
    gpu = {"index": 0, "samples": 600, "util_gpu_mean_pct": 40.0, "power_mean_w": 300.0}
    return {
        "created_at": at(dt.timedelta(hours=-1)),
        "host": "node-1",
        "duration_s": 600.0,
        "interval_s": 1.0,
        "gpus": [gpu],
        **changes,
    }


def test_utilisation_reports_are_bounded_too(client: TestClient) -> None:
    def post(body: dict[str, Any]) -> Any:
        return client.post("/v1/utilisation-reports", json=body, headers=AUTH)

    assert post(utilisation()).status_code == 201
    gpu = utilisation()["gpus"][0]
    assert fields_of(post(utilisation(gpus=[{**gpu, "power_mean_w": -5.0}]))) == [
        "gpus.0.power_mean_w"
    ]
    assert fields_of(post(utilisation(gpus=[{**gpu, "util_gpu_mean_pct": 150.0}]))) == [
        "gpus.0.util_gpu_mean_pct"
    ]
    assert fields_of(post(utilisation(duration_s=-1.0))) == ["duration_s"]
    assert fields_of(post(utilisation(host="h" * 300))) == ["host"]
    future = post(utilisation(created_at=at(dt.timedelta(days=30))))
    assert fields_of(future) == ["created_at"]
