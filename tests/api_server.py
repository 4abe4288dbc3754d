"""Runs `advisor serve` in a subprocess for tests that need a live HTTP server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class LiveServer:
    base_url: str
    token: str
    max_body_bytes: int
    log: Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@contextmanager
def live_server(
    workdir: Path, token: str, max_body_bytes: int = 1024 * 1024, startup_s: float = 30.0
) -> Iterator[LiveServer]:
    """Start `advisor serve` on a free port with a fresh SQLite database; stop it on exit."""
    port = free_port()
    log = workdir / "server.log"
    env = {
        **os.environ,
        "ADVISOR_DATABASE_URL": f"sqlite:///{workdir / 'advisor.db'}",
        "ADVISOR_API_TOKENS": token,
        "ADVISOR_MAX_BODY_BYTES": str(max_body_bytes),
    }
    for var in ("ADVISOR_CATALOG", "ADVISOR_CATALOG_MODE", "ADVISOR_MIN_FLEET_REPORTS"):
        env.pop(var, None)  # the shipped catalog and defaults, whatever the caller's shell says
    cmd = [sys.executable, "-m", "advisor", "serve", "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--no-access-log", "--log-level", "warning"]
    base_url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_healthy(proc, base_url, log, startup_s)
            yield LiveServer(base_url, token, max_body_bytes, log)
        finally:
            _stop(proc)


def _wait_healthy(proc: subprocess.Popen[bytes], base_url: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"advisor serve exited with {proc.returncode} before it was healthy:\n"
                + log.read_text(errors="replace")
            )
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    _stop(proc)
    raise RuntimeError(
        f"advisor serve was not healthy within {timeout}s:\n" + log.read_text(errors="replace")
    )
