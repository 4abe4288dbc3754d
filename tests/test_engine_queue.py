"""Sized answers under many clients (advisor/api/engine_queue.py): estimates and sized
recommendations run one at a time on the engine's thread, and each client's requests in flight
to those routes are bounded, refused (429, or 503 past the bound of all) before the body is
read."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import advisor.api.routes.estimate as estimate_route
from advisor.api import create_app, engine_queue, strict_json
from advisor.api.settings import Settings

SIZED = {
    "workload": "fine_tuning",
    "model": "llama-3-8b",
    "tokens": 2e9,
    "instance_type": "p5.48xlarge",
}


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never came to pass")


def _client(app: Any, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://t")


def test_sized_answers_run_one_at_a_time_each_client_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/e.db",  # type: ignore[arg-type]
        engine_max_per_client=2,
        engine_max_queued=3,
    )
    app = create_app(settings)
    engine = app.state.advisor.engine
    release = threading.Event()
    lock = threading.Lock()
    running = most = 0
    real = estimate_route.estimate

    def held(*args: Any, **kwargs: Any) -> Any:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            release.wait(60)
            return real(*args, **kwargs)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(estimate_route, "estimate", held)
    holds: list[str] = []  # refusals before the body is read are held before they are sent

    async def hold() -> None:
        holds.append(f"{engine.per_client}")

    monkeypatch.setattr(engine_queue, "_hold_refusal", hold)

    async def run() -> dict[str, Any]:
        async with (
            _client(app, "10.0.0.1") as one,
            _client(app, "10.0.0.2") as two,
            _client(app, "2001:db8::1") as three,
        ):
            first = [asyncio.create_task(one.post("/v1/estimates", json=SIZED)) for _ in range(2)]
            await _until(lambda: engine.per_client.get("10.0.0.1") == 2)
            # at its bound, a client is refused before its body is read: this one is no JSON
            over = await one.post("/v1/estimates", content=b"{not json")
            other = asyncio.create_task(two.post("/v1/estimates", json=SIZED))
            await _until(lambda: engine.queued == 3)
            full = await three.post("/v1/estimates", json=SIZED)
            release.set()
            done = await asyncio.gather(*first, other)
            unknown = await one.post("/v1/estimates", json={**SIZED, "instance_type": "nope.1"})
            after = await three.post("/v1/estimates", json=SIZED)
            return {"over": over, "full": full, "done": done, "unknown": unknown, "after": after}

    answers = asyncio.run(run())
    over, full = answers["over"], answers["full"]
    assert over.status_code == 429, over.text
    assert over.headers["Retry-After"] == "1" and "ENGINE_MAX_PER_CLIENT" in over.json()["detail"]
    assert full.status_code == 503, full.text
    assert full.headers["Retry-After"] == "1" and "ENGINE_MAX_QUEUED" in full.json()["detail"]
    assert holds == ["{'10.0.0.1': 2}", "{'10.0.0.1': 2, '10.0.0.2': 1}"]
    assert [r.status_code for r in answers["done"]] == [200, 200, 200]
    assert answers["unknown"].status_code == 422 and answers["after"].status_code == 200
    assert most == 1  # one estimate at a time, on the engine's thread
    assert engine.per_client == {}  # every turn given back, an error's too
    app.state.advisor.store.close()


def test_only_sized_recommendations_count_against_a_client(tmp_path: Path) -> None:
    """A sized recommendation counts against its client until answered; an unsized one never
    does, though a long list runs on the engine's thread too (tens of ms at most): a client
    asking many at once is not refused."""
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/e.db",  # type: ignore[arg-type]
        engine_max_per_client=1,
    )
    app = create_app(settings)
    sized = {"workload": "fine_tuning", "model": "llama-3-8b", "tokens": 2e9, "limit": 3}
    long_lists = [{"workload": "fine_tuning", "memory_gb": 10 + i, "limit": 50} for i in range(6)]

    async def run() -> tuple[list[httpx.Response], list[httpx.Response]]:
        async with _client(app, "10.0.0.9") as client:
            one_by_one = [await client.post("/v1/recommendations", json=sized) for _ in range(2)]
            together = await asyncio.gather(
                *(client.post("/v1/recommendations", json=body) for body in long_lists)
            )
            return one_by_one, list(together)

    one_by_one, together = asyncio.run(run())
    assert [r.status_code for r in one_by_one] == [200, 200]  # each gave its turn back
    assert [r.status_code for r in together] == [200] * len(long_lists)
    assert app.state.advisor.engine.per_client == {}
    app.state.advisor.store.close()


def _three_per_client(tmp_path: Path) -> Any:
    """An app whose clients may each have three sized requests waiting or running."""
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/e.db",  # type: ignore[arg-type]
        engine_max_per_client=3,
    )
    return create_app(settings)


def _three_clients_post(
    app: Any,
    post: Callable[[httpx.AsyncClient, str, int], Awaitable[httpx.Response]],
    held: Callable[[int], bool],
    release: threading.Event,
) -> list[httpx.Response]:
    """Clients 1, 2 and 3 (an address each) post 3, 3 and 1 requests in that order, each once
    the ones before it are held (`held(posted)`); then `release` lets the held work go."""

    async def run() -> list[httpx.Response]:
        async with (
            _client(app, "10.0.0.1") as one,
            _client(app, "10.0.0.2") as two,
            _client(app, "10.0.0.3") as three,
        ):
            tasks = []
            for client, http, count in (("1", one, 3), ("2", two, 3), ("3", three, 1)):
                for n in range(1, count + 1):
                    tasks.append(asyncio.create_task(post(http, client, n)))
                    await _until(lambda: held(len(tasks)))
            release.set()
            return list(await asyncio.gather(*tasks))

    return asyncio.run(run())


def test_clients_take_turns_on_the_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread goes to the client that has waited longest for a turn: a newcomer behind two
    clients with three estimates each is answered third, not seventh (first come, first
    served), and a client whose turn ends goes behind every other waiting client."""
    app = _three_per_client(tmp_path)
    engine = app.state.advisor.engine
    release = threading.Event()
    order: list[str] = []
    real = estimate_route.estimate

    def held(catalog: Any, request: Any, *args: Any) -> Any:
        release.wait(60)
        order.append(f"{request.tokens:.0f}")
        return real(catalog, request, *args)

    monkeypatch.setattr(estimate_route, "estimate", held)

    def body(client: str, n: int) -> dict[str, Any]:
        return {**SIZED, "tokens": float(f"{client}{n}")}  # 11: client 1's first

    answers = _three_clients_post(
        app,
        lambda http, client, n: http.post("/v1/estimates", json=body(client, n)),
        lambda posted: engine.queued == posted,
        release,
    )
    assert [r.status_code for r in answers] == [200] * 7
    assert order == ["11", "21", "31", "12", "22", "13", "23"]
    assert engine.per_client == {} and engine.waiting == {} and not engine.busy
    app.state.advisor.store.close()


def test_clients_take_turns_on_the_thread_that_parses_large_bodies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bodies over INLINE_MAX_BYTES are parsed on one thread, by turns as on the engine's: a
    newcomer's body behind two clients' three each is parsed third, not seventh."""
    app = _three_per_client(tmp_path)
    parsing = app.state.advisor.parsing
    release = threading.Event()
    order: list[str] = []
    real = strict_json._parse_and_check

    def held(body: bytes, model: Any) -> Any:
        release.wait(60)
        parsed = real(body, model)
        order.append(f"{parsed.tokens:.0f}")
        return parsed

    monkeypatch.setattr(strict_json, "_parse_and_check", held)
    pad = " " * strict_json.INLINE_MAX_BYTES

    def body(client: str, n: int) -> bytes:
        return json.dumps({**SIZED, "tokens": float(f"{client}{n}")}).encode() + pad.encode()

    def held_or_waiting() -> int:
        return parsing.busy + sum(len(q) for q in parsing.waiting.values())

    answers = _three_clients_post(
        app,
        lambda http, client, n: http.post(
            "/v1/estimates", content=body(client, n), headers={"content-type": "application/json"}
        ),
        lambda posted: held_or_waiting() == posted,
        release,
    )
    assert [r.status_code for r in answers] == [200] * 7
    assert order == ["11", "21", "31", "12", "22", "13", "23"]
    assert parsing.waiting == {} and not parsing.busy
    app.state.advisor.store.close()


def test_a_client_gone_while_waiting_gives_up_its_place(tmp_path: Path) -> None:
    """A request cancelled while it waits leaves the queue; one cancelled just after its turn
    came hands the turn on: the thread is never left held by nobody."""
    settings = Settings(database_url=f"sqlite:///{tmp_path}/e.db")  # type: ignore[arg-type]
    app = create_app(settings)
    engine = app.state.advisor.engine
    ran: list[str] = []

    async def run() -> list[BaseException | None]:
        await engine._turn("x")  # the thread taken by hand, so that the others wait
        waiting = [
            asyncio.create_task(engine.run(c, lambda c=c: ran.append(c))) for c in ("a", "b", "c")
        ]
        await _until(lambda: len(engine.waiting) == 3)
        waiting[0].cancel()  # gone while waiting
        await _until(lambda: "a" not in engine.waiting)
        engine._hand_on("x")  # b's turn is handed to it...
        waiting[1].cancel()  # ...and b is gone before it ran: c gets the thread
        return await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), 30)

    results = asyncio.run(run())
    assert [type(r).__name__ for r in results] == ["CancelledError", "CancelledError", "NoneType"]
    assert ran == ["c"]
    assert engine.per_client == {} and engine.waiting == {} and not engine.busy
    app.state.advisor.store.close()
