"""Host identity: one write token once counted as six hosts by spelling one host six ways, and
six invented hosts outvoted five honest ones in the calibration. Host names are normalised,
ambiguous ones refused, and a write token can be bound to the hosts it may report for."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.errors import InputError
from advisor.fleet.hosts import normalise_host, token_may_report
from tests.test_estimate_api import probe_report

FLEET, BOUND = "fleet-token", "bound-token"

SPELLINGS = ["h1", "H1", "h1\u200b", "h1.", " h1", "\uff48\uff11", "h\u00ad1", "\ufeffh1\t"]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_spellings_of_one_host_are_one_host(spelling: str) -> None:
    assert normalise_host(spelling) == "h1"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("\u04bb1", "looks like 'h'"),  # Cyrillic shha
        ("gpu-\u0430.dc1", "looks like 'a'"),  # Cyrillic a inside a Latin name
        ("\u0455erver", "looks like 's'"),  # Cyrillic dze
        ("h 1", "whitespace"),
        ("\u200b", "empty"),
        (".", "empty"),
    ],
)
def test_ambiguous_or_empty_names_are_refused(name: str, words: str) -> None:
    with pytest.raises(InputError, match=words) as caught:
        normalise_host(name)
    assert caught.value.field == "inventory.hostname"


def test_a_name_in_another_script_that_mimics_nothing_stands() -> None:
    assert normalise_host("M\u00dcNCHEN-gpu1") == "m\u00fcnchen-gpu1"  # casefolded
    assert normalise_host("\u6771\u4eac-1") == "\u6771\u4eac-1"  # Tokyo in kanji


def test_bound_tokens_report_for_their_hosts_alone() -> None:
    bindings = {"t": ("gpu-*.dc1", "spare")}
    assert token_may_report("gpu-7.dc1", "t", bindings)
    assert token_may_report("spare", "t", bindings)
    assert not token_may_report("gpu-7.dc2", "t", bindings)
    assert token_may_report("anything", "unbound", bindings)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/h.db",
        api_tokens=(FLEET, BOUND),
        token_hosts={BOUND: ("gpu-*",)},
    )
    with TestClient(create_app(settings)) as c:
        yield c


def post(client: TestClient, host: str, token: str, minutes_ago: int = 1) -> int:
    body = probe_report(host, 0.95)
    body["created_at"] = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)).isoformat()
    r = client.post("/v1/probe-reports", json=body, headers={"Authorization": f"Bearer {token}"})
    return int(r.status_code)


def test_six_spellings_are_stored_as_one_host(client: TestClient) -> None:
    for i, spelling in enumerate(SPELLINGS):
        assert post(client, spelling, FLEET, i + 1) == 201
    (summary,) = client.get("/v1/fleet/summary").json()
    assert summary["hosts"] == 1
    assert summary["calibration"]["hosts"] == 1
    hosts = {r["host"] for r in client.get("/v1/probe-reports").json()["items"]}
    assert hosts == {"h1"}
    assert post(client, "\u04bb1", FLEET) == 422  # Cyrillic: refused, not a seventh host


def test_a_bound_token_cannot_report_for_other_hosts(client: TestClient) -> None:
    assert post(client, "GPU-7", BOUND) == 201  # normalised, then matched against gpu-*
    assert post(client, "h1", BOUND) == 403
    assert post(client, "h1", FLEET) == 201  # an unbound token reports for any host


def test_a_binding_must_name_a_write_token(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not list"):
        Settings.from_env(
            {
                "ADVISOR_DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
                "ADVISOR_API_TOKENS": FLEET,
                "ADVISOR_TOKEN_HOSTS": '{"other": ["gpu-*"]}',
            }
        )
