"""`--burn DURATION`: bf16 matmuls held on a GPU for minutes while NVML is sampled, in the manner
of DCGM's targeted stress. Reports the sustained rate per chunk of about a second, how the last
quarter compares with the first (a GPU that heats up and slows down), and what NVML saw: clocks,
power, temperature and clock-limit reasons.

One host synchronisation per chunk (to read its events), never inside a chunk.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from probes.device import TorchDevice
from probes.nvml import LoadSampler, Nvml
from probes.stats import Measurement, summarize

CHUNK_S = 1.0


def burn(
    dev: TorchDevice, seconds: float, nvml: Nvml | None, handle: Any, n: int = 8192
) -> Measurement:
    torch = dev.torch
    with dev.oom_guard("burn_bf16"):
        a = torch.randn(n, n, device=dev.device, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev.device, dtype=torch.bfloat16)
        c = torch.empty_like(a)

        def mm() -> object:
            return torch.matmul(a, b, out=c)

        mm()
        per_chunk = max(1, round(CHUNK_S / max(dev.time_once(mm), 1e-6)))
        sampler = LoadSampler(nvml, handle, period_s=0.5) if nvml and handle is not None else None
        rates: list[float] = []
        started = time.perf_counter()
        if sampler is not None:
            sampler.__enter__()
        try:
            while time.perf_counter() - started < seconds:
                seconds_each = dev.time(mm, inner=per_chunk, repeats=1, warmup=0)[0]
                rates.append(2.0 * n**3 / seconds_each / 1e12)
        finally:
            if sampler is not None:
                sampler.__exit__()
    quarter = max(1, len(rates) // 4)
    first = statistics.median(rates[:quarter])
    last = statistics.median(rates[-quarter:])
    seen = sampler.result() if sampler is not None else None
    return summarize(
        "burn_bf16",
        "TFLOP/s",
        rates,
        "median",
        n=n,
        seconds=time.perf_counter() - started,
        matmuls_per_chunk=per_chunk,
        first_quarter=first,
        last_quarter=last,
        drift=last / first if first else None,
        temperature_max_c=seen.temperature_max_c if seen else None,
        power_draw_max_w=seen.power_draw_max_w if seen else None,
        clock_sm_min_mhz=seen.clock_sm_min_mhz if seen else None,
        throttle_reasons=seen.throttle_reasons if seen else None,
        nvml_samples=seen.samples if seen else 0,
    )
