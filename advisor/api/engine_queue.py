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
together `max_queued` (beyond, 503), each with Retry-After. The clients take turns: the thread
goes to the client that has waited longest for one, so a newcomer waits at most one answer of
each other client, not every answer queued before it (first come, first served put it behind
40 answers of 20 clients with two each)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
import anyio.to_thread
from anyio import CapacityLimiter, Event
from fastapi import HTTPException, Request

from advisor.api.server import client_key

T = TypeVar("T")

# What a refused client is told to wait, seconds: about what one queued answer costs.
RETRY_AFTER_S = 1
# How long a refusal before the body is read is held before it is sent, seconds: a client that
# retries without pause then costs the event loop at most one refusal a second per connection
# (one client on 32 connections retrying at once held /healthz at 127-180 ms; the connection
# cap bounds its connections). A held refusal costs nothing while it waits.
REFUSAL_HOLD_S = 1.0


@dataclass(kw_only=True)
class Turns:
    """One worker thread that clients take by turns: the next turn goes to the oldest request
    of the client that has waited longest for one, and a client whose turn ends goes behind
    every other waiting client. The engine's thread (EngineQueue) and the thread that parses
    large bodies (advisor/api/strict_json.py) are each one."""

    limiter: CapacityLimiter = field(default_factory=lambda: CapacityLimiter(1))
    # client -> its requests waiting for the thread, oldest first; the clients in the order
    # their turn comes (a dict keeps its insertion order)
    waiting: dict[str, deque[Event]] = field(default_factory=dict)
    busy: bool = False  # the thread is running a request's work or has been handed to one

    async def on_thread(self, client: str, work: Callable[[], T]) -> T:
        """`work()` on the thread at `client`'s turn."""
        await self._turn(client)
        try:
            return await anyio.to_thread.run_sync(work, limiter=self.limiter)
        finally:
            self._hand_on(client)

    async def _turn(self, client: str) -> None:
        """Return when the thread is this request's: at once when it is free and nobody waits,
        else when handed on (_hand_on)."""
        if not self.busy and not self.waiting:
            self.busy = True
            return
        turn = Event()
        self.waiting.setdefault(client, deque()).append(turn)
        try:
            await turn.wait()
        except BaseException:  # cancelled while waiting: the client went away
            if turn.is_set():  # the turn had been handed to it: hand it on
                self._hand_on(client)
            else:
                queue = self.waiting[client]
                queue.remove(turn)
                if not queue:
                    del self.waiting[client]
            raise

    def _hand_on(self, last: str) -> None:
        """Give the thread to the oldest request of the client that has waited longest for a
        turn; `last` (whose turn ends) goes behind every other waiting client."""
        if not self.waiting:
            self.busy = False
            return
        client = next(iter(self.waiting))
        if client == last and len(self.waiting) > 1:
            self.waiting[last] = self.waiting.pop(last)  # to the back
            client = next(iter(self.waiting))
        queue = self.waiting.pop(client)
        turn = queue.popleft()
        if queue:
            self.waiting[client] = queue  # its next request waits for its next turn
        turn.set()


@dataclass(kw_only=True)
class EngineQueue(Turns):
    max_per_client: int  # 0: no per-client bound
    max_queued: int
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

    async def admit_before_body(self, client: str) -> None:
        """admit, for a request whose body is not read yet; a refusal is sent after
        REFUSAL_HOLD_S."""
        try:
            self.admit(client)
        except HTTPException:
            await _hold_refusal()
            raise

    async def run(self, client: str, work: Callable[[], T], counted: bool = True) -> T:
        """`work()` on the engine's thread at `client`'s turn, counted against it (admit) until
        done; `counted` False: an unsized answer with a long list (tens of ms at most) takes
        its client's turn without counting against its bound."""
        if not counted:
            return await self.on_thread(client, work)
        self.admit(client)
        self.per_client[client] = self.per_client.get(client, 0) + 1
        try:
            return await self.on_thread(client, work)
        finally:
            left = self.per_client[client] - 1
            if left:
                self.per_client[client] = left
            else:
                del self.per_client[client]


async def _hold_refusal() -> None:
    await anyio.sleep(REFUSAL_HOLD_S)


def _busy(status: int, detail: str) -> HTTPException:
    return HTTPException(status, detail, headers={"Retry-After": str(RETRY_AFTER_S)})


def client_of(request: Request) -> str:
    """The client a request counts against: its address as the connection cap counts it."""
    return client_key(request.client.host) if request.client else "?"
