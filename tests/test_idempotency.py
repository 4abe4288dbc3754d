"""Idempotent ingestion of probe and utilisation reports: the client sends an Idempotency-Key (a
UUID made once per report, kept with it in the spool); the service stores a key once, answers 201
the first time and 200 with the stored report on a repeat. Without a key, the report's content is
the key. Every test runs on both kinds of report: they share the header and its semantics."""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.report_client import ReportSender
from tests.api_server import serve_in_thread
from tests.test_utilisation_api import utilisation
from tests.threads import simultaneously

TOKEN = "idempotency-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
REPORT_FILE = Path(__file__).parents[1] / (
    "benchmarks/results/probe-2026-11-30-nvidia-h200-driver580.159.04-torch2.11.0+cu130/probe-quick.json"
)


def settings(tmp_path: Path) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path}/idem.db", api_tokens=(TOKEN,))  # type: ignore[arg-type]


def probe_report() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(REPORT_FILE.read_text())
    return body


def set_probe_host(report: dict[str, Any], host: str) -> None:
    report["inventory"]["hostname"] = host


def set_utilisation_host(report: dict[str, Any], host: str) -> None:
    report["host"] = host


@dataclass(frozen=True)
class Kind:
    """One kind of report: its collection, a valid report of it, and how to name its host."""

    path: str
    report: Callable[[], dict[str, Any]]
    set_host: Callable[[dict[str, Any], str], None]


KINDS = {
    "probe": Kind("/v1/probe-reports", probe_report, set_probe_host),
    "utilisation": Kind("/v1/utilisation-reports", utilisation, set_utilisation_host),
}


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> Kind:
    return KINDS[request.param]


@pytest.fixture
def report(kind: Kind) -> dict[str, Any]:
    return kind.report()


def another(kind: Kind, report: dict[str, Any], host: str) -> dict[str, Any]:
    """A copy of `report` from another host: another report."""
    other = copy.deepcopy(report)
    kind.set_host(other, host)
    return other


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(settings(tmp_path))) as c:
        yield c


def total(client: TestClient, kind: Kind) -> int:
    count: int = client.get(kind.path, params={"limit": 1}).json()["total"]
    return count


def test_a_repeat_with_the_same_key_answers_200_with_the_stored_report(
    client: TestClient, kind: Kind, report: dict[str, Any]
) -> None:
    headers = {**AUTH, "Idempotency-Key": str(uuid.uuid4())}
    first = client.post(kind.path, json=report, headers=headers)
    again = client.post(kind.path, json=report, headers=headers)
    assert first.status_code == 201, first.text
    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    assert again.headers["Location"] == first.headers["Location"]
    assert first.headers["Location"] == f"{kind.path}/{first.json()['id']}"
    assert total(client, kind) == 1


def probes_stored(client: TestClient) -> float:
    metrics = client.get("/metrics").text
    found = re.search(r"^advisor_probe_reports_stored_total (\S+)$", metrics, re.MULTILINE)
    assert found, metrics
    return float(found.group(1))


def test_a_repeat_leaves_the_service_as_it_was(
    client: TestClient, kind: Kind, report: dict[str, Any]
) -> None:
    """Nothing is stored on a repeat, so nothing moves: the store generation (it keys the review
    cache) and the probe reports' metric count the two reports stored, not the four posts."""
    state = client.app.state.advisor  # type: ignore[attr-defined]
    generation = state.generation
    headers = {**AUTH, "Idempotency-Key": str(uuid.uuid4())}
    answers = [client.post(kind.path, json=report, headers=h).status_code for h in (headers,) * 2]
    answers += [client.post(kind.path, json=report, headers=AUTH).status_code for _ in range(2)]
    assert answers == [201, 200, 201, 200]
    assert state.generation == generation + 2
    assert probes_stored(client) == (2 if kind.path == "/v1/probe-reports" else 0)


def test_the_same_report_posted_twice_without_a_key_is_stored_once(
    client: TestClient, kind: Kind, report: dict[str, Any]
) -> None:
    first = client.post(kind.path, json=report, headers=AUTH)
    again = client.post(kind.path, json=report, headers=AUTH)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    other = another(kind, report, "another-host")
    assert client.post(kind.path, json=other, headers=AUTH).status_code == 201
    assert total(client, kind) == 2


def test_different_keys_store_two_reports_and_a_reused_key_stores_the_other_report(
    client: TestClient, kind: Kind, report: dict[str, Any]
) -> None:
    """Two runs may produce equal reports; their keys tell them apart. A key reused for another
    report (a client's mistake) must not lose that report: it is stored too."""
    for _ in range(2):
        headers = {**AUTH, "Idempotency-Key": uuid.uuid4().hex}
        assert client.post(kind.path, json=report, headers=headers).status_code == 201
    key = {**AUTH, "Idempotency-Key": "k-" + uuid.uuid4().hex}
    assert client.post(kind.path, json=report, headers=key).status_code == 201
    other = another(kind, report, "reused-key-host")
    stored = client.post(kind.path, json=other, headers=key)
    assert stored.status_code == 201, stored.text
    assert client.get(stored.headers["Location"]).json()["host"] == "reused-key-host"
    assert client.post(kind.path, json=other, headers=key).status_code == 200
    assert total(client, kind) == 4


def test_a_malformed_key_is_refused(client: TestClient, kind: Kind, report: dict[str, Any]) -> None:
    for bad in ("", "x" * 201, "has space", "sha256:abc"):
        answer = client.post(kind.path, json=report, headers={**AUTH, "Idempotency-Key": bad})
        assert answer.status_code == 422, (bad, answer.text)
    assert total(client, kind) == 0


def test_simultaneous_posts_with_one_key_store_one_report(
    client: TestClient, kind: Kind, report: dict[str, Any]
) -> None:
    headers = {**AUTH, "Idempotency-Key": str(uuid.uuid4())}
    answers = simultaneously(lambda: client.post(kind.path, json=report, headers=headers))
    assert sorted(a.status_code for a in answers) == [200] * 7 + [201]
    assert len({a.json()["id"] for a in answers}) == 1
    assert total(client, kind) == 1


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
    tmp_path: Path, live_service: str, kind: Kind, report: dict[str, Any]
) -> None:
    transport = LosesTheFirstAnswer()
    sender = ReportSender(
        live_service,
        TOKEN,
        tmp_path / "spool",
        transport=transport,
        sleep=lambda _s: None,
        path=kind.path,
    )
    first = another(kind, report, "first-run")
    lost = sender.send(first)
    assert lost.sent == [] and lost.spooled is not None and lost.pending == 1
    assert httpx.get(live_service + kind.path).json()["total"] == 1  # it was stored

    retried = sender.send(another(kind, report, "second-run"))  # the spool first (same key)
    listing = httpx.get(live_service + kind.path).json()
    assert listing["total"] == 2, listing
    assert sorted(item["host"] for item in listing["items"]) == ["first-run", "second-run"]
    assert len(retried.sent) == 2 and retried.pending == 0, retried
    assert transport.keys[0] is not None and transport.keys[1] == transport.keys[0]
    assert transport.keys[2] not in (None, transport.keys[0])
