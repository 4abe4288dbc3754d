"""uvicorn under the service's limits (advisor serve): a bounded number of connections, a
deadline for each request to arrive, idle keep-alive closed, and the HTTP layer's own errors as
application/problem+json like every other error.

uvicorn's h11 protocol arms no timer on a fresh connection nor while a request is half-sent, so
connections that never finish a request stay open until the client leaves (20,000 of them used
up the file descriptors); its own 400 and 503 bodies are text/plain. The subclass below adds the
request deadline and the connection cap, and words those errors as Problems.

Four more holes are closed here too:
- h11's size limit counts only a header block still incomplete: a 65,000-byte header (or 3,000
  headers) arriving in one read passed. The complete request line and headers are measured too.
- 1,200 sockets that sent nothing filled the cap for 29 s, /healthz included. A connection that
  has sent no byte is closed after idle_timeout_s; at the cap, the oldest such connection makes
  room for the new one; and reserved_connections more are accepted beyond the cap for /healthz
  and /readyz alone (a liveness probe still answers while slow clients hold the cap); with
  max_connections_per_client, one client address holds at most that many.
- A body refused before it was read (413) was then read to its end (100 MB) to keep the
  connection: now the response is followed by a half-close and the rest is discarded for at most
  LINGER_S or LINGER_MAX_BYTES, then the connection is closed (closing at once would reset the
  connection and could lose the 413 on the client's side).

Then 1,100 sockets that each sent one byte (or a partial body, or one byte after a finished
keep-alive request) held the cap for the whole request timeout, the health reserve included:
- a request's head must be complete header_timeout_s after its first byte, and its body
  body_timeout_s after its head (seconds; request_timeout_s stays the overall bound);
- at the cap, a request silent for stalled_request_s (a second) makes room for a new
  connection when no idle one can, so slow clients repeating every few seconds cannot hold it;
- one client holds at most max_connections_per_client connections, on by default; an IPv6
  client is counted per /64 (one host is given a whole /64 and picks any address in it);
- a reserved connection serves one health request: its first bytes must begin
  "GET /healthz" or "GET /readyz" (or HEAD), else it is closed at once, and it is closed after
  its answer (no keep-alive on the reserve);
- a request with both Content-Length and Transfer-Encoding is refused and the connection closed
  (RFC 9112, section 6.3: a smuggling attempt or a broken client).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
from http import HTTPStatus
from typing import Any, ClassVar, cast

import h11
from uvicorn import Config
from uvicorn.protocols.http.h11_impl import H11Protocol

from advisor.api.problems import problem_json
from advisor.api.settings import Settings

NextEvent = h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]
# The paths a connection beyond max_connections (one of reserved_connections) may ask for.
OPERATIONS_PATHS = frozenset({b"/healthz", b"/readyz"})
# How such a connection's first bytes must begin (a path followed by a space or a query).
OPERATIONS_STARTS = tuple(
    method + b" " + path + end
    for method in (b"GET", b"HEAD")
    for path in sorted(OPERATIONS_PATHS)
    for end in (b" ", b"?")
)
_OPERATIONS_PREFIX_BYTES = max(len(start) for start in OPERATIONS_STARTS)
# After a response to a request whose body was not read (413): how long, and how many more bytes,
# the rest is read and dropped before the connection is closed.
LINGER_S = 1.0
LINGER_MAX_BYTES = 1024 * 1024


def _raw_problem(status: int, detail: str) -> bytes:
    """A whole HTTP/1.1 response that closes the connection, written below h11 (which cannot
    answer before a request has arrived)."""
    phrase = HTTPStatus(status).phrase
    body = problem_json(status, phrase, detail)
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


# Kept per address: the engine's routes ask it on every request (advisor/api/engine_queue.py
# client_of), and parsing the address was a few percent of a request's CPU; bounded, as the
# addresses a server sees are not.
@functools.lru_cache(maxsize=4096)
def client_key(address: str) -> str:
    """What one client is counted by: its IPv4 address, or the /64 of its IPv6 address (an
    IPv4-mapped IPv6 address counts as the IPv4 one); an address that does not parse (a Unix
    socket) as itself."""
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


def _may_be_operations(prefix: bytes) -> bool:
    """Whether a reserved connection's first bytes still begin a health request."""
    return any(start.startswith(prefix) or prefix.startswith(start) for start in OPERATIONS_STARTS)


class _CycleTransport:
    """The connection's transport as uvicorn sees it. uvicorn closes a connection as soon as a
    response that says Connection: close is sent; one sent before the request's body was read
    says so (advisor/api/limits.py), and closing while that body still arrives would reset the
    connection and could lose the response on the client's side: that close lingers first
    (BoundedH11Protocol._linger). Every other call passes through."""

    def __init__(self, transport: asyncio.Transport, protocol: BoundedH11Protocol) -> None:
        self._transport, self._protocol = transport, protocol

    def close(self) -> None:
        p = self._protocol
        unread = p.conn.our_state is h11.CLOSED and p.conn.their_state is h11.SEND_BODY
        if unread and not (p._lingering or p._lost or self._transport.is_closing()):
            p._linger()
            return
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request deadline, a connection cap with a reserve for the
    health endpoints, a short deadline for connections that send nothing, and a limit on the
    complete request head (class attributes, set per server by `bounded_protocol`)."""

    request_timeout_s: float = 30.0
    idle_timeout_s: float = 5.0
    header_timeout_s: float = 5.0
    body_timeout_s: float = 15.0
    stalled_request_s: float = 1.0
    max_connections: int = 1000
    reserved_connections: int = 20
    max_header_bytes: int = 16 * 1024
    max_connections_per_client: int = 64  # 0: no per-client cap
    # open connections per client address, of this server (a dict per server: bounded_protocol)
    per_client: ClassVar[dict[str, int]] = {}

    _client_address: str | None = None
    _request_timer: asyncio.TimerHandle | None = None
    _idle_since: float | None = None  # when it last had nothing to do (None: a request is on)
    _request_started: float = 0.0  # the first byte of the request under way
    _last_byte_at: float = 0.0
    _operations_only: bool = False  # one of the reserved connections beyond the cap
    _operations_prefix = b""  # its first bytes, until they are known to begin a health request
    _lingering: bool = False
    _lost: bool = False
    _discarded = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._raw = transport  # this protocol's own closes are meant at once
        self.transport = cast(asyncio.Transport, _CycleTransport(transport, self))
        self._idle_since = self.loop.time()
        if self.max_connections_per_client and not self._within_client_cap(transport):
            return
        if len(self.connections) > self.max_connections:
            # counted again without the ones already closing (evicted, timed out)
            beyond = self._open_connections() - self.max_connections
            if beyond > 0 and (self._evict_oldest_idle() or self._evict_stalled()):
                beyond -= 1
            if beyond > self.reserved_connections:
                total = self.max_connections + self.reserved_connections
                detail = f"more than {total} open connections; retry shortly"
                self._close_with(_raw_problem(503, detail))
                return
            self._operations_only = beyond > 0
        checked = self.conn.next_event
        self.conn.next_event = lambda: self._checked(checked())  # type: ignore[method-assign]
        self._arm_request_timer(self.idle_timeout_s)  # nothing sent yet: the short deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._cancel_request_timer()
        address = self._client_address
        if address is not None:
            left = self.per_client.get(address, 1) - 1
            if left:
                self.per_client[address] = left
            else:
                self.per_client.pop(address, None)
        super().connection_lost(exc)

    def _within_client_cap(self, transport: asyncio.Transport) -> bool:
        """Count this connection against its client's address; beyond the cap, the client's own
        idlest connection makes room, else this one is answered 503 and closed (False)."""
        peer = transport.get_extra_info("peername")
        address = client_key(str(peer[0])) if isinstance(peer, tuple) and peer else "?"
        self._client_address = address
        count = self.per_client[address] = self.per_client.get(address, 0) + 1
        if count <= self.max_connections_per_client:
            return True
        if self._evict_oldest_idle(address):
            return True
        detail = (
            f"more than {self.max_connections_per_client} open connections from this client; "
            "retry shortly"
        )
        self._close_with(_raw_problem(503, detail))
        return False

    def data_received(self, data: bytes) -> None:
        if self._lingering:  # the response is sent and the connection is closing: drop the rest
            self._discarded += len(data)
            if self._discarded > LINGER_MAX_BYTES:
                self._close_with(b"")
            return
        self._last_byte_at = self.loop.time()
        if self._idle_since is not None:  # the first byte of a request: its head's deadline
            self._idle_since = None
            self._request_started = self.loop.time()
            self._arm_request_timer(self.header_timeout_s)
        if self._operations_only and not self._begins_operations(data):
            return
        super().data_received(data)

    def _begins_operations(self, data: bytes) -> bool:
        """On a reserved connection: False (and the connection answered 503 and closed) once
        its first bytes cannot begin a health request."""
        if len(self._operations_prefix) >= _OPERATIONS_PREFIX_BYTES:
            return True
        self._operations_prefix += data[: _OPERATIONS_PREFIX_BYTES - len(self._operations_prefix)]
        if _may_be_operations(self._operations_prefix):
            return True
        self._close_with(_raw_problem(503, self._reserve_detail()))
        return False

    def _reserve_detail(self) -> str:
        return (
            f"more than {self.max_connections} open connections; this one may ask for "
            "/healthz and /readyz only; retry shortly"
        )

    def on_response_complete(self) -> None:
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            if not self._lingering:  # (the response's Connection: close may have begun it)
                self._linger()  # answered before the body was read: never read it to its end
            return
        if self._operations_only:  # a reserved connection serves one health request
            self._close_with(b"")
            return
        super().on_response_complete()
        if not self.transport.is_closing():
            self._idle_since = self.loop.time()
            # nothing more may come: uvicorn's keep-alive timer closes it; this one bounds it too
            self._arm_request_timer(self.idle_timeout_s)

    def send_400_response(self, msg: str) -> None:
        self._close_with(_raw_problem(400, msg))

    def _checked(self, event: NextEvent) -> NextEvent:
        """h11's next event, unless it is a request head beyond the limits: then the connection
        is answered and closed, and h11 is told to stop (PAUSED)."""
        if not isinstance(event, h11.Request):
            return event
        # as sent: "METHOD TARGET HTTP/1.1\r\n", each "name: value\r\n", and the blank line
        size = len(event.method) + len(event.target) + 12 + 2
        size += sum(len(name) + len(value) + 4 for name, value in event.headers)
        if size > self.max_header_bytes:
            detail = (
                f"the request line and headers are {size} bytes: at most "
                f"{self.max_header_bytes} (ADVISOR_MAX_HEADER_BYTES)"
            )
            self._close_with(_raw_problem(400, detail))
            return h11.PAUSED
        if self._operations_only and event.target.partition(b"?")[0] not in OPERATIONS_PATHS:
            self._close_with(_raw_problem(503, self._reserve_detail()))
            return h11.PAUSED
        names = {name for name, _ in event.headers}
        if b"content-length" in names and b"transfer-encoding" in names:
            detail = "a request with both Content-Length and Transfer-Encoding is refused"
            self._close_with(_raw_problem(400, detail))
            return h11.PAUSED
        self._arm_request_timer(self.body_timeout_s)  # the head is in: the body's deadline
        return event

    def _open_connections(self) -> int:
        return sum(1 for c in self.connections if not c.transport.is_closing())

    def _evict_oldest_idle(self, address: str | None = None) -> bool:
        """Close the connection that has had nothing to do the longest (sent nothing since it
        opened or since its last response), other than this one (`address`: among that
        client's); False when there is none."""
        idle = [
            c
            for c in self.connections
            if isinstance(c, BoundedH11Protocol)
            and c is not self
            and c._idle_since is not None
            and not c.transport.is_closing()
            and (address is None or c._client_address == address)
        ]
        if not idle:
            return False
        min(idle, key=lambda c: c._idle_since or 0.0)._close_with(b"")
        return True

    def _evict_stalled(self) -> bool:
        """Close the connection whose request (head or body) has been silent the longest, when
        that is more than stalled_request_s: at the cap, a client that sent part of a request
        and then nothing for a second is a slow client, and a new one gets its place. False
        when there is none."""
        now = self.loop.time()
        stalled = [
            c
            for c in self.connections
            if isinstance(c, BoundedH11Protocol)
            and c is not self
            and c._idle_since is None
            and c.conn.their_state in (h11.IDLE, h11.SEND_BODY)
            and not c.transport.is_closing()
            and now - c._last_byte_at > self.stalled_request_s
        ]
        if not stalled:
            return False
        victim = min(stalled, key=lambda c: c._last_byte_at)
        detail = "the request stalled while the server was at its connection cap"
        victim._close_with(_raw_problem(408, detail))
        return True

    def _linger(self) -> None:
        self._cancel_request_timer()
        self._lingering = True
        with contextlib.suppress(OSError, RuntimeError):
            self.transport.write_eof()  # the response is flushed first, then FIN
        self._request_timer = self.loop.call_later(LINGER_S, self._close_with, b"")

    def _arm_request_timer(self, delay: float) -> None:
        """The timer of what is awaited now (the first byte, the head, the body), never beyond
        request_timeout_s after the request's first byte."""
        self._cancel_request_timer()
        now = self.loop.time()
        if self._idle_since is None:  # a request is under way
            delay = min(delay, self._request_started + self.request_timeout_s - now)
        else:
            delay = min(delay, self.request_timeout_s)
        self._request_timer = self.loop.call_later(max(delay, 0.0), self._request_overdue)

    def _cancel_request_timer(self) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _request_overdue(self) -> None:
        self._request_timer = None
        if self.transport.is_closing() or self.conn.their_state is h11.DONE:
            return  # the request arrived in time: the app may take as long as it needs
        if self.conn.their_state is h11.IDLE and not self.conn.trailing_data[0]:
            self._close_with(b"")  # nothing was sent at all: close quietly, like nginx
            return
        detail = (
            f"the request did not arrive in time (its head within {self.header_timeout_s:g} s, "
            f"its body within {self.body_timeout_s:g} s more, all within "
            f"{self.request_timeout_s:g} s)"
        )
        # an answer already begun (to this request, not to the previous one on the connection)
        started = (
            self.conn.their_state is not h11.IDLE
            and self.cycle is not None
            and self.cycle.response_started
        )
        self._close_with(b"" if started else _raw_problem(408, detail))

    def _close_with(self, data: bytes) -> None:
        self._cancel_request_timer()
        if data and not self._lingering:
            self._raw.write(data)
        self._raw.close()


def bounded_protocol(settings: Settings) -> type[BoundedH11Protocol]:
    return type(
        "AdvisorH11Protocol",
        (BoundedH11Protocol,),
        {
            "request_timeout_s": settings.request_timeout_s,
            "idle_timeout_s": settings.idle_timeout_s,
            "header_timeout_s": settings.header_timeout_s,
            "body_timeout_s": settings.body_timeout_s,
            "stalled_request_s": settings.stalled_request_s,
            "max_connections": settings.max_connections,
            "reserved_connections": settings.reserved_connections,
            "max_header_bytes": settings.max_header_bytes,
            "max_connections_per_client": settings.max_connections_per_client,
            "per_client": {},
        },
    )


def uvicorn_config(app: Any, settings: Settings, **options: Any) -> Config:
    """The uvicorn configuration of `advisor serve`: its limits all come from `settings`."""
    return Config(
        app,
        http=bounded_protocol(settings),
        timeout_keep_alive=settings.keep_alive_s,
        h11_max_incomplete_event_size=settings.max_header_bytes,
        timeout_graceful_shutdown=5,
        **options,
    )
