"""Ports for tests, without the race of a port merely found free (another process may take it
between the check and the use)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refused_port() -> Iterator[int]:
    """A port bound but never listening, held for the block: every connection to it is refused,
    and no other process can start listening on it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
