"""uvicorn under the service's limits (advisor serve): a bounded number of connections, a
deadline for each request to arrive, idle keep-alive closed, and the HTTP layer's own errors as
application/problem+json like every other error.

uvicorn's h11 protocol arms no timer on a fresh connection nor while a request is half-sent, so
connections that never finish a request stay open until the client leaves (20,000 of them used
up the file descriptors); its own 400 and 503 bodies are text/plain. The subclass below adds the
request deadline and the connection cap, and words those errors as Problems.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any

import h11
from uvicorn import Config
from uvicorn.protocols.http.h11_impl import H11Protocol

from advisor.api.problems import problem_json
from advisor.api.settings import Settings


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


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request deadline and a connection cap (class attributes,
    set per server by `bounded_protocol`)."""

    request_timeout_s: float = 30.0
    max_connections: int = 1000

    _request_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            detail = f"more than {self.max_connections} open connections; retry shortly"
            self._close_with(_raw_problem(503, detail))
            return
        self._arm_request_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_request_timer()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_request_timer()  # the next request on this connection gets its own deadline

    def send_400_response(self, msg: str) -> None:
        self._close_with(_raw_problem(400, msg))

    def _arm_request_timer(self) -> None:
        self._cancel_request_timer()
        self._request_timer = self.loop.call_later(self.request_timeout_s, self._request_overdue)

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
        detail = f"the request did not arrive within {self.request_timeout_s:g} s"
        started = self.cycle is not None and self.cycle.response_started
        self._close_with(b"" if started else _raw_problem(408, detail))

    def _close_with(self, data: bytes) -> None:
        self._cancel_request_timer()
        if data:
            self.transport.write(data)
        self.transport.close()


def bounded_protocol(settings: Settings) -> type[BoundedH11Protocol]:
    return type(
        "AdvisorH11Protocol",
        (BoundedH11Protocol,),
        {
            "request_timeout_s": settings.request_timeout_s,
            "max_connections": settings.max_connections,
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
