"""SIGHUP reloads the catalog of a running `advisor serve` (a real process, a real signal).

The catalog is a user directory used alone (ADVISOR_CATALOG, ADVISOR_CATALOG_MODE=replace) holding
the mini catalog of tests.factories, whose right answers are known by hand: for fine_tuning with
20 GB of memory, the cheapest instance in us-east-1 is small1 (1 x 24 GB at $0.80/h).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api_server import LiveServer, live_server
from tests.factories import inst, mini_catalog_data, price, write_catalog

TOKEN = "reload-token"
QUESTION = {"workload": "fine_tuning", "memory_gb": 20, "region": "us-east-1"}


@pytest.fixture
def catalog_dir(tmp_path: Path) -> Path:
    return write_catalog(tmp_path / "catalog", mini_catalog_data())


@pytest.fixture
def server(tmp_path: Path, catalog_dir: Path) -> Iterator[LiveServer]:
    env = {"ADVISOR_CATALOG": str(catalog_dir), "ADVISOR_CATALOG_MODE": "replace"}
    with live_server(tmp_path, TOKEN, env=env) as srv:
        yield srv


def best(http: httpx.Client) -> tuple[str, float]:
    r = http.post("/v1/recommendations", json=QUESTION)
    assert r.status_code == 200, r.text
    top = r.json()["recommendations"][0]
    return top["instance_type"], top["hourly_usd"]


def hangup_until(server: LiveServer, done: Callable[[], bool], what: str) -> None:
    """Send SIGHUP, then wait for its effect (the handler runs between requests)."""
    os.kill(server.pid, signal.SIGHUP)
    deadline = time.monotonic() + 15
    while not done():
        assert time.monotonic() < deadline, (
            f"{what} did not happen after SIGHUP:\n"
            + (server.log.read_text(errors="replace")[-2000:])
        )
        time.sleep(0.05)


def readiness(http: httpx.Client) -> dict[str, Any]:
    body: dict[str, Any] = http.get("/readyz").json()
    return body


def test_sighup_serves_the_new_catalog_and_no_stale_answer(
    server: LiveServer, catalog_dir: Path
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        assert best(http) == ("small1", 0.8)
        assert best(http) == ("small1", 0.8)  # asked twice: the second answer is the cache's
        assert http.get("/v1/instance-types/tiny1").status_code == 404

        data = mini_catalog_data()  # a cheaper instance holding 24 GB appears
        data["instance_types"].append(inst("tiny1", "small", 1, [price("us-east-1", 0.5)]))
        write_catalog(catalog_dir, data)
        hangup_until(
            server, lambda: http.get("/v1/instance-types/tiny1").status_code == 200, "reload"
        )
        # the question answered (and cached) before the reload gets the new answer
        assert best(http) == ("tiny1", 0.5)
        assert readiness(http)["status"] == "ready"


def test_sighup_with_an_invalid_catalog_keeps_the_last_good_one(
    server: LiveServer, catalog_dir: Path
) -> None:
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        assert best(http) == ("small1", 0.8)
        bad = mini_catalog_data()
        bad["instance_types"][3]["prices"][0]["hourly_usd"] = 0.1  # would win if it loaded
        bad["instance_types"][3]["gpu_cont"] = 1  # but a typo makes the catalog invalid
        write_catalog(catalog_dir, bad)
        hangup_until(server, lambda: readiness(http)["status"] == "degraded", "degraded readiness")
        ready = readiness(http)
        assert ready["catalog"]["status"] == "degraded"
        assert "small1: gpu_cont" in ready["catalog"]["detail"]  # says which entry and field
        assert "did you mean 'gpu_count'" in ready["catalog"]["detail"]
        assert best(http) == ("small1", 0.8)  # the last good catalog is still served

        write_catalog(catalog_dir, mini_catalog_data())  # fixed: the next SIGHUP recovers
        hangup_until(server, lambda: readiness(http)["status"] == "ready", "recovery")
