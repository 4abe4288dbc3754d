"""One probe per GPU at a time: an advisory file lock keyed by the GPU's UUID (or index).

A second probe started on the same GPU waits up to `wait_s` seconds, saying so, then refuses
with LockBusy naming the holder. The kernel releases the lock if the holder dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from probes.errors import LockBusy


def lock_path(gpu_key: str, directory: str | None = None) -> Path:
    base = Path(directory or os.environ.get("ADVISOR_PROBE_LOCK_DIR") or tempfile.gettempdir())
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", gpu_key)
    return base / f"advisor-probe-{safe}.lock"


@contextlib.contextmanager
def gpu_lock(
    gpu_key: str,
    *,
    wait_s: float = 60.0,
    directory: str | None = None,
    on_wait: Callable[[str], None] | None = None,
    poll_s: float = 0.2,
) -> Iterator[Path]:
    path = lock_path(gpu_key, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        deadline = time.monotonic() + wait_s
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(path)
                if time.monotonic() >= deadline:
                    raise LockBusy(
                        f"another probe ({holder}) is measuring GPU {gpu_key}; refusing after "
                        f"{wait_s:g} s so that the two do not measure each other"
                    ) from None
                if not told and on_wait is not None:
                    on_wait(
                        f"GPU {gpu_key} is being probed by {holder}; waiting up to {wait_s:g} s"
                    )
                    told = True
                time.sleep(poll_s)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}".encode())
        yield path
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _holder(path: Path) -> str:
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    return text or "an unknown process"
