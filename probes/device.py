"""The CUDA/torch adapter: one seam for allocation, timing and synchronisation.

Device work is timed with CUDA events recorded for every sample first and read after one final
synchronisation, so no host sync sits inside a timed loop. The CPU variant times the same
callables with the host clock, so the no-GPU report uses the same harness.
Foreign errors (torch's out-of-memory) are translated into probes.errors here.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from probes.errors import OutOfDeviceMemory

TARGET_SAMPLE_S = 0.025  # one timed sample should last well past launch and timer overheads


class TorchDevice:
    def __init__(self, torch: Any, index: int | None) -> None:
        self.torch = torch
        self.is_cuda = index is not None
        self.index = index
        self.device = torch.device(f"cuda:{index}" if self.is_cuda else "cpu")

    # -- memory -----------------------------------------------------------------------------
    def free_bytes(self) -> int:
        if self.is_cuda:
            free, _ = self.torch.cuda.mem_get_info(self.device)
            return int(free)
        import os

        pages = os.sysconf("SC_AVPHYS_PAGES") if hasattr(os, "sysconf") else 0
        return int(pages * os.sysconf("SC_PAGE_SIZE")) if pages else 8 << 30

    def release(self) -> None:
        if self.is_cuda:
            self.torch.cuda.synchronize(self.device)
            self.torch.cuda.empty_cache()

    @contextlib.contextmanager
    def oom_guard(self, what: str) -> Iterator[None]:
        """Translate torch's out-of-memory into OutOfDeviceMemory, and free what was cached."""
        oom_types: tuple[type[BaseException], ...] = tuple(
            t
            for t in (
                getattr(self.torch, "OutOfMemoryError", None),
                getattr(getattr(self.torch, "cuda", None), "OutOfMemoryError", None),
            )
            if isinstance(t, type) and issubclass(t, BaseException)
        )
        try:
            yield
        except oom_types as exc:
            self._after_oom()
            raise OutOfDeviceMemory(f"out of device memory for {what}: {exc}") from None
        except RuntimeError as exc:
            text = str(exc).lower()
            if "out of memory" not in text and "can't allocate memory" not in text:
                raise
            self._after_oom()
            raise OutOfDeviceMemory(f"out of memory for {what}: {exc}") from None

    def _after_oom(self) -> None:
        if self.is_cuda:
            with contextlib.suppress(Exception):
                self.torch.cuda.empty_cache()

    # -- timing -----------------------------------------------------------------------------
    def sync(self) -> None:
        if self.is_cuda:
            self.torch.cuda.synchronize(self.device)

    def event(self) -> Any:
        return self.torch.cuda.Event(enable_timing=True)

    def stream(self) -> Any:
        return self.torch.cuda.Stream(device=self.device)

    def time_once(self, fn: Callable[[], object]) -> float:
        """Seconds for one call, synchronised: for calibration, never inside a timed loop."""
        self.sync()
        if not self.is_cuda:
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        start, end = self.event(), self.event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1000.0

    def calibrate_inner(self, fn: Callable[[], object], *, max_inner: int = 500) -> int:
        """How many calls make one sample of about TARGET_SAMPLE_S."""
        once = max(self.time_once(fn), 1e-7)
        return max(1, min(max_inner, math.ceil(TARGET_SAMPLE_S / once)))

    def time(
        self, fn: Callable[[], object], *, inner: int, repeats: int, warmup: int = 2
    ) -> list[float]:
        """Seconds per call of `fn`, one value per sample of `inner` calls."""
        for _ in range(warmup):
            fn()
        if not self.is_cuda:
            out = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(inner):
                    fn()
                out.append((time.perf_counter() - t0) / inner)
            return out
        events = []
        self.sync()
        for _ in range(repeats):
            start, end = self.event(), self.event()
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            events.append((start, end))
        self.sync()  # the only host synchronisation: after every sample was queued
        return [float(s.elapsed_time(e)) / 1000.0 / inner for s, e in events]
