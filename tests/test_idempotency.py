"""Idempotent ingestion of probe reports: the client sends an Idempotency-Key (a UUID made once per
report, kept with it in the spool); the service stores a key once, answers 201 the first time and
200 with the stored report on a repeat. Without a key, the report's content is the key."""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.report_client import ReportSender
from tests.api_server import serve_in_thread

TOKEN = "idempotency-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
REPORT_FILE = Path(__file__).parents[1] / (
    "benchmarks/results/probe-2026-11-30-nvidia-h200-driver580.159.04-torch2.11.0+cu130/probe-quick.json"
)


def settings(tmp_path: Path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/idem.db", api_tokens=(TOKEN,))  # type: ignore[arg-type]


@pytest.fixture
def report() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(REPORT_FILE.read_text())
    return body


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(settings(tmp_path))) as c:
        yield c


def total(client: TestClient) -> int:
    count: int = client.get("/v1/probe-reports", params={"limit": 1}).json()["total"]
    return count


def test_a_repeat_with_the_same_key_answers_200_with_the_stored_report(
    client: TestClient, report: dict[str, Any]
) -> None:
    headers = {**AUTH, "Idempotency-Key": str(uuid.uuid4())}
    first = client.post("/v1/probe-reports", json=report, headers=headers)
    again = client.post("/v1/probe-reports", json=report, headers=headers)
    assert first.status_code == 201, first.text
    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    assert again.headers["Location"] == first.headers["Location"]
    assert total(client) == 1


def test_the_same_report_posted_twice_without_a_key_is_stored_once(
    client: TestClient, report: dict[str, Any]
) -> None:
    first = client.post("/v1/probe-reports", json=report, headers=AUTH)
    again = client.post("/v1/probe-reports", json=report, headers=AUTH)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    other = copy.deepcopy(report)
    other["inventory"]["hostname"] = "another-host"
    assert client.post("/v1/probe-reports", json=other, headers=AUTH).status_code == 201
    assert total(client) == 2


def test_different_keys_store_two_reports_and_a_reused_key_stores_the_other_report(
    client: TestClient, report: dict[str, Any]
) -> None:
    """Two runs may produce equal reports; their keys tell them apart. A key reused for another
    report (a client's mistake) must not lose that report: it is stored too."""
    for _ in range(2):
        headers = {**AUTH, "Idempotency-Key": uuid.uuid4().hex}
        assert client.post("/v1/probe-reports", json=report, headers=headers).status_code == 201
    key = {**AUTH, "Idempotency-Key": "k-" + uuid.uuid4().hex}
    assert client.post("/v1/probe-reports", json=report, headers=key).status_code == 201
    other = copy.deepcopy(report)
    other["verdict"] = "fail"
    stored = client.post("/v1/probe-reports", json=other, headers=key)
    assert stored.status_code == 201, stored.text
    assert client.get(stored.headers["Location"]).json()["report"]["verdict"] == "fail"
    assert client.post("/v1/probe-reports", json=other, headers=key).status_code == 200
    assert total(client) == 4


def test_a_malformed_key_is_refused(client: TestClient, report: dict[str, Any]) -> None:
    for bad in ("", "x" * 201, "has space", "sha256:abc"):
        answer = client.post(
            "/v1/probe-reports", json=report, headers={**AUTH, "Idempotency-Key": bad}
        )
        assert answer.status_code == 422, (bad, answer.text)
    assert total(client) == 0


def test_simultaneous_posts_with_one_key_store_one_report(
    client: TestClient, report: dict[str, Any]
) -> None:
    headers = {**AUTH, "Idempotency-Key": str(uuid.uuid4())}
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def post() -> None:
        answer = client.post("/v1/probe-reports", json=report, headers=headers)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=post) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(a.status_code for a in answers) == [200] * 7 + [201]
    assert len({a.json()["id"] for a in answers}) == 1
    assert total(client) == 1


# -- the client: an acknowledgement lost after the service committed --------------------------
@pytest.fixture
def live_service(tmp_path: Path) -> Iterator[str]:
    with serve_in_thread(create_app(settings(tmp_path))) as url:
        yield url


class LosesTheFirstAnswer(httpx.HTTPTransport):
    """Delivers every request to the real service, but the first answer never reaches the
    client: it times out after the service has committed the report."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.keys.append(request.headers.get("Idempotency-Key"))
        response = super().handle_request(request)
        response.read()
        if len(self.keys) == 1:
            raise httpx.ReadTimeout("timed out waiting for the answer", request=request)
        return response


def test_a_report_acknowledged_by_the_service_but_not_the_client_is_stored_once(
    tmp_path: Path, live_service: str, report: dict[str, Any]
) -> None:
    transport = LosesTheFirstAnswer()
    sender = ReportSender(
        live_service, TOKEN, tmp_path / "spool", transport=transport, sleep=lambda _s: None
    )
    lost = sender.send(report)
    assert lost.sent == [] and lost.spooled is not None and lost.pending == 1
    assert httpx.get(f"{live_service}/v1/probe-reports").json()["total"] == 1  # it was stored

    second = copy.deepcopy(report)
    second["inventory"]["hostname"] = "second-run"
    retried = sender.send(second)  # delivers the spool first (same key), then this run's
    listing = httpx.get(f"{live_service}/v1/probe-reports").json()
    assert listing["total"] == 2, listing
    assert sorted(item["host"] for item in listing["items"]) == sorted(
        [report["inventory"]["hostname"], "second-run"]
    )
    assert len(retried.sent) == 2 and retried.pending == 0, retried
    assert transport.keys[0] is not None and transport.keys[1] == transport.keys[0]
    assert transport.keys[2] not in (None, transport.keys[0])
