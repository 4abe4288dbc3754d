"""Start-up: "listening on" is printed once start-up is complete (a client that connects on it
is served), and the service uses the validated catalog the CLI caches instead of parsing and
validating the YAML catalog on every start."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.api import create_app
from advisor.api.settings import Settings
from tests.api_server import REPO, stop

LISTENING = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)")


def test_a_client_connecting_on_the_listening_line_is_answered(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_")}
    env.update(
        ADVISOR_DATABASE_URL=f"sqlite:///{tmp_path}/s.db",
        ADVISOR_CACHE_DIR=str(tmp_path / "cache"),
    )
    cmd = [sys.executable, "-m", "advisor", "serve", "--port", "0", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        seen = b""
        deadline = time.monotonic() + 30
        while (found := LISTENING.search(seen)) is None and time.monotonic() < deadline:
            seen += proc.stderr.readline()
        assert found, seen
        # at once, no retry: the line means the port listens and the app has started
        with socket.create_connection(("127.0.0.1", int(found.group(1))), timeout=5) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert sock.recv(12) == b"HTTP/1.1 200"
    finally:
        stop(proc)


def test_the_service_starts_from_the_validated_catalog_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ADVISOR_NO_CACHE", raising=False)
    parsed = 0
    real = yaml.load

    def counting(stream: Any, Loader: Any) -> Any:
        nonlocal parsed
        parsed += 1
        return real(stream, Loader=Loader)

    monkeypatch.setattr(yaml, "load", counting)
    settings = Settings(database_url=f"sqlite:///{tmp_path}/c.db")
    cold = create_app(settings).state.advisor.catalog.catalog
    assert parsed > 0 and list((tmp_path / "cache").iterdir()), "a cold start stores the cache"
    parsed = 0
    warm = create_app(settings).state.advisor.catalog.catalog
    assert parsed == 0, "a warm start parsed YAML"
    assert (warm.accelerators, warm.instance_types) == (cold.accelerators, cold.instance_types)
