"""The cyclic garbage collector: paused where a process builds many objects at once, and kept
off what lives as long as the process.

A collection walks every live container object. Decoding thousands of report bodies makes
millions of short-lived dicts and lists, and each collection meanwhile walks them all (reading
10,000 stored reports was a third slower with it). A command's imports and its catalog live as
long as the process and hold no garbage, yet every full collection walks them again: `advisor
recommend` spent a fifth of its CPU there. `gc.freeze()` moves every object tracked so far into
a permanent generation that later collections skip (CPython's gc module documentation), so what
is frozen after the imports and the catalog is never walked again.

The service does the same once its lifespan has built everything (freeze_kept): unfrozen, a full
collection took about 80 ms there, on the event loop, and every request in flight waited for it
(benchmarks/results/service-2026-12-05d.txt: /healthz beside the engine-thread load, p99 58 and
32 ms before, 2.6 and 2.5 ms after).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_holders = 0
_was_enabled = False
_freezing = False  # long_lived has frozen what this process keeps


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No collection inside: reference counting frees acyclic garbage meanwhile, and cyclic
    garbage made elsewhere waits until the last concurrent holder leaves, when collection
    resumes as before (a process-wide switch, counted)."""
    global _holders, _was_enabled  # noqa: PLW0603 - one process-wide switch, counted
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """Build what lives as long as the process (modules, the catalog) with collection paused,
    then freeze everything tracked so far: later collections skip it."""
    global _freezing  # noqa: PLW0603 - a process-wide fact: this process freezes what it keeps
    with gc_paused():
        yield
        gc.freeze()
        _freezing = True


def freeze_kept() -> None:
    """Where this process freezes what it keeps (long_lived ran: a console-script command),
    collect the garbage made since the last freeze and freeze the rest; elsewhere (the CLI or
    the app inside another program, tests) nothing. For what is built after the command's own
    start: the service's store, its server's protocol modules, a reloaded catalog. Unfrozen,
    each full collection of the service walks them, holding the event loop meanwhile. Frozen
    objects are still freed when nothing refers to them (a replaced catalog is acyclic:
    reference counting frees it)."""
    if _freezing:
        gc.collect()  # only what was made since the last freeze: the frozen are skipped
        gc.freeze()
