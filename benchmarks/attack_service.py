"""Service abuse findings replayed against a live `advisor serve` (SQLite, default limits but a
4 MiB body limit), and, with ADVISOR_TEST_POSTGRES_URL set, a PostgreSQL outage (a TCP proxy that
stops answering, tests/tcp_proxy.py) under eight concurrent report posts. Prints one line each.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/attack_service.py [--findings-only | --catalog-reads]
(--findings-only: the second round alone, benchmarks/attack_findings.py; --catalog-reads: its
anonymous reads alone)
"""

from __future__ import annotations

import os
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.attack_findings import catalog_reads, replay
from tests.api_server import live_server
from tests.tcp_proxy import TcpProxy
from tests.test_estimate_api import probe_report

JSON = {"content-type": "application/json"}


def connect(url: str) -> socket.socket:
    u = urlsplit(url)
    return socket.create_connection((u.hostname, u.port), timeout=10)


def first_line(url: str, data: bytes) -> bytes:
    with connect(url) as sock:
        sock.sendall(data)
        sock.settimeout(5)
        out = b""
        try:
            while chunk := sock.recv(65536):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return out.split(b"\r\n")[0]


def service(url: str) -> None:
    r = httpx.post(f"{url}/v1/recommendations", content="[" * 1000 + "]" * 1000, headers=JSON)
    print(f"[ x1000 body: {r.status_code}")
    body = "{" + ",".join(f'"x{i:06d}":0' for i in range(90_000)) + "}"
    took = []
    for _ in range(5):
        start = time.perf_counter()
        r = httpx.post(f"{url}/v1/recommendations", content=body, headers=JSON, timeout=60)
        took.append(time.perf_counter() - start)
    print(f"90,000 unknown keys: {r.status_code}, median {statistics.median(took):.3f} s")
    big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65_000 + b"\r\n\r\n"
    print(f"65,000-byte header: {first_line(url, big).decode()}")
    many = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    many += b"".join(b"X-%04d: v\r\n" % i for i in range(3000)) + b"\r\n"
    print(f"3,000 headers ({len(many)} B): {first_line(url, many).decode()}")
    silent = [connect(url) for _ in range(1200)]
    time.sleep(0.5)
    start = time.perf_counter()
    codes = sorted({httpx.get(f"{url}/healthz", timeout=10).status_code for _ in range(20)})
    print(
        f"1,200 silent sockets open, 20 x /healthz: {codes} in {time.perf_counter() - start:.2f} s"
    )
    time.sleep(6)
    closed = 0
    for sock in silent:
        sock.settimeout(0.01)
        try:
            closed += sock.recv(1) == b""
        except TimeoutError:
            pass
        except OSError:
            closed += 1
        sock.close()
    print(f"silent sockets closed by the server 6.5 s later: {closed} of 1200")
    frame = b"%x\r\n" % 65536 + b"a" * 65536 + b"\r\n"
    sent = 0
    with connect(url) as sock:
        sock.sendall(
            b"POST /v1/recommendations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        try:
            while sent < 100 * 2**20:
                sock.sendall(frame)
                sent += len(frame)
        except OSError:
            pass
    print(f"chunked body over the 4 MiB limit: {sent / 1e6:.1f} MB sent before the close")


def outage(pg_url: str) -> None:
    from fastapi.testclient import TestClient

    from advisor.api import create_app
    from advisor.api.settings import Settings

    u = urlsplit(pg_url)
    proxy = TcpProxy(u.hostname or "127.0.0.1", u.port or 5432)
    netloc = f"{u.username}:{u.password}@127.0.0.1:{proxy.port}"
    url = urlunsplit(u._replace(netloc=netloc))
    settings = Settings(database_url=url, api_tokens=("t",))  # type: ignore[arg-type]
    auth = {"Authorization": "Bearer t"}

    def post(client: TestClient) -> tuple[int, float]:
        start = time.monotonic()
        body = probe_report(uuid.uuid4().hex, 0.8)
        r = client.post("/v1/probe-reports", json=body, headers=auth)
        return r.status_code, time.monotonic() - start

    with TestClient(create_app(settings)) as client:
        post(client)
        proxy.cut()
        status, took = post(client)
        print(f"PostgreSQL cut: first post {status} in {took:.2f} s")
        out: list[tuple[int, float]] = []
        workers = [threading.Thread(target=lambda: out.append(post(client))) for _ in range(8)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        times = [t for _, t in out]
        print(
            f"then 8 concurrent posts: {sorted({s for s, _ in out})}, median "
            f"{statistics.median(times):.3f} s, max {max(times):.3f} s"
        )
        start = time.monotonic()
        ready = client.get("/readyz")
        print(
            f"/readyz: {ready.status_code} in {time.monotonic() - start:.3f} s: "
            f"{ready.json()['database']['detail'][:80]}"
        )
        proxy.restore()
    proxy.close()


def main() -> int:
    if "--catalog-reads" in sys.argv:  # that replay alone, 200 calls of each read
        with tempfile.TemporaryDirectory() as tmp, live_server(Path(tmp), "t") as srv:
            catalog_reads(srv.base_url, srv.pid, count=200)
        return 0
    if "--findings-only" not in sys.argv:
        with tempfile.TemporaryDirectory() as tmp, live_server(Path(tmp), "t", 4 * 2**20) as srv:
            service(srv.base_url)
    # the second round (benchmarks/attack_findings.py), on default limits
    with tempfile.TemporaryDirectory() as tmp, live_server(Path(tmp), "t") as srv:
        replay(srv.base_url, "t", srv.pid)
    if "--findings-only" in sys.argv:
        return 0
    pg_url = os.environ.get("ADVISOR_TEST_POSTGRES_URL")
    if pg_url:
        outage(pg_url)
    else:
        print("(no ADVISOR_TEST_POSTGRES_URL: the outage part is skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
