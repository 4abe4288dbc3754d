"""Runs one measurement with a time limit, and turns its failure into data.

The measurement runs in a daemon thread; if it has not finished in time the probe stops waiting,
records a WatchdogTimeout and does not start further device work (a hung device would hang it too).
A hung thread cannot be killed from Python: the CLI exits the process once the report is written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from probes.errors import WatchdogTimeout

T = TypeVar("T")


def run_with_watchdog(fn: Callable[[], T], timeout_s: float, name: str) -> T:
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=target, name=f"probe-{name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise WatchdogTimeout(f"{name} did not finish within {timeout_s:g} s (watchdog)")
    if error:
        raise error[0]
    return result[0]
