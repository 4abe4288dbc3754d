"""One call made from several threads at once, for the tests of what simultaneous requests do."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def simultaneously(call: Callable[[], T], times: int = 8, timeout_s: float = 30) -> list[T]:
    """Start `times` threads that each make `call`, wait for them; their results, in any order."""
    results: list[T] = []
    lock = threading.Lock()

    def run() -> None:
        result = call()
        with lock:
            results.append(result)

    threads = [threading.Thread(target=run) for _ in range(times)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    return results
