"""CPU figures without torch: what the probe still measures on a machine where torch is missing.

The names, units and conventions match the torch CPU path (probes.measure on a CPU TorchDevice),
so a report reads the same whichever produced it:
- cpu_memcpy: a memoryview slice assignment, which CPython performs as one memcpy; GB/s counts
  bytes read + bytes written (2 x buffer), as measure.d2d does;
- cpu_matmul_fp32: numpy's float32 matmul (BLAS) when numpy is importable. Without numpy it is
  reported as unsupported (a skip with the reason): a matmul in pure Python runs about a million
  times below the hardware and would only mislead.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable

from probes.stats import Measurement, summarize

GB = 1e9
NO_MATMUL = "cpu_matmul_fp32 needs torch or numpy, and neither is installed"


def _timed(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()  # first touch of the pages and library set-up stay out of the timed samples
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return seconds


def memcpy(nbytes: int, repeats: int) -> Measurement:
    src = bytearray(nbytes)
    dst = bytearray(nbytes)
    view = memoryview(dst)

    def copy() -> None:
        view[:] = src

    seconds = _timed(copy, repeats)
    rates = [2 * nbytes / s / GB for s in seconds]
    return summarize(
        "cpu_memcpy",
        "GB/s",
        rates,
        "max",
        bytes=nbytes,
        repeats=repeats,
        method="memoryview slice copy (torch not installed)",
        convention="bytes read + bytes written (2 x buffer) per second",
    )


def matmul(n: int, repeats: int) -> Measurement:
    """float32 n x n matmul through numpy; NotImplementedError (a skip) without numpy."""
    try:
        np = importlib.import_module("numpy")
    except ImportError:
        raise NotImplementedError(NO_MATMUL) from None
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    seconds = _timed(lambda: np.matmul(a, b, out=c), repeats)
    rates = [2.0 * n**3 / s / 1e12 for s in seconds]
    return summarize(
        "cpu_matmul_fp32",
        "TFLOP/s",
        rates,
        "max",
        n=n,
        repeats=repeats,
        dtype="float32",
        op="numpy.matmul (torch not installed)",
    )
