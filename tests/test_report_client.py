"""`advisor probe --report-to`: retries with backoff, a spool for undelivered reports, no loss."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.errors import InputError
from advisor.report_client import ReportSender
from tests.api_server import serve_in_thread
from tests.ports import refused_port

REPORT = {"verdict": "pass", "inventory": {"hostname": "h"}, "checks": []}


class Script:
    """A service that answers from a script: an int status (with a JSON body) or an httpx
    exception to raise; it records what it was sent."""

    def __init__(self, *script: int | Exception) -> None:
        self.script = list(script)
        self.bodies: list[dict[str, Any]] = []
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        step = self.script.pop(0)
        self.requests.append(request)
        self.bodies.append(json.loads(request.content))
        if isinstance(step, Exception):
            raise step
        return httpx.Response(step, json={"id": f"id{len(self.bodies)}", "detail": "x"})


def refused() -> httpx.ConnectError:
    return httpx.ConnectError("[Errno 111] Connection refused")


def sender(tmp_path: Path, script: Script, sleeps: list[float] | None = None) -> ReportSender:
    return ReportSender(
        "http://svc:8080",
        "tok",
        tmp_path / "spool",
        transport=httpx.MockTransport(script),
        sleep=(sleeps.append if sleeps is not None else lambda _s: None),
    )


def test_delivered_first_time(tmp_path: Path) -> None:
    t = Script(201)
    out = sender(tmp_path, t).send(REPORT)
    assert out.sent == ["id1"] and out.spooled is None and out.pending == 0
    assert t.requests[0].headers["Authorization"] == "Bearer tok"
    assert str(t.requests[0].url) == "http://svc:8080/v1/probe-reports"
    assert t.requests[0].method == "POST" and t.bodies == [REPORT]


def test_retries_with_growing_backoff_then_spools_and_next_run_sends(tmp_path: Path) -> None:
    sleeps: list[float] = []
    down = Script(*[refused() for _ in range(4)])
    first = sender(tmp_path, down, sleeps).send(REPORT)
    assert first.sent == [] and first.spooled is not None and first.pending == 1
    assert json.loads(first.spooled.read_text()) == REPORT
    assert len(sleeps) == 3 and sleeps[0] < sleeps[1] < sleeps[2]
    second_report = {**REPORT, "verdict": "warn"}
    up = Script(201, 201)
    second = sender(tmp_path, up).send(second_report)
    assert second.sent == ["id1", "id2"] and second.pending == 0
    assert [b["verdict"] for b in up.bodies] == ["pass", "warn"]  # the spool goes first


def test_server_errors_are_retried(tmp_path: Path) -> None:
    t = Script(503, 502, 201)
    out = sender(tmp_path, t).send(REPORT)
    assert out.sent == ["id3"] and len(t.bodies) == 3


def test_a_500_is_spooled_without_retrying(tmp_path: Path) -> None:
    """A 500 is the service's bug: asking again at once gets the same answer, so the report
    waits in the spool for the next run instead."""
    t = Script(500)
    out = sender(tmp_path, t).send(REPORT)
    assert len(t.bodies) == 1 and out.spooled is not None and out.pending == 1
    assert out.error is not None and out.error.startswith("HTTP 500")


def test_a_dropped_connection_after_sending_is_not_posted_twice(tmp_path: Path) -> None:
    """The service may have stored a report whose answer was lost: no second POST in this run."""
    t = Script(httpx.ReadTimeout("timed out"))
    out = sender(tmp_path, t).send(REPORT)
    assert len(t.bodies) == 1 and out.spooled is not None
    assert out.error == "cannot reach http://svc:8080/v1/probe-reports: timed out"


def test_refused_reports_are_kept_with_the_reason_not_retried(tmp_path: Path) -> None:
    t = Script(422)
    out = sender(tmp_path, t).send(REPORT)
    assert out.rejected and out.rejected[0].startswith("HTTP 422") and len(t.bodies) == 1
    kept = list((tmp_path / "spool" / "rejected").glob("*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == REPORT
    assert "HTTP 422" in kept[0].with_suffix(".reason.txt").read_text()
    assert out.pending == 0


def test_token_problems_keep_the_report_for_later(tmp_path: Path) -> None:
    out = sender(tmp_path, Script(401)).send(REPORT)
    assert out.spooled is not None and out.pending == 1 and "HTTP 401" in (out.error or "")


def test_urls() -> None:
    assert ReportSender("http://a:1/", None).endpoint == "http://a:1/v1/probe-reports"
    assert ReportSender("https://a/v1/probe-reports", None).endpoint == "https://a/v1/probe-reports"
    with pytest.raises(InputError, match="--report-to needs an http"):
        ReportSender("ftp://a", None)


@pytest.fixture
def live_service(tmp_path: Path) -> Iterator[str]:
    """The service in a thread, on the port the system gave it."""
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path}/svc.db", api_tokens=("tok",)))  # type: ignore[arg-type]
    with serve_in_thread(app) as url:
        yield url


@pytest.mark.slow
def test_probe_cli_spools_then_delivers_to_the_live_service(
    tmp_path: Path, live_service: str
) -> None:
    env = {
        "ADVISOR_SPOOL_DIR": str(tmp_path / "spool"),
        "ADVISOR_TOKEN": "tok",
        "PATH": "/usr/bin:/bin",
        "ADVISOR_PROBE_LOCK_DIR": str(tmp_path),
        "ADVISOR_CACHE_DIR": str(tmp_path / "cache"),  # a bare environment: not ~/.cache
        "COLUMNS": "400",  # the spool path (TIME-KEY.json in a pytest tmp dir) on one line
    }
    cmd = [sys.executable, "-m", "advisor", "probe", "--only", "cpu_memcpy", "--json"]
    with refused_port() as port:
        down = subprocess.run(
            [*cmd, "--report-to", f"http://127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert down.returncode == 3 and "the next run with --report-to sends it" in down.stderr
    assert len(list((tmp_path / "spool").glob("*.json"))) == 1
    up = subprocess.run(
        [*cmd, "--report-to", live_service], capture_output=True, text=True, env=env, timeout=120
    )
    assert up.stderr.count("report delivered") == 2, up.stderr
    assert not list((tmp_path / "spool").glob("*.json"))
    assert httpx.get(f"{live_service}/v1/probe-reports").json()["total"] == 2
