"""Slow and partial requests (`advisor serve`): each is dropped after a deadline of its own (the
head after its first byte, the body after the head), not after the whole request timeout, and a
keep-alive connection's next request gets the same deadlines. 1,100 sockets that each sent one
byte once held the whole connection cap for the 30 s request timeout."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from advisor.api.server import client_key
from tests.api_server import LiveServer, live_server
from tests.test_service_limits import head_and_body, read_all

HEADER_TIMEOUT_S = 0.6
BODY_TIMEOUT_S = 0.6
REQUEST_TIMEOUT_S = 20.0
# far below the request timeout: the short deadline closed it, whatever the machine's load
CLOSED_WELL_BEFORE_S = REQUEST_TIMEOUT_S / 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {
        "ADVISOR_REQUEST_TIMEOUT_S": str(REQUEST_TIMEOUT_S),
        "ADVISOR_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "ADVISOR_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
        "ADVISOR_IDLE_TIMEOUT_S": "5",
        "ADVISOR_KEEP_ALIVE_S": "5",
    }
    with live_server(tmp_path_factory.mktemp("slow"), "slow-token", env=env) as srv:
        yield srv


def connect(server: LiveServer) -> socket.socket:
    url = urlsplit(server.base_url)
    return socket.create_connection((url.hostname, url.port), timeout=10)


def assert_408_soon(sock: socket.socket) -> None:
    data, waited = read_all(sock, REQUEST_TIMEOUT_S + 5)
    status, headers, body = head_and_body(data)
    assert status.startswith("HTTP/1.1 408"), data
    assert headers["content-type"] == "application/problem+json"
    assert "its head within 0.6 s" in json.loads(body)["detail"]
    assert waited < CLOSED_WELL_BEFORE_S, waited


def test_one_byte_is_dropped_after_the_head_deadline(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"G")
        assert_408_soon(sock)


def test_a_partial_head_is_dropped_after_the_head_deadline(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"POST /v1/recommendations HTTP/1.1\r\nHost: x\r\n")
        assert_408_soon(sock)


def test_a_partial_body_is_dropped_after_the_body_deadline(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/recommendations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"workload":'
        )
        assert_408_soon(sock)


def test_one_byte_after_a_keep_alive_answer_is_dropped_after_the_head_deadline(
    server: LiveServer,
) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        first = b""
        while b"\r\n\r\n" not in first or not first.rstrip().endswith(b"}"):
            first += sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200"), first
        sock.sendall(b"G")  # the next request, begun and never finished
        assert_408_soon(sock)


def test_content_length_with_transfer_encoding_is_refused_and_closed(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/recommendations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        data, _ = read_all(sock, 5)
    status, _, body = head_and_body(data)
    assert status.startswith("HTTP/1.1 400"), data
    assert (
        "both Content-Length and Transfer-Encoding" in json.loads(body.split(b"HTTP/")[0])["detail"]
    )
    assert data.count(b"HTTP/1.1") == 1, data  # the smuggled second request was never served


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", True),  # one /64
        ("2001:db8:1:2::1", "2001:db8:1:3::1", False),  # the next /64
        ("::ffff:192.0.2.7", "192.0.2.7", True),  # IPv4-mapped is the IPv4 client
        ("192.0.2.7", "192.0.2.8", False),
        ("fe80::1%eth0", "fe80::2", True),  # a zone does not make another client
    ],
)
def test_clients_are_counted_per_ipv4_address_and_ipv6_64(a: str, b: str, same: bool) -> None:
    assert (client_key(a) == client_key(b)) is same
    assert client_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"


def test_an_anonymous_upload_is_refused_before_its_body_arrives(server: LiveServer) -> None:
    with connect(server) as sock:  # the body never comes: waiting for it would be a 408
        sock.sendall(
            b"POST /v1/probe-reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n"
        )
        status, _, body = head_and_body(read_all(sock, 10)[0])
    assert status.startswith("HTTP/1.1 401"), status
    assert json.loads(body)["status"] == 401
