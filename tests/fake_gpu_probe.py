"""`advisor probe` on a fake H200 (tests.fake_nvml + tests.probe_fakes), run as its own process:

    python -m tests.fake_gpu_probe MATMUL_TFLOPS|hang WATCHDOG_S -- PROBE ARGS...

The matmul measurement answers MATMUL_TFLOPS for every dtype, or hangs forever with "hang" (the
watchdog must fire after WATCHDOG_S seconds). A process of its own because the probe CLI leaves
with os._exit once its watchdog fired, which would end a test runner that invoked it in-process.
"""

from __future__ import annotations

import sys
import threading
from functools import partial
from typing import Any

import probes.worker
from advisor.cli import main
from probes import measure
from probes.nvml import Nvml
from probes.stats import Measurement, summarize
from tests.fake_nvml import FakeNvmlLib
from tests.probe_fakes import fake_torch


def install(matmul_tflops: str, watchdog_s: float) -> None:
    def matmul(dev: Any, dtype: str, n: int, repeats: int) -> Measurement:
        if matmul_tflops == "hang":
            threading.Event().wait()  # a kernel that never returns
        value = float(matmul_tflops)
        return summarize(f"matmul_{dtype}", "TFLOP/s", [value, value], "max")

    measure.pick_matmul_n = lambda dev, elem_bytes, preferred: 256  # type: ignore[assignment]
    measure.matmul = matmul  # type: ignore[assignment]
    probes.worker.default_seams = partial(  # type: ignore[assignment]
        probes.worker.Seams,
        nvml=Nvml(FakeNvmlLib()),
        torch_loader=fake_torch,
        environ={},
        watchdog_s=watchdog_s,
    )


if __name__ == "__main__":
    matmul_arg, watchdog_arg, separator, *probe_args = sys.argv[1:]
    assert separator == "--", "usage: MATMUL_TFLOPS|hang WATCHDOG_S -- PROBE ARGS..."
    install(matmul_arg, float(watchdog_arg))
    main(probe_args)
