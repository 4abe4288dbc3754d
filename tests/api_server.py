"""Runs `advisor serve` in a subprocess for tests that need a live HTTP server.

The server binds port 0 (the kernel picks a free port) and prints the address it got; we read it
from its output. Pre-picking a "free" port and passing it raced with other processes ("address
already in use").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
LISTENING = re.compile(r"advisor serve: listening on (http://\S+)")
# Whatever the caller's shell says, the server starts from the shipped catalog and defaults.
CLEARED_ENV = ("ADVISOR_CATALOG", "ADVISOR_CATALOG_MODE", "ADVISOR_MIN_FLEET_REPORTS")


@dataclass(frozen=True)
class LiveServer:
    base_url: str
    token: str
    max_body_bytes: int
    log: Path
    pid: int


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def spawn(
    database: Path, log: Path, env: Mapping[str, str], startup_s: float = 30.0
) -> tuple[subprocess.Popen[bytes], str]:
    """Start `advisor serve --port 0` on a SQLite file; return the process and its base URL once
    GET /healthz answers. `env` is added to a copy of this process's environment."""
    full_env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
    full_env.update({"ADVISOR_DATABASE_URL": f"sqlite:///{database}", **env})
    cmd = [sys.executable, "-m", "advisor", "serve", "--host", "127.0.0.1", "--port", "0"]
    cmd += ["--no-access-log", "--log-level", "warning"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    try:
        return proc, _wait_healthy(proc, log, startup_s)
    except BaseException:
        stop(proc)
        raise


@contextmanager
def live_server(
    workdir: Path,
    token: str,
    max_body_bytes: int = 1024 * 1024,
    startup_s: float = 30.0,
    env: Mapping[str, str] | None = None,
) -> Iterator[LiveServer]:
    """`advisor serve` with a fresh SQLite database in `workdir`; stopped on exit."""
    log = workdir / "server.log"
    settings = {"ADVISOR_API_TOKENS": token, "ADVISOR_MAX_BODY_BYTES": str(max_body_bytes)}
    proc, base_url = spawn(workdir / "advisor.db", log, {**settings, **(env or {})}, startup_s)
    try:
        yield LiveServer(base_url, token, max_body_bytes, log, proc.pid)
    finally:
        stop(proc)


def _wait_healthy(proc: subprocess.Popen[bytes], log: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    base_url = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"advisor serve exited with {proc.returncode} before it was healthy:\n"
                + log.read_text(errors="replace")
            )
        if base_url is None:
            found = LISTENING.search(log.read_text(errors="replace"))
            base_url = found.group(1) if found else None
        if base_url is not None:
            try:
                if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                    return base_url
            except httpx.TransportError:
                pass
        time.sleep(0.05)
    raise RuntimeError(
        f"advisor serve was not healthy within {timeout}s:\n" + log.read_text(errors="replace")
    )


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """The app served by uvicorn in a thread of this process, on the port the system gave it
    (port 0: no race for a port); yields its base URL."""
    import threading

    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the service did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(5)
