"""Fail fast and say why when the database fails. Without that, with PostgreSQL down, writes
waited 16 s at the median and /readyz and reads 5 s each (the pool's wait, and every report post
holding the calibration lock across its write), and /readyz said "all 8 connections stayed
busy"; on a full disk /readyz said ready while writes failed."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.settings import Settings
from tests.tcp_proxy import TcpProxy
from tests.test_estimate_api import probe_report

TOKEN = "outage-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PG_URL = os.environ.get("ADVISOR_TEST_POSTGRES_URL")
TIMEOUT_S = 2.0  # ADVISOR_DATABASE_TIMEOUT_S
RETRY_S = 1.0  # ADVISOR_DATABASE_RETRY_S


@pytest.fixture
def proxied() -> Iterator[tuple[TestClient, TcpProxy]]:
    if not PG_URL:
        if os.environ.get("CI"):
            pytest.fail("ADVISOR_TEST_POSTGRES_URL is not set in CI")
        pytest.skip("no PostgreSQL (set ADVISOR_TEST_POSTGRES_URL; scripts/start-postgres.sh)")
    url = urlsplit(PG_URL)
    proxy = TcpProxy(url.hostname or "127.0.0.1", url.port or 5432)
    netloc = f"{url.username}:{url.password}@127.0.0.1:{proxy.port}"
    settings = Settings(
        database_url=urlunsplit(url._replace(netloc=netloc)),
        api_tokens=(TOKEN,),  # type: ignore[arg-type]
        database_timeout_s=TIMEOUT_S,
        database_retry_s=RETRY_S,
    )
    try:
        with TestClient(create_app(settings)) as client:
            yield client, proxy
    finally:
        proxy.close()


def post(client: TestClient, host: str) -> tuple[int, float, dict[str, str], str]:
    start = time.monotonic()
    # a host of its own each time: PostgreSQL's database outlives the test (no report stored
    # before under the same content)
    unique = f"{host}-{uuid.uuid4().hex[:12]}"
    r = client.post("/v1/probe-reports", json=probe_report(unique, 0.8), headers=AUTH)
    return r.status_code, time.monotonic() - start, dict(r.headers), r.text


def test_an_unreachable_database_is_503_in_milliseconds_then_recovers(
    proxied: tuple[TestClient, TcpProxy],
) -> None:
    client, proxy = proxied
    assert post(client, "before")[0] == 201
    assert client.get("/readyz").status_code == 200
    proxy.cut()
    # the first call finds it out (after the connect / pool timeout)
    status, _, _, _ = post(client, "first")
    assert status == 503
    # then the breaker: 503 at once, with Retry-After, for every caller at the same time; at
    # once means the breaker answers, not a connection attempt of the caller's own that waits
    # out the connect timeout (before: 16 s); the one caller retrying after the retry period
    # may probe the database (benchmarks/attack_service.py times the answers)
    results: list[tuple[int, float, dict[str, str], str]] = []
    workers = [
        threading.Thread(target=lambda i=i: results.append(post(client, f"h{i}"))) for i in range(8)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert [r[0] for r in results] == [503] * 8
    assert all(r[2].get("retry-after") == "1" for r in results), results
    by_breaker = [r for r in results if "the database is tried again in" in r[3]]
    assert len(by_breaker) >= 7, [r[3] for r in results]
    ready = client.get("/readyz")
    assert ready.status_code == 503
    database = ready.json()["database"]
    assert database["status"] == "unavailable" and database["detail"].startswith("unreachable")
    assert "busy" not in database["detail"], database
    read = client.get("/v1/probe-reports")
    assert read.status_code == 503 and read.headers["retry-after"] == "1"
    proxy.restore()
    deadline = time.monotonic() + 20
    while (status := post(client, "after")[0]) != 201 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status == 201
    assert client.get("/readyz").json()["status"] == "ready"


@pytest.fixture
def sqlite_client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/full.db", api_tokens=(TOKEN,))  # type: ignore[arg-type]
    with TestClient(create_app(settings)) as client:
        yield client


def test_failing_writes_make_readyz_say_so(sqlite_client: TestClient) -> None:
    client = sqlite_client
    assert client.get("/readyz").json()["writes"]["status"] == "ok"
    # SQLite's own limit on the file's pages: its writes fail as on a full disk (SQLITE_FULL)
    store = client.app.state.advisor.store
    # the write engine's one connection (advisor/store/sql.py): the limit is per connection
    with store._writer.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
        conn.exec_driver_sql(f"PRAGMA max_page_count = {pages}")
    # a report is its body and a few aggregate rows: the first ones may fit in the free space
    # left in the file's pages, so post until the file is full (a handful of reports)
    codes: list[int] = []
    while 503 not in codes and len(codes) < 60:
        codes.append(post(client, f"full-{len(codes)}")[0])
    assert codes[-1] == 503 and set(codes[:-1]) <= {201}, codes
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.text  # reads and recommendations still work
    body = ready.json()
    assert body["status"] == "degraded", body  # before: "ready"
    assert body["database"]["status"] == "ok"
    assert body["writes"]["status"] == "degraded"
    assert "the last write failed" in body["writes"]["detail"]
    assert "full" in body["writes"]["detail"], body["writes"]
    assert "MiB free" in body["writes"]["detail"]
    with store._writer.connect() as conn:
        conn.exec_driver_sql("PRAGMA max_page_count = 1073741823")
    assert post(client, "room-again")[0] == 201
    assert client.get("/readyz").json()["status"] == "ready"
