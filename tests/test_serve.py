"""`advisor serve`: a port in use is bad usage (exit 2, one line); --port 0 takes any free port and
says which."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_")}
    return {**env, "ADVISOR_DATABASE_URL": f"sqlite:///{tmp_path / 'a.db'}"}


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port another socket listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_port_in_use_is_exit_2_in_one_line(tmp_path: Path, busy_port: int) -> None:
    cmd = [sys.executable, "-m", "advisor", "serve", "--port", str(busy_port)]
    p = subprocess.run(
        [*cmd, "--log-level", "error"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=REPO,
        timeout=60,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr == f"error: cannot listen on 127.0.0.1:{busy_port}: Address already in use\n"


def test_a_host_that_does_not_resolve_is_exit_2(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "advisor", "serve", "--host", "no-such-host.invalid"]
    p = subprocess.run(
        [*cmd, "--log-level", "error"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=REPO,
        timeout=60,
    )
    assert p.returncode == 2 and p.stderr.startswith("error: --host 'no-such-host.invalid': ")
    assert "Traceback" not in p.stderr


def test_port_0_serves_on_the_port_it_logs(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "advisor", "serve", "--port", "0", "--no-access-log"]
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, text=True, env=_env(tmp_path), cwd=REPO, bufsize=1
    )
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:  # ends when the server exits: no endless wait
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)$", line.strip())
            if found:
                port = int(found.group(1))
                break
        assert port is not None and port > 0
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_log_format_json_writes_one_object_a_line(tmp_path: Path) -> None:
    """--log-format json: uvicorn's start-up and access lines are JSON objects with the access
    line's parts as fields; the listening line stays as it is (clients read the port from it)."""
    cmd = [sys.executable, "-m", "advisor", "serve", "--port", "0", "--log-format", "json"]
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, text=True, env=_env(tmp_path), cwd=REPO, bufsize=1
    )
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:
            lines.append(line)
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)$", line.strip())
            if found:
                port = int(found.group(1))
                break
        assert port is not None
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    records = [json.loads(line) for line in [*lines[:-1], *rest.splitlines()] if line.strip()]
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    access = [r for r in records if r["logger"] == "uvicorn.access"]
    assert len(access) == 1, records
    assert access[0]["method"] == "GET" and access[0]["path"] == "/healthz"
    assert access[0]["status"] == 200
