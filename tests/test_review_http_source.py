"""The review's --server source over advisor.http_client, against a scripted service: paging, a
report deleted between the listing and its fetch, a service without utilisation reports, and a
busy service answered by the client's retries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from advisor.errors import AdvisorError
from advisor.review.data import from_server
from tests.ports import refused_port
from tests.reports import as_probe_report

REPO = Path(__file__).resolve().parents[1]


def probe_report(host: str, measured: float) -> dict[str, Any]:
    return as_probe_report(
        {
            "verdict": "pass",
            "accelerator": "h100-sxm",
            "inventory": {"hostname": host},
            "checks": [
                {"name": "matmul_bf16", "status": "pass", "measured": measured, "expected": 989.5}
            ],
        }
    ).model_dump(mode="json")


class FleetService:
    """/v1/probe-reports lists ids r0..r4 two per page; r3 is gone by the time it is fetched;
    no /v1/utilisation-reports route; the first request of all is answered 503."""

    def __init__(self) -> None:
        self.ids = [f"r{i}" for i in range(5)]
        self.paths: list[str] = []
        self.busy_once = True

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(str(request.url))
        if self.busy_once:
            self.busy_once = False
            return httpx.Response(503, headers={"Retry-After": "0"})
        path = request.url.path
        if path == "/v1/probe-reports":
            offset = int(request.url.params["offset"])
            page = self.ids[offset : offset + 2]
            more = offset + 2 < len(self.ids)
            items = [{"id": i} for i in page]
            return httpx.Response(
                200, json={"items": items, "next_offset": offset + 2 if more else None}
            )
        report_id = path.rsplit("/", 1)[-1]
        if path.startswith("/v1/probe-reports/") and report_id in self.ids and report_id != "r3":
            number = int(report_id[1:])
            return httpx.Response(
                200, json={"report": probe_report(f"host{number}", 600.0 + number)}
            )
        return httpx.Response(404, json={"detail": "not found"})


def test_pages_bodies_deletions_and_a_missing_route() -> None:
    service = FleetService()
    data = from_server("http://svc:8080/", workers=2, transport=httpx.MockTransport(service))
    assert data.source == "service http://svc:8080"
    assert sorted(p.id for p in data.probes) == ["r0", "r1", "r2", "r4"]  # r3 was deleted
    by_id = {p.id: p for p in data.probes}
    assert by_id["r4"].host == "host4" and by_id["r4"].checks[0].measured == 604.0
    assert data.usage == []
    assert data.notes == ["the service keeps no utilisation reports (no /v1/utilisation-reports)"]
    listing = [p for p in service.paths if p.startswith("http://svc:8080/v1/probe-reports?")]
    assert listing == [  # the first was answered 503 and asked again
        "http://svc:8080/v1/probe-reports?limit=500&offset=0",
        "http://svc:8080/v1/probe-reports?limit=500&offset=0",
        "http://svc:8080/v1/probe-reports?limit=500&offset=2",
        "http://svc:8080/v1/probe-reports?limit=500&offset=4",
    ]


def test_a_refused_token_is_an_error_naming_the_status() -> None:
    def refuse(_r: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"detail": "bad token"})

    with pytest.raises(AdvisorError) as caught:
        from_server("http://svc", transport=httpx.MockTransport(refuse))
    assert str(caught.value) == 'GET http://svc/v1/probe-reports: HTTP 401: {"detail":"bad token"}'


def test_estimate_with_an_unreachable_server_is_exit_2_in_one_line() -> None:
    """`--server` calibration goes through the same client: unreachable is bad usage."""
    cmd = [sys.executable, "-m", "advisor", "estimate", "--workload", "fine_tuning"]
    cmd += ["--model", "llama-3-8b", "--tokens", "2e9", "--instance-type", "p5.48xlarge"]
    with refused_port() as port:
        p = subprocess.run(
            [*cmd, "--server", f"http://127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith(f"error: cannot reach http://127.0.0.1:{port}/v1/fleet/summary: ")
    assert len(p.stderr.strip().splitlines()) == 1 and p.stdout == ""
