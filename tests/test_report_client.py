"""`advisor probe --report-to`: retries with backoff, a spool for undelivered reports, no loss."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from advisor.api import create_app
from advisor.api.settings import Settings
from advisor.report_client import ReportSender

REPORT = {"verdict": "pass", "inventory": {"hostname": "h"}, "checks": []}


class FakeTransport:
    """Answers from a script: an int status (with a JSON body) or an exception to raise."""

    def __init__(self, *script: int | Exception) -> None:
        self.script = list(script)
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    def __call__(
        self, url: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int, bytes]:
        step = self.script.pop(0)
        self.bodies.append(json.loads(body))
        self.headers.append(headers)
        if isinstance(step, Exception):
            raise step
        return step, json.dumps({"id": f"id{len(self.bodies)}", "detail": "x"}).encode()


def sender(
    tmp_path: Path, transport: FakeTransport, sleeps: list[float] | None = None
) -> ReportSender:
    return ReportSender(
        "http://svc:8080",
        "tok",
        tmp_path / "spool",
        transport=transport,
        sleep=(sleeps.append if sleeps is not None else lambda _s: None),
    )


def test_delivered_first_time(tmp_path: Path) -> None:
    t = FakeTransport(201)
    out = sender(tmp_path, t).send(REPORT)
    assert out.sent == ["id1"] and out.spooled is None and out.pending == 0
    assert t.headers[0]["Authorization"] == "Bearer tok"


def test_retries_with_growing_backoff_then_spools_and_next_run_sends(tmp_path: Path) -> None:
    sleeps: list[float] = []
    down = FakeTransport(*[ConnectionRefusedError(111, "refused")] * 4)
    first = sender(tmp_path, down, sleeps).send(REPORT)
    assert first.sent == [] and first.spooled is not None and first.pending == 1
    assert json.loads(first.spooled.read_text()) == REPORT
    assert len(sleeps) == 3 and sleeps[0] < sleeps[1] < sleeps[2]
    second_report = {**REPORT, "verdict": "warn"}
    up = FakeTransport(201, 201)
    second = sender(tmp_path, up).send(second_report)
    assert second.sent == ["id1", "id2"] and second.pending == 0
    assert [b["verdict"] for b in up.bodies] == ["pass", "warn"]  # the spool goes first


def test_server_errors_are_retried(tmp_path: Path) -> None:
    t = FakeTransport(503, 502, 201)
    out = sender(tmp_path, t).send(REPORT)
    assert out.sent == ["id3"] and len(t.bodies) == 3


def test_refused_reports_are_kept_with_the_reason_not_retried(tmp_path: Path) -> None:
    t = FakeTransport(422)
    out = sender(tmp_path, t).send(REPORT)
    assert out.rejected and out.rejected[0].startswith("HTTP 422") and len(t.bodies) == 1
    kept = list((tmp_path / "spool" / "rejected").glob("*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == REPORT
    assert "HTTP 422" in kept[0].with_suffix(".reason.txt").read_text()
    assert out.pending == 0


def test_token_problems_keep_the_report_for_later(tmp_path: Path) -> None:
    out = sender(tmp_path, FakeTransport(401)).send(REPORT)
    assert out.spooled is not None and out.pending == 1 and "HTTP 401" in (out.error or "")


def test_urls() -> None:
    assert ReportSender("http://a:1/", None).endpoint == "http://a:1/v1/probe-reports"
    assert ReportSender("https://a/v1/probe-reports", None).endpoint == "https://a/v1/probe-reports"
    with pytest.raises(ValueError, match="http"):
        ReportSender("ftp://a", None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def live_service(tmp_path: Path) -> Iterator[str]:
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path}/svc.db", api_tokens=("tok",)))  # type: ignore[arg-type]
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(5)


def test_probe_cli_spools_then_delivers_to_the_live_service(
    tmp_path: Path, live_service: str
) -> None:
    import urllib.request

    env = {
        "ADVISOR_SPOOL_DIR": str(tmp_path / "spool"),
        "ADVISOR_TOKEN": "tok",
        "PATH": "/usr/bin:/bin",
        "ADVISOR_PROBE_LOCK_DIR": str(tmp_path),
    }
    cmd = [sys.executable, "-m", "advisor", "probe", "--only", "cpu_memcpy", "--json"]
    down = subprocess.run(
        [*cmd, "--report-to", f"http://127.0.0.1:{_free_port()}"],
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
    with urllib.request.urlopen(f"{live_service}/v1/probe-reports") as r:
        assert json.loads(r.read())["total"] == 2
