"""Durability of the SQLite store under `advisor serve`: a report acknowledged with 201 survives a
SIGKILL of the server mid-traffic, byte-for-byte (as JSON) the report that was sent.

The server runs as a real subprocess (`python -m advisor serve`) on a temp SQLite file; client
threads POST distinct probe reports as fast as they can; after ~2.5 s the server is SIGKILLed (no
shutdown hooks, no checkpoint); a new server opens the same file and every acknowledged id must
be there with the same report.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from probes.report import ProbeReport
from tests.api_server import spawn

ROOT = Path(__file__).resolve().parent.parent
PROBE_REPORT = (
    ROOT
    / "benchmarks/results/probe-2026-11-30-nvidia-h200-driver580.159.04-torch2.11.0+cu130"
    / "probe-quick.json"
)
TOKEN = "durability-token"
CLIENTS = 4
TRAFFIC_S = 2.5


class Servers:
    """Starts `advisor serve` subprocesses; whatever is still running is killed at teardown."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, db: Path) -> tuple[subprocess.Popen[bytes], str]:
        log = self.tmp / f"server-{len(self.procs)}.log"
        proc, base = spawn(db, log, {"ADVISOR_API_TOKENS": TOKEN})
        self.procs.append(proc)
        return proc, base

    def log(self, index: int) -> str:
        return (self.tmp / f"server-{index}.log").read_text(errors="replace")[-3000:]

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    s = Servers(tmp_path)
    try:
        yield s
    finally:
        s.stop_all()


def _poster(
    base: str,
    template: dict[str, Any],
    client_no: int,
    stop: threading.Event,
    acked: dict[str, dict[str, Any]],
    ack_times: list[float],
    failures: list[str],
    busy: list[bool],
    lock: threading.Lock,
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=base, headers=headers, timeout=10) as client:
        n = 0
        while not stop.is_set():
            n += 1
            report = copy.deepcopy(template)  # distinct reports: a mix-up cannot go unnoticed
            report["inventory"]["hostname"] = f"durability-{client_no}-{n}"
            report["duration_s"] = client_no * 100_000 + n + 0.25
            busy[client_no] = True
            try:
                r = client.post("/v1/probe-reports", json=report)
            except httpx.TransportError as exc:  # the server was killed: not acknowledged
                with lock:
                    failures.append(type(exc).__name__)
                time.sleep(0.01)
                continue
            finally:
                busy[client_no] = False
            if r.status_code == 201:
                with lock:
                    acked[r.json()["id"]] = report
                    ack_times.append(time.monotonic())
            else:
                with lock:
                    failures.append(f"HTTP {r.status_code}: {r.text[:200]}")


def test_acknowledged_reports_survive_sigkill(servers: Servers, tmp_path: Path) -> None:
    template = json.loads(PROBE_REPORT.read_text())
    db = tmp_path / "advisor.db"
    proc, base = servers.start(db)

    stop = threading.Event()
    lock = threading.Lock()
    acked: dict[str, dict[str, Any]] = {}
    ack_times: list[float] = []
    failures: list[str] = []
    busy = [False] * CLIENTS
    threads = [
        threading.Thread(
            target=_poster,
            args=(base, template, i, stop, acked, ack_times, failures, busy, lock),
            daemon=True,
        )
        for i in range(CLIENTS)
    ]
    for t in threads:
        t.start()
    time.sleep(TRAFFIC_S)
    with lock:
        before_kill = len(acked)
    in_flight = sum(busy)
    killed_at = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)  # mid-traffic: no lifespan shutdown, no WAL checkpoint
    proc.wait(10)
    time.sleep(0.3)  # the clients see the dead server (refused or reset connections)
    stop.set()
    for t in threads:
        t.join(15)
    assert not any(t.is_alive() for t in threads), "a client thread did not stop"

    http_failures = [f for f in failures if f.startswith("HTTP")]
    assert not http_failures, f"non-201 answers before the kill: {http_failures[:5]}"
    assert before_kill >= 20, f"only {before_kill} reports acknowledged in {TRAFFIC_S} s"
    assert in_flight >= 1, "no request was in flight at the kill: it did not happen mid-traffic"
    assert killed_at - max(ack_times) < 1.0, "traffic had stopped before the kill"
    assert failures, "no request failed after the kill"
    assert Path(f"{db}-wal").exists(), "expected a WAL file left behind by the killed server"

    _, base2 = servers.start(db)
    missing, different = [], []
    with httpx.Client(base_url=base2, timeout=10) as client:
        for report_id, sent in acked.items():
            r = client.get(f"/v1/probe-reports/{report_id}")
            if r.status_code == 404:
                missing.append(report_id)
                continue
            assert r.status_code == 200, r.text
            body = r.json()
            # a report is stored as the current schema reads it (fields it lacks as their defaults)
            canonical = ProbeReport.model_validate(sent).model_dump(mode="json")
            if body["report"] != canonical or body["host"] != sent["inventory"]["hostname"]:
                different.append(report_id)
        total = client.get("/v1/probe-reports", params={"limit": 1}).json()["total"]
    print(
        f"\n{len(acked)} acknowledged ({before_kill} before the kill), {in_flight} in flight at"
        f" the kill, {len(failures)} failed after it,"
        f" {total} in the store after restart"
    )
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged reports lost: {missing[:5]}"
    assert not different, f"{len(different)} stored reports differ from what was sent"
    # at most one unacknowledged report per client can have been committed as the server died
    assert len(acked) <= total <= len(acked) + CLIENTS
