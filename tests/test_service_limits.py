"""`advisor serve` under abuse: connections that never finish a request, too many
connections, malformed HTTP, and one huge invalid body must neither hold resources for ever nor
stall other clients; every error the HTTP layer itself sends is application/problem+json."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.api_server import LiveServer, live_server

TOKEN = "limits-token"
REQUEST_TIMEOUT_S = 1.5
IDLE_TIMEOUT_S = 0.5
MAX_CONNECTIONS = 20
RESERVED = 3
MAX_BODY_BYTES = 4 * 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {
        "ADVISOR_REQUEST_TIMEOUT_S": str(REQUEST_TIMEOUT_S),
        "ADVISOR_IDLE_TIMEOUT_S": str(IDLE_TIMEOUT_S),
        "ADVISOR_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
        "ADVISOR_RESERVED_CONNECTIONS": str(RESERVED),
        "ADVISOR_KEEP_ALIVE_S": "1",
        "ADVISOR_STALLED_REQUEST_S": "60",  # the half-sent requests below hold the cap
    }
    with live_server(tmp_path_factory.mktemp("limits"), TOKEN, MAX_BODY_BYTES, env=env) as srv:
        yield srv


def connect(server: LiveServer) -> socket.socket:
    url = urlsplit(server.base_url)
    sock = socket.create_connection((url.hostname, url.port), timeout=10)
    return sock


def read_all(sock: socket.socket, limit_s: float = 10.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    start = time.monotonic()
    sock.settimeout(limit_s)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return data, time.monotonic() - start


def head_and_body(raw: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, body


def test_a_connection_that_sends_nothing_is_closed_after_the_idle_timeout(
    server: LiveServer,
) -> None:
    with connect(server) as sock:
        data, waited = read_all(sock)
    assert data == b""
    # ADVISOR_IDLE_TIMEOUT_S, not the request's 1.5 s (else 1,200 such sockets would hold
    # the cap for the whole request timeout)
    assert IDLE_TIMEOUT_S - 0.1 < waited < REQUEST_TIMEOUT_S - 0.5, waited


def test_a_slow_request_keeps_the_request_timeout(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # a byte in time: the request deadline
        time.sleep(IDLE_TIMEOUT_S + 0.3)
        sock.sendall(b"Host: x\r\n\r\n")
        data, _ = read_all(sock, 3)
    assert data.startswith(b"HTTP/1.1 200"), data


def test_a_half_sent_request_is_answered_408_and_closed(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"POST /v1/recommendations HTTP/1.1\r\nHost: x\r\nContent-Type: applic")
        data, waited = read_all(sock)
    assert waited < REQUEST_TIMEOUT_S + 3, waited
    status, headers, body = head_and_body(data)
    assert status.startswith("HTTP/1.1 408"), data
    assert headers["content-type"] == "application/problem+json"
    assert json.loads(body)["status"] == 408


def test_a_half_sent_body_is_dropped(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/recommendations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"workload":'
        )
        data, waited = read_all(sock)
    assert waited < REQUEST_TIMEOUT_S + 3, waited
    assert data.startswith(b"HTTP/1.1 408"), data


def test_an_idle_keep_alive_connection_is_closed(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data, waited = read_all(sock)
    assert data.startswith(b"HTTP/1.1 200"), data
    assert waited < 4, waited  # ADVISOR_KEEP_ALIVE_S=1


def half_sent(server: LiveServer) -> socket.socket:
    """A connection with a request started and never finished (a slow client)."""
    sock = connect(server)
    sock.sendall(b"POST /v1/recommendations HTTP/1.1\r\nHost: x\r\n")
    return sock


def request_on(sock: socket.socket, path: str) -> bytes:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    return read_all(sock, 5)[0]


def test_the_reserve_beyond_the_cap_answers_health_alone_then_503(server: LiveServer) -> None:
    held = [half_sent(server) for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.1)  # the server has accepted them all
        # beyond the cap: RESERVED more, for /healthz and /readyz only
        # (one at a time: a connection that has sent nothing yet is the first to make room)
        with connect(server) as health:
            assert request_on(health, "/healthz").startswith(b"HTTP/1.1 200")
        with connect(server) as ready:
            assert request_on(ready, "/readyz").startswith(b"HTTP/1.1 200")
        with connect(server) as other:
            status, headers, body = head_and_body(request_on(other, "/v1/catalog/accelerators"))
        assert status.startswith("HTTP/1.1 503"), status
        assert headers["content-type"] == "application/problem+json"
        assert "/healthz and /readyz only" in json.loads(body)["detail"]
        for _ in range(RESERVED):  # the reserve taken too, by health requests half-sent
            sock = connect(server)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            held.append(sock)
            time.sleep(0.05)  # its bytes arrive before the next one connects
        time.sleep(0.1)
        with connect(server) as extra:
            data, _ = read_all(extra, 5)
        status, headers, body = head_and_body(data)
        assert status.startswith("HTTP/1.1 503"), data
        assert headers["content-type"] == "application/problem+json"
        assert json.loads(body)["status"] == 503
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)
    assert httpx.get(f"{server.base_url}/healthz", timeout=5).status_code == 200


def test_silent_connections_beyond_the_cap_make_room_for_health_checks(
    server: LiveServer,
) -> None:
    # twice the cap and its reserve of sockets that send nothing (unanswered, 1,200 of them would
    # make every client, /healthz included, a 503 for 29 s)
    silent = [connect(server) for _ in range(2 * (MAX_CONNECTIONS + RESERVED))]
    try:
        time.sleep(0.2)
        with connect(server) as health:
            assert request_on(health, "/healthz").startswith(b"HTTP/1.1 200")
        # the oldest were closed to make room: the first socket reads the end at once
        silent[0].settimeout(1)
        assert silent[0].recv(1) == b""
    finally:
        for sock in silent:
            sock.close()


def test_a_complete_header_beyond_the_limit_is_a_400(server: LiveServer) -> None:
    # the whole block in one write: h11's own limit counts only a block still incomplete
    big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65_000 + b"\r\n\r\n"
    many = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(
        b"X-%04d: v\r\n" % i for i in range(3_000)
    )
    for request_bytes in (big, many + b"\r\n"):
        with connect(server) as sock:
            sock.sendall(request_bytes)
            data, _ = read_all(sock)
        status, headers, body = head_and_body(data)
        assert status.startswith("HTTP/1.1 400"), data[:200]
        assert headers["content-type"] == "application/problem+json"
        assert "at most 16384 (ADVISOR_MAX_HEADER_BYTES)" in json.loads(body)["detail"]
    # just under the limit: served
    fits = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 15_000 + b"\r\n\r\n"
    with connect(server) as sock:
        sock.sendall(fits)
        assert sock.recv(12) == b"HTTP/1.1 200"


def test_an_oversize_chunked_body_is_cut_off_after_its_413(server: LiveServer) -> None:
    chunk = b"a" * 65_536
    frame = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    sent = 0
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/recommendations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            b"\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        got = bytearray()

        def read() -> None:
            got.extend(read_all(sock, 15)[0])

        reader = threading.Thread(target=read)
        reader.start()
        try:
            while sent < 100 * 1024 * 1024:  # 100 MB, as the finding sent
                sock.sendall(frame)
                sent += len(frame)
        except OSError:  # the server closed the connection: the rest is never read
            pass
        reader.join()
    assert got.startswith(b"HTTP/1.1 413"), bytes(got[:200])
    # the limit, the 1 MiB that lingering drops and the sockets' buffers: far below 100 MB
    assert sent < 3 * MAX_BODY_BYTES + 8 * 1024 * 1024, sent


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nBad Header Name: y\r\n\r\n",
        # h11 counts the bytes of a header block still incomplete: no blank line yet
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40_000,
    ],
    ids=["request-line", "header-name", "headers-too-large"],
)
def test_malformed_http_is_a_problem(server: LiveServer, request_bytes: bytes) -> None:
    with connect(server) as sock:
        sock.sendall(request_bytes)
        data, _ = read_all(sock)
    status, headers, body = head_and_body(data)
    assert status.startswith("HTTP/1.1 400"), data
    assert headers["content-type"] == "application/problem+json", headers
    assert json.loads(body)["status"] == 400


def test_a_body_of_90000_unknown_keys_is_fast_small_and_stalls_nobody(
    server: LiveServer,
) -> None:
    body = "{" + ",".join(f'"x{i:06d}":0' for i in range(90_000)) + "}"
    assert len(body) > 1_000_000
    answers: list[httpx.Response] = []

    def post() -> None:
        answers.append(
            httpx.post(
                f"{server.base_url}/v1/recommendations",
                content=body,
                headers={"content-type": "application/json"},
                timeout=60,
            )
        )

    workers = [threading.Thread(target=post) for _ in range(2)]
    for w in workers:
        w.start()
    health: list[int] = []
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        while any(w.is_alive() for w in workers):
            health.append(client.get("/healthz").status_code)
            time.sleep(0.02)
    for w in workers:
        w.join()
    for r in answers:
        assert r.status_code == 422
        assert r.headers["content-type"] == "application/problem+json"
        assert len(r.content) < 16 * 1024, len(r.content)
        problem = r.json()
        # refused by its shape before any validation: one problem naming the limit
        assert [e["field"] for e in problem["errors"]] == ["(entry)"], problem
        assert "an object of 90000 keys: at most 1000" in problem["detail"], problem["detail"]
    # nobody stalled: /healthz answered throughout (benchmarks/attack_service.py times both)
    assert health and all(code == 200 for code in health), health


def test_one_client_holds_at_most_its_cap(tmp_path: Path) -> None:
    env = {"ADVISOR_MAX_CONNECTIONS_PER_CLIENT": "5", "ADVISOR_REQUEST_TIMEOUT_S": "10"}
    with live_server(tmp_path, TOKEN, env=env) as srv:
        held = [half_sent(srv) for _ in range(5)]  # requests under way: none is idle
        try:
            time.sleep(0.2)
            with connect(srv) as extra:
                status, _, body = head_and_body(read_all(extra, 5)[0])
            assert status.startswith("HTTP/1.1 503"), status
            assert "more than 5 open connections from this client" in json.loads(body)["detail"]
            # another client address (loopback has a whole /8) is not held back
            url = urlsplit(srv.base_url)
            with socket.create_connection(
                (url.hostname, url.port), timeout=5, source_address=("127.0.0.2", 0)
            ) as other:
                assert request_on(other, "/healthz").startswith(b"HTTP/1.1 200")
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.2)
        with connect(srv) as again:  # the count went down as they closed
            assert request_on(again, "/healthz").startswith(b"HTTP/1.1 200")


def test_the_reserve_refuses_other_requests_from_their_first_bytes(server: LiveServer) -> None:
    held = [half_sent(server) for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.1)
        with connect(server) as other:
            other.sendall(b"POST /v1/pro")  # never a health request: refused before its head
            status, _, body = head_and_body(read_all(other, 5)[0])
        assert status.startswith("HTTP/1.1 503"), status
        assert "/healthz and /readyz only" in json.loads(body)["detail"]
    finally:
        for sock in held:
            sock.close()


def test_the_reserve_serves_one_health_request_per_connection(server: LiveServer) -> None:
    held = [half_sent(server) for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.1)
        with connect(server) as health:  # two requests at once: a kept-alive one answers both
            health.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
            data, _ = read_all(health, 5)
        assert data.startswith(b"HTTP/1.1 200"), data
        assert data.count(b"HTTP/1.1 200") == 1, data
    finally:
        for sock in held:
            sock.close()


def test_at_the_cap_a_stalled_request_makes_room(tmp_path: Path) -> None:
    env = {
        "ADVISOR_MAX_CONNECTIONS": "10",
        "ADVISOR_RESERVED_CONNECTIONS": "0",
        "ADVISOR_STALLED_REQUEST_S": "0.3",
        "ADVISOR_HEADER_TIMEOUT_S": "60",
        "ADVISOR_REQUEST_TIMEOUT_S": "60",
    }
    with live_server(tmp_path, TOKEN, env=env) as srv:
        held = [half_sent(srv) for _ in range(10)]  # the whole cap, each silent since
        try:
            time.sleep(0.8)
            with connect(srv) as new:  # no idle connection: the longest silent one goes
                answer = request_on(new, "/v1/accelerators")
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            status, _, body = head_and_body(read_all(held[0], 5)[0])
            assert status.startswith("HTTP/1.1 408"), status
            assert "stalled" in json.loads(body)["detail"]
        finally:
            for sock in held:
                sock.close()


def test_a_body_refused_unread_closes_its_connection_after_the_answer(server: LiveServer) -> None:
    """An anonymous 1 MiB body: 401 before it is read, with Connection: close (RFC 9112,
    section 9.6), the whole answer received while the server drops the rest of the body and
    then closes; the client's next request goes on a new connection and is answered (sent on
    the old one while the server closed it, it was lost under load)."""
    import httpx

    body = b"[" + b"0," * (512 * 1024) + b"0]"
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        r = client.post(
            "/v1/probe-reports", content=body, headers={"content-type": "application/json"}
        )
        assert r.status_code == 401 and r.headers["connection"] == "close"
        assert r.json()["status"] == 401
        assert client.get("/healthz").status_code == 200
