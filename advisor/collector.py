"""The cyclic garbage collector: paused where a process builds many objects at once, and kept
off what lives as long as the process.

A collection walks every live container object. Decoding thousands of report bodies makes
millions of short-lived dicts and lists, and each collection meanwhile walks them all (reading
10,000 stored reports was a third slower with it). A command's imports and its catalog live as
long as the process and hold no garbage, yet every full collection walks them again: `advisor
recommend` spent a fifth of its CPU there. `gc.freeze()` moves every object tracked so far into
a permanent generation that later collections skip (CPython's gc module documentation), so what
is frozen after the imports and the catalog is never walked again.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_holders = 0
_was_enabled = False


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
    with gc_paused():
        yield
        gc.freeze()
