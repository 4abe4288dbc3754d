"""The engine's thread: sized recommendations and estimates run there one at a time, beside the
event loop, and no client holds more than its share of it.

A sized answer is a search over cluster sizes and deployments, tens of ms to a second of CPU (a
served model under a trace of 14,000 requests: 0.3 s). Run in Starlette's pool of 40 threads,
20 anonymous clients posting such estimates held the interpreter from the event loop: /healthz
took 4-6 s (a liveness probe gives up after 1) and another client's sized recommendation up to
37 s (benchmarks/attack_findings.py sized_floods, recorded in
benchmarks/results/attack-findings-2026-12-04.txt). Here one thread runs them (the engine is
pure Python: threads cannot run it in parallel, and many contending for the interpreter cost
more than they overlap); each client may have `max_per_client` of them waiting or running (an
IPv4 address or an IPv6 /64, as the connection cap counts it: beyond, 429) and all clients
together `max_queued` (beyond, 503), each with Retry-After."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio.to_thread
from anyio import CapacityLimiter
from fastapi import HTTPException, Request

from advisor.api.server import client_key

T = TypeVar("T")

# What a refused client is told to wait, seconds: about what one queued answer costs.
RETRY_AFTER_S = 1


@dataclass
class EngineQueue:
    max_per_client: int  # 0: no per-client bound
    max_queued: int
    limiter: CapacityLimiter = field(default_factory=lambda: CapacityLimiter(1))
    # client -> its sized requests waiting for or running on the engine's thread
    per_client: dict[str, int] = field(default_factory=dict)

    @property
    def queued(self) -> int:
        return sum(self.per_client.values())

    def admit(self, client: str) -> None:
        """429 or 503 (with Retry-After) when `client`, or everyone, has as many sized requests
        waiting for or running on the engine as allowed. The routes ask before they read a body
        (advisor/api/strict_json.py EngineRoute), so that a client at its bound costs no read
        or parse, and again as the work is queued (run)."""
        held = self.per_client.get(client, 0)
        if self.max_per_client and held >= self.max_per_client:
            raise _busy(
                429,
                f"this client has {held} sized requests waiting for or running on the engine, "
                "the most one client may (ADVISOR_ENGINE_MAX_PER_CLIENT): send the next when "
                "one is answered",
            )
        if self.queued >= self.max_queued:
            raise _busy(
                503,
                f"{self.max_queued} sized requests are waiting for or running on the engine, "
                "the most it queues (ADVISOR_ENGINE_MAX_QUEUED)",
            )

    async def run(self, client: str | None, work: Callable[[], T]) -> T:
        """`work()` on the engine's thread once the work queued before it is done, counted
        against `client` (admit) until then; None: not counted (an unsized answer with a long
        list, tens of ms at most)."""
        if client is None:
            return await anyio.to_thread.run_sync(work, limiter=self.limiter)
        self.admit(client)
        self.per_client[client] = self.per_client.get(client, 0) + 1
        try:
            return await anyio.to_thread.run_sync(work, limiter=self.limiter)
        finally:
            left = self.per_client[client] - 1
            if left:
                self.per_client[client] = left
            else:
                del self.per_client[client]


def _busy(status: int, detail: str) -> HTTPException:
    return HTTPException(status, detail, headers={"Retry-After": str(RETRY_AFTER_S)})


def client_of(request: Request) -> str:
    """The client a request counts against: its address as the connection cap counts it."""
    return client_key(request.client.host) if request.client else "?"
